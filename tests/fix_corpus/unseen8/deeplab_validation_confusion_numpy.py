"""DeepLab-v3+ validation epoch: `self.evaluator.reset()`, a `tqdm` bar over the validation batches with
`tbar.set_description('Test loss: %.3f' % (test_loss / (i + 1)))` after `test_loss += loss.item()`, the predictions
moved to NumPy (`pred = output.data.cpu().numpy()`, `target = target.cpu().numpy()`, `np.argmax(pred, axis=1)`), and
the NumPy `Evaluator` accumulating a confusion matrix with a boolean mask and `np.bincount(label,
minlength=self.num_class**2)`, then pixel accuracy, class accuracy, mIoU (`np.nanmean`) and FWIoU, scalars written to
the summary writer and printed (jfzhang95/pytorch-deeplab-xception train.py: `Trainer.validation`; utils/metrics.py:
`Evaluator`; utils/loss.py: `SegmentationLosses.build_loss/CrossEntropyLoss` with the legacy `size_average` argument
and `ignore_index=255`).
Adaptations: the DeepLab network is replaced by a two-layer convolutional stand-in (4 classes, 16x16 images); the
validation loader is a given list of `{'image', 'label'}` dicts (labels hold some 255 "ignore" pixels); the
TensorBoard `SummaryWriter` is replaced by a minimal stand-in recording the scalars in a list; the best-prediction
checkpoint block at the end (`if new_pred > self.best_pred: ... self.saver.save_checkpoint(...)`) is left out (it
writes files). `validation` returns `(test_loss, Acc, Acc_class, mIoU, FWIoU)`. The evaluator is reset at the start of
the call as in the original, so a call run twice gives the same result; the writer's list grows (it is not read)."""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from tqdm import tqdm


class Evaluator(object):
    def __init__(self, num_class):
        self.num_class = num_class
        self.confusion_matrix = np.zeros((self.num_class,)*2)

    def Pixel_Accuracy(self):
        Acc = np.diag(self.confusion_matrix).sum() / self.confusion_matrix.sum()
        return Acc

    def Pixel_Accuracy_Class(self):
        Acc = np.diag(self.confusion_matrix) / self.confusion_matrix.sum(axis=1)
        Acc = np.nanmean(Acc)  # BREAK
        return Acc

    def Mean_Intersection_over_Union(self):
        MIoU = np.diag(self.confusion_matrix) / (
                    np.sum(self.confusion_matrix, axis=1) + np.sum(self.confusion_matrix, axis=0) -
                    np.diag(self.confusion_matrix))
        MIoU = np.nanmean(MIoU)  # BREAK
        return MIoU

    def Frequency_Weighted_Intersection_over_Union(self):
        freq = np.sum(self.confusion_matrix, axis=1) / np.sum(self.confusion_matrix)
        iu = np.diag(self.confusion_matrix) / (
                    np.sum(self.confusion_matrix, axis=1) + np.sum(self.confusion_matrix, axis=0) -
                    np.diag(self.confusion_matrix))

        FWIoU = (freq[freq > 0] * iu[freq > 0]).sum()  # BREAK
        return FWIoU

    def _generate_matrix(self, gt_image, pre_image):
        mask = (gt_image >= 0) & (gt_image < self.num_class)
        label = self.num_class * gt_image[mask].astype('int') + pre_image[mask]  # BREAK
        count = np.bincount(label, minlength=self.num_class**2)  # BREAK
        confusion_matrix = count.reshape(self.num_class, self.num_class)
        return confusion_matrix

    def add_batch(self, gt_image, pre_image):
        assert gt_image.shape == pre_image.shape
        self.confusion_matrix += self._generate_matrix(gt_image, pre_image)

    def reset(self):
        self.confusion_matrix = np.zeros((self.num_class,) * 2)


class SegmentationLosses(object):
    def __init__(self, weight=None, size_average=True, batch_average=True, ignore_index=255, cuda=False):
        self.ignore_index = ignore_index
        self.weight = weight
        self.size_average = size_average
        self.batch_average = batch_average
        self.cuda = cuda

    def build_loss(self, mode='ce'):
        """Choices: ['ce' or 'focal']"""
        if mode == 'ce':
            return self.CrossEntropyLoss
        elif mode == 'focal':
            return self.FocalLoss
        else:
            raise NotImplementedError

    def CrossEntropyLoss(self, logit, target):
        n, c, h, w = logit.size()
        criterion = nn.CrossEntropyLoss(weight=self.weight, ignore_index=self.ignore_index,
                                        size_average=self.size_average)
        if self.cuda:
            criterion = criterion.cuda()

        loss = criterion(logit, target.long())

        if self.batch_average:
            loss /= n

        return loss

    def FocalLoss(self, logit, target, gamma=2, alpha=0.5):
        n, c, h, w = logit.size()
        criterion = nn.CrossEntropyLoss(weight=self.weight, ignore_index=self.ignore_index,
                                        size_average=self.size_average)
        if self.cuda:
            criterion = criterion.cuda()

        logpt = -criterion(logit, target.long())
        pt = torch.exp(logpt)
        if alpha is not None:
            logpt *= alpha
        loss = -((1 - pt) ** gamma) * logpt

        if self.batch_average:
            loss /= n

        return loss


class SummaryWriterStandIn(object):
    """Stand-in for tensorboardX's SummaryWriter: records the scalars."""

    def __init__(self):
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))


class TinySegNet(nn.Module):
    """Stand-in for the DeepLab network: logits of shape (N, num_classes, H, W)."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, num_classes, 1)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x)))


class Trainer(object):
    def __init__(self, args, nclass, val_loader):
        self.args = args
        self.val_loader = val_loader
        self.nclass = nclass
        self.writer = SummaryWriterStandIn()
        self.model = TinySegNet(nclass)
        self.criterion = SegmentationLosses(weight=None, cuda=args.cuda).build_loss(mode=args.loss_type)
        self.evaluator = Evaluator(self.nclass)
        self.best_pred = 0.0

    def validation(self, epoch):
        self.model.eval()
        self.evaluator.reset()
        tbar = tqdm(self.val_loader, desc='\r')  # BREAK
        test_loss = 0.0
        for i, sample in enumerate(tbar):  # BREAK
            image, target = sample['image'], sample['label']
            if self.args.cuda:
                image, target = image.cuda(), target.cuda()
            with torch.no_grad():
                output = self.model(image)
            loss = self.criterion(output, target)
            test_loss += loss.item()
            tbar.set_description('Test loss: %.3f' % (test_loss / (i + 1)))
            pred = output.data.cpu().numpy()
            target = target.cpu().numpy()
            pred = np.argmax(pred, axis=1)
            # Add batch sample into evaluator
            self.evaluator.add_batch(target, pred)

        # Fast test during the training
        Acc = self.evaluator.Pixel_Accuracy()
        Acc_class = self.evaluator.Pixel_Accuracy_Class()
        mIoU = self.evaluator.Mean_Intersection_over_Union()
        FWIoU = self.evaluator.Frequency_Weighted_Intersection_over_Union()
        self.writer.add_scalar('val/total_loss_epoch', test_loss, epoch)
        self.writer.add_scalar('val/mIoU', mIoU, epoch)
        self.writer.add_scalar('val/Acc', Acc, epoch)
        self.writer.add_scalar('val/Acc_class', Acc_class, epoch)
        self.writer.add_scalar('val/fwIoU', FWIoU, epoch)
        print('Validation:')
        print('[Epoch: %d, numImages: %5d]' % (epoch, i * self.args.batch_size + image.data.shape[0]))
        print("Acc:{}, Acc_class:{}, mIoU:{}, fwIoU: {}".format(Acc, Acc_class, mIoU, FWIoU))
        print('Loss: %.3f' % test_loss)

        return test_loss, Acc, Acc_class, mIoU, FWIoU


def run_validation(trainer, val_loader, epoch):
    trainer.val_loader = val_loader
    return trainer.validation(epoch)


def _loader(gen, n, batch_size, nclass):
    out = []
    for _ in range(n):
        image = torch.randn(batch_size, 3, 16, 16, generator=gen)
        label = torch.randint(0, nclass, (batch_size, 16, 16), generator=gen).float()
        ignore = torch.rand(batch_size, 16, 16, generator=gen) < 0.1
        label[ignore] = 255
        out.append({'image': image, 'label': label})
    return out


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    args = SimpleNamespace(cuda=False, loss_type='ce', batch_size=2)
    trainer = Trainer(args, nclass=4, val_loader=[])
    loader1 = _loader(gen, 3, 2, 4)
    loader2 = _loader(gen, 3, 2, 4)
    return [
        (run_validation, (trainer, loader1, 0), {}),
        (run_validation, (trainer, loader2, 1), {}),
    ]


EXPECT = ("rewrite: compute the confusion matrix on tensors (`mask = (target >= 0) & (target < n)`, "
          "`torch.bincount(n * target[mask].long() + pred[mask], minlength=n**2)`, `pred = output.argmax(1)`) and keep "
          "`test_loss` a tensor, reading values only for the prints; the `tqdm` description and the prints are host work "
          "(caller as the fallback: compile the model and the loss, leave the epoch loop and the NumPy evaluator eager)")
