"""add_remaining_self_loops: boolean-mask indexing `edge_index[:, mask]` with `mask = edge_index[0] != edge_index[1]` inside gcn_norm (PyG utils/loop.py, nn/conv/gcn_conv.py)."""
from typing import Optional

import torch
from torch import Tensor


def maybe_num_nodes(edge_index, num_nodes=None):
    if num_nodes is not None:
        return num_nodes
    elif isinstance(edge_index, Tensor):
        return int(edge_index.max()) + 1 if edge_index.numel() > 0 else 0
    else:
        return max(edge_index.size(0), edge_index.size(1))


def scatter(src: Tensor, index: Tensor, dim: int = 0, dim_size: Optional[int] = None, reduce: str = "sum") -> Tensor:
    if dim_size is None:
        dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
    size = list(src.size())
    size[dim] = dim_size
    if reduce == "sum" or reduce == "add":
        index = index.view([-1] + [1] * (src.dim() - 1)).expand_as(src)
        return src.new_zeros(size).scatter_add_(dim, index, src)
    raise ValueError(f"Encountered invalid `reduce` argument '{reduce}'")


def add_remaining_self_loops(
    edge_index: Tensor,
    edge_attr: Optional[Tensor] = None,
    fill_value=None,
    num_nodes: Optional[int] = None,
):
    N = maybe_num_nodes(edge_index, num_nodes)
    mask = edge_index[0] != edge_index[1]

    loop_index = torch.arange(0, N, dtype=torch.long, device=edge_index.device)
    loop_index = loop_index.unsqueeze(0).repeat(2, 1)

    if edge_attr is not None:
        if fill_value is None:
            loop_attr = edge_attr.new_full((N, ) + edge_attr.size()[1:], 1.)

        elif isinstance(fill_value, (int, float)):
            loop_attr = edge_attr.new_full((N, ) + edge_attr.size()[1:],
                                           fill_value)
        else:
            raise AttributeError("No valid 'fill_value' provided")

        inv_mask = ~mask
        loop_attr[edge_index[0][inv_mask]] = edge_attr[inv_mask]

        edge_attr = torch.cat([edge_attr[mask], loop_attr], dim=0)

    edge_index = torch.cat([edge_index[:, mask], loop_index], dim=1)  # BREAK
    return edge_index, edge_attr


def gcn_norm(edge_index, edge_weight=None, num_nodes=None, improved=False,
             add_self_loops=True, flow="source_to_target", dtype=None):

    fill_value = 2. if improved else 1.

    assert flow in ['source_to_target', 'target_to_source']
    num_nodes = maybe_num_nodes(edge_index, num_nodes)

    if add_self_loops:
        edge_index, edge_weight = add_remaining_self_loops(
            edge_index, edge_weight, fill_value, num_nodes)

    if edge_weight is None:
        edge_weight = torch.ones((edge_index.size(1), ), dtype=dtype,
                                 device=edge_index.device)

    row, col = edge_index[0], edge_index[1]
    idx = col if flow == 'source_to_target' else row
    deg = scatter(edge_weight, idx, dim=0, dim_size=num_nodes, reduce='sum')
    deg_inv_sqrt = deg.pow_(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0)
    edge_weight = deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col]

    return edge_index, edge_weight


class GCNConv(torch.nn.Module):
    def __init__(self, in_channels, out_channels, improved=False, add_self_loops=True, bias=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.improved = improved
        self.add_self_loops = add_self_loops
        self.flow = "source_to_target"
        self.node_dim = -2
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        if bias:
            self.bias = torch.nn.Parameter(torch.zeros(out_channels))
        else:
            self.register_parameter('bias', None)

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Optional[Tensor] = None) -> Tensor:
        x = self.lin(x)

        edge_index, edge_weight = gcn_norm(  # yapf: disable
            edge_index, edge_weight, x.size(self.node_dim),
            self.improved, self.add_self_loops, self.flow, x.dtype)

        # propagate: message edge_weight * x_j, aggregate "add" at the target node
        x_j = x.index_select(self.node_dim, edge_index[0])
        msg = edge_weight.view(-1, 1) * x_j
        out = scatter(msg, edge_index[1], dim=0, dim_size=x.size(self.node_dim), reduce='sum')

        if self.bias is not None:
            out = out + self.bias

        return out


def target():
    torch.manual_seed(0)
    conv = GCNConv(5, 3)
    ei1 = torch.tensor([[0, 1, 1, 2, 3, 3, 4], [1, 0, 1, 3, 2, 4, 0]])
    ei2 = torch.tensor([[0, 0, 2, 2, 4, 1], [0, 2, 0, 4, 2, 3]])
    return [
        (conv, (torch.randn(5, 5), ei1), {}),
        (conv, (torch.randn(5, 5), ei2), {}),
    ]


EXPECT = ("config: `edge_index[:, mask]` is boolean-mask indexing, a dynamic-output-shape op; "
          "torch._dynamo.config.capture_dynamic_output_shape_ops=True traces it; a rewrite that keeps every edge "
          "and zeroes the weight of the existing self-loops would also give equal node outputs")
