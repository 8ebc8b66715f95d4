"""NGCF propagation from huangtinglin/NGCF-PyTorch (`NGCF/NGCF.py`: `NGCF.__init__`, `init_weight`,
`_convert_sp_mat_to_sp_tensor`, `sparse_dropout`, `create_bpr_loss`, `rating`, `forward`, stored revision fe877b0).
`forward` applies node dropout to the sparse normalised adjacency (`sparse_dropout`: `torch.rand` over `_nnz()`
entries, `torch.floor(...).type(torch.bool)`, boolean indexing of `_indices()`/`_values()` and a new
`torch.sparse.FloatTensor(i, v, x.shape)`), then for each layer `torch.sparse.mm`, two transformed message terms
read from `ParameterDict`s by formatted keys (`'W_gc_%d' % k`), a `LeakyReLU` and an `nn.Dropout` module constructed
inside the loop, `F.normalize`, and finally looks up users and items by Python lists of ids.

Adaptations: `args` (argparse in `utility/parser.py`, not read) is a `SimpleNamespace` with the fields `__init__` reads
(`device`, `embed_size`, `batch_size`, `node_dropout`, `mess_dropout`, `layer_size` and `regs` as strings that
`__init__` `eval`s); the normalised adjacency (built from a dataset by `utility/load_data.py`'s
`get_adj_mat`, not read) is a small random bipartite graph normalised in the factory with scipy
(`D^-1/2 A D^-1/2`, the collector's choice); user/positive/negative id lists (the repository draws them in
`data_generator.sample()`, not read) are drawn in the factory with Python `random`. Sizes: 30 users, 40 items, embedding
8, layers [8, 8]. The model is built once in the factory; the called function is the model (its original
`forward`); the two calls differ in `drop_flag` and in the ids.
"""
from types import SimpleNamespace
import random

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F


class NGCF(nn.Module):
    def __init__(self, n_user, n_item, norm_adj, args):
        super(NGCF, self).__init__()
        self.n_user = n_user
        self.n_item = n_item
        self.device = args.device
        self.emb_size = args.embed_size
        self.batch_size = args.batch_size
        self.node_dropout = args.node_dropout[0]
        self.mess_dropout = args.mess_dropout
        self.batch_size = args.batch_size

        self.norm_adj = norm_adj

        self.layers = eval(args.layer_size)
        self.decay = eval(args.regs)[0]

        """
        *********************************************************
        Init the weight of user-item.
        """
        self.embedding_dict, self.weight_dict = self.init_weight()

        """
        *********************************************************
        Get sparse adj.
        """
        self.sparse_norm_adj = self._convert_sp_mat_to_sp_tensor(self.norm_adj).to(self.device)

    def init_weight(self):
        # xavier init
        initializer = nn.init.xavier_uniform_

        embedding_dict = nn.ParameterDict({
            'user_emb': nn.Parameter(initializer(torch.empty(self.n_user,
                                                 self.emb_size))),
            'item_emb': nn.Parameter(initializer(torch.empty(self.n_item,
                                                 self.emb_size)))
        })

        weight_dict = nn.ParameterDict()
        layers = [self.emb_size] + self.layers
        for k in range(len(self.layers)):
            weight_dict.update({'W_gc_%d'%k: nn.Parameter(initializer(torch.empty(layers[k],
                                                                      layers[k+1])))})
            weight_dict.update({'b_gc_%d'%k: nn.Parameter(initializer(torch.empty(1, layers[k+1])))})

            weight_dict.update({'W_bi_%d'%k: nn.Parameter(initializer(torch.empty(layers[k],
                                                                      layers[k+1])))})
            weight_dict.update({'b_bi_%d'%k: nn.Parameter(initializer(torch.empty(1, layers[k+1])))})

        return embedding_dict, weight_dict

    def _convert_sp_mat_to_sp_tensor(self, X):
        coo = X.tocoo()
        i = torch.LongTensor([coo.row, coo.col])
        v = torch.from_numpy(coo.data).float()
        return torch.sparse.FloatTensor(i, v, coo.shape)

    def sparse_dropout(self, x, rate, noise_shape):
        random_tensor = 1 - rate
        random_tensor += torch.rand(noise_shape).to(x.device)  # BREAK
        dropout_mask = torch.floor(random_tensor).type(torch.bool)
        i = x._indices()
        v = x._values()

        i = i[:, dropout_mask]
        v = v[dropout_mask]

        out = torch.sparse.FloatTensor(i, v, x.shape).to(x.device)
        return out * (1. / (1 - rate))

    def create_bpr_loss(self, users, pos_items, neg_items):
        pos_scores = torch.sum(torch.mul(users, pos_items), axis=1)
        neg_scores = torch.sum(torch.mul(users, neg_items), axis=1)

        maxi = nn.LogSigmoid()(pos_scores - neg_scores)

        mf_loss = -1 * torch.mean(maxi)

        # cul regularizer
        regularizer = (torch.norm(users) ** 2
                       + torch.norm(pos_items) ** 2
                       + torch.norm(neg_items) ** 2) / 2
        emb_loss = self.decay * regularizer / self.batch_size

        return mf_loss + emb_loss, mf_loss, emb_loss

    def rating(self, u_g_embeddings, pos_i_g_embeddings):
        return torch.matmul(u_g_embeddings, pos_i_g_embeddings.t())

    def forward(self, users, pos_items, neg_items, drop_flag=True):

        A_hat = self.sparse_dropout(self.sparse_norm_adj,
                                    self.node_dropout,
                                    self.sparse_norm_adj._nnz()) if drop_flag else self.sparse_norm_adj  # BREAK

        ego_embeddings = torch.cat([self.embedding_dict['user_emb'],
                                    self.embedding_dict['item_emb']], 0)

        all_embeddings = [ego_embeddings]

        for k in range(len(self.layers)):
            side_embeddings = torch.sparse.mm(A_hat, ego_embeddings)

            # transformed sum messages of neighbors.
            sum_embeddings = torch.matmul(side_embeddings, self.weight_dict['W_gc_%d' % k]) \
                                             + self.weight_dict['b_gc_%d' % k]

            # bi messages of neighbors.
            # element-wise product
            bi_embeddings = torch.mul(ego_embeddings, side_embeddings)
            # transformed bi messages of neighbors.
            bi_embeddings = torch.matmul(bi_embeddings, self.weight_dict['W_bi_%d' % k]) \
                                            + self.weight_dict['b_bi_%d' % k]

            # non-linear activation.
            ego_embeddings = nn.LeakyReLU(negative_slope=0.2)(sum_embeddings + bi_embeddings)

            # message dropout.
            ego_embeddings = nn.Dropout(self.mess_dropout[k])(ego_embeddings)

            # normalize the distribution of embeddings.
            norm_embeddings = F.normalize(ego_embeddings, p=2, dim=1)

            all_embeddings += [norm_embeddings]

        all_embeddings = torch.cat(all_embeddings, 1)
        u_g_embeddings = all_embeddings[:self.n_user, :]
        i_g_embeddings = all_embeddings[self.n_user:, :]

        """
        *********************************************************
        look up.
        """
        u_g_embeddings = u_g_embeddings[users, :]
        pos_i_g_embeddings = i_g_embeddings[pos_items, :]
        neg_i_g_embeddings = i_g_embeddings[neg_items, :]

        return u_g_embeddings, pos_i_g_embeddings, neg_i_g_embeddings


def target():
    torch.manual_seed(2020)
    np.random.seed(2020)
    random.seed(2020)
    n_users, n_items = 30, 40
    R = (np.random.rand(n_users, n_items) < 0.15).astype(np.float32)
    adj = sp.bmat([[None, sp.csr_matrix(R)], [sp.csr_matrix(R.T), None]]).tocsr()
    rowsum = np.array(adj.sum(1)).flatten()
    d_inv = np.power(rowsum, -0.5, where=rowsum > 0, out=np.zeros_like(rowsum))
    d_mat = sp.diags(d_inv)
    norm_adj = d_mat.dot(adj).dot(d_mat).tocsr()

    args = SimpleNamespace(device=torch.device('cpu'), embed_size=8, batch_size=6, node_dropout=[0.1],
                           mess_dropout=[0.1, 0.1], layer_size='[8,8]', regs='[1e-5]')
    model = NGCF(n_users, n_items, norm_adj, args).to(args.device)

    def sample(batch_size):
        users = random.sample(range(n_users), batch_size)
        pos_items = [random.randrange(n_items) for _ in users]
        neg_items = [random.randrange(n_items) for _ in users]
        return users, pos_items, neg_items

    users1, pos1, neg1 = sample(6)
    users2, pos2, neg2 = sample(4)
    return [
        (model, (users1, pos1, neg1), {"drop_flag": True}),
        (model, (users2, pos2, neg2), {"drop_flag": False}),
    ]


EXPECT = ("rewrite: the node dropout on the sparse adjacency (torch.rand, boolean indexing of _indices()/_values(), "
          "a legacy torch.sparse.FloatTensor constructor) breaks the graph; rebuilding the sparse tensor with "
          "torch.sparse_coo_tensor and masking values instead of indices keeps the propagation traceable, and the "
          "per-layer nn.Dropout/LeakyReLU construction is a functional call")
