"""Mixture-of-experts dispatch with `torch.where(mask)` per expert (adapted from Mixtral's
sparse MoE block)."""
import torch


class MoE(torch.nn.Module):
    def __init__(self, d, n):
        super().__init__()
        self.gate = torch.nn.Linear(d, n)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(n))

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        w, sel = probs.max(-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            idx = torch.where(sel == i)[0]  # BREAK
            out.index_add_(0, idx, expert(x[idx]) * w[idx, None])
        return out


def target():
    torch.manual_seed(0)
    return [(MoE(4, 3), (torch.randn(8, 4),), {})]


EXPECT = ('split: the expert loop runs eagerly between the compiled gate and the return; the config flag '
          'capture_dynamic_output_shape_ops verifies too (the loop compiled, a process-wide flag) and ranks after it')
