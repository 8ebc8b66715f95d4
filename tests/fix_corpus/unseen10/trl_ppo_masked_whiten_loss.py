"""PPO minibatch step for RLHF (huggingface/trl, the 0.x `PPOTrainer`: `trl/core.py`: `logprobs_from_logits`,
`masked_mean`, `masked_var`, `masked_whiten`, `clip_by_value`, `entropy_from_logits`, `flatten_dict`;
`trl/trainer/ppo_trainer.py`: `PPOTrainer.compute_advantages`, `loss`, `train_minibatch`). `compute_advantages`
masks values and rewards, optionally whitens the rewards, runs GAE in a reversed Python loop over generation steps
(`nextvalues = values[:, t + 1] if t < gen_len - 1 else 0.0`, `lastgaelam` starting as the int `0`) and whitens the
advantages with `masked_whiten`, whose `masked_var` checks `if mask_sum == 0: raise ValueError(...)` on a tensor
and multiplies by the Bessel correction `mask_sum / (mask_sum - 1)`; `loss` computes the clipped value and policy
losses, then `avg_ratio = masked_mean(ratio, mask).item()` and `if avg_ratio > self.config.ratio_threshold:`
`warnings.warn(f"...{avg_ratio:.2f}...")` and zeroes the losses, and returns `flatten_dict` of detached stats;
`train_minibatch` runs `backward` and the optimizer step.
Provenance note: `core.py` was read from a stored copy of the repository; the `compute_advantages`/`loss` bodies
were written from the collector's knowledge of trl 0.4-0.11 and checked against copies of `PPOTrainer.loss` found by
code search (the stored `ppo_trainer.py` was only partly read).
Adaptations: the `AutoModelForCausalLMWithValueHead` (a GPT-2 with a value head) is replaced by a minimal stand-in
returning `(logits, _, values)`; `self.accelerator.backward(loss)` is `loss.backward()` and the
`accelerator.clip_grad_norm_` branch is off (`max_grad_norm=None`); the config is a `SimpleNamespace` with the
`PPOConfig` fields read here; the old log-probabilities, values and rewards come from a seeded rollout stand-in
(the same model before the step, plus fixed rewards on the last response token). So that a call repeats exactly,
the called function restores the model and optimizer from copies taken in the factory (`reset_`, an adaptation).
The two calls use different batches and configs (the second whitens rewards and has a low ratio threshold, so the
batch is skipped with a warning)."""
import copy
import warnings
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def flatten_dict(nested: Dict, sep: str = "/") -> Dict:
    """Flatten dictionary and concatenate nested keys with separator."""

    def recurse(nest: Dict, prefix: str, into: Dict) -> None:
        for k, v in nest.items():
            if sep in k:
                raise ValueError(f"separator '{sep}' not allowed to be in key '{k}'")
            if isinstance(v, Mapping):
                recurse(v, prefix + k + sep, into)
            else:
                into[prefix + k] = v

    flat = {}
    recurse(nested, "", flat)
    return flat


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor, gather: bool = True) -> torch.Tensor:
    """
    See: https://github.com/pytorch/pytorch/issues/563#issuecomment-330103591
    """
    logp = F.log_softmax(logits, dim=2)

    if not gather:
        return logp
    logpy = torch.gather(logp, 2, labels.unsqueeze(2)).squeeze(-1)
    return logpy


def masked_mean(values: torch.Tensor, mask: torch.Tensor, axis: Optional[bool] = None) -> torch.Tensor:
    """Compute mean of tensor with a masked values."""
    if axis is not None:
        return (values * mask).sum(axis=axis) / mask.sum(axis=axis)
    else:
        return (values * mask).sum() / mask.sum()


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Compute variance of tensor with masked values."""
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:  # BREAK
            raise ValueError(
                "The sum of the mask is zero, which can happen when `mini_batch_size=1`;"
                "try increase the `mini_batch_size` or `gradient_accumulation_steps`"
            )
        # note that if mask_sum == 1, then there is a division by zero issue
        # to avoid it you just need to use a larger minibatch_size
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """Whiten values with masked values."""
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


def clip_by_value(x: torch.Tensor, tensor_min: float, tensor_max: float) -> torch.Tensor:
    """
    Tensor extension to torch.clamp
    https://github.com/pytorch/pytorch/issues/2793#issuecomment-428784713
    """
    clipped = torch.max(torch.min(x, tensor_max), tensor_min)
    return clipped


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Calculate entropy from logits."""
    pd = torch.nn.functional.softmax(logits, dim=-1)
    entropy = torch.logsumexp(logits, axis=-1) - torch.sum(pd * logits, axis=-1)
    return entropy


class TinyValueHeadLM(nn.Module):
    """Adaptation: stand-in for AutoModelForCausalLMWithValueHead, returning (lm_logits, loss, value)."""

    def __init__(self, vocab_size=20, n_embd=16):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.mix = nn.Linear(2 * n_embd, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size)
        self.v_head = nn.Linear(n_embd, 1)

    def forward(self, input_ids):
        x = self.wte(input_ids)
        ctx = torch.cumsum(x, dim=1) / torch.arange(1, x.shape[1] + 1, device=x.device)[None, :, None]
        h = torch.tanh(self.mix(torch.cat([x, ctx], dim=-1)))
        return self.lm_head(h), None, self.v_head(h).squeeze(-1)


class PPOTrainer:
    def __init__(self, config, model, optimizer):
        self.config = config
        self.model = model
        self.optimizer = optimizer

    def compute_advantages(
        self,
        values: torch.FloatTensor,
        rewards: torch.FloatTensor,
        mask: torch.FloatTensor,
    ):
        lastgaelam = 0
        advantages_reversed = []
        gen_len = rewards.shape[-1]

        values = values * mask
        rewards = rewards * mask

        if self.config.whiten_rewards:
            rewards = masked_whiten(rewards, mask, shift_mean=False)

        for t in reversed(range(gen_len)):
            nextvalues = values[:, t + 1] if t < gen_len - 1 else 0.0
            delta = rewards[:, t] + self.config.gamma * nextvalues - values[:, t]
            lastgaelam = delta + self.config.gamma * self.config.lam * lastgaelam
            advantages_reversed.append(lastgaelam)
        advantages = torch.stack(advantages_reversed[::-1]).transpose(0, 1)

        returns = advantages + values
        advantages = masked_whiten(advantages, mask)
        advantages = advantages.detach()
        return values, advantages, returns

    def train_minibatch(
        self,
        old_logprobs: torch.FloatTensor,
        values: torch.FloatTensor,
        logprobs: torch.FloatTensor,
        logits: torch.FloatTensor,
        vpreds: torch.FloatTensor,
        mask: torch.LongTensor,
        advantages: torch.FloatTensor,
        returns: torch.FloatTensor,
    ):
        self.model.train()
        loss_p, loss_v, train_stats = self.loss(
            old_logprobs, values, logits, vpreds, logprobs, mask, advantages, returns
        )
        loss = loss_p + loss_v
        loss.backward()  # BREAK
        if self.config.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()  # BREAK
        # we call optimizer.zero_grad() every time and let `accelerator` handle accumulation
        # see https://huggingface.co/docs/accelerate/usage_guides/gradient_accumulation#the-finished-code
        self.optimizer.zero_grad()  # BREAK
        return train_stats

    def loss(
        self,
        old_logprobs: torch.FloatTensor,
        values: torch.FloatTensor,
        logits: torch.FloatTensor,
        vpreds: torch.FloatTensor,
        logprobs: torch.FloatTensor,
        mask: torch.LongTensor,
        advantages: torch.FloatTensor,
        returns: torch.FloatTensor,
    ):
        vpredclipped = clip_by_value(
            vpreds,
            values - self.config.cliprange_value,
            values + self.config.cliprange_value,
        )

        vf_losses1 = (vpreds - returns) ** 2
        vf_losses2 = (vpredclipped - returns) ** 2
        vf_loss = 0.5 * masked_mean(torch.max(vf_losses1, vf_losses2), mask)
        vf_clipfrac = masked_mean(torch.gt(vf_losses2, vf_losses1).float(), mask)

        ratio = torch.exp(logprobs - old_logprobs)

        pg_losses = -advantages * ratio
        pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - self.config.cliprange, 1.0 + self.config.cliprange)

        pg_loss = masked_mean(torch.max(pg_losses, pg_losses2), mask)
        pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses).float(), mask)

        loss = pg_loss + self.config.vf_coef * vf_loss

        avg_ratio = masked_mean(ratio, mask).item()  # BREAK
        if avg_ratio > self.config.ratio_threshold:
            warnings.warn(
                f"The average ratio of batch ({avg_ratio:.2f}) exceeds threshold {self.config.ratio_threshold:.2f}. Skipping batch."  # BREAK
            )
            pg_loss = pg_loss * 0.0
            vf_loss = vf_loss * 0.0
            loss = loss * 0.0

        entropy = masked_mean(entropy_from_logits(logits), mask)

        approxkl = 0.5 * masked_mean((logprobs - old_logprobs) ** 2, mask)
        policykl = masked_mean(old_logprobs - logprobs, mask)

        return_mean, return_var = masked_mean(returns, mask), masked_var(returns, mask)
        value_mean, value_var = masked_mean(values, mask), masked_var(values, mask)

        stats = dict(
            loss=dict(policy=pg_loss.detach(), value=vf_loss.detach(), total=loss.detach()),
            policy=dict(
                entropy=entropy.detach(),
                approxkl=approxkl.detach(),
                policykl=policykl.detach(),
                clipfrac=pg_clipfrac.detach(),
                advantages=advantages.detach(),
                advantages_mean=masked_mean(advantages, mask).detach(),
                ratio=ratio.detach(),
            ),
            returns=dict(mean=return_mean.detach(), var=return_var.detach()),
            val=dict(
                vpred=masked_mean(vpreds, mask).detach(),
                error=masked_mean((vpreds - returns) ** 2, mask).detach(),
                clipfrac=vf_clipfrac.detach(),
                mean=value_mean.detach(),
                var=value_var.detach(),
            ),
        )
        return pg_loss, self.config.vf_coef * vf_loss, flatten_dict(stats)


def reset_(trainer, model_state, opt_state):
    """Adaptation: restore the initial model/optimizer so that a call repeats exactly."""
    trainer.model.load_state_dict(model_state)  # BREAK
    trainer.optimizer.load_state_dict(opt_state)


def ppo_minibatch_step(trainer, model_state, opt_state, input_ids, response_mask, old_logprobs, old_values, rewards):
    reset_(trainer, model_state, opt_state)
    values, advantages, returns = trainer.compute_advantages(old_values, rewards, response_mask)
    logits, _, vpreds = trainer.model(input_ids)
    logits, vpreds = logits[:, :-1, :], vpreds[:, :-1]
    logprobs = logprobs_from_logits(logits, input_ids[:, 1:])
    return trainer.train_minibatch(
        old_logprobs, values, logprobs, logits, vpreds, response_mask, advantages, returns
    )


def _rollout(model, gen, batch, seq_len, query_len, vocab_size=20):
    input_ids = torch.randint(0, vocab_size, (batch, seq_len), generator=gen)
    mask = torch.zeros(batch, seq_len - 1)
    mask[:, query_len - 1:] = 1.0
    with torch.no_grad():
        logits, _, values = model(input_ids)
        old_logprobs = logprobs_from_logits(logits[:, :-1, :], input_ids[:, 1:]) + 0.05 * torch.randn(
            batch, seq_len - 1, generator=gen)
        old_values = values[:, :-1]
    rewards = torch.zeros(batch, seq_len - 1)
    rewards[:, -1] = torch.randn(batch, generator=gen)
    return input_ids, mask, old_logprobs, old_values, rewards


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(4)
    model = TinyValueHeadLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())
    base = dict(gamma=1.0, lam=0.95, cliprange=0.2, cliprange_value=0.2, vf_coef=0.1, max_grad_norm=None)
    trainer1 = PPOTrainer(SimpleNamespace(whiten_rewards=False, ratio_threshold=10.0, **base), model, optimizer)
    trainer2 = PPOTrainer(SimpleNamespace(whiten_rewards=True, ratio_threshold=0.5, **base), model, optimizer)
    batch1 = _rollout(model, gen, 4, 10, 4)
    batch2 = _rollout(model, gen, 3, 12, 5)
    return [
        (ppo_minibatch_step, (trainer1, model_state, opt_state) + batch1, {}),
        (ppo_minibatch_step, (trainer2, model_state, opt_state) + batch2, {}),
    ]


EXPECT = ("rewrite: `avg_ratio = masked_mean(ratio, mask).item()` deciding a `warnings.warn` and zeroing the "
          "losses can keep the tensor (`torch.where(avg_ratio > threshold, 0.0, loss)`, the warning moved out), and "
          "`masked_var`'s `if mask_sum == 0: raise` is an input check that can go to the caller; the GAE loop over "
          "a static length traces")
