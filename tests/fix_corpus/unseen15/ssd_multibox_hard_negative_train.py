"""SSD training and validation epochs from qfgaohao/pytorch-ssd: `train_ssd.py` `train` (per-batch
`.to(device)`, `criterion(confidence, locations, labels, boxes)`, `loss.item()` running sums, an `if i and i %
debug_steps == 0:` block logging multi-part f-strings and resetting the sums) and `test` (`torch.no_grad()` around
the forward, `.item()` sums, averages over `num`), the `__main__` epoch loop's `scheduler.step()` first and the
`epoch % args.validation_epochs == 0 or epoch == args.num_epochs - 1` validation with an f-string model path;
`vision/nn/multibox_loss.py` `MultiboxLoss.forward` (`with torch.no_grad():` around `-F.log_softmax(...)[:, :,
0]` and `box_utils.hard_negative_mining`, boolean-mask selections `confidence[mask, :]`, `labels[mask]`,
`predicted_locations[pos_mask, :].reshape(-1, 4)`, `F.cross_entropy(..., size_average=False)`,
`F.smooth_l1_loss(..., size_average=False)`, `num_pos = gt_locations.size(0)` as the divisor); and
`vision/utils/box_utils.py` (`hard_negative_mining` with the in-place `loss[pos_mask] = -math.inf` and the double
`sort`, `generate_ssd_priors` over `SSDSpec`/`SSDBoxSizes` namedtuples with `itertools.product`, `iou_of`,
`area_of`, `assign_priors` with its Python loop over `best_prior_per_target_index`, `convert_boxes_to_locations`,
`center_form_to_corner_form`, `corner_form_to_center_form`); `MatchPrior` (`vision/ssd/ssd.py`, as the collector
knows it; not opened) is used in the factory to make the targets.
Adaptations: the VGG/MobileNet SSD is a small stand-in (`TinySSD`: two feature maps with 3x3 classification and
regression heads, reshaped and concatenated as `SSD.forward` does); the VOC datasets, transforms and
`DataLoader`s are lists of `(images, boxes, labels)` batches made in the factory with random ground-truth boxes
matched to the priors; the model `save` is a recorder; the module `box_utils` is one file here, so a small
`box_utils` class holds `hard_negative_mining` for the `box_utils.` call in `MultiboxLoss.forward`; module-level `args` and `DEVICE` are set by the called
function `run` (no argparse, CPU). `run` seeds torch and restores the net from the factory's copy, then builds
the optimizer and `MultiStepLR`/`CosineAnnealingLR` as `__main__` does, so a call repeats; it returns the
validation losses."""
import argparse
import collections
import copy
import itertools
import logging
import math
import sys
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import CosineAnnealingLR, MultiStepLR

args = None
DEVICE = torch.device("cpu")

# ---- vision/utils/box_utils.py
SSDBoxSizes = collections.namedtuple('SSDBoxSizes', ['min', 'max'])

SSDSpec = collections.namedtuple('SSDSpec', ['feature_map_size', 'shrinkage', 'box_sizes', 'aspect_ratios'])


def generate_ssd_priors(specs: List[SSDSpec], image_size, clamp=True) -> torch.Tensor:
    priors = []
    for spec in specs:
        scale = image_size / spec.shrinkage
        for j, i in itertools.product(range(spec.feature_map_size), repeat=2):
            x_center = (i + 0.5) / scale
            y_center = (j + 0.5) / scale

            # small sized square box
            size = spec.box_sizes.min
            h = w = size / image_size
            priors.append([
                x_center,
                y_center,
                w,
                h
            ])

            # big sized square box
            size = math.sqrt(spec.box_sizes.max * spec.box_sizes.min)
            h = w = size / image_size
            priors.append([
                x_center,
                y_center,
                w,
                h
            ])

            # change h/w ratio of the small sized box
            size = spec.box_sizes.min
            h = w = size / image_size
            for ratio in spec.aspect_ratios:
                ratio = math.sqrt(ratio)
                priors.append([
                    x_center,
                    y_center,
                    w * ratio,
                    h / ratio
                ])
                priors.append([
                    x_center,
                    y_center,
                    w / ratio,
                    h * ratio
                ])

    priors = torch.tensor(priors)
    if clamp:
        torch.clamp(priors, 0.0, 1.0, out=priors)
    return priors


def convert_boxes_to_locations(center_form_boxes, center_form_priors, center_variance, size_variance):
    # priors can have one dimension less
    if center_form_priors.dim() + 1 == center_form_boxes.dim():
        center_form_priors = center_form_priors.unsqueeze(0)
    return torch.cat([
        (center_form_boxes[..., :2] - center_form_priors[..., :2]) / center_form_priors[..., 2:] / center_variance,
        torch.log(center_form_boxes[..., 2:] / center_form_priors[..., 2:]) / size_variance
    ], dim=center_form_boxes.dim() - 1)


def area_of(left_top, right_bottom) -> torch.Tensor:
    hw = torch.clamp(right_bottom - left_top, min=0.0)
    return hw[..., 0] * hw[..., 1]


def iou_of(boxes0, boxes1, eps=1e-5):
    overlap_left_top = torch.max(boxes0[..., :2], boxes1[..., :2])
    overlap_right_bottom = torch.min(boxes0[..., 2:], boxes1[..., 2:])

    overlap_area = area_of(overlap_left_top, overlap_right_bottom)
    area0 = area_of(boxes0[..., :2], boxes0[..., 2:])
    area1 = area_of(boxes1[..., :2], boxes1[..., 2:])
    return overlap_area / (area0 + area1 - overlap_area + eps)


def assign_priors(gt_boxes, gt_labels, corner_form_priors,
                  iou_threshold):
    # size: num_priors x num_targets
    ious = iou_of(gt_boxes.unsqueeze(0), corner_form_priors.unsqueeze(1))
    # size: num_priors
    best_target_per_prior, best_target_per_prior_index = ious.max(1)
    # size: num_targets
    best_prior_per_target, best_prior_per_target_index = ious.max(0)

    for target_index, prior_index in enumerate(best_prior_per_target_index):
        best_target_per_prior_index[prior_index] = target_index
    # 2.0 is used to make sure every target has a prior assigned
    best_target_per_prior.index_fill_(0, best_prior_per_target_index, 2)
    # size: num_priors
    labels = gt_labels[best_target_per_prior_index]
    labels[best_target_per_prior < iou_threshold] = 0  # the backgournd id
    boxes = gt_boxes[best_target_per_prior_index]
    return boxes, labels


def hard_negative_mining(loss, labels, neg_pos_ratio):
    """
    It used to suppress the presence of a large number of negative prediction.
    It works on image level not batch level.
    """
    pos_mask = labels > 0
    num_pos = pos_mask.long().sum(dim=1, keepdim=True)
    num_neg = num_pos * neg_pos_ratio

    loss[pos_mask] = -math.inf
    _, indexes = loss.sort(dim=1, descending=True)
    _, orders = indexes.sort(dim=1)
    neg_mask = orders < num_neg
    return pos_mask | neg_mask


def center_form_to_corner_form(locations):
    return torch.cat([locations[..., :2] - locations[..., 2:]/2,
                     locations[..., :2] + locations[..., 2:]/2], locations.dim() - 1)


def corner_form_to_center_form(boxes):
    return torch.cat([
        (boxes[..., :2] + boxes[..., 2:]) / 2,
         boxes[..., 2:] - boxes[..., :2]
    ], boxes.dim() - 1)


class box_utils:  # the module's functions, as `box_utils.` reads them in multibox_loss.py
    hard_negative_mining = staticmethod(hard_negative_mining)


# ---- vision/ssd/ssd.py MatchPrior (factory side)
class MatchPrior(object):
    def __init__(self, center_form_priors, center_variance, size_variance, iou_threshold):
        self.center_form_priors = center_form_priors
        self.corner_form_priors = center_form_to_corner_form(center_form_priors)
        self.center_variance = center_variance
        self.size_variance = size_variance
        self.iou_threshold = iou_threshold

    def __call__(self, gt_boxes, gt_labels):
        boxes, labels = assign_priors(gt_boxes, gt_labels,
                                      self.corner_form_priors, self.iou_threshold)
        boxes = corner_form_to_center_form(boxes)
        locations = convert_boxes_to_locations(boxes, self.center_form_priors, self.center_variance,
                                               self.size_variance)
        return locations, labels


# ---- vision/nn/multibox_loss.py
class MultiboxLoss(nn.Module):
    def __init__(self, priors, iou_threshold, neg_pos_ratio,
                 center_variance, size_variance, device):
        super(MultiboxLoss, self).__init__()  # BREAK
        self.iou_threshold = iou_threshold
        self.neg_pos_ratio = neg_pos_ratio
        self.center_variance = center_variance
        self.size_variance = size_variance
        self.priors = priors
        self.priors.to(device)

    def forward(self, confidence, predicted_locations, labels, gt_locations):
        num_classes = confidence.size(2)
        with torch.no_grad():
            # derived from cross_entropy=sum(log(p))
            loss = -F.log_softmax(confidence, dim=2)[:, :, 0]
            mask = box_utils.hard_negative_mining(loss, labels, self.neg_pos_ratio)

        confidence = confidence[mask, :]  # BREAK
        classification_loss = F.cross_entropy(confidence.reshape(-1, num_classes), labels[mask], size_average=False)  # BREAK
        pos_mask = labels > 0
        predicted_locations = predicted_locations[pos_mask, :].reshape(-1, 4)  # BREAK
        gt_locations = gt_locations[pos_mask, :].reshape(-1, 4)  # BREAK
        smooth_l1_loss = F.smooth_l1_loss(predicted_locations, gt_locations, size_average=False)
        num_pos = gt_locations.size(0)
        return smooth_l1_loss/num_pos, classification_loss/num_pos


# ---- stand-in SSD (adaptation)
class TinySSD(nn.Module):
    def __init__(self, num_classes, boxes_per_location=(4, 4)):
        super().__init__()
        self.num_classes = num_classes
        self.base = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.extra = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.classification_headers = nn.ModuleList(
            [nn.Conv2d(8, n * num_classes, 3, padding=1) for n in boxes_per_location])
        self.regression_headers = nn.ModuleList([nn.Conv2d(8, n * 4, 3, padding=1) for n in boxes_per_location])
        self.saved = []

    def compute_header(self, i, x):
        confidence = self.classification_headers[i](x)
        confidence = confidence.permute(0, 2, 3, 1).contiguous()
        confidence = confidence.view(confidence.size(0), -1, self.num_classes)

        location = self.regression_headers[i](x)
        location = location.permute(0, 2, 3, 1).contiguous()
        location = location.view(location.size(0), -1, 4)
        return confidence, location

    def forward(self, x):
        confidences, locations = [], []
        x = self.base(x)
        c, l = self.compute_header(0, x)
        confidences.append(c)
        locations.append(l)
        x = self.extra(x)
        c, l = self.compute_header(1, x)
        confidences.append(c)
        locations.append(l)
        return torch.cat(confidences, 1), torch.cat(locations, 1)

    def save(self, model_path):
        self.saved.append(model_path)


# ---- train_ssd.py
def train(loader, net, criterion, optimizer, device, debug_steps=100, epoch=-1):
    net.train(True)
    running_loss = 0.0
    running_regression_loss = 0.0
    running_classification_loss = 0.0
    for i, data in enumerate(loader):
        images, boxes, labels = data
        images = images.to(device)
        boxes = boxes.to(device)
        labels = labels.to(device)

        optimizer.zero_grad()  # BREAK
        confidence, locations = net(images)
        regression_loss, classification_loss = criterion(confidence, locations, labels, boxes)  # TODO CHANGE BOXES
        loss = regression_loss + classification_loss
        loss.backward()
        optimizer.step()  # BREAK

        running_loss += loss.item()
        running_regression_loss += regression_loss.item()
        running_classification_loss += classification_loss.item()
        if i and i % debug_steps == 0:
            avg_loss = running_loss / debug_steps
            avg_reg_loss = running_regression_loss / debug_steps
            avg_clf_loss = running_classification_loss / debug_steps
            logging.info(
                f"Epoch: {epoch}, Step: {i}, " +
                f"Average Loss: {avg_loss:.4f}, " +
                f"Average Regression Loss {avg_reg_loss:.4f}, " +
                f"Average Classification Loss: {avg_clf_loss:.4f}"
            )
            running_loss = 0.0
            running_regression_loss = 0.0
            running_classification_loss = 0.0


def test(loader, net, criterion, device):
    net.eval()
    running_loss = 0.0
    running_regression_loss = 0.0
    running_classification_loss = 0.0
    num = 0
    for _, data in enumerate(loader):
        images, boxes, labels = data
        images = images.to(device)
        boxes = boxes.to(device)
        labels = labels.to(device)
        num += 1

        with torch.no_grad():
            confidence, locations = net(images)
            regression_loss, classification_loss = criterion(confidence, locations, labels, boxes)
            loss = regression_loss + classification_loss

        running_loss += loss.item()
        running_regression_loss += regression_loss.item()
        running_classification_loss += classification_loss.item()
    return running_loss / num, running_regression_loss / num, running_classification_loss / num


def run(run_args, net, config, train_loader, val_loader, initial_state):
    """Adaptation: the `__main__` block from the criterion on, as a function."""
    global args
    args = run_args
    torch.manual_seed(0)  # BREAK
    net.load_state_dict(initial_state)  # BREAK
    net.saved.clear()
    criterion = MultiboxLoss(config.priors, iou_threshold=0.5, neg_pos_ratio=3,
                             center_variance=0.1, size_variance=0.2, device=DEVICE)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum,  # BREAK
                                weight_decay=args.weight_decay)
    last_epoch = -1
    if args.scheduler == 'multi-step':
        logging.info("Uses MultiStepLR scheduler.")
        milestones = [int(v.strip()) for v in args.milestones.split(",")]
        scheduler = MultiStepLR(optimizer, milestones=milestones,
                                                     gamma=0.1, last_epoch=last_epoch)
    elif args.scheduler == 'cosine':
        logging.info("Uses CosineAnnealingLR scheduler.")
        scheduler = CosineAnnealingLR(optimizer, args.t_max, last_epoch=last_epoch)
    else:
        logging.fatal(f"Unsupported Scheduler: {args.scheduler}.")
        sys.exit(1)

    results = []
    logging.info(f"Start training from epoch {last_epoch + 1}.")
    for epoch in range(last_epoch + 1, args.num_epochs):
        scheduler.step()
        train(train_loader, net, criterion, optimizer,
              device=DEVICE, debug_steps=args.debug_steps, epoch=epoch)

        if epoch % args.validation_epochs == 0 or epoch == args.num_epochs - 1:
            val_loss, val_regression_loss, val_classification_loss = test(val_loader, net, criterion, DEVICE)
            logging.info(
                f"Epoch: {epoch}, " +
                f"Validation Loss: {val_loss:.4f}, " +
                f"Validation Regression Loss {val_regression_loss:.4f}, " +
                f"Validation Classification Loss: {val_classification_loss:.4f}"
            )
            model_path = f"{args.checkpoint_folder}/{args.net}-Epoch-{epoch}-Loss-{val_loss}.pth"
            net.save(model_path)
            logging.info(f"Saved model {model_path}")
            results.append((val_loss, val_regression_loss, val_classification_loss))
    return results


def target():
    torch.manual_seed(0)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='%(levelname)s - %(message)s')
    image_size = 32
    specs = [
        SSDSpec(8, 4, SSDBoxSizes(6, 12), [2]),
        SSDSpec(4, 8, SSDBoxSizes(12, 22), [2]),
    ]
    config = argparse.Namespace(priors=generate_ssd_priors(specs, image_size), center_variance=0.1,
                                size_variance=0.2, image_size=image_size)
    target_transform = MatchPrior(config.priors, config.center_variance, config.size_variance, 0.5)
    num_classes = 4
    net = TinySSD(num_classes)
    initial_state = copy.deepcopy(net.state_dict())

    def batches(n, bs, max_objects):
        out = []
        for _ in range(n):
            locs, labs = [], []
            for _ in range(bs):
                k = int(torch.randint(1, max_objects + 1, ()))
                xy = torch.rand(k, 2) * 0.6
                wh = torch.rand(k, 2) * 0.3 + 0.1
                gt = torch.cat([xy, xy + wh], 1)
                loc, lab = target_transform(gt, torch.randint(1, num_classes, (k,)))
                locs.append(loc)
                labs.append(lab)
            out.append((torch.randn(bs, 3, image_size, image_size), torch.stack(locs), torch.stack(labs)))
        return out

    args1 = argparse.Namespace(lr=0.01, momentum=0.9, weight_decay=5e-4, scheduler='multi-step', milestones="1,2",
                               t_max=120, num_epochs=2, validation_epochs=1, debug_steps=2,
                               checkpoint_folder='models', net='tiny-ssd')
    args2 = argparse.Namespace(lr=0.003, momentum=0.9, weight_decay=5e-4, scheduler='cosine', milestones="80,100",
                               t_max=4, num_epochs=2, validation_epochs=5, debug_steps=100,
                               checkpoint_folder='models', net='tiny-ssd')
    return [
        (run, (args1, net, config, batches(3, 4, 3), batches(1, 4, 2), initial_state), {}),
        (run, (args2, net, config, batches(2, 3, 2), batches(2, 3, 3), initial_state), {}),
    ]


EXPECT = ("rewrite: `MultiboxLoss.forward` selects with boolean masks (`confidence[mask, :]`, `labels[mask]`, "
          "`predicted_locations[pos_mask, :]`), whose data-dependent sizes stop the graph; the sums can be written "
          "as masked reductions (`(F.cross_entropy(..., reduction='none') * mask).sum()`, the smooth-L1 times "
          "`pos_mask`, `num_pos` as `pos_mask.sum()`) with the same values; the driver's `.item()` sums, logging "
          "and optimizer steps stay eager glue")
