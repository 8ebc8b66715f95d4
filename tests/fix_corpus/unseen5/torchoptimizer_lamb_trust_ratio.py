"""LAMB optimizer step: per parameter `if weight_norm == 0 or adam_norm == 0: trust_ratio = 1 else: trust_ratio =
weight_norm / adam_norm` (a tensor in a Python `or`), the trust ratio stored in the per-parameter state dict and used
as the `alpha` of `p.data.add_(adam_step, alpha=-step_size * trust_ratio)` (jettify/pytorch-optimizer
torch_optimizer/lamb.py: Lamb.__init__/step, 0.3.x). To keep calls repeatable, the call restores the parameters from
a snapshot and clears the optimizer state before its single step, and returns the updated parameters (the original
training loop keeps stepping); the gradients are computed once in `target()` from a small MLP regression loss."""
import math

import torch
import torch.nn as nn
from torch.optim.optimizer import Optimizer


class Lamb(Optimizer):
    r"""Implements Lamb algorithm.

    It has been proposed in `Large Batch Optimization for Deep Learning:
    Training BERT in 76 minutes`__.

    Arguments:
        params: iterable of parameters to optimize or dicts defining
            parameter groups
        lr: learning rate (default: 1e-3)
        betas: coefficients used for computing
            running averages of gradient and its square (default: (0.9, 0.999))
        eps: term added to the denominator to improve
            numerical stability (default: 1e-8)
        weight_decay: weight decay (L2 penalty) (default: 0)
        clamp_value: clamp weight_norm in (0,clamp_value) (default: 10)
            set to a high value to avoid it (e.g 10e3)
        adam: always use trust ratio = 1, which turns this
            into Adam. Useful for comparison purposes. (default: False)
        debias: debias adam by (1 - beta**step) (default: False)
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0,
        clamp_value: float = 10,
        adam: bool = False,
        debias: bool = False,
    ) -> None:
        if lr <= 0.0:
            raise ValueError('Invalid learning rate: {}'.format(lr))
        if eps < 0.0:
            raise ValueError('Invalid epsilon value: {}'.format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(
                'Invalid beta parameter at index 0: {}'.format(betas[0])
            )
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(
                'Invalid beta parameter at index 1: {}'.format(betas[1])
            )
        if weight_decay < 0:
            raise ValueError(
                'Invalid weight_decay value: {}'.format(weight_decay)
            )
        if clamp_value < 0.0:
            raise ValueError('Invalid clamp value: {}'.format(clamp_value))

        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.clamp_value = clamp_value
        self.adam = adam
        self.debias = debias

        super(Lamb, self).__init__(params, defaults)

    def step(self, closure=None):
        r"""Performs a single optimization step.

        Arguments:
            closure: A closure that reevaluates the model and returns the loss.
        """
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                if grad.is_sparse:
                    msg = (
                        'Lamb does not support sparse gradients, '
                        'please consider SparseAdam instead'
                    )
                    raise RuntimeError(msg)

                state = self.state[p]

                # State initialization
                if len(state) == 0:
                    state['step'] = 0
                    # Exponential moving average of gradient values
                    state['exp_avg'] = torch.zeros_like(
                        p, memory_format=torch.preserve_format
                    )
                    # Exponential moving average of squared gradient values
                    state['exp_avg_sq'] = torch.zeros_like(
                        p, memory_format=torch.preserve_format
                    )

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                beta1, beta2 = group['betas']

                state['step'] += 1

                # Decay the first and second moment running average coefficient
                # m_t
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                # v_t
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

                # Paper v3 does not use debiasing.
                if self.debias:
                    bias_correction = math.sqrt(1 - beta2 ** state['step'])
                    bias_correction /= 1 - beta1 ** state['step']
                else:
                    bias_correction = 1

                # Apply bias to lr to avoid broadcast.
                step_size = group['lr'] * bias_correction

                weight_norm = torch.norm(p.data).clamp(0, self.clamp_value)

                adam_step = exp_avg / exp_avg_sq.sqrt().add(group['eps'])
                if group['weight_decay'] != 0:
                    adam_step.add_(p.data, alpha=group['weight_decay'])

                adam_norm = torch.norm(adam_step)
                if weight_norm == 0 or adam_norm == 0:  # BREAK
                    trust_ratio = 1
                else:
                    trust_ratio = weight_norm / adam_norm
                state['weight_norm'] = weight_norm
                state['adam_norm'] = adam_norm
                state['trust_ratio'] = trust_ratio
                if self.adam:
                    trust_ratio = 1

                p.data.add_(adam_step, alpha=-step_size * trust_ratio)

        return loss


def make_step_from_snapshot(optimizer):
    """The optimizer is held by the closure, not passed as an argument: a copy of an Optimizer keeps only its
    defaults, state and param_groups (not Lamb's `clamp_value`/`adam`/`debias` attributes), and a copied parameter
    has no `p.grad`; the gradients are passed in and set by the call."""
    def step_from_snapshot(snapshot, grads):
        """Restore the parameters and clear the optimizer state, then take one Lamb step (keeps calls repeatable)."""
        with torch.no_grad():
            for p, p0, g0 in zip(optimizer.param_groups[0]['params'], snapshot, grads):
                p.copy_(p0)
                p.grad = g0.clone()
        optimizer.state.clear()
        optimizer.step()
        return [p.detach().clone() for p in optimizer.param_groups[0]['params']]
    return step_from_snapshot


def _setup():
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    nn.functional.mse_loss(model(x), y).backward()
    optimizer = Lamb(model.parameters(), lr=0.01, weight_decay=0.01)
    snapshot = [p.detach().clone() for p in model.parameters()]
    grads = [p.grad.detach().clone() for p in model.parameters()]
    return optimizer, snapshot, grads


def target():
    torch.manual_seed(0)
    opt1, snap1, grads1 = _setup()
    opt2, snap2, grads2 = _setup()
    return [
        (make_step_from_snapshot(opt1), (snap1, grads1), {}),
        (make_step_from_snapshot(opt2), (snap2, grads2), {}),
    ]


EXPECT = ("rewrite: keep the trust ratio a tensor, `trust_ratio = torch.where((weight_norm == 0) | (adam_norm == 0), "
          "1.0, weight_norm / adam_norm)`, and apply it as `p.data.add_(adam_step * (-step_size * trust_ratio))` "
          "so no tensor reaches a Python `or` or a Scalar `alpha`")
