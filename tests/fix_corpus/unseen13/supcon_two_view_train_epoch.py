"""One epoch of supervised-contrastive training (HobbitLong/SupContrast: `losses.py` `SupConLoss`,
`main_supcon.py` `train`, `util.py` `AverageMeter`, `adjust_learning_rate`, `warmup_learning_rate`,
`set_optimizer`). `SupConLoss.forward` picks the device from `features.is_cuda`, raises `ValueError` on
`len(features.shape) < 3`, reshapes 4-d+ features, branches on `labels`/`mask` being `None` (`torch.eq(labels,
labels.T)` mask, `labels.shape[0] != batch_size` check), builds `contrast_feature` with `torch.cat(torch.unbind(...))`,
dispatches on the `contrast_mode` string, subtracts the detached row max, tiles the mask with `repeat`, masks
self-contrast with `torch.scatter(torch.ones_like(mask), 1, torch.arange(...).view(-1, 1), 0)`, and averages the
log-probability over positives. `train` (the stored revision: a loop over a list of loaders, each yielding
`(images, labels)` with two views) squeezes and concatenates the views, calls `warmup_learning_rate` (writes
`param_group["lr"]` while `epoch <= warm_epochs`), splits the features with `torch.split(features, [bsz, bsz])`,
dispatches on `opt.method`, updates `AverageMeter`s with `loss.item()` and `time.time()` deltas, steps SGD and
prints with `str.format` plus `sys.stdout.flush()` every `print_freq` iterations. Before the epoch,
`adjust_learning_rate` uses `np.sum(epoch > np.asarray(args.lr_decay_epochs))` (step decay; cosine branch kept).
Adaptations: the ViT/ResNet encoder (timm/torchvision) is a stand-in `SupConNet` (MLP encoder, MLP head,
`F.normalize`), the stored revision's `SupConVit` name; the loaders are lists of `(images, labels)` batches of
random tensors shaped as the stored loader gives them (`images` a pair `[view, view]` of `[1, B, C]`
tensors, `labels` `[1, B]`) made in the factory; `opt` is an `argparse.Namespace` with the parsed defaults that
`train` reads (`warm`, `warm_epochs`, `warmup_from/to`, `print_freq` 1, ...). So that a call repeats exactly, the
called function `train_one_epoch` restores model and optimizer from copies taken in the factory (`reset_`), runs
`adjust_learning_rate` and `train`, and returns the average loss, the learning rate and the head's output on a
fixed input."""
from __future__ import print_function

import argparse
import copy
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class SupConLoss(nn.Module):
    """Supervised Contrastive Learning: https://arxiv.org/pdf/2004.11362.pdf.
    It also supports the unsupervised contrastive loss in SimCLR"""
    def __init__(self, temperature=0.07, contrast_mode='all',
                 base_temperature=0.07):
        super(SupConLoss, self).__init__()
        self.temperature = temperature
        self.contrast_mode = contrast_mode
        self.base_temperature = base_temperature

    def forward(self, features, labels=None, mask=None):
        device = (torch.device('cuda')
                  if features.is_cuda
                  else torch.device('cpu'))

        if len(features.shape) < 3:
            raise ValueError('`features` needs to be [bsz, n_views, ...],'
                             'at least 3 dimensions are required')
        if len(features.shape) > 3:
            features = features.view(features.shape[0], features.shape[1], -1)

        batch_size = features.shape[0]
        if labels is not None and mask is not None:
            raise ValueError('Cannot define both `labels` and `mask`')
        elif labels is None and mask is None:
            mask = torch.eye(batch_size, dtype=torch.float32).to(device)
        elif labels is not None:
            labels = labels.contiguous().view(-1, 1)
            if labels.shape[0] != batch_size:
                raise ValueError('Num of labels does not match num of features')
            mask = torch.eq(labels, labels.T).float().to(device)
        else:
            mask = mask.float().to(device)

        contrast_count = features.shape[1]
        contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
        if self.contrast_mode == 'one':
            anchor_feature = features[:, 0]
            anchor_count = 1
        elif self.contrast_mode == 'all':
            anchor_feature = contrast_feature
            anchor_count = contrast_count
        else:
            raise ValueError('Unknown mode: {}'.format(self.contrast_mode))

        # compute logits
        anchor_dot_contrast = torch.div(
            torch.matmul(anchor_feature, contrast_feature.T),
            self.temperature)
        # for numerical stability
        logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
        logits = anchor_dot_contrast - logits_max.detach()

        # tile mask
        mask = mask.repeat(anchor_count, contrast_count)
        # mask-out self-contrast cases
        logits_mask = torch.scatter(
            torch.ones_like(mask),
            1,
            torch.arange(batch_size * anchor_count).view(-1, 1).to(device),
            0
        )
        mask = mask * logits_mask

        # compute log_prob
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True) + 1e-9)

        # compute mean of log-likelihood over positive
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)

        # loss
        loss = - (self.temperature / self.base_temperature) * mean_log_prob_pos
        loss = loss.view(anchor_count, batch_size).mean()

        return loss


class SupConNet(nn.Module):
    """Stand-in for the stored revision's SupConVit / upstream SupConResNet: encoder + projection head."""
    def __init__(self, name='vit', dim_in=12, feat_dim=8):
        super(SupConNet, self).__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.ReLU(inplace=True), nn.Linear(16, dim_in))
        self.head = nn.Sequential(
            nn.Linear(dim_in, dim_in),
            nn.ReLU(inplace=True),
            nn.Linear(dim_in, feat_dim)
        )

    def forward(self, x):
        feat = self.encoder(x)
        feat = F.normalize(self.head(feat), dim=1)
        return feat


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


def adjust_learning_rate(args, optimizer, epoch):
    lr = args.learning_rate
    if args.cosine:
        eta_min = lr * (args.lr_decay_rate**3)
        lr = (
            eta_min + (lr - eta_min) * (1 + math.cos(math.pi * epoch / args.epochs)) / 2
        )
    else:
        steps = np.sum(epoch > np.asarray(args.lr_decay_epochs))
        if steps > 0:  # BREAK
            lr = lr * (args.lr_decay_rate**steps)

    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def warmup_learning_rate(args, epoch, batch_id, total_batches, optimizer):
    if args.warm and epoch <= args.warm_epochs:
        p = (batch_id + (epoch - 1) * total_batches) / (
            args.warm_epochs * total_batches
        )
        lr = args.warmup_from + p * (args.warmup_to - args.warmup_from)

        for param_group in optimizer.param_groups:
            param_group["lr"] = lr


def set_optimizer(opt, model):
    optimizer = optim.SGD(
        model.parameters(),
        lr=opt.learning_rate,
        momentum=opt.momentum,
        weight_decay=opt.weight_decay,
    )
    return optimizer


def train(train_loader, model, criterion, optimizer, epoch, opt):
    """one epoch training"""
    model.train()

    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()

    end = time.time()  # BREAK
    for loader in train_loader:
        for idx, (images, labels) in enumerate(loader):
            images = [torch.squeeze(images[0]), torch.squeeze(images[0])]
            labels = torch.squeeze(labels)
            data_time.update(time.time() - end)  # BREAK

            images = torch.cat([images[0], images[1]], dim=0)
            if torch.cuda.is_available():
                images = images.cuda(non_blocking=True)
                labels = labels.cuda(non_blocking=True)
            bsz = labels.shape[0]

            # warm-up learning rate
            warmup_learning_rate(opt, epoch, idx, len(train_loader), optimizer)

            # compute loss
            features = model(images)
            f1, f2 = torch.split(features, [bsz, bsz], dim=0)
            features = torch.cat([f1.unsqueeze(1), f2.unsqueeze(1)], dim=1)
            if opt.method == 'SupCon':
                loss = criterion(features, labels)
            elif opt.method == 'SimCLR':
                loss = criterion(features)
            else:
                raise ValueError('contrastive method not supported: {}'.
                                 format(opt.method))

            # update metric
            losses.update(loss.item(), bsz)

            # SGD
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
  # BREAK
            # measure elapsed time
            batch_time.update(time.time() - end)
            end = time.time()

            # print info
            if (idx + 1) % opt.print_freq == 0:
                print('Train: [{0}][{1}/{2}]\t'
                      'BT {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
                      'DT {data_time.val:.3f} ({data_time.avg:.3f})\t'
                      'loss {loss.val:.3f} ({loss.avg:.3f})'.format(
                       epoch, idx + 1, len(train_loader), batch_time=batch_time,
                       data_time=data_time, loss=losses))
                sys.stdout.flush()

    return losses.avg


def reset_(model, optimizer, model_state, opt_state):
    """Adaptation: restore model and optimizer from the factory's copies."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)


def train_one_epoch(train_loader, model, criterion, optimizer, epoch, opt, model_state, opt_state, probe):
    reset_(model, optimizer, model_state, opt_state)
    adjust_learning_rate(opt, optimizer, epoch)
    loss = train(train_loader, model, criterion, optimizer, epoch, opt)
    model.eval()
    with torch.no_grad():
        out = model(probe)
    return torch.tensor([loss, optimizer.param_groups[0]['lr']]), out


def target():
    torch.manual_seed(0)
    opt = argparse.Namespace(print_freq=1, learning_rate=0.05, lr_decay_epochs=[700, 800, 900], lr_decay_rate=0.1,
                             weight_decay=1e-4, momentum=0.9, epochs=1000, method='SupCon', temp=0.07,
                             cosine=False, warm=True, warm_epochs=10, warmup_from=0.01, warmup_to=0.05)
    model = SupConNet(name='vit')
    criterion = SupConLoss(temperature=opt.temp)
    optimizer = set_optimizer(opt, model)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def loader(n, bsz):
        out = []
        for _ in range(n):
            view = torch.randn(1, bsz, 6)
            out.append(([view, view + 0.1 * torch.randn_like(view)], torch.randint(0, 3, (1, bsz))))
        return out

    loaders1 = [loader(2, 8), loader(1, 8)]
    loaders2 = [loader(2, 6)]
    probe = torch.randn(4, 6)
    return [
        (train_one_epoch, (loaders1, model, criterion, optimizer, 1, opt, model_state, opt_state, probe), {}),
        (train_one_epoch, (loaders2, model, criterion, optimizer, 801, opt, model_state, opt_state, probe), {}),
    ]


EXPECT = ("extract: `SupConLoss.forward` is traceable (shape tests and string dispatch are static); the breaks "
          "are the host-side bookkeeping in `train` (`loss.item()` into `AverageMeter`, `time.time()`, the "
          "`str.format` print and `sys.stdout.flush()`) and the optimizer step, which move into helpers under an "
          "escape hatch while the forward/loss stays compiled")
