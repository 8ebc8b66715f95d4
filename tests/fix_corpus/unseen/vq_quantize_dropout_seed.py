"""Residual VQ with quantize-dropout: a seed drawn by randint().item() feeds random.Random (vector-quantize-pytorch)."""
import random

import torch


def get_maybe_sync_seed(device, max_size=10_000):
    rand_int = torch.randint(0, max_size, (), device=device)
    return rand_int.item()  # BREAK


class Quantizer(torch.nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.codebook = torch.nn.Parameter(torch.randn(k, d))

    def forward(self, x):
        dist = torch.cdist(x, self.codebook.unsqueeze(0).expand(x.size(0), -1, -1))
        idx = dist.argmin(-1)
        q = self.codebook[idx]
        return x + (q - x).detach(), idx


class ResidualVQ(torch.nn.Module):
    def __init__(self, d=4, k=8, num_quantizers=4, cutoff=1):
        super().__init__()
        self.layers = torch.nn.ModuleList(Quantizer(d, k) for _ in range(num_quantizers))
        self.quantize_dropout_cutoff_index = cutoff

    def forward(self, x, rand_quantize_dropout_fixed_seed=None):
        num_quant = len(self.layers)
        quantized_out = 0.0
        residual = x
        all_indices = []
        should_quantize_dropout = self.training
        if should_quantize_dropout:
            if rand_quantize_dropout_fixed_seed is None:
                rand_quantize_dropout_fixed_seed = get_maybe_sync_seed(x.device)
            rand = random.Random(rand_quantize_dropout_fixed_seed)
            rand_quantize_dropout_index = rand.randrange(self.quantize_dropout_cutoff_index, num_quant)
            null_indices = torch.full(x.shape[:2], -1, device=x.device, dtype=torch.long)
        for quantizer_index, layer in enumerate(self.layers):
            if should_quantize_dropout and quantizer_index > rand_quantize_dropout_index:  # BREAK
                all_indices.append(null_indices)
                continue
            quantized, indices = layer(residual)
            residual = residual - quantized.detach()
            quantized_out = quantized_out + quantized
            all_indices.append(indices)
        return quantized_out, torch.stack(all_indices, dim=-1)


def target():
    torch.manual_seed(0)
    return [(ResidualVQ().train(), (torch.randn(2, 5, 4),), {})]


EXPECT = ("hatch: the seed must be a Python int drawn from torch's stream (and all-reduced in the original), so "
          "keeping get_maybe_sync_seed eager (disable/extract) is right; a rewrite into tensor ops changes the "
          "python-random draw. The second site (the `quantizer_index > rand_quantize_dropout_index` test, a "
          "data-dependent branch once the seed is symbolic) should go with the first, or need a split/hatch "
          "[second site added after the census, before any fix run]")
