"""One federated training round of the FedRec recommender from rdz98/FedRecAttack (`FedRec/server.py`
`FedRecServer.train_`, `FedRec/client.py` `FedRecClient`, `eval.py`, all stored revision 94f4a5e). The server loops
over the sampled client ids in Python; each client copies the item embeddings it needs
(`items_emb[self.train_all].clone().detach().requires_grad_(True)`), computes a BPR loss, calls `loss.backward()`,
updates its private user embedding through `.weight.data.add_(grad, alpha=-args.lr)` and returns
`loss.cpu().item()`; the server clips each client's item-gradient rows with a boolean mask
(`items_emb_grad[too_large] /= ...`), scatters them with `batch_items_emb_grad[items] += ...` under `torch.no_grad()`,
appends the losses to a list and updates its item embeddings through `.data.add_`.
`FedRecClient.__init__` draws negative items with `np.random.randint` in a `while neg_item in train_ind` loop and
builds index tensors through `torch.Tensor(list).long()` and a dict comprehension. Adaptations shared by both
programs of this repository: `from parse import args` (the argparse namespace) is a module-level `SimpleNamespace`
with the three fields the code reads (`lr`, `grad_limit`, `device='cpu'`; values chosen by the collector);
`eval.py`, `FedRec/client.py` and `FedRec/server.py` become one module; the attack code (`Attack/`) and `main.py`,
`data.py` (dataset files) were not used, and users are made in the factory by the collector's helper
`_make_federation` with the original constructors (8 random items per user, 6 train and 2 test; 120 items, dimension
8, 12 users).
The round changes the server and the clients, so each call gets its own server and clients built in the factory
(deep copies of one federation); the called method is the original `FedRecServer.train_`, passed unbound with the
server as its first argument. NumPy's global generator (negative sampling in the constructors) is seeded in the
factory only; the round draws nothing."""
import copy
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn

# ---- parse.py (stand-in: the repository's argparse namespace; only the fields the code reads)
args = SimpleNamespace(lr=0.05, grad_limit=1.0, device='cpu')


# ---- eval.py
def evaluate_recall(rating, ground_truth, top_k):
    _, rating_k = torch.topk(rating, top_k)
    rating_k = rating_k.cpu().tolist()

    hit = 0
    for i, v in enumerate(rating_k):
        if v in ground_truth:
            hit += 1

    recall = hit / len(ground_truth)
    return recall


def evaluate_ndcg(rating, ground_truth, top_k):
    _, rating_k = torch.topk(rating, top_k)
    rating_k = rating_k.cpu().tolist()
    dcg, idcg = 0., 0.

    for i, v in enumerate(rating_k):
        if i < len(ground_truth):
            idcg += (1 / np.log2(2 + i))
        if v in ground_truth:
            dcg += (1 / np.log2(2 + i))

    ndcg = dcg / idcg
    return ndcg


# ---- FedRec/client.py
class FedRecClient(nn.Module):
    def __init__(self, train_ind, test_ind, target_ind, m_item, dim):
        super().__init__()
        self._train_ = train_ind
        self._test_ = test_ind
        self._target_ = []
        for i in target_ind:
            if i in train_ind or i in test_ind:
                continue
            self._target_.append(i)
        self.m_item = m_item

        self._train = torch.Tensor(train_ind).long()
        self._test = torch.Tensor(test_ind).long()

        train_neg_ind = []
        for _ in train_ind:
            neg_item = np.random.randint(m_item)
            while neg_item in train_ind:
                neg_item = np.random.randint(m_item)
            train_neg_ind.append(neg_item)

        train_all = train_ind + train_neg_ind
        train_all.sort()
        self.train_all = torch.Tensor(train_all).long()

        d = {idx: train_all_idx for train_all_idx, idx in enumerate(train_all)}
        self._train_pos = torch.Tensor([d[i] for i in train_ind]).long()
        self._train_neg = torch.Tensor([d[i] for i in train_neg_ind]).long()

        self.dim = dim
        self.items_emb_grad = None
        self._user_emb = nn.Embedding(1, dim)
        nn.init.normal_(self._user_emb.weight, std=0.01)

    def forward(self, items_emb):
        scores = torch.sum(self._user_emb.weight * items_emb, dim=-1)
        return scores

    def train_(self, items_emb, reg=0.1):
        items_emb = items_emb[self.train_all].clone().detach().requires_grad_(True)  # BREAK
        self._user_emb.zero_grad()

        pos_items_emb = items_emb[self._train_pos]
        neg_items_emb = items_emb[self._train_neg]
        pos_scores = self.forward(pos_items_emb)
        neg_scores = self.forward(neg_items_emb)
        loss = -(pos_scores - neg_scores).sigmoid().log().sum() + \
            0.5 * (self._user_emb.weight.norm(2).pow(2) + items_emb.norm(2).pow(2)) * reg
        loss.backward()  # BREAK

        user_emb_grad = self._user_emb.weight.grad
        self._user_emb.weight.data.add_(user_emb_grad, alpha=-args.lr)
        self.items_emb_grad = items_emb.grad

        return self.train_all, self.items_emb_grad, loss.cpu().item()  # BREAK

    def eval_(self, items_emb):
        rating = self.forward(items_emb)

        items = [self._test_[0], ]
        for _ in range(99):
            neg_item = np.random.randint(self.m_item)
            while neg_item in self._train_ or neg_item in items:
                neg_item = np.random.randint(self.m_item)
            items.append(neg_item)
        items = torch.Tensor(items).long().to(args.device)
        sampled_hr_at_10 = evaluate_recall(rating[items], [0], 10)
        test_result = np.array([sampled_hr_at_10])

        if self._target_:
            rating[self._train] = - (1 << 10)
            rating[self._test] = - (1 << 10)
            er_at_5 = evaluate_recall(rating, self._target_, 5)
            er_at_10 = evaluate_recall(rating, self._target_, 10)
            ndcg_at_10 = evaluate_ndcg(rating, self._target_, 10)
            target_result = np.array([er_at_5, er_at_10, ndcg_at_10])
        else:
            target_result = None

        return test_result, target_result


# ---- FedRec/server.py
class FedRecServer(nn.Module):
    def __init__(self, m_item, dim):
        super().__init__()
        self.m_item = m_item
        self.dim = dim
        self.items_emb = nn.Embedding(m_item, dim)
        nn.init.normal_(self.items_emb.weight, std=0.01)

    def train_(self, clients, batch_clients_idx):
        batch_loss = []
        batch_items_emb_grad = torch.zeros_like(self.items_emb.weight)

        for idx in batch_clients_idx:
            client = clients[idx]
            items, items_emb_grad, loss = client.train_(self.items_emb.weight)

            with torch.no_grad():
                norm = items_emb_grad.norm(2, dim=-1, keepdim=True)
                too_large = norm[:, 0] > args.grad_limit
                items_emb_grad[too_large] /= (norm[too_large] / args.grad_limit)
                batch_items_emb_grad[items] += items_emb_grad

            if loss is not None:
                batch_loss.append(loss)

        with torch.no_grad():
            self.items_emb.weight.data.add_(batch_items_emb_grad, alpha=-args.lr)
        return batch_loss

    def eval_(self, clients):
        test_cnt = 0
        test_results = 0.
        target_cnt = 0
        target_results = 0.

        for client in clients:
            test_result, target_result = client.eval_(self.items_emb.weight)
            if test_result is not None:
                test_cnt += 1
                test_results += test_result
            if target_result is not None:
                target_cnt += 1
                target_results += target_result
        return test_results / test_cnt, target_results / target_cnt


def _make_federation(n_users, m_item, dim, target_items):
    """Collector's factory helper (runs in `target()` only): users with random train/test items, built with the
    original constructors (`main.py`/`data.py`, which read the MovieLens/Steam files, were not read)."""
    server = FedRecServer(m_item, dim)
    clients = []
    for _ in range(n_users):
        items = np.random.choice(m_item, size=8, replace=False).tolist()
        clients.append(FedRecClient(items[:6], items[6:], target_items, m_item, dim))
    return server, clients


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    server, clients = _make_federation(12, 120, 8, target_items=[3, 7, 11])
    server2, clients2 = copy.deepcopy((server, clients))
    return [
        (FedRecServer.train_, (server, clients, [0, 2, 4, 6, 8, 10]), {}),
        (FedRecServer.train_, (server2, clients2, [1, 3, 5]), {}),
    ]


EXPECT = ("none: a federated round is per-client Python glue (each client runs `backward()` on its own loss and "
          "returns `loss.cpu().item()`, the server clips rows with boolean masks and scatters into a buffer through "
          "`.data`); the client loss could be compiled, but the round itself stays eager")
