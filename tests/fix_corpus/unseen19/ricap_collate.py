"""RICAP (random image cropping and patching) batch collator from hysts/pytorch_image_classification
(`pytorch_image_classification/collators/ricap.py`, stored revision 590fe76: `ricap`, `RICAPCollator`).
`RICAPCollator.__call__` collates the list of `(image, label)` pairs with `default_collate` and calls `ricap`,
which draws the crop ratio with `np.random.beta`, rounds the four patch sizes with NumPy, and in a Python loop over
`zip(ws, hs)` permutes the batch with `torch.randperm`, draws patch offsets with `np.random.randint`, slices the
permuted images with those Python/NumPy ints and records the targets and the Python-float area weights; the
patches are concatenated into the mixed batch.
Adaptations: `.astype(np.int)` is written `.astype(int)` (`np.int` was removed in NumPy 1.24); the `yacs` config
(not installed) is a stand-in object with the one field read, `config.augmentation.ricap.beta`. The collators (beta
0.3 and 1.0) and the lists of random CIFAR-shaped samples are made in the factory; the called function is the
original `RICAPCollator.__call__`, passed unbound with its collator. Randomness: `np.random.beta`/`randint` and
`torch.randperm` draw from NumPy's and torch's global generators, seeded in the factory only."""
from types import SimpleNamespace
from typing import List, Tuple

import numpy as np
import torch
import torch.utils.data


def ricap(
    batch: Tuple[torch.Tensor, torch.Tensor], beta: float
) -> Tuple[torch.Tensor, Tuple[List[torch.Tensor], List[float]]]:
    data, targets = batch
    image_h, image_w = data.shape[2:]
    ratio = np.random.beta(beta, beta, size=2)  # BREAK
    w0, h0 = np.round(np.array([image_w, image_h]) * ratio).astype(int)
    w1, h1 = image_w - w0, image_h - h0
    ws = [w0, w1, w0, w1]
    hs = [h0, h0, h1, h1]

    patches = []
    labels = []
    label_weights = []
    for w, h in zip(ws, hs):
        indices = torch.randperm(data.size(0))
        x0 = np.random.randint(0, image_w - w + 1)  # BREAK
        y0 = np.random.randint(0, image_h - h + 1)
        patches.append(data[indices, :, y0:y0 + h, x0:x0 + w])
        labels.append(targets[indices])
        label_weights.append(h * w / (image_h * image_w))

    data = torch.cat(
        [torch.cat(patches[:2], dim=3),
         torch.cat(patches[2:], dim=3)], dim=2)
    targets = (labels, label_weights)

    return data, targets


class RICAPCollator:
    def __init__(self, config):
        self.beta = config.augmentation.ricap.beta

    def __call__(
        self, batch: List[Tuple[torch.Tensor, int]]
    ) -> Tuple[torch.Tensor, Tuple[List[torch.Tensor], List[float]]]:
        batch = torch.utils.data.dataloader.default_collate(batch)  # BREAK
        batch = ricap(batch, self.beta)
        return batch


def target():
    torch.manual_seed(0)
    np.random.seed(0)

    def config(beta):
        """Stand-in for the yacs config node (only the field the collator reads)."""
        return SimpleNamespace(augmentation=SimpleNamespace(ricap=SimpleNamespace(beta=beta)))

    collator1, collator2 = RICAPCollator(config(0.3)), RICAPCollator(config(1.0))
    samples1 = [(torch.randn(3, 32, 32), int(i % 10)) for i in range(4)]
    samples2 = [(torch.randn(3, 24, 24), int((3 * i) % 10)) for i in range(6)]
    return [
        (RICAPCollator.__call__, (collator1, samples1), {}),
        (RICAPCollator.__call__, (collator2, samples2), {}),
    ]


EXPECT = ("none: the patch sizes and offsets are NumPy draws that become Python slice bounds and output shapes; "
          "moving them to torch would still need host values for the slices, and a collator is data-loading code "
          "that is not worth compiling")
