"""CIFAR-100 training epochs with per-iteration warm-up and a paired-sample cross loss, from
weiaicunzai/pytorch-cifar100 (the stored `train.py` is a fork's revision: `cross_loss`, `grad_logging`, `train`,
`eval_training` and the `__main__` epoch loop; `utils.py` `WarmUpLR`). `WarmUpLR` subclasses `_LRScheduler` and
returns `[base_lr * self.last_epoch / (self.total_iters + 1e-8) for base_lr in self.base_lrs]`. `train` reads
module globals (`args`, `optimizer`, `loss_function`, `writer`, `warmup_scheduler`, the loaders), concatenates the
two-view batch lists with `torch.cat`, records `loss.item()` in `AverageMeter`s, adds the symmetric-KL `cross_loss`
on the two halves (`outputs[:len(outputs) // 2]`) when `args.use_cross_loss and args.x2_data and epoch >
args.cross_loss_start_epoch` (`cross_l *= ...`, `loss += cross_l` in place), prints multi-part f-strings with
`optimizer.param_groups[0]["lr"]`, calls `grad_logging` (`list(net.children())[-1]`, `'weight' in name`,
`writer.add_scalar(..., param.grad.norm(), n_iter)`), steps `warmup_scheduler` while `epoch <= args.warm`, and after
the loop logs histograms named with `os.path.splitext(name)` and the epoch time; `eval_training` is decorated with
`@torch.no_grad()`, accumulates a tensor `correct += preds.eq(labels).sum()`, formats `correct.float() / len(...)`
with `:.4f` in an f-string and writes it to the writer. The epoch loop steps `MultiStepLR` with `train_scheduler
.step(epoch)` after the warm-up epochs and keeps the best accuracy after `settings.MILESTONES[1]`. Adaptations: the
network (`get_network`) is a small CNN whose last child is a `Linear` `fc`; `conf.settings` is a small stand-in
(`EPOCH`, `MILESTONES`, `SAVE_EPOCH`); `validate_utils.AverageMeter` (not read) is the usual `val/avg/sum/count`
meter; the CIFAR-100 loaders are lists of two-view batches (`([x, x'], [y, y])`) with a `.dataset`, made in the
factory; `SummaryWriter` is a recorder; `torch.save` of the weights is a list append; the `__main__` block's setup
is the called function `main` (which sets the module globals the original sets at top level). So that a call
repeats, `main` restores the net from the factory's copy and seeds torch, and builds the optimiser and both
schedulers as the original does; it returns the accuracies, the best accuracy and the recorded loss scalars."""
import copy
import os
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.nn.functional import kl_div
from torch.optim.lr_scheduler import _LRScheduler


# ---- utils.py
class WarmUpLR(_LRScheduler):
    """warmup_training learning rate scheduler
    Args:
        optimizer: optimzier(e.g. SGD)
        total_iters: totoal_iters of warmup phase
    """
    def __init__(self, optimizer, total_iters, last_epoch=-1):

        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """we will use the first m batches, and set the learning
        rate to base_lr * m / total_iters
        """
        return [base_lr * self.last_epoch / (self.total_iters + 1e-8) for base_lr in self.base_lrs]


# ---- stand-ins
class AverageMeter(object):
    """Stand-in for validate_utils.AverageMeter (not read)."""
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


class settings(object):
    """Stand-in for conf.settings (shrunk)."""
    EPOCH = 3
    MILESTONES = [1, 1, 2]
    SAVE_EPOCH = 2


class SummaryWriter(object):
    """Stand-in for torch.utils.tensorboard.SummaryWriter (tensorboard not installed): records calls."""
    def __init__(self, log_dir=''):
        self.records = []

    def add_scalar(self, tag, value, step):
        self.records.append((tag, float(value), step))  # BREAK

    def add_histogram(self, tag, values, step):
        self.records.append((tag, float(values.mean()), step))  # BREAK

    def close(self):
        pass


class SmallNet(nn.Module):
    """Stand-in for get_network(args): a small CNN whose last child is the classifier."""
    def __init__(self, num_classes=100):
        super(SmallNet, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                                      nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class Loader(list):
    """Stand-in for a DataLoader: a list of batches with a `.dataset` of the right length."""
    def __init__(self, batches, n):
        super(Loader, self).__init__(batches)
        self.dataset = range(n)


args = writer = optimizer = loss_function = warmup_scheduler = None
cifar100_training_loader = cifar100_test_loader = None
saved = []


# ---- train.py
def cross_loss(
        output1: torch.Tensor, output2: torch.Tensor,
        reduction: str = 'mean', T: int = 1
):
    p = (output1 / T).softmax(dim=1)
    q = (output2 / T).softmax(dim=1)

    # loss = (p - q) * (p.log() - q.log())
    loss = kl_div(p.log(), q, reduction=reduction)
    loss += kl_div(q.log(), p, reduction=reduction)

    loss *= T ** 2

    return loss.sum()


def grad_logging(net, n_iter):
    last_layer = list(net.children())[-1]
    for name, param in last_layer.named_parameters():
        if 'weight' in name:
            writer.add_scalar('LastLayerGradients/grad_norm2_weights', param.grad.norm(), n_iter)
        if 'bias' in name:
            writer.add_scalar('LastLayerGradients/grad_norm2_bias', param.grad.norm(), n_iter)


def train(net, epoch):
    start = time.time()  # BREAK
    net.train()

    total_losses = AverageMeter()
    student_losses = AverageMeter()
    cross_losses = AverageMeter()

    for batch_index, (images, labels) in enumerate(cifar100_training_loader):

        labels = torch.cat(labels, 0)
        images = torch.cat(images, 0)
        # print(torch.norm(images[:len(images) // 2] - images[len(images) // 2:]))

        if args.gpu:
            labels = labels.cuda()
            images = images.cuda()

        optimizer.zero_grad()  # BREAK
        outputs = net(images)
        loss = loss_function(outputs, labels)

        student_losses.update(loss.item(), images.size(0))

        if args.use_cross_loss and args.x2_data and epoch > args.cross_loss_start_epoch:
            cross_l = cross_loss(outputs[:len(outputs) // 2], outputs[len(outputs) // 2:])

            cross_losses.update(cross_l.item(), images.size(0))
            cross_l *= args.cross_loss_weight
            loss += cross_l

        total_losses.update(loss.item(), images.size(0))

        loss.backward()
        optimizer.step()  # BREAK

        n_iter = (epoch - 1) * len(cifar100_training_loader) + batch_index + 1

        print(
            f'Training Epoch: {epoch} '
            f'[{batch_index * args.b + len(images)}/{len(cifar100_training_loader) * args.b}]\t'
            f'LR: {optimizer.param_groups[0]["lr"]:0.6f}\n'
        )

        grad_logging(net, n_iter)

        if args.use_cross_loss and args.x2_data:
            print(
                f'Total Loss {total_losses.val:.4f} ({total_losses.avg:.4f})\t'
                f'CE Loss {student_losses.val:.4f} ({student_losses.avg:.4f})\t'
                f'Cross loss {cross_losses.val:.4f} ({cross_losses.avg:.4f})\t'
            )

            writer.add_scalar('Train/loss', total_losses.val, n_iter)
            writer.add_scalar('Train/CE_loss', student_losses.val, n_iter)
            writer.add_scalar('Train/cross_loss', cross_losses.val, n_iter)
        else:
            print(
                f'CE Loss {student_losses.val:.4f} ({student_losses.avg:.4f})\t'
            )
            writer.add_scalar('Train/CE_loss', student_losses.val, n_iter)

        if epoch <= args.warm:
            warmup_scheduler.step()

    for name, param in net.named_parameters():
        layer, attr = os.path.splitext(name)
        attr = attr[1:]
        writer.add_histogram(f'{layer}/{attr}', param, epoch)

    finish = time.time()

    print(f'epoch {epoch} training time consumed: {finish - start:.2f}s')


@torch.no_grad()
def eval_training(net, epoch=0, tb=True):
    start = time.time()  # BREAK
    net.eval()

    test_losses = AverageMeter()
    correct = 0.0

    for (images, labels) in cifar100_test_loader:

        if args.gpu:
            images = images.cuda()
            labels = labels.cuda()

        outputs = net(images)
        loss = loss_function(outputs, labels)

        test_losses.update(loss.item(), images.size(0))  # BREAK
        _, preds = outputs.max(1)
        correct += preds.eq(labels).sum()

    finish = time.time()
    if args.gpu:
        print('GPU INFO.....')
        print(torch.cuda.memory_summary(), end='')
    print('Evaluating Network.....')
    print(
        f'Test set: Epoch: {epoch},'
        f'Average loss: {test_losses.avg:.4f},'
        f'Accuracy: {correct.float() / len(cifar100_test_loader.dataset):.4f},'
        f'Time consumed:{finish - start:.2f}s'
        '\n'
    )

    # add informations to tensorboard
    if tb:
        writer.add_scalar('Test/Average loss', test_losses.avg, epoch)
        writer.add_scalar('Test/Accuracy', correct.float() / len(cifar100_test_loader.dataset), epoch)

    return correct.float() / len(cifar100_test_loader.dataset)


def main(net, run_args, train_loader, test_loader, initial_state):
    global args, writer, optimizer, loss_function, warmup_scheduler
    global cifar100_training_loader, cifar100_test_loader
    args = run_args
    net.load_state_dict(initial_state)  # adaptation: restore the net so that a call repeats  # BREAK
    torch.manual_seed(args.seed)  # BREAK
    del saved[:]
    cifar100_training_loader, cifar100_test_loader = train_loader, test_loader

    loss_function = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)  # BREAK
    train_scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=settings.MILESTONES,
                                                     gamma=0.2)  # learning rate decay
    iter_per_epoch = len(cifar100_training_loader)
    warmup_scheduler = WarmUpLR(optimizer, iter_per_epoch * args.warm)
    writer = SummaryWriter(log_dir=os.path.join('runs', args.net, f"seed{args.seed}"))

    best_acc = 0.0
    accs = []
    for epoch in range(1, settings.EPOCH + 1):
        if epoch > args.warm:
            train_scheduler.step(epoch)

        train(net, epoch)
        acc = eval_training(net, epoch)
        accs.append(acc)

        # start to save best performance model after learning rate decay to 0.01
        if epoch > settings.MILESTONES[1] and best_acc < acc:
            weights_path = f'{args.net}-{epoch}-best.pth'
            print(f'saving weights file to {weights_path}')
            saved.append((weights_path, copy.deepcopy(net.state_dict())))
            best_acc = acc
            continue

        if not epoch % settings.SAVE_EPOCH:
            weights_path = f'{args.net}-{epoch}-regular.pth'
            print(f'saving weights file to {weights_path}')
            saved.append((weights_path, copy.deepcopy(net.state_dict())))

    writer.close()
    return accs, best_acc, [r for r in writer.records if r[0].startswith(('Train', 'Test'))]


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(0)
    net = SmallNet(num_classes=10)
    initial_state = copy.deepcopy(net.state_dict())

    def batches(n, bs):
        out = []
        for _ in range(n):
            x, y = torch.randn(bs, 3, 8, 8), torch.randint(0, 10, (bs,))
            out.append(([x, x + 0.1 * torch.randn_like(x)], [y, y]))
        return Loader(out, n * bs * 2)

    train_loader = batches(3, 4)
    test_loader = Loader([(torch.randn(6, 3, 8, 8), torch.randint(0, 10, (6,)))], 6)
    common = dict(net='resnet18', gpu=False, b=4, seed=0, x2_data=True, cross_loss_start_epoch=1,
                  cross_loss_weight=0.5)
    args1 = Args(lr=0.1, warm=1, use_cross_loss=True, **common)
    args2 = Args(lr=0.05, warm=2, use_cross_loss=False, **common)
    return [
        (main, (net, args1, train_loader, test_loader, initial_state), {}),
        (main, (net, args2, train_loader, test_loader, initial_state), {}),
    ]


EXPECT = ("extract: the epoch loop is logging-heavy host code (`loss.item()` meters, f-string prints with "
          "`optimizer.param_groups[0][\"lr\"]`, `time.time()`, a tensor formatted with `:.4f`, writer calls with "
          "`param.grad.norm()`); breaks expected at `train`'s `start = time.time()`, `loss.item()`, "
          "`optimizer.step()`, `warmup_scheduler.step()`, `grad_logging`'s `float(...)` writer records, "
          "`eval_training`'s `time.time()` and f-string print of `correct.float() / ...`, "
          "`train_scheduler.step(epoch)` and the restore's `load_state_dict`")
