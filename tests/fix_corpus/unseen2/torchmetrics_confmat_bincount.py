"""multiclass_confusion_matrix: `torch.bincount(unique_mapping, minlength=num_classes**2)` in `_bincount` (torchmetrics utilities/data.py, functional/classification/confusion_matrix.py)."""
from typing import Optional

import torch
from torch import Tensor

_XLA_AVAILABLE = False


def _bincount(x: Tensor, minlength: Optional[int] = None) -> Tensor:
    """Implement custom bincount.

    PyTorch currently does not support ``torch.bincount`` when running in deterministic mode on GPU or when running
    MPS devices or when running on XLA device. This implementation therefore falls back to using a combination of
    `torch.arange` and `torch.eq` in these scenarios.
    """
    if minlength is None:
        minlength = len(torch.unique(x))

    if torch.are_deterministic_algorithms_enabled() or _XLA_AVAILABLE or x.is_mps:
        mesh = torch.arange(minlength, device=x.device).repeat(len(x), 1)
        return torch.eq(x.reshape(-1, 1), mesh).sum(dim=0)

    return torch.bincount(x, minlength=minlength)  # BREAK


def _multiclass_confusion_matrix_arg_validation(
    num_classes: int,
    ignore_index: Optional[int] = None,
    normalize: Optional[str] = None,
) -> None:
    if not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"Argument `num_classes` should be an integer larger than 1, but got {num_classes}")
    if ignore_index is not None and not isinstance(ignore_index, int):
        raise ValueError(f"Expected argument `ignore_index` to either be `None` or an integer, but got {ignore_index}")
    allowed_normalize = ("true", "pred", "all", "none", None)
    if normalize not in allowed_normalize:
        raise ValueError(f"Expected argument `normalize` to be one of {allowed_normalize}, but got {normalize}.")


def _multiclass_confusion_matrix_format(
    preds: Tensor,
    target: Tensor,
    ignore_index: Optional[int] = None,
    convert_to_labels: bool = True,
):
    # Apply argmax if we have one more dimension
    if preds.ndim == target.ndim + 1 and convert_to_labels:
        preds = preds.argmax(dim=1)

    preds = preds.flatten() if convert_to_labels else torch.movedim(preds, 1, -1).reshape(-1, preds.shape[1])
    target = target.flatten()

    if ignore_index is not None:
        idx = target != ignore_index
        preds = preds[idx]
        target = target[idx]

    return preds, target


def _multiclass_confusion_matrix_update(preds: Tensor, target: Tensor, num_classes: int) -> Tensor:
    unique_mapping = target.to(torch.long) * num_classes + preds.to(torch.long)
    bins = _bincount(unique_mapping, minlength=num_classes**2)
    return bins.reshape(num_classes, num_classes)


def _multiclass_confusion_matrix_compute(confmat: Tensor, normalize: Optional[str] = None) -> Tensor:
    if normalize is not None and normalize != "none":
        raise NotImplementedError("only normalize=None is used in this adaptation")
    return confmat


def multiclass_confusion_matrix(
    preds: Tensor,
    target: Tensor,
    num_classes: int,
    normalize: Optional[str] = None,
    ignore_index: Optional[int] = None,
    validate_args: bool = True,
) -> Tensor:
    if validate_args:
        _multiclass_confusion_matrix_arg_validation(num_classes, ignore_index, normalize)
    preds, target = _multiclass_confusion_matrix_format(preds, target, ignore_index)
    confmat = _multiclass_confusion_matrix_update(preds, target, num_classes)
    return _multiclass_confusion_matrix_compute(confmat, normalize)


class ClassifierWithConfmat(torch.nn.Module):
    """An eval step that returns the logits and the batch's confusion matrix."""

    def __init__(self, in_dim=6, num_classes=4):
        super().__init__()
        self.num_classes = num_classes
        self.head = torch.nn.Linear(in_dim, num_classes)

    def forward(self, x, y):
        logits = self.head(x)
        confmat = multiclass_confusion_matrix(logits, y, self.num_classes)
        return logits, confmat


def target():
    torch.manual_seed(0)
    model = ClassifierWithConfmat()
    return [
        (model, (torch.randn(12, 6), torch.randint(0, 4, (12,))), {}),
        (model, (torch.randn(12, 6), torch.randint(0, 4, (12,))), {}),
    ]


EXPECT = ("rewrite: `torch.bincount` has a data-dependent output length; with minlength=num_classes**2 and in-range "
          "labels the counts have a static length, so the deterministic branch's "
          "`torch.eq(x.reshape(-1, 1), arange(minlength)).sum(0)` (or a scatter_add into zeros(minlength)) gives the "
          "same matrix; config capture_dynamic_output_shape_ops is the alternative")
