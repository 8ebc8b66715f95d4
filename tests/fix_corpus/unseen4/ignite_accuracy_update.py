"""Multilabel accuracy in an evaluation step: `if not torch.equal(y, y ** 2): raise ValueError(...)` input
validation and `self._num_correct += torch.sum(correct).item()` in `update`, then `compute` (pytorch/ignite
ignite/metrics/accuracy.py: _BaseClassification._check_shape/_check_binary_multilabel_cases/_check_type,
Accuracy.reset/update/compute; ignite/metrics/metric.py: Metric, reinit__is_reduced, sync_all_reduce).
`Metric` and the distributed helpers are reduced to what the single-process path runs; the metric is reset at
the start of each step, so every call starts from the same state."""
from abc import ABCMeta, abstractmethod
from functools import wraps
from typing import Callable, Optional, Sequence, Union

import torch


class NotComputableError(RuntimeError):
    """Exception class to raise if Metric cannot be computed."""


def get_world_size() -> int:
    """Stand-in for ignite.distributed.get_world_size (no process group)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


class Metric(metaclass=ABCMeta):
    def __init__(self, output_transform: Callable = lambda x: x,
                 device: Union[str, torch.device] = torch.device("cpu")):
        self._output_transform = output_transform
        self._device = torch.device(device)
        self._is_reduced = False
        self.reset()

    @abstractmethod
    def reset(self) -> None:
        pass

    @abstractmethod
    def update(self, output) -> None:
        pass

    @abstractmethod
    def compute(self):
        pass


def reinit__is_reduced(func: Callable) -> Callable:
    @wraps(func)
    def wrapper(self, *args, **kwargs):
        func(self, *args, **kwargs)
        self._is_reduced = False

    setattr(wrapper, "_decorated", True)
    return wrapper


def sync_all_reduce(*attrs) -> Callable:
    def wrapper(func: Callable) -> Callable:
        @wraps(func)
        def another_wrapper(self: Metric, *args, **kwargs):
            if not isinstance(self, Metric):
                raise RuntimeError(
                    "Decorator sync_all_reduce should be used on ignite.metric.Metric class methods only"
                )
            ws = get_world_size()
            if len(attrs) > 0 and not self._is_reduced:
                if ws > 1:
                    raise RuntimeError("distributed reduction is not part of this stand-in")
                self._is_reduced = True

            return func(self, *args, **kwargs)

        return another_wrapper

    setattr(wrapper, "_decorated", True)
    return wrapper


class _BaseClassification(Metric):
    def __init__(
        self,
        output_transform: Callable = lambda x: x,
        is_multilabel: bool = False,
        is_variable_multiclass: bool = False,
        device: Optional[Union[str, torch.device]] = None,
    ):
        self._is_multilabel = is_multilabel
        self._is_variable_multiclass = is_variable_multiclass
        self._type = None
        self._num_classes = None
        super(_BaseClassification, self).__init__(output_transform=output_transform, device=device or "cpu")

    def reset(self) -> None:
        self._type = None
        self._num_classes = None

    def _check_shape(self, output: Sequence[torch.Tensor]) -> None:
        y_pred, y = output

        if not (y.ndimension() == y_pred.ndimension() or y.ndimension() + 1 == y_pred.ndimension()):
            raise ValueError(
                "y must have shape of (batch_size, ...) and y_pred must have "
                "shape of (batch_size, num_categories, ...) or (batch_size, ...), "
                "but given {} vs {}.".format(y.shape, y_pred.shape)
            )

        y_shape = y.shape
        y_pred_shape = y_pred.shape

        if y.ndimension() + 1 == y_pred.ndimension():
            y_pred_shape = (y_pred_shape[0],) + y_pred_shape[2:]

        if not (y_shape == y_pred_shape):
            raise ValueError("y and y_pred must have compatible shapes.")

        if self._is_multilabel and not (y.shape == y_pred.shape and y.ndimension() > 1 and y.shape[1] != 1):
            raise ValueError("y and y_pred must have same shape of (batch_size, num_categories, ...).")

    def _check_binary_multilabel_cases(self, output: Sequence[torch.Tensor]) -> None:
        y_pred, y = output

        if not torch.equal(y, y ** 2):  # BREAK
            raise ValueError("For binary cases, y must be comprised of 0's and 1's.")

        if not torch.equal(y_pred, y_pred ** 2):  # BREAK
            raise ValueError("For binary cases, y_pred must be comprised of 0's and 1's.")

    def _check_type(self, output: Sequence[torch.Tensor]) -> None:
        y_pred, y = output

        if y.ndimension() + 1 == y_pred.ndimension():
            num_classes = y_pred.shape[1]
            if num_classes == 1:
                update_type = "binary"
                self._check_binary_multilabel_cases((y_pred, y))
            else:
                update_type = "multiclass"
        elif y.ndimension() == y_pred.ndimension():
            self._check_binary_multilabel_cases((y_pred, y))

            if self._is_multilabel:
                update_type = "multilabel"
                num_classes = y_pred.shape[1]
            else:
                update_type = "binary"
                num_classes = 1
        else:
            raise RuntimeError(
                "Invalid shapes of y (shape={}) and y_pred (shape={}), check documentation."
                " for expected shapes of y and y_pred.".format(y.shape, y_pred.shape)
            )
        if self._type is None:
            self._type = update_type
            self._num_classes = num_classes
        else:
            if self._type != update_type:
                raise RuntimeError("Input data type has changed from {} to {}.".format(self._type, update_type))
            if self._num_classes != num_classes:
                if not self._is_variable_multiclass:
                    raise ValueError(
                        "Input data number of classes has changed from {} to {}".format(self._num_classes, num_classes)
                    )


class Accuracy(_BaseClassification):
    def __init__(
        self,
        output_transform: Callable = lambda x: x,
        is_multilabel: bool = False,
        is_variable_multiclass: bool = False,
        device: Optional[Union[str, torch.device]] = None,
    ):
        self._num_correct = None
        self._num_examples = None
        super(Accuracy, self).__init__(
            output_transform=output_transform,
            is_multilabel=is_multilabel,
            is_variable_multiclass=is_variable_multiclass,
            device=device
        )

    @reinit__is_reduced
    def reset(self) -> None:
        self._num_correct = 0
        self._num_examples = 0
        super(Accuracy, self).reset()

    @reinit__is_reduced
    def update(self, output: Sequence[torch.Tensor]) -> None:
        y_pred, y = output
        self._check_shape((y_pred, y))
        self._check_type((y_pred, y))

        if self._type == "binary":
            correct = torch.eq(y_pred.view(-1).to(y), y.view(-1))
        elif self._type == "multiclass":
            indices = torch.argmax(y_pred, dim=1)
            correct = torch.eq(indices, y).view(-1)
        elif self._type == "multilabel":
            # if y, y_pred shape is (N, C, ...) -> (N x ..., C)
            num_classes = y_pred.size(1)
            last_dim = y_pred.ndimension()
            y_pred = torch.transpose(y_pred, 1, last_dim - 1).reshape(-1, num_classes)
            y = torch.transpose(y, 1, last_dim - 1).reshape(-1, num_classes)
            correct = torch.all(y == y_pred.type_as(y), dim=-1)

        self._num_correct += torch.sum(correct).item()  # BREAK
        self._num_examples += correct.shape[0]

    @sync_all_reduce("_num_examples", "_num_correct")
    def compute(self) -> torch.Tensor:
        if self._num_examples == 0:
            raise NotComputableError("Accuracy must have at least one example before it can be computed.")
        return self._num_correct / self._num_examples


def thresholded_output_transform(output):
    y_pred, y = output
    y_pred = torch.round(y_pred)
    return y_pred, y


def eval_step(model, metric, x, y):
    """One evaluator iteration (process function + metric update), computed per batch."""
    metric.reset()
    with torch.no_grad():
        y_pred = torch.sigmoid(model(x))
    metric.update(thresholded_output_transform((y_pred, y)))
    return metric.compute()


def target():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    metric = Accuracy(is_multilabel=True)
    return [
        (eval_step, (model, metric, torch.randn(32, 8), torch.randint(0, 2, (32, 4)).float()), {}),
        (eval_step, (model, metric, torch.randn(32, 8), torch.randint(0, 2, (32, 4)).float()), {}),
    ]


EXPECT = ("rewrite: keep `_num_correct` a tensor (`+= torch.sum(correct)` without `.item()`) and skip the 0/1 "
          "`torch.equal` validation while compiling (`torch.compiler.is_compiling()`)")
