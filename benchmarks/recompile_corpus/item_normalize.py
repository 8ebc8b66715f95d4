"""Peak normalisation that reads the peak as a Python float."""
import torch

EXPECT = "fixed"


def normalize(wave):
    peak = wave.abs().max().item()
    return wave / peak


def target():
    torch.manual_seed(0)
    return [(normalize, (torch.randn(128) * k,), {}) for k in (0.5, 2.0, 3.0)]
