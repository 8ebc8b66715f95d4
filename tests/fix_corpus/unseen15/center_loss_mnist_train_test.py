"""Center-loss training and testing from KaiyangZhou/pytorch-center-loss (`center_loss.py` `CenterLoss.forward`:
a `distmat` from two `pow(...).sum(...).expand(...)` terms, the deprecated positional `distmat.addmm_(1, -2, x,
self.centers.t())`, `classes = torch.arange(self.num_classes).long()` with an `if self.use_gpu:` one-line branch,
`labels.eq(classes.expand(...))`, `clamp(min=1e-12, max=1e+12).sum() / batch_size`; `main.py`: `train` (two
criteria, two RMSprop optimizers zeroed and stepped in turn, `losses.update(...)`, a `print_freq` `str.format`
line with `len(trainloader)`), `test` (`Variable(data, volatile=True)`, `outputs.data.max(1)[1]`, tensor
`correct +=` sums, `args.plot` lists of `features.data.numpy()`, `correct * 100. / total`), and `main`'s epoch
loop (`torch.manual_seed(args.seed)`, `StepLR` when `args.stepsize > 0`, test every `eval_freq` epochs or at the
last, `time.time()` and `datetime.timedelta` for the elapsed time); `utils.py` `AverageMeter` (as the collector
knows it; not opened)).
Adaptations: the module-level `args` come from a `Namespace` the called function `main` sets as the global (no
argparse); `use_gpu` is False (`.cuda()` paths never taken), no `Logger` replaces `sys.stdout`, no
`CUDA_VISIBLE_DEVICES`; `datasets.create` is replaced by lists of random MNIST-shaped batches (14x14) made in the
factory, and `models.create('cnn')` by a small stand-in ConvNet returning `(features, outputs)` with 2-d
features as `models.ConvNet` does; `loss.data[0]` (old torch) is read with `.item()`; `plot_features` (matplotlib,
file writes) is not carried, so `args.plot` is False and the collection lists stay unused. `main` builds the model
and criteria after `torch.manual_seed(args.seed)` as the original does, so a call repeats; it returns the last
accuracy/error and the centers."""
import argparse
import datetime
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.optim import lr_scheduler

args = None


# ---- center_loss.py
class CenterLoss(nn.Module):
    """Center loss.

    Reference:
    Wen et al. A Discriminative Feature Learning Approach for Deep Face Recognition. ECCV 2016.
    """
    def __init__(self, num_classes=10, feat_dim=2, use_gpu=True):
        super(CenterLoss, self).__init__()  # BREAK
        self.num_classes = num_classes
        self.feat_dim = feat_dim
        self.use_gpu = use_gpu

        if self.use_gpu:
            self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim).cuda())
        else:
            self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim))  # BREAK

    def forward(self, x, labels):
        batch_size = x.size(0)
        distmat = torch.pow(x, 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes) + \
                  torch.pow(self.centers, 2).sum(dim=1, keepdim=True).expand(self.num_classes, batch_size).t()
        distmat.addmm_(1, -2, x, self.centers.t())

        classes = torch.arange(self.num_classes).long()
        if self.use_gpu: classes = classes.cuda()
        labels = labels.unsqueeze(1).expand(batch_size, self.num_classes)
        mask = labels.eq(classes.expand(batch_size, self.num_classes))

        dist = distmat * mask.float()
        loss = dist.clamp(min=1e-12, max=1e+12).sum() / batch_size

        return loss


# ---- utils.py
class AverageMeter(object):
    """Computes and stores the average and current value."""
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


# ---- stand-in for models.create('cnn') (adaptation)
class ConvNet(nn.Module):
    def __init__(self, num_classes):
        super(ConvNet, self).__init__()  # BREAK
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)  # BREAK
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 3 * 3, 2)
        self.prelu_fc1 = nn.PReLU()
        self.fc2 = nn.Linear(2, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, 16 * 3 * 3)
        x = self.prelu_fc1(self.fc1(x))
        y = self.fc2(x)
        return x, y


# ---- main.py
def main(run_args, trainloader, testloader, num_classes=10):
    global args
    args = run_args
    torch.manual_seed(args.seed)  # BREAK
    use_gpu = False

    print("Currently using CPU")  # BREAK
    print("Creating model: {}".format(args.model))  # BREAK
    model = ConvNet(num_classes=num_classes)

    criterion_xent = nn.CrossEntropyLoss()
    criterion_cent = CenterLoss(num_classes=num_classes, feat_dim=2, use_gpu=use_gpu)  # BREAK
    optimizer_model = torch.optim.RMSprop(model.parameters(), lr=args.lr_model)
    optimizer_centloss = torch.optim.RMSprop(criterion_cent.parameters(), lr=args.lr_cent)

    if args.stepsize > 0:
        scheduler = lr_scheduler.StepLR(optimizer_model, step_size=args.stepsize, gamma=args.gamma)

    start_time = time.time()

    acc, err = None, None
    for epoch in range(args.max_epoch):
        print("==> Epoch {}/{}".format(epoch+1, args.max_epoch))
        train(model, criterion_xent, criterion_cent, optimizer_model, optimizer_centloss, trainloader, use_gpu)

        if args.stepsize > 0: scheduler.step()

        if args.eval_freq > 0 and (epoch+1) % args.eval_freq == 0 or (epoch+1) == args.max_epoch:
            print("==> Test")
            acc, err = test(model, testloader, use_gpu, num_classes, epoch)
            print("Accuracy (%): {}\t Error rate (%): {}".format(acc, err))

    elapsed = round(time.time() - start_time)
    elapsed = str(datetime.timedelta(seconds=elapsed))
    print("Finished. Total elapsed time (h:m:s): {}".format(elapsed))
    return acc, err, criterion_cent.centers.detach()


def train(model, criterion_xent, criterion_cent, optimizer_model, optimizer_centloss, trainloader, use_gpu):
    model.train()
    losses = AverageMeter()

    for batch_idx, (data, labels) in enumerate(trainloader):
        if use_gpu:
            data, labels = data.cuda(), labels.cuda()
        data, labels = Variable(data), Variable(labels)  # BREAK
        features, outputs = model(data)
        loss_xent = criterion_xent(outputs, labels)
        loss_cent = criterion_cent(features, labels)
        loss = loss_xent + loss_cent * args.weight_cent
        optimizer_model.zero_grad()
        optimizer_centloss.zero_grad()
        loss.backward()
        optimizer_model.step()  # BREAK
        optimizer_centloss.step()  # BREAK
        losses.update(loss.item(), labels.size(0))

        if (batch_idx+1) % args.print_freq == 0:
            print("Batch {}/{}\t Loss {:.6f} ({:.6f})".format(batch_idx+1, len(trainloader), losses.val, losses.avg))


def test(model, testloader, use_gpu, num_classes, epoch):
    model.eval()
    correct, total = 0, 0
    if args.plot:
        all_features, all_labels = [], []

    for data, labels in testloader:
        if use_gpu:
            data, labels = data.cuda(), labels.cuda()
        data, labels = Variable(data, volatile=True), Variable(labels)  # BREAK
        features, outputs = model(data)
        predictions = outputs.data.max(1)[1]
        total += labels.size(0)
        correct += (predictions == labels.data).sum()

        if args.plot:
            if use_gpu:
                all_features.append(features.data.cpu().numpy())
                all_labels.append(labels.data.cpu().numpy())
            else:
                all_features.append(features.data.numpy())
                all_labels.append(labels.data.numpy())

    acc = correct * 100. / total
    err = 100. - acc
    return acc, err


def target():
    torch.manual_seed(0)

    def loader(n, bs):
        return [(torch.randn(bs, 1, 14, 14), torch.randint(0, 10, (bs,))) for _ in range(n)]

    args1 = argparse.Namespace(model='cnn', lr_model=0.001, lr_cent=0.5, weight_cent=1.0, max_epoch=2,
                               stepsize=1, gamma=0.5, eval_freq=1, print_freq=2, seed=1, plot=False)
    args2 = argparse.Namespace(model='cnn', lr_model=0.01, lr_cent=0.05, weight_cent=0.01, max_epoch=2,
                               stepsize=0, gamma=0.5, eval_freq=10, print_freq=50, seed=2, plot=False)
    return [
        (main, (args1, loader(4, 8), loader(2, 8)), {}),
        (main, (args2, loader(3, 6), loader(1, 6)), {}),
    ]


EXPECT = ("rewrite: `CenterLoss.forward` is a clean graph apart from the deprecated positional "
          "`addmm_(1, -2, ...)` overload (rewritable to `addmm_(x, centers.t(), beta=1, alpha=-2)`); the training "
          "driver's `loss.item()` meter, `print`s, optimizer steps and `volatile=True` Variables stay eager glue")
