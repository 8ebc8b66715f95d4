"""Transformer encoder that zeroes padded positions only `if has_pads` (fairseq TransformerEncoder)."""
import torch


class EncoderLayer(torch.nn.Module):
    def __init__(self, d, heads=2):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d, heads)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x, encoder_padding_mask=None):
        h, _ = self.attn(x, x, x, key_padding_mask=encoder_padding_mask, need_weights=False)
        return self.norm(x + h)


class Encoder(torch.nn.Module):
    def __init__(self, vocab=20, d=8, layers=2, padding_idx=1):
        super().__init__()
        self.padding_idx = padding_idx
        self.embed_tokens = torch.nn.Embedding(vocab, d, padding_idx=padding_idx)
        self.embed_scale = d ** 0.5
        self.layers = torch.nn.ModuleList(EncoderLayer(d) for _ in range(layers))

    def forward_embedding(self, src_tokens):
        embed = self.embed_scale * self.embed_tokens(src_tokens)
        return embed, embed

    def forward(self, src_tokens):
        # compute padding mask
        encoder_padding_mask = src_tokens.eq(self.padding_idx)
        has_pads = src_tokens.device.type == "xla" or encoder_padding_mask.any()
        x, encoder_embedding = self.forward_embedding(src_tokens)
        # account for padding while computing the representation
        if has_pads:  # BREAK
            x = x * (1 - encoder_padding_mask.unsqueeze(-1).type_as(x))
        # B x T x C -> T x B x C
        x = x.transpose(0, 1)
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=encoder_padding_mask if has_pads else None)  # BREAK
        return x.transpose(0, 1)


def target():
    torch.manual_seed(0)
    tokens = torch.tensor([[5, 6, 7, 8, 1, 1], [4, 3, 9, 2, 2, 6]])
    return [(Encoder().eval(), (tokens,), {})]


EXPECT = ("rewrite: the multiply is a no-op without pads and an all-False key_padding_mask equals None, so "
          "dropping the has_pads test (always mask) removes the break with equal outputs")
