"""The ``torch_geometric`` registry: GNN models and message-passing layers on a small random
graph (two graphs of 8 nodes in one batch, 8 features, ~3 edges per node, seeded).

Names are ``models.<Class>`` (``torch_geometric.nn.models``), ``conv.<Class>`` (a single
layer) and ``graph.<Recipe>`` (a small graph classifier: convolutions + global pooling).
Models that need a compiled extension (``torch_cluster`` for SchNet's radius graph, ...)
are a :class:`CreateError` with the missing package when it is not installed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import CreateError

N_PER_GRAPH, GRAPHS, FEAT, HIDDEN, OUT = 8, 2, 8, 16, 4


def _graph(torch, gen):
    """(x, edge_index, batch, edge_attr, pos): two random graphs, no self loops, both
    directions of every edge (an undirected graph as PyG stores one)."""
    srcs, dsts = [], []
    for gi in range(GRAPHS):
        off = gi * N_PER_GRAPH
        a = torch.randint(0, N_PER_GRAPH, (12,), generator=gen)
        b = (a + torch.randint(1, N_PER_GRAPH, (12,), generator=gen)) % N_PER_GRAPH  # never a self loop
        ring = torch.arange(N_PER_GRAPH)  # every node has an edge
        srcs += [a + off, ring + off]
        dsts += [b + off, (ring + 1) % N_PER_GRAPH + off]
    src, dst = torch.cat(srcs), torch.cat(dsts)
    ei = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    ei = torch.unique(ei, dim=1)
    n = N_PER_GRAPH * GRAPHS
    x = torch.randn(n, FEAT, generator=gen)
    batch = torch.arange(GRAPHS).repeat_interleave(N_PER_GRAPH)
    edge_attr = torch.randn(ei.shape[1], 4, generator=gen)
    pos = torch.randn(n, 3, generator=gen)
    return x, ei, batch, edge_attr, pos


class _GraphClassifier:
    """Built lazily (needs torch): conv layers, ReLU, global mean pool, a linear head."""

    @staticmethod
    def make(conv_factory: Callable, torch, nn):
        class GraphClassifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = conv_factory(FEAT, HIDDEN)
                self.c2 = conv_factory(HIDDEN, HIDDEN)
                self.head = torch.nn.Linear(HIDDEN, OUT)

            def forward(self, x, edge_index, batch):
                x = self.c1(x, edge_index).relu()
                x = self.c2(x, edge_index).relu()
                return self.head(nn.global_mean_pool(x, batch))

        return GraphClassifier()


def _recipes() -> dict[str, Callable]:
    """name -> maker(torch, nn, models, g) -> (module, kwargs-builder)."""
    def std(x, ei, batch, ea, pos):
        return {"x": x, "edge_index": ei}

    def with_ea(x, ei, batch, ea, pos):
        return {"x": x, "edge_index": ei, "edge_attr": ea}

    def with_batch(x, ei, batch, ea, pos):
        return {"x": x, "edge_index": ei, "batch": batch}

    def points(x, ei, batch, ea, pos):
        return {"z": torch_randint_z(x), "pos": pos, "batch": batch}

    def knn(x, ei, batch, ea, pos):
        return {"x": x, "batch": batch}

    def edge_type(x, ei, batch, ea, pos):
        import torch

        return {"x": x, "edge_index": ei, "edge_type": torch.arange(ei.shape[1]) % 3}

    R: dict[str, tuple[Callable, Callable]] = {
        # whole models (torch_geometric.nn.models)
        "models.GCN": (lambda m, nn: m.GCN(FEAT, HIDDEN, num_layers=2, out_channels=OUT), std),
        "models.GraphSAGE": (lambda m, nn: m.GraphSAGE(FEAT, HIDDEN, num_layers=2, out_channels=OUT), std),
        "models.GIN": (lambda m, nn: m.GIN(FEAT, HIDDEN, num_layers=2, out_channels=OUT), std),
        "models.GAT": (lambda m, nn: m.GAT(FEAT, HIDDEN, num_layers=2, out_channels=OUT, heads=2), std),
        "models.GATv2": (lambda m, nn: m.GAT(FEAT, HIDDEN, num_layers=2, out_channels=OUT, heads=2, v2=True), std),
        "models.EdgeCNN": (lambda m, nn: m.EdgeCNN(FEAT, HIDDEN, num_layers=2, out_channels=OUT), std),
        "models.PNA": (lambda m, nn: m.PNA(FEAT, HIDDEN, num_layers=2, out_channels=OUT,
                                           aggregators=["mean", "min", "max", "std"],
                                           scalers=["identity", "amplification", "attenuation"],
                                           deg=_deg()), std),
        "models.GCN_jk": (lambda m, nn: m.GCN(FEAT, HIDDEN, num_layers=3, out_channels=OUT, jk="cat",
                                              norm="batch_norm"), std),
        "models.GraphUNet": (lambda m, nn: m.GraphUNet(FEAT, HIDDEN, OUT, depth=2), with_batch),
        "models.AttentiveFP": (lambda m, nn: m.AttentiveFP(FEAT, HIDDEN, OUT, edge_dim=4, num_layers=2,
                                                           num_timesteps=2), lambda *a: {**with_ea(*a), "batch": a[2]}),
        "models.SchNet": (lambda m, nn: m.SchNet(hidden_channels=HIDDEN, num_filters=HIDDEN, num_interactions=2,
                                                 num_gaussians=8, cutoff=5.0,
                                                 interaction_graph=_DenseRadiusGraph(5.0)), points),
        "models.DimeNetPlusPlus": (lambda m, nn: m.DimeNetPlusPlus(hidden_channels=HIDDEN, out_channels=OUT,
                                                                   num_blocks=1, int_emb_size=8, basis_emb_size=4,
                                                                   out_emb_channels=HIDDEN, num_spherical=3,
                                                                   num_radial=4), points),
        "models.MLP": (lambda m, nn: m.MLP([FEAT, HIDDEN, OUT], norm="batch_norm"), lambda x, *a: {"x": x}),
        # single layers
        "conv.GCNConv": (lambda m, nn: nn.GCNConv(FEAT, HIDDEN), std),
        "conv.GATConv": (lambda m, nn: nn.GATConv(FEAT, HIDDEN, heads=2), std),
        "conv.GATv2Conv": (lambda m, nn: nn.GATv2Conv(FEAT, HIDDEN, heads=2, edge_dim=4), with_ea),
        "conv.SAGEConv": (lambda m, nn: nn.SAGEConv(FEAT, HIDDEN), std),
        "conv.GINConv": (lambda m, nn: nn.GINConv(_mlp(FEAT, HIDDEN)), std),
        "conv.GINEConv": (lambda m, nn: nn.GINEConv(_mlp(FEAT, HIDDEN), edge_dim=4), with_ea),
        "conv.EdgeConv": (lambda m, nn: nn.EdgeConv(_mlp(2 * FEAT, HIDDEN)), std),
        "conv.DynamicEdgeConv": (lambda m, nn: nn.DynamicEdgeConv(_mlp(2 * FEAT, HIDDEN), k=3), knn),
        "conv.TransformerConv": (lambda m, nn: nn.TransformerConv(FEAT, HIDDEN, heads=2, edge_dim=4), with_ea),
        "conv.GraphConv": (lambda m, nn: nn.GraphConv(FEAT, HIDDEN), std),
        "conv.ChebConv": (lambda m, nn: nn.ChebConv(FEAT, HIDDEN, K=3), std),
        "conv.GENConv": (lambda m, nn: nn.GENConv(FEAT, HIDDEN, aggr="softmax", learn_t=True), std),
        "conv.GCN2Conv": (lambda m, nn: _InputAsInitial(nn.GCN2Conv(FEAT, alpha=0.1)), std),
        "conv.PNAConv": (lambda m, nn: nn.PNAConv(FEAT, HIDDEN, aggregators=["mean", "max", "std"],
                                                 scalers=["identity", "amplification"], deg=_deg(), edge_dim=4),
                         with_ea),
        "conv.RGCNConv": (lambda m, nn: nn.RGCNConv(FEAT, HIDDEN, num_relations=3), edge_type),
        "conv.NNConv": (lambda m, nn: nn.NNConv(FEAT, HIDDEN, _mlp(4, FEAT * HIDDEN)), with_ea),
        "conv.TAGConv": (lambda m, nn: nn.TAGConv(FEAT, HIDDEN, K=2), std),
        "conv.SGConv": (lambda m, nn: nn.SGConv(FEAT, HIDDEN, K=2), std),
        "conv.APPNP": (lambda m, nn: nn.APPNP(K=3, alpha=0.1), std),
        "conv.ResGatedGraphConv": (lambda m, nn: nn.ResGatedGraphConv(FEAT, HIDDEN), std),
        "conv.GPSConv": (lambda m, nn: nn.GPSConv(FEAT, nn.GCNConv(FEAT, FEAT), heads=2), with_batch),
        # graph classifiers
        "graph.GCNClassifier": (lambda m, nn: _classifier(nn, lambda i, o: nn.GCNConv(i, o)), with_batch),
        "graph.GATClassifier": (lambda m, nn: _classifier(nn, lambda i, o: nn.GATConv(i, o, heads=1)), with_batch),
        "graph.GINClassifier": (lambda m, nn: _classifier(nn, lambda i, o: nn.GINConv(_mlp(i, o))), with_batch),
    }
    return R


def torch_randint_z(x):
    import torch

    return (torch.arange(x.shape[0]) % 5) + 1  # atomic numbers 1..5


class _DenseRadiusGraph:
    """A radius graph in plain torch (pairwise distances, same graph, within cutoff): SchNet's
    default needs the compiled ``pyg-lib``/``torch_cluster``; this one needs nothing."""

    def __init__(self, cutoff: float):
        self.cutoff = cutoff

    def __call__(self, pos, batch):
        import torch

        d = torch.cdist(pos, pos)
        same = batch[:, None] == batch[None, :]
        eye = torch.eye(pos.shape[0], dtype=torch.bool, device=pos.device)
        edge_index = (same & ~eye & (d < self.cutoff)).nonzero().t()
        row, col = edge_index
        return edge_index, (pos[row] - pos[col]).norm(dim=-1)


def _mlp(i: int, o: int):
    import torch

    return torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(), torch.nn.Linear(o, o))


def _deg():
    import torch

    return torch.tensor([0, 2, 4, 4, 2, 1])  # an in-degree histogram for PNA's scalers


def _classifier(nn, conv):
    import torch

    return _GraphClassifier.make(conv, torch, nn)


def _InputAsInitial(conv):
    """GCN2Conv takes (x, x_0, edge_index): wrap it so the call is (x, edge_index)."""
    import torch

    class GCN2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x, edge_index):
            return self.conv(x, x, edge_index)

    return GCN2()


_NAMES = None


def list_names() -> list[str]:
    global _NAMES
    if _NAMES is None:
        _NAMES = sorted(_RECIPE_NAMES)
    return _NAMES


# Names only (torch-free): kept in step with _recipes() by tests/test_zoo.py.
_RECIPE_NAMES = (
    "models.GCN", "models.GraphSAGE", "models.GIN", "models.GAT", "models.GATv2", "models.EdgeCNN",
    "models.PNA", "models.GCN_jk", "models.GraphUNet", "models.AttentiveFP", "models.SchNet",
    "models.DimeNetPlusPlus", "models.MLP",
    "conv.GCNConv", "conv.GATConv", "conv.GATv2Conv", "conv.SAGEConv", "conv.GINConv", "conv.GINEConv",
    "conv.EdgeConv", "conv.DynamicEdgeConv", "conv.TransformerConv", "conv.GraphConv", "conv.ChebConv",
    "conv.GENConv", "conv.GCN2Conv", "conv.PNAConv", "conv.RGCNConv", "conv.NNConv", "conv.TAGConv",
    "conv.SGConv", "conv.APPNP", "conv.ResGatedGraphConv", "conv.GPSConv",
    "graph.GCNClassifier", "graph.GATClassifier", "graph.GINClassifier",
)


def build(name: str, mode: str) -> list[tuple]:
    try:
        import torch_geometric.nn as nn
        import torch_geometric.nn.models as models
    except ImportError as e:
        raise CreateError("missing dependency", "torch_geometric (pip install 'graphstitch[zoo]')") from e
    import torch

    from . import seed_all

    recipes = _recipes()
    if name not in recipes:
        raise CreateError("unknown model", name)
    make, inputs = recipes[name]
    seed_all(0)
    try:
        model = make(models, nn)
    except ImportError as e:
        raise CreateError("missing dependency", getattr(e, "name", None) or str(e)) from e
    except Exception as e:
        raise CreateError("model cannot be built", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from e
    model.train(mode == "train")
    gen = torch.Generator().manual_seed(0)
    kwargs: dict[str, Any] = inputs(*_graph(torch, gen))
    return [(model, (), kwargs)]
