"""Autoregressive sampling and training loss from lucidrains/x-transformers
(`x_transformers/autoregressive_wrapper.py`, the stored revision: `exists`, `default`, `identity`,
`eval_decorator`, `top_p`, `top_k`, `top_a`, `contrastive_decode_fn`, `AutoregressiveWrapper.__init__`,
`generate`, `forward`). `generate` is decorated with `@torch.no_grad()` and the closure decorator `eval_decorator`
(saves `self.training`, calls `self.eval()`, restores with `self.train(was_training)`); it `pack`s the start tokens,
turns the filter off when an amateur model is given, and loops `for _ in range(seq_len):` cropping
`out[:, -max_seq_len:]`, trimming each cached key/value with a list comprehension
`[t[..., -(max_seq_len - 1):, :] for t in inter.cached_kv]` when a cache exists, calling the network with
`return_intermediates = True, cache = cache`, filtering the last logits with the passed function (`top_k`: Python
`ceil`/`min` for k, `topk`, `full_like(-inf).scatter_`; `top_p`: `sort`, `cumsum` of softmax, `F.pad` of the
boolean mask, boolean-mask write `sorted_logits[sorted_indices_to_remove] = float('-inf')`, `scatter`), sampling
with `torch.multinomial` and appending; with an `eos_token` it stops early `if is_eos_tokens.any(dim = -1).all():`
after masking everything past the first end token with a shifted `cumsum`, then `unpack`s. `forward` replaces
`ignore_index` tokens with `torch.where`, optionally builds a random MLM mask (`min(int(seq * self.mask_prob),
seq - 1)`, `topk`, `scatter`) and returns the cross-entropy over `rearrange(logits, 'b n c -> b c n')`.
Adaptations: `einops` is not installed, so `pack`/`unpack` (for the `'* n'` pattern used here) and `rearrange`
(for `'b n c -> b c n'`) are minimal stand-ins; the `TransformerWrapper`/`Decoder` network (`x_transformers.py`,
not opened) is a small causal transformer stand-in (`max_seq_len` 16, 2 layers, dim 16, vocabulary 12) with the
same call signature, returning `(logits, intermediates)` whose `attn_intermediates` hold `cached_kv` lists (the
stand-in recomputes the whole prefix instead of reading them). The called function `sample_and_score` is the
collector's driver: it seeds torch (the `multinomial` draws and the MLM mask), samples with `generate` and
computes the training loss on a batch; the network's weights are not changed."""
from math import ceil, log

import torch
from torch import nn
from torch.nn import Module
import torch.nn.functional as F


# ---- stand-ins for einops (not installed)
def pack(tensors, pattern):
    assert pattern == '* n'
    t, = tensors
    ps = [t.shape[:-1]]
    return t.reshape(-1, t.shape[-1]), ps


def unpack(t, ps, pattern):
    assert pattern == '* n'
    return [t.reshape(*ps[0], t.shape[-1])]


def rearrange(t, pattern):
    assert pattern == 'b n c -> b c n'
    return t.transpose(1, 2)


# ---- x_transformers/autoregressive_wrapper.py
def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

def identity(t, *args, **kwargs):
    return t

def eval_decorator(fn):
    def inner(self, *args, **kwargs):
        was_training = self.training
        self.eval()
        out = fn(self, *args, **kwargs)
        self.train(was_training)
        return out
    return inner

# nucleus

def top_p(logits, thres = 0.9):
    sorted_logits, sorted_indices = torch.sort(logits, descending = True)
    cum_probs = torch.cumsum(F.softmax(sorted_logits, dim = -1), dim = -1)

    sorted_indices_to_remove = cum_probs > thres
    sorted_indices_to_remove = F.pad(sorted_indices_to_remove, (1, -1), value = False)

    sorted_logits[sorted_indices_to_remove] = float('-inf')
    return sorted_logits.scatter(1, sorted_indices, sorted_logits)

# topk

def top_k(logits, frac_num_tokens = 0.1, k = None):
    num_tokens = logits.shape[-1]

    k = default(k, ceil(frac_num_tokens * num_tokens))
    k = min(k, num_tokens)

    val, ind = torch.topk(logits, k)
    probs = torch.full_like(logits, float('-inf'))
    probs.scatter_(1, ind, val)
    return probs

# top_a

def top_a(logits, min_p_pow = 2.0, min_p_ratio = 0.02):
    probs = F.softmax(logits, dim = -1)
    max_probs = torch.amax(probs, dim = -1, keepdim = True)
    limit = torch.pow(max_probs, min_p_pow) * min_p_ratio
    return torch.where(probs < limit, float('-inf'), logits)

# contrastive decoding function

def contrastive_decode_fn(
    expert_logits,
    amateur_logits,
    alpha = 0.1,
    beta = 0.5
):
    """
    Appendix A Algorithm 2
    https://arxiv.org/abs/2309.09117
    """

    cutoff = log(alpha) + expert_logits.amax(dim = -1, keepdim = True)
    diffs = (1 + beta) * expert_logits - beta * amateur_logits
    contrastive_decode_logits = diffs.masked_fill(expert_logits < cutoff, -torch.finfo(expert_logits.dtype).max)
    return contrastive_decode_logits

# autoregressive wrapper class

class AutoregressiveWrapper(Module):
    def __init__(
        self,
        net,
        ignore_index = -100,
        pad_value = 0,
        mask_prob = 0.,
        add_attn_z_loss = False
    ):
        super().__init__()
        self.pad_value = pad_value
        self.ignore_index = ignore_index

        self.net = net
        self.max_seq_len = net.max_seq_len

        # paper shows masking (MLM) in conjunction with autoregressive decoder-only training leads to big improvements https://arxiv.org/abs/2210.13432
        assert mask_prob < 1.
        self.mask_prob = mask_prob

        # whether to add router z-loss
        self.add_attn_z_loss = add_attn_z_loss

    @torch.no_grad()
    @eval_decorator
    def generate(
        self,
        start_tokens,
        seq_len,
        eos_token = None,
        temperature = 1.,
        filter_logits_fn = top_k,
        restrict_to_max_seq_len = True,
        amateur_model: Module = None,
        filter_kwargs: dict = dict(),
        contrastive_decode_kwargs: dict = dict(
            beta = 0.5,
            alpha = 0.1
        ),
        **kwargs
    ):
        assert callable(filter_logits_fn)

        max_seq_len, device, num_dims = self.max_seq_len, start_tokens.device, start_tokens.ndim

        start_tokens, ps = pack([start_tokens], '* n')

        b, t = start_tokens.shape

        out = start_tokens

        # kv caches

        cache = None
        amateur_cache = None

        # if doing contrastive decoding, turn off filter automatically

        if exists(amateur_model):
            filter_logits_fn = identity

            if isinstance(amateur_model, AutoregressiveWrapper):
                amateur_model = amateur_model.net

            amateur_model.eval()

        # sampling up to seq_len

        for _ in range(seq_len):

            if restrict_to_max_seq_len:
                x = out[:, -max_seq_len:]

                if exists(cache):
                    for inter in cache.attn_intermediates:
                        inter.cached_kv = [t[..., -(max_seq_len - 1):, :] for t in inter.cached_kv]

            logits, cache = self.net(
                x,
                return_intermediates = True,
                cache = cache,
                **kwargs
            )

            logits = logits[:, -1]

            # handle contrastive decoding, Li et al.
            # https://arxiv.org/abs/2210.15097

            if exists(amateur_model):
                amateur_logits, amateur_cache = amateur_model(
                    x,
                    return_intermediates = True,
                    cache = amateur_cache,
                    **kwargs
                )

                amateur_logits = amateur_logits[:, -1]

                assert amateur_logits.shape == logits.shape, 'logits dimension are not the same between amateur and expert model'
                logits = contrastive_decode_fn(logits, amateur_logits, **contrastive_decode_kwargs)

            # filter by top_k, top_p (nucleus), top_a, or custom

            filtered_logits = filter_logits_fn(logits, **filter_kwargs)

            probs = F.softmax(filtered_logits / temperature, dim=-1)

            sample = torch.multinomial(probs, 1)

            out = torch.cat((out, sample), dim=-1)

            if exists(eos_token):
                is_eos_tokens = (out == eos_token)

                if is_eos_tokens.any(dim = -1).all():  # BREAK
                    # mask out everything after the eos tokens
                    shifted_is_eos_tokens = F.pad(is_eos_tokens, (1, -1))
                    mask = shifted_is_eos_tokens.float().cumsum(dim = -1) >= 1
                    out = out.masked_fill(mask, self.pad_value)
                    break

        out = out[:, t:]

        out, = unpack(out, ps, '* n')

        return out

    def forward(self, x, **kwargs):
        seq, ignore_index, add_attn_z_loss = x.shape[1], self.ignore_index, self.add_attn_z_loss

        inp, target = x[:, :-1], x[:, 1:]
        inp = torch.where(inp == ignore_index, self.pad_value, inp)

        if self.mask_prob > 0.:
            rand = torch.randn(inp.shape, device = x.device)
            rand[:, 0] = -torch.finfo(rand.dtype).max # first token should not be masked out
            num_mask = min(int(seq * self.mask_prob), seq - 1)
            indices = rand.topk(num_mask, dim = -1).indices
            mask = ~torch.zeros_like(inp).scatter(1, indices, 1.).bool()
            kwargs.update(self_attn_context_mask = mask)

        logits, cache = self.net(
            inp,
            return_intermediates = True,
            return_attn_z_loss = add_attn_z_loss,
            **kwargs
        )

        loss = F.cross_entropy(
            rearrange(logits, 'b n c -> b c n'),
            target,
            ignore_index = ignore_index
        )

        if add_attn_z_loss:
            loss = loss + cache.attn_z_loss

        return loss


# ---- stand-in for x_transformers.TransformerWrapper(Decoder(...)) (not opened)
class Intermediate:
    def __init__(self, cached_kv):
        self.cached_kv = cached_kv


class LayerIntermediates:
    def __init__(self, attn_intermediates, attn_z_loss=None):
        self.attn_intermediates = attn_intermediates
        self.attn_z_loss = attn_z_loss


class TinyDecoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x, context_mask=None):
        b, n, d = x.shape
        q, k, v = self.to_qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attn_mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        if context_mask is not None:
            attn_mask = attn_mask & context_mask[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.to_out(out.transpose(1, 2).reshape(b, n, d))
        x = x + self.ff(self.norm2(x))
        return x, Intermediate([k, v])


class TransformerWrapper(nn.Module):
    def __init__(self, num_tokens, max_seq_len, dim=16, depth=2, heads=2):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos_emb = nn.Embedding(max_seq_len, dim)
        self.layers = nn.ModuleList([TinyDecoderLayer(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.to_logits = nn.Linear(dim, num_tokens)

    def forward(self, x, return_intermediates=False, cache=None, return_attn_z_loss=False,
                self_attn_context_mask=None):
        n = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(n, device=x.device))
        inters = []
        for layer in self.layers:
            h, inter = layer(h, context_mask=self_attn_context_mask)
            inters.append(inter)
        logits = self.to_logits(self.norm(h))
        if return_intermediates:
            return logits, LayerIntermediates(inters, attn_z_loss=logits.logsumexp(-1).pow(2).mean() * 1e-4)
        return logits


# ---- collector's driver
def sample_and_score(model, start_tokens, seq_len, train_seq, seed, **generate_kwargs):
    torch.manual_seed(seed)  # BREAK
    sampled = model.generate(start_tokens, seq_len, **generate_kwargs)
    loss = model(train_seq)
    return sampled, loss


def target():
    torch.manual_seed(0)
    net = TransformerWrapper(num_tokens=12, max_seq_len=16)
    model = AutoregressiveWrapper(net, mask_prob=0.15)
    return [
        (sample_and_score, (model, torch.randint(1, 12, (3, 4)), 10, torch.randint(0, 12, (3, 12)), 1),
         {"eos_token": 2, "filter_logits_fn": top_k, "filter_kwargs": {"k": 6}}),
        (sample_and_score, (model, torch.randint(1, 12, (2, 3)), 20, torch.randint(0, 12, (2, 10)), 5),
         {"eos_token": 3, "temperature": 0.8, "filter_logits_fn": top_p, "filter_kwargs": {"thres": 0.8}}),
    ]


EXPECT = ("caller: `generate` is a sampling loop whose per-token network call compiles but whose "
          "`multinomial` draw and early-stop test `if is_eos_tokens.any(dim = -1).all(): ... break` on tensor "
          "data end every iteration's graph (and the top-p boolean-mask write is dynamic); the useful fix is "
          "at the caller, compiling the network's per-step forward (or the loss `forward`) and leaving the "
          "Python decode loop eager")
