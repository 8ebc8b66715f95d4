"""nanoGPT's loss estimate (karpathy/nanoGPT train.py, the stored revision in which the script's functions are
methods of a `Trainer`: `Trainer.get_batch`, `Trainer.estimate_loss`; the bodies are those of the upstream script's
module-level `get_batch`/`estimate_loss`). Under `@torch.no_grad()` it switches the model to eval, and for each split
fills `losses = torch.zeros(eval_iters)` with `losses[k] = loss.item()` over batches from `get_batch`, which draws
`ix = torch.randint(len(data) - block_size, (batch_size,))` and slices a NumPy token array at each tensor element
(`torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])`); the forward runs under
`with self.ctx:` (a `nullcontext()` on CPU); it returns `{split: losses.mean()}` and switches back to train mode.
Adaptations: the token streams are in-memory `np.uint16` arrays (seeded, vocabulary 32) instead of `np.memmap` views
of `train.bin`/`val.bin`; `Trainer.__init__` keeps only the attributes these methods read (`args` with `block_size`,
`batch_size`, `eval_iters`, `device`; `device_type`; `ctx`; `model`; the data); the CUDA `pin_memory` branch of
`get_batch` is kept but never taken; the GPT (model.py) is replaced by a minimal stand-in with the same
`logits, loss = model(X, Y)` interface (token and position embeddings, one causal self-attention layer via
`F.scaled_dot_product_attention`, a linear head, `F.cross_entropy(..., ignore_index=-1)`). So that a call repeats
exactly, the called function seeds torch's global generator first (`torch.manual_seed`, as the script does once at
start-up; here per call, an adaptation). The two calls use trainers with different block/batch sizes and `eval_iters`."""
from contextlib import nullcontext
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F


class GPTStandIn(nn.Module):
    """Adaptation: stand-in for nanoGPT's GPT with the same forward interface."""

    def __init__(self, vocab_size=32, block_size=16, n_embd=16):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        q, k, v = self.c_attn(x).split(x.size(-1), dim=2)
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


class Trainer:
    def __init__(self, args, model, train_data, val_data):
        self.args = args
        self.device_type = 'cuda' if 'cuda' in self.args.device else 'cpu'
        self.ctx = nullcontext()
        self.model = model
        self.train_data = train_data
        self.val_data = val_data

    def get_batch(self, split):
        data = self.train_data if split == 'train' else self.val_data
        ix = torch.randint(len(data) - self.args.block_size, (self.args.batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i+self.args.block_size]).astype(np.int64)) for i in ix])  # BREAK
        y = torch.stack([torch.from_numpy((data[i+1:i+1+self.args.block_size]).astype(np.int64)) for i in ix])  # BREAK
        if self.device_type == 'cuda':
            x, y = x.pin_memory().to(self.args.device, non_blocking=True), y.pin_memory().to(self.args.device, non_blocking=True)
        else:
            x, y = x.to(self.args.device), y.to(self.args.device)
        return x, y

    @torch.no_grad()
    def estimate_loss(self):
        out = {}
        self.model.eval()
        for split in ['train', 'val']:
            losses = torch.zeros(self.args.eval_iters)
            for k in range(self.args.eval_iters):
                X, Y = self.get_batch(split)
                with self.ctx:
                    logits, loss = self.model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        self.model.train()
        return out


def evaluate(trainer, seed):
    torch.manual_seed(seed)  # adaptation: fixes the batch draws  # BREAK
    return trainer.estimate_loss()


def target():
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    train_data = rng.randint(0, 32, size=400).astype(np.uint16)
    val_data = rng.randint(0, 32, size=120).astype(np.uint16)
    model = GPTStandIn(vocab_size=32, block_size=16, n_embd=16)
    args1 = SimpleNamespace(block_size=8, batch_size=4, eval_iters=3, device='cpu')
    args2 = SimpleNamespace(block_size=16, batch_size=2, eval_iters=5, device='cpu')
    return [
        (evaluate, (Trainer(args1, model, train_data, val_data), 1337), {}),
        (evaluate, (Trainer(args2, model, train_data, val_data), 7), {}),
    ]


EXPECT = ("rewrite: keep the loss on the device: `losses[k] = loss` instead of `loss.item()` (the mean is "
          "returned as a tensor anyway); the batch draw slices a NumPy array at each element of a `torch.randint` "
          "tensor (a host round trip per row), which belongs to the caller (or becomes a tensor gather over "
          "`torch.from_numpy(data)` with `ix[:, None] + torch.arange(block_size)`)")
