"""Legacy `torch.backends.cuda.sdp_kernel` context around attention (diffusers/transformers)."""
import torch
import torch.nn.functional as F


def attend(q, k, v):
    with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):  # BREAK
        out = F.scaled_dot_product_attention(q, k, v)
    return out * 2


def target():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 5, 4).unbind(0)
    return [(attend, (q, k, v), {})]


EXPECT = 'rewrite'
