"""SimSiam pre-training epochs with a fixed-LR predictor, from facebookresearch/simsiam (`main_simsiam.py`
`main_worker`'s optimiser setup and epoch loop, `train`, `AverageMeter`, `ProgressMeter`, `adjust_learning_rate`,
`save_checkpoint`; `simsiam/builder.py` `SimSiam`). `SimSiam.__init__` builds the encoder from a
`base_encoder(num_classes=dim, zero_init_residual=True)` factory, reads `self.encoder.fc.weight.shape[1]`, freezes
the old `fc.bias` (`requires_grad = False`) and wraps it into a 3-layer projector, and adds a 2-layer predictor;
`forward` returns `p1, p2, z1.detach(), z2.detach()`. `main_worker` makes two parameter groups with a `'fix_lr'`
flag (`args.fix_pred_lr`) for SGD with `args.lr` (the stored revision; later ones scale an `init_lr` by the batch size); each epoch
`adjust_learning_rate` computes a `math.cos` schedule and, per group, `if 'fix_lr' in param_group and
param_group['fix_lr']:` keeps the initial LR. `train` keeps three `AverageMeter`s (`time.time()` deltas,
`loss.item()` with `images[0].size(0)`), moves `images[0]`/`images[1]` in place in the list when `args.gpu is not
None`, computes the negative-cosine loss with `nn.CosineSimilarity(dim=1)`, steps, and every `print_freq` batches
`ProgressMeter.display` builds `'\\t'.join` of `str(meter)` (`AverageMeter.__str__` formats `**self.__dict__` through
a format string assembled from `self.fmt`) and prints; the epoch loop saves a checkpoint dict with
`'checkpoint_{:04d}.pth.tar'.format(epoch)` when not distributed or rank 0. Adaptations: DDP/SyncBN are dropped
(`model.module.encoder` is `model.encoder`; the original raises `NotImplementedError` without DDP); the ResNet-50
`base_encoder` is a small CNN factory with an `fc` and the `zero_init_residual` argument; the ImageNet
`TwoCropsTransform` loader is a list of `([x1, x2], target)` batches of random tensors made in the factory;
`save_checkpoint` keeps the dict's epoch and file name in a list (`torch.save`/`shutil.copyfile` dropped). So that
a call repeats, the called function `main_worker` restores the model from the factory's copy, seeds torch
(`reset_`) and builds its optimiser as the original does; it returns the losses' averages and the final group LRs."""
import copy
import math
import time

import torch
import torch.nn as nn


# ---- simsiam/builder.py
class SimSiam(nn.Module):
    """
    Build a SimSiam model.
    """
    def __init__(self, base_encoder, dim=2048, pred_dim=512):
        """
        dim: feature dimension (default: 2048)
        pred_dim: hidden dimension of the predictor (default: 512)
        """
        super(SimSiam, self).__init__()

        # create the encoder
        # num_classes is the output fc dimension, zero-initialize last BNs
        self.encoder = base_encoder(num_classes=dim, zero_init_residual=True)

        # build a 3-layer projector
        prev_dim = self.encoder.fc.weight.shape[1]
        self.encoder.fc.bias.requires_grad = False # not use bias as followed by BN
        self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True), # first layer
                                        nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True), # second layer
                                        self.encoder.fc,
                                        nn.BatchNorm1d(dim, affine=False)) # output layer

        # build a 2-layer predictor
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                        nn.BatchNorm1d(pred_dim),
                                        nn.ReLU(inplace=True), # hidden layer
                                        nn.Linear(pred_dim, dim)) # output layer

    def forward(self, x1, x2):
        """
        Input:
            x1: first views of images
            x2: second views of images
        Output:
            p1, p2, z1, z2: predictors and targets of the network
            See Sec. 3 of https://arxiv.org/abs/2011.10566 for detailed notations
        """

        # compute features for one view
        z1 = self.encoder(x1) # NxC
        z2 = self.encoder(x2) # NxC

        p1 = self.predictor(z1) # NxC
        p2 = self.predictor(z2) # NxC

        return p1, p2, z1.detach(), z2.detach()


# ---- stand-in
class SmallResNet(nn.Module):
    """Stand-in for torchvision.models.resnet50 (torchvision does not import): a small CNN with an `fc`."""
    def __init__(self, num_classes=1000, zero_init_residual=False):
        super(SmallResNet, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                                      nn.AdaptiveAvgPool2d(1))
        if zero_init_residual:
            nn.init.constant_(self.features[1].weight, 1.0)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


checkpoints = []


# ---- main_simsiam.py
def main_worker(model, train_loader, args, initial_state):
    reset_(model, initial_state)

    # define loss function (criterion) and optimizer
    criterion = nn.CosineSimilarity(dim=1)

    if args.fix_pred_lr:
        optim_params = [{'params': model.encoder.parameters(), 'fix_lr': False},
                        {'params': model.predictor.parameters(), 'fix_lr': True}]
    else:
        optim_params = model.parameters()

    optimizer = torch.optim.SGD(optim_params, args.lr,  # BREAK
                                momentum=args.momentum,
                                weight_decay=args.weight_decay)

    averages = []
    for epoch in range(args.start_epoch, args.epochs):
        adjust_learning_rate(optimizer, epoch, args)

        # train for one epoch
        averages.append(train(train_loader, model, criterion, optimizer, epoch, args))

        if not args.multiprocessing_distributed or (args.multiprocessing_distributed
                and args.rank % args.ngpus_per_node == 0):
            save_checkpoint({
                'epoch': epoch + 1,
                'arch': args.arch,
                'state_dict': model.state_dict(),
                'optimizer' : optimizer.state_dict(),
            }, is_best=False, filename='checkpoint_{:04d}.pth.tar'.format(epoch))
    return averages, [g['lr'] for g in optimizer.param_groups]


def train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter('Time', ':6.3f')
    data_time = AverageMeter('Data', ':6.3f')
    losses = AverageMeter('Loss', ':.4f')
    progress = ProgressMeter(
        len(train_loader),
        [batch_time, data_time, losses],
        prefix="Epoch: [{}]".format(epoch))

    # switch to train mode
    model.train()

    end = time.time()  # BREAK
    for i, (images, _) in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)  # BREAK

        if args.gpu is not None:
            images[0] = images[0].cuda(args.gpu, non_blocking=True)
            images[1] = images[1].cuda(args.gpu, non_blocking=True)

        # compute output and loss
        p1, p2, z1, z2 = model(x1=images[0], x2=images[1])
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5

        losses.update(loss.item(), images[0].size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # BREAK

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            progress.display(i)
    return losses.avg


def save_checkpoint(state, is_best, filename='checkpoint.pth.tar'):
    checkpoints.append((state['epoch'], filename))  # adaptation: torch.save(state, filename)


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
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

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


class ProgressMeter(object):
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print('\t'.join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = '{:' + str(num_digits) + 'd}'
        return '[' + fmt + '/' + fmt.format(num_batches) + ']'


def adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate based on schedule"""
    lr = args.lr * 0.5 * (1. + math.cos(math.pi * epoch / args.epochs))
    for param_group in optimizer.param_groups:
        if 'fix_lr' in param_group and param_group['fix_lr']:
            param_group['lr'] = args.lr
        else:
            param_group['lr'] = lr


def reset_(model, initial_state):
    """Adaptation: restore the model from the factory's copy and seed torch, so that a call repeats."""
    model.load_state_dict(initial_state)  # BREAK
    torch.manual_seed(0)  # BREAK
    del checkpoints[:]


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(0)
    model = SimSiam(SmallResNet, dim=16, pred_dim=4)
    initial_state = copy.deepcopy(model.state_dict())

    def batches(n, bs):
        out = []
        for _ in range(n):
            x = torch.randn(bs, 3, 8, 8)
            out.append(([x + 0.1 * torch.randn_like(x), x.flip(3)], torch.zeros(bs, dtype=torch.long)))
        return out

    train_loader = batches(3, 4)
    common = dict(batch_size=4, momentum=0.9, weight_decay=1e-4, start_epoch=0, gpu=None, print_freq=1,
                  multiprocessing_distributed=False, rank=0, ngpus_per_node=1, arch='resnet50')
    args1 = Args(lr=0.05, epochs=2, fix_pred_lr=True, **common)
    args2 = Args(lr=0.03, epochs=3, fix_pred_lr=False, **common)
    return [
        (main_worker, (model, train_loader, args1, initial_state), {}),
        (main_worker, (model, train_loader, args2, initial_state), {}),
    ]


EXPECT = ("rewrite: the SimSiam forward and loss trace whole; the training driver's host parts break: `time.time()` "
          "in `train` (start and per-batch deltas), `loss.item()`, `optimizer.step()`, `ProgressMeter.display`'s "
          "`str(meter)`/`print`, and `reset_`'s `load_state_dict`; `adjust_learning_rate`'s `param_group` writes "
          "are plain Python")
