"""DeepLabV3+ training iterations with periodic validation through NumPy streaming metrics
(VainF/DeepLabV3Plus-Pytorch: `metrics/stream_metrics.py` `StreamSegMetrics` (`_fast_hist` with `np.bincount`,
`update` looping over `zip(label_trues, label_preds)`, `get_results` with `np.diag`/`np.nanmean` and a
`dict(zip(range(...), iu))`, `to_str`), `utils/loss.py` `FocalLoss`, `utils/scheduler.py` `PolyLR`; `main.py`
`validate` and the training loop, written from the collector's knowledge of the repository). `validate`
resets the metrics, and under `torch.no_grad()` iterates `tqdm(enumerate(loader))`, turns predictions and
targets into NumPy with `outputs.detach().max(dim=1)[1].cpu().numpy()` / `labels.cpu().numpy()`, feeds
`metrics.update`, collects `ret_samples` when `i in ret_samples_ids`, and returns `metrics.get_results()`.
The training loop accumulates `np_loss = loss.detach().cpu().numpy()` into `interval_loss`, prints a
`%`-formatted line every 10 iterations (here every 2), validates every `val_interval` iterations (`print(
metrics.to_str(val_score))`, `if val_score['Mean IoU'] > best_score:` bookkeeping, `model.eval()`/`model.train()`)
and steps `PolyLR` (`base_lr * (1 - self.last_epoch/self.max_iters)**self.power` in a list comprehension) every
iteration; it returns when `cur_itrs >= opts.total_itrs`.
Adaptations: the stored `stream_metrics.py` is a fork's revision (a `typing.Protocol` base, a CUDA variant and a
`with warnings.catch_warnings:` missing its call parentheses, which fails at run time); the program keeps its
`StreamSegMetrics` without that `with` line, as in the upstream file; the DeepLabV3+ network (torchvision-style
backbone, ASPP) is a small conv stand-in; `save_ckpt` and the visdom `vis` are omitted (`vis is None`); the
VOC loaders are lists of `(images, labels)` tensor pairs (labels with the ignore index 255 in a few pixels)
made in the factory; `opts` is an `argparse.Namespace` (`total_itrs` 4, `val_interval` 2, 3 classes).
So that a call repeats exactly, the called function `train` restores model and optimizer from copies taken in
the factory and rebuilds `PolyLR` (`reset_`); it returns the best score, the last validation results and a
classifier weight."""
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import _LRScheduler
from tqdm import tqdm


# ---- metrics/stream_metrics.py
class _StreamMetrics(object):
    def __init__(self):
        """ Overridden by subclasses """
        raise NotImplementedError()

    def update(self, gt, pred):
        """ Overridden by subclasses """
        raise NotImplementedError()

    def get_results(self):
        """ Overridden by subclasses """
        raise NotImplementedError()

    def to_str(self, metrics):
        """ Overridden by subclasses """
        raise NotImplementedError()

    def reset(self):
        """ Overridden by subclasses """
        raise NotImplementedError()


class StreamSegMetrics(_StreamMetrics):
    """
    Stream Metrics for Semantic Segmentation Task
    """

    def __init__(self, n_classes):
        self.n_classes = n_classes
        self.confusion_matrix = np.zeros((n_classes, n_classes))

    def update(self, label_trues, label_preds):
        for lt, lp in zip(label_trues, label_preds):
            self.confusion_matrix += self._fast_hist(lt.flatten(), lp.flatten())

    @staticmethod
    def to_str(results):
        string = "\n"
        for k, v in results.items():
            if k != "Class IoU":
                string += "%s: %f\n" % (k, v)  # BREAK

        # string+='Class IoU:\n'
        # for k, v in results['Class IoU'].items():
        #    string += "\tclass %d: %f\n"%(k, v)
        return string

    def _fast_hist(self, label_true, label_pred):
        mask = (label_true >= 0) & (label_true < self.n_classes)
        hist = np.bincount(  # BREAK
            self.n_classes * label_true[mask].astype(int) + label_pred[mask],  # BREAK
            minlength=self.n_classes ** 2,
        ).reshape(self.n_classes, self.n_classes)
        return hist

    def get_results(self):
        """Returns accuracy score evaluation result.
            - overall accuracy
            - mean accuracy
            - mean IU
            - fwavacc
        """
        hist = self.confusion_matrix
        acc = np.diag(hist).sum() / hist.sum()
        acc_cls = np.diag(hist) / hist.sum(axis=1)
        acc_cls = np.nanmean(acc_cls)  # BREAK
        iu = np.diag(hist) / (hist.sum(axis=1) + hist.sum(axis=0) - np.diag(hist))
        mean_iu = np.nanmean(iu)  # BREAK
        freq = hist.sum(axis=1) / hist.sum()
        fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()  # BREAK
        cls_iu = dict(zip(range(self.n_classes), iu))

        return {
            "Overall Acc": acc,
            "Mean Acc": acc_cls,
            "FreqW Acc": fwavacc,
            "Mean IoU": mean_iu,
            "Class IoU": cls_iu,
        }

    def reset(self):
        self.confusion_matrix = np.zeros((self.n_classes, self.n_classes))


# ---- utils/loss.py
class FocalLoss(nn.Module):
    def __init__(self, alpha=1, gamma=0, size_average=True, ignore_index=255):
        super(FocalLoss, self).__init__()
        self.alpha = alpha
        self.gamma = gamma
        self.ignore_index = ignore_index
        self.size_average = size_average

    def forward(self, inputs, targets):
        ce_loss = F.cross_entropy(
            inputs, targets, reduction='none', ignore_index=self.ignore_index)
        pt = torch.exp(-ce_loss)
        focal_loss = self.alpha * (1 - pt) ** self.gamma * ce_loss
        if self.size_average:
            return focal_loss.mean()
        else:
            return focal_loss.sum()


# ---- utils/scheduler.py
class PolyLR(_LRScheduler):
    def __init__(self, optimizer, max_iters, power=0.9, last_epoch=-1):
        self.power = power
        self.max_iters = max_iters
        super(PolyLR, self).__init__(optimizer, last_epoch)

    def get_lr(self):
        return [ base_lr * ( 1 - self.last_epoch/self.max_iters )**self.power
                for base_lr in self.base_lrs]


# ---- stand-in network
class TinyDeepLab(nn.Module):
    """Stand-in for network.deeplabv3plus_*: backbone, ASPP-like head, bilinear upsampling to the input size."""
    def __init__(self, num_classes):
        super(TinyDeepLab, self).__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.aspp = nn.ModuleList([nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 3, padding=2, dilation=2)])
        self.classifier = nn.Conv2d(16, num_classes, 1)

    def forward(self, x):
        input_shape = x.shape[-2:]
        f = self.backbone(x)
        f = torch.cat([F.relu(m(f)) for m in self.aspp], dim=1)
        out = self.classifier(f)
        return F.interpolate(out, size=input_shape, mode='bilinear', align_corners=False)


# ---- main.py
def validate(opts, model, loader, device, metrics, ret_samples_ids=None):
    """Do validation and return specified samples"""
    metrics.reset()
    ret_samples = []

    with torch.no_grad():
        for i, (images, labels) in tqdm(enumerate(loader)):  # BREAK

            images = images.to(device, dtype=torch.float32)
            labels = labels.to(device, dtype=torch.long)

            outputs = model(images)
            preds = outputs.detach().max(dim=1)[1].cpu().numpy()
            targets = labels.cpu().numpy()

            metrics.update(targets, preds)
            if ret_samples_ids is not None and i in ret_samples_ids:  # get vis samples
                ret_samples.append(
                    (images[0].detach().cpu().numpy(), targets[0], preds[0]))

        score = metrics.get_results()
    return score, ret_samples


def reset_(model, optimizer, model_state, opt_state, opts):
    """Adaptation: restore model/optimizer from the factory's copies and rebuild the scheduler."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)
    for group in optimizer.param_groups:
        group.pop('initial_lr', None)
    return PolyLR(optimizer, opts.total_itrs, power=0.9)


def train(opts, model, optimizer, criterion, metrics, train_loader, val_loader, model_state, opt_state):
    device = torch.device('cpu')
    scheduler = reset_(model, optimizer, model_state, opt_state, opts)
    vis = None
    vis_sample_id = [0]
    best_score = 0.0
    cur_itrs = 0
    cur_epochs = 0
    val_score = None

    interval_loss = 0
    while True:  # cur_itrs < opts.total_itrs:
        # =====  Train  =====
        model.train()
        cur_epochs += 1
        for (images, labels) in train_loader:
            cur_itrs += 1

            images = images.to(device, dtype=torch.float32)
            labels = labels.to(device, dtype=torch.long)

            optimizer.zero_grad()  # BREAK
            outputs = model(images)
            loss = criterion(outputs, labels)
            loss.backward()  # BREAK
            optimizer.step()  # BREAK

            np_loss = loss.detach().cpu().numpy()
            interval_loss += np_loss
            if vis is not None:
                vis.vis_scalar('Loss', cur_itrs, np_loss)

            if (cur_itrs) % 2 == 0:
                interval_loss = interval_loss / 2
                print("Epoch %d, Itrs %d/%d, Loss=%f" %  # BREAK
                      (cur_epochs, cur_itrs, opts.total_itrs, interval_loss))
                interval_loss = 0.0

            if (cur_itrs) % opts.val_interval == 0:
                print("validation...")
                model.eval()
                val_score, ret_samples = validate(
                    opts=opts, model=model, loader=val_loader, device=device, metrics=metrics,
                    ret_samples_ids=vis_sample_id)
                print(metrics.to_str(val_score))
                if val_score['Mean IoU'] > best_score:  # save best model
                    best_score = val_score['Mean IoU']
                model.train()
            scheduler.step()  # BREAK

            if cur_itrs >= opts.total_itrs:
                return best_score, val_score, model.classifier.weight.detach().clone()


def target():
    torch.manual_seed(0)
    opts = argparse.Namespace(num_classes=3, total_itrs=4, val_interval=2, lr=0.01, weight_decay=1e-4,
                              loss_type='focal_loss')
    model = TinyDeepLab(num_classes=opts.num_classes)
    optimizer = torch.optim.SGD(params=[
        {'params': model.backbone.parameters(), 'lr': 0.1 * opts.lr},
        {'params': list(model.aspp.parameters()) + list(model.classifier.parameters()), 'lr': opts.lr},
    ], lr=opts.lr, momentum=0.9, weight_decay=opts.weight_decay)
    if opts.loss_type == 'focal_loss':
        criterion = FocalLoss(ignore_index=255, size_average=True)
    else:
        criterion = nn.CrossEntropyLoss(ignore_index=255, reduction='mean')
    metrics = StreamSegMetrics(opts.num_classes)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def loader(n, bs):
        out = []
        for _ in range(n):
            labels = torch.randint(0, 3, (bs, 8, 8))
            labels[:, 0, :2] = 255
            out.append((torch.randn(bs, 3, 8, 8), labels))
        return out

    train1, val1 = loader(3, 2), loader(2, 2)
    train2, val2 = loader(2, 3), loader(1, 3)
    return [
        (train, (opts, model, optimizer, criterion, metrics, train1, val1, model_state, opt_state), {}),
        (train, (opts, model, optimizer, criterion, metrics, train2, val2, model_state, opt_state), {}),
    ]


EXPECT = ("extract: the model forward and `FocalLoss` are clean graphs; `validate`'s metric feed "
          "(`.cpu().numpy()` into `StreamSegMetrics`' `np.bincount`/`np.nanmean`) and the loop's "
          "`loss.detach().cpu().numpy()` accumulation and prints are host code that moves into helpers under an "
          "escape hatch, leaving the forward/loss/backward compiled")
