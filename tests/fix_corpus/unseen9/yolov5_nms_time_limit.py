"""YOLOv5 inference post-processing (ultralytics/yolov5 utils/general.py: `non_max_suppression`, `xywh2xyxy`, `LOGGER`;
utils/metrics.py: `box_iou`; the `pred = model(im)` / `pred = non_max_suppression(pred, conf_thres, iou_thres,
classes, agnostic_nms, max_det=max_det)` lines of detect.py's `run`). It asserts the thresholds, starts a wall-clock
timer `t = time.time()`, builds `output = [torch.zeros((0, 6 + nm))] * bs`, and per image: boolean-mask selection
`x = x[xc[xi]]`, `if not x.shape[0]: continue`, class confidences, either the multi-label
`(x[:, 5:mi] > conf_thres).nonzero(as_tuple=False).T` or the best-class filter `[conf.view(-1) > conf_thres]`, a
class filter against `torch.tensor(classes)`, `if not n: continue`, an argsort crop to `max_nms`, class-offset boxes,
`torchvision.ops.nms`, `i[:max_det]`, and a time-limit check that logs `LOGGER.warning(...)` and `break`s.
Adaptations: torchvision is not installed, so `torchvision.ops.nms` is a stand-in (a namespace of that name holding a
greedy pure-torch NMS over the IoU matrix; like the real op its output size depends on the data); `box_iou` (used
only by the never-taken merge branch) and `xywh2xyxy` are copied; the MPS branch is kept (never taken on CPU); the
`LOGGER` is a plain `logging.getLogger("yolov5")` without the repository's logging configuration. The detection
model is a small convolutional stand-in producing YOLO-format rows `(cx, cy, w, h, obj, cls...)` for 3 classes on
a 4x4 grid of a 32x32 image (sigmoid scores, pixel boxes; its last layer is scaled and given an objectness
prior in the factory so that some rows pass the thresholds). No state is mutated (`torch.no_grad()`, eval mode). The
first call uses the defaults (`conf_thres=0.25`); the second `multi_label=True`, `classes=[0, 2]`, `agnostic=True`,
`max_det=5` and `conf_thres=0.3`."""
import logging
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn

LOGGER = logging.getLogger("yolov5")


def _nms_standin(boxes, scores, iou_threshold):
    """Adaptation: stand-in for torchvision.ops.nms (greedy, descending scores)."""
    order = scores.argsort(descending=True)
    iou = box_iou(boxes[order], boxes[order])
    n = order.shape[0]
    keep = torch.ones(n, dtype=torch.bool)
    for k in range(n):
        suppressed = (iou[:k, k] > iou_threshold) & keep[:k]
        keep[k] = ~suppressed.any()
    return order[keep]  # BREAK


torchvision = SimpleNamespace(ops=SimpleNamespace(nms=_nms_standin))


def box_iou(box1, box2, eps=1e-7):
    # https://github.com/pytorch/vision/blob/master/torchvision/ops/boxes.py
    """
    Return intersection-over-union (Jaccard index) of boxes.

    Both sets of boxes are expected to be in (x1, y1, x2, y2) format.
    """
    # inter(N,M) = (rb(N,M,2) - lt(N,M,2)).clamp(0).prod(2)
    (a1, a2), (b1, b2) = box1.unsqueeze(1).chunk(2, 2), box2.unsqueeze(0).chunk(2, 2)
    inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(0).prod(2)

    # IoU = inter / (area1 + area2 - inter)
    return inter / ((a2 - a1).prod(2) + (b2 - b1).prod(2) - inter + eps)


def xywh2xyxy(x):
    """Convert nx4 boxes from [x, y, w, h] to [x1, y1, x2, y2] where xy1=top-left, xy2=bottom-right."""
    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2  # top left x
    y[..., 1] = x[..., 1] - x[..., 3] / 2  # top left y
    y[..., 2] = x[..., 0] + x[..., 2] / 2  # bottom right x
    y[..., 3] = x[..., 1] + x[..., 3] / 2  # bottom right y
    return y


def non_max_suppression(
    prediction,
    conf_thres=0.25,
    iou_thres=0.45,
    classes=None,
    agnostic=False,
    multi_label=False,
    labels=(),
    max_det=300,
    nm=0,  # number of masks
):
    """Non-Maximum Suppression (NMS) on inference results to reject overlapping detections.

    Returns:
        list of detections, on (n,6) tensor per image [xyxy, conf, cls]
    """
    # Checks
    assert 0 <= conf_thres <= 1, f"Invalid Confidence threshold {conf_thres}, valid values are between 0.0 and 1.0"
    assert 0 <= iou_thres <= 1, f"Invalid IoU {iou_thres}, valid values are between 0.0 and 1.0"
    if isinstance(prediction, (list, tuple)):  # YOLOv5 model in validation model, output = (inference_out, loss_out)
        prediction = prediction[0]  # select only inference output

    device = prediction.device
    mps = "mps" in device.type  # Apple MPS
    if mps:  # MPS not fully supported yet, convert tensors to CPU before NMS
        prediction = prediction.cpu()
    bs = prediction.shape[0]  # batch size
    nc = prediction.shape[2] - nm - 5  # number of classes
    xc = prediction[..., 4] > conf_thres  # candidates

    # Settings
    # min_wh = 2  # (pixels) minimum box width and height
    max_wh = 7680  # (pixels) maximum box width and height
    max_nms = 30000  # maximum number of boxes into torchvision.ops.nms()
    time_limit = 0.5 + 0.05 * bs  # seconds to quit after
    redundant = True  # require redundant detections
    multi_label &= nc > 1  # multiple labels per box (adds 0.5ms/img)
    merge = False  # use merge-NMS

    t = time.time()  # BREAK
    mi = 5 + nc  # mask start index
    output = [torch.zeros((0, 6 + nm), device=prediction.device)] * bs
    for xi, x in enumerate(prediction):  # image index, image inference
        # Apply constraints
        # x[((x[..., 2:4] < min_wh) | (x[..., 2:4] > max_wh)).any(1), 4] = 0  # width-height
        x = x[xc[xi]]  # confidence  # BREAK

        # Cat apriori labels if autolabelling
        if labels and len(labels[xi]):
            lb = labels[xi]
            v = torch.zeros((len(lb), nc + nm + 5), device=x.device)
            v[:, :4] = lb[:, 1:5]  # box
            v[:, 4] = 1.0  # conf
            v[range(len(lb)), lb[:, 0].long() + 5] = 1.0  # cls
            x = torch.cat((x, v), 0)

        # If none remain process next image
        if not x.shape[0]:
            continue

        # Compute conf
        x[:, 5:] *= x[:, 4:5]  # conf = obj_conf * cls_conf

        # Box/Mask
        box = xywh2xyxy(x[:, :4])  # center_x, center_y, width, height) to (x1, y1, x2, y2)
        mask = x[:, mi:]  # zero columns if no masks

        # Detections matrix nx6 (xyxy, conf, cls)
        if multi_label:
            i, j = (x[:, 5:mi] > conf_thres).nonzero(as_tuple=False).T
            x = torch.cat((box[i], x[i, 5 + j, None], j[:, None].float(), mask[i]), 1)
        else:  # best class only
            conf, j = x[:, 5:mi].max(1, keepdim=True)
            x = torch.cat((box, conf, j.float(), mask), 1)[conf.view(-1) > conf_thres]

        # Filter by class
        if classes is not None:
            x = x[(x[:, 5:6] == torch.tensor(classes, device=x.device)).any(1)]

        # Apply finite constraint
        # if not torch.isfinite(x).all():
        #     x = x[torch.isfinite(x).all(1)]

        # Check shape
        n = x.shape[0]  # number of boxes
        if not n:  # no boxes
            continue
        x = x[x[:, 4].argsort(descending=True)[:max_nms]]  # sort by confidence and remove excess boxes

        # Batched NMS
        c = x[:, 5:6] * (0 if agnostic else max_wh)  # classes
        boxes, scores = x[:, :4] + c, x[:, 4]  # boxes (offset by class), scores
        i = torchvision.ops.nms(boxes, scores, iou_thres)  # NMS
        i = i[:max_det]  # limit detections
        if merge and (1 < n < 3e3):  # Merge NMS (boxes merged using weighted mean)
            # update boxes as boxes(i,4) = weights(i,n) * boxes(n,4)
            iou = box_iou(boxes[i], boxes) > iou_thres  # iou matrix
            weights = iou * scores[None]  # box weights
            x[i, :4] = torch.mm(weights, x[:, :4]).float() / weights.sum(1, keepdim=True)  # merged boxes
            if redundant:
                i = i[iou.sum(1) > 1]  # require redundancy

        output[xi] = x[i]
        if mps:
            output[xi] = output[xi].to(device)
        if (time.time() - t) > time_limit:
            LOGGER.warning(f"WARNING ⚠️ NMS time limit {time_limit:.3f}s exceeded")
            break  # time limit exceeded

    return output


class DetectStandIn(nn.Module):
    """Adaptation: stand-in for the YOLOv5 DetectMultiBackend (YOLO-format rows per grid cell)."""

    def __init__(self, nc=3, stride=8):
        super().__init__()
        self.stride = stride
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.SiLU(),
                                      nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.SiLU(),
                                      nn.Conv2d(8, 5 + nc, 3, stride=2, padding=1))

    def forward(self, im):
        p = self.backbone(im)  # (bs, 5+nc, ny, nx)
        bs, no, ny, nx = p.shape
        p = p.permute(0, 2, 3, 1).reshape(bs, ny * nx, no)
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, ny * nx, 2).float()
        xy = (p[..., :2].sigmoid() * 2 - 0.5 + grid) * self.stride
        wh = (p[..., 2:4].sigmoid() * 2) ** 2 * self.stride * 4
        return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1)


def detect(model, im, conf_thres=0.25, iou_thres=0.45, classes=None, agnostic_nms=False, max_det=1000,
           multi_label=False):
    with torch.no_grad():
        pred = model(im)
    pred = non_max_suppression(pred, conf_thres, iou_thres, classes, agnostic_nms, multi_label=multi_label,
                               max_det=max_det)
    return pred


def target():
    torch.manual_seed(0)
    model = DetectStandIn(nc=3).eval()
    with torch.no_grad():
        model.backbone[-1].bias[4] += 1.5  # objectness prior, so that some rows pass the thresholds
        model.backbone[-1].weight.mul_(4.0)
    gen = torch.Generator().manual_seed(0)
    im = torch.rand(2, 3, 32, 32, generator=gen)
    return [
        (detect, (model, im), {}),
        (detect, (model, im), {"conf_thres": 0.3, "classes": [0, 2], "agnostic_nms": True, "max_det": 5,
                               "multi_label": True}),
    ]


EXPECT = ("caller: NMS post-processing is data-dependent by nature (boolean-mask selections, `nonzero`, "
          "`if not n: continue`, an NMS op whose output size depends on the data, and a wall-clock "
          "`time.time()` limit with `LOGGER.warning` and `break`); compile the model and run "
          "`non_max_suppression` eagerly in the caller")
