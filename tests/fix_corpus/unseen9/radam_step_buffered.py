"""The RAdam optimizer step (LiyuanLucasLiu/RAdam radam/radam.py: `RAdam.__init__/__setstate__/step`): per parameter
it takes `p.grad.data.float()`, checks `grad.is_sparse`, keeps `state['step']` as a Python int, re-types the moments
with `.type_as(p_data_fp32)`, reads a per-group cache `buffered = group['buffer'][int(state['step'] % 10)]` (a list of
Python lists holding `[step, N_sma, step_size]`, mutated in place), computes the rectification term in Python floats
(`beta2 ** state['step']`, `math.sqrt(...)`), branches on `if N_sma >= 5:` / `elif self.degenerated_to_sgd:` /
`elif step_size > 0:`, and writes back with `p.data.copy_(p_data_fp32)`.
Adaptations: the step is driven by a small harness instead of a training loop (no `backward` inside the called
function): the gradients of a small linear model on fixed data are computed once in the factory and assigned to
`p.grad` before each `optimizer.step()`. So that a call repeats exactly, the harness first copies the initial
parameters back and clears `optimizer.state` (`reset_`, an adaptation); the `group['buffer']` cache is left as is
(its entries are a pure function of the step number, so a repeated call reads the same values). It returns the
parameters after the steps. The first call runs 4 steps with a `degenerated_to_sgd=True` optimizer (N_sma < 5: the
SGD-like branch); the second 8 steps with `degenerated_to_sgd=False` and weight decay (no update for steps 1-5, then
the rectified branch)."""
import math
import torch
from torch.optim.optimizer import Optimizer, required

class RAdam(Optimizer):

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, degenerated_to_sgd=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        
        self.degenerated_to_sgd = degenerated_to_sgd
        if isinstance(params, (list, tuple)) and len(params) > 0 and isinstance(params[0], dict):
            for param in params:
                if 'betas' in param and (param['betas'][0] != betas[0] or param['betas'][1] != betas[1]):
                    param['buffer'] = [[None, None, None] for _ in range(10)]
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, buffer=[[None, None, None] for _ in range(10)])
        super(RAdam, self).__init__(params, defaults)

    def __setstate__(self, state):
        super(RAdam, self).__setstate__(state)

    def step(self, closure=None):

        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:

            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data.float()
                if grad.is_sparse:
                    raise RuntimeError('RAdam does not support sparse gradients')

                p_data_fp32 = p.data.float()

                state = self.state[p]

                if len(state) == 0:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p_data_fp32)
                    state['exp_avg_sq'] = torch.zeros_like(p_data_fp32)
                else:
                    state['exp_avg'] = state['exp_avg'].type_as(p_data_fp32)
                    state['exp_avg_sq'] = state['exp_avg_sq'].type_as(p_data_fp32)

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                beta1, beta2 = group['betas']

                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value = 1 - beta2)
                exp_avg.mul_(beta1).add_(grad, alpha = 1 - beta1)

                state['step'] += 1
                buffered = group['buffer'][int(state['step'] % 10)]  # NO BREAK in torch 2.13
                if state['step'] == buffered[0]:
                    N_sma, step_size = buffered[1], buffered[2]
                else:
                    buffered[0] = state['step']
                    beta2_t = beta2 ** state['step']
                    N_sma_max = 2 / (1 - beta2) - 1
                    N_sma = N_sma_max - 2 * state['step'] * beta2_t / (1 - beta2_t)
                    buffered[1] = N_sma

                    # more conservative since it's an approximated value
                    if N_sma >= 5:
                        step_size = math.sqrt((1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2) / N_sma * N_sma_max / (N_sma_max - 2)) / (1 - beta1 ** state['step'])
                    elif self.degenerated_to_sgd:
                        step_size = 1.0 / (1 - beta1 ** state['step'])
                    else:
                        step_size = -1
                    buffered[2] = step_size

                # more conservative since it's an approximated value
                if N_sma >= 5:
                    if group['weight_decay'] != 0:
                        p_data_fp32.add_(p_data_fp32, alpha = -group['weight_decay'] * group['lr'])
                    denom = exp_avg_sq.sqrt().add_(group['eps'])
                    p_data_fp32.addcdiv_(exp_avg, denom, value = -step_size * group['lr'])
                    p.data.copy_(p_data_fp32)
                elif step_size > 0:
                    if group['weight_decay'] != 0:
                        p_data_fp32.add_(p_data_fp32, alpha = -group['weight_decay'] * group['lr'])
                    p_data_fp32.add_(exp_avg, alpha = -step_size * group['lr'])
                    p.data.copy_(p_data_fp32)

        return loss


def reset_(params, initial, optimizer):
    """Adaptation: restore the initial parameters and forget the optimizer state."""
    with torch.no_grad():
        for p, p0 in zip(params, initial):
            p.copy_(p0)
    optimizer.state.clear()


def run_steps(params, initial, optimizer, grads_per_step):
    reset_(params, initial, optimizer)
    for grads in grads_per_step:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


def target():
    torch.manual_seed(0)
    model = torch.nn.Linear(5, 3)
    params = list(model.parameters())
    initial = [p.detach().clone() for p in params]
    gen = torch.Generator().manual_seed(0)
    grads_per_step = []
    for _ in range(8):
        x = torch.randn(6, 5, generator=gen)
        y = torch.randn(6, 3, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        grads_per_step.append([g.detach() for g in torch.autograd.grad(loss, params)])
    opt_sgd = RAdam(params, lr=1e-2, degenerated_to_sgd=True)
    opt_rect = RAdam(params, lr=1e-2, weight_decay=1e-2, degenerated_to_sgd=False)
    return [
        (run_steps, (params, initial, opt_sgd, grads_per_step[:4]), {}),
        (run_steps, (params, initial, opt_rect, grads_per_step), {}),
    ]


EXPECT = ("none: no graph break expected: the Python-int `state['step']`, the `group['buffer']` list cache and the "
          "float branches on `N_sma`/`step_size` are host-side Python that Dynamo can trace (they specialise the "
          "graph per step, a recompile cost rather than a break), and `p.grad.data.float()` / `p.data.copy_` are "
          "traceable tensor ops")
