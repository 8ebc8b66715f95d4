"""Barlow Twins pre-training steps with the LARS optimizer (facebookresearch/barlowtwins `main.py`:
`main_worker`'s parameter split and epoch loop, `adjust_learning_rate`, `off_diagonal`, `BarlowTwins`, `LARS`,
`exclude_bias_and_norm`). `main_worker` splits parameters by `param.ndim == 1` into weight/bias groups, builds
`LARS(..., weight_decay_filter=exclude_bias_and_norm, lars_adaptation_filter=exclude_bias_and_norm)`, and per step
calls `adjust_learning_rate` (cosine schedule with warm-up computed in Python from `step` and `len(loader)`,
written into `param_groups[0]`/`[1]`), `zero_grad`, runs the model under an autocast context, scales/steps/updates
a `GradScaler`, and every `print_freq` steps builds a `stats` dict with `loss.item()` and
`int(time.time() - start_time)` and prints `json.dumps(stats)` (also to a stats file). `BarlowTwins.forward`
builds the cross-correlation `self.bn(z1).T @ self.bn(z2)`, divides in place by the batch size, all-reduces it,
and sums `torch.diagonal(c).add_(-1).pow_(2)` and `off_diagonal(c).pow_(2)` (`off_diagonal` asserts `n == m` and
uses the `flatten()[:-1].view(n - 1, n + 1)[:, 1:]` trick). `LARS.step` is `@torch.no_grad()`, calls the filter
functions on each parameter, nests `torch.where` for the trust ratio and lazily creates `param_state['mu']`.
Adaptations: the ResNet-50 backbone (torchvision) is a small MLP stand-in with `fc = nn.Identity()`; the projector
is built from `args.projector` as in the original ('16-16-16'); `nn.SyncBatchNorm.convert_sync_batchnorm`, DDP,
the SLURM/`spawn` setup and the checkpoint `torch.save` are dropped (one process); `torch.distributed.all_reduce(c)`
is kept behind `if torch.distributed.is_available() and torch.distributed.is_initialized():` (no process group
here); the CUDA `torch.cuda.amp.autocast()`/`GradScaler()` are CPU `torch.autocast('cpu', enabled=False)` and a
disabled `torch.amp.GradScaler('cpu', enabled=False)` (same calls, no scaling); the stats file is an
`io.StringIO`; the ImageFolder loader with its two-view `Transform` is a list of `((y1, y2), label)` batches made
in the factory; `args` is an `argparse.Namespace` (batch 8, 3 epochs, `print_freq` 1). So that a call repeats
exactly, the called function `train` restores model and LARS state from copies taken in the factory (`reset_`);
it returns the losses, the learning rates and a projector weight."""
import argparse
import copy
import io
import json
import math
import time

import torch
from torch import nn, optim


def adjust_learning_rate(args, optimizer, loader, step):
    max_steps = args.epochs * len(loader)
    warmup_steps = 10 * len(loader)
    base_lr = args.batch_size / 256
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        step -= warmup_steps
        max_steps -= warmup_steps
        q = 0.5 * (1 + math.cos(math.pi * step / max_steps))
        end_lr = base_lr * 0.001
        lr = base_lr * q + end_lr * (1 - q)
    optimizer.param_groups[0]['lr'] = lr * args.learning_rate_weights
    optimizer.param_groups[1]['lr'] = lr * args.learning_rate_biases


def off_diagonal(x):
    # return a flattened view of the off-diagonal elements of a square matrix
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BarlowTwins(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        # stand-in for torchvision.models.resnet50(zero_init_residual=True) with fc = Identity
        self.backbone = nn.Sequential(nn.Linear(10, 12), nn.BatchNorm1d(12), nn.ReLU(inplace=True))
        self.backbone.fc = nn.Identity()

        # projector
        sizes = [12] + list(map(int, args.projector.split('-')))
        layers = []
        for i in range(len(sizes) - 2):
            layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
            layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU(inplace=True))
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)

        # normalization layer for the representations z1 and z2
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))

        # empirical cross-correlation matrix
        c = self.bn(z1).T @ self.bn(z2)

        # sum the cross-correlation matrix between all gpus
        c.div_(self.args.batch_size)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(c)

        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        loss = on_diag + self.args.lambd * off_diag
        return loss


class LARS(optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                 weight_decay_filter=None, lars_adaptation_filter=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                        eta=eta, weight_decay_filter=weight_decay_filter,
                        lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g['params']:
                dp = p.grad

                if dp is None:
                    continue

                if g['weight_decay_filter'] is None or not g['weight_decay_filter'](p):
                    dp = dp.add(p, alpha=g['weight_decay'])

                if g['lars_adaptation_filter'] is None or not g['lars_adaptation_filter'](p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0.,
                                    torch.where(update_norm > 0,
                                                (g['eta'] * param_norm / update_norm), one), one)
                    dp = dp.mul(q)

                param_state = self.state[p]
                if 'mu' not in param_state:
                    param_state['mu'] = torch.zeros_like(p)
                mu = param_state['mu']
                mu.mul_(g['momentum']).add_(dp)

                p.add_(mu, alpha=-g['lr'])


def exclude_bias_and_norm(p):
    return p.ndim == 1


def reset_(model, optimizer, model_state, opt_state):
    """Adaptation: restore model and LARS state from the factory's copies."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)


def train(args, model, optimizer, loader, model_state, opt_state, start_epoch=0):
    reset_(model, optimizer, model_state, opt_state)
    stats_file = io.StringIO()  # BREAK
    losses, lrs = [], []
    start_time = time.time()  # BREAK
    scaler = torch.amp.GradScaler('cpu', enabled=False)  # BREAK
    for epoch in range(start_epoch, args.epochs):
        for step, ((y1, y2), _) in enumerate(loader, start=epoch * len(loader)):
            adjust_learning_rate(args, optimizer, loader, step)
            optimizer.zero_grad()  # BREAK
            with torch.autocast('cpu', enabled=False):
                loss = model.forward(y1, y2)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if step % args.print_freq == 0:
                if args.rank == 0:
                    stats = dict(epoch=epoch, step=step,
                                 lr_weights=optimizer.param_groups[0]['lr'],
                                 lr_biases=optimizer.param_groups[1]['lr'],
                                 loss=loss.item(),
                                 time=int(time.time() - start_time))
                    print(json.dumps(stats))
                    print(json.dumps(stats), file=stats_file)
            losses.append(loss.detach())
            lrs.append(optimizer.param_groups[0]['lr'])
    return torch.stack(losses), lrs, model.projector[0].weight.detach().clone()


def target():
    torch.manual_seed(0)
    args = argparse.Namespace(epochs=3, batch_size=8, learning_rate_weights=0.2, learning_rate_biases=0.0048,
                              weight_decay=1e-6, lambd=0.0051, projector='16-16-16', print_freq=1, rank=0)
    model = BarlowTwins(args)
    param_weights = []
    param_biases = []
    for param in model.parameters():
        if param.ndim == 1:
            param_biases.append(param)
        else:
            param_weights.append(param)
    parameters = [{'params': param_weights}, {'params': param_biases}]
    optimizer = LARS(parameters, lr=0, weight_decay=args.weight_decay,
                     weight_decay_filter=exclude_bias_and_norm,
                     lars_adaptation_filter=exclude_bias_and_norm)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def loader(n):
        out = []
        for _ in range(n):
            x = torch.randn(args.batch_size, 10)
            out.append(((x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)), torch.zeros(args.batch_size)))
        return out

    return [
        (train, (args, model, optimizer, loader(2), model_state, opt_state), {}),
        (train, (args, model, optimizer, loader(3), model_state, opt_state), {"start_epoch": 1}),
    ]


EXPECT = ("extract: `BarlowTwins.forward` and `LARS.step` trace (the all-reduce guard is static, `torch.where` "
          "trust ratio); the breaks are the logging block (`loss.item()`, `time.time()`, `json.dumps` prints) and "
          "the scaler/optimizer calls in the driver, which go into helpers under an escape hatch")
