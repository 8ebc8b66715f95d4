"""Two epochs of LDAM-DRW training with per-epoch deferred re-weighting, from kaidic/LDAM-DRW (`cifar_train.py`
`main_worker`'s epoch loop, `train`, `validate`, `adjust_learning_rate`; `losses.py` `LDAMLoss`, `FocalLoss`,
`focal_loss`; `utils.py` `AverageMeter`, `accuracy`). Each epoch calls `adjust_learning_rate` (Python warm-up/step
branches writing every `param_group['lr']`), builds `per_cls_weights` for the `train_rule` (`'DRW'`: `idx = epoch //
160` into `betas = [0, 0.9999]`, `np.power`/`np.array`/`np.sum` effective numbers, `torch.FloatTensor(...)`) and a
new criterion for the `loss_type` (`LDAMLoss` builds its margins `m_list` with NumPy and in `forward` scatters a
one-hot `index`, `matmul`s the margins and picks with `torch.where(index, x_m, x)`; `FocalLoss` calls `focal_loss`
on the unreduced cross entropy). `train` keeps five `AverageMeter`s (`loss.item()`, `acc1[0]` tensors), times with
`time.time()`, formats a long `str.format` line every `print_freq` steps and writes it to the log; `validate` runs
under `torch.no_grad()`, extends Python lists with `pred.cpu().numpy()`, builds a confusion matrix, per-class
accuracies with `np.diag`, prints them with `np.array2string` (a `lambda` formatter) and logs a dict comprehension
through `tf_writer.add_scalars`; the loop keeps `best_acc1 = max(acc1, best_acc1)` and the checkpoint dict.
Adaptations: the ResNet-32 is a small CNN with the `use_norm` flag's `NormedLinear` head; the imbalanced CIFAR loaders
are lists of random batches made in the factory (`cls_num_list` given); `torch.cuda.FloatTensor` is
`torch.FloatTensor` and `.cuda(...)` calls are dropped; `LDAMLoss`'s one-hot `index` is `torch.bool` instead of
`torch.uint8` (`torch.where` refuses a uint8 condition in this torch); the DRW switch epoch 160 is the `drw_epoch`
argument (1 here); sklearn's `confusion_matrix` (not installed) is a NumPy stand-in with the same result for labels
`0..C-1`; tensorboardX's `SummaryWriter` is a recorder; the log files are `io.StringIO`s and `save_checkpoint` keeps
the dict in a list. So that a call repeats, the called function `main_worker` restores the model from the factory's
copy (`reset_`), seeds torch and builds its optimizer itself, as the original does; it returns the last accuracy,
the best accuracy and the recorded scalars."""
import copy
import io
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Parameter


# ---- losses.py
def focal_loss(input_values, gamma):
    """Computes the focal loss"""
    p = torch.exp(-input_values)
    loss = (1 - p) ** gamma * input_values
    return loss.mean()


class FocalLoss(nn.Module):
    def __init__(self, weight=None, gamma=0.):
        super(FocalLoss, self).__init__()  # BREAK
        assert gamma >= 0
        self.gamma = gamma
        self.weight = weight

    def forward(self, input, target):
        return focal_loss(F.cross_entropy(input, target, reduction='none', weight=self.weight), self.gamma)


class LDAMLoss(nn.Module):

    def __init__(self, cls_num_list, max_m=0.5, weight=None, s=30):
        super(LDAMLoss, self).__init__()  # BREAK
        m_list = 1.0 / np.sqrt(np.sqrt(cls_num_list))
        m_list = m_list * (max_m / np.max(m_list))
        m_list = torch.FloatTensor(m_list)
        self.m_list = m_list
        assert s > 0
        self.s = s
        self.weight = weight

    def forward(self, x, target):
        index = torch.zeros_like(x, dtype=torch.bool)
        index.scatter_(1, target.data.view(-1, 1), 1)

        index_float = index.type(torch.FloatTensor)
        batch_m = torch.matmul(self.m_list[None, :], index_float.transpose(0, 1))
        batch_m = batch_m.view((-1, 1))
        x_m = x - batch_m

        output = torch.where(index, x_m, x)
        return F.cross_entropy(self.s * output, target, weight=self.weight)


# ---- utils.py
class AverageMeter(object):

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


def accuracy(output, target, topk=(1,)):

    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))

        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


# ---- stand-ins
def confusion_matrix(y_true, y_pred):
    """Stand-in for sklearn.metrics.confusion_matrix (not installed), labels 0..C-1."""
    n = int(max(max(y_true), max(y_pred))) + 1  # BREAK
    cm = np.zeros((n, n), dtype=np.int64)
    for t, p in zip(y_true, y_pred):
        cm[t, p] += 1
    return cm


class SummaryWriter(object):
    """Stand-in for tensorboardX.SummaryWriter: records calls."""
    def __init__(self, log_dir=''):
        self.records = []

    def add_scalar(self, tag, value, step):
        self.records.append((tag, float(value), step))

    def add_scalars(self, tag, values, step):
        self.records.append((tag, sorted(values), step))


class NormedLinear(nn.Module):

    def __init__(self, in_features, out_features):
        super(NormedLinear, self).__init__()
        self.weight = Parameter(torch.Tensor(in_features, out_features))
        self.weight.data.uniform_(-1, 1).renorm_(2, 1, 1e-5).mul_(1e5)

    def forward(self, x):
        out = F.normalize(x, dim=1).mm(F.normalize(self.weight, dim=0))
        return out


class ResNetSmall(nn.Module):
    """Stand-in for models.resnet32 (a small CNN, same `num_classes`/`use_norm` arguments)."""
    def __init__(self, num_classes=10, use_norm=False):
        super(ResNetSmall, self).__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1))
        if use_norm:
            self.linear = NormedLinear(8, num_classes)
        else:
            self.linear = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.linear(self.conv(x).flatten(1))


saved_checkpoints = []


def save_checkpoint(args, state, is_best):
    """Adaptation: keeps the state instead of torch.save + shutil.copyfile."""
    saved_checkpoints.append((state['epoch'], is_best))


# ---- cifar_train.py
def train(train_loader, model, criterion, optimizer, epoch, args, log, tf_writer):
    batch_time = AverageMeter('Time', ':6.3f')
    data_time = AverageMeter('Data', ':6.3f')
    losses = AverageMeter('Loss', ':.4e')
    top1 = AverageMeter('Acc@1', ':6.2f')
    top5 = AverageMeter('Acc@5', ':6.2f')

    # switch to train mode
    model.train()

    end = time.time()  # BREAK
    for i, (input, target) in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)  # BREAK

        # compute output
        output = model(input)
        loss = criterion(output, target)

        # measure accuracy and record loss
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), input.size(0))
        top1.update(acc1[0], input.size(0))
        top5.update(acc5[0], input.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # BREAK

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            output = ('Epoch: [{0}][{1}/{2}], lr: {lr:.5f}\t'
                      'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
                      'Data {data_time.val:.3f} ({data_time.avg:.3f})\t'
                      'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                      'Prec@1 {top1.val:.3f} ({top1.avg:.3f})\t'
                      'Prec@5 {top5.val:.3f} ({top5.avg:.3f})'.format(
                epoch, i, len(train_loader), batch_time=batch_time,
                data_time=data_time, loss=losses, top1=top1, top5=top5, lr=optimizer.param_groups[-1]['lr'] * 0.1))  # TODO
            print(output)
            log.write(output + '\n')
            log.flush()

    tf_writer.add_scalar('loss/train', losses.avg, epoch)
    tf_writer.add_scalar('acc/train_top1', top1.avg, epoch)
    tf_writer.add_scalar('acc/train_top5', top5.avg, epoch)
    tf_writer.add_scalar('lr', optimizer.param_groups[-1]['lr'], epoch)


def validate(val_loader, model, criterion, epoch, args, log=None, tf_writer=None, flag='val'):
    batch_time = AverageMeter('Time', ':6.3f')
    losses = AverageMeter('Loss', ':.4e')
    top1 = AverageMeter('Acc@1', ':6.2f')
    top5 = AverageMeter('Acc@5', ':6.2f')

    # switch to evaluate mode
    model.eval()
    all_preds = []
    all_targets = []
    with torch.no_grad():
        end = time.time()  # BREAK
        for i, (input, target) in enumerate(val_loader):

            # compute output
            output = model(input)
            loss = criterion(output, target)

            # measure accuracy and record loss
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), input.size(0))  # BREAK
            top1.update(acc1[0], input.size(0))
            top5.update(acc5[0], input.size(0))

            # measure elapsed time
            batch_time.update(time.time() - end)
            end = time.time()

            _, pred = torch.max(output, 1)
            all_preds.extend(pred.cpu().numpy())
            all_targets.extend(target.cpu().numpy())

            if i % args.print_freq == 0:
                output = ('Test: [{0}/{1}]\t'
                          'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
                          'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
                          'Prec@1 {top1.val:.3f} ({top1.avg:.3f})\t'
                          'Prec@5 {top5.val:.3f} ({top5.avg:.3f})'.format(
                    i, len(val_loader), batch_time=batch_time, loss=losses,
                    top1=top1, top5=top5))
                print(output)
        cf = confusion_matrix(all_targets, all_preds).astype(float)
        cls_cnt = cf.sum(axis=1)
        cls_hit = np.diag(cf)
        cls_acc = cls_hit / cls_cnt
        output = ('{flag} Results: Prec@1 {top1.avg:.3f} Prec@5 {top5.avg:.3f} Loss {loss.avg:.5f}'
                .format(flag=flag, top1=top1, top5=top5, loss=losses))
        out_cls_acc = '%s Class Accuracy: %s'%(flag,(np.array2string(cls_acc, separator=',', formatter={'float_kind':lambda x: "%.3f" % x})))  # BREAK
        print(output)
        print(out_cls_acc)
        if log is not None:
            log.write(output + '\n')
            log.write(out_cls_acc + '\n')
            log.flush()

        tf_writer.add_scalar('loss/test_'+ flag, losses.avg, epoch)
        tf_writer.add_scalar('acc/test_' + flag + '_top1', top1.avg, epoch)
        tf_writer.add_scalar('acc/test_' + flag + '_top5', top5.avg, epoch)
        tf_writer.add_scalars('acc/test_' + flag + '_cls_acc', {str(i):x for i, x in enumerate(cls_acc)}, epoch)

    return top1.avg


def adjust_learning_rate(optimizer, epoch, args):
    """Sets the learning rate to the initial LR decayed by 10 every 30 epochs"""
    epoch = epoch + 1
    if epoch <= 5:
        lr = args.lr * epoch / 5
    elif epoch > 180:
        lr = args.lr * 0.0001
    elif epoch > 160:
        lr = args.lr * 0.01
    else:
        lr = args.lr
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def main_worker(model, train_loader, val_loader, args, initial_state):
    reset_(model, initial_state)
    best_acc1 = 0
    cls_num_list = args.cls_num_list
    optimizer = torch.optim.SGD(model.parameters(), args.lr,  # BREAK
                                momentum=args.momentum,
                                weight_decay=args.weight_decay)
    log_training = io.StringIO()
    log_testing = io.StringIO()
    tf_writer = SummaryWriter(log_dir=args.store_name)
    for epoch in range(args.start_epoch, args.epochs):
        adjust_learning_rate(optimizer, epoch, args)

        if args.train_rule == 'None':
            train_sampler = None
            per_cls_weights = None
        elif args.train_rule == 'Reweight':
            train_sampler = None
            beta = 0.9999
            effective_num = 1.0 - np.power(beta, cls_num_list)
            per_cls_weights = (1.0 - beta) / np.array(effective_num)
            per_cls_weights = per_cls_weights / np.sum(per_cls_weights) * len(cls_num_list)
            per_cls_weights = torch.FloatTensor(per_cls_weights)
        elif args.train_rule == 'DRW':
            train_sampler = None
            idx = epoch // args.drw_epoch
            betas = [0, 0.9999]
            effective_num = 1.0 - np.power(betas[idx], cls_num_list)
            per_cls_weights = (1.0 - betas[idx]) / np.array(effective_num)
            per_cls_weights = per_cls_weights / np.sum(per_cls_weights) * len(cls_num_list)
            per_cls_weights = torch.FloatTensor(per_cls_weights)
        else:
            warnings.warn('Sample rule is not listed')

        if args.loss_type == 'CE':
            criterion = nn.CrossEntropyLoss(weight=per_cls_weights)
        elif args.loss_type == 'LDAM':
            criterion = LDAMLoss(cls_num_list=cls_num_list, max_m=0.5, s=30, weight=per_cls_weights)
        elif args.loss_type == 'Focal':
            criterion = FocalLoss(weight=per_cls_weights, gamma=1)
        else:
            warnings.warn('Loss type is not listed')
            return

        # train for one epoch
        train(train_loader, model, criterion, optimizer, epoch, args, log_training, tf_writer)

        # evaluate on validation set
        acc1 = validate(val_loader, model, criterion, epoch, args, log_testing, tf_writer)

        # remember best acc@1 and save checkpoint
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)

        tf_writer.add_scalar('acc/test_top1_best', best_acc1, epoch)
        output_best = 'Best Prec@1: %.3f\n' % (best_acc1)
        print(output_best)
        log_testing.write(output_best + '\n')
        log_testing.flush()

        save_checkpoint(args, {
            'epoch': epoch + 1,
            'arch': args.arch,
            'state_dict': model.state_dict(),
            'best_acc1': best_acc1,
            'optimizer': optimizer.state_dict(),
        }, is_best)

    return acc1, best_acc1, [r for r in tf_writer.records if r[0].startswith(('loss', 'lr'))]


def reset_(model, initial_state):
    """Adaptation: restore the model from the factory's copy and seed, so that a call repeats."""
    model.load_state_dict(initial_state)  # BREAK
    torch.manual_seed(0)  # BREAK
    del saved_checkpoints[:]


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(0)
    cls_num_list = [40, 24, 14, 8, 5, 3]
    num_classes = len(cls_num_list)

    def batches(n, bs):
        return [(torch.randn(bs, 3, 8, 8), torch.randint(0, num_classes, (bs,))) for _ in range(n)]

    train_loader, val_loader = batches(3, 6), batches(2, 6)
    model_ldam = ResNetSmall(num_classes=num_classes, use_norm=True)
    model_focal = ResNetSmall(num_classes=num_classes, use_norm=False)
    common = dict(lr=0.1, momentum=0.9, weight_decay=2e-4, print_freq=2, start_epoch=0, epochs=2, arch='resnet32',
                  cls_num_list=cls_num_list, drw_epoch=1, store_name='cifar10_resnet32')
    args1 = Args(loss_type='LDAM', train_rule='DRW', **common)
    args2 = Args(loss_type='Focal', train_rule='Reweight', **common)
    return [
        (main_worker, (model_ldam, train_loader, val_loader, args1, copy.deepcopy(model_ldam.state_dict())), {}),
        (main_worker, (model_focal, train_loader, val_loader, args2, copy.deepcopy(model_focal.state_dict())), {}),
    ]


EXPECT = ("extract: the epoch driver is host logic throughout (NumPy effective-number weights and `torch.FloatTensor` "
          "per epoch, `time.time()` meters, `loss.item()`, `str.format` logging, `pred.cpu().numpy()` list extends, "
          "a NumPy confusion matrix and `np.array2string`); breaks expected at the `time.time()` lines in `train`/"
          "`validate`, `optimizer.step()`, the `.numpy()` extends and `reset_`'s `load_state_dict`; `LDAMLoss.forward` "
          "and `accuracy` should trace whole")
