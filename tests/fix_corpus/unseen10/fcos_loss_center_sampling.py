"""FCOS detection loss (tianzhi0549/FCOS `fcos_core/modeling/rpn/fcos/loss.py`: `get_num_gpus`, `reduce_sum`,
`FCOSLossComputation.get_sample_region/prepare_targets/compute_targets_for_locations/compute_centerness_targets/
__call__`; `fcos_core/layers/iou_loss.py`: `IOULoss`; `fcos_core/layers/sigmoid_focal_loss.py`:
`sigmoid_focal_loss_cpu`, `SigmoidFocalLoss`; `fcos_core/modeling/rpn/fcos/fcos.py`: `compute_locations_per_level`).
Target assignment runs per image with `assert targets_per_im.mode == "xyxy"`, center sampling with an early return
`if center_x[..., 0].sum() == 0:`, boolean-mask writes (`locations_to_gt_area[is_in_boxes == 0] = INF`,
`labels_per_im[locations_to_min_area == INF] = 0`) and `torch.split` by points per level; the loss selects positives
with `pos_inds = torch.nonzero(labels_flatten > 0).squeeze(1)`, divides by `max(total_num_pos / float(num_gpus),
1.0)` with `total_num_pos = pos_inds.numel()`, branches on `if pos_inds.numel() > 0:`, normalises by
`sum_centerness_targets.item()`, and `IOULoss` branches on `if weight is not None and weight.sum() > 0:`.
Adaptations: `BoxList` is replaced by a minimal stand-in (`bbox`, `mode`, `get_field`, `area`); the config by a
`SimpleNamespace` with the `MODEL.FCOS` keys read here; the CPU focal loss indexes `gamma[0]`/`alpha[0]`, so the
config gives them as one-element tuples (upstream passes floats, which only the CUDA path accepts); the FCOS head
(towers, `Scale`, `exp` of the box branch) is shrunk to one conv per branch over five tiny feature maps
(strides 8..128, a 128x128 image), and `FCOSModule._forward_train` is written as a plain function. `WORLD_SIZE` is
unset, so `get_num_gpus()` is 1 and `reduce_sum` (which needs `torch.distributed`) is not called. The two calls use
different images' boxes (the second has a small and a large object per image)."""
import os
from types import SimpleNamespace

import torch
from torch.nn import functional as F
from torch import nn


INF = 100000000


def get_num_gpus():
    return int(os.environ["WORLD_SIZE"]) if "WORLD_SIZE" in os.environ else 1


def reduce_sum(tensor):
    import torch.distributed as dist
    tensor = tensor.clone()
    dist.all_reduce(tensor, op=dist.reduce_op.SUM)
    return tensor


class BoxList(object):
    """Adaptation: minimal stand-in for fcos_core.structures.bounding_box.BoxList."""

    def __init__(self, bbox, image_size, mode="xyxy"):
        self.bbox = bbox
        self.size = image_size
        self.mode = mode
        self.extra_fields = {}

    def add_field(self, field, field_data):
        self.extra_fields[field] = field_data

    def get_field(self, field):
        return self.extra_fields[field]

    def area(self):
        box = self.bbox
        TO_REMOVE = 1
        return (box[:, 2] - box[:, 0] + TO_REMOVE) * (box[:, 3] - box[:, 1] + TO_REMOVE)


class IOULoss(nn.Module):
    def __init__(self, loss_type="iou"):
        super(IOULoss, self).__init__()
        self.loss_type = loss_type

    def forward(self, pred, target, weight=None):
        pred_left = pred[:, 0]
        pred_top = pred[:, 1]
        pred_right = pred[:, 2]
        pred_bottom = pred[:, 3]

        target_left = target[:, 0]
        target_top = target[:, 1]
        target_right = target[:, 2]
        target_bottom = target[:, 3]

        target_area = (target_left + target_right) * \
                      (target_top + target_bottom)
        pred_area = (pred_left + pred_right) * \
                    (pred_top + pred_bottom)

        w_intersect = torch.min(pred_left, target_left) + torch.min(pred_right, target_right)
        g_w_intersect = torch.max(pred_left, target_left) + torch.max(
            pred_right, target_right)
        h_intersect = torch.min(pred_bottom, target_bottom) + torch.min(pred_top, target_top)
        g_h_intersect = torch.max(pred_bottom, target_bottom) + torch.max(pred_top, target_top)
        ac_uion = g_w_intersect * g_h_intersect + 1e-7
        area_intersect = w_intersect * h_intersect
        area_union = target_area + pred_area - area_intersect
        ious = (area_intersect + 1.0) / (area_union + 1.0)
        gious = ious - (ac_uion - area_union) / ac_uion
        if self.loss_type == 'iou':
            losses = -torch.log(ious)
        elif self.loss_type == 'linear_iou':
            losses = 1 - ious
        elif self.loss_type == 'giou':
            losses = 1 - gious
        else:
            raise NotImplementedError

        if weight is not None and weight.sum() > 0:  # BREAK
            return (losses * weight).sum() / weight.sum()
        else:
            assert losses.numel() != 0
            return losses.mean()


def sigmoid_focal_loss_cpu(logits, targets, gamma, alpha):
    num_classes = logits.shape[1]
    gamma = gamma[0]
    alpha = alpha[0]
    dtype = targets.dtype
    device = targets.device
    class_range = torch.arange(1, num_classes+1, dtype=dtype, device=device).unsqueeze(0)

    t = targets.unsqueeze(1)
    p = torch.sigmoid(logits)
    term1 = (1 - p) ** gamma * torch.log(p)
    term2 = p ** gamma * torch.log(1 - p)
    return -(t == class_range).float() * term1 * alpha - ((t != class_range) * (t >= 0)).float() * term2 * (1 - alpha)


class SigmoidFocalLoss(nn.Module):
    def __init__(self, gamma, alpha):
        super(SigmoidFocalLoss, self).__init__()
        self.gamma = gamma
        self.alpha = alpha

    def forward(self, logits, targets):
        device = logits.device
        if logits.is_cuda:
            raise NotImplementedError("adaptation: the CUDA extension is not built here")
        else:
            loss_func = sigmoid_focal_loss_cpu

        loss = loss_func(logits, targets, self.gamma, self.alpha)
        return loss.sum()


class FCOSLossComputation(object):
    """
    This class computes the FCOS losses.
    """

    def __init__(self, cfg):
        self.cls_loss_func = SigmoidFocalLoss(
            cfg.MODEL.FCOS.LOSS_GAMMA,
            cfg.MODEL.FCOS.LOSS_ALPHA
        )
        self.fpn_strides = cfg.MODEL.FCOS.FPN_STRIDES
        self.center_sampling_radius = cfg.MODEL.FCOS.CENTER_SAMPLING_RADIUS
        self.iou_loss_type = cfg.MODEL.FCOS.IOU_LOSS_TYPE
        self.norm_reg_targets = cfg.MODEL.FCOS.NORM_REG_TARGETS

        # we make use of IOU Loss for bounding boxes regression,
        # but we found that L1 in log scale can yield a similar performance
        self.box_reg_loss_func = IOULoss(self.iou_loss_type)
        self.centerness_loss_func = nn.BCEWithLogitsLoss(reduction="sum")

    def get_sample_region(self, gt, strides, num_points_per, gt_xs, gt_ys, radius=1.0):
        num_gts = gt.shape[0]
        K = len(gt_xs)
        gt = gt[None].expand(K, num_gts, 4)
        center_x = (gt[..., 0] + gt[..., 2]) / 2
        center_y = (gt[..., 1] + gt[..., 3]) / 2
        center_gt = gt.new_zeros(gt.shape)
        # no gt
        if center_x[..., 0].sum() == 0:  # BREAK
            return gt_xs.new_zeros(gt_xs.shape, dtype=torch.uint8)
        beg = 0
        for level, n_p in enumerate(num_points_per):
            end = beg + n_p
            stride = strides[level] * radius
            xmin = center_x[beg:end] - stride
            ymin = center_y[beg:end] - stride
            xmax = center_x[beg:end] + stride
            ymax = center_y[beg:end] + stride
            # limit sample region in gt
            center_gt[beg:end, :, 0] = torch.where(
                xmin > gt[beg:end, :, 0], xmin, gt[beg:end, :, 0]
            )
            center_gt[beg:end, :, 1] = torch.where(
                ymin > gt[beg:end, :, 1], ymin, gt[beg:end, :, 1]
            )
            center_gt[beg:end, :, 2] = torch.where(
                xmax > gt[beg:end, :, 2],
                gt[beg:end, :, 2], xmax
            )
            center_gt[beg:end, :, 3] = torch.where(
                ymax > gt[beg:end, :, 3],
                gt[beg:end, :, 3], ymax
            )
            beg = end
        left = gt_xs[:, None] - center_gt[..., 0]
        right = center_gt[..., 2] - gt_xs[:, None]
        top = gt_ys[:, None] - center_gt[..., 1]
        bottom = center_gt[..., 3] - gt_ys[:, None]
        center_bbox = torch.stack((left, top, right, bottom), -1)
        inside_gt_bbox_mask = center_bbox.min(-1)[0] > 0
        return inside_gt_bbox_mask

    def prepare_targets(self, points, targets):
        object_sizes_of_interest = [
            [-1, 64],
            [64, 128],
            [128, 256],
            [256, 512],
            [512, INF],
        ]
        expanded_object_sizes_of_interest = []
        for l, points_per_level in enumerate(points):
            object_sizes_of_interest_per_level = \
                points_per_level.new_tensor(object_sizes_of_interest[l])
            expanded_object_sizes_of_interest.append(
                object_sizes_of_interest_per_level[None].expand(len(points_per_level), -1)
            )

        expanded_object_sizes_of_interest = torch.cat(expanded_object_sizes_of_interest, dim=0)
        num_points_per_level = [len(points_per_level) for points_per_level in points]
        self.num_points_per_level = num_points_per_level
        points_all_level = torch.cat(points, dim=0)
        labels, reg_targets = self.compute_targets_for_locations(
            points_all_level, targets, expanded_object_sizes_of_interest
        )

        for i in range(len(labels)):
            labels[i] = torch.split(labels[i], num_points_per_level, dim=0)
            reg_targets[i] = torch.split(reg_targets[i], num_points_per_level, dim=0)

        labels_level_first = []
        reg_targets_level_first = []
        for level in range(len(points)):
            labels_level_first.append(
                torch.cat([labels_per_im[level] for labels_per_im in labels], dim=0)
            )

            reg_targets_per_level = torch.cat([
                reg_targets_per_im[level]
                for reg_targets_per_im in reg_targets
            ], dim=0)

            if self.norm_reg_targets:
                reg_targets_per_level = reg_targets_per_level / self.fpn_strides[level]
            reg_targets_level_first.append(reg_targets_per_level)

        return labels_level_first, reg_targets_level_first

    def compute_targets_for_locations(self, locations, targets, object_sizes_of_interest):
        labels = []
        reg_targets = []
        xs, ys = locations[:, 0], locations[:, 1]

        for im_i in range(len(targets)):
            targets_per_im = targets[im_i]
            assert targets_per_im.mode == "xyxy"
            bboxes = targets_per_im.bbox
            labels_per_im = targets_per_im.get_field("labels")
            area = targets_per_im.area()

            l = xs[:, None] - bboxes[:, 0][None]
            t = ys[:, None] - bboxes[:, 1][None]
            r = bboxes[:, 2][None] - xs[:, None]
            b = bboxes[:, 3][None] - ys[:, None]
            reg_targets_per_im = torch.stack([l, t, r, b], dim=2)

            if self.center_sampling_radius > 0:
                is_in_boxes = self.get_sample_region(
                    bboxes,
                    self.fpn_strides,
                    self.num_points_per_level,
                    xs, ys,
                    radius=self.center_sampling_radius
                )
            else:
                # no center sampling, it will use all the locations within a ground-truth box
                is_in_boxes = reg_targets_per_im.min(dim=2)[0] > 0

            max_reg_targets_per_im = reg_targets_per_im.max(dim=2)[0]
            # limit the regression range for each location
            is_cared_in_the_level = \
                (max_reg_targets_per_im >= object_sizes_of_interest[:, [0]]) & \
                (max_reg_targets_per_im <= object_sizes_of_interest[:, [1]])

            locations_to_gt_area = area[None].repeat(len(locations), 1)
            locations_to_gt_area[is_in_boxes == 0] = INF
            locations_to_gt_area[is_cared_in_the_level == 0] = INF

            # if there are still more than one objects for a location,
            # we choose the one with minimal area
            locations_to_min_area, locations_to_gt_inds = locations_to_gt_area.min(dim=1)

            reg_targets_per_im = reg_targets_per_im[range(len(locations)), locations_to_gt_inds]
            labels_per_im = labels_per_im[locations_to_gt_inds]
            labels_per_im[locations_to_min_area == INF] = 0

            labels.append(labels_per_im)
            reg_targets.append(reg_targets_per_im)

        return labels, reg_targets

    def compute_centerness_targets(self, reg_targets):
        left_right = reg_targets[:, [0, 2]]
        top_bottom = reg_targets[:, [1, 3]]
        centerness = (left_right.min(dim=-1)[0] / left_right.max(dim=-1)[0]) * \
                      (top_bottom.min(dim=-1)[0] / top_bottom.max(dim=-1)[0])
        return torch.sqrt(centerness)

    def __call__(self, locations, box_cls, box_regression, centerness, targets):
        N = box_cls[0].size(0)
        num_classes = box_cls[0].size(1)
        labels, reg_targets = self.prepare_targets(locations, targets)

        box_cls_flatten = []
        box_regression_flatten = []
        centerness_flatten = []
        labels_flatten = []
        reg_targets_flatten = []
        for l in range(len(labels)):
            box_cls_flatten.append(box_cls[l].permute(0, 2, 3, 1).reshape(-1, num_classes))
            box_regression_flatten.append(box_regression[l].permute(0, 2, 3, 1).reshape(-1, 4))
            labels_flatten.append(labels[l].reshape(-1))
            reg_targets_flatten.append(reg_targets[l].reshape(-1, 4))
            centerness_flatten.append(centerness[l].reshape(-1))

        box_cls_flatten = torch.cat(box_cls_flatten, dim=0)
        box_regression_flatten = torch.cat(box_regression_flatten, dim=0)
        centerness_flatten = torch.cat(centerness_flatten, dim=0)
        labels_flatten = torch.cat(labels_flatten, dim=0)
        reg_targets_flatten = torch.cat(reg_targets_flatten, dim=0)

        pos_inds = torch.nonzero(labels_flatten > 0).squeeze(1)  # BREAK

        box_regression_flatten = box_regression_flatten[pos_inds]
        reg_targets_flatten = reg_targets_flatten[pos_inds]
        centerness_flatten = centerness_flatten[pos_inds]

        num_pos_per_gpu = pos_inds.numel()
        num_gpus = get_num_gpus()
        if num_gpus > 1:
            total_num_pos = reduce_sum(pos_inds.new_tensor([num_pos_per_gpu])).item()
        else:
            total_num_pos = num_pos_per_gpu

        cls_loss = self.cls_loss_func(
            box_cls_flatten,
            labels_flatten.int()
        ) / max(total_num_pos / float(num_gpus), 1.0)

        if pos_inds.numel() > 0:
            centerness_targets = self.compute_centerness_targets(reg_targets_flatten)

            sum_centerness_targets = centerness_targets.sum()
            if num_gpus > 1:
                sum_centerness_targets = reduce_sum(sum_centerness_targets).item()
            else:
                sum_centerness_targets = sum_centerness_targets.item()  # BREAK

            reg_loss = self.box_reg_loss_func(
                box_regression_flatten,
                reg_targets_flatten,
                centerness_targets
            ) / (sum_centerness_targets / float(num_gpus))
            centerness_loss = self.centerness_loss_func(
                centerness_flatten,
                centerness_targets
            ) / max(total_num_pos / float(num_gpus), 1.0)
        else:
            reg_loss = box_regression_flatten.sum()
            reduce_sum(centerness_flatten.new_tensor([0.0]))
            centerness_loss = centerness_flatten.sum()

        return cls_loss, reg_loss, centerness_loss


class TinyFCOSHead(nn.Module):
    """Adaptation: stand-in for FCOSHead (one conv per branch, shared across levels, `Scale` and `exp`)."""

    def __init__(self, in_channels=8, num_classes=4, num_levels=5):
        super().__init__()
        self.cls_logits = nn.Conv2d(in_channels, num_classes, 3, padding=1)
        self.bbox_pred = nn.Conv2d(in_channels, 4, 3, padding=1)
        self.centerness = nn.Conv2d(in_channels, 1, 3, padding=1)
        self.scales = nn.ParameterList([nn.Parameter(torch.tensor(1.0)) for _ in range(num_levels)])

    def forward(self, x):
        logits, bbox_reg, centerness = [], [], []
        for l, feature in enumerate(x):
            logits.append(self.cls_logits(feature))
            centerness.append(self.centerness(feature))
            bbox_reg.append(torch.exp(self.scales[l] * self.bbox_pred(feature)))
        return logits, bbox_reg, centerness


def compute_locations_per_level(h, w, stride, device):
    shifts_x = torch.arange(
        0, w * stride, step=stride,
        dtype=torch.float32, device=device
    )
    shifts_y = torch.arange(
        0, h * stride, step=stride,
        dtype=torch.float32, device=device
    )
    shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
    shift_x = shift_x.reshape(-1)
    shift_y = shift_y.reshape(-1)
    locations = torch.stack((shift_x, shift_y), dim=1) + stride // 2
    return locations


def forward_train(head, loss_evaluator, features, targets, fpn_strides):
    box_cls, box_regression, centerness = head(features)
    locations = []
    for level, feature in enumerate(features):
        h, w = feature.size()[-2:]
        locations.append(compute_locations_per_level(h, w, fpn_strides[level], feature.device))
    loss_box_cls, loss_box_reg, loss_centerness = loss_evaluator(
        locations, box_cls, box_regression, centerness, targets
    )
    losses = {
        "loss_cls": loss_box_cls,
        "loss_reg": loss_box_reg,
        "loss_centerness": loss_centerness
    }
    return losses


def _targets(boxes_per_image, labels_per_image):
    out = []
    for boxes, labels in zip(boxes_per_image, labels_per_image):
        t = BoxList(torch.tensor(boxes, dtype=torch.float32), (128, 128), mode="xyxy")
        t.add_field("labels", torch.tensor(labels, dtype=torch.int64))
        out.append(t)
    return out


def target():
    torch.manual_seed(0)
    strides = [8, 16, 32, 64, 128]
    cfg = SimpleNamespace(MODEL=SimpleNamespace(FCOS=SimpleNamespace(
        LOSS_GAMMA=(2.0,), LOSS_ALPHA=(0.25,), FPN_STRIDES=strides, CENTER_SAMPLING_RADIUS=1.5,
        IOU_LOSS_TYPE="giou", NORM_REG_TARGETS=True)))
    head = TinyFCOSHead(in_channels=8, num_classes=4)
    loss_evaluator = FCOSLossComputation(cfg)
    features1 = [torch.randn(2, 8, 128 // s, 128 // s) for s in strides]
    features2 = [torch.randn(2, 8, 128 // s, 128 // s) for s in strides]
    targets1 = _targets([[[10., 12., 50., 60.], [70., 20., 110., 90.]], [[30., 30., 90., 100.]]], [[1, 3], [2]])
    targets2 = _targets([[[5., 5., 25., 30.], [20., 10., 120., 125.]], [[60., 64., 80., 90.], [0., 8., 100., 96.]]],
                        [[4, 2], [1, 1]])
    return [
        (forward_train, (head, loss_evaluator, features1, targets1, strides), {}),
        (forward_train, (head, loss_evaluator, features2, targets2, strides), {}),
    ]


EXPECT = ("rewrite: the `.item()` on `sum_centerness_targets` and `pos_inds.numel()` (a `nonzero` count) in "
          "Python arithmetic can stay tensors (`clamp(min=1.0)` for `max(..., 1.0)`), and the `if pos_inds.numel() > 0` "
          "/ `weight.sum() > 0` / `center_x[..., 0].sum() == 0` branches can become `torch.where` over masked sums; "
          "the boolean selections `[pos_inds]` become weights")
