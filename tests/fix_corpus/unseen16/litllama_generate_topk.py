"""Top-k sampling generation from Lightning-AI/lit-llama (`generate.py` `generate` and `main`'s sampling loop;
`lit_llama/model.py` at a revision with the `complex_rope` option: `LLaMAConfig` dataclass with `from_name`,
`LLaMA.forward` (f-string `assert` on the block size, `ModuleDict` transformer), `Block`, `CausalSelfAttention`
(lazily built `self.rope_cache` on the first forward, `apply_rope`, `F.scaled_dot_product_attention(is_causal=True)`),
`MLP` (hidden size rounded up to a multiple of 256), `RMSNorm`, `build_rope_cache`, `apply_rope`,
`rotate_neg_half`). `generate` is decorated with `@torch.no_grad()`, writes the prompt into an `empty` tensor, loops
`for t in range(T, T_new)` over growing `idx[:, :t]` prefixes (crop when `T > max_seq_length`), scales the last
logits by the temperature, masks below the top-k with `logits[logits < v[:, [-1]]] = -float("Inf")`, draws
with `torch.multinomial`, and writes `idx[:, t] = idx_next`.
Adaptations: the checkpoint, `Tokenizer` (sentencepiece model file) and `lightning.Fabric` are replaced: the model is
a tiny `LLaMAConfig` (`block_size` 32, vocabulary 64, 2 layers, 2 heads, 32-wide) with `complex_rope=False` (the
complex branch imports `lit_llama.utils`, not opened), randomly initialised in the factory; the tokenizer is a
character-level stand-in with `encode(prompt, bos, eos)`/`decode`; `L.seed_everything(1234)` is `torch.manual_seed`;
`main` is the called function `sample_main` from the encoding of the prompt to the samples loop (the `print`s of
the decoded text and the timing line to stderr kept, the CUDA memory line left out). The sampling seeds torch as
the original does, so a call repeats; the lazily built rope cache is the same on every call. It returns the
generated ids of every sample."""
import math
import sys
import time
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
from torch.nn import functional as F
from typing_extensions import Self


# ---- lit_llama/model.py
@dataclass
class LLaMAConfig:
    block_size: int = 4096
    vocab_size: int = 32000
    n_layer: int = 32
    n_head: int = 32
    n_embd: int = 4096
    complex_rope: bool = True

    @classmethod
    def from_name(cls, name: str) -> Self:
        return llama_configs[name]


llama_configs = {
    "7B": LLaMAConfig(n_layer=32, n_head=32, n_embd=4096),
    "13B": LLaMAConfig(n_layer=40, n_head=40, n_embd=5120),
    "30B": LLaMAConfig(n_layer=60, n_head=52, n_embd=6656),
    "65B": LLaMAConfig(n_layer=80, n_head=64, n_embd=8192),
    # adaptation: a tiny configuration
    "tiny": LLaMAConfig(block_size=32, vocab_size=64, n_layer=2, n_head=2, n_embd=32, complex_rope=False),
}


class LLaMA(nn.Module):
    def __init__(self, config: LLaMAConfig) -> None:
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.config = config

        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=RMSNorm(config.n_embd),
            )
        )

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layer))
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layer))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        _, t = idx.size()
        assert (
            t <= self.config.block_size
        ), f"Cannot forward sequence of length {t}, block size is only {self.config.block_size}"

        # forward the LLaMA model itself
        x = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)

        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)

        logits = self.lm_head(x)  # (b, t, vocab_size)

        return logits

    @classmethod
    def from_name(cls, name: str) -> Self:
        return cls(LLaMAConfig.from_name(name))


class Block(nn.Module):
    def __init__(self, config: LLaMAConfig) -> None:
        super().__init__()
        self.rms_1 = RMSNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.rms_2 = RMSNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.rms_1(x))
        x = x + self.mlp(self.rms_2(x))
        return x


class CausalSelfAttention(nn.Module):
    def __init__(self, config: LLaMAConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0

        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)

        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.block_size = config.block_size
        self.complex_rope = config.complex_rope
        self.rope_cache = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)

        head_size = C // self.n_head
        k = k.view(B, T, self.n_head, head_size).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, head_size).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, head_size).transpose(1, 2)  # (B, nh, T, hs)

        if self.rope_cache is None:
            # cache for future forward calls
            self.rope_cache = build_rope_cache(
                seq_len=self.block_size,
                n_elem=self.n_embd // self.n_head,
                dtype=x.dtype,
                device=x.device,
                complex=self.complex_rope,
            )

        q = apply_rope(q, self.rope_cache)
        k = apply_rope(k, self.rope_cache)

        # efficient attention using Flash Attention CUDA kernels
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)

        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.c_proj(y)

        return y


class MLP(nn.Module):
    def __init__(self, config: LLaMAConfig) -> None:
        super().__init__()
        hidden_dim = 4 * config.n_embd
        n_hidden = int(2 * hidden_dim / 3)
        N = 256
        # ensure n_hidden is multiple of N
        n_hidden = ((n_hidden - 1) // N) * N + N

        self.c_fc1 = nn.Linear(config.n_embd, n_hidden, bias=False)
        self.c_fc2 = nn.Linear(config.n_embd, n_hidden, bias=False)
        self.c_proj = nn.Linear(n_hidden, config.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.c_fc1(x)) * self.c_fc2(x)
        x = self.c_proj(x)
        return x


class RMSNorm(nn.Module):
    """Root Mean Square Layer Normalization."""

    def __init__(self, size: int, dim: int = -1, eps: float = 1e-5) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(size))
        self.eps = eps
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norm_x = torch.mean(x * x, dim=self.dim, keepdim=True)
        x_normed = x * torch.rsqrt(norm_x + self.eps)
        return self.scale * x_normed


def build_rope_cache(seq_len: int, n_elem: int, dtype: torch.dtype, device: torch.device, base: int = 10000, complex: bool = False) -> torch.Tensor:
    """Enhanced Transformer with Rotary Position Embedding."""
    if complex:
        from lit_llama.utils import build_rope_cache_complex

        return build_rope_cache_complex(seq_len=seq_len, n_elem=n_elem, dtype=dtype, device=device, base=base)

    # $\Theta = {\theta_i = 10000^{\frac{2(i-1)}{d}}, i \in [1, 2, ..., \frac{d}{2}]}$
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=dtype, device=device) / n_elem))

    # Create position indexes `[0, 1, ..., seq_len - 1]`
    seq_idx = torch.arange(seq_len, dtype=dtype, device=device)

    # Calculate the product of position index and $\theta_i$
    idx_theta = torch.outer(seq_idx, theta)

    # Concatenate so that for row $m$ we have
    idx_theta2 = torch.cat([idx_theta, idx_theta], dim=1)

    # Cache them
    cos_cache = idx_theta2.cos()[None, None, :, :]
    sin_cache = idx_theta2.sin()[None, None, :, :]

    return torch.stack((cos_cache, sin_cache), dim=0)


def apply_rope(x: torch.Tensor, rope_cache: torch.Tensor) -> torch.Tensor:
    if rope_cache.dtype in (torch.complex32, torch.complex64):
        from lit_llama.utils import apply_rope_complex

        return apply_rope_complex(x, rope_cache)

    neg_half_x = rotate_neg_half(x)
    cos, sin = rope_cache
    # truncate to support variable sizes
    T = x.size(2)
    cos = cos[:, :, :T]
    sin = sin[:, :, :T]
    return (x * cos) + (neg_half_x * sin)


def rotate_neg_half(x: torch.Tensor) -> torch.Tensor:
    # $\frac{d}{2}$
    d_2 = x.shape[-1] // 2
    return torch.cat([-x[:, :, :, d_2:], x[:, :, :, :d_2]], dim=-1)


# ---- generate.py
@torch.no_grad()
def generate(
    model: torch.nn.Module,
    idx: torch.Tensor,
    max_new_tokens: int,
    max_seq_length: int,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
) -> torch.Tensor:
    """Takes a conditioning sequence (prompt) as input and continues to generate as many tokens as requested."""
    # create an empty tensor of the expected final shape and fill in the current tokens
    B, T = idx.shape
    T_new = T + max_new_tokens
    empty = torch.empty(B, T_new, dtype=idx.dtype, device=idx.device)
    empty[:, :T] = idx
    idx = empty

    # generate max_new_tokens tokens
    for t in range(T, T_new):
        # ignore the not-filled-yet tokens
        idx_cond = idx[:, :t]
        # if the sequence context is growing too long we must crop it at max_seq_length
        idx_cond = idx_cond if T <= max_seq_length else idx_cond[:, -max_seq_length:]

        # forward
        logits = model(idx_cond)
        logits = logits[:, -1, :] / temperature

        # optionally crop the logits to only the top k options
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float("Inf")

        probs = torch.nn.functional.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1)

        # concatenate the new column
        idx[:, t] = idx_next

    return idx


# ---- stand-in for lit_llama.Tokenizer (sentencepiece)
class Tokenizer:
    def __init__(self, vocab_size=64):
        self.vocab_size = vocab_size
        self.bos_id, self.eos_id = 1, 2

    def encode(self, string: str, bos: bool = True, eos: bool = False) -> torch.Tensor:
        tokens = [3 + (ord(c) % (self.vocab_size - 3)) for c in string]
        if bos:
            tokens = [self.bos_id] + tokens
        if eos:
            tokens = tokens + [self.eos_id]
        return torch.tensor(tokens, dtype=torch.int)

    def decode(self, t: torch.Tensor) -> str:
        return "".join(chr(32 + (int(i) - 3) % 95) for i in t.tolist() if int(i) >= 3)  # BREAK


# ---- generate.py main (from the prompt encoding on)
def sample_main(model, tokenizer, prompt: str = "Hello, my name is", *, num_samples: int = 1,
                max_new_tokens: int = 50, top_k: int = 200, temperature: float = 0.8):
    encoded_prompt = tokenizer.encode(prompt, bos=True, eos=False)
    encoded_prompt = encoded_prompt[None, :]

    torch.manual_seed(1234)  # L.seed_everything(1234)  # BREAK
    t0 = time.time()  # BREAK

    samples = []
    for _ in range(num_samples):
        y = generate(
            model,
            encoded_prompt,
            max_new_tokens,
            model.config.block_size,  # type: ignore[union-attr,arg-type]
            temperature=temperature,
            top_k=top_k,
        )
        print(tokenizer.decode(y[0]))
        samples.append(y)

    t = time.time() - t0
    print(f"\n\nTime for inference: {t:.02f} sec total, {max_new_tokens / t:.02f} tokens/sec", file=sys.stderr)
    return samples


def target():
    torch.manual_seed(0)
    model = LLaMA.from_name("tiny")
    model.apply(model._init_weights)
    model.eval()
    tokenizer = Tokenizer(vocab_size=model.config.vocab_size)
    return [
        (sample_main, (model, tokenizer), {"prompt": "Hello, my name is", "num_samples": 2, "max_new_tokens": 8,
                                          "top_k": 20}),
        (sample_main, (model, tokenizer), {"prompt": "The cat", "num_samples": 1, "max_new_tokens": 12,
                                          "top_k": 5, "temperature": 1.0}),
    ]


EXPECT = ("extract: the model forward compiles; `generate`'s Python loop over growing prefixes (a new shape each "
          "step), the top-k masking by boolean index assignment, `multinomial` sampling and the host-side decode "
          "and prints stay eager, so the forward is compiled apart from the sampling loop")
