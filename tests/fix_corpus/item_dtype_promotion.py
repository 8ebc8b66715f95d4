"""`.item()` of a float64 statistic times an int tensor: keeping the 0-d float64 tensor
promotes the result to float64 (a Python float gives float32). Plausible, must be refused."""
import torch


def rescale(counts, stats):
    scale = stats.std().item()  # BREAK
    return counts * scale


def target():
    torch.manual_seed(0)
    return [(rescale, (torch.randint(0, 10, (6,)), torch.randn(32, dtype=torch.float64)), {})]


EXPECT = 'config'
