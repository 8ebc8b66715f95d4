"""Class prototypes over `labels.unique()` (few-shot learning code)."""
import torch


def prototypes(x, labels):
    protos = torch.stack([x[labels == c].mean(0) for c in labels.unique()])  # BREAK
    return protos @ protos.T


def target():
    torch.manual_seed(0)
    return [(prototypes, (torch.randn(10, 4), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 2])), {})]


EXPECT = ('rewrite: unique(return_inverse=True) + index_add_ / bincount, with capture_dynamic_output_shape_ops '
          'written after the imports (the class count is data-dependent)')
