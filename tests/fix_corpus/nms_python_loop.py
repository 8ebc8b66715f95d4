"""Python NMS loop (adapted from pre-torchvision detection code)."""
import torch


def box_iou(a, b):
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda x: (x[:, 2:] - x[:, :2]).prod(-1)
    return inter / (area(a)[:, None] + area(b)[None, :] - inter)


def nms(boxes, scores, thr):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel() > 0:
        i = order[0]
        keep.append(i)
        iou = box_iou(boxes[i][None], boxes[order[1:]])[0]  # BREAK
        order = order[1:][iou <= thr]
    return torch.stack(keep)


def detect(boxes, scores):
    keep = nms(boxes, scores, 0.5)
    return boxes[keep] * 2


def target():
    torch.manual_seed(0)
    xy = torch.rand(8, 2) * 10
    boxes = torch.cat([xy, xy + 3], 1)
    return [(detect, (boxes, torch.rand(8)), {})]


EXPECT = 'caller: the data-dependent NMS loop runs eagerly between compiled parts; the factory compiles the module of the parts (entry-split)'
