"""make_pad_mask: `lengths.tolist()` then `seq_range_expand.new(lengths)` to build a padding mask (ESPnet nets_utils)."""
import torch


def make_pad_mask(lengths, xs=None, length_dim=-1, maxlen=None):
    if not isinstance(lengths, list):
        lengths = lengths.long().tolist()  # BREAK
    bs = int(len(lengths))
    if maxlen is None:
        if xs is None:
            maxlen = int(max(lengths))
        else:
            maxlen = xs.size(length_dim)
    seq_range = torch.arange(0, maxlen, dtype=torch.int64)
    seq_range_expand = seq_range.unsqueeze(0).expand(bs, maxlen)
    seq_length_expand = seq_range_expand.new(lengths).unsqueeze(-1)
    return seq_range_expand >= seq_length_expand


class MaskedMeanPool(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, d)

    def forward(self, xs_pad, ilens):
        masks = ~make_pad_mask(ilens, xs_pad[:, :, 0])
        h = self.proj(xs_pad) * masks.unsqueeze(-1)
        return h.sum(1) / ilens.unsqueeze(-1)


def target():
    torch.manual_seed(0)
    return [(MaskedMeanPool(4), (torch.randn(3, 6, 4), torch.tensor([6, 4, 2])), {})]


EXPECT = ("rewrite: when xs is given maxlen is static, so the mask is `arange(maxlen)[None] >= lengths[:, None]` "
          "with no tolist(); the `max(lengths)` path (xs None) is never taken here")
