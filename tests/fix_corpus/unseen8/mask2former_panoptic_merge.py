"""Mask2Former's inference post-processing: the mask logits are upsampled to the padded image size, each image goes
through `retry_if_cuda_oom(sem_seg_postprocess)` and `retry_if_cuda_oom(self.panoptic_inference)`, which keeps the
confident queries with boolean masks (`keep = labels.ne(num_classes) & (scores > self.object_mask_threshold)`,
`cur_scores = scores[keep]`, ...), returns early `if cur_masks.shape[0] == 0:`, and otherwise walks the kept queries in
a Python loop: `pred_class = cur_classes[k].item()`, `isthing = pred_class in
self.metadata.thing_dataset_id_to_contiguous_id.values()`, areas by `(cur_mask_ids == k).sum().item()`, the test
`if mask_area > 0 and original_area > 0 and mask.sum().item() > 0:`, `continue` on small overlaps, a dict merging stuff
segments, `panoptic_seg[mask] = current_segment_id` and a `segments_info` list of dicts
(facebookresearch/Mask2Former mask2former/maskformer_model.py: `MaskFormer.forward`'s inference branch,
`semantic_inference`, `panoptic_inference`; detectron2's `sem_seg_postprocess` and `retry_if_cuda_oom`, which
Mask2Former imports).
Adaptations: the backbone, pixel decoder and transformer decoder are not built; the call receives the decoder outputs
(`pred_logits` [batch, queries, classes + 1], `pred_masks` [batch, queries, h, w]) with the image sizes, for 2 images,
6 queries, 4 classes (classes 0 and 1 are "things") and 8x8 masks upsampled to 16x16; `retry_if_cuda_oom` is a
stand-in that calls the function (there is no CUDA to run out of), and `sem_seg_postprocess` is written as in
detectron2; `self.metadata` is a namespace holding `thing_dataset_id_to_contiguous_id`; `batched_inputs` are dicts
with `height`/`width`. Semantic and panoptic inference are on, instance inference is off. Nothing is mutated."""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


def retry_if_cuda_oom(func):
    """Stand-in for detectron2.utils.memory.retry_if_cuda_oom (no CUDA here): call the function."""
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapped


def sem_seg_postprocess(result, img_size, output_height, output_width):
    """
    Return semantic segmentation predictions in the original resolution.
    """
    result = result[:, : img_size[0], : img_size[1]].expand(1, -1, -1, -1)
    result = F.interpolate(
        result, size=(output_height, output_width), mode="bilinear", align_corners=False
    )[0]
    return result


class MaskFormer(nn.Module):
    """
    Main class for mask classification semantic segmentation architectures.
    """

    def __init__(self, *, sem_seg_head, num_queries, object_mask_threshold, overlap_threshold, metadata,
                 sem_seg_postprocess_before_inference, semantic_on, panoptic_on, instance_on):
        super().__init__()
        self.sem_seg_head = sem_seg_head
        self.num_queries = num_queries
        self.overlap_threshold = overlap_threshold
        self.object_mask_threshold = object_mask_threshold
        self.metadata = metadata
        self.sem_seg_postprocess_before_inference = sem_seg_postprocess_before_inference
        self.semantic_on = semantic_on
        self.instance_on = instance_on
        self.panoptic_on = panoptic_on

    def inference(self, outputs, batched_inputs, image_sizes, padded_size):
        mask_cls_results = outputs["pred_logits"]
        mask_pred_results = outputs["pred_masks"]
        # upsample masks
        mask_pred_results = F.interpolate(
            mask_pred_results,
            size=(padded_size[0], padded_size[1]),
            mode="bilinear",
            align_corners=False,
        )

        del outputs

        processed_results = []
        for mask_cls_result, mask_pred_result, input_per_image, image_size in zip(
            mask_cls_results, mask_pred_results, batched_inputs, image_sizes
        ):
            height = input_per_image.get("height", image_size[0])
            width = input_per_image.get("width", image_size[1])
            processed_results.append({})

            if self.sem_seg_postprocess_before_inference:
                mask_pred_result = retry_if_cuda_oom(sem_seg_postprocess)(
                    mask_pred_result, image_size, height, width
                )
                mask_cls_result = mask_cls_result.to(mask_pred_result)

            # semantic segmentation inference
            if self.semantic_on:
                r = retry_if_cuda_oom(self.semantic_inference)(mask_cls_result, mask_pred_result)
                if not self.sem_seg_postprocess_before_inference:
                    r = retry_if_cuda_oom(sem_seg_postprocess)(r, image_size, height, width)
                processed_results[-1]["sem_seg"] = r

            # panoptic segmentation inference
            if self.panoptic_on:
                panoptic_r = retry_if_cuda_oom(self.panoptic_inference)(mask_cls_result, mask_pred_result)
                processed_results[-1]["panoptic_seg"] = panoptic_r

            # instance segmentation inference
            if self.instance_on:
                raise NotImplementedError  # instance inference is left out

        return processed_results

    def semantic_inference(self, mask_cls, mask_pred):
        mask_cls = F.softmax(mask_cls, dim=-1)[..., :-1]
        mask_pred = mask_pred.sigmoid()
        semseg = torch.einsum("qc,qhw->chw", mask_cls, mask_pred)
        return semseg

    def panoptic_inference(self, mask_cls, mask_pred):
        scores, labels = F.softmax(mask_cls, dim=-1).max(-1)
        mask_pred = mask_pred.sigmoid()

        keep = labels.ne(self.sem_seg_head.num_classes) & (scores > self.object_mask_threshold)
        cur_scores = scores[keep]  # BREAK
        cur_classes = labels[keep]  # BREAK
        cur_masks = mask_pred[keep]  # BREAK
        cur_mask_cls = mask_cls[keep]  # BREAK
        cur_mask_cls = cur_mask_cls[:, :-1]

        cur_prob_masks = cur_scores.view(-1, 1, 1) * cur_masks

        h, w = cur_masks.shape[-2:]
        panoptic_seg = torch.zeros((h, w), dtype=torch.int32, device=cur_masks.device)
        segments_info = []

        current_segment_id = 0

        if cur_masks.shape[0] == 0:
            # We didn't detect any mask :(
            return panoptic_seg, segments_info
        else:
            # take argmax
            cur_mask_ids = cur_prob_masks.argmax(0)
            stuff_memory_list = {}
            for k in range(cur_classes.shape[0]):
                pred_class = cur_classes[k].item()  # BREAK
                isthing = pred_class in self.metadata.thing_dataset_id_to_contiguous_id.values()
                mask_area = (cur_mask_ids == k).sum().item()
                original_area = (cur_masks[k] >= 0.5).sum().item()
                mask = (cur_mask_ids == k) & (cur_masks[k] >= 0.5)

                if mask_area > 0 and original_area > 0 and mask.sum().item() > 0:
                    if mask_area / original_area < self.overlap_threshold:
                        continue

                    # merge stuff regions
                    if not isthing:
                        if int(pred_class) in stuff_memory_list.keys():
                            panoptic_seg[mask] = stuff_memory_list[int(pred_class)]
                            continue
                        else:
                            stuff_memory_list[int(pred_class)] = current_segment_id + 1

                    current_segment_id += 1
                    panoptic_seg[mask] = current_segment_id

                    segments_info.append(
                        {
                            "id": current_segment_id,
                            "isthing": bool(isthing),
                            "category_id": int(pred_class),
                        }
                    )

            return panoptic_seg, segments_info


def run_inference(model, outputs, batched_inputs, image_sizes, padded_size):
    return model.inference(outputs, batched_inputs, image_sizes, padded_size)


def _outputs(gen, batch, queries, num_classes, confident):
    logits = torch.randn(batch, queries, num_classes + 1, generator=gen)
    for b, q, c in confident:
        logits[b, q, c] += 8.0
    masks = torch.randn(batch, queries, 8, 8, generator=gen) * 3.0
    return {"pred_logits": logits, "pred_masks": masks}


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    metadata = SimpleNamespace(thing_dataset_id_to_contiguous_id={0: 0, 1: 1})
    model = MaskFormer(
        sem_seg_head=SimpleNamespace(num_classes=4),
        num_queries=6,
        object_mask_threshold=0.8,
        overlap_threshold=0.5,
        metadata=metadata,
        sem_seg_postprocess_before_inference=True,
        semantic_on=True,
        panoptic_on=True,
        instance_on=False,
    )
    outputs1 = _outputs(gen, 2, 6, 4, [(0, 0, 1), (0, 2, 3), (0, 4, 3), (0, 5, 0), (1, 1, 2), (1, 3, 0)])
    outputs2 = _outputs(gen, 2, 6, 4, [(0, 1, 2), (0, 3, 2), (1, 0, 1), (1, 2, 1), (1, 5, 3)])
    batched_inputs = [{"height": 16, "width": 16}, {"height": 12, "width": 16}]
    image_sizes = [(16, 16), (12, 16)]
    return [
        (run_inference, (model, outputs1, batched_inputs, image_sizes, (16, 16)), {}),
        (run_inference, (model, outputs2, batched_inputs, image_sizes, (16, 16)), {}),
    ]


EXPECT = ("caller: panoptic merging is host-side post-processing by design (boolean-mask query selection with a "
          "data-dependent count, a per-query Python loop of `.item()` reads, `continue`s, a dict of stuff segments "
          "and a list of dicts as output); compile the network and `semantic_inference` and leave "
          "`panoptic_inference` eager (a `hatch` on `panoptic_inference` is the same fix written in the source)")
