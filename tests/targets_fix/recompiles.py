"""Recompile targets for `graphstitch fix` (one cause each; lines tagged for the tests)."""
import copy

import torch
from torch import nn


def rowsum(x):
    return x.sin().sum(0)  # ROWSUM


def make_shapes():
    """A batch whose length changes every call: one size-mismatch cause."""
    return [(rowsum, (torch.randn(n, 4),), {}) for n in (3, 5, 7, 9)]  # SHAPES_CALL


def scale_by(x, scale):
    return x * scale + 1  # SCALE


def make_float_scale():
    """A Python float that only feeds tensor math, new each call: guarded by value."""
    x = torch.randn(4)
    return [(scale_by, (x, s), {}) for s in (0.5, 1.5, 2.5, 3.5)]  # SCALE_CALL


def head(x, n):
    return x[:n].sum()  # SLICE


def make_int_slice():
    """An int that is a slice bound: a tensor would break; automatic dynamic generalises it."""
    x = torch.randn(10)
    return [(head, (x, n), {}) for n in (2, 3, 4, 5)]  # SLICE_CALL


def normalize(x):
    peak = x.abs().max().item()  # PEAK
    return x / peak  # DIVIDE


def make_item():
    """A float from .item() guarded by value in the resume function after the break."""
    return [(normalize, (torch.randn(6) * k,), {}) for k in (1.0, 2.0, 3.0)]


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0  # STEPS_INIT

    def forward(self, x):
        self.steps += 1  # STEPS
        return x * self.steps


def make_counter():
    """A module attribute counting calls: a new guarded value every call."""
    m = Counter()
    return [(m, (torch.randn(4),), {}) for _ in range(4)]


def make_counter_limit():
    """The same counter past recompile_limit (8): later calls run eagerly."""
    m = Counter()
    return [(m, (torch.randn(4),), {}) for _ in range(11)]


def make_lambdas():
    """A new closure per call: one code object, a new object each time."""
    return [((lambda x, k=k: x + k), (torch.randn(3),), {}) for k in (1, 2, 3)]  # LAMBDAS


def infer(m, x):
    return m(x)  # INFER


def make_train_eval():
    """The same layer in train then eval mode: a different graph by design."""
    torch.manual_seed(0)
    train = nn.BatchNorm1d(4)
    evaluate = copy.deepcopy(train).eval()
    return [(infer, (train, torch.randn(3, 4)), {}), (infer, (evaluate, torch.randn(3, 4)), {})]


def act(x, kind):
    return x.relu() if kind == "relu" else x.tanh()  # ACT


def make_modes():
    """A string argument that picks the code path: each value is its own graph by design."""
    x = torch.randn(4)
    return [(act, (x, "relu"), {}), (act, (x, "tanh"), {})]


def make_dtypes():
    """float32 then float64 inputs: each dtype is its own graph by design."""
    return [(rowsum, (torch.randn(3, 4),), {}), (rowsum, (torch.randn(3, 4, dtype=torch.float64),), {})]


def pool(img):
    return img.relu().amax(dim=(2, 3))  # POOL


def make_image_sizes():
    """Height and width both change: marking the first dimension only moves the recompile."""
    return [(pool, (torch.randn(1, 3, h, w),), {}) for h, w in ((8, 10), (12, 9), (10, 14))]  # SIZES_CALL


def crop_sum(scale, rows):
    return rows.sum(0) * scale


def per_batch(batches, scale):
    out = []
    for b in batches:
        print("batch")  # a break in a loop: Dynamo skips this frame, so crop_sum compiles as its own
        out.append(crop_sum(scale, b))
    return out


def make_inner_shapes():
    torch.manual_seed(0)
    return [(per_batch, ([torch.randn(n, 4)], 2.0), {}) for n in (3, 5, 7)]  # INNER_CALL
