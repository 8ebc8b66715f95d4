"""Cluster-GCN training and testing from benedekrozemberczki/ClusterGCN (`src/clustering.py` `ClusteringMachine`
(`_set_sizes` with `np.max`, `decompose` choosing the clustering by `args.clustering_method`, `random_clustering`
with a dict comprehension of `random.choice`, `general_data_partitioning` building per-cluster subgraphs with
networkx, list comprehensions of re-mapped edges, `train_test_split`, NumPy row selection, `transfer_edges_and_nodes`
into `torch.LongTensor`/`FloatTensor`); `src/layers.py` `StackedGCN` (`setup_layers` rewriting `self.args.layers`,
`ListModule` whose `__getitem__` walks `iter(self._modules.values())`, `forward` looping over
`enumerate(self.args.layers[:-2])` with `if i>1:` dropout and the loop variable reused after the loop); `src/
clustergcn.py` `ClusterGCNTrainer` (`do_forward_pass` with index-tensor selections and `nll_loss`,
`update_average_loss` with `batch_average_loss.item()*node_count`, `train` with `trange`, `random.shuffle` of the
clusters and `set_description`, `do_prediction`, `test` collecting `.cpu().detach().numpy()` and `argmax`)).
Adaptations: `metis` and scikit-learn are not installed: `clustering_method` is "random" (the `metis_clustering`
method is kept, unreached, its `import metis` left out), `train_test_split` is a NumPy stand-in (shuffle with the global NumPy generator, as
sklearn does without a `random_state`, and split by `test_size`), `f1_score(..., average="micro")` is a NumPy
stand-in (equal to accuracy for single-label data); the called function `main` follows `src/main.py` (not opened:
seed, `ClusteringMachine`, `decompose`, trainer `train`/`test`) with the graph, features and targets made in the
factory instead of read from CSV files (a networkx random graph); `args` is a namespace with small sizes (40 nodes,
3 clusters, layers `[8, 8]`, 3 epochs). `main` deep-copies `args` first because `setup_layers` rewrites
`args.layers` in place, and seeds `random`, NumPy and torch, so a call repeats; it returns the F1 score, the test
predictions and the model's final weights' sum."""
import argparse
import copy
import random

import networkx as nx
import numpy as np
import torch
from torch.autograd import Variable
from torch_geometric.nn import GCNConv
from tqdm import trange, tqdm


# ---- stand-ins: sklearn.model_selection.train_test_split, sklearn.metrics.f1_score
def train_test_split(items, test_size=0.25):
    items = list(items)
    perm = np.random.permutation(len(items))  # BREAK
    n_test = int(np.ceil(test_size * len(items)))
    test = [items[i] for i in perm[:n_test]]  # BREAK
    train = [items[i] for i in perm[n_test:]]  # BREAK
    return train, test


def f1_score(y_true, y_pred, average="micro"):
    return float((np.asarray(y_true) == np.asarray(y_pred)).mean())  # BREAK


# ---- src/clustering.py
class ClusteringMachine(object):
    """
    Clustering the graph, feature set and target.
    """
    def __init__(self, args, graph, features, target):
        self.args = args
        self.graph = graph
        self.features = features
        self.target = target
        self._set_sizes()

    def _set_sizes(self):
        """
        Setting the feature and class count.
        """
        self.feature_count = self.features.shape[1]
        self.class_count = np.max(self.target)+1

    def decompose(self):
        """
        Decomposing the graph, partitioning the features and target, creating Torch arrays.
        """
        if self.args.clustering_method == "metis":
            print("\nMetis graph clustering started.\n")
            self.metis_clustering()
        else:
            print("\nRandom graph clustering started.\n")  # BREAK
            self.random_clustering()
        self.general_data_partitioning()
        self.transfer_edges_and_nodes()

    def random_clustering(self):
        """
        Random clustering the nodes.
        """
        self.clusters = [cluster for cluster in range(self.args.cluster_number)]
        self.cluster_membership = {node: random.choice(self.clusters) for node in self.graph.nodes()}

    def metis_clustering(self):
        """
        Clustering the graph with Metis. For details see:
        """
        (st, parts) = metis.part_graph(self.graph, self.args.cluster_number)
        self.clusters = list(set(parts))
        self.cluster_membership = {node: membership for node, membership in enumerate(parts)}

    def general_data_partitioning(self):
        self.sg_nodes = {}
        self.sg_edges = {}
        self.sg_train_nodes = {}
        self.sg_test_nodes = {}
        self.sg_features = {}
        self.sg_targets = {}
        for cluster in self.clusters:
            subgraph = self.graph.subgraph([node for node in sorted(self.graph.nodes()) if self.cluster_membership[node] == cluster])
            self.sg_nodes[cluster] = [node for node in sorted(subgraph.nodes())]
            mapper = {node: i for i, node in enumerate(sorted(self.sg_nodes[cluster]))}
            self.sg_edges[cluster] = [[mapper[edge[0]], mapper[edge[1]]] for edge in subgraph.edges()] +  [[mapper[edge[1]], mapper[edge[0]]] for edge in subgraph.edges()]
            self.sg_train_nodes[cluster], self.sg_test_nodes[cluster] = train_test_split(list(mapper.values()), test_size = self.args.test_ratio)
            self.sg_test_nodes[cluster] = sorted(self.sg_test_nodes[cluster])
            self.sg_train_nodes[cluster] = sorted(self.sg_train_nodes[cluster])
            self.sg_features[cluster] = self.features[self.sg_nodes[cluster],:]
            self.sg_targets[cluster] = self.target[self.sg_nodes[cluster],:]

    def transfer_edges_and_nodes(self):
        for cluster in self.clusters:
            self.sg_nodes[cluster] = torch.LongTensor(self.sg_nodes[cluster])
            self.sg_edges[cluster] = torch.LongTensor(self.sg_edges[cluster]).t()
            self.sg_train_nodes[cluster] = torch.LongTensor(self.sg_train_nodes[cluster])
            self.sg_test_nodes[cluster] = torch.LongTensor(self.sg_test_nodes[cluster])
            self.sg_features[cluster] = torch.FloatTensor(self.sg_features[cluster])
            self.sg_targets[cluster] = torch.LongTensor(self.sg_targets[cluster])


# ---- src/layers.py
class StackedGCN(torch.nn.Module):
    """
    Multi-layer GCN model.
    """
    def __init__(self, args, input_channels, output_channels):
        super(StackedGCN, self).__init__()  # BREAK
        self.args = args
        self.input_channels = input_channels
        self.output_channels = output_channels
        self.setup_layers()

    def setup_layers(self):
        """
        Creating the layes based on the args.
        """
        self.layers = []
        self.args.layers = [self.input_channels] + self.args.layers + [self.output_channels]
        for i, _ in enumerate(self.args.layers[:-1]):
            self.layers.append(GCNConv(self.args.layers[i],self.args.layers[i+1]))
        self.layers = ListModule(*self.layers)

    def forward(self, edges, features):
        """
        Making a forward pass.
        """
        for i, _ in enumerate(self.args.layers[:-2]):
            features = torch.nn.functional.relu(self.layers[i](features, edges))
            if i>1:
                features = torch.nn.functional.dropout(features, p = self.args.dropout, training = self.training)
        features = self.layers[i+1](features, edges)
        predictions = torch.nn.functional.log_softmax(features, dim=1)
        return predictions


class ListModule(torch.nn.Module):
    """
    Abstract list layer class.
    """
    def __init__(self, *args):
        super(ListModule, self).__init__()  # BREAK
        idx = 0
        for module in args:
            self.add_module(str(idx), module)
            idx += 1

    def __getitem__(self, idx):
        """
        Getting the indexed layer.
        """
        if idx < 0 or idx >= len(self._modules):
            raise IndexError('index {} is out of range'.format(idx))
        it = iter(self._modules.values())
        for i in range(idx):
            next(it)
        return next(it)

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)


# ---- src/clustergcn.py
class ClusterGCNTrainer(object):
    """
    Training a ClusterGCN.
    """
    def __init__(self, args, clustering_machine):
        self.args = args
        self.clustering_machine = clustering_machine
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.create_model()

    def create_model(self):
        """
        Creating a StackedGCN and transferring to CPU/GPU.
        """
        self.model = StackedGCN(self.args, self.clustering_machine.feature_count, self.clustering_machine.class_count)
        self.model = self.model.to(self.device)

    def do_forward_pass(self, cluster):
        edges = self.clustering_machine.sg_edges[cluster].to(self.device)
        macro_nodes = self.clustering_machine.sg_nodes[cluster].to(self.device)
        train_nodes = self.clustering_machine.sg_train_nodes[cluster].to(self.device)
        features = self.clustering_machine.sg_features[cluster].to(self.device)
        target = self.clustering_machine.sg_targets[cluster].to(self.device).squeeze()
        predictions = self.model(edges, features)
        average_loss = torch.nn.functional.nll_loss(predictions[train_nodes], target[train_nodes])
        node_count = train_nodes.shape[0]
        return average_loss, node_count

    def update_average_loss(self, batch_average_loss, node_count):
        self.accumulated_training_loss = self.accumulated_training_loss + batch_average_loss.item()*node_count  # BREAK
        self.node_count_seen = self.node_count_seen + node_count
        average_loss = self.accumulated_training_loss/self.node_count_seen
        return average_loss

    def do_prediction(self, cluster):
        edges = self.clustering_machine.sg_edges[cluster].to(self.device)
        macro_nodes = self.clustering_machine.sg_nodes[cluster].to(self.device)
        test_nodes = self.clustering_machine.sg_test_nodes[cluster].to(self.device)
        features = self.clustering_machine.sg_features[cluster].to(self.device)
        target = self.clustering_machine.sg_targets[cluster].to(self.device).squeeze()
        target = target[test_nodes]
        prediction = self.model(edges, features)
        prediction = prediction[test_nodes,:]
        return prediction, target

    def train(self):
        print("Training started.\n")  # BREAK
        epochs = trange(self.args.epochs, desc = "Train Loss")  # BREAK
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.args.learning_rate)  # BREAK
        self.model.train()
        for epoch in epochs:
            random.shuffle(self.clustering_machine.clusters)
            self.node_count_seen = 0
            self.accumulated_training_loss = 0
            for cluster in self.clustering_machine.clusters:
                self.optimizer.zero_grad()
                batch_average_loss, node_count = self.do_forward_pass(cluster)
                batch_average_loss.backward()
                self.optimizer.step()  # BREAK
                average_loss = self.update_average_loss(batch_average_loss, node_count)
            epochs.set_description("Train Loss: %g" % round(average_loss,4))

    def test(self):
        self.model.eval()
        self.predictions = []
        self.targets = []
        for cluster in self.clustering_machine.clusters:
            prediction, target = self.do_prediction(cluster)
            self.predictions.append(prediction.cpu().detach().numpy())
            self.targets.append(target.cpu().detach().numpy())
        self.targets = np.concatenate(self.targets)
        self.predictions = np.concatenate(self.predictions).argmax(1)
        score = f1_score(self.targets, self.predictions, average="micro")
        print("\nF-1 score: {:.4f}".format(score))
        return score  # adaptation: returned for the comparison


# ---- src/main.py (with in-memory data)
def main(args, graph, features, target):
    args = copy.deepcopy(args)  # adaptation: setup_layers rewrites args.layers
    random.seed(args.seed)  # BREAK
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)  # BREAK
    clustering_machine = ClusteringMachine(args, graph, features, target)
    clustering_machine.decompose()  # BREAK
    gcn_trainer = ClusterGCNTrainer(args, clustering_machine)
    gcn_trainer.train()
    score = gcn_trainer.test()
    return score, torch.as_tensor(gcn_trainer.predictions), sum(p.detach().sum() for p in gcn_trainer.model.parameters())


def target():
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    graph = nx.gnp_random_graph(40, 0.15, seed=1)
    labels = rng.randint(0, 3, size=(40, 1))
    features = (rng.rand(40, 6) + labels * 0.3).astype(np.float32)
    args1 = argparse.Namespace(clustering_method="random", cluster_number=3, test_ratio=0.3, layers=[8, 8],
                               dropout=0.5, epochs=3, learning_rate=0.01, seed=42)
    args2 = argparse.Namespace(**dict(vars(args1), cluster_number=2, layers=[8, 8, 8], seed=7, epochs=2))
    return [
        (main, (args1, graph, features, labels), {}),
        (main, (args2, graph, features, labels), {}),
    ]


EXPECT = ("extract: the GCN forward and the per-cluster loss compile; the clustering/partitioning (networkx, "
          "`random.choice`, NumPy splits), `update_average_loss`'s `.item()` accumulation, `trange` progress and "
          "the NumPy test metric are host-side glue that stays eager")
