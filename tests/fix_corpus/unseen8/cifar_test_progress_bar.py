"""The CIFAR-10 evaluation epoch of a popular training script: under `torch.no_grad()` each batch's loss is accumulated
with `test_loss += loss.item()` and the accuracy with `correct += predicted.eq(targets).sum().item()`, and
`progress_bar(batch_idx, len(testloader), 'Loss: %.3f | Acc: %.3f%% (%d/%d)' % (...))` redraws a console bar: it
reads and rewrites the module globals `last_time`/`begin_time` (`global last_time, begin_time`), calls `time.time()`,
formats durations with `format_time`, and writes character by character with `sys.stdout.write` in loops sized by
`term_width` (kuangliu/pytorch-cifar main.py: `test`; utils.py: `progress_bar`, `format_time`, `TOTAL_BAR_LENGTH`,
`last_time`, `begin_time`; models/lenet.py: `LeNet`).
Adaptations: `term_width` is read at import in the original with `os.popen('stty size', 'r').read().split()`, which
fails without a terminal; here it is the constant 80. The network is LeNet (one of the repository's models), randomly
initialised; the test loader is a given list of 3 batches of 4 CIFAR-sized images. The module globals `net`,
`testloader` and `criterion` that `test` reads are passed as arguments (the globals `device` and the progress-bar
timers stay globals). The checkpoint block at the end (`if acc > best_acc: print('Saving..') ... torch.save(...)`,
updating the global `best_acc`) is left out, since it writes files; `test` returns `(test_loss, acc)` instead."""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

device = 'cuda' if torch.cuda.is_available() else 'cpu'

term_width = 80  # stand-in for: _, term_width = os.popen('stty size', 'r').read().split()
term_width = int(term_width)

TOTAL_BAR_LENGTH = 65.
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
    for i in range(term_width-int(TOTAL_BAR_LENGTH/2)+2):
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


class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1   = nn.Linear(16*5*5, 120)
        self.fc2   = nn.Linear(120, 84)
        self.fc3   = nn.Linear(84, 10)

    def forward(self, x):
        out = F.relu(self.conv1(x))
        out = F.max_pool2d(out, 2)
        out = F.relu(self.conv2(out))
        out = F.max_pool2d(out, 2)
        out = out.view(out.size(0), -1)
        out = F.relu(self.fc1(out))
        out = F.relu(self.fc2(out))
        out = self.fc3(out)
        return out


def test(epoch, net, testloader, criterion):
    net.eval()
    test_loss = 0
    correct = 0
    total = 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(testloader):
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets)

            test_loss += loss.item()  # BREAK
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()

            progress_bar(batch_idx, len(testloader), 'Loss: %.3f | Acc: %.3f%% (%d/%d)'
                         % (test_loss/(batch_idx+1), 100.*correct/total, correct, total))

    acc = 100.*correct/total
    return test_loss, acc


def target():
    torch.manual_seed(0)
    net = LeNet().to(device)
    criterion = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    loader1 = [(torch.randn(4, 3, 32, 32, generator=gen), torch.randint(0, 10, (4,), generator=gen)) for _ in range(3)]
    loader2 = [(torch.randn(4, 3, 32, 32, generator=gen), torch.randint(0, 10, (4,), generator=gen)) for _ in range(3)]
    return [
        (test, (0, net, loader1, criterion), {}),
        (test, (1, net, loader2, criterion), {}),
    ]


EXPECT = ("caller: the evaluation loop is host bookkeeping (`.item()` reads into Python totals, the console "
          "`progress_bar` with `time.time()`, global timers and `sys.stdout.write`); compile the network's forward "
          "(and the loss) and leave `test` eager. A rewrite keeping `test_loss`/`correct` as tensors would still need "
          "their values on the host each batch for the progress message")
