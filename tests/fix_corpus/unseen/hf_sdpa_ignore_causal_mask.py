"""SDPA mask preparation that drops an all-ones attention mask to use is_causal (transformers AttentionMaskConverter)."""
import torch


def _ignore_causal_mask_sdpa(attention_mask, inputs_embeds, past_key_values_length):
    _, query_length = inputs_embeds.shape[0], inputs_embeds.shape[1]
    key_value_length = query_length + past_key_values_length
    is_tracing = torch.jit.is_tracing() or isinstance(inputs_embeds, torch.fx.Proxy)
    ignore_causal_mask = False
    if attention_mask is None:
        if not is_tracing and (query_length == 1 or key_value_length == query_length):
            ignore_causal_mask = True
    elif not is_tracing and torch.all(attention_mask == 1):  # noqa: SIM102  # BREAK
        if query_length == 1 or key_value_length == query_length:
            ignore_causal_mask = True
    return ignore_causal_mask


def prepare_4d_causal_attention_mask_for_sdpa(attention_mask, inputs_embeds, past_key_values_length=0):
    if _ignore_causal_mask_sdpa(attention_mask, inputs_embeds, past_key_values_length):
        return None
    q = inputs_embeds.shape[1]
    causal = torch.ones(q, q, dtype=torch.bool).tril()
    mask = causal[None, None] & attention_mask[:, None, None, :].bool()
    return torch.zeros(mask.shape, dtype=inputs_embeds.dtype).masked_fill(~mask, torch.finfo(inputs_embeds.dtype).min)


class SelfAttention(torch.nn.Module):
    def __init__(self, d, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)

    def forward(self, inputs_embeds, attention_mask):
        b, t, d = inputs_embeds.shape
        mask = prepare_4d_causal_attention_mask_for_sdpa(attention_mask, inputs_embeds)
        q, k, v = self.qkv(inputs_embeds).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                               is_causal=mask is None and t > 1)
        return out.transpose(1, 2).reshape(b, t, d)


def target():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8)
    return [(SelfAttention(8), (x, torch.ones(2, 4, dtype=torch.long)), {}),
            (SelfAttention(8), (x, torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]])), {})]


EXPECT = ("rewrite: under compile the shortcut buys nothing, so treat compiling as tracing (transformers later added "
          "is_torchdynamo_compiling() to is_tracing) and always build the explicit mask; equal outputs")
