"""LabelSmoothingLoss: `total = len(target) - ignore.sum().item()` as the length-normalizing denominator (ESPnet transformer/label_smoothing_loss.py)."""
import torch
from torch import nn


class LabelSmoothingLoss(nn.Module):
    """Label-smoothing loss.

    :param int size: the number of class
    :param int padding_idx: ignored class id
    :param float smoothing: smoothing rate (0.0 means the conventional CE)
    :param bool normalize_length: normalize loss by sequence length if True
    :param torch.nn.Module criterion: loss function to be smoothed
    """

    def __init__(
        self,
        size,
        padding_idx,
        smoothing,
        normalize_length=False,
        criterion=nn.KLDivLoss(reduction="none"),
    ):
        """Construct an LabelSmoothingLoss object."""
        super(LabelSmoothingLoss, self).__init__()
        self.criterion = criterion
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.true_dist = None
        self.normalize_length = normalize_length

    def forward(self, x, target):
        """Compute loss between x and target.

        :param torch.Tensor x: prediction (batch, seqlen, class)
        :param torch.Tensor target:
            target signal masked with self.padding_id (batch, seqlen)
        :return: scalar float value
        :rtype torch.Tensor
        """
        assert x.size(2) == self.size
        batch_size = x.size(0)
        x = x.view(-1, self.size)
        target = target.view(-1)
        with torch.no_grad():
            true_dist = x.clone()
            true_dist.fill_(self.smoothing / (self.size - 1))
            ignore = target == self.padding_idx  # (B,)
            total = len(target) - ignore.sum().item()  # BREAK
            target = target.masked_fill(ignore, 0)  # avoid -1 index
            true_dist.scatter_(1, target.unsqueeze(1), self.confidence)
        kl = self.criterion(torch.log_softmax(x, dim=1), true_dist)
        denom = total if self.normalize_length else batch_size
        return kl.masked_fill(ignore.unsqueeze(1), 0).sum() / denom


class AttentionDecoderLoss(nn.Module):
    """Output layer of a transformer decoder plus the attention loss of E2E.forward."""

    def __init__(self, adim=8, odim=7, ignore_id=-1, lsm_weight=0.1):
        super().__init__()
        self.output_layer = nn.Linear(adim, odim)
        self.criterion = LabelSmoothingLoss(odim, ignore_id, lsm_weight, normalize_length=True)

    def forward(self, hs_pad, ys_out_pad):
        pred_pad = self.output_layer(hs_pad)
        return self.criterion(pred_pad, ys_out_pad)


def target():
    torch.manual_seed(0)
    model = AttentionDecoderLoss()
    ys1 = torch.tensor([[1, 2, 3, 6, -1], [4, 5, 6, -1, -1]])
    ys2 = torch.tensor([[2, 2, 6, -1, -1], [3, 1, 4, 5, 6]])
    return [
        (model, (torch.randn(2, 5, 8), ys1), {}),
        (model, (torch.randn(2, 5, 8), ys2), {}),
    ]


EXPECT = ("rewrite: keep `total = len(target) - ignore.sum()` as a tensor (drop `.item()`); dividing the summed "
          "KL by it gives the same loss")
