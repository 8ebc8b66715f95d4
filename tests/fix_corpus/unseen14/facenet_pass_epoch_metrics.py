"""Fine-tuning epochs through facenet-pytorch's generic `pass_epoch`, from timesler/facenet-pytorch
(`models/utils/training.py` `Logger`, `BatchTimer`, `accuracy`, `pass_epoch`, the stored revision without the
`writer` argument). `pass_epoch` picks its mode string from `model.training`, builds a `Logger` (whose `fn` is one of
two lambdas chosen by `calculate_mean`, and whose `__call__` builds `\\r` f-strings with `{...:9.4f}` formats of
tensors through a `' | '.join(...)` generator over the metrics and prints with `end=''`), and per batch runs the
model, the loss, `backward()`/`optimizer.step()`/`zero_grad()` when training, a loop over the `batch_metrics` dict
(`metric_fn(y_pred, y).detach().cpu()`, `metrics.get(metric_name, 0) + ...`), accumulates `loss_batch.detach()
.cpu()`, and logs running means; after the loop it steps the scheduler when training and returns the mean loss and a
dict comprehension of mean metrics (using the loop variable `i_batch` after the loop). `BatchTimer.__call__` reads
`time.time()`, divides by `len(y_pred)`, inverts and returns `torch.tensor(elapsed)`. The driver is the fine-tuning
notebook's loop (`examples/finetune.ipynb`, listed but not opened; written from the collector's knowledge of it):
an initial evaluation pass, then per epoch `print('\\nEpoch {}/{}'...)`, `print('-' * 10)`, a training pass and an
evaluation pass with `metrics = {'fps': training.BatchTimer(), 'acc': training.accuracy}`. Adaptations: the
InceptionResnetV1 classifier is a small CNN; the VGGFace2 loaders are lists of random batches made in the factory;
`MultiStepLR` milestones are shrunk; the tensorboard `writer` of newer revisions is absent (as in the stored one).
So that a call repeats, the called function `finetune` restores the model from the factory's copy, seeds torch and
builds its optimiser and scheduler (`reset_`); it returns each pass's loss and accuracy (not the timer's rates)."""
import copy
import time

import numpy as np
import torch
import torch.nn as nn
from torch import optim
from torch.optim.lr_scheduler import MultiStepLR


# ---- models/utils/training.py
class Logger(object):

    def __init__(self, mode, length, calculate_mean=False):
        self.mode = mode
        self.length = length
        self.calculate_mean = calculate_mean
        if self.calculate_mean:
            self.fn = lambda x, i: x / (i + 1)
        else:
            self.fn = lambda x, i: x

    def __call__(self, loss, metrics, i):
        track_str = f'\r{self.mode} | {i + 1:5d}/{self.length:<5d}| '
        loss_str = f'loss: {self.fn(loss, i):9.4f} | '
        metric_str = ' | '.join(f'{k}: {self.fn(v, i):9.4f}' for k, v in metrics.items())  # BREAK
        print(track_str + loss_str + metric_str + '   ', end='')
        if i + 1 == self.length:
            print('')


class BatchTimer(object):
    """Batch timing class.
    Use this class for tracking training and testing time/rate per batch or per sample.

    Keyword Arguments:
        rate {bool} -- Whether to report a rate (batches or samples per second) or a time (seconds
            per batch or sample). (default: {True})
        per_sample {bool} -- Whether to report times or rates per sample or per batch.
            (default: {True})
    """

    def __init__(self, rate=True, per_sample=True):
        self.start = time.time()  # BREAK
        self.end = None
        self.rate = rate
        self.per_sample = per_sample

    def __call__(self, y_pred, y):
        self.end = time.time()  # BREAK
        elapsed = self.end - self.start
        self.start = self.end
        self.end = None

        if self.per_sample:
            elapsed /= len(y_pred)
        if self.rate:
            elapsed = 1 / elapsed

        return torch.tensor(elapsed)


def accuracy(logits, y):
    _, preds = torch.max(logits, 1)
    return (preds == y).float().mean()


def pass_epoch(
    model, loss_fn, loader, optimizer=None, scheduler=None,
    batch_metrics={'time': BatchTimer()}, show_running=True,
    device='cpu'
):
    """Train or evaluate over a data epoch.

    Arguments:
        model {torch.nn.Module} -- Pytorch model.
        loss_fn {callable} -- A function to compute (scalar) loss.
        loader {torch.utils.data.DataLoader} -- A pytorch data loader.

    Keyword Arguments:
        optimizer {torch.optim.Optimizer} -- A pytorch optimizer.
        scheduler {torch.optim.lr_scheduler._LRScheduler} -- LR scheduler (default: {None})
        batch_metrics {dict} -- Dictionary of metric functions to call on each batch. The default
            is a simple timer. A progressive average of these metrics, along with the average
            loss, is printed every batch. (default: {{'time': iter_timer()}})
        show_running {bool} -- Whether or not to print losses and metrics for the current batch
            or rolling averages. (default: {False})
        device {str or torch.device} -- Device for pytorch to use. (default: {'cpu'})

    Returns:
        tuple(torch.Tensor, dict) -- A tuple of the average loss and a dictionary of average
            metric values across the epoch.
    """

    mode = 'Train' if model.training else 'Eval '
    logger = Logger(mode, length=len(loader), calculate_mean=show_running)
    loss = 0
    metrics = {}

    for i_batch, (x, y) in enumerate(loader):
        x = x.to(device)
        y = y.to(device)
        y_pred = model(x)
        loss_batch = loss_fn(y_pred, y)

        if model.training:
            loss_batch.backward()
            optimizer.step()
            optimizer.zero_grad()

        metrics_batch = {}
        for metric_name, metric_fn in batch_metrics.items():
            metrics_batch[metric_name] = metric_fn(y_pred, y).detach().cpu()
            metrics[metric_name] = metrics.get(metric_name, 0) + metrics_batch[metric_name]

        loss_batch = loss_batch.detach().cpu()
        loss += loss_batch
        if show_running:
            logger(loss, metrics, i_batch)
        else:
            logger(loss_batch, metrics_batch, i_batch)

    if model.training and scheduler is not None:
        scheduler.step()

    loss = loss / (i_batch + 1)
    metrics = {k: v / (i_batch + 1) for k, v in metrics.items()}

    return loss, metrics


# ---- stand-in
class SmallFaceNet(nn.Module):
    """Stand-in for InceptionResnetV1(classify=True, num_classes=...): a small CNN classifier."""
    def __init__(self, num_classes):
        super(SmallFaceNet, self).__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1))
        self.logits = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.logits(self.conv(x).flatten(1))


# ---- examples/finetune.ipynb training loop (from the collector's knowledge)
def finetune(resnet, train_loader, val_loader, epochs, lr, initial_state, show_running=True):
    optimizer, scheduler = reset_(resnet, initial_state, lr)
    device = torch.device('cpu')
    loss_fn = torch.nn.CrossEntropyLoss()
    metrics = {
        'fps': BatchTimer(),  # BREAK
        'acc': accuracy
    }
    results = []

    print('\n\nInitial')
    print('-' * 10)
    resnet.eval()
    loss, m = pass_epoch(
        resnet, loss_fn, val_loader,
        batch_metrics=metrics, show_running=show_running, device=device
    )
    results.append((loss, m['acc']))

    for epoch in range(epochs):
        print('\nEpoch {}/{}'.format(epoch + 1, epochs))
        print('-' * 10)

        resnet.train()
        loss, m = pass_epoch(
            resnet, loss_fn, train_loader, optimizer, scheduler,
            batch_metrics=metrics, show_running=show_running, device=device
        )
        results.append((loss, m['acc']))

        resnet.eval()
        loss, m = pass_epoch(
            resnet, loss_fn, val_loader,
            batch_metrics=metrics, show_running=show_running, device=device
        )
        results.append((loss, m['acc']))
    return results


def reset_(resnet, initial_state, lr):
    """Adaptation: restore the model, seed torch and build the optimiser/scheduler, so that a call repeats."""
    resnet.load_state_dict(initial_state)  # BREAK
    torch.manual_seed(0)  # BREAK
    optimizer = optim.Adam(resnet.parameters(), lr=lr)  # BREAK
    scheduler = MultiStepLR(optimizer, [1, 2])
    return optimizer, scheduler


def target():
    torch.manual_seed(0)
    num_classes = 5
    resnet = SmallFaceNet(num_classes)
    initial_state = copy.deepcopy(resnet.state_dict())

    def batches(n, bs):
        return [(torch.randn(bs, 3, 8, 8), torch.randint(0, num_classes, (bs,))) for _ in range(n)]

    train_loader, val_loader = batches(3, 4), batches(2, 4)
    return [
        (finetune, (resnet, train_loader, val_loader, 2, 0.001, initial_state), {}),
        (finetune, (resnet, train_loader[:2], val_loader, 1, 0.01, initial_state), {"show_running": False}),
    ]


EXPECT = ("rewrite: `pass_epoch` itself is tensor code with host glue; the `Logger`'s f-string `{...:9.4f}` "
          "formats of tensors and its `print(..., end='')` and `BatchTimer`'s `time.time()` are the breaks expected "
          "(`BatchTimer.__init__`/`__call__` `time.time()`, `Logger.__call__`'s f-strings/print), plus "
          "`optimizer.step()`, `scheduler.step()` and `reset_`'s `load_state_dict`; `accuracy` and the metric "
          "dict accumulation should trace")
