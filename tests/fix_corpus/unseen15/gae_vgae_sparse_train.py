"""Variational graph auto-encoder training from zfjsail/gae-pytorch (`gae/train.py` `gae_for`: the adjacency
bookkeeping with `scipy.sparse` (`sp.dia_matrix` diagonal removal, `eliminate_zeros`), `mask_test_edges`,
`preprocess_graph`, `adj_label = torch.FloatTensor(adj_label.toarray())`, Python-float `pos_weight`/`norm`, then
the epoch loop: `time.time()`, `model.train()`, `zero_grad`, `model(features, adj_norm)`, `loss_function(...)`,
`backward`, `cur_loss = loss.item()`, `step`, `hidden_emb = mu.data.numpy()`, `get_roc_score` on the
validation edges and a multi-part `print` with `"{:.5f}".format`, and the final test scores); `gae/model.py`
`GCNModelVAE` (three `GraphConvolution`s with `act=lambda x: x`, `reparameterize` branching on `self.training`
with `eps.mul(std).add_(mu)`) and `InnerProductDecoder`; `gae/layers.py` `GraphConvolution` (`F.dropout`,
`torch.mm`, `torch.spmm` with the sparse normalised adjacency); `gae/optimizer.py`, the stored revision:
`loss_function` over `weighted_binary_cross_entropy` (a `pos_weight is not None` branch of `log(sigmoid(...))`
terms); `gae/utils.py` `mask_test_edges` (NumPy shuffles and rejection loops with the nested `ismember`),
`sparse_to_tuple`, `preprocess_graph`, `sparse_mx_to_torch_sparse_tensor` (the legacy
`torch.sparse.FloatTensor(indices, values, shape)` constructor) and `get_roc_score` (nested `sigmoid`, Python loops
over edge arrays, `np.hstack`).
Adaptations: `load_data` (pickled Planetoid files) is replaced by a random graph built in the factory (NumPy
seeded, networkx `adjacency_matrix`) with random features; sklearn is not installed, so `roc_auc_score` and
`average_precision_score` are small NumPy stand-ins with the same meaning; argparse `args` is a `Namespace`
passed in; few epochs. The called function `gae_for` seeds NumPy (for `mask_test_edges`) and torch first and
builds the model and optimizer itself as the original does, so a call repeats; it returns the last loss and the
test scores."""
import argparse
import time

import networkx as nx
import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.nn.modules.module import Module
from torch.nn.parameter import Parameter


# ---- sklearn.metrics stand-ins (adaptation)
def roc_auc_score(labels, scores):
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def average_precision_score(labels, scores):
    order = np.argsort(-scores, kind='mergesort')
    hits = labels[order] == 1
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return precision[hits].sum() / max(hits.sum(), 1)


# ---- gae/layers.py
class GraphConvolution(Module):
    """
    Simple GCN layer, similar to https://arxiv.org/abs/1609.02907
    """

    def __init__(self, in_features, out_features, dropout=0., act=F.relu):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.dropout = dropout
        self.act = act
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        self.reset_parameters()

    def reset_parameters(self):
        torch.nn.init.xavier_uniform_(self.weight)

    def forward(self, input, adj):
        input = F.dropout(input, self.dropout, self.training)
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        output = self.act(output)
        return output

    def __repr__(self):
        return self.__class__.__name__ + ' (' \
               + str(self.in_features) + ' -> ' \
               + str(self.out_features) + ')'


# ---- gae/model.py
class GCNModelVAE(nn.Module):
    def __init__(self, input_feat_dim, hidden_dim1, hidden_dim2, dropout):
        super(GCNModelVAE, self).__init__()
        self.gc1 = GraphConvolution(input_feat_dim, hidden_dim1, dropout, act=F.relu)
        self.gc2 = GraphConvolution(hidden_dim1, hidden_dim2, dropout, act=lambda x: x)
        self.gc3 = GraphConvolution(hidden_dim1, hidden_dim2, dropout, act=lambda x: x)
        self.dc = InnerProductDecoder(dropout, act=lambda x: x)

    def encode(self, x, adj):
        hidden1 = self.gc1(x, adj)
        return self.gc2(hidden1, adj), self.gc3(hidden1, adj)

    def reparameterize(self, mu, logvar):
        if self.training:
            std = torch.exp(logvar)
            eps = torch.randn_like(std)
            return eps.mul(std).add_(mu)
        else:
            return mu

    def forward(self, x, adj):
        mu, logvar = self.encode(x, adj)
        z = self.reparameterize(mu, logvar)
        return self.dc(z), mu, logvar


class InnerProductDecoder(nn.Module):
    """Decoder for using inner product for prediction."""

    def __init__(self, dropout, act=torch.sigmoid):
        super(InnerProductDecoder, self).__init__()
        self.dropout = dropout
        self.sigmoid = act

    def forward(self, z):
        z = F.dropout(z, self.dropout, training=self.training)
        adj = self.sigmoid(torch.mm(z, z.t()))
        return adj


# ---- gae/optimizer.py
def weighted_binary_cross_entropy(output, target, pos_weight):
    # eps = 1e-8  # 1 - eps -> big eats small
    # output = torch.clamp(output, min=eps, max=1-eps)
    if pos_weight is not None:
        loss = (target * torch.sigmoid(output).log()) * pos_weight + \
               ((1 - target) * torch.sigmoid(1 - output).log())
    else:
        loss = target * torch.log(output) + (1 - target) * torch.log(1 - output)
    loss = torch.neg(torch.mean(loss))
    return loss


def loss_function(preds, labels, mu, logvar, n_nodes, norm, pos_weight):
    cost = norm * torch.mean(weighted_binary_cross_entropy(preds, labels, pos_weight))

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 / n_nodes * torch.mean(torch.sum(
        1 + 2 * logvar - mu.pow(2) - logvar.exp().pow(2), 1))
    return cost + KLD


# ---- gae/utils.py
def sparse_to_tuple(sparse_mx):
    if not sp.isspmatrix_coo(sparse_mx):
        sparse_mx = sparse_mx.tocoo()
    coords = np.vstack((sparse_mx.row, sparse_mx.col)).transpose()
    values = sparse_mx.data
    shape = sparse_mx.shape
    return coords, values, shape


def mask_test_edges(adj):
    # Remove diagonal elements
    adj = adj - sp.dia_matrix((adj.diagonal()[np.newaxis, :], [0]), shape=adj.shape)
    adj.eliminate_zeros()
    # Check that diag is zero:
    assert np.diag(adj.todense()).sum() == 0

    adj_triu = sp.triu(adj)
    adj_tuple = sparse_to_tuple(adj_triu)
    edges = adj_tuple[0]
    edges_all = sparse_to_tuple(adj)[0]
    num_test = int(np.floor(edges.shape[0] / 10.))
    num_val = int(np.floor(edges.shape[0] / 20.))

    all_edge_idx = list(range(edges.shape[0]))
    np.random.shuffle(all_edge_idx)
    val_edge_idx = all_edge_idx[:num_val]
    test_edge_idx = all_edge_idx[num_val:(num_val + num_test)]
    test_edges = edges[test_edge_idx]
    val_edges = edges[val_edge_idx]
    train_edges = np.delete(edges, np.hstack([test_edge_idx, val_edge_idx]), axis=0)

    def ismember(a, b, tol=5):
        rows_close = np.all(np.round(a - b[:, None], tol) == 0, axis=-1)
        return np.any(rows_close)

    test_edges_false = []
    while len(test_edges_false) < len(test_edges):
        idx_i = np.random.randint(0, adj.shape[0])
        idx_j = np.random.randint(0, adj.shape[0])
        if idx_i == idx_j:
            continue
        if ismember([idx_i, idx_j], edges_all):
            continue
        if test_edges_false:
            if ismember([idx_j, idx_i], np.array(test_edges_false)):
                continue
            if ismember([idx_i, idx_j], np.array(test_edges_false)):
                continue
        test_edges_false.append([idx_i, idx_j])

    val_edges_false = []
    while len(val_edges_false) < len(val_edges):
        idx_i = np.random.randint(0, adj.shape[0])
        idx_j = np.random.randint(0, adj.shape[0])
        if idx_i == idx_j:
            continue
        if ismember([idx_i, idx_j], train_edges):
            continue
        if ismember([idx_j, idx_i], train_edges):
            continue
        if ismember([idx_i, idx_j], val_edges):
            continue
        if ismember([idx_j, idx_i], val_edges):
            continue
        if val_edges_false:
            if ismember([idx_j, idx_i], np.array(val_edges_false)):
                continue
            if ismember([idx_i, idx_j], np.array(val_edges_false)):
                continue
        val_edges_false.append([idx_i, idx_j])

    assert ~ismember(test_edges_false, edges_all)
    assert ~ismember(val_edges_false, edges_all)
    assert ~ismember(val_edges, train_edges)
    assert ~ismember(test_edges, train_edges)
    assert ~ismember(val_edges, test_edges)

    data = np.ones(train_edges.shape[0])

    # Re-build adj matrix
    adj_train = sp.csr_matrix((data, (train_edges[:, 0], train_edges[:, 1])), shape=adj.shape)
    adj_train = adj_train + adj_train.T

    # NOTE: these edge lists only contain single direction of edge!
    return adj_train, train_edges, val_edges, val_edges_false, test_edges, test_edges_false


def preprocess_graph(adj):
    adj = sp.coo_matrix(adj)
    adj_ = adj + sp.eye(adj.shape[0])
    rowsum = np.array(adj_.sum(1))
    degree_mat_inv_sqrt = sp.diags(np.power(rowsum, -0.5).flatten())
    adj_normalized = adj_.dot(degree_mat_inv_sqrt).transpose().dot(degree_mat_inv_sqrt).tocoo()
    # return sparse_to_tuple(adj_normalized)
    return sparse_mx_to_torch_sparse_tensor(adj_normalized)


def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(
        np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


def get_roc_score(emb, adj_orig, edges_pos, edges_neg):
    def sigmoid(x):
        return 1 / (1 + np.exp(-x))

    # Predict on test set of edges
    adj_rec = np.dot(emb, emb.T)
    preds = []
    pos = []
    for e in edges_pos:
        preds.append(sigmoid(adj_rec[e[0], e[1]]))
        pos.append(adj_orig[e[0], e[1]])

    preds_neg = []
    neg = []
    for e in edges_neg:
        preds_neg.append(sigmoid(adj_rec[e[0], e[1]]))
        neg.append(adj_orig[e[0], e[1]])

    preds_all = np.hstack([preds, preds_neg])
    labels_all = np.hstack([np.ones(len(preds)), np.zeros(len(preds))])
    roc_score = roc_auc_score(labels_all, preds_all)
    ap_score = average_precision_score(labels_all, preds_all)

    return roc_score, ap_score


# ---- gae/train.py
def gae_for(args, adj, features):
    np.random.seed(args.seed)  # adaptation: seed the edge split and the model so that a call repeats
    torch.manual_seed(args.seed)  # BREAK
    print("Using {} dataset".format(args.dataset_str))  # BREAK
    n_nodes, feat_dim = features.shape

    # Store original adjacency matrix (without diagonal entries) for later
    adj_orig = adj
    adj_orig = adj_orig - sp.dia_matrix((adj_orig.diagonal()[np.newaxis, :], [0]), shape=adj_orig.shape)
    adj_orig.eliminate_zeros()

    adj_train, train_edges, val_edges, val_edges_false, test_edges, test_edges_false = mask_test_edges(adj)
    adj = adj_train

    # Some preprocessing
    adj_norm = preprocess_graph(adj)
    adj_label = adj_train + sp.eye(adj_train.shape[0])
    # adj_label = sparse_to_tuple(adj_label)
    adj_label = torch.FloatTensor(adj_label.toarray())

    pos_weight = float(adj.shape[0] * adj.shape[0] - adj.sum()) / adj.sum()
    norm = adj.shape[0] * adj.shape[0] / float((adj.shape[0] * adj.shape[0] - adj.sum()) * 2)

    model = GCNModelVAE(feat_dim, args.hidden1, args.hidden2, args.dropout)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    hidden_emb = None
    for epoch in range(args.epochs):
        t = time.time()
        model.train()
        optimizer.zero_grad()
        recovered, mu, logvar = model(features, adj_norm)
        loss = loss_function(preds=recovered, labels=adj_label,
                             mu=mu, logvar=logvar, n_nodes=n_nodes,
                             norm=norm, pos_weight=pos_weight)
        loss.backward()
        cur_loss = loss.item()
        optimizer.step()

        hidden_emb = mu.data.numpy()
        roc_curr, ap_curr = get_roc_score(hidden_emb, adj_orig, val_edges, val_edges_false)

        print("Epoch:", '%04d' % (epoch + 1), "train_loss=", "{:.5f}".format(cur_loss),
              "val_ap=", "{:.5f}".format(ap_curr),
              "time=", "{:.5f}".format(time.time() - t)
              )

    print("Optimization Finished!")

    roc_score, ap_score = get_roc_score(hidden_emb, adj_orig, test_edges, test_edges_false)
    print('Test ROC score: ' + str(roc_score))
    print('Test AP score: ' + str(ap_score))
    return cur_loss, roc_score, ap_score


def target():
    torch.manual_seed(0)

    def graph(n, p, seed, feat_dim):
        g = nx.gnp_random_graph(n, p, seed=seed)
        adj = sp.csr_matrix(nx.adjacency_matrix(g), dtype=np.float64)
        features = torch.rand(n, feat_dim)
        return adj, features

    adj1, feats1 = graph(40, 0.15, 1, 12)
    adj2, feats2 = graph(30, 0.2, 2, 12)
    args1 = argparse.Namespace(model='gcn_vae', seed=42, epochs=4, hidden1=16, hidden2=8, lr=0.01, dropout=0.,
                               dataset_str='random40')
    args2 = argparse.Namespace(model='gcn_vae', seed=7, epochs=3, hidden1=16, hidden2=8, lr=0.02, dropout=0.1,
                               dataset_str='random30')
    return [
        (gae_for, (args1, adj1, feats1), {}),
        (gae_for, (args2, adj2, feats2), {}),
    ]


EXPECT = ("extract: the model and loss are traceable (sparse `spmm`, the `self.training` branch is static); the "
          "epoch loop's scipy/NumPy evaluation (`mu.data.numpy()`, `get_roc_score`), `loss.item()`, printing and "
          "optimizer step are eager work, so the forward+loss belongs in a compiled helper with the rest left as "
          "eager glue")
