"""One CutMix training epoch (clovaai/CutMix-PyTorch train.py: `train`, `rand_bbox`, `AverageMeter`,
`get_learning_rate`, `accuracy`, the module-level `args`). Per batch: `time.time()` data timing, a host draw
`r = np.random.rand(1)` deciding `if args.beta > 0 and r < args.cutmix_prob:`, then `lam = np.random.beta(...)`,
`torch.randperm`, `rand_bbox` (NumPy `np.sqrt`, `np.random.randint`, `np.clip` box corners) used as slice bounds in
`input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2, bby1:bby2]`, legacy
`torch.autograd.Variable(input, requires_grad=True)` wrappers, the mixed loss
`criterion(output, target_a_var) * lam + criterion(output, target_b_var) * (1. - lam)`, top-1/top-5 errors,
`losses.update(loss.item(), ...)`, `top1.update(err1.item(), ...)`, `backward`/`optimizer.step()`, and a formatted
progress `print` every `args.print_freq` batches and at the end of the epoch.
Adaptations: `.cuda()` calls are dropped (CPU only); `np.int` (removed from NumPy) became `int` in `rand_bbox`; in `accuracy`,
`correct[:k].view(-1)` became `correct[:k].reshape(-1)` (the view of the transposed `pred` fails in current torch);
`args` is a `SimpleNamespace` with the script's CutMix settings (`beta=1.0`, `cutmix_prob=0.5`, `print_freq=1`,
`verbose=True`, `epochs=2`); the PyramidNet/ResNet is replaced by a two-layer CNN (10 classes, 3x8x8 images); the
data are 24 seeded images in a `DataLoader` with batches of 6 (no shuffling; the default collate stacks new
batch tensors, so the in-place CutMix paste does not touch the dataset). So that a call repeats exactly, the called function first
restores the model and SGD state from copies taken in the factory and seeds NumPy's and torch's global generators
(`reset_`, an adaptation); it returns `losses.avg`, as `train` does. The two calls use
different seeds and epochs."""
import copy
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

args = SimpleNamespace(beta=1.0, cutmix_prob=0.5, print_freq=1, verbose=True, epochs=2)


class SmallNet(nn.Module):
    """Adaptation: stand-in for RN.ResNet / PYRM.PyramidNet."""

    def __init__(self, numberofclass=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, numberofclass)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.mean(dim=(2, 3)))


def train(train_loader, model, criterion, optimizer, epoch):
    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    top1 = AverageMeter()
    top5 = AverageMeter()

    # switch to train mode
    model.train()

    end = time.time()  # BREAK
    current_LR = get_learning_rate(optimizer)[0]
    for i, (input, target) in enumerate(train_loader):  # BREAK
        # measure data loading time
        data_time.update(time.time() - end)

        r = np.random.rand(1)
        if args.beta > 0 and r < args.cutmix_prob:
            # generate mixed sample
            lam = np.random.beta(args.beta, args.beta)
            rand_index = torch.randperm(input.size()[0])
            target_a = target
            target_b = target[rand_index]
            bbx1, bby1, bbx2, bby2 = rand_bbox(input.size(), lam)
            input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2, bby1:bby2]
            # compute output
            input_var = torch.autograd.Variable(input, requires_grad=True)
            target_a_var = torch.autograd.Variable(target_a)
            target_b_var = torch.autograd.Variable(target_b)
            output = model(input_var)
            loss = criterion(output, target_a_var) * lam + criterion(output, target_b_var) * (1. - lam)
        else:
            # compute output
            input_var = torch.autograd.Variable(input, requires_grad=True)
            target_var = torch.autograd.Variable(target)
            output = model(input_var)
            loss = criterion(output, target_var)

        # measure accuracy and record loss
        err1, err5 = accuracy(output.data, target, topk=(1, 5))

        losses.update(loss.item(), input.size(0))
        top1.update(err1.item(), input.size(0))
        top5.update(err5.item(), input.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0 and args.verbose == True:
            print('Epoch: [{0}/{1}][{2}/{3}]\t'
                  'LR: {LR:.6f}\t'
                  'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
                  'Data {data_time.val:.3f} ({data_time.avg:.3f})\t'
                  'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                  'Top 1-err {top1.val:.4f} ({top1.avg:.4f})\t'
                  'Top 5-err {top5.val:.4f} ({top5.avg:.4f})'.format(
                epoch, args.epochs, i, len(train_loader), LR=current_LR, batch_time=batch_time,
                data_time=data_time, loss=losses, top1=top1, top5=top5))

    print('* Epoch: [{0}/{1}]\t Top 1-err {top1.avg:.3f}  Top 5-err {top5.avg:.3f}\t Train Loss {loss.avg:.3f}'.format(
        epoch, args.epochs, top1=top1, top5=top5, loss=losses))

    return losses.avg


def rand_bbox(size, lam):
    W = size[2]
    H = size[3]
    cut_rat = np.sqrt(1. - lam)
    cut_w = int(W * cut_rat)
    cut_h = int(H * cut_rat)

    # uniform
    cx = np.random.randint(W)
    cy = np.random.randint(H)

    bbx1 = np.clip(cx - cut_w // 2, 0, W)
    bby1 = np.clip(cy - cut_h // 2, 0, H)
    bbx2 = np.clip(cx + cut_w // 2, 0, W)
    bby2 = np.clip(cy + cut_h // 2, 0, H)

    return bbx1, bby1, bbx2, bby2


class AverageMeter(object):
    """Computes and stores the average and current value"""

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


def get_learning_rate(optimizer):
    lr = []
    for param_group in optimizer.param_groups:
        lr += [param_group['lr']]
    return lr


def accuracy(output, target, topk=(1,)):
    """Computes the precision@k for the specified values of k"""
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
        wrong_k = batch_size - correct_k
        res.append(wrong_k.mul_(100.0 / batch_size))

    return res


def reset_(model, optimizer, snapshot, seed):
    """Adaptation: restore the model and optimizer and seed the host and torch generators."""
    model.load_state_dict(snapshot["model"])  # BREAK
    optimizer.load_state_dict(snapshot["optimizer"])  # BREAK
    np.random.seed(seed)
    torch.manual_seed(seed)  # BREAK


def train_epoch(train_loader, model, criterion, optimizer, snapshot, epoch, seed):
    reset_(model, optimizer, snapshot, seed)
    train_loss = train(train_loader, model, criterion, optimizer, epoch)
    return train_loss


def target():
    torch.manual_seed(0)
    model = SmallNet(10)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4, nesterov=True)
    snapshot = {"model": copy.deepcopy(model.state_dict()), "optimizer": copy.deepcopy(optimizer.state_dict())}
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(24, 3, 8, 8, generator=gen)
    labels = torch.randint(0, 10, (24,), generator=gen)
    dataset = torch.utils.data.TensorDataset(images, labels)
    train_loader = torch.utils.data.DataLoader(dataset, batch_size=6, shuffle=False)
    return [
        (train_epoch, (train_loader, model, criterion, optimizer, snapshot, 0, 0), {}),
        (train_epoch, (train_loader, model, criterion, optimizer, snapshot, 1, 5), {}),
    ]


EXPECT = ("caller: the CutMix decision and box are host RNG and NumPy (`np.random.rand`, `np.random.beta`, "
          "`rand_bbox`'s `np.random.randint`/`np.clip` used as slice bounds) and the meters read `loss.item()`/"
          "`err1.item()` and print per batch; keep the epoch loop eager, draw `r`, `lam` and the box in the caller, "
          "and compile the per-batch forward/loss (the model and the mixed criterion)")
