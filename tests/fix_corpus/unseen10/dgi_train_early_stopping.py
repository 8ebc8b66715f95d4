"""Deep Graph Infomax training loop (PetarV-/DGI `execute.py`'s epoch loop; `models/dgi.py`: `DGI`; `layers/gcn.py`:
`GCN` with `torch.spmm` on a sparse adjacency; `layers/readout.py`: `AvgReadout`; `layers/discriminator.py`:
`Discriminator` with `nn.Bilinear`; `utils/process.py`: `normalize_adj`, `sparse_mx_to_torch_sparse_tensor`). Each
epoch shuffles the nodes with `idx = np.random.permutation(nb_nodes)` (`shuf_fts = features[:, idx, :]`), builds
the 1/0 labels, runs the model on the sparse normalised adjacency, prints `'Loss:', loss`, keeps the best epoch with
`if loss < best:` (a tensor compared with a Python float first, then with the previous best tensor), counts
`cnt_wait` and stops with `if cnt_wait == patience: print('Early stopping!'); break`, then `loss.backward()` and
`optimiser.step()`.
Adaptations: the module-level script loop is written as a function `train_dgi` with the script's globals
(`nb_epochs`, `patience`, `batch_size`, `sparse`) as arguments; Cora (`process.load_data`) is replaced by a seeded
random graph (30 nodes, 12 binary features) preprocessed in the factory with the upstream `normalize_adj` and
`sparse_mx_to_torch_sparse_tensor` (`preprocess_features` is the row normalisation); `hid_units` is 16;
`torch.save(model.state_dict(), 'best_dgi.pkl')` (a file write) is replaced by an in-memory copy of the state dict;
the CUDA branches are dropped. So that a call repeats exactly, the called function restores the model and optimizer
from copies taken in the factory and seeds NumPy first (`reset_`, an adaptation). The two calls use different
epoch counts and patience (the second stops early)."""
import copy

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn


class GCN(nn.Module):
    def __init__(self, in_ft, out_ft, act, bias=True):
        super(GCN, self).__init__()
        self.fc = nn.Linear(in_ft, out_ft, bias=False)
        self.act = nn.PReLU() if 'prelu' else act

        if bias:
            self.bias = nn.Parameter(torch.FloatTensor(out_ft))
            self.bias.data.fill_(0.0)
        else:
            self.register_parameter('bias', None)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    # Shape of seq: (batch, nodes, features)
    def forward(self, seq, adj, sparse=False):
        seq_fts = self.fc(seq)
        if sparse:
            out = torch.unsqueeze(torch.spmm(adj, torch.squeeze(seq_fts, 0)), 0)  # BREAK
        else:
            out = torch.bmm(adj, seq_fts)
        if self.bias is not None:
            out += self.bias

        return self.act(out)


class AvgReadout(nn.Module):
    def __init__(self):
        super(AvgReadout, self).__init__()

    def forward(self, seq, msk):
        if msk is None:
            return torch.mean(seq, 1)
        else:
            msk = torch.unsqueeze(msk, -1)
            return torch.sum(seq * msk, 1) / torch.sum(msk, 1).unsqueeze(1)


class Discriminator(nn.Module):
    def __init__(self, n_h):
        super(Discriminator, self).__init__()
        self.f_k = nn.Bilinear(n_h, n_h, 1)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Bilinear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    def forward(self, c, h_pl, h_mi, s_bias1=None, s_bias2=None):
        c_x = torch.unsqueeze(c, 1)
        c_x = c_x.expand_as(h_pl)

        sc_1 = torch.squeeze(self.f_k(h_pl, c_x), 2)
        sc_2 = torch.squeeze(self.f_k(h_mi, c_x), 2)

        if s_bias1 is not None:
            sc_1 += s_bias1
        if s_bias2 is not None:
            sc_2 += s_bias2

        logits = torch.cat((sc_1, sc_2), 1)

        return logits


class DGI(nn.Module):
    def __init__(self, n_in, n_h, activation):
        super(DGI, self).__init__()
        self.gcn = GCN(n_in, n_h, activation)
        self.read = AvgReadout()

        self.sigm = nn.Sigmoid()

        self.disc = Discriminator(n_h)

    def forward(self, seq1, seq2, adj, sparse, msk, samp_bias1, samp_bias2):
        h_1 = self.gcn(seq1, adj, sparse)  # BREAK

        c = self.read(h_1, msk)
        c = self.sigm(c)

        h_2 = self.gcn(seq2, adj, sparse)

        ret = self.disc(c, h_1, h_2, samp_bias1, samp_bias2)

        return ret


def normalize_adj(adj):
    """Symmetrically normalize adjacency matrix."""
    adj = sp.coo_matrix(adj)
    rowsum = np.array(adj.sum(1))
    d_inv_sqrt = np.power(rowsum, -0.5).flatten()
    d_inv_sqrt[np.isinf(d_inv_sqrt)] = 0.
    d_mat_inv_sqrt = sp.diags(d_inv_sqrt)
    return adj.dot(d_mat_inv_sqrt).transpose().dot(d_mat_inv_sqrt).tocoo()


def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(
        np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


def train_dgi(model, optimiser, features, sp_adj, nb_epochs, patience, batch_size=1, sparse=True, adj=None):
    nb_nodes = features.shape[1]
    b_xent = nn.BCEWithLogitsLoss()
    cnt_wait = 0
    best = 1e9
    best_t = 0
    best_state = None

    for epoch in range(nb_epochs):
        model.train()
        optimiser.zero_grad()  # BREAK

        idx = np.random.permutation(nb_nodes)
        shuf_fts = features[:, idx, :]

        lbl_1 = torch.ones(batch_size, nb_nodes)
        lbl_2 = torch.zeros(batch_size, nb_nodes)
        lbl = torch.cat((lbl_1, lbl_2), 1)

        logits = model(features, shuf_fts, sp_adj if sparse else adj, sparse, None, None, None)

        loss = b_xent(logits, lbl)

        print('Loss:', loss)

        if loss < best:
            best = loss
            best_t = epoch
            cnt_wait = 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}  # adaptation: torch.save
        else:
            cnt_wait += 1

        if cnt_wait == patience:
            print('Early stopping!')
            break

        loss.backward()
        optimiser.step()  # BREAK

    print('Loading {}th epoch'.format(best_t))
    return best, best_t, best_state


def reset_(model, optimiser, model_state, opt_state, seed):
    """Adaptation: restore the initial model/optimizer and seed NumPy, so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    optimiser.load_state_dict(opt_state)  # BREAK
    np.random.seed(seed)


def run(model, optimiser, model_state, opt_state, features, sp_adj, nb_epochs, patience, seed):
    reset_(model, optimiser, model_state, opt_state, seed)
    return train_dgi(model, optimiser, features, sp_adj, nb_epochs, patience)  # BREAK


def target():
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    nb_nodes, ft_size, hid_units = 30, 12, 16
    dense = (rng.rand(nb_nodes, nb_nodes) < 0.12).astype(np.float32)
    dense = np.maximum(dense, dense.T)
    adj = normalize_adj(sp.coo_matrix(dense) + sp.eye(nb_nodes))
    sp_adj = sparse_mx_to_torch_sparse_tensor(adj)
    feats = (rng.rand(nb_nodes, ft_size) < 0.3).astype(np.float32) + 1e-3
    feats = feats / feats.sum(1, keepdims=True)
    features = torch.FloatTensor(feats[np.newaxis])
    model = DGI(ft_size, hid_units, 'prelu')
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimiser.state_dict())
    return [
        (run, (model, optimiser, model_state, opt_state, features, sp_adj, 6, 20, 1), {}),
        (run, (model, optimiser, model_state, opt_state, features, sp_adj, 12, 2, 2), {}),
    ]


EXPECT = ("caller: the epoch loop is a training script (NumPy permutation per epoch, `print` of the loss, "
          "`if loss < best:` early-stopping bookkeeping on a tensor, `break`, a checkpoint copy, `backward`/`step`); "
          "compile the model's forward (or a per-epoch step returning the loss) and keep the loop eager; the sparse "
          "`torch.spmm` in `GCN.forward` may break on its own")
