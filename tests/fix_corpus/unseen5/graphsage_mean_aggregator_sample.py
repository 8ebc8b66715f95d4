"""GraphSAGE mean aggregator on Python adjacency: `random.sample` of each neighbour list inside a comprehension, sets
and `set.union(*samp_neighs)`, a dict comprehension of node ids, `Variable(torch.zeros(...))` filled at Python index
lists, and `torch.LongTensor(unique_nodes_list)` / `torch.LongTensor(nodes)` embedding lookups; two encoders stacked
through a lambda feature function (williamleif/graphsage-simple graphsage/aggregators.py: MeanAggregator;
graphsage/encoders.py: Encoder; graphsage/model.py: SupervisedGraphSage, run_cora). Cora is replaced by a circulant
graph of 40 nodes in which every node has exactly `num_sample` (10) neighbours, so the sample is the whole list and
the output does not depend on Python's RNG; the adjacency lists are Python lists instead of sets because
`random.sample` no longer accepts sets (Python 3.11); the two lambdas pass `nodes.tolist()` to `enc1` because
iterating a LongTensor gave Python ints in the PyTorch of the original (0.3) and now gives 0-d tensors, which are
not keys of the adjacency dict; `init.xavier_uniform_` replaces the removed `init.xavier_uniform`."""
import random

import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.nn import init
import torch.nn.functional as F


class MeanAggregator(nn.Module):
    """
    Aggregates a node's embeddings using mean of neighbors' embeddings
    """
    def __init__(self, features, cuda=False, gcn=False):
        """
        Initializes the aggregator for a specific graph.

        features -- function mapping LongTensor of node ids to FloatTensor of feature values.
        cuda -- whether to use GPU
        gcn --- whether to perform concatenation GraphSAGE-style, or add self-loops GCN-style
        """

        super(MeanAggregator, self).__init__()

        self.features = features
        self.cuda = cuda
        self.gcn = gcn

    def forward(self, nodes, to_neighs, num_sample=10):
        """
        nodes --- list of nodes in a batch
        to_neighs --- list of sets, each set is the set of neighbors for node in batch
        num_sample --- number of neighbors to sample. No sampling if None.
        """
        # Local pointers to functions (speed hack)
        _set = set
        if not num_sample is None:
            _sample = random.sample
            samp_neighs = [_set(_sample(to_neigh,  # BREAK
                            num_sample,
                            )) if len(to_neigh) >= num_sample else to_neigh for to_neigh in to_neighs]
        else:
            samp_neighs = to_neighs

        if self.gcn:
            samp_neighs = [samp_neigh + set([nodes[i]]) for i, samp_neigh in enumerate(samp_neighs)]
        unique_nodes_list = list(set.union(*samp_neighs))
        unique_nodes = {n:i for i,n in enumerate(unique_nodes_list)}
        mask = Variable(torch.zeros(len(samp_neighs), len(unique_nodes)))  # BREAK
        column_indices = [unique_nodes[n] for samp_neigh in samp_neighs for n in samp_neigh]
        row_indices = [i for i in range(len(samp_neighs)) for j in range(len(samp_neighs[i]))]
        mask[row_indices, column_indices] = 1
        if self.cuda:
            mask = mask.cuda()
        num_neigh = mask.sum(1, keepdim=True)
        mask = mask.div(num_neigh)
        if self.cuda:
            embed_matrix = self.features(torch.LongTensor(unique_nodes_list).cuda())
        else:
            embed_matrix = self.features(torch.LongTensor(unique_nodes_list))
        to_feats = mask.mm(embed_matrix)
        return to_feats


class Encoder(nn.Module):
    """
    Encodes a node's using 'convolutional' GraphSage approach
    """
    def __init__(self, features, feature_dim,
            embed_dim, adj_lists, aggregator,
            num_sample=10,
            base_model=None, gcn=False, cuda=False,
            feature_transform=False):
        super(Encoder, self).__init__()

        self.features = features
        self.feat_dim = feature_dim
        self.adj_lists = adj_lists
        self.aggregator = aggregator
        self.num_sample = num_sample
        if base_model != None:
            self.base_model = base_model

        self.gcn = gcn
        self.embed_dim = embed_dim
        self.cuda = cuda
        self.aggregator.cuda = cuda
        self.weight = nn.Parameter(
                torch.FloatTensor(embed_dim, self.feat_dim if self.gcn else 2 * self.feat_dim))
        init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        """
        Generates embeddings for a batch of nodes.

        nodes     -- list of nodes
        mode      -- string desiginating the mode of the nodes
        """
        neigh_feats = self.aggregator.forward(nodes, [self.adj_lists[node] for node in nodes],
                self.num_sample)
        if not self.gcn:
            if self.cuda:
                self_feats = self.features(torch.LongTensor(nodes).cuda())
            else:
                self_feats = self.features(torch.LongTensor(nodes))
            combined = torch.cat([self_feats, neigh_feats], dim=1)
        else:
            combined = neigh_feats
        combined = F.relu(self.weight.mm(combined.t()))
        return combined


class SupervisedGraphSage(nn.Module):

    def __init__(self, num_classes, enc):
        super(SupervisedGraphSage, self).__init__()
        self.enc = enc
        self.xent = nn.CrossEntropyLoss()

        self.weight = nn.Parameter(torch.FloatTensor(num_classes, enc.embed_dim))
        init.xavier_uniform_(self.weight)

    def forward(self, nodes):
        embeds = self.enc(nodes)
        scores = self.weight.mm(embeds)
        return scores.t()


def load_graph(num_nodes=40, half_degree=5, feat_dim=24):
    """Stand-in for load_cora: a circulant graph (every node has 2 * half_degree neighbours)."""
    feat_data = torch.randn(num_nodes, feat_dim)
    adj_lists = {}
    for i in range(num_nodes):
        adj_lists[i] = sorted((i + d) % num_nodes for d in range(-half_degree, half_degree + 1) if d != 0)
    return feat_data, adj_lists


def build_model():
    """run_cora's model construction, shrunk (feature dim 24, embeddings 16, 7 classes)."""
    feat_data, adj_lists = load_graph()
    features = nn.Embedding(feat_data.shape[0], feat_data.shape[1])
    features.weight = nn.Parameter(feat_data, requires_grad=False)

    agg1 = MeanAggregator(features, cuda=False)
    enc1 = Encoder(features, feat_data.shape[1], 16, adj_lists, agg1, gcn=True, cuda=False)
    agg2 = MeanAggregator(lambda nodes : enc1(nodes.tolist()).t(), cuda=False)  # BREAK
    enc2 = Encoder(lambda nodes : enc1(nodes.tolist()).t(), enc1.embed_dim, 16, adj_lists, agg2,
            base_model=enc1, gcn=True, cuda=False)
    enc1.num_samples = 5
    enc2.num_samples = 5

    return SupervisedGraphSage(7, enc2)


def target():
    torch.manual_seed(0)
    random.seed(0)
    graphsage = build_model()
    return [
        (graphsage, ([0, 3, 7, 12, 25],), {}),
        (graphsage, ([39, 1, 18, 20],), {}),
    ]


EXPECT = ("split: the neighbour sampling and mask construction (random.sample, sets, the Python index lists, "
          "`Variable`, `torch.LongTensor` of Python lists) run eagerly as glue; the dense parts (`mask.mm`, "
          "`weight.mm`, `relu`) are compiled")
