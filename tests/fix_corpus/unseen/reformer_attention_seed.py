"""Attention that reseeds torch from torch.seed() before its dropout, for a deterministic recompute (transformers Reformer)."""
import sys

import torch


class LSHSelfAttentionLite(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qk = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.dropout = torch.nn.Dropout(0.1)
        self.attention_seed = None

    def _init_attention_seed(self):
        """Set a new seed so that dropout is the same in the forward and in the recompute in backward."""
        if hasattr(torch.cuda, "default_generators") and len(torch.cuda.default_generators) > 0:
            device_idx = torch.cuda.current_device()
            self.attention_seed = torch.cuda.default_generators[device_idx].seed()
        else:
            self.attention_seed = int(torch.seed() % sys.maxsize)
        torch.manual_seed(self.attention_seed)  # BREAK

    def forward(self, x):
        qk = self.qk(x)
        scores = qk @ qk.transpose(-1, -2) / x.size(-1) ** 0.5
        if self.training:
            self._init_attention_seed()
        probs = self.dropout(scores.softmax(-1))
        return probs @ self.v(x)


def target():
    torch.manual_seed(0)
    return [(LSHSelfAttentionLite(8).train(), (torch.randn(2, 5, 8),), {})]


EXPECT = ("none: the forward reseeds torch from torch.seed() (a nondeterministic source) before a dropout, so no fix "
          "can be shown equal to eager; a fix that claims verification here is a false verification")
