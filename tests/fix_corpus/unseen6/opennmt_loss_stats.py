"""OpenNMT-py loss statistics: after the label-smoothed loss, `_stats` reads
`num_correct = pred.eq(target).masked_select(non_padding).sum().item()`, `num_non_padding = non_padding.sum().item()`
and `loss.item()` into an `onmt.utils.Statistics` object (whose constructor reads `time.time()`), then accuracy,
cross-entropy and perplexity are computed from it in Python (OpenNMT/OpenNMT-py onmt/utils/loss.py: LossComputeBase,
NMTLossCompute._make_shard_state/_compute_loss/_stats/_bottle, LabelSmoothingLoss; onmt/utils/statistics.py:
Statistics.__init__/accuracy/xent/ppl; the 1.x/2.x revisions before the loss moved to `onmt/utils/loss.py`'s
`LossCompute`). The sharded backward of `__call__` is left out: the call computes the loss and statistics of one
batch (the validation path, `shard_size=0`) and returns the loss with accuracy, xent and ppl (not the start time).
The generator is a Linear + LogSoftmax as built by onmt's model builder."""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Statistics(object):
    """
    Accumulator for loss statistics.
    Currently calculates:

    * accuracy
    * perplexity
    * elapsed time
    """

    def __init__(self, loss=0, n_words=0, n_correct=0):
        self.loss = loss
        self.n_words = n_words
        self.n_correct = n_correct
        self.n_src_words = 0
        self.start_time = time.time()

    def accuracy(self):
        """ compute accuracy """
        return 100 * (self.n_correct / self.n_words)

    def xent(self):
        """ compute cross entropy """
        return self.loss / self.n_words

    def ppl(self):
        """ compute perplexity """
        return math.exp(min(self.loss / self.n_words, 100))


class LabelSmoothingLoss(nn.Module):
    """
    With label smoothing,
    KL-divergence between q_{smoothed ground truth prob.}(w)
    and p_{prob. computed by model}(w) is minimized.
    """
    def __init__(self, label_smoothing, tgt_vocab_size, ignore_index=-100):
        assert 0.0 < label_smoothing <= 1.0
        self.ignore_index = ignore_index
        super(LabelSmoothingLoss, self).__init__()

        smoothing_value = label_smoothing / (tgt_vocab_size - 2)
        one_hot = torch.full((tgt_vocab_size,), smoothing_value)
        one_hot[self.ignore_index] = 0
        self.register_buffer('one_hot', one_hot.unsqueeze(0))

        self.confidence = 1.0 - label_smoothing

    def forward(self, output, target):
        """
        output (FloatTensor): batch_size x n_classes
        target (LongTensor): batch_size
        """
        model_prob = self.one_hot.repeat(target.size(0), 1)
        model_prob.scatter_(1, target.unsqueeze(1), self.confidence)
        model_prob.masked_fill_((target == self.ignore_index).unsqueeze(1), 0)

        return F.kl_div(output, model_prob, reduction='sum')


class LossComputeBase(nn.Module):
    def __init__(self, criterion, generator):
        super(LossComputeBase, self).__init__()
        self.criterion = criterion
        self.generator = generator

    @property
    def padding_idx(self):
        return self.criterion.ignore_index

    def _stats(self, loss, scores, target):
        """
        Args:
            loss (:obj:`FloatTensor`): the loss computed by the loss criterion.
            scores (:obj:`FloatTensor`): a score for each possible output
            target (:obj:`FloatTensor`): true targets

        Returns:
            :obj:`onmt.utils.Statistics` : statistics for this batch.
        """
        pred = scores.max(1)[1]
        non_padding = target.ne(self.padding_idx)
        num_correct = pred.eq(target).masked_select(non_padding).sum().item()  # BREAK
        num_non_padding = non_padding.sum().item()  # BREAK
        return Statistics(loss.item(), num_non_padding, num_correct)  # BREAK

    def _bottle(self, _v):
        return _v.view(-1, _v.size(2))

    def _unbottle(self, _v, batch_size):
        return _v.view(batch_size, -1, _v.size(1))


class NMTLossCompute(LossComputeBase):
    """
    Standard NMT Loss Computation.
    """
    def __init__(self, criterion, generator, normalization="sents"):
        super(NMTLossCompute, self).__init__(criterion, generator)

    def _make_shard_state(self, tgt, output, range_):
        return {
            "output": output,
            "target": tgt[range_[0] + 1: range_[1], :, 0],
        }

    def _compute_loss(self, output, target):

        bottled_output = self._bottle(output)

        scores = self.generator(bottled_output)
        gtruth = target.contiguous().view(-1)

        loss = self.criterion(scores, gtruth)
        stats = self._stats(loss.clone(), scores, gtruth)

        return loss, stats

    def forward(self, tgt, output):
        """The `shard_size == 0` path of LossComputeBase.__call__ (validation)."""
        trunc_range = (0, tgt.size(0))
        shard_state = self._make_shard_state(tgt, output, trunc_range)
        loss, stats = self._compute_loss(**shard_state)
        return loss, stats.accuracy(), stats.xent(), stats.ppl()


def _batch(tgt_len, batch, vocab, hidden, pad):
    tgt = torch.randint(2, vocab, (tgt_len, batch, 1))
    tgt[tgt_len - 2:, 0, 0] = pad                     # a shorter sentence in the batch
    output = torch.randn(tgt_len - 1, batch, hidden)
    return tgt, output


def target():
    torch.manual_seed(0)
    vocab, hidden, pad = 12, 8, 1
    generator = nn.Sequential(nn.Linear(hidden, vocab), nn.LogSoftmax(dim=-1))
    criterion = LabelSmoothingLoss(0.1, vocab, ignore_index=pad)
    loss_compute = NMTLossCompute(criterion, generator)
    tgt1, out1 = _batch(7, 3, vocab, hidden, pad)
    tgt2, out2 = _batch(7, 3, vocab, hidden, pad)
    return [
        (loss_compute, (tgt1, out1), {}),
        (loss_compute, (tgt2, out2), {}),
    ]


EXPECT = ("rewrite: keep the statistics as tensors in the compiled step (`num_correct = pred.eq(target)"
          ".logical_and(non_padding).sum()`, `non_padding.sum()`, `loss.detach()`; masked_select followed by sum is "
          "the same as summing under the mask) and build the `Statistics` object (its `.item()`s, `time.time()` and "
          "the Python accuracy/xent/ppl arithmetic) in the caller, after the compiled region")
