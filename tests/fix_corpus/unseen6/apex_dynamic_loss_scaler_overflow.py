"""apex FP16 dynamic loss scaling: `DynamicLossScaler.has_overflow` loops over the parameters and calls
`_has_inf_or_nan(p.grad.data)`, which reads `cpu_sum = float(x.float().sum())` inside a `try`/`except RuntimeError`
and compares it with `float('inf')` and with itself; the step then unscales the gradients or skips, and
`update_scale(overflow)` halves or grows the scale (NVIDIA/apex apex/fp16_utils/loss_scaler.py: to_python_float,
DynamicLossScaler; the step follows the usage example at the end of that file and FP16_Optimizer.step's
overflow check). The loss and backward pass are outside the step: the calls take parameters whose `.grad` was set
in `target()` (scaled gradients, one call with an overflowed entry). So that a call does not change its arguments,
the unscaled gradients are returned (`mul` instead of the example's in-place `grad.data.mul_`) and the optimizer
step is left out; the scaler is built per call from the given scale, and its new scale is returned."""
import torch
from torch import nn


# item() is a recent addition, so this helps with backward compatibility.
def to_python_float(t):
    if hasattr(t, 'item'):
        return t.item()
    else:
        return t[0]


class DynamicLossScaler:
    """
    Class that manages dynamic loss scaling.
    """

    def __init__(self,
                 init_scale=2**32,
                 scale_factor=2.,
                 scale_window=1000):
        self.cur_scale = init_scale
        self.cur_iter = 0
        self.last_overflow_iter = -1
        self.scale_factor = scale_factor
        self.scale_window = scale_window

    # `params` is a list / generator of torch.Variable
    def has_overflow(self, params):
        for p in params:
            if p.grad is not None and DynamicLossScaler._has_inf_or_nan(p.grad.data):
                return True

        return False

    # `x` is a torch.Tensor
    def _has_inf_or_nan(x):
        try:
            # Stopgap until upstream fixes sum() on HalfTensors
            cpu_sum = float(x.float().sum())  # BREAK
            # cpu_sum = float(x.sum())
            # print(cpu_sum)
        except RuntimeError as instance:
            # We want to check if inst is actually an overflow exception.
            # RuntimeError could come from a different error.
            # If so, we still want the exception to propagate.
            if "value cannot be converted" not in instance.args[0]:
                raise
            return True
        else:
            if cpu_sum == float('inf') or cpu_sum == -float('inf') or cpu_sum != cpu_sum:
                return True
            return False

    # `overflow` is boolean indicating whether we overflowed in gradient
    def update_scale(self, overflow):
        if overflow:
            # self.cur_scale /= self.scale_factor
            self.cur_scale = max(self.cur_scale/self.scale_factor, 1)
            self.last_overflow_iter = self.cur_iter
        else:
            if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                self.cur_scale *= self.scale_factor
        self.cur_iter += 1

    @property
    def loss_scale(self):
        return self.cur_scale

    def scale_gradient(self, module, grad_in, grad_out):
        return tuple(self.loss_scale * g for g in grad_in)

    def backward(self, loss):
        scaled_loss = loss*self.loss_scale
        scaled_loss.backward()


def fp16_step(parameters, cur_scale):
    """Overflow check, unscale and scale update of one iteration (the usage example's loop body)."""
    loss_scaler = DynamicLossScaler(init_scale=cur_scale, scale_window=4)

    # Check for overflow
    has_overflow = loss_scaler.has_overflow(parameters)  # BREAK

    # If no overflow, unscale grad and update as usual
    if not has_overflow:
        unscaled = [param.grad.data.mul(1. / loss_scaler.loss_scale) for param in parameters]
    # Otherwise, don't do anything -- ie, skip iteration
    else:
        unscaled = None

    # Update loss scale for next iteration
    loss_scaler.update_scale(has_overflow)
    return unscaled, loss_scaler.loss_scale


def _params_with_grads(scale, overflow):
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    params = list(model.parameters())
    for i, p in enumerate(params):
        p.grad = torch.randn_like(p) * scale
        if overflow and i == 2:
            p.grad[0, 1] = float('inf')
    return params


def target():
    torch.manual_seed(0)
    params1 = _params_with_grads(2. ** 10, overflow=False)
    params2 = _params_with_grads(2. ** 16, overflow=True)
    return [
        (fp16_step, (params1, 2. ** 10), {}),
        (fp16_step, (params2, 2. ** 16), {}),
    ]


EXPECT = ("rewrite: test the gradients as tensors (`torch.isfinite(g).all()` over all grads, combined into one 0-d "
          "bool with `torch.stack(...).all()`) and unscale with `torch.where(found_inf, ..., g * inv_scale)`, as "
          "torch.amp's `_amp_foreach_non_finite_check_and_unscale_` does, instead of `float(x.float().sum())` under "
          "try/except and a Python `if`; the scale update needs the flag on the host, so it stays outside the compiled "
          "step (caller)")
