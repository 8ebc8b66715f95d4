"""PyTorch-YOLOv3 loss: `build_targets` filters the anchor/target pairs with a boolean mask (`t = t[j]` where
`j = torch.max(r, 1. / r).max(2)[0] < 4`) and sizes the gain from `torch.tensor(p[i].shape)[[3, 2, 3, 2]]`;
`compute_loss` then branches on `if num_targets:` (`b.shape[0]`, a data-dependent count), gathers
`layer_predictions[b, anchor, grid_j, grid_i]`, writes the CIoU into `tobj` and sets class targets with
`t[range(num_targets), tcls[layer_index]] = cp` (eriklindernoren/PyTorch-YOLOv3 pytorchyolo/utils/loss.py:
compute_loss, build_targets, bbox_iou, smooth_BCE; pytorchyolo/utils/utils.py: to_cpu; pytorchyolo/models.py:
YOLOLayer's `anchors`/`stride` attributes). The Darknet model is replaced by a stand-in holding two YOLO layers with
their anchors and strides (`model.yolo_layers`), and the calls take the raw layer predictions
(batch, anchors, grid_y, grid_x, 5 + classes) and the targets (image, class, x, y, w, h), as the training loop
passes them; the loss is not backpropagated. The clamp bounds are `gain[3].long() - 1` as in the repository's later
revision (the stored `gain[3] - 1` fails under current torch: a float bound for an in-place clamp of a long tensor)."""
import math

import torch
import torch.nn as nn


def to_cpu(tensor):
    return tensor.detach().cpu()


def bbox_iou(box1, box2, x1y1x2y2=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-9):
    # Returns the IoU of box1 to box2. box1 is 4, box2 is nx4
    box2 = box2.T

    # Get the coordinates of bounding boxes
    if x1y1x2y2:  # x1, y1, x2, y2 = box1
        b1_x1, b1_y1, b1_x2, b1_y2 = box1[0], box1[1], box1[2], box1[3]
        b2_x1, b2_y1, b2_x2, b2_y2 = box2[0], box2[1], box2[2], box2[3]
    else:  # transform from xywh to xyxy
        b1_x1, b1_x2 = box1[0] - box1[2] / 2, box1[0] + box1[2] / 2
        b1_y1, b1_y2 = box1[1] - box1[3] / 2, box1[1] + box1[3] / 2
        b2_x1, b2_x2 = box2[0] - box2[2] / 2, box2[0] + box2[2] / 2
        b2_y1, b2_y2 = box2[1] - box2[3] / 2, box2[1] + box2[3] / 2

    # Intersection area
    inter = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * \
            (torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)).clamp(0)

    # Union Area
    w1, h1 = b1_x2 - b1_x1, b1_y2 - b1_y1 + eps
    w2, h2 = b2_x2 - b2_x1, b2_y2 - b2_y1 + eps
    union = w1 * h1 + w2 * h2 - inter + eps

    iou = inter / union
    if GIoU or DIoU or CIoU:
        # convex (smallest enclosing box) width
        cw = torch.max(b1_x2, b2_x2) - torch.min(b1_x1, b2_x1)
        ch = torch.max(b1_y2, b2_y2) - torch.min(b1_y1, b2_y1)  # convex height
        if CIoU or DIoU:  # Distance or Complete IoU https://arxiv.org/abs/1911.08287v1
            c2 = cw ** 2 + ch ** 2 + eps  # convex diagonal squared
            rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 +
                    (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4  # center distance squared
            if DIoU:
                return iou - rho2 / c2  # DIoU
            elif CIoU:  # https://github.com/Zzh-tju/DIoU-SSD-pytorch/blob/master/utils/box/box_utils.py#L47
                v = (4 / math.pi ** 2) * \
                    torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
                with torch.no_grad():
                    alpha = v / ((1 + eps) - iou + v)
                return iou - (rho2 / c2 + v * alpha)  # CIoU
        else:  # GIoU https://arxiv.org/pdf/1902.09630.pdf
            c_area = cw * ch + eps  # convex area
            return iou - (c_area - union) / c_area  # GIoU
    else:
        return iou  # IoU


def smooth_BCE(eps=0.1):  # https://github.com/ultralytics/yolov3/issues/238#issuecomment-598028441
    # return positive, negative label smoothing BCE targets
    return 1.0 - 0.5 * eps, 0.5 * eps


def compute_loss(predictions, targets, model):  # predictions, targets, model
    device = targets.device
    lcls, lbox, lobj = torch.zeros(1, device=device), torch.zeros(1, device=device), torch.zeros(1, device=device)
    tcls, tbox, indices, anchors = build_targets(predictions, targets, model)  # targets

    # Define criteria
    BCEcls = nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor([1.0], device=device))
    BCEobj = nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor([1.0], device=device))

    # Class label smoothing https://arxiv.org/pdf/1902.04103.pdf eqn 3
    cp, cn = smooth_BCE(eps=0.0)

    # Losses
    balance = [4.0, 1.0, 0.4, 0.1]  # P3-P6
    # layer index, layer predictions
    for layer_index, layer_predictions in enumerate(predictions):
        # image, anchor, gridy, gridx
        b, anchor, grid_j, grid_i = indices[layer_index]
        tobj = torch.zeros_like(layer_predictions[..., 0], device=device)  # target obj

        num_targets = b.shape[0]  # number of targets
        if num_targets:
            # prediction subset corresponding to targets
            ps = layer_predictions[b, anchor, grid_j, grid_i]

            # Regression
            pxy = ps[:, :2].sigmoid() * 2. - 0.5
            pwh = (ps[:, 2:4].sigmoid() * 2) ** 2 * anchors[layer_index]
            pbox = torch.cat((pxy, pwh), 1)  # predicted box
            # iou(prediction, target)
            iou = bbox_iou(pbox.T, tbox[layer_index], x1y1x2y2=False, CIoU=True)
            lbox += (1.0 - iou).mean()  # iou loss

            model.gr = 1

            # Objectness
            tobj[b, anchor, grid_j, grid_i] = \
                (1.0 - model.gr) + model.gr * iou.detach().clamp(0).type(tobj.dtype)  # iou ratio

            # Classification
            t = torch.full_like(ps[:, 5:], cn, device=device)  # targets
            t[range(num_targets), tcls[layer_index]] = cp
            lcls += BCEcls(ps[:, 5:], t)  # BCE

        lobj += BCEobj(layer_predictions[..., 4], tobj) * balance[layer_index]  # obj loss

    lbox *= 0.05 * (3. / 2)
    lobj *= (3. / 2)
    lcls *= 0.31
    batch_size = tobj.shape[0]  # batch size

    loss = lbox + lobj + lcls

    return loss * batch_size, to_cpu(torch.cat((lbox, lobj, lcls, loss)))


def build_targets(p, targets, model):
    # Build targets for compute_loss(), input targets(image,class,x,y,w,h)
    na, nt = 3, targets.shape[0]  # number of anchors, targets #TODO
    tcls, tbox, indices, anch = [], [], [], []
    gain = torch.ones(7, device=targets.device)  # normalized to gridspace gain
    ai = torch.arange(na, device=targets.device).float().view(na, 1).repeat(1, nt)  # same as .repeat_interleave(nt)
    # append anchor indices
    targets = torch.cat((targets.repeat(na, 1, 1), ai[:, :, None]), 2)

    g = 0.5  # bias
    off = torch.tensor([[0, 0]], device=targets.device).float() * g  # offsets

    for i, yolo_layer in enumerate(model.yolo_layers):
        anchors = yolo_layer.anchors / yolo_layer.stride
        gain[2:6] = torch.tensor(p[i].shape)[[3, 2, 3, 2]]  # xyxy gain

        # Match targets to anchors
        t = targets * gain
        if nt:
            # Matches
            r = t[:, :, 4:6] / anchors[:, None]  # wh ratio
            j = torch.max(r, 1. / r).max(2)[0] < 4  # compare #TODO
            # j = wh_iou(anchors, t[:, 4:6]) > model.hyp['iou_t']  # iou(3,n)=wh_iou(anchors(3,2), gwh(n,2))
            t = t[j]  # filter  # BREAK
            # Offsets
            gxy = t[:, 2:4]  # grid xy
            gxi = gain[[2, 3]] - gxy  # inverse
            j, k = ((gxy % 1. < g) & (gxy > 1.)).T
            l, m = ((gxi % 1. < g) & (gxi > 1.)).T
            j = torch.stack((torch.ones_like(j),))
            t = t.repeat((off.shape[0], 1, 1))[j]
            offsets = (torch.zeros_like(gxy)[None] + off[:, None])[j]

        else:
            t = targets[0]
            offsets = 0

        # Define
        b, c = t[:, :2].long().T  # image, class
        gxy = t[:, 2:4]  # grid xy
        gwh = t[:, 4:6]  # grid wh
        gij = (gxy - offsets).long()
        gi, gj = gij.T  # grid xy indices

        # Append
        a = t[:, 6].long()  # anchor indices
        # image, anchor, grid indices
        indices.append((b, a, gj.clamp_(0, gain[3].long() - 1), gi.clamp_(0, gain[2].long() - 1)))
        tbox.append(torch.cat((gxy - gij, gwh), 1))  # box
        anch.append(anchors[a])  # anchors
        tcls.append(c)  # class

    return tcls, tbox, indices, anch


class YOLOLayer(nn.Module):
    """Only the attributes build_targets reads (the forward's grid decoding is not used by the loss)."""

    def __init__(self, anchors, num_classes, stride):
        super(YOLOLayer, self).__init__()
        self.num_anchors = len(anchors)
        self.num_classes = num_classes
        self.register_buffer('anchors', torch.tensor(anchors, dtype=torch.float32))
        self.stride = stride


class Darknet(nn.Module):
    """Stand-in: the two YOLO layers of a tiny config."""

    def __init__(self, num_classes=3):
        super(Darknet, self).__init__()
        self.yolo_layers = [YOLOLayer([(10, 14), (23, 27), (37, 58)], num_classes, 8),
                            YOLOLayer([(81, 82), (135, 169), (344, 319)], num_classes, 16)]


def _batch(bs, n_targets, img=64, nc=3):
    preds = [torch.randn(bs, 3, img // 8, img // 8, 5 + nc), torch.randn(bs, 3, img // 16, img // 16, 5 + nc)]
    tgt = torch.zeros(n_targets, 6)
    tgt[:, 0] = torch.randint(0, bs, (n_targets,)).float()
    tgt[:, 1] = torch.randint(0, nc, (n_targets,)).float()
    tgt[:, 2:4] = 0.1 + 0.8 * torch.rand(n_targets, 2)
    tgt[:, 4:6] = 0.05 + 0.5 * torch.rand(n_targets, 2)
    return preds, tgt


def target():
    torch.manual_seed(0)
    model = Darknet()
    preds1, targets1 = _batch(2, 5)
    preds2, targets2 = _batch(2, 3)
    return [
        (compute_loss, (preds1, targets1, model), {}),
        (compute_loss, (preds2, targets2, model), {}),
    ]


EXPECT = ("rewrite: keep every anchor/target pair and carry the match as a weight instead of filtering "
          "(`t = t[j]` becomes a mask multiplied into the per-pair box/class/objectness terms, normalised by "
          "`mask.sum().clamp(min=1)`), so `num_targets` is static and `if num_targets:` disappears; the shape gain "
          "comes from `p[i].shape` as Python ints (`torch.tensor([W, H, W, H])`)")
