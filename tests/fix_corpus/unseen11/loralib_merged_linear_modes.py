"""LoRA layers that merge their low-rank update into the frozen weight when switched to eval mode
(microsoft/LoRA: `loralib/layers.py`: `LoRALayer`, `Embedding`, `Linear`, `MergedLinear`; `loralib/utils.py`:
`mark_only_lora_as_trainable`). `MergedLinear` (the fused `c_attn` projection with
`enable_lora=[True, False, True]`) builds a boolean `lora_ind` in `__init__` and, in `zero_pad`, scatters the grouped
low-rank output into a zero tensor with a boolean-mask write `result[:, self.lora_ind] = ...`; its `forward`
branches on the Python flag `self.merged`, runs a grouped `F.conv1d` for the B matrices and uses a `T(w)` closure
for `fan_in_fan_out`; every layer overrides `train(mode)` to merge (`self.weight.data += ...`) or unmerge
(`self.weight.data -= ...`) the update and flip `self.merged`, so calling `model.eval()`/`model.train()` mutates
parameter data; `LoRALayer` stores either an `nn.Dropout` or a `lambda x: x` as `lora_dropout`; `Embedding.forward`
adds `F.embedding(x, self.lora_A.transpose(0, 1), ...)`.
Adaptations: the GPT-2 of the repository's NLG example is replaced by a minimal stand-in (`TinyLoRAGPT`: a LoRA
`Embedding`, one causal self-attention block whose `c_attn` is a `MergedLinear(n_embd, 3 * n_embd, r=4,
enable_lora=[True, False, True], fan_in_fan_out=True)` as in the example, a LoRA `Linear` MLP, and a tied LM head),
with `n_embd` 16 and vocabulary 32; `merge_weights=True` everywhere. The called function (`lora_forward`, an
adaptation) switches the model's mode with `model.train(training)` (the merge/unmerge happens there) and runs it.
So that a call repeats exactly (a merge followed by an unmerge does not restore the weights bit for bit), it first
restores the state dict taken in the factory, marks every LoRA layer unmerged and seeds torch for the LoRA dropout
(`reset_`). The LoRA `B` matrices are zero-initialised in the original (so merging is a no-op until trained); the
factory gives them small random values, as after fine-tuning. The two calls run in training mode (unmerged, with
dropout) and in eval mode (merged) on different token batches. Change for runnability: the stored revision's
`Embedding.train` merges `(self.lora_B @ self.lora_A) * self.scaling` without the `.transpose(0, 1)` its unmerge
branch uses (a shape error unless the vocabulary equals the width; later revisions transpose both); the transpose is
added."""
import copy
import math
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALayer():
    def __init__(
        self,
        r: int,
        lora_alpha: int,
        lora_dropout: float,
        merge_weights: bool,
    ):
        self.r = r
        self.lora_alpha = lora_alpha
        # Optional dropout
        if lora_dropout > 0.:
            self.lora_dropout = nn.Dropout(p=lora_dropout)
        else:
            self.lora_dropout = lambda x: x
        # Mark the weight as unmerged
        self.merged = False
        self.merge_weights = merge_weights


class Embedding(nn.Embedding, LoRALayer):
    # LoRA implemented in a dense layer
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        r: int = 0,
        lora_alpha: int = 1,
        merge_weights: bool = True,
        **kwargs
    ):
        nn.Embedding.__init__(self, num_embeddings, embedding_dim, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=0,
                           merge_weights=merge_weights)
        # Actual trainable parameters
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, num_embeddings)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((embedding_dim, r)))
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
        self.reset_parameters()

    def reset_parameters(self):
        nn.Embedding.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.zeros_(self.lora_A)
            nn.init.normal_(self.lora_B)

    def train(self, mode: bool = True):
        nn.Embedding.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0:
                    self.weight.data -= (self.lora_B @ self.lora_A).transpose(0, 1) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0:
                    self.weight.data += (self.lora_B @ self.lora_A).transpose(0, 1) * self.scaling
                self.merged = True

    def forward(self, x: torch.Tensor):
        if self.r > 0 and not self.merged:
            result = nn.Embedding.forward(self, x)
            if self.r > 0:
                after_A = F.embedding(
                    x, self.lora_A.transpose(0, 1), self.padding_idx, self.max_norm,
                    self.norm_type, self.scale_grad_by_freq, self.sparse
                )
                result += (after_A @ self.lora_B.transpose(0, 1)) * self.scaling
            return result
        else:
            return nn.Embedding.forward(self, x)


class Linear(nn.Linear, LoRALayer):
    # LoRA implemented in a dense layer
    def __init__(
        self,
        in_features: int,
        out_features: int,
        r: int = 0,
        lora_alpha: int = 1,
        lora_dropout: float = 0.,
        fan_in_fan_out: bool = False, # Set this to True if the layer to replace stores weight like (fan_in, fan_out)
        merge_weights: bool = True,
        **kwargs
    ):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                           merge_weights=merge_weights)

        self.fan_in_fan_out = fan_in_fan_out
        # Actual trainable parameters
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
        self.reset_parameters()
        if fan_in_fan_out:
            self.weight.data = self.weight.data.transpose(0, 1)

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def train(self, mode: bool = True):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0:
                    self.weight.data -= T(self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0:
                    self.weight.data += T(self.lora_B @ self.lora_A) * self.scaling
                self.merged = True

    def forward(self, x: torch.Tensor):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        if self.r > 0 and not self.merged:
            result = F.linear(x, T(self.weight), bias=self.bias)
            if self.r > 0:
                result += (self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
            return result
        else:
            return F.linear(x, T(self.weight), bias=self.bias)


class MergedLinear(nn.Linear, LoRALayer):
    # LoRA implemented in a dense layer
    def __init__(
        self,
        in_features: int,
        out_features: int,
        r: int = 0,
        lora_alpha: int = 1,
        lora_dropout: float = 0.,
        enable_lora: List[bool] = [False],
        fan_in_fan_out: bool = False,
        merge_weights: bool = True,
        **kwargs
    ):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                           merge_weights=merge_weights)
        assert out_features % len(enable_lora) == 0, \
            'The length of enable_lora must divide out_features'
        self.enable_lora = enable_lora
        self.fan_in_fan_out = fan_in_fan_out
        # Actual trainable parameters
        if r > 0 and any(enable_lora):
            self.lora_A = nn.Parameter(
                self.weight.new_zeros((r * sum(enable_lora), in_features)))
            self.lora_B = nn.Parameter(
                self.weight.new_zeros((out_features // len(enable_lora) * sum(enable_lora), r))
            ) # weights for Conv1D with groups=sum(enable_lora)
            self.scaling = self.lora_alpha / self.r
            # Freezing the pre-trained weight matrix
            self.weight.requires_grad = False
            # Compute the indices
            self.lora_ind = self.weight.new_zeros(
                (out_features, ), dtype=torch.bool
            ).view(len(enable_lora), -1)
            self.lora_ind[enable_lora, :] = True
            self.lora_ind = self.lora_ind.view(-1)
        self.reset_parameters()
        if fan_in_fan_out:
            self.weight.data = self.weight.data.transpose(0, 1)

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            # initialize A the same way as the default for nn.Linear and B to zero
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def zero_pad(self, x):
        result = x.new_zeros((*x.shape[:-1], self.out_features))
        result = result.view(-1, self.out_features)
        result[:, self.lora_ind] = x.reshape(
            -1, self.out_features // len(self.enable_lora) * sum(self.enable_lora)
        )
        return result.view((*x.shape[:-1], self.out_features))

    def train(self, mode: bool = True):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                # Make sure that the weights are not merged
                if self.r > 0 and any(self.enable_lora):
                    delta_w = F.conv1d(
                        self.lora_A.data.unsqueeze(0),
                        self.lora_B.data.unsqueeze(-1),
                        groups=sum(self.enable_lora)
                    ).squeeze(0)
                    self.weight.data -= self.zero_pad(T(delta_w * self.scaling))
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                # Merge the weights and mark it
                if self.r > 0 and any(self.enable_lora):
                    delta_w = F.conv1d(
                        self.lora_A.data.unsqueeze(0),
                        self.lora_B.data.unsqueeze(-1),
                        groups=sum(self.enable_lora)
                    ).squeeze(0)
                    self.weight.data += self.zero_pad(T(delta_w * self.scaling))
                self.merged = True

    def forward(self, x: torch.Tensor):
        def T(w):
            return w.transpose(0, 1) if self.fan_in_fan_out else w
        if self.merged:
            return F.linear(x, T(self.weight), bias=self.bias)
        else:
            result = F.linear(x, T(self.weight), bias=self.bias)
            if self.r > 0:
                after_A = F.linear(self.lora_dropout(x), self.lora_A)
                after_B = F.conv1d(
                    after_A.transpose(-2, -1),
                    self.lora_B.unsqueeze(-1),
                    groups=sum(self.enable_lora)
                ).transpose(-2, -1)
                result += self.zero_pad(after_B) * self.scaling
            return result


def mark_only_lora_as_trainable(model: nn.Module, bias: str = 'none') -> None:
    for n, p in model.named_parameters():
        if 'lora_' not in n:
            p.requires_grad = False
    if bias == 'none':
        return
    elif bias == 'all':
        for n, p in model.named_parameters():
            if 'bias' in n:
                p.requires_grad = True
    elif bias == 'lora_only':
        for m in model.modules():
            if isinstance(m, LoRALayer) and \
                hasattr(m, 'bias') and \
                m.bias is not None:
                    m.bias.requires_grad = True
    else:
        raise NotImplementedError


class TinyLoRAGPT(nn.Module):
    """Adaptation: minimal stand-in for the NLG example's GPT-2 with LoRA layers."""

    def __init__(self, vocab=32, n_embd=16, n_head=2, r=4):
        super().__init__()
        self.n_head = n_head
        self.wte = Embedding(vocab, n_embd, r=r, lora_alpha=8)
        self.wpe = nn.Embedding(16, n_embd)
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = MergedLinear(n_embd, 3 * n_embd, r=r, lora_alpha=8, lora_dropout=0.1,
                                   enable_lora=[True, False, True], fan_in_fan_out=True, merge_weights=True)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = Linear(n_embd, 4 * n_embd, r=r, lora_alpha=8, lora_dropout=0.1)
        self.c_out = nn.Linear(4 * n_embd, n_embd)
        self.ln_f = nn.LayerNorm(n_embd)

    def forward(self, input_ids):
        B, T = input_ids.shape
        h = self.wte(input_ids) + self.wpe(torch.arange(T, device=input_ids.device))
        q, k, v = self.c_attn(self.ln_1(h)).split(h.shape[-1], dim=-1)
        q, k, v = (t.view(B, T, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.c_proj(a.transpose(1, 2).reshape(B, T, -1))
        h = h + self.c_out(F.gelu(self.c_fc(self.ln_2(h))))
        return F.linear(self.ln_f(h), self.wte.weight)


def reset_(model, state):
    """Adaptation: restore the unmerged weights and flags, and seed dropout, so that a call repeats exactly."""
    model.load_state_dict(state)  # BREAK
    for m in model.modules():
        if isinstance(m, LoRALayer):
            m.merged = False
    torch.manual_seed(0)  # BREAK


def lora_forward(model, state, input_ids, training):
    reset_(model, state)
    model.train(training)
    return model(input_ids)


def target():
    torch.manual_seed(0)
    model = TinyLoRAGPT()
    mark_only_lora_as_trainable(model)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALayer) and hasattr(m, 'lora_B'):
                m.lora_B.normal_(0.0, 0.2)
            if isinstance(m, Embedding):
                m.lora_A.normal_(0.0, 0.2)
    state = copy.deepcopy(model.state_dict())
    ids1 = torch.randint(0, 32, (2, 10))
    ids2 = torch.randint(0, 32, (3, 7))
    return [(lora_forward, (model, state, ids1, True), {}), (lora_forward, (model, state, ids2, False), {})]


EXPECT = ("caller: the merge/unmerge happens in `train(mode)`, which mutates `weight.data` and the `merged` flags; "
          "switching modes belongs outside the compiled forward (compile `model(input_ids)` per mode). In the forward, "
          "the boolean-mask write `result[:, self.lora_ind] = ...` in `zero_pad` is expected to trace (the mask is a "
          "constant buffer-like attribute)")
