"""SwAV training epoch (facebookresearch/swav `main_swav.py`: `train`, `distributed_sinkhorn`, the early revision
with `u`/`r`/`c` vectors; `src/utils.py`: `AverageMeter`). Per iteration: `data_time.update(time.time() - end)`, the
learning rate set from a NumPy schedule, the prototypes re-normalised under `torch.no_grad()` via
`model.module.prototypes.weight.data.clone()`/`copy_`, a forward over the crops, then per crop in
`args.crops_for_assign`: under `no_grad`, `if queue is not None: if use_the_queue or not torch.all(queue[i, -1, :] ==
0):` (a tensor deciding a Python flag) the queue scores are prepended and the queue is shifted and filled in place;
the Sinkhorn-Knopp codes; a sub-loss over `np.delete(np.arange(np.sum(args.nmb_crops)), crop_id)` (NumPy ints as
slice bounds); `loss` starts as the Python int `0`; `backward`, gradients of the prototypes cancelled
`if iteration < args.freeze_prototypes_niters:` by name, `optimizer.step()`, `losses.update(loss.item(), ...)`,
`time.time()` meters and a formatted `logger.info` every 50 iterations.
Adaptations: `args` is a module-level `SimpleNamespace` (the script's `global args`, defaults shrunk: 2 crops of
8x8, 6 prototypes, feature dim 4, queue length 8, epsilon 0.05, 3 Sinkhorn iterations); the DataLoader is a list of
multi-crop batches; the ResNet-50 (`src/resnet50.py`) is a minimal stand-in with the same `embedding, output =
model(inputs)` interface and a `prototypes` linear layer, wrapped in a stand-in for DDP's `.module`; apex
(`LARC`, `amp`) is not installed: the optimizer is plain `torch.optim.SGD`, `use_fp16` is off, and the log line
reads `optimizer.param_groups` (upstream: `optimizer.optim.param_groups`); single process: the `dist.all_reduce`
calls in `distributed_sinkhorn` are dropped (world size 1, where they are identities) and `.cuda(...)` calls
removed. So that a call repeats exactly, the called function restores the model and optimizer from copies taken in
the factory, copies the initial queue and seeds torch (`reset_`, an adaptation). The first call is epoch 0 without a
queue; the second is a later epoch with a queue (filled after its first iteration)."""
import copy
import math
import time
from logging import getLogger
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn

logger = getLogger()

args = SimpleNamespace(
    nmb_crops=[2], crops_for_assign=[0, 1], temperature=0.1, epsilon=0.05, sinkhorn_iterations=3,
    feat_dim=4, nmb_prototypes=6, queue_length=8, epoch_queue_starts=1, epochs=4, batch_size=4,
    base_lr=0.6, final_lr=0.0006, freeze_prototypes_niters=3, wd=1e-6, warmup_epochs=1, start_warmup=0,
    world_size=1, rank=0, use_fp16=False,
)


class AverageMeter(object):
    """computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class TinySwAVNet(nn.Module):
    """Adaptation: stand-in for src/resnet50.py's ResNet with a projection head and prototypes."""

    def __init__(self, output_dim=4, nmb_prototypes=6):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projection_head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, output_dim))
        self.prototypes = nn.Linear(output_dim, nmb_prototypes, bias=False)

    def forward(self, inputs):
        x = self.projection_head(self.backbone(torch.cat(inputs)))
        x = nn.functional.normalize(x, dim=1, p=2)
        return x, self.prototypes(x)


class DDPStandIn(nn.Module):
    """Adaptation: exposes `.module` like nn.parallel.DistributedDataParallel."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *a, **k):
        return self.module(*a, **k)


def train(train_loader, model, optimizer, epoch, lr_schedule, queue):
    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()

    softmax = nn.Softmax(dim=1)
    model.train()
    use_the_queue = False

    end = time.time()  # BREAK
    for it, inputs in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)  # BREAK

        # update learning rate
        iteration = epoch * len(train_loader) + it
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr_schedule[iteration]

        # normalize the prototypes
        with torch.no_grad():
            w = model.module.prototypes.weight.data.clone()
            w = nn.functional.normalize(w, dim=1, p=2)
            model.module.prototypes.weight.copy_(w)

        # ============ multi-res forward passes ... ============
        embedding, output = model(inputs)
        embedding = embedding.detach()
        bs = inputs[0].size(0)

        # ============ swav loss ... ============
        loss = 0
        for i, crop_id in enumerate(args.crops_for_assign):
            with torch.no_grad():
                out = output[bs * crop_id: bs * (crop_id + 1)]

                # time to use the queue
                if queue is not None:
                    if use_the_queue or not torch.all(queue[i, -1, :] == 0):
                        use_the_queue = True
                        out = torch.cat((torch.mm(
                            queue[i],
                            model.module.prototypes.weight.t()
                        ), out))
                    # fill the queue
                    queue[i, bs:] = queue[i, :-bs].clone()
                    queue[i, :bs] = embedding[crop_id * bs: (crop_id + 1) * bs]
                # get assignments
                q = torch.exp(out / args.epsilon).t()
                q = distributed_sinkhorn(q, args.sinkhorn_iterations)[-bs:]

            # cluster assignment prediction
            subloss = 0
            for v in np.delete(np.arange(np.sum(args.nmb_crops)), crop_id):
                p = softmax(output[bs * v: bs * (v + 1)] / args.temperature)
                subloss -= torch.mean(torch.sum(q * torch.log(p), dim=1))
            loss += subloss / (np.sum(args.nmb_crops) - 1)
        loss /= len(args.crops_for_assign)

        # ============ backward and optim step ... ============
        optimizer.zero_grad()
        loss.backward()
        # cancel some gradients
        if iteration < args.freeze_prototypes_niters:
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        optimizer.step()  # BREAK

        # ============ misc ... ============
        losses.update(loss.item(), inputs[0].size(0))
        batch_time.update(time.time() - end)
        end = time.time()
        if args.rank == 0 and it % 50 == 0:
            logger.info(
                "Epoch: [{0}][{1}]\t"
                "Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t"
                "Data {data_time.val:.3f} ({data_time.avg:.3f})\t"
                "Loss {loss.val:.4f} ({loss.avg:.4f})\t"
                "Lr: {lr:.4f}".format(
                    epoch,
                    it,
                    batch_time=batch_time,
                    data_time=data_time,
                    loss=losses,
                    lr=optimizer.param_groups[0]["lr"],
                )
            )
    return (epoch, losses.avg), queue


def distributed_sinkhorn(Q, nmb_iters):
    with torch.no_grad():
        sum_Q = torch.sum(Q)
        Q /= sum_Q

        u = torch.zeros(Q.shape[0])
        r = torch.ones(Q.shape[0]) / Q.shape[0]
        c = torch.ones(Q.shape[1]) / (args.world_size * Q.shape[1])

        curr_sum = torch.sum(Q, dim=1)

        for it in range(nmb_iters):
            u = curr_sum
            Q *= (r / u).unsqueeze(1)
            Q *= (c / torch.sum(Q, dim=0)).unsqueeze(0)
            curr_sum = torch.sum(Q, dim=1)
        return (Q / torch.sum(Q, dim=0, keepdim=True)).t().float()


def reset_(model, optimizer, model_state, opt_state, seed):
    """Adaptation: restore the initial model/optimizer and seed torch, so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)  # BREAK
    torch.manual_seed(seed)  # BREAK


def run_epoch(train_loader, model, optimizer, model_state, opt_state, epoch, lr_schedule, queue0, seed):
    reset_(model, optimizer, model_state, opt_state, seed)
    queue = None if queue0 is None else queue0.clone()
    scores, queue = train(train_loader, model, optimizer, epoch, lr_schedule, queue)
    return scores, queue, [p.detach().clone() for p in model.parameters()]


def target():
    torch.manual_seed(0)
    model = DDPStandIn(TinySwAVNet(output_dim=args.feat_dim, nmb_prototypes=args.nmb_prototypes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr, momentum=0.9, weight_decay=args.wd)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())
    n_iters = 3
    train_loader = [[torch.randn(args.batch_size, 3, 8, 8) for _ in range(args.nmb_crops[0])] for _ in range(n_iters)]
    warmup_lr_schedule = np.linspace(args.start_warmup, args.base_lr, n_iters * args.warmup_epochs)
    iters = np.arange(n_iters * (args.epochs - args.warmup_epochs))
    cosine_lr_schedule = np.array([args.final_lr + 0.5 * (args.base_lr - args.final_lr) * (1 + \
                         math.cos(math.pi * t / (n_iters * (args.epochs - args.warmup_epochs)))) for t in iters])
    lr_schedule = np.concatenate((warmup_lr_schedule, cosine_lr_schedule))
    queue0 = torch.zeros(len(args.crops_for_assign), args.queue_length // args.world_size, args.feat_dim)
    return [
        (run_epoch, (train_loader, model, optimizer, model_state, opt_state, 0, lr_schedule, None, 1), {}),
        (run_epoch, (train_loader, model, optimizer, model_state, opt_state, 2, lr_schedule, queue0, 2), {}),
    ]


EXPECT = ("caller: a whole training epoch (loop over the loader, `time.time()` meters, `loss.item()`, a logger line, "
          "`backward`/`step` and the prototype-gradient cancelling); compile the model forward and the per-crop "
          "loss and keep the epoch loop eager; inside, `if use_the_queue or not torch.all(queue[i, -1, :] == 0):` "
          "is a data-dependent branch setting a Python flag")
