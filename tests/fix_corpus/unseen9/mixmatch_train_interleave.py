"""One MixMatch training epoch (YU1ut/MixMatch-pytorch train.py: `train`, `SemiLoss`, `linear_rampup`,
`WeightEMA`, `interleave_offsets`, `interleave`, the module-level `args`; utils `AverageMeter`). Per iteration it pulls
labeled and unlabeled batches with `try: ... next() except: iter(...)` restarts, one-hot encodes with `scatter_`,
guesses labels under `torch.no_grad()` with temperature sharpening `p**(1/args.T)`, draws the mixup weight on the host
(`l = np.random.beta(args.alpha, args.alpha)`, `l = max(l, 1-l)`), mixes with `torch.randperm`, splits into a Python
list and `interleave`s it (offsets computed in Python, a comprehension of slices, element swaps), runs the model per
chunk, computes `SemiLoss` (whose weight `args.lambda_u * linear_rampup(epoch)` goes through `np.clip` and
`float(...)`), records `loss.item()`, `Lx.item()`, `Lu.item()` in meters, steps SGD/Adam and the EMA
(`ema_param.data.mul_`, `param.data.mul_(1 - self.wd)`), and formats a progress-bar suffix; after the loop
`ema_optimizer.step(bn=True)` copies state dicts.
Adaptations: the py2-style `labeled_train_iter.next()` calls became `next(labeled_train_iter)` (DataLoader
iterators have no `.next` method in current torch; the `try/except` restarts are kept); `.cuda()` calls are dropped
(`use_cuda=False`, and the `WeightEMA` temporary model is built on CPU); the `progress` package's `Bar` is replaced
by a minimal stand-in with the attributes used (`suffix`, `next`, `finish`, `elapsed_td`, `eta_td`); the one-hot
width 10 is kept; the WideResNet is replaced by a small MLP with `BatchNorm1d` (the reason for `interleave`) over
8-feature inputs; `args` is a `SimpleNamespace` with the script's defaults where used (`T=0.5`, `alpha=0.75`,
`lambda_u=75`, `lr=0.002`, `ema_decay=0.999`) and `val_iteration=3`, `epochs=4`. The labeled loader has 12 samples in
batches of 4 (so it restarts within the epoch), the unlabeled loader 16 samples in batches of 4, each sample two
noisy views. So that a call repeats exactly, the called function first restores the model, the EMA model and the
Adam state from copies taken in the factory and seeds NumPy's and torch's generators (`reset_`, an adaptation); it
returns `train`'s `(losses.avg, losses_x.avg, losses_u.avg)`. The two calls differ in epoch and seed."""
import copy
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data

args = SimpleNamespace(T=0.5, alpha=0.75, lambda_u=75, lr=0.002, ema_decay=0.999, val_iteration=3, epochs=4)


class Bar(object):
    """Adaptation: stand-in for progress.bar.Bar (no terminal output)."""

    def __init__(self, message='', max=10):
        self.message = message
        self.max = max
        self.index = 0
        self.suffix = ''
        self.elapsed_td = '0:00:00'
        self.eta_td = '0:00:00'

    def next(self):
        self.index += 1

    def finish(self):
        pass


class AverageMeter(object):
    """Computes and stores the average and current value
       Imported from https://github.com/pytorch/examples/blob/master/imagenet/main.py#L247-L262
    """
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


class SmallNet(nn.Module):
    """Adaptation: stand-in for models.WideResNet (BatchNorm kept)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.bn1 = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.bn1(self.fc1(x))))


def train(labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion, epoch, use_cuda):

    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    losses_x = AverageMeter()
    losses_u = AverageMeter()
    ws = AverageMeter()
    end = time.time()  # BREAK

    bar = Bar('Training', max=args.val_iteration)
    labeled_train_iter = iter(labeled_trainloader)  # BREAK
    unlabeled_train_iter = iter(unlabeled_trainloader)  # BREAK

    
    model.train()
    for batch_idx in range(args.val_iteration):
        try:
            inputs_x, targets_x = next(labeled_train_iter)  # BREAK
        except:
            labeled_train_iter = iter(labeled_trainloader)
            inputs_x, targets_x = next(labeled_train_iter)

        try:
            (inputs_u, inputs_u2), _ = next(unlabeled_train_iter)
        except:
            unlabeled_train_iter = iter(unlabeled_trainloader)
            (inputs_u, inputs_u2), _ = next(unlabeled_train_iter)

        # measure data loading time
        data_time.update(time.time() - end)

        batch_size = inputs_x.size(0)

        # Transform label to one-hot
        targets_x = torch.zeros(batch_size, 10).scatter_(1, targets_x.view(-1,1), 1)

        if use_cuda:
            inputs_x, targets_x = inputs_x.cuda(), targets_x.cuda(non_blocking=True)
            inputs_u = inputs_u.cuda()
            inputs_u2 = inputs_u2.cuda()


        with torch.no_grad():
            # compute guessed labels of unlabel samples
            outputs_u = model(inputs_u)
            outputs_u2 = model(inputs_u2)
            p = (torch.softmax(outputs_u, dim=1) + torch.softmax(outputs_u2, dim=1)) / 2
            pt = p**(1/args.T)
            targets_u = pt / pt.sum(dim=1, keepdim=True)
            targets_u = targets_u.detach()

        # mixup
        all_inputs = torch.cat([inputs_x, inputs_u, inputs_u2], dim=0)
        all_targets = torch.cat([targets_x, targets_u, targets_u], dim=0)

        l = np.random.beta(args.alpha, args.alpha)

        l = max(l, 1-l)

        idx = torch.randperm(all_inputs.size(0))

        input_a, input_b = all_inputs, all_inputs[idx]
        target_a, target_b = all_targets, all_targets[idx]

        mixed_input = l * input_a + (1 - l) * input_b
        mixed_target = l * target_a + (1 - l) * target_b

        # interleave labeled and unlabed samples between batches to get correct batchnorm calculation 
        mixed_input = list(torch.split(mixed_input, batch_size))
        mixed_input = interleave(mixed_input, batch_size)

        logits = [model(mixed_input[0])]
        for input in mixed_input[1:]:
            logits.append(model(input))

        # put interleaved samples back
        logits = interleave(logits, batch_size)
        logits_x = logits[0]
        logits_u = torch.cat(logits[1:], dim=0)

        Lx, Lu, w = criterion(logits_x, mixed_target[:batch_size], logits_u, mixed_target[batch_size:], epoch+batch_idx/args.val_iteration)

        loss = Lx + w * Lu

        # record loss
        losses.update(loss.item(), inputs_x.size(0))
        losses_x.update(Lx.item(), inputs_x.size(0))
        losses_u.update(Lu.item(), inputs_x.size(0))
        ws.update(w, inputs_x.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema_optimizer.step()

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        # plot progress
        bar.suffix  = '({batch}/{size}) Data: {data:.3f}s | Batch: {bt:.3f}s | Total: {total:} | ETA: {eta:} | Loss: {loss:.4f} | Loss_x: {loss_x:.4f} | Loss_u: {loss_u:.4f} | W: {w:.4f}'.format(
                    batch=batch_idx + 1,
                    size=args.val_iteration,
                    data=data_time.avg,
                    bt=batch_time.avg,
                    total=bar.elapsed_td,
                    eta=bar.eta_td,
                    loss=losses.avg,
                    loss_x=losses_x.avg,
                    loss_u=losses_u.avg,
                    w=ws.avg,
                    )
        bar.next()
    bar.finish()

    ema_optimizer.step(bn=True)

    return (losses.avg, losses_x.avg, losses_u.avg,)


def linear_rampup(current, rampup_length=args.epochs):
    if rampup_length == 0:
        return 1.0
    else:
        current = np.clip(current / rampup_length, 0.0, 1.0)
        return float(current)

class SemiLoss(object):
    def __call__(self, outputs_x, targets_x, outputs_u, targets_u, epoch):
        probs_u = torch.softmax(outputs_u, dim=1)

        Lx = -torch.mean(torch.sum(F.log_softmax(outputs_x, dim=1) * targets_x, dim=1))
        Lu = torch.mean((probs_u - targets_u)**2)

        return Lx, Lu, args.lambda_u * linear_rampup(epoch)

class WeightEMA(object):
    def __init__(self, model, ema_model, alpha=0.999):
        self.model = model
        self.ema_model = ema_model
        self.alpha = alpha
        self.tmp_model = SmallNet(num_classes=10)
        self.wd = 0.02 * args.lr

        for param, ema_param in zip(self.model.parameters(), self.ema_model.parameters()):
            ema_param.data.copy_(param.data)

    def step(self, bn=False):
        if bn:
            # copy batchnorm stats to ema model
            for ema_param, tmp_param in zip(self.ema_model.parameters(), self.tmp_model.parameters()):
                tmp_param.data.copy_(ema_param.data.detach())

            self.ema_model.load_state_dict(self.model.state_dict())

            for ema_param, tmp_param in zip(self.ema_model.parameters(), self.tmp_model.parameters()):
                ema_param.data.copy_(tmp_param.data.detach())
        else:
            one_minus_alpha = 1.0 - self.alpha
            for param, ema_param in zip(self.model.parameters(), self.ema_model.parameters()):
                ema_param.data.mul_(self.alpha)
                ema_param.data.add_(param.data.detach() * one_minus_alpha)
                # customized weight decay
                param.data.mul_(1 - self.wd)

def interleave_offsets(batch, nu):
    groups = [batch // (nu + 1)] * (nu + 1)
    for x in range(batch - sum(groups)):
        groups[-x - 1] += 1
    offsets = [0]
    for g in groups:
        offsets.append(offsets[-1] + g)
    assert offsets[-1] == batch
    return offsets


def interleave(xy, batch):
    nu = len(xy) - 1
    offsets = interleave_offsets(batch, nu)
    xy = [[v[offsets[p]:offsets[p + 1]] for p in range(nu + 1)] for v in xy]
    for i in range(1, nu + 1):
        xy[0][i], xy[i][i] = xy[i][i], xy[0][i]
    return [torch.cat(v, dim=0) for v in xy]


class TwoViewDataset(data.Dataset):
    """Adaptation: stand-in for the unlabeled CIFAR-10 split with TransformTwice (two noisy views, seeded)."""

    def __init__(self, views1, views2):
        self.views1, self.views2 = views1, views2

    def __len__(self):
        return len(self.views1)

    def __getitem__(self, i):
        return (self.views1[i], self.views2[i]), -1


def reset_(model, ema_model, optimizer, snapshot, seed):
    """Adaptation: restore the networks and the optimizer and seed the host and torch generators."""
    model.load_state_dict(snapshot["model"])  # BREAK
    ema_model.load_state_dict(snapshot["ema_model"])  # BREAK
    optimizer.load_state_dict(snapshot["optimizer"])  # BREAK
    np.random.seed(seed)
    torch.manual_seed(seed)  # BREAK


def train_epoch(labeled_trainloader, unlabeled_trainloader, model, ema_model, optimizer, ema_optimizer, criterion,
                snapshot, epoch, seed):
    reset_(model, ema_model, optimizer, snapshot, seed)
    return train(labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion, epoch, False)


def target():
    torch.manual_seed(0)
    model = SmallNet(10)
    ema_model = SmallNet(10)
    for param in ema_model.parameters():
        param.detach_()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    ema_optimizer = WeightEMA(model, ema_model, alpha=args.ema_decay)
    criterion = SemiLoss()
    snapshot = {"model": copy.deepcopy(model.state_dict()), "ema_model": copy.deepcopy(ema_model.state_dict()),
                "optimizer": copy.deepcopy(optimizer.state_dict())}
    gen = torch.Generator().manual_seed(0)
    x_l = torch.randn(12, 8, generator=gen)
    y_l = torch.randint(0, 10, (12,), generator=gen)
    x_u = torch.randn(16, 8, generator=gen)
    u1 = x_u + 0.1 * torch.randn(16, 8, generator=gen)
    u2 = x_u + 0.1 * torch.randn(16, 8, generator=gen)
    labeled_trainloader = data.DataLoader(data.TensorDataset(x_l, y_l), batch_size=4, shuffle=False)
    unlabeled_trainloader = data.DataLoader(TwoViewDataset(u1, u2), batch_size=4, shuffle=False)
    common = (labeled_trainloader, unlabeled_trainloader, model, ema_model, optimizer, ema_optimizer, criterion,
              snapshot)
    return [
        (train_epoch, common + (0, 0), {}),
        (train_epoch, common + (2, 1), {}),
    ]


EXPECT = ("caller: the epoch is a host-driven loop (loader iterators with `try/except` restarts, the "
          "`np.random.beta` mixup weight, `max(l, 1-l)`, the `np.clip` ramp-up weight, `.item()` meters, the "
          "progress-bar suffix and `backward`/optimizer/EMA steps); draw `l` in the caller, keep the loop eager "
          "and compile the per-iteration forward (label guessing, mixup, interleaved model calls, `SemiLoss`)")
