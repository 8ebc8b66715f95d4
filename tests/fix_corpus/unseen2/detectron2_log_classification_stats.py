"""_log_classification_stats: `.nonzero().numel()` counts and boolean-mask indexing feeding `EventStorage.put_scalar` inside FastRCNNOutputLayers.losses (detectron2 fast_rcnn.py)."""
from collections import defaultdict

import torch
from torch import nn
from torch.nn import functional as F

_CURRENT_STORAGE_STACK = []


class HistoryBuffer:
    def __init__(self, max_length=1000000):
        self._max_length = max_length
        self._data = []
        self._count = 0
        self._global_avg = 0.0

    def update(self, value, iteration=None):
        if iteration is None:
            iteration = self._count
        if len(self._data) == self._max_length:
            self._data.pop(0)
        self._data.append((value, iteration))
        self._count += 1
        self._global_avg += (value - self._global_avg) / self._count


class EventStorage:
    def __init__(self, start_iter=0):
        self._history = defaultdict(HistoryBuffer)
        self._smoothing_hints = {}
        self._latest_scalars = {}
        self._iter = start_iter
        self._current_prefix = ""

    def put_scalar(self, name, value, smoothing_hint=True, cur_iter=None):
        name = self._current_prefix + name
        cur_iter = self._iter if cur_iter is None else cur_iter
        history = self._history[name]
        value = float(value)
        history.update(value, cur_iter)
        self._latest_scalars[name] = (value, cur_iter)

        existing_hint = self._smoothing_hints.get(name)
        if existing_hint is not None:
            assert (
                existing_hint == smoothing_hint
            ), "Scalar {} was put with a different smoothing_hint!".format(name)
        else:
            self._smoothing_hints[name] = smoothing_hint

    def __enter__(self):
        _CURRENT_STORAGE_STACK.append(self)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        assert _CURRENT_STORAGE_STACK[-1] == self
        _CURRENT_STORAGE_STACK.pop()


def get_event_storage():
    assert len(
        _CURRENT_STORAGE_STACK
    ), "get_event_storage() has to be called inside a 'with EventStorage(...)' context!"
    return _CURRENT_STORAGE_STACK[-1]


def empty_input_loss_func_wrapper(loss_func):
    def wrapped_loss_func(input, target, *, reduction="mean", **kwargs):
        """
        Same as `loss_func`, but returns 0 (instead of nan) for empty inputs.
        """
        if target.numel() == 0 and reduction == "mean":
            return input.sum() * 0.0  # connect the gradient
        return loss_func(input, target, reduction=reduction, **kwargs)

    return wrapped_loss_func


cross_entropy = empty_input_loss_func_wrapper(F.cross_entropy)


def _log_classification_stats(pred_logits, gt_classes, prefix="fast_rcnn"):
    """
    Log the classification metrics to EventStorage.

    Args:
        pred_logits: Rx(K+1) logits. The last column is for background class.
        gt_classes: R labels
    """
    num_instances = gt_classes.numel()
    if num_instances == 0:
        return
    pred_classes = pred_logits.argmax(dim=1)
    bg_class_ind = pred_logits.shape[1] - 1

    fg_inds = (gt_classes >= 0) & (gt_classes < bg_class_ind)
    num_fg = fg_inds.nonzero().numel()  # BREAK
    fg_gt_classes = gt_classes[fg_inds]  # BREAK
    fg_pred_classes = pred_classes[fg_inds]  # BREAK

    num_false_negative = (fg_pred_classes == bg_class_ind).nonzero().numel()  # BREAK
    num_accurate = (pred_classes == gt_classes).nonzero().numel()  # BREAK
    fg_num_accurate = (fg_pred_classes == fg_gt_classes).nonzero().numel()  # BREAK

    storage = get_event_storage()
    storage.put_scalar(f"{prefix}/cls_accuracy", num_accurate / num_instances)
    if num_fg > 0:
        storage.put_scalar(f"{prefix}/fg_cls_accuracy", fg_num_accurate / num_fg)
        storage.put_scalar(f"{prefix}/false_negative", num_false_negative / num_fg)


class FastRCNNOutputLayers(nn.Module):
    def __init__(self, input_size, num_classes, box_dim=4, loss_weight=1.0):
        super().__init__()
        self.num_classes = num_classes
        self.cls_score = nn.Linear(input_size, num_classes + 1)
        self.bbox_pred = nn.Linear(input_size, num_classes * box_dim)
        if isinstance(loss_weight, float):
            loss_weight = {"loss_cls": loss_weight, "loss_box_reg": loss_weight}
        self.loss_weight = loss_weight

    def forward(self, x):
        if x.dim() > 2:
            x = torch.flatten(x, start_dim=1)
        scores = self.cls_score(x)
        proposal_deltas = self.bbox_pred(x)
        return scores, proposal_deltas

    def losses(self, predictions, gt_classes):
        scores, proposal_deltas = predictions
        _log_classification_stats(scores, gt_classes)
        loss_cls = cross_entropy(scores, gt_classes, reduction="mean")
        losses = {"loss_cls": loss_cls}
        return {k: v * self.loss_weight.get(k, 1.0) for k, v in losses.items()}


class BoxHeadStep(nn.Module):
    """The training half of StandardROIHeads._forward_box: box head, predictor, losses."""

    def __init__(self, in_dim=12, hidden=16, num_classes=3):
        super().__init__()
        self.box_head = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU())
        self.box_predictor = FastRCNNOutputLayers(hidden, num_classes)

    def forward(self, box_features, gt_classes):
        box_features = self.box_head(box_features)
        predictions = self.box_predictor(box_features)
        return self.box_predictor.losses(predictions, gt_classes)


def target():
    torch.manual_seed(0)
    # the trainer has entered `with EventStorage(start_iter) as storage:` before each step
    if not _CURRENT_STORAGE_STACK:
        EventStorage(0).__enter__()
    model = BoxHeadStep()
    return [
        (model, (torch.randn(10, 12), torch.tensor([0, 3, 1, 3, 3, 2, 0, 3, 1, 3])), {}),
        (model, (torch.randn(10, 12), torch.tensor([3, 3, 2, 2, 3, 0, 3, 3, 3, 1])), {}),
    ]


EXPECT = ("hatch: `_log_classification_stats` only writes detached counts to the EventStorage and returns "
          "nothing; torch.compiler.disable on it keeps every count and the storage side effect eager while the "
          "box head and cross_entropy stay in the graph, outputs equal")
