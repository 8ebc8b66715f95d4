"""GraphConv: `if (graph.in_degrees() == 0).any(): raise DGLError(...)` validity check at the top of forward (DGL nn/pytorch/conv/graphconv.py)."""
from contextlib import contextmanager

import torch
from torch import nn


class DGLError(Exception):
    pass


class MiniGraph:
    """A homogeneous graph stored as (src, dst) edge lists; stands in for DGLGraph."""

    def __init__(self, src, dst, num_nodes):
        self.src = src
        self.dst = dst
        self._num_nodes = num_nodes
        self.srcdata = {}
        self.dstdata = {}

    def in_degrees(self):
        return torch.zeros(self._num_nodes, dtype=torch.int64).index_add_(0, self.dst, torch.ones_like(self.dst))

    def out_degrees(self):
        return torch.zeros(self._num_nodes, dtype=torch.int64).index_add_(0, self.src, torch.ones_like(self.src))

    @contextmanager
    def local_scope(self):
        old_srcdata, old_dstdata = self.srcdata, self.dstdata
        self.srcdata, self.dstdata = dict(old_srcdata), dict(old_dstdata)
        yield
        self.srcdata, self.dstdata = old_srcdata, old_dstdata

    def update_all(self, message_func, reduce_func):
        # fn.copy_u("h", "m") followed by fn.sum(msg="m", out="h")
        src_field, _ = message_func
        _, out_field = reduce_func
        msg = self.srcdata[src_field][self.src]
        out = msg.new_zeros((self._num_nodes,) + msg.shape[1:])
        self.dstdata[out_field] = out.index_add_(0, self.dst, msg)


def copy_u(u, out):
    return (u, out)


def fn_sum(msg, out):
    return (msg, out)


class GraphConv(nn.Module):
    def __init__(self, in_feats, out_feats, norm="both", weight=True, bias=True, activation=None,
                 allow_zero_in_degree=False):
        super().__init__()
        if norm not in ("none", "both", "right", "left"):
            raise DGLError('Invalid norm value. Must be either "none", "both", "right" or "left".'
                           ' But got "{}".'.format(norm))
        self._in_feats = in_feats
        self._out_feats = out_feats
        self._norm = norm
        self._allow_zero_in_degree = allow_zero_in_degree

        if weight:
            self.weight = nn.Parameter(torch.Tensor(in_feats, out_feats))
        else:
            self.register_parameter("weight", None)

        if bias:
            self.bias = nn.Parameter(torch.Tensor(out_feats))
        else:
            self.register_parameter("bias", None)

        self.reset_parameters()
        self._activation = activation

    def reset_parameters(self):
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph, feat, weight=None, edge_weight=None):
        with graph.local_scope():
            if not self._allow_zero_in_degree:
                if (graph.in_degrees() == 0).any():  # BREAK
                    raise DGLError(
                        "There are 0-in-degree nodes in the graph, "
                        "output for those nodes will be invalid. "
                        "This is harmful for some applications, "
                        "causing silent performance regression. "
                        "Adding self-loop on the input graph by "
                        "calling `g = dgl.add_self_loop(g)` will resolve "
                        "the issue. Setting ``allow_zero_in_degree`` "
                        "to be `True` when constructing this module will "
                        "suppress the check and let the code run."
                    )
            aggregate_fn = copy_u("h", "m")

            feat_src, feat_dst = feat, feat
            if self._norm in ["left", "both"]:
                degs = graph.out_degrees().to(feat_src).clamp(min=1)
                if self._norm == "both":
                    norm = torch.pow(degs, -0.5)
                else:
                    norm = 1.0 / degs
                shp = norm.shape + (1,) * (feat_src.dim() - 1)
                norm = torch.reshape(norm, shp)
                feat_src = feat_src * norm

            if weight is not None:
                if self.weight is not None:
                    raise DGLError("External weight is provided while at the same time the"
                                   " module has defined its own weight parameter. Please"
                                   " create the module with flag weight=False.")
            else:
                weight = self.weight

            if self._in_feats > self._out_feats:
                # mult W first to reduce the feature size for aggregation.
                if weight is not None:
                    feat_src = torch.matmul(feat_src, weight)
                graph.srcdata["h"] = feat_src
                graph.update_all(aggregate_fn, fn_sum(msg="m", out="h"))
                rst = graph.dstdata["h"]
            else:
                # aggregate first then mult W
                graph.srcdata["h"] = feat_src
                graph.update_all(aggregate_fn, fn_sum(msg="m", out="h"))
                rst = graph.dstdata["h"]
                if weight is not None:
                    rst = torch.matmul(rst, weight)

            if self._norm in ["right", "both"]:
                degs = graph.in_degrees().to(feat_dst).clamp(min=1)
                if self._norm == "both":
                    norm = torch.pow(degs, -0.5)
                else:
                    norm = 1.0 / degs
                shp = norm.shape + (1,) * (feat_dst.dim() - 1)
                norm = torch.reshape(norm, shp)
                rst = rst * norm

            if self.bias is not None:
                rst = rst + self.bias

            if self._activation is not None:
                rst = self._activation(rst)

            return rst


def _ring_with_self_loops(n, skip):
    nodes = torch.arange(n)
    src = torch.cat([nodes, nodes])
    dst = torch.cat([nodes, (nodes + skip) % n])
    return MiniGraph(src, dst, n)


def target():
    torch.manual_seed(0)
    conv = GraphConv(6, 4, norm="both", activation=torch.relu)
    return [
        (conv, (_ring_with_self_loops(5, 1), torch.randn(5, 6)), {}),
        (conv, (_ring_with_self_loops(5, 2), torch.randn(5, 6)), {}),
    ]


EXPECT = ("hatch: `(graph.in_degrees() == 0).any()` only decides whether to raise; move the check into a helper "
          "kept out of the graph with torch.compiler.disable so the DGLError stays and the outputs are equal; "
          "checking once in the caller where the graph is built (then allow_zero_in_degree=True) is the "
          "caller alternative")
