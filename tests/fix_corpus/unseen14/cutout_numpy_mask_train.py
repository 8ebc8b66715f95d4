"""Cutout-augmented training epochs with a test pass, from uoguelph-mlrg/Cutout (`train.py`'s epoch loop and
`test`; `util/cutout.py` `Cutout`). `Cutout.__call__` builds a NumPy `np.ones((h, w), np.float32)` mask, cuts
`n_holes` squares at `np.random.randint` centres with `np.clip`ped bounds, and multiplies the image by
`torch.from_numpy(mask).expand_as(img)`. The epoch loop wraps the loader in `tqdm`, calls
`progress_bar.set_description('Epoch ' + str(epoch))`, relabels SVHN targets with `labels.type_as(torch.LongTensor())
.view(-1) - 1`, uses `cnn.zero_grad()`, accumulates `xentropy_loss_avg` from the loss, a tensor `correct` from
`(pred == labels.data).sum()` and a Python `total`, and shows `'%.3f' % accuracy` in `set_postfix`; `test` switches
to `eval()`, sums correct predictions and returns `correct / total` after `cnn.train()`; each epoch ends with
`tqdm.write`, `scheduler.step(epoch)` (`MultiStepLR` with an explicit epoch) and a CSV row of `str(...)`s.
Adaptations: the script's module-level setup is the called function `run` (its arguments replace `args`); the
transform pipeline applies `Cutout` per image when a batch is drawn (the `DataLoader` worker's job), on lists of
random normalised CIFAR-like tensors made in the factory; ResNet-18 is a small CNN; `.cuda()`/`async=True`/
`volatile=True` are dropped (`Variable(...)` kept); `xentropy_loss.data[0]` (old-torch 0-d indexing) is
`xentropy_loss.item()`; the `CSVLogger` is a list recorder and the final `torch.save` a list append. So that a call
repeats, `run` restores the network from the factory's copy, seeds torch and NumPy (the original seeds torch only; the
Cutout draws are NumPy), and builds the optimiser and scheduler itself as the script does; it returns the last train
and test accuracies and the CSV rows."""
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.optim.lr_scheduler import MultiStepLR
from tqdm import tqdm


# ---- util/cutout.py
class Cutout(object):
    """Randomly mask out one or more patches from an image.

    Args:
        n_holes (int): Number of patches to cut out of each image.
        length (int): The length (in pixels) of each square patch.
    """
    def __init__(self, n_holes, length):
        self.n_holes = n_holes
        self.length = length

    def __call__(self, img):
        """
        Args:
            img (Tensor): Tensor image of size (C, H, W).
        Returns:
            Tensor: Image with n_holes of dimension length x length cut out of it.
        """
        h = img.size(1)
        w = img.size(2)

        mask = np.ones((h, w), np.float32)

        for n in range(self.n_holes):
            y = np.random.randint(h)  # BREAK
            x = np.random.randint(w)

            y1 = np.clip(y - self.length, 0, h)
            y2 = np.clip(y + self.length, 0, h)
            x1 = np.clip(x - self.length, 0, w)
            x2 = np.clip(x + self.length, 0, w)

            mask[y1: y2, x1: x2] = 0.

        mask = torch.from_numpy(mask)
        mask = mask.expand_as(img)
        img = img * mask

        return img


# ---- stand-ins
class Compose(object):
    """Stand-in for torchvision.transforms.Compose (torchvision does not import here)."""
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class TransformedLoader(object):
    """Stand-in for a DataLoader: applies the per-image transform to each stored batch when it is drawn."""
    def __init__(self, batches, transform=None):
        self.batches = batches
        self.transform = transform

    def __iter__(self):
        for images, labels in self.batches:
            if self.transform is not None:
                images = torch.stack([self.transform(img) for img in images])
            yield images, labels

    def __len__(self):
        return len(self.batches)


class SmallResNet(nn.Module):
    """Stand-in for model.resnet.ResNet18 (a small CNN)."""
    def __init__(self, num_classes=10):
        super(SmallResNet, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(2))
        self.linear = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.linear(self.features(x).flatten(1))


class CSVLogger(object):
    """Stand-in for util.misc.CSVLogger: keeps the rows."""
    def __init__(self, args=None, fieldnames=(), filename=''):
        self.fieldnames = fieldnames
        self.rows = []

    def writerow(self, row):
        self.rows.append(row)

    def close(self):
        pass


saved = []


# ---- train.py
def run(cnn, initial_state, train_batches, test_batches, dataset='cifar10', epochs=2, learning_rate=0.1,
        cutout=True, n_holes=1, length=8, seed=0):
    cnn.load_state_dict(initial_state)  # adaptation: restore the network so that a call repeats  # BREAK
    torch.manual_seed(seed)  # BREAK
    np.random.seed(seed)  # adaptation: the Cutout draws are NumPy's
    del saved[:]
    test_id = dataset + '_resnet18'

    train_transform = Compose([])
    if cutout:
        train_transform.transforms.append(Cutout(n_holes=n_holes, length=length))
    train_loader = TransformedLoader(train_batches, train_transform)
    test_loader = TransformedLoader(test_batches)

    criterion = nn.CrossEntropyLoss()
    cnn_optimizer = torch.optim.SGD(cnn.parameters(), lr=learning_rate,  # BREAK
                                    momentum=0.9, nesterov=True, weight_decay=5e-4)

    if dataset == 'svhn':
        scheduler = MultiStepLR(cnn_optimizer, milestones=[80, 120], gamma=0.1)
    else:
        scheduler = MultiStepLR(cnn_optimizer, milestones=[60, 120, 160], gamma=0.2)

    filename = 'logs/' + test_id + '.csv'
    csv_logger = CSVLogger(args=None, fieldnames=['epoch', 'train_acc', 'test_acc'], filename=filename)

    def test(loader):
        cnn.eval()    # Change model to 'eval' mode (BN uses moving mean/var).
        correct = 0.
        total = 0.
        for images, labels in loader:
            if dataset == 'svhn':
                # SVHN labels are from 1 to 10, not 0 to 9, so subtract 1
                labels = labels.type_as(torch.LongTensor()).view(-1) - 1

            images = Variable(images)  # BREAK
            labels = Variable(labels)

            pred = cnn(images)

            pred = torch.max(pred.data, 1)[1]
            total += labels.size(0)
            correct += (pred == labels.data).sum()

        val_acc = correct / total
        cnn.train()
        return val_acc

    for epoch in range(epochs):

        xentropy_loss_avg = 0.
        correct = 0.
        total = 0.

        progress_bar = tqdm(train_loader)
        for i, (images, labels) in enumerate(progress_bar):
            progress_bar.set_description('Epoch ' + str(epoch))

            if dataset == 'svhn':
                # SVHN labels are from 1 to 10, not 0 to 9, so subtract 1
                labels = labels.type_as(torch.LongTensor()).view(-1) - 1

            images = Variable(images)
            labels = Variable(labels)

            cnn.zero_grad()
            pred = cnn(images)

            xentropy_loss = criterion(pred, labels)
            xentropy_loss.backward()
            cnn_optimizer.step()  # BREAK

            xentropy_loss_avg += xentropy_loss.item()

            # Calculate running average of accuracy
            _, pred = torch.max(pred.data, 1)
            total += labels.size(0)
            correct += (pred == labels.data).sum()
            accuracy = correct / total

            progress_bar.set_postfix(
                xentropy='%.3f' % (xentropy_loss_avg / (i + 1)),
                acc='%.3f' % accuracy)

        test_acc = test(test_loader)
        tqdm.write('test_acc: %.3f' % (test_acc))

        scheduler.step(epoch)

        row = {'epoch': str(epoch), 'train_acc': str(accuracy), 'test_acc': str(test_acc)}
        csv_logger.writerow(row)

    saved.append(('checkpoints/' + test_id + '.pt', copy.deepcopy(cnn.state_dict())))
    csv_logger.close()
    return accuracy, test_acc, csv_logger.rows


def target():
    torch.manual_seed(0)
    cnn = SmallResNet(num_classes=10)
    initial_state = copy.deepcopy(cnn.state_dict())

    def batches(n, bs, low=0):
        return [(torch.randn(bs, 3, 8, 8), torch.randint(low, low + 10, (bs,))) for _ in range(n)]

    train1, test1 = batches(3, 4), batches(1, 4)
    train2, test2 = batches(2, 4, low=1), batches(1, 4, low=1)
    return [
        (run, (cnn, initial_state, train1, test1), {}),
        (run, (cnn, initial_state, train2, test2), {"dataset": "svhn", "n_holes": 2, "length": 2, "seed": 1,
                                                    "learning_rate": 0.01}),
    ]


EXPECT = ("extract: `Cutout.__call__` draws its hole centres with `np.random.randint` and builds a NumPy mask "
          "(`torch.from_numpy`), which cannot be traced and must run eagerly per image; breaks expected at "
          "`np.random.randint(h)`/`torch.from_numpy(mask)` in `Cutout`, the `tqdm` loop and its `set_description`/"
          "`set_postfix` (`'%.3f' % accuracy` formats a tensor), `cnn_optimizer.step()`, `xentropy_loss.item()`, "
          "`tqdm.write` and `scheduler.step(epoch)`")
