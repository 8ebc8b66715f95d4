"""MADGRAD's optimizer step: the step counter lives in the optimizer state as a tensor ("must be stored in state to
ensure correct behavior under optimizer sharding"), `k = self.state['k'].item()` reads it each step,
`lamb = lr * math.pow(k + 1, 0.5)` is computed in Python, the dense update uses `addcmul_`/`pow(1 / 3)`/`addcdiv`
on `p.data`, and `self.state['k'] += 1` ends the step (facebookresearch/madgrad madgrad/madgrad.py: MADGRAD.__init__/
step, the dense path with momentum). The parameters are a small linear layer; there is no backward pass: each call
sets the gradients from copies of given tensors before `optimizer.step()` (copies, since the weight decay adds to the
gradient in place). So that a call gives the same result when it is run
again, the call first restores the starting parameters and clears the optimizer state (`reset_`, an adaptation), then
takes two steps and returns copies of the parameters."""
import math
from typing import Any, Callable, Optional

import torch
import torch.optim

_params_t = Any


class MADGRAD(torch.optim.Optimizer):
    """
    MADGRAD_: A Momentumized, Adaptive, Dual Averaged Gradient Method for Stochastic
    Optimization.

    .. _MADGRAD: https://arxiv.org/abs/2101.11075
    """

    def __init__(
        self, params: _params_t, lr: float = 1e-2, momentum: float = 0.9,
        weight_decay: float = 0, eps: float = 1e-6, decouple_decay=False,
    ):
        if momentum < 0 or momentum >= 1:
            raise ValueError(f"Momentum {momentum} must be in the range [0,1)")
        if lr <= 0:
            raise ValueError(f"Learning rate {lr} must be positive")
        if weight_decay < 0:
            raise ValueError(f"Weight decay {weight_decay} must be non-negative")
        if eps < 0:
            raise ValueError(f"Eps must be non-negative")

        self.decouple_decay = decouple_decay

        defaults = dict(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay)
        super().__init__(params, defaults)

    @property
    def supports_memory_efficient_fp16(self) -> bool:
        return False

    @property
    def supports_flat_params(self) -> bool:
        return True

    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:
        """Performs a single optimization step.

        Arguments:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """
        loss = None
        if closure is not None:
            loss = closure()

        # step counter must be stored in state to ensure correct behavior under
        # optimizer sharding
        if 'k' not in self.state:
            self.state['k'] = torch.tensor([0], dtype=torch.long)
        k = self.state['k'].item()  # BREAK

        for group in self.param_groups:
            eps = group["eps"]
            lr = group["lr"] + eps
            decay = group["weight_decay"]
            momentum = group["momentum"]

            ck = 1 - momentum
            lamb = lr * math.pow(k + 1, 0.5)

            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]

                if "grad_sum_sq" not in state:
                    state["grad_sum_sq"] = torch.zeros_like(p.data).detach()
                    state["s"] = torch.zeros_like(p.data).detach()
                    if momentum != 0:
                        state["x0"] = torch.clone(p.data).detach()

                if momentum != 0.0 and grad.is_sparse:
                    raise RuntimeError("momentum != 0 is not compatible with sparse gradients")

                grad_sum_sq = state["grad_sum_sq"]
                s = state["s"]

                # Apply weight decay
                if decay != 0 and not self.decouple_decay:
                    if grad.is_sparse:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")

                    grad.add_(p.data, alpha=decay)

                if grad.is_sparse:
                    grad = grad.coalesce()
                    grad_val = grad._values()

                    p_masked = p.sparse_mask(grad)
                    grad_sum_sq_masked = grad_sum_sq.sparse_mask(grad)
                    s_masked = s.sparse_mask(grad)

                    # Compute x_0 from other known quantities
                    rms_masked_vals = grad_sum_sq_masked._values().pow(1 / 3).add_(eps)
                    x0_masked_vals = p_masked._values().addcdiv(s_masked._values(), rms_masked_vals, value=1)

                    # Dense + sparse op
                    grad_sq = grad * grad
                    grad_sum_sq.add_(grad_sq, alpha=lamb)
                    grad_sum_sq_masked.add_(grad_sq, alpha=lamb)

                    rms_masked_vals = grad_sum_sq_masked._values().pow_(1 / 3).add_(eps)

                    if eps == 0:
                        rms_masked_vals[rms_masked_vals == 0] = float('inf')

                    s.add_(grad, alpha=lamb)
                    s_masked._values().add_(grad_val, alpha=lamb)

                    # update masked copy of p
                    p_kp1_masked_vals = x0_masked_vals.addcdiv(s_masked._values(), rms_masked_vals, value=-1)
                    # Copy updated masked p to dense p using an add operation
                    p_masked._values().add_(p_kp1_masked_vals, alpha=-1)
                    p.data.add_(p_masked, alpha=-1)
                else:
                    if momentum == 0:
                        # Compute x_0 from other known quantities
                        rms = grad_sum_sq.pow(1 / 3).add_(eps)
                        x0 = p.data.addcdiv(s, rms, value=1)
                    else:
                        x0 = state["x0"]

                    # Accumulate second moments
                    grad_sum_sq.addcmul_(grad, grad, value=lamb)
                    rms = grad_sum_sq.pow(1 / 3).add_(eps)

                    if eps == 0:
                        rms[rms == 0] = float('inf')

                    # Update s
                    s.data.add_(grad, alpha=lamb)

                    if decay != 0 and self.decouple_decay:
                        p_old = p.data.clone()

                    # Step
                    if momentum == 0:
                        p.data.copy_(x0.addcdiv(s, rms, value=-1))
                    else:
                        z = x0.addcdiv(s, rms, value=-1)

                        # p is a moving average of z
                        p.data.mul_(1 - ck).add_(z, alpha=ck)

                    if decay != 0 and self.decouple_decay:
                        p.data.add_(p_old, alpha=-lr*decay)


        self.state['k'] += 1
        return loss


def reset_(optimizer, start):
    """Adaptation: restore the starting parameters and clear the optimizer state."""
    optimizer.state.clear()
    with torch.no_grad():
        for p, p0 in zip(optimizer.param_groups[0]["params"], start):
            p.copy_(p0)


def train_steps(optimizer, start, grads_per_step):
    reset_(optimizer, start)
    params = optimizer.param_groups[0]["params"]
    for grads in grads_per_step:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


def target():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = MADGRAD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=1e-4)
    start = [p.detach().clone() for p in model.parameters()]
    grads1 = [[torch.randn_like(p) for p in model.parameters()] for _ in range(2)]
    grads2 = [[torch.randn_like(p) for p in model.parameters()] for _ in range(2)]
    return [
        (train_steps, (optimizer, start, grads1), {}),
        (train_steps, (optimizer, start, grads2), {}),
    ]


EXPECT = ("rewrite: keep the step counter a tensor in the compiled step: `k = self.state['k']` and "
          "`lamb = lr * torch.sqrt(k + 1)` (a 0-d tensor used as the `value`/`alpha` via `mul`/`addcmul` with tensor "
          "scalars), no `.item()` and no `math.pow` on the host; `config: capture_scalar_outputs` is the fallback")
