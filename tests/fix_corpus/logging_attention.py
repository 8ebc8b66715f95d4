"""`logger.debug` inside attention (adapted from transformers/diffusers attention processors)."""
import logging

import torch

logger = logging.getLogger("corpus.attn")


def attention(q, k, v):
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    logger.debug("attention scores %s", tuple(scores.shape))  # BREAK
    return scores.softmax(-1) @ v


def target():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 4).unbind(0)
    return [(attention, (q, k, v), {})]


EXPECT = ('rewrite: logger.debug -> a module-level function registered in reorderable_logging_functions; the '
          'record is still emitted on every call')
