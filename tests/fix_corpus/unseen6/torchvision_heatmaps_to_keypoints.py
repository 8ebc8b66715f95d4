"""Keypoint R-CNN post-processing: per ROI, `roi_map_width = int(widths_ceil[i].item())` and
`roi_map_height = int(heights_ceil[i].item())` size an `F.interpolate(..., mode='bicubic')` of the heatmaps, and the
argmax positions are written into preallocated outputs (pytorch/vision torchvision/models/detection/roi_heads.py:
keypointrcnn_inference, heatmaps_to_keypoints; the `torchvision._is_tracing()` ONNX branch is kept with a stand-in
`_is_tracing` (torch's tracing state), the scripted ONNX loop it calls is left out since it is never taken). The
calls take keypoint logits for the boxes of two images and the boxes, as `RoIHeads.forward` passes them in
evaluation."""
import torch
import torch.nn.functional as F


def _is_tracing():
    """torchvision._is_tracing"""
    return torch._C._get_tracing_state()


def heatmaps_to_keypoints(maps, rois):
    """Extract predicted keypoint locations from heatmaps. Output has shape
    (#rois, 4, #keypoints) with the 4 rows corresponding to (x, y, logit, prob)
    for each keypoint.
    """
    # This function converts a discrete image coordinate in a HEATMAP_SIZE x
    # HEATMAP_SIZE image to a continuous keypoint coordinate. We maintain
    # consistency with keypoints_to_heatmap_labels by using the conversion from
    # Heckbert 1990: c = d + 0.5, where d is a discrete coordinate and c is a
    # continuous coordinate.
    offset_x = rois[:, 0]
    offset_y = rois[:, 1]

    widths = rois[:, 2] - rois[:, 0]
    heights = rois[:, 3] - rois[:, 1]
    widths = widths.clamp(min=1)
    heights = heights.clamp(min=1)
    widths_ceil = widths.ceil()
    heights_ceil = heights.ceil()

    num_keypoints = maps.shape[1]

    if _is_tracing():
        raise NotImplementedError("ONNX path (_onnx_heatmaps_to_keypoints_loop) left out")

    xy_preds = torch.zeros((len(rois), 3, num_keypoints), dtype=torch.float32, device=maps.device)
    end_scores = torch.zeros((len(rois), num_keypoints), dtype=torch.float32, device=maps.device)
    for i in range(len(rois)):
        roi_map_width = int(widths_ceil[i].item())  # BREAK
        roi_map_height = int(heights_ceil[i].item())
        width_correction = widths[i] / roi_map_width
        height_correction = heights[i] / roi_map_height
        roi_map = F.interpolate(
            maps[i][:, None], size=(roi_map_height, roi_map_width), mode='bicubic', align_corners=False)[:, 0]
        # roi_map_probs = scores_to_probs(roi_map.copy())
        w = roi_map.shape[2]
        pos = roi_map.reshape(num_keypoints, -1).argmax(dim=1)

        x_int = pos % w
        y_int = (pos - x_int) // w
        # assert (roi_map_probs[k, y_int, x_int] ==
        #         roi_map_probs[k, :, :].max())
        x = (x_int.float() + 0.5) * width_correction
        y = (y_int.float() + 0.5) * height_correction
        xy_preds[i, 0, :] = x + offset_x[i]
        xy_preds[i, 1, :] = y + offset_y[i]
        xy_preds[i, 2, :] = 1
        end_scores[i, :] = roi_map[torch.arange(num_keypoints), y_int, x_int]

    return xy_preds.permute(0, 2, 1), end_scores


def keypointrcnn_inference(x, boxes):
    # type: (Tensor, List[Tensor]) -> Tuple[List[Tensor], List[Tensor]]
    kp_probs = []
    kp_scores = []

    boxes_per_image = [box.size(0) for box in boxes]
    x2 = x.split(boxes_per_image, dim=0)

    for xx, bb in zip(x2, boxes):
        kp_prob, scores = heatmaps_to_keypoints(xx, bb)
        kp_probs.append(kp_prob)
        kp_scores.append(scores)

    return kp_probs, kp_scores


def _boxes(n, img=40.):
    xy = torch.rand(n, 2) * img * 0.6
    wh = 6. + torch.rand(n, 2) * 14.
    return torch.cat([xy, xy + wh], dim=1)


def target():
    torch.manual_seed(0)
    num_keypoints, hm = 5, 14
    boxes1 = [_boxes(2), _boxes(3)]
    logits1 = torch.randn(5, num_keypoints, hm, hm)
    boxes2 = [_boxes(3), _boxes(1)]
    logits2 = torch.randn(4, num_keypoints, hm, hm)
    return [
        (keypointrcnn_inference, (logits1, boxes1), {}),
        (keypointrcnn_inference, (logits2, boxes2), {}),
    ]


EXPECT = ("none: each ROI's interpolation size is its box's width/height rounded up, read from the data; the output "
          "shape of `F.interpolate` depends on it, so the per-ROI loop needs host values (the keypoint decode has to "
          "run eagerly or with unbacked sizes; `capture_scalar_outputs` only moves the break to the data-dependent "
          "interpolate size)")
