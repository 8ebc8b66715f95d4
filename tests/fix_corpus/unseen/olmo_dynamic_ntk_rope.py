"""Dynamic-NTK rotary embedding: `if seq_len > max_position_embeddings` re-registers inv_freq (transformers Olmo/Llama)."""
import torch


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, max_position_embeddings=8, base=10000.0):
        super().__init__()
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class DynamicNTKScalingRotaryEmbedding(RotaryEmbedding):
    def __init__(self, dim, max_position_embeddings=8, base=10000.0, scaling_factor=2.0):
        super().__init__(dim, max_position_embeddings, base)
        self.scaling_factor = scaling_factor

    def forward(self, x, position_ids):
        seq_len = torch.max(position_ids) + 1
        if seq_len > self.max_position_embeddings:  # BREAK
            base = self.base * (
                (self.scaling_factor * seq_len / self.max_position_embeddings) - (self.scaling_factor - 1)
            ) ** (self.dim / (self.dim - 2))
            inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float().to(x.device) / self.dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
        cos, sin = super().forward(x, position_ids)
        return cos, sin


def target():
    torch.manual_seed(0)
    x = torch.randn(1, 12, 4)
    return [(DynamicNTKScalingRotaryEmbedding(4), (x, torch.arange(12)[None]), {})]


EXPECT = ("split: the branch replaces a module buffer (register_buffer) when the positions pass the trained length, "
          "so neither torch.where nor torch.cond can express it; running the check eagerly between compiled parts "
          "is the honest fix (a where-rewrite that drops the buffer update changes later calls)")
