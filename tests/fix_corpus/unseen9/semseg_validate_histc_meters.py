"""Semantic-segmentation validation (hszhao/semseg tool/train.py: `validate`, `main_process`, the module-level
`args`/`logger`; util/util.py: `AverageMeter`, `intersectionAndUnionGPU`). Per batch: `time.time()` meters, the model,
`if args.zoom_factor != 8:` interpolation, the loss (`torch.mean`), `output.max(1)[1]`, and
`intersectionAndUnionGPU` (`assert`s on dims and shapes, an in-place ignore-label write
`output[target == ignore_index] = ignore_index`, the data-dependent selection `output[output == target]`, three
`torch.histc` calls); the areas go to NumPy (`intersection.cpu().numpy()`), into `AverageMeter`s (NumPy arrays
accumulated in Python), `accuracy = sum(intersection_meter.val) / (sum(target_meter.val) + 1e-10)` (builtin `sum` over
a NumPy array), `loss.item()`, a formatted `logger.info` per `args.print_freq` batches, and at the end NumPy mIoU/mAcc
and a per-class `logger.info` loop.
Adaptations: `.cuda(non_blocking=True)` moves are dropped (CPU only); CPU `torch.histc` has no integer kernel (the
original runs on CUDA, which has one), so the call site passes `output.float()`/`target.float()` to
`intersectionAndUnionGPU`; the distributed branches are kept but never taken (`multiprocessing_distributed=False`);
`args` is a `SimpleNamespace` (`classes=4`, `ignore_label=255`, `zoom_factor=8`, `print_freq=1`), `logger` a plain
`logging.getLogger("main-logger")`; the PSPNet is replaced by a small convolutional stand-in (4 classes, 8x8 inputs)
and the criterion is `nn.CrossEntropyLoss(ignore_index=args.ignore_label, reduction='none')` (per-pixel, so the
`torch.mean(loss)` line does the reduction). The data are seeded images with labels containing ignore pixels, in
`DataLoader`s (no shuffling). No state is mutated (eval mode; `output` is a fresh tensor). The two calls use
different loaders (batch sizes 2 and 3)."""
import logging
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist
import torch.nn.functional as F

args = SimpleNamespace(classes=4, ignore_label=255, zoom_factor=8, print_freq=1, multiprocessing_distributed=False,
                       rank=0, ngpus_per_node=1)
logger = logging.getLogger("main-logger")


def main_process():
    return not args.multiprocessing_distributed or (args.multiprocessing_distributed and args.rank % args.ngpus_per_node == 0)


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


def intersectionAndUnionGPU(output, target, K, ignore_index=255):
    # 'K' classes, output and target sizes are N or N * L or N * H * W, each value in range 0 to K - 1.
    assert (output.dim() in [1, 2, 3])
    assert output.shape == target.shape
    output = output.view(-1)
    target = target.view(-1)
    output[target == ignore_index] = ignore_index
    intersection = output[output == target]  # BREAK
    area_intersection = torch.histc(intersection, bins=K, min=0, max=K-1)
    area_output = torch.histc(output, bins=K, min=0, max=K-1)
    area_target = torch.histc(target, bins=K, min=0, max=K-1)
    area_union = area_output + area_target - area_intersection
    return area_intersection, area_union, area_target


class SegStandIn(nn.Module):
    """Adaptation: stand-in for PSPNet in eval mode (returns logits only)."""

    def __init__(self, classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.cls = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return self.cls(F.relu(self.conv1(x)))


def validate(val_loader, model, criterion):
    if main_process():
        logger.info('>>>>>>>>>>>>>>>> Start Evaluation >>>>>>>>>>>>>>>>')  # BREAK
    batch_time = AverageMeter()
    data_time = AverageMeter()
    loss_meter = AverageMeter()
    intersection_meter = AverageMeter()
    union_meter = AverageMeter()
    target_meter = AverageMeter()

    model.eval()
    end = time.time()  # BREAK
    for i, (input, target) in enumerate(val_loader):  # BREAK
        data_time.update(time.time() - end)
        output = model(input)
        if args.zoom_factor != 8:
            output = F.interpolate(output, size=target.size()[1:], mode='bilinear', align_corners=True)
        loss = criterion(output, target)

        n = input.size(0)
        if args.multiprocessing_distributed:
            loss = loss * n  # not considering ignore pixels
            count = target.new_tensor([n], dtype=torch.long)
            dist.all_reduce(loss), dist.all_reduce(count)
            n = count.item()
            loss = loss / n
        else:
            loss = torch.mean(loss)

        output = output.max(1)[1]
        intersection, union, target = intersectionAndUnionGPU(output.float(), target.float(), args.classes, args.ignore_label)
        if args.multiprocessing_distributed:
            dist.all_reduce(intersection), dist.all_reduce(union), dist.all_reduce(target)
        intersection, union, target = intersection.cpu().numpy(), union.cpu().numpy(), target.cpu().numpy()
        intersection_meter.update(intersection), union_meter.update(union), target_meter.update(target)

        accuracy = sum(intersection_meter.val) / (sum(target_meter.val) + 1e-10)
        loss_meter.update(loss.item(), input.size(0))
        batch_time.update(time.time() - end)
        end = time.time()
        if ((i + 1) % args.print_freq == 0) and main_process():
            logger.info('Test: [{}/{}] '
                        'Data {data_time.val:.3f} ({data_time.avg:.3f}) '
                        'Batch {batch_time.val:.3f} ({batch_time.avg:.3f}) '
                        'Loss {loss_meter.val:.4f} ({loss_meter.avg:.4f}) '
                        'Accuracy {accuracy:.4f}.'.format(i + 1, len(val_loader),
                                                          data_time=data_time,
                                                          batch_time=batch_time,
                                                          loss_meter=loss_meter,
                                                          accuracy=accuracy))

    iou_class = intersection_meter.sum / (union_meter.sum + 1e-10)
    accuracy_class = intersection_meter.sum / (target_meter.sum + 1e-10)
    mIoU = np.mean(iou_class)
    mAcc = np.mean(accuracy_class)
    allAcc = sum(intersection_meter.sum) / (sum(target_meter.sum) + 1e-10)
    if main_process():
        logger.info('Val result: mIoU/mAcc/allAcc {:.4f}/{:.4f}/{:.4f}.'.format(mIoU, mAcc, allAcc))
        for i in range(args.classes):
            logger.info('Class_{} Result: iou/accuracy {:.4f}/{:.4f}.'.format(i, iou_class[i], accuracy_class[i]))
        logger.info('<<<<<<<<<<<<<<<<< End Evaluation <<<<<<<<<<<<<<<<<')
    return loss_meter.avg, mIoU, mAcc, allAcc


def target():
    torch.manual_seed(0)
    model = SegStandIn(args.classes)
    criterion = nn.CrossEntropyLoss(ignore_index=args.ignore_label, reduction='none')
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(6, 3, 8, 8, generator=gen)
    labels = torch.randint(0, args.classes, (6, 8, 8), generator=gen)
    labels[torch.rand(6, 8, 8, generator=gen) < 0.1] = args.ignore_label
    dataset = torch.utils.data.TensorDataset(images, labels)
    loader1 = torch.utils.data.DataLoader(dataset, batch_size=2, shuffle=False)
    loader2 = torch.utils.data.DataLoader(torch.utils.data.Subset(dataset, [5, 4, 3]), batch_size=3, shuffle=False)
    return [
        (validate, (loader1, model, criterion), {}),
        (validate, (loader2, model, criterion), {}),
    ]


EXPECT = ("caller: validation is a host-side metric loop (per-batch `.cpu().numpy()` of the histogram areas, "
          "NumPy arrays accumulated in `AverageMeter`s, builtin `sum` over them, `loss.item()`, `time.time()` and "
          "`logger.info`); compile the model and the loss, keep the loop and the metric bookkeeping eager in the "
          "caller (the `output[output == target]` selection can also be replaced by "
          "`torch.histc(torch.where(output == target, output, -1), ...)`, which keeps the shapes static)")
