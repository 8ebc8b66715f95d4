"""Attention.forward filters cross_attention_kwargs by inspect.signature(processor.__call__) (diffusers)."""
import inspect
import logging

import torch

logger = logging.getLogger(__name__)


class AttnProcessor:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
        ctx = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        q, k, v = attn.to_q(hidden_states), attn.to_k(ctx), attn.to_v(ctx)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        return attn.to_out(out)


class Attention(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.to_q, self.to_k, self.to_v = (torch.nn.Linear(d, d) for _ in range(3))
        self.to_out = torch.nn.Linear(d, d)
        self.processor = AttnProcessor()

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        attn_parameters = set(inspect.signature(self.processor.__call__).parameters.keys())
        quiet_attn_parameters = {"ip_adapter_masks", "ip_hidden_states"}
        unused_kwargs = [
            k for k, _ in cross_attention_kwargs.items() if k not in attn_parameters and k not in quiet_attn_parameters
        ]
        if len(unused_kwargs) > 0:
            logger.warning(f"cross_attention_kwargs {unused_kwargs} are not expected by "  # BREAK
                           f"{self.processor.__class__.__name__} and will be ignored.")
        cross_attention_kwargs = {k: w for k, w in cross_attention_kwargs.items() if k in attn_parameters}
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **cross_attention_kwargs)


def target():
    torch.manual_seed(0)
    return [(Attention(8), (torch.randn(2, 5, 8), torch.randn(2, 3, 8)), {"scale": 1.0})]


EXPECT = ("split: the census puts the break on logger.warning (a kwarg the processor does not take), not on "
          "inspect.signature, which 2.13 traces; the warning runs eagerly between compiled parts with its text kept; "
          "config reorderable_logging_functions would also do (a process-wide flag). [revised after the census, "
          "before any fix run: the first guess was 'rewrite' of the inspect.signature call]")
