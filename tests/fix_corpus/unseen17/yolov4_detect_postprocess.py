"""YOLOv4 inference and post-processing from Tianxiaomo/pytorch-YOLOv4 (`tool/torch_utils.py` `do_detect` (the
revision with `with torch.no_grad():`) and `get_region_boxes`; `tool/yolo_layer.py` `yolo_forward` and `YoloLayer`;
`tool/utils.py` `nms_cpu` and `post_processing`, the stored revision). `do_detect` sets eval mode, converts a
NumPy image batch by `type(img) == np.ndarray and len(img.shape) == 4` checks (`torch.from_numpy(...
.transpose(0, 3, 1, 2)).float().div(255.0)`; an `exit(-1)` branch for unknown types), wraps it in
`torch.autograd.Variable`, times the model with `time.time()` and prints the timings, then calls
`post_processing`. `YoloLayer.forward` returns the raw map when training, else builds the masked anchors with a
loop and a list comprehension and calls `yolo_forward`, which slices the channels per anchor in Python loops,
applies sigmoid/exp/softmax, adds grid offsets made with NumPy (`np.expand_dims(np.linspace(...)).repeat(...)`,
passed through `torch.tensor(grid_x, ...)` for every anchor), scales by anchors, normalises in place
(`bx_bw /= W`) and returns boxes and confidences. `post_processing` moves both to NumPy
(`if type(box_array).__name__ != 'ndarray':` ... `.cpu().detach().numpy()`), takes `np.max`/`np.argmax`, and per
image selects with a boolean mask, runs the NumPy `nms_cpu` (a `while order.size > 0:` loop) and builds box lists,
printing its timings.
Adaptations: the Darknet/`Yolov4` network (`models.py`, `tool/darknet2pytorch.py`, not opened) is a small stand-in
with three strided heads feeding three `YoloLayer`s and `get_region_boxes` (as `Yolov4Head`'s inference output
does in `models.py`, from the collector's knowledge); 3 classes, 64x64 images, a batch of 2 and 1 image (the heads' biases are raised by 0.5 in the factory so that boxes pass the confidence threshold); the
anchors and masks are the YOLOv4 defaults; `use_cuda=0`; the stand-in's `forward` makes its input contiguous (the transposed NumPy batch is channels-last in memory, and torch 2.13's convolutions keep that layout, which `yolo_forward`'s `view` calls reject). `do_detect` is the called function; the weights are
not changed and it draws no random numbers. The timings it prints are not returned."""
import sys
import os
import time
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- tool/utils.py
def nms_cpu(boxes, confs, nms_thresh=0.5, min_mode=False):
    # print(boxes.shape)
    x1 = boxes[:, 0]
    y1 = boxes[:, 1]
    x2 = boxes[:, 2]
    y2 = boxes[:, 3]

    areas = (x2 - x1) * (y2 - y1)
    order = confs.argsort()[::-1]

    keep = []
    while order.size > 0:
        idx_self = order[0]
        idx_other = order[1:]

        keep.append(idx_self)

        xx1 = np.maximum(x1[idx_self], x1[idx_other])  # BREAK
        yy1 = np.maximum(y1[idx_self], y1[idx_other])
        xx2 = np.minimum(x2[idx_self], x2[idx_other])
        yy2 = np.minimum(y2[idx_self], y2[idx_other])

        w = np.maximum(0.0, xx2 - xx1)
        h = np.maximum(0.0, yy2 - yy1)
        inter = w * h

        if min_mode:
            over = inter / np.minimum(areas[order[0]], areas[order[1:]])
        else:
            over = inter / (areas[order[0]] + areas[order[1:]] - inter)

        inds = np.where(over <= nms_thresh)[0]
        order = order[inds + 1]

    return np.array(keep)


def post_processing(img, conf_thresh, nms_thresh, output):

    # anchors = [12, 16, 19, 36, 40, 28, 36, 75, 76, 55, 72, 146, 142, 110, 192, 243, 459, 401]
    # num_anchors = 9
    # anchor_masks = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    # strides = [8, 16, 32]
    # anchor_step = len(anchors) // num_anchors

    # [batch, num, 1, 4]
    box_array = output[0]
    # [batch, num, num_classes]
    confs = output[1]

    t1 = time.time()  # BREAK

    if type(box_array).__name__ != 'ndarray':
        box_array = box_array.cpu().detach().numpy()
        confs = confs.cpu().detach().numpy()

    # [batch, num, 4]
    box_array = box_array[:, :, 0]

    # [batch, num, num_classes] --> [batch, num]
    max_conf = np.max(confs, axis=2)
    max_id = np.argmax(confs, axis=2)

    t2 = time.time()  # BREAK

    bboxes_batch = []
    for i in range(box_array.shape[0]):

        argwhere = max_conf[i] > conf_thresh
        l_box_array = box_array[i, argwhere, :]  # BREAK
        l_max_conf = max_conf[i, argwhere]
        l_max_id = max_id[i, argwhere]

        keep = nms_cpu(l_box_array, l_max_conf, nms_thresh)

        bboxes = []
        if (keep.size > 0):
            l_box_array = l_box_array[keep, :]
            l_max_conf = l_max_conf[keep]
            l_max_id = l_max_id[keep]

            for j in range(l_box_array.shape[0]):
                bboxes.append([l_box_array[j, 0], l_box_array[j, 1], l_box_array[j, 2], l_box_array[j, 3], l_max_conf[j], l_max_conf[j], l_max_id[j]])

        bboxes_batch.append(bboxes)

    t3 = time.time()

    print('-----------------------------------')
    print('       max and argmax : %f' % (t2 - t1))
    print('                  nms : %f' % (t3 - t2))
    print('Post processing total : %f' % (t3 - t1))
    print('-----------------------------------')

    return bboxes_batch


class utils:
    post_processing = staticmethod(post_processing)


# ---- tool/yolo_layer.py
def yolo_forward(output, conf_thresh, num_classes, anchors, num_anchors, scale_x_y, only_objectness=1,
                              validation=False):
    # Output would be invalid if it does not satisfy this assert
    # assert (output.size(1) == (5 + num_classes) * num_anchors)

    # print(output.size())

    # Slice the second dimension (channel) of output into:
    # [ 2, 2, 1, num_classes, 2, 2, 1, num_classes, 2, 2, 1, num_classes ]
    # And then into
    # bxy = [ 6 ] bwh = [ 6 ] det_conf = [ 3 ] cls_conf = [ num_classes * 3 ]
    batch = output.size(0)
    H = output.size(2)
    W = output.size(3)

    bxy_list = []
    bwh_list = []
    det_confs_list = []
    cls_confs_list = []

    for i in range(num_anchors):
        begin = i * (5 + num_classes)
        end = (i + 1) * (5 + num_classes)

        bxy_list.append(output[:, begin : begin + 2])
        bwh_list.append(output[:, begin + 2 : begin + 4])
        det_confs_list.append(output[:, begin + 4 : begin + 5])
        cls_confs_list.append(output[:, begin + 5 : end])

    # Shape: [batch, num_anchors * 2, H, W]
    bxy = torch.cat(bxy_list, dim=1)
    # Shape: [batch, num_anchors * 2, H, W]
    bwh = torch.cat(bwh_list, dim=1)

    # Shape: [batch, num_anchors, H, W]
    det_confs = torch.cat(det_confs_list, dim=1)
    # Shape: [batch, num_anchors * H * W]
    det_confs = det_confs.view(batch, num_anchors * H * W)

    # Shape: [batch, num_anchors * num_classes, H, W]
    cls_confs = torch.cat(cls_confs_list, dim=1)
    # Shape: [batch, num_anchors, num_classes, H * W]
    cls_confs = cls_confs.view(batch, num_anchors, num_classes, H * W)
    # Shape: [batch, num_anchors, num_classes, H * W] --> [batch, num_anchors * H * W, num_classes]
    cls_confs = cls_confs.permute(0, 1, 3, 2).reshape(batch, num_anchors * H * W, num_classes)

    # Apply sigmoid(), exp() and softmax() to slices
    #
    bxy = torch.sigmoid(bxy) * scale_x_y - 0.5 * (scale_x_y - 1)
    bwh = torch.exp(bwh)
    det_confs = torch.sigmoid(det_confs)
    cls_confs = torch.nn.Softmax(dim=2)(cls_confs)

    # Prepare C-x, C-y, P-w, P-h (None of them are torch related)
    grid_x = np.expand_dims(np.expand_dims(np.expand_dims(np.linspace(0, W - 1, W), axis=0).repeat(H, 0), axis=0), axis=0)
    grid_y = np.expand_dims(np.expand_dims(np.expand_dims(np.linspace(0, H - 1, H), axis=1).repeat(W, 1), axis=0), axis=0)
    # grid_x = torch.linspace(0, W - 1, W).reshape(1, 1, 1, W).repeat(1, 1, H, 1)
    # grid_y = torch.linspace(0, H - 1, H).reshape(1, 1, H, 1).repeat(1, 1, 1, W)

    anchor_w = []
    anchor_h = []
    for i in range(num_anchors):
        anchor_w.append(anchors[i * 2])
        anchor_h.append(anchors[i * 2 + 1])

    device = None
    cuda_check = output.is_cuda
    if cuda_check:
        device = output.get_device()

    bx_list = []
    by_list = []
    bw_list = []
    bh_list = []

    # Apply C-x, C-y, P-w, P-h
    for i in range(num_anchors):
        ii = i * 2
        # Shape: [batch, 1, H, W]
        bx = bxy[:, ii : ii + 1] + torch.tensor(grid_x, device=device, dtype=torch.float32) # grid_x.to(device=device, dtype=torch.float32)
        # Shape: [batch, 1, H, W]
        by = bxy[:, ii + 1 : ii + 2] + torch.tensor(grid_y, device=device, dtype=torch.float32) # grid_y.to(device=device, dtype=torch.float32)
        # Shape: [batch, 1, H, W]
        bw = bwh[:, ii : ii + 1] * anchor_w[i]
        # Shape: [batch, 1, H, W]
        bh = bwh[:, ii + 1 : ii + 2] * anchor_h[i]

        bx_list.append(bx)
        by_list.append(by)
        bw_list.append(bw)
        bh_list.append(bh)


    ########################################
    #   Figure out bboxes from slices     #
    ########################################

    # Shape: [batch, num_anchors, H, W]
    bx = torch.cat(bx_list, dim=1)
    # Shape: [batch, num_anchors, H, W]
    by = torch.cat(by_list, dim=1)
    # Shape: [batch, num_anchors, H, W]
    bw = torch.cat(bw_list, dim=1)
    # Shape: [batch, num_anchors, H, W]
    bh = torch.cat(bh_list, dim=1)

    # Shape: [batch, 2 * num_anchors, H, W]
    bx_bw = torch.cat((bx, bw), dim=1)
    # Shape: [batch, 2 * num_anchors, H, W]
    by_bh = torch.cat((by, bh), dim=1)

    # normalize coordinates to [0, 1]
    bx_bw /= W
    by_bh /= H

    # Shape: [batch, num_anchors * H * W, 1]
    bx = bx_bw[:, :num_anchors].view(batch, num_anchors * H * W, 1)
    by = by_bh[:, :num_anchors].view(batch, num_anchors * H * W, 1)
    bw = bx_bw[:, num_anchors:].view(batch, num_anchors * H * W, 1)
    bh = by_bh[:, num_anchors:].view(batch, num_anchors * H * W, 1)

    bx1 = bx - bw * 0.5
    by1 = by - bh * 0.5
    bx2 = bx1 + bw
    by2 = by1 + bh

    # Shape: [batch, num_anchors * h * w, 4] -> [batch, num_anchors * h * w, 1, 4]
    boxes = torch.cat((bx1, by1, bx2, by2), dim=2).view(batch, num_anchors * H * W, 1, 4)
    # boxes = boxes.repeat(1, 1, num_classes, 1)

    # boxes:     [batch, num_anchors * H * W, 1, 4]
    # cls_confs: [batch, num_anchors * H * W, num_classes]
    # det_confs: [batch, num_anchors * H * W]

    det_confs = det_confs.view(batch, num_anchors * H * W, 1)
    confs = cls_confs * det_confs

    # boxes: [batch, num_anchors * H * W, 1, 4]
    # confs: [batch, num_anchors * H * W, num_classes]

    return  boxes, confs


class YoloLayer(nn.Module):
    ''' Yolo layer
    model_out: while inference,is post-processing inside or outside the model
        true:outside
    '''
    def __init__(self, anchor_mask=[], num_classes=0, anchors=[], num_anchors=1, stride=32, model_out=False):
        super(YoloLayer, self).__init__()
        self.anchor_mask = anchor_mask
        self.num_classes = num_classes
        self.anchors = anchors
        self.num_anchors = num_anchors
        self.anchor_step = len(anchors) // num_anchors
        self.coord_scale = 1
        self.noobject_scale = 1
        self.object_scale = 5
        self.class_scale = 1
        self.thresh = 0.6
        self.stride = stride
        self.seen = 0
        self.scale_x_y = 1

        self.model_out = model_out

    def forward(self, output, target=None):
        if self.training:
            return output
        masked_anchors = []
        for m in self.anchor_mask:
            masked_anchors += self.anchors[m * self.anchor_step:(m + 1) * self.anchor_step]
        masked_anchors = [anchor / self.stride for anchor in masked_anchors]

        return yolo_forward(output, self.thresh, self.num_classes, masked_anchors, len(self.anchor_mask),scale_x_y=self.scale_x_y)


# ---- tool/torch_utils.py
def get_region_boxes(boxes_and_confs):

    # print('Getting boxes from boxes and confs ...')

    boxes_list = []
    confs_list = []

    for item in boxes_and_confs:
        boxes_list.append(item[0])
        confs_list.append(item[1])

    # boxes: [batch, num1 + num2 + num3, 1, 4]
    # confs: [batch, num1 + num2 + num3, num_classes]
    boxes = torch.cat(boxes_list, dim=1)
    confs = torch.cat(confs_list, dim=1)

    return [boxes, confs]


def do_detect(model, img, conf_thresh, nms_thresh, use_cuda=1):
    model.eval()
    with torch.no_grad():
        t0 = time.time()  # BREAK

        if type(img) == np.ndarray and len(img.shape) == 3:  # cv2 image  # BREAK
            img = torch.from_numpy(img.transpose(2, 0, 1)).float().div(255.0).unsqueeze(0)
        elif type(img) == np.ndarray and len(img.shape) == 4:  # BREAK
            img = torch.from_numpy(img.transpose(0, 3, 1, 2)).float().div(255.0)
        else:
            print("unknow image type")
            exit(-1)

        if use_cuda:
            img = img.cuda()
        img = torch.autograd.Variable(img)  # BREAK

        t1 = time.time()  # BREAK

        output = model(img)

        t2 = time.time()  # BREAK

        print('-----------------------------------')  # BREAK
        print('           Preprocess : %f' % (t1 - t0))  # BREAK
        print('      Model Inference : %f' % (t2 - t1))  # BREAK
        print('-----------------------------------')  # BREAK

        return utils.post_processing(img, conf_thresh, nms_thresh, output)


# ---- stand-in for models.py Yolov4 (not opened)
class TinyYolov4(nn.Module):
    def __init__(self, n_classes=3, inference=True):
        super().__init__()
        output_ch = (4 + 1 + n_classes) * 3
        self.inference = inference
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.LeakyReLU(0.1), nn.Conv2d(8, 16, 3, 2, 1),
                                  nn.LeakyReLU(0.1), nn.Conv2d(16, 16, 3, 2, 1), nn.LeakyReLU(0.1))
        self.down4 = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.LeakyReLU(0.1))
        self.down5 = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.LeakyReLU(0.1))
        self.head1 = nn.Conv2d(16, output_ch, 1)
        self.head2 = nn.Conv2d(16, output_ch, 1)
        self.head3 = nn.Conv2d(16, output_ch, 1)
        anchors = [12, 16, 19, 36, 40, 28, 36, 75, 76, 55, 72, 146, 142, 110, 192, 243, 459, 401]
        self.yolo1 = YoloLayer(anchor_mask=[0, 1, 2], num_classes=n_classes, anchors=anchors, num_anchors=9, stride=8)
        self.yolo2 = YoloLayer(anchor_mask=[3, 4, 5], num_classes=n_classes, anchors=anchors, num_anchors=9, stride=16)
        self.yolo3 = YoloLayer(anchor_mask=[6, 7, 8], num_classes=n_classes, anchors=anchors, num_anchors=9, stride=32)

    def forward(self, input):
        input = input.contiguous()  # the transposed NumPy batch is channels-last; yolo_forward's views need contiguous maps
        x3 = self.stem(input)
        x4 = self.down4(x3)
        x5 = self.down5(x4)
        x2 = self.head1(x3)
        x10 = self.head2(x4)
        x18 = self.head3(x5)
        if self.inference:
            y1 = self.yolo1(x2)
            y2 = self.yolo2(x10)
            y3 = self.yolo3(x18)
            return get_region_boxes([y1, y2, y3])
        else:
            return [x2, x10, x18]


def target():
    torch.manual_seed(0)
    model = TinyYolov4(n_classes=3)
    with torch.no_grad():
        for m in (model.head1, model.head2, model.head3):
            m.bias.add_(0.5)
    rng = np.random.RandomState(0)
    imgs1 = rng.randint(0, 256, size=(2, 64, 64, 3)).astype(np.uint8)
    imgs2 = rng.randint(0, 256, size=(1, 64, 64, 3)).astype(np.uint8)
    return [
        (do_detect, (model, imgs1, 0.22, 0.6), {"use_cuda": 0}),
        (do_detect, (model, imgs2, 0.25, 0.4), {"use_cuda": 0}),
    ]


EXPECT = ("caller: `do_detect` does host work around the network (NumPy image conversion, `time.time()` "
          "prints) and `post_processing` is NumPy through and through (`.cpu().numpy()`, per-image masks, the "
          "`while order.size > 0:` NMS loop); `yolo_forward`'s NumPy grids are constants. The right fix "
          "compiles the model call (backbone, heads and `yolo_forward`) and leaves `do_detect` and the NumPy "
          "post-processing eager")
