"""Segmentation batch metrics from yassouali/pytorch-segmentation (`utils/metrics.py`, stored revision 6b8dab2:
`eval_metrics`, `batch_pix_accuracy`, `batch_intersection_union`, `AverageMeter`). `eval_metrics` takes the
argmax of the logits, shifts predictions and targets by one so that ignored pixels (255) fall outside
`[1, num_class]`, and calls `batch_pix_accuracy` (an `assert pixel_correct <= pixel_labeled` on tensor values,
then `.cpu().numpy()`) and `batch_intersection_union` (`torch.histc` areas, `assert (area_inter <=
area_union).all()`, `.cpu().numpy()`), returning `np.round(...)` arrays in a list. `AverageMeter` (NumPy running
averages, used by the repository's trainer on these values) is kept but not called.
Adaptations: none in the kept code; the logits and label maps (with some 255 "ignore" pixels) are random tensors
made in the factory; the called function is the original `eval_metrics`. Nothing is random in the calls."""
import numpy as np
import torch
import torch.nn.functional as F
import torch.nn as nn

class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.initialized = False
        self.val = None
        self.avg = None
        self.sum = None
        self.count = None

    def initialize(self, val, weight):
        self.val = val
        self.avg = val
        self.sum = np.multiply(val, weight)
        self.count = weight
        self.initialized = True

    def update(self, val, weight=1):
        if not self.initialized:
            self.initialize(val, weight)
        else:
            self.add(val, weight)

    def add(self, val, weight):
        self.val = val
        self.sum = np.add(self.sum, np.multiply(val, weight))
        self.count = self.count + weight
        self.avg = self.sum / self.count

    @property
    def value(self):
        return self.val

    @property
    def average(self):
        return np.round(self.avg, 5)

def batch_pix_accuracy(predict, target, labeled):
    pixel_labeled = labeled.sum()
    pixel_correct = ((predict == target) * labeled).sum()
    assert pixel_correct <= pixel_labeled, "Correct area should be smaller than Labeled"  # NO BREAK in torch 2.13
    return pixel_correct.cpu().numpy(), pixel_labeled.cpu().numpy()

def batch_intersection_union(predict, target, num_class, labeled):
    predict = predict * labeled.long()
    intersection = predict * (predict == target).long()

    area_inter = torch.histc(intersection.float(), bins=num_class, max=num_class, min=1)
    area_pred = torch.histc(predict.float(), bins=num_class, max=num_class, min=1)
    area_lab = torch.histc(target.float(), bins=num_class, max=num_class, min=1)
    area_union = area_pred + area_lab - area_inter
    assert (area_inter <= area_union).all(), "Intersection area should be smaller than Union area"
    return area_inter.cpu().numpy(), area_union.cpu().numpy()

def eval_metrics(output, target, num_class):
    _, predict = torch.max(output.data, 1)
    predict = predict + 1
    target = target + 1

    labeled = (target > 0) * (target <= num_class)
    correct, num_labeled = batch_pix_accuracy(predict, target, labeled)
    inter, union = batch_intersection_union(predict, target, num_class, labeled)
    return [np.round(correct, 5), np.round(num_labeled, 5), np.round(inter, 5), np.round(union, 5)]


def target():
    torch.manual_seed(0)

    def batch(n, c, h, w):
        output = torch.randn(n, c, h, w)
        tgt = torch.randint(0, c, (n, h, w))
        tgt[torch.rand(n, h, w) < 0.1] = 255
        return output, tgt

    out1, tgt1 = batch(2, 4, 16, 16)
    out2, tgt2 = batch(3, 6, 12, 20)
    return [
        (eval_metrics, (out1, tgt1, 4), {}),
        (eval_metrics, (out2, tgt2, 6), {}),
    ]


EXPECT = ("rewrite: the two asserts on tensor values can become tensor-side checks (torch._assert_async-style) or "
          "be dropped from the graph, and the .cpu().numpy()/np.round tail moves to the caller; the metric itself is "
          "argmax/histc tensor code")
