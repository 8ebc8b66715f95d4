"""The adding-problem experiment from locuslab/TCN (`TCN/tcn.py`: `Chomp1d`, `TemporalBlock` with `weight_norm`
convolutions, `init_weights` and the optional 1x1 `downsample`, `TemporalConvNet`; `TCN/adding_problem/model.py`:
`TCN` reading `y1[:, :, -1]`; `TCN/adding_problem/utils.py`: `data_generator` with a per-row Python loop of
`np.random.choice` positions written into the mask and the target; `TCN/adding_problem/add_test.py`: the script's
`train(epoch)` (`global lr`, slicing batches with an `if i + batch_size > X_train.size(0)` tail branch, optional
`clip_grad_norm_` when `args.clip > 0`, `total_loss += loss.item()`, a formatted progress `print` every
`log_interval` batches) and `evaluate()` (`no_grad`, `print` and `return test_loss.item()`), and the epoch loop).
Adaptations: the module-level script (argparse, data, model, optimizer `getattr(optim, args.optim)`, epoch loop) is
the called function `main(args)`, which sets the same module globals (`args`, `model`, `optimizer`, `lr`, data) that
`train`/`evaluate` read; `args` is a namespace with small sizes (`seq_len` 40, 4 levels of 8 channels, kernel 3,
64 training and 32 test rows, 2 epochs, `log_interval` 2); `Variable` is kept. So that a call repeats, `main` seeds
torch (the script's `torch.manual_seed(args.seed)`) and NumPy (added; `data_generator` draws from it) before making
the data and the model; it returns the last test loss and the model's final output on the test set."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.nn.utils import weight_norm


# ---- TCN/tcn.py
class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()  # BREAK
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
        super(TemporalBlock, self).__init__()  # BREAK
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,  # BREAK
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2):
        super(TemporalConvNet, self).__init__()  # BREAK
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i-1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size-1) * dilation_size, dropout=dropout)]

        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


# ---- TCN/adding_problem/model.py
class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super(TCN, self).__init__()  # BREAK
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])


# ---- TCN/adding_problem/utils.py
def data_generator(N, seq_length):
    """
    Args:
        seq_length: Length of the adding problem data
        N: # of data in the set
    """
    X_num = torch.rand([N, 1, seq_length])
    X_mask = torch.zeros([N, 1, seq_length])
    Y = torch.zeros([N, 1])
    for i in range(N):
        positions = np.random.choice(seq_length, size=2, replace=False)  # BREAK
        X_mask[i, 0, positions[0]] = 1
        X_mask[i, 0, positions[1]] = 1
        Y[i,0] = X_num[i, 0, positions[0]] + X_num[i, 0, positions[1]]
    X = torch.cat((X_num, X_mask), dim=1)
    return Variable(X), Variable(Y)


# ---- TCN/adding_problem/add_test.py (module-level script state)
args = None
model = None
optimizer = None
lr = None
X_train = Y_train = X_test = Y_test = None
batch_size = None


def train(epoch):
    global lr
    model.train()
    batch_idx = 1
    total_loss = 0
    for i in range(0, X_train.size(0), batch_size):
        if i + batch_size > X_train.size(0):
            x, y = X_train[i:], Y_train[i:]
        else:
            x, y = X_train[i:(i+batch_size)], Y_train[i:(i+batch_size)]
        optimizer.zero_grad()  # BREAK
        output = model(x)
        loss = F.mse_loss(output, y)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()  # BREAK
        batch_idx += 1
        total_loss += loss.item()

        if batch_idx % args.log_interval == 0:
            cur_loss = total_loss / args.log_interval
            processed = min(i+batch_size, X_train.size(0))
            print('Train Epoch: {:2d} [{:6d}/{:6d} ({:.0f}%)]\tLearning rate: {:.4f}\tLoss: {:.6f}'.format(
                epoch, processed, X_train.size(0), 100.*processed/X_train.size(0), lr, cur_loss))
            total_loss = 0


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(X_test)
        test_loss = F.mse_loss(output, Y_test)
        print('\nTest set: Average loss: {:.6f}\n'.format(test_loss.item()))  # BREAK
        return test_loss.item()  # BREAK


def main(a, n_train=64, n_test=32):
    """Adaptation: the script's module level, as a function setting the same globals."""
    global args, model, optimizer, lr, X_train, Y_train, X_test, Y_test, batch_size
    args = a
    torch.manual_seed(args.seed)  # BREAK
    np.random.seed(args.seed)  # adaptation: data_generator draws from NumPy

    input_channels = 2
    n_classes = 1
    batch_size = args.batch_size
    seq_length = args.seq_len
    epochs = args.epochs

    print(args)  # BREAK
    print("Producing data...")  # BREAK
    X_train, Y_train = data_generator(n_train, seq_length)
    X_test, Y_test = data_generator(n_test, seq_length)

    # Note: We use a very simple setting here (assuming all levels have the same # of channels.
    channel_sizes = [args.nhid]*args.levels
    kernel_size = args.ksize
    dropout = args.dropout
    model = TCN(input_channels, n_classes, channel_sizes, kernel_size=kernel_size, dropout=dropout)

    lr = args.lr
    optimizer = getattr(optim, args.optim)(model.parameters(), lr=lr)  # BREAK

    tloss = None
    for ep in range(1, epochs+1):
        train(ep)
        tloss = evaluate()
    with torch.no_grad():
        return tloss, model(X_test)


def target():
    torch.manual_seed(0)
    base = dict(batch_size=12, cuda=False, dropout=0.0, clip=-1, epochs=2, ksize=3, levels=4, seq_len=40,
                log_interval=2, lr=4e-3, optim='Adam', nhid=8, seed=1111)
    a1 = argparse.Namespace(**base)
    a2 = argparse.Namespace(**dict(base, clip=0.5, dropout=0.1, seed=7, optim='RMSprop'))
    return [
        (main, (a1,), {}),
        (main, (a2,), {}),
    ]


EXPECT = ("extract: the TCN forward (weight-normed dilated convolutions, chomps) is graph-friendly; the script's "
          "training loop with `loss.item()` sums and formatted prints, the NumPy data generator and the optimizer "
          "steps are eager glue around it")
