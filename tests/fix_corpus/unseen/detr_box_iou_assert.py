"""generalized_box_iou asserting boxes are well formed, inside a matcher cost (DETR util/box_ops.py)."""
import torch


def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)], dim=-1)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter / union, union


def generalized_box_iou(boxes1, boxes2):
    # degenerate boxes gives inf / nan results, so do an early check
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()  # NO BREAK in torch 2.13
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()  # NO BREAK in torch 2.13
    iou, union = box_iou(boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


class MatcherCost(torch.nn.Module):
    def __init__(self, cost_class=1.0, cost_bbox=5.0, cost_giou=2.0):
        super().__init__()
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou

    def forward(self, pred_logits, pred_boxes, tgt_ids, tgt_bbox):
        out_prob = pred_logits.flatten(0, 1).softmax(-1)
        out_bbox = pred_boxes.flatten(0, 1)
        cost_class = -out_prob[:, tgt_ids]
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
        return self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou


def target():
    torch.manual_seed(0)
    return [(MatcherCost(), (torch.randn(2, 3, 5), torch.rand(2, 3, 4) * 0.5 + 0.25, torch.tensor([1, 4]),
                             torch.rand(2, 4) * 0.5 + 0.25), {})]


EXPECT = ("none: asserts on tensor data are traced as runtime asserts in torch 2.13 (expected control, no break); "
          "if it breaks, a rewrite to torch._assert_async keeps the check")
