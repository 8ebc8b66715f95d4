"""PyG-style edge softmax whose node count comes from ``int(index.max()) + 1`` (maybe_num_nodes)."""
import torch


def maybe_num_nodes(index, num_nodes=None):
    if num_nodes is not None:
        return num_nodes
    return int(index.max()) + 1 if index.numel() > 0 else 0  # BREAK


def edge_softmax(src, index, num_nodes=None):
    n = maybe_num_nodes(index, num_nodes)
    size = (n,) + tuple(src.shape[1:])
    src_max = src.new_full(size, float("-inf")).scatter_reduce(
        0, index.view(-1, 1).expand_as(src), src, reduce="amax", include_self=True)
    out = (src - src_max.index_select(0, index)).exp()
    out_sum = src.new_zeros(size).index_add(0, index, out) + 1e-16
    return out / out_sum.index_select(0, index)


class AttentionAggr(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.att = torch.nn.Linear(2 * d, 1)

    def forward(self, x, edge_index):
        src, dst = edge_index
        alpha = self.att(torch.cat([x[src], x[dst]], dim=-1))
        alpha = edge_softmax(alpha, dst)
        n = x.size(0)
        return x.new_zeros(n, x.size(1)).index_add(0, dst, alpha * x[src])


def target():
    torch.manual_seed(0)
    x = torch.randn(6, 4)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 1, 2], [1, 2, 3, 4, 5, 0, 0, 5]])
    return [(AttentionAggr(4), (x, edge_index), {})]


EXPECT = ("config: capture_scalar_outputs=True lets int(index.max()) become an unbacked size for new_full/new_zeros; "
          "a caller fix (pass num_nodes=x.size(0), as PyG callers do) would be the better source change")
