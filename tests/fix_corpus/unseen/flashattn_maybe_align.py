"""Fused dropout-add-LayerNorm wrapper that clones inputs whose data_ptr() is misaligned (flash-attn ops)."""
import torch


def maybe_align(x, alignment_in_bytes=16):
    """Assume that x already has last dim divisible by alignment_in_bytes"""
    return x if x.data_ptr() % alignment_in_bytes == 0 else x.clone()  # BREAK


def dropout_add_layer_norm(x0, residual, weight, bias, p, eps, training):
    x0 = maybe_align(x0.contiguous(), 16)
    residual = maybe_align(residual.contiguous(), 16) if residual is not None else None
    weight = maybe_align(weight.contiguous(), 16)
    x = torch.nn.functional.dropout(x0, p, training) + (residual if residual is not None else 0)
    return torch.nn.functional.layer_norm(x, weight.shape, weight, bias, eps), x


class DropoutAddLayerNorm(torch.nn.Module):
    def __init__(self, d, p=0.0):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.p = p

    def forward(self, x0, residual=None):
        out, _ = dropout_add_layer_norm(x0, residual, self.norm.weight, self.norm.bias, self.p, self.norm.eps,
                                        self.training)
        return out


def target():
    torch.manual_seed(0)
    return [(DropoutAddLayerNorm(8).eval(), (torch.randn(2, 3, 8), torch.randn(2, 3, 8)), {})]


EXPECT = ("rewrite: inside a compiled region alignment is the compiler's business, so the data_ptr() check can go "
          "(x.clone() and x are equal values); otherwise hatch/extract the helper")
