"""One training epoch of mixup from facebookresearch/mixup-cifar10 (`train.py`: `mixup_data`, `mixup_criterion`,
`train`, stored revision 1fe8c5e; `utils.py`: `progress_bar`, `format_time`, stored revision 522791a;
`models/resnet.py`: `PreActBlock`, `ResNet`, `ResNet18`, stored revision 2d3298e). `train` loops over the loader,
draws the mixing weight with `np.random.beta`, permutes the batch with `torch.randperm`, wraps tensors with
`map(Variable, ...)`, accumulates the loss as a Python number, counts correct predictions with
`.cpu().sum()`, steps SGD and calls `progress_bar`, which writes the bar character by character to `sys.stdout`
and times each step with `time.time()` through module globals (`last_time`, `begin_time`).

Adaptations: the script reads `net`, `trainloader`, `optimizer` from module globals made at import (argparse,
CIFAR-10 download, `models.__dict__[args.model]()`); here they are parameters of `train` (same body), so that each
call has its own network and optimizer, built in the factory `target()` (`criterion`, `args`, `use_cuda` stay module
globals). `args` is a `SimpleNamespace` with the parser's defaults the function reads (`alpha`). `loss.data[0]` is
written `loss.item()` (indexing a 0-d tensor fails in current torch). `utils.py` computes `term_width` from
`os.popen('stty size')`, which fails without a terminal; it is fixed to 80 here. The ResNet18 widths are shrunk
(64/128/256/512 -> 8/16/32/64) so that a CPU epoch takes seconds; the loader is a list of random CIFAR-sized batches
made in the factory. torchvision (transforms, datasets) is not used by the adapted code.
"""
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
from torch.autograd import Variable
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---- models/resnet.py
def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class PreActBlock(nn.Module):
    '''Pre-activation version of the BasicBlock.'''
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(PreActBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes)

        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion*planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion*planes, kernel_size=1, stride=stride, bias=False)
            )

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out)
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super(ResNet, self).__init__()
        self.in_planes = 8

        self.conv1 = conv3x3(3,8)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = self._make_layer(block, 8, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 16, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 32, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 64, num_blocks[3], stride=2)
        self.linear = nn.Linear(64*block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1]*(num_blocks-1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x, lin=0, lout=5):
        out = x
        if lin < 1 and lout > -1:
            out = self.conv1(out)
            out = self.bn1(out)
            out = F.relu(out)
        if lin < 2 and lout > 0:
            out = self.layer1(out)
        if lin < 3 and lout > 1:
            out = self.layer2(out)
        if lin < 4 and lout > 2:
            out = self.layer3(out)
        if lin < 5 and lout > 3:
            out = self.layer4(out)
        if lout > 4:
            out = F.avg_pool2d(out, 4)
            out = out.view(out.size(0), -1)
            out = self.linear(out)
        return out


def ResNet18():
    return ResNet(PreActBlock, [2,2,2,2])


# ---- utils.py
term_width = 80  # adaptation: the original reads `stty size`

TOTAL_BAR_LENGTH = 86.
last_time = time.time()
begin_time = last_time
def progress_bar(current, total, msg=None):
    global last_time, begin_time
    if current == 0:
        begin_time = time.time()  # Reset for new bar.

    cur_len = int(TOTAL_BAR_LENGTH*current/total)
    rest_len = int(TOTAL_BAR_LENGTH - cur_len) - 1

    sys.stdout.write(' [')
    for i in range(cur_len):
        sys.stdout.write('=')
    sys.stdout.write('>')
    for i in range(rest_len):
        sys.stdout.write('.')
    sys.stdout.write(']')

    cur_time = time.time()
    step_time = cur_time - last_time
    last_time = cur_time
    tot_time = cur_time - begin_time

    L = []
    L.append('  Step: %s' % format_time(step_time))
    L.append(' | Tot: %s' % format_time(tot_time))
    if msg:
        L.append(' | ' + msg)

    msg = ''.join(L)
    sys.stdout.write(msg)
    for i in range(term_width-int(TOTAL_BAR_LENGTH)-len(msg)-3):
        sys.stdout.write(' ')

    # Go back to the center of the bar.
    for i in range(term_width-int(TOTAL_BAR_LENGTH/2)):
        sys.stdout.write('\b')
    sys.stdout.write(' %d/%d ' % (current+1, total))

    if current < total-1:
        sys.stdout.write('\r')
    else:
        sys.stdout.write('\n')
    sys.stdout.flush()

def format_time(seconds):
    days = int(seconds / 3600/24)
    seconds = seconds - days*3600*24
    hours = int(seconds / 3600)
    seconds = seconds - hours*3600
    minutes = int(seconds / 60)
    seconds = seconds - minutes*60
    secondsf = int(seconds)
    seconds = seconds - secondsf
    millis = int(seconds*1000)

    f = ''
    i = 1
    if days > 0:
        f += str(days) + 'D'
        i += 1
    if hours > 0 and i <= 2:
        f += str(hours) + 'h'
        i += 1
    if minutes > 0 and i <= 2:
        f += str(minutes) + 'm'
        i += 1
    if secondsf > 0 and i <= 2:
        f += str(secondsf) + 's'
        i += 1
    if millis > 0 and i <= 2:
        f += str(millis) + 'ms'
        i += 1
    if f == '':
        f = '0ms'
    return f


# ---- train.py
args = SimpleNamespace(lr=0.1, decay=1e-4, alpha=1.)
use_cuda = False
criterion = nn.CrossEntropyLoss()


def mixup_data(x, y, alpha=1.0, use_cuda=True):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)  # BREAK
    else:
        lam = 1

    batch_size = x.size()[0]
    if use_cuda:
        index = torch.randperm(batch_size).cuda()
    else:
        index = torch.randperm(batch_size)

    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def train(epoch, net, trainloader, optimizer):
    print('\nEpoch: %d' % epoch)  # BREAK
    net.train()
    train_loss = 0
    reg_loss = 0
    correct = 0
    total = 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()

        inputs, targets_a, targets_b, lam = mixup_data(inputs, targets,
                                                       args.alpha, use_cuda)
        inputs, targets_a, targets_b = map(Variable, (inputs,
                                                      targets_a, targets_b))
        outputs = net(inputs)
        loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
        train_loss += loss.item()
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)
        correct += (lam * predicted.eq(targets_a.data).cpu().sum()
                    + (1 - lam) * predicted.eq(targets_b.data).cpu().sum())

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # BREAK

        progress_bar(batch_idx, len(trainloader),
                     'Loss: %.3f | Reg: %.5f | Acc: %.3f%% (%d/%d)'
                     % (train_loss/(batch_idx+1), reg_loss/(batch_idx+1),
                        100.*correct/total, correct, total))
    return (train_loss/batch_idx, reg_loss/batch_idx, 100.*correct/total)


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    base = ResNet18()

    def batches(n, bs):
        return [(torch.randn(bs, 3, 32, 32), torch.randint(0, 10, (bs,))) for _ in range(n)]

    calls = []
    for epoch, loader in ((0, batches(3, 4)), (1, batches(2, 6))):
        net = ResNet18()
        net.load_state_dict(base.state_dict())
        optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9,
                              weight_decay=args.decay)
        calls.append((train, (epoch, net, loader, optimizer), {}))
    return calls


EXPECT = ("extract: the NumPy Beta draw, the Python loss/accuracy accumulation and the character-by-character "
          "progress bar with time.time() are host work around an otherwise compilable forward/backward; moving "
          "mixup_data's np.random.beta and the progress_bar call out under an escape hatch leaves the step whole, "
          "while the optimizer step stays eager glue")
