"""YOLOv2 region decoding and NMS from lywen52/pytorch-yolo2 (`utils.py`: `sigmoid`, `bbox_iou`, `nms`,
`get_region_boxes`, stored revision 029062e, one of 17 stored revisions of the file, the only one read; the
repository is a fork of marvis/pytorch-yolo2, which is not in the store). `get_region_boxes` walks the output map in
three nested Python loops (rows, columns, anchors), reads single elements with chained indexing
(`output[0][start][cy][cx]`), applies a `math.exp`-based `sigmoid` and `math.exp` to them, and appends Python lists
of box coordinates whose confidence passes `det_conf > conf_thresh`. `nms` fills a `torch.zeros` tensor of
confidences element by element, sorts it, indexes the Python box list with 0-d tensors from the sort
(`boxes[sortIds[i]]`), and suppresses overlapping boxes by writing `box_j[4] = 0` after a Python `bbox_iou`.

Adaptations: `num_anchors = len(anchors)/2` is written `len(anchors)//2` (in Python 3 `/` gives a float and
`range(num_anchors)` fails). `plot_boxes` and the weight loaders (PIL drawing, reading darknet weight buffers) are
left out, and so is the `PIL` import. The region output (in the repository from `Darknet.forward` on a real image)
is a random tensor made in the factory: 2 anchors, 3 classes, a 5x5 map; the box list for `nms` is also made in the
factory (Python floats, in the layout `get_region_boxes` returns). Two calls: one to each original function (the
list given to `nms` is its own, since `nms` writes into it).
"""
import math
import random

import torch

def sigmoid(x):
    return 1.0/(math.exp(-x)+1.)  # BREAK

def bbox_iou(bbox1, bbox2):
    mx = min(bbox1[0], bbox2[0])
    Mx = max(bbox1[2], bbox2[2])
    my = min(bbox1[1], bbox2[1])
    My = max(bbox1[3], bbox2[3])
    w1 = bbox1[2] - bbox1[0]
    h1 = bbox1[3] - bbox1[1]
    w2 = bbox2[2] - bbox2[0]
    h2 = bbox2[3] - bbox2[1]
    uw = Mx - mx
    uh = My - my
    cw = w1 + w2 - uw
    ch = h1 + h2 - uh
    carea = 0
    if cw <= 0 or ch <= 0:
        return 0.0

    area1 = w1 * h1
    area2 = w2 * h2
    carea = cw * ch
    uarea = area1 + area2 - carea
    return carea/uarea

def nms(boxes, nms_thresh):
    if len(boxes) == 0:
        return boxes

    det_confs = torch.zeros(len(boxes))
    for i in range(len(boxes)):
        det_confs[i] = 1-boxes[i][4]                

    _,sortIds = torch.sort(det_confs)
    out_boxes = []
    for i in range(len(boxes)):
        box_i = boxes[sortIds[i]]  # BREAK
        if box_i[4] > 0:
            out_boxes.append(box_i)
            for j in range(i+1, len(boxes)):
                box_j = boxes[sortIds[j]]
                if bbox_iou(box_i, box_j) > nms_thresh:
                    box_j[4] = 0
    return out_boxes

def get_region_boxes(output, conf_thresh, num_classes, anchors):
    num_anchors = len(anchors)//2
    assert(output.size(0) == 1)
    assert(output.size(1) == (5+num_classes)*num_anchors)
    h = output.size(2)
    w = output.size(3)
    boxes = []
    for cy in range(h):
        for cx in range(w):
            for i in range(num_anchors):
                start = (5+num_classes)*i
                bcx = sigmoid(output[0][start][cy][cx]) + cx
                bcy = sigmoid(output[0][start+1][cy][cx]) + cy
                bw = anchors[2*i] * math.exp(output[0][start+2][cy][cx])
                bh = anchors[2*i+1] * math.exp(output[0][start+3][cy][cx])
                det_conf = sigmoid(output[0][start+4][cy][cx]) 
                x1 = bcx - bw/2
                y1 = bcy - bh/2
                x2 = bcx + bw/2
                y2 = bcy + bh/2
                if det_conf > conf_thresh:
                    box = [x1/w, y1/h, x2/w, y2/h, det_conf]
                    boxes.append(box)
    return boxes


def target():
    torch.manual_seed(0)
    rng = random.Random(0)
    num_classes = 3
    anchors = [1.08, 1.19, 3.42, 4.41]
    output = torch.randn(1, (5 + num_classes) * 2, 5, 5)
    boxes = []
    for _ in range(12):
        cx, cy = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8)
        bw, bh = rng.uniform(0.1, 0.4), rng.uniform(0.1, 0.4)
        boxes.append([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2, rng.uniform(0.3, 1.0)])
    return [
        (get_region_boxes, (output, 0.5, num_classes, anchors), {}),
        (nms, (boxes, 0.4), {}),
    ]


EXPECT = ("none: decoding reads every map element into Python floats through math.exp and builds Python lists "
          "under a per-element threshold, and nms indexes a Python list with sorted tensor indices and mutates it; "
          "a vectorised rewrite (sigmoid/exp over the whole map, boolean mask, batched IoU) is a redesign, not a "
          "mechanical fix")
