"""DETRHead.loss_single: `num_total_pos = torch.clamp(reduce_mean(num_total_pos), min=1).item()` (and `max(cls_avg_factor, 1)` on a synced tensor) as loss avg_factors (mmdetection models/dense_heads/detr_head.py)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def reduce_mean(tensor):
    """"Obtain the mean of tensor on different GPUs."""
    if not (dist.is_available() and dist.is_initialized()):
        return tensor
    tensor = tensor.clone()
    dist.all_reduce(tensor.div_(dist.get_world_size()), op=dist.ReduceOp.SUM)
    return tensor


def reduce_loss(loss, reduction):
    if reduction == 'none':
        return loss
    elif reduction == 'mean':
        return loss.mean()
    elif reduction == 'sum':
        return loss.sum()


def weight_reduce_loss(loss, weight=None, reduction='mean', avg_factor=None):
    # if weight is specified, apply element-wise weight
    if weight is not None:
        loss = loss * weight

    # if avg_factor is not specified, just reduce the loss
    if avg_factor is None:
        loss = reduce_loss(loss, reduction)
    else:
        # if reduction is mean, then average the loss by avg_factor
        if reduction == 'mean':
            # Avoid causing ZeroDivisionError when avg_factor is 0.0,
            # i.e., all labels of an image belong to ignore index.
            eps = torch.finfo(torch.float32).eps
            loss = loss.sum() / (avg_factor + eps)
        # if reduction is 'none', then do nothing, otherwise raise an error
        elif reduction != 'none':
            raise ValueError('avg_factor can not be used with reduction="sum"')
    return loss


def bbox_cxcywh_to_xyxy(bbox):
    cx, cy, w, h = bbox.split((1, 1, 1, 1), dim=-1)
    bbox_new = [(cx - 0.5 * w), (cy - 0.5 * h), (cx + 0.5 * w), (cy + 0.5 * h)]
    return torch.cat(bbox_new, dim=-1)


def aligned_giou(bboxes1, bboxes2, eps=1e-6):
    area1 = (bboxes1[..., 2] - bboxes1[..., 0]) * (bboxes1[..., 3] - bboxes1[..., 1])
    area2 = (bboxes2[..., 2] - bboxes2[..., 0]) * (bboxes2[..., 3] - bboxes2[..., 1])
    lt = torch.max(bboxes1[..., :2], bboxes2[..., :2])
    rb = torch.min(bboxes1[..., 2:], bboxes2[..., 2:])
    wh = (rb - lt).clamp(min=0)
    overlap = wh[..., 0] * wh[..., 1]
    union = (area1 + area2 - overlap).clamp(min=eps)
    ious = overlap / union
    enclosed_lt = torch.min(bboxes1[..., :2], bboxes2[..., :2])
    enclosed_rb = torch.max(bboxes1[..., 2:], bboxes2[..., 2:])
    enclose_wh = (enclosed_rb - enclosed_lt).clamp(min=0)
    enclose_area = (enclose_wh[..., 0] * enclose_wh[..., 1]).clamp(min=eps)
    return ious - (enclose_area - union) / enclose_area


class CrossEntropyLoss(nn.Module):
    def __init__(self, bg_cls_weight=0.1, num_classes=3, loss_weight=1.0):
        super().__init__()
        self.loss_weight = loss_weight
        class_weight = torch.ones(num_classes + 1)
        class_weight[num_classes] = bg_cls_weight
        self.register_buffer('class_weight', class_weight)

    def forward(self, cls_score, label, weight=None, avg_factor=None):
        loss = F.cross_entropy(cls_score, label, weight=self.class_weight, reduction='none')
        if weight is not None:
            weight = weight.float()
        loss = weight_reduce_loss(loss, weight=weight, reduction='mean', avg_factor=avg_factor)
        return self.loss_weight * loss


class L1Loss(nn.Module):
    def __init__(self, loss_weight=5.0):
        super().__init__()
        self.loss_weight = loss_weight

    def forward(self, pred, target, weight=None, avg_factor=None):
        loss = torch.abs(pred - target)
        return self.loss_weight * weight_reduce_loss(loss, weight, 'mean', avg_factor)


class GIoULoss(nn.Module):
    def __init__(self, eps=1e-6, loss_weight=2.0):
        super().__init__()
        self.eps = eps
        self.loss_weight = loss_weight

    def forward(self, pred, target, weight=None, avg_factor=None):
        if weight is not None and weight.dim() > 1:
            assert weight.shape == pred.shape
            weight = weight.mean(-1)
        loss = 1 - aligned_giou(pred, target, eps=self.eps)
        return self.loss_weight * weight_reduce_loss(loss, weight, 'mean', avg_factor)


class DETRHeadLoss(nn.Module):
    def __init__(self, num_classes=3, embed_dims=8, bg_cls_weight=0.1, sync_cls_avg_factor=True):
        super().__init__()
        self.num_classes = num_classes
        self.cls_out_channels = num_classes + 1
        self.bg_cls_weight = bg_cls_weight
        self.sync_cls_avg_factor = sync_cls_avg_factor
        self.fc_cls = nn.Linear(embed_dims, self.cls_out_channels)
        self.fc_reg = nn.Linear(embed_dims, 4)
        self.loss_cls = CrossEntropyLoss(bg_cls_weight, num_classes)
        self.loss_bbox = L1Loss()
        self.loss_iou = GIoULoss()

    def forward(self, outs_dec, cls_reg_targets, img_metas):
        cls_scores = self.fc_cls(outs_dec)
        bbox_preds = self.fc_reg(outs_dec).sigmoid()
        return self.loss_single(cls_scores, bbox_preds, cls_reg_targets, img_metas)

    def loss_single(self, cls_scores, bbox_preds, cls_reg_targets, img_metas):
        # cls_reg_targets = self.get_targets(...) (Hungarian matching) is done by the caller here
        (labels_list, label_weights_list, bbox_targets_list, bbox_weights_list,
         num_total_pos, num_total_neg) = cls_reg_targets
        labels = torch.cat(labels_list, 0)
        label_weights = torch.cat(label_weights_list, 0)
        bbox_targets = torch.cat(bbox_targets_list, 0)
        bbox_weights = torch.cat(bbox_weights_list, 0)

        # classification loss
        cls_scores = cls_scores.reshape(-1, self.cls_out_channels)
        # construct weighted avg_factor to match with the official DETR repo
        cls_avg_factor = num_total_pos * 1.0 + \
            num_total_neg * self.bg_cls_weight
        if self.sync_cls_avg_factor:
            cls_avg_factor = reduce_mean(
                cls_scores.new_tensor([cls_avg_factor]))
        cls_avg_factor = max(cls_avg_factor, 1)

        loss_cls = self.loss_cls(
            cls_scores, labels, label_weights, avg_factor=cls_avg_factor)

        # Compute the average number of gt boxes across all gpus, for
        # normalization purposes
        num_total_pos = loss_cls.new_tensor([num_total_pos])
        num_total_pos = torch.clamp(reduce_mean(num_total_pos), min=1).item()  # BREAK

        # construct factors used for rescale bboxes
        factors = []
        for img_meta, bbox_pred in zip(img_metas, bbox_preds):
            img_h, img_w, _ = img_meta['img_shape']
            factor = bbox_pred.new_tensor([img_w, img_h, img_w,
                                           img_h]).unsqueeze(0).repeat(
                                               bbox_pred.size(0), 1)
            factors.append(factor)
        factors = torch.cat(factors, 0)

        # DETR regress the relative position of boxes (cxcywh) in the image,
        # thus the learning target is normalized by the image size. So here
        # we need to re-scale them for calculating IoU loss
        bbox_preds = bbox_preds.reshape(-1, 4)
        bboxes = bbox_cxcywh_to_xyxy(bbox_preds) * factors
        bboxes_gt = bbox_cxcywh_to_xyxy(bbox_targets) * factors

        # regression IoU loss, defaultly GIoU loss
        loss_iou = self.loss_iou(
            bboxes, bboxes_gt, bbox_weights, avg_factor=num_total_pos)

        # regression L1 loss
        loss_bbox = self.loss_bbox(
            bbox_preds, bbox_targets, bbox_weights, avg_factor=num_total_pos)
        return loss_cls, loss_bbox, loss_iou


def _targets(num_queries, pos_per_img, num_classes=3):
    labels_list, label_weights_list, bbox_targets_list, bbox_weights_list = [], [], [], []
    for num_pos in pos_per_img:
        labels = torch.full((num_queries,), num_classes, dtype=torch.long)
        labels[:num_pos] = torch.randint(0, num_classes, (num_pos,))
        bbox_targets = torch.zeros(num_queries, 4)
        bbox_targets[:num_pos] = torch.cat([torch.rand(num_pos, 2) * 0.5 + 0.25, torch.rand(num_pos, 2) * 0.3 + 0.1], 1)
        bbox_weights = torch.zeros(num_queries, 4)
        bbox_weights[:num_pos] = 1.0
        labels_list.append(labels)
        label_weights_list.append(torch.ones(num_queries))
        bbox_targets_list.append(bbox_targets)
        bbox_weights_list.append(bbox_weights)
    num_total_pos = sum(pos_per_img)
    num_total_neg = num_queries * len(pos_per_img) - num_total_pos
    return (labels_list, label_weights_list, bbox_targets_list, bbox_weights_list, num_total_pos, num_total_neg)


def target():
    torch.manual_seed(0)
    head = DETRHeadLoss()
    img_metas = [{'img_shape': (32, 48, 3)}, {'img_shape': (40, 40, 3)}]
    return [
        (head, (torch.randn(2, 5, 8), _targets(5, [2, 3]), img_metas), {}),
        (head, (torch.randn(2, 5, 8), _targets(5, [1, 4]), img_metas), {}),
    ]


EXPECT = ("rewrite: keep `num_total_pos` a tensor, `torch.clamp(reduce_mean(num_total_pos), min=1)` without "
          "`.item()` (weight_reduce_loss divides by avg_factor + eps either way), equal losses; "
          "`max(cls_avg_factor, 1)` on the synced tensor should trace (dynamo turns max(tensor, number) into a "
          "clamp), and if it breaks the same rewrite applies: `cls_avg_factor.clamp(min=1)`")
