"""DLRM's training-loop body in inference-only mode: per mini-batch `t1 = time_wrap(use_gpu)`, the forward through
`dlrm_wrap` (under `record_function("DLRM forward")`), the loss through `loss_fn_wrap`, then the loss and accuracy on
the host: `L = E.detach().cpu().numpy()`, `S = Z.detach().cpu().numpy()`, `T = T.detach().cpu().numpy()`,
`A = np.sum((np.round(S, 0) == T).astype(np.uint8))`, accumulated into Python totals, with the
`should_print` branch printing the running loss and accuracy (facebookresearch/dlrm dlrm_s_pytorch.py: the `while
k < args.nepochs` / `for j, inputBatch in enumerate(train_ld)` loop body with `args.inference_only`, `time_wrap`,
`dlrm_wrap`, `loss_fn_wrap`, `unpack_batch`, and `DLRM_Net.create_mlp/create_emb/apply_mlp/apply_emb/
interact_features/sequential_forward` with the "dot" interaction).
Adaptations: the model is tiny (dense features 4, bottom MLP 4-8-4, two `EmbeddingBag` tables of 10 and 12 rows of
width 4, top MLP 7-8-1 with a sigmoid) and randomly initialised; `args` is a small namespace holding the flags the
loop reads; the batches are a given list of `(X, lS_o, lS_i, T)` tuples instead of the Criteo data loader;
`dlrm_wrap`/`loss_fn_wrap` take the model and args as arguments instead of reading module globals; the GPU and
multi-device branches are left out (`use_gpu` is False); the timing totals are accumulated as in the original but not
returned (the call returns the loss and accuracy of the last printed window). No state outside the call is changed."""
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch.autograd.profiler import record_function


def time_wrap(use_gpu):
    if use_gpu:
        torch.cuda.synchronize()
    return time.time()  # BREAK


def dlrm_wrap(dlrm, X, lS_o, lS_i, use_gpu, device, ndevices=1):
    with record_function("DLRM forward"):
        if use_gpu:  # .cuda()
            raise NotImplementedError
        return dlrm(X.to(device), lS_o, lS_i)


def loss_fn_wrap(dlrm, args, Z, T, use_gpu, device):
    with record_function("DLRM loss compute"):
        if args.loss_function == "mse" or args.loss_function == "bce":
            return dlrm.loss_fn(Z, T.to(device))
        elif args.loss_function == "wbce":
            loss_ws_ = dlrm.loss_ws[T.data.view(-1).long()].view_as(T).to(device)
            loss_fn_ = dlrm.loss_fn(Z, T.to(device))
            loss_sc_ = loss_ws_ * loss_fn_
            return loss_sc_.mean()


def unpack_batch(b):
    # Experiment with unweighted samples
    return b[0], b[1], b[2], b[3], torch.ones(b[3].size()), None


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        # build MLP layer by layer
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n = ln[i]
            m = ln[i + 1]

            # construct fully connected operator
            LL = nn.Linear(int(n), int(m), bias=True)

            # initialize the weights
            mean = 0.0  # std_dev = np.sqrt(variance)
            std_dev = np.sqrt(2 / (m + n))  # np.sqrt(1 / m) # np.sqrt(1 / n)
            W = np.random.normal(mean, std_dev, size=(m, n)).astype(np.float32)
            std_dev = np.sqrt(1 / m)  # np.sqrt(2 / (m + 1))
            bt = np.random.normal(mean, std_dev, size=m).astype(np.float32)
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            layers.append(LL)

            # construct sigmoid or relu operator
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())

        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln, weighted_pooling=None):
        emb_l = nn.ModuleList()
        v_W_l = []
        for i in range(0, ln.size):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=True)
            # initialize embeddings
            W = np.random.uniform(
                low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)
            ).astype(np.float32)
            EE.weight.data = torch.tensor(W, requires_grad=True)
            if weighted_pooling is None:
                v_W_l.append(None)
            else:
                v_W_l.append(torch.ones(n, dtype=torch.float32))
            emb_l.append(EE)
        return emb_l, v_W_l

    def __init__(
        self,
        m_spa=None,
        ln_emb=None,
        ln_bot=None,
        ln_top=None,
        arch_interaction_op=None,
        arch_interaction_itself=False,
        sigmoid_bot=-1,
        sigmoid_top=-1,
        loss_threshold=0.0,
        loss_function="bce",
    ):
        super(DLRM_Net, self).__init__()
        self.output_d = 0
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.loss_threshold = loss_threshold
        self.loss_function = loss_function
        self.quantize_emb = False
        self.emb_l, w_list = self.create_emb(m_spa, ln_emb)
        self.v_W_l = w_list
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)
        if self.loss_function == "mse":
            self.loss_fn = torch.nn.MSELoss(reduction="mean")
        elif self.loss_function == "bce":
            self.loss_fn = torch.nn.BCELoss(reduction="mean")

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l, v_W_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]

            # embedding lookup
            if v_W_l[k] is not None:
                per_sample_weights = v_W_l[k].gather(0, sparse_index_group_batch)
            else:
                per_sample_weights = None

            E = emb_l[k]
            V = E(
                sparse_index_group_batch,
                sparse_offset_group_batch,
                per_sample_weights=per_sample_weights,
            )

            ly.append(V)

        return ly

    def interact_features(self, x, ly):

        if self.arch_interaction_op == "dot":
            # concatenate dense and sparse features
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            # perform a dot product
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            # concatenate dense features and interactions
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            # concatenation features (into a row vector)
            R = torch.cat([x] + ly, dim=1)
        else:
            sys.exit(
                "ERROR: --arch-interaction-op="
                + self.arch_interaction_op
                + " is not supported"
            )

        return R

    def forward(self, dense_x, lS_o, lS_i):
        return self.sequential_forward(dense_x, lS_o, lS_i)

    def sequential_forward(self, dense_x, lS_o, lS_i):
        # process dense features (using bottom mlp), resulting in a row vector
        x = self.apply_mlp(dense_x, self.bot_l)

        # process sparse features(using embeddings), resulting in a list of row vectors
        ly = self.apply_emb(lS_o, lS_i, self.emb_l, self.v_W_l)

        # interact features (dense and sparse)
        z = self.interact_features(x, ly)

        # obtain probability of a click (using top mlp)
        p = self.apply_mlp(z, self.top_l)

        # clamp output if needed
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p

        return z


def train_loop(dlrm, args, train_ld):
    use_gpu = args.use_gpu
    device = torch.device("cpu")
    nbatches = args.num_batches if args.num_batches > 0 else len(train_ld)

    total_time = 0
    total_loss = 0
    total_accu = 0
    total_iter = 0
    total_samp = 0
    train_loss = train_accuracy = None

    for j, inputBatch in enumerate(train_ld):
        X, lS_o, lS_i, T, W, CBPP = unpack_batch(inputBatch)

        t1 = time_wrap(use_gpu)

        # early exit if nbatches was set by the user and has been exceeded
        if nbatches > 0 and j >= nbatches:
            break

        # forward pass
        Z = dlrm_wrap(dlrm, X, lS_o, lS_i, use_gpu, device)

        # loss
        E = loss_fn_wrap(dlrm, args, Z, T, use_gpu, device)

        # compute loss and accuracy
        L = E.detach().cpu().numpy()  # numpy array
        S = Z.detach().cpu().numpy()  # numpy array
        T = T.detach().cpu().numpy()  # numpy array
        mbs = T.shape[0]  # = args.mini_batch_size except maybe for last
        A = np.sum((np.round(S, 0) == T).astype(np.uint8))

        if not args.inference_only:
            raise NotImplementedError  # the backward pass and optimizer step are left out

        t2 = time_wrap(use_gpu)
        total_time += t2 - t1
        total_accu += A
        total_loss += L * mbs
        total_iter += 1
        total_samp += mbs

        should_print = ((j + 1) % args.print_freq == 0) or (j + 1 == nbatches)
        if should_print:
            gT = 1000.0 * total_time / total_iter if args.print_time else -1
            total_time = 0

            train_accuracy = total_accu / total_samp
            total_accu = 0

            train_loss = total_loss / total_samp
            total_loss = 0

            str_run_type = "inference" if args.inference_only else "training"
            print(
                "Finished {} it {}/{}, {:.2f} ms/it,".format(str_run_type, j + 1, nbatches, gT)
                + " loss {:.6f}".format(train_loss)
                + " accuracy {:3.3f} %".format(train_accuracy * 100)
            )
            total_iter = 0
            total_samp = 0

    return train_loss, train_accuracy


def _batches(gen, n, mbs, ln_emb):
    out = []
    for _ in range(n):
        X = torch.rand(mbs, 4, generator=gen)
        lS_o, lS_i = [], []
        for rows in ln_emb:
            lengths = torch.randint(1, 4, (mbs,), generator=gen)
            lS_o.append(torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]]))
            lS_i.append(torch.randint(0, int(rows), (int(lengths.sum()),), generator=gen))
        T = torch.randint(0, 2, (mbs, 1), generator=gen).float()
        out.append((X, lS_o, lS_i, T))
    return out


def target():
    np.random.seed(0)
    torch.manual_seed(0)
    ln_emb = np.array([10, 12])
    dlrm = DLRM_Net(
        m_spa=4,
        ln_emb=ln_emb,
        ln_bot=np.array([4, 8, 4]),
        ln_top=np.array([4 + 3, 8, 1]),
        arch_interaction_op="dot",
        arch_interaction_itself=False,
        sigmoid_bot=-1,
        sigmoid_top=1,
        loss_threshold=0.0,
        loss_function="bce",
    )
    args = SimpleNamespace(use_gpu=False, num_batches=0, loss_function="bce", inference_only=True,
                           print_freq=2, print_time=False)
    gen = torch.Generator().manual_seed(0)
    ld1 = _batches(gen, 3, 6, ln_emb)
    ld2 = _batches(gen, 3, 6, ln_emb)
    return [
        (train_loop, (dlrm, args, ld1), {}),
        (train_loop, (dlrm, args, ld2), {}),
    ]


EXPECT = ("rewrite: keep the metrics on the device: `L = E.detach()`, `A = (torch.round(Z.detach()) == T).sum()` "
          "(no `.cpu().numpy()`, no `np.round`/`np.sum`), accumulate tensors and read them once after the loop; the "
          "`time_wrap` calls and the `should_print` print are host work that would stay outside the graph (split/"
          "caller as the fallback: compile `dlrm_wrap`'s forward and the loss, keep the loop body's bookkeeping eager)")
