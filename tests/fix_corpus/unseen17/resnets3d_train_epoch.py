"""One training epoch of 3D-ResNets from kenshohara/3D-ResNets-PyTorch (`training.py` `train_epoch`, `utils.py`
`AverageMeter`, `Logger`, `calculate_accuracy`). `train_epoch` prints the epoch, sets train mode, keeps four
`AverageMeter`s, and for each batch of `enumerate(data_loader)` updates the data time from `time.time()`, moves
the targets, computes the output, the loss and `calculate_accuracy` (`topk(1, 1, ...)`, `.t()`, `eq`,
`correct.float().sum().item()` divided by the batch size), updates the meters with `loss.item()`, zeroes,
backpropagates and steps the optimizer, logs a dict to the batch logger `if batch_logger is not None:` and prints a
long `'...{loss.val:.4f} ({loss.avg:.4f})...'.format(...)` line reading the meters' attributes; after the loop
a `distributed` branch all-reduces the sums (`dist.all_reduce`, not taken here), then the epoch logger and the
optional tensorboard writer record the averages.
Adaptations: the 3D ResNet (`models/resnet.py`, not opened) is a small stand-in (a stem and two 3D basic blocks
with batch norm, then average pooling and a linear classifier) on clips of 4x16x16 with 3 channels and 5
classes; `Logger` writes a TSV file in the original, so the stand-in keeps `Logger`'s `log` (its `assert col in
values` loop) but collects the rows in a list; the `DataLoader` is a list of `(inputs, targets)` batches made in
the factory; no tensorboard writer. The called function `run_epoch` is the collector's driver for `main.py`'s
loop (not opened): it seeds torch, restores the model from the factory's copy, builds the SGD optimizer (as
`main.py` does, momentum 0.9, dampening 0, nesterov off) and the two loggers, calls `train_epoch` and returns the
logged rows (the wall-clock times are printed, not logged)."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist


# ---- utils.py
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


class Logger(object):
    """Adaptation: rows are kept in `self.rows` instead of a TSV file."""

    def __init__(self, path, header):
        self.rows = []
        self.header = header

    def log(self, values):
        write_values = []
        for col in self.header:
            assert col in values
            write_values.append(values[col])

        self.rows.append(write_values)


def calculate_accuracy(outputs, targets):
    batch_size = targets.size(0)

    _, pred = outputs.topk(1, 1, largest=True, sorted=True)
    pred = pred.t()
    correct = pred.eq(targets.view(1, -1))
    n_correct_elems = correct.float().sum().item()  # BREAK

    return n_correct_elems / batch_size


# ---- training.py
def train_epoch(epoch,
                data_loader,
                model,
                criterion,
                optimizer,
                device,
                current_lr,
                epoch_logger,
                batch_logger,
                tb_writer=None,
                distributed=False):
    print('train at epoch {}'.format(epoch))  # BREAK

    model.train()

    batch_time = AverageMeter()
    data_time = AverageMeter()
    losses = AverageMeter()
    accuracies = AverageMeter()

    end_time = time.time()  # BREAK
    for i, (inputs, targets) in enumerate(data_loader):
        data_time.update(time.time() - end_time)  # BREAK

        targets = targets.to(device, non_blocking=True)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        acc = calculate_accuracy(outputs, targets)

        losses.update(loss.item(), inputs.size(0))
        accuracies.update(acc, inputs.size(0))

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # BREAK

        batch_time.update(time.time() - end_time)
        end_time = time.time()

        if batch_logger is not None:
            batch_logger.log({
                'epoch': epoch,
                'batch': i + 1,
                'iter': (epoch - 1) * len(data_loader) + (i + 1),
                'loss': losses.val,
                'acc': accuracies.val,
                'lr': current_lr
            })

        print('Epoch: [{0}][{1}/{2}]\t'
              'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
              'Data {data_time.val:.3f} ({data_time.avg:.3f})\t'
              'Loss {loss.val:.4f} ({loss.avg:.4f})\t'
              'Acc {acc.val:.3f} ({acc.avg:.3f})'.format(epoch,
                                                         i + 1,
                                                         len(data_loader),
                                                         batch_time=batch_time,
                                                         data_time=data_time,
                                                         loss=losses,
                                                         acc=accuracies))

    if distributed:
        loss_sum = torch.tensor([losses.sum],
                                dtype=torch.float32,
                                device=device)
        loss_count = torch.tensor([losses.count],
                                  dtype=torch.float32,
                                  device=device)
        acc_sum = torch.tensor([accuracies.sum],
                               dtype=torch.float32,
                               device=device)
        acc_count = torch.tensor([accuracies.count],
                                 dtype=torch.float32,
                                 device=device)

        dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM)
        dist.all_reduce(loss_count, op=dist.ReduceOp.SUM)
        dist.all_reduce(acc_sum, op=dist.ReduceOp.SUM)
        dist.all_reduce(acc_count, op=dist.ReduceOp.SUM)

        losses.avg = loss_sum.item() / loss_count.item()
        accuracies.avg = acc_sum.item() / acc_count.item()

    if epoch_logger is not None:
        epoch_logger.log({
            'epoch': epoch,
            'loss': losses.avg,
            'acc': accuracies.avg,
            'lr': current_lr
        })

    if tb_writer is not None:
        tb_writer.add_scalar('train/loss', losses.avg, epoch)
        tb_writer.add_scalar('train/acc', accuracies.avg, epoch)
        tb_writer.add_scalar('train/lr', accuracies.avg, epoch)


# ---- stand-in for models/resnet.py (not opened)
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv3d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm3d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv3d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm3d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        out += residual
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, n_input_channels=3, n_classes=5, planes=(8, 16)):
        super().__init__()
        self.conv1 = nn.Conv3d(n_input_channels, planes[0], (3, 5, 5), (1, 2, 2), (1, 2, 2), bias=False)
        self.bn1 = nn.BatchNorm3d(planes[0])
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(planes[0], planes[0])
        self.layer2 = BasicBlock(planes[0], planes[1], stride=2,
                                 downsample=nn.Sequential(nn.Conv3d(planes[0], planes[1], 1, 2, bias=False),
                                                          nn.BatchNorm3d(planes[1])))
        self.avgpool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(planes[1], n_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        return self.fc(x)


# ---- main.py loop (collector's driver)
def run_epoch(model, initial_state, data_loader, epoch, learning_rate, weight_decay=1e-3):
    torch.manual_seed(epoch)  # BREAK
    model.load_state_dict(initial_state)  # BREAK
    device = torch.device('cpu')
    criterion = nn.CrossEntropyLoss().to(device)  # BREAK
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9, dampening=0,
                                weight_decay=weight_decay, nesterov=False)
    train_logger = Logger('train.log', ['epoch', 'loss', 'acc', 'lr'])
    train_batch_logger = Logger('train_batch.log', ['epoch', 'batch', 'iter', 'loss', 'acc', 'lr'])
    current_lr = optimizer.param_groups[0]['lr']
    train_epoch(epoch, data_loader, model, criterion, optimizer, device, current_lr, train_logger,
                train_batch_logger, None, False)
    return train_logger.rows, train_batch_logger.rows


def target():
    torch.manual_seed(0)
    model = ResNet()
    initial_state = {k: v.clone() for k, v in model.state_dict().items()}
    loader1 = [(torch.randn(4, 3, 4, 16, 16), torch.randint(0, 5, (4,))) for _ in range(3)]
    loader2 = [(torch.randn(3, 3, 4, 16, 16), torch.randint(0, 5, (3,))) for _ in range(2)]
    return [
        (run_epoch, (model, initial_state, loader1, 1, 0.1), {}),
        (run_epoch, (model, initial_state, loader2, 2, 0.05), {}),
    ]


EXPECT = ("extract: the epoch loop's tensor work (forward, loss) is interleaved with `loss.item()`, "
          "`calculate_accuracy`'s `.sum().item()`, `time.time()` meters, `backward`/`optimizer.step()` and a "
          "formatted print; the fix compiles the model-and-loss part as a helper and keeps the meters, "
          "optimizer step and logging eager")
