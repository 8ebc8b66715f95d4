"""Permutation-invariant training loss for source separation (asteroid-team/asteroid `asteroid/losses/pit_wrapper.py`:
`PITLossWrapper.forward`, `get_pw_losses`, `find_best_perm`, `reorder_source`; `asteroid/losses/sdr.py`:
`PairwiseNegSDR` and its `pairwise_neg_sisdr` alias). The wrapper asserts `n_src < 10`, computes the pairwise
negative SI-SDR matrix, asserts its shape, builds `perms = pwl.new_tensor(list(permutations(range(n_src))))`, reduces
each permutation with a one-hot `einsum` (or a `perm_reduce` callable on `pwl[:, torch.arange(n_src), idx]`), takes
`torch.min(loss_set, dim=1)` and then the best permutation per item with `torch.stack([perms[m] for m in
min_loss_idx])` (a Python iteration over a tensor), and reorders the estimates with
`torch.stack([torch.index_select(s, 0, b) for s, b in zip(source, batch_indices)])`.
Adaptations: asteroid's `System.common_step` (`est_targets = self(inputs); loss = self.loss_func(est_targets,
targets)`) is written as a plain function; the separation model (Conv-TasNet etc.) is replaced by a minimal
stand-in (a Conv1d encoder, a sigmoid mask per source, a transposed-Conv1d decoder), sizes shrunk (3 sources, 64
samples). The first call uses the default mean reduction, the second a `perm_reduce` (the docstring's weighted
example, with the source norms broadcast over the permutation axis: as written, `src.norm(dim=-1, keepdim=True)`
does not broadcast against `[batch, n_src!, n_src]` for 3 sources)."""
from itertools import permutations

import torch
from torch import nn
from torch.nn.modules.loss import _Loss

EPS = 1e-8


class PairwiseNegSDR(_Loss):
    def __init__(self, sdr_type, zero_mean=True, take_log=True):
        super(PairwiseNegSDR, self).__init__()
        assert sdr_type in ["snr", "sisdr", "sdsdr"]
        self.sdr_type = sdr_type
        self.zero_mean = zero_mean
        self.take_log = take_log

    def forward(self, est_targets, targets):
        assert targets.size() == est_targets.size()
        # Step 1. Zero-mean norm
        if self.zero_mean:
            mean_source = torch.mean(targets, dim=2, keepdim=True)
            mean_estimate = torch.mean(est_targets, dim=2, keepdim=True)
            targets = targets - mean_source
            est_targets = est_targets - mean_estimate
        # Step 2. Pair-wise SI-SDR. (Reshape to use broadcast)
        s_target = torch.unsqueeze(targets, dim=1)
        s_estimate = torch.unsqueeze(est_targets, dim=2)

        if self.sdr_type in ["sisdr", "sdsdr"]:
            # [batch, n_src, n_src, 1]
            pair_wise_dot = torch.sum(s_estimate * s_target, dim=3,
                                      keepdim=True)
            # [batch, 1, n_src, 1]
            s_target_energy = torch.sum(s_target**2, dim=3, keepdim=True) + EPS
            # [batch, n_src, n_src, time]
            pair_wise_proj = pair_wise_dot * s_target / s_target_energy
        else:
            # [batch, n_src, n_src, time]
            pair_wise_proj = s_target.repeat(1, s_target.shape[2], 1, 1)
        if self.sdr_type in ["sdsdr", "snr"]:
            e_noise = s_estimate - s_target
        else:
            e_noise = s_estimate - pair_wise_proj
        # [batch, n_src, n_src]
        pair_wise_sdr = torch.sum(pair_wise_proj ** 2, dim=3) / (
                torch.sum(e_noise ** 2, dim=3) + EPS)
        if self.take_log:
            pair_wise_sdr = 10 * torch.log10(pair_wise_sdr + EPS)
        return - pair_wise_sdr


pairwise_neg_sisdr = PairwiseNegSDR("sisdr")


class PITLossWrapper(nn.Module):
    def __init__(self, loss_func, pit_from="pw_mtx", perm_reduce=None):
        super().__init__()
        self.loss_func = loss_func
        self.pit_from = pit_from
        self.perm_reduce = perm_reduce
        if self.pit_from not in ["pw_mtx", "pw_pt", "perm_avg"]:
            raise ValueError(
                "Unsupported loss function type for now. Expected"
                "one of [`pw_mtx`, `pw_pt`, `perm_avg`]"
            )

    def forward(self, est_targets, targets, return_est=False, reduce_kwargs=None, **kwargs):
        n_src = targets.shape[1]
        assert n_src < 10, f"Expected source axis along dim 1, found {n_src}"
        if self.pit_from == "pw_mtx":
            # Loss function already returns pairwise losses
            pw_losses = self.loss_func(est_targets, targets, **kwargs)
        elif self.pit_from == "pw_pt":
            # Compute pairwise losses with a for loop.
            pw_losses = self.get_pw_losses(self.loss_func, est_targets, targets, **kwargs)
        else:
            return

        assert pw_losses.ndim == 3, (
            "Something went wrong with the loss " "function, please read the docs."
        )
        assert pw_losses.shape[0] == targets.shape[0], "PIT loss needs same batch dim as input"

        reduce_kwargs = reduce_kwargs if reduce_kwargs is not None else dict()
        min_loss, batch_indices = self.find_best_perm(
            pw_losses, perm_reduce=self.perm_reduce, **reduce_kwargs
        )
        mean_loss = torch.mean(min_loss)
        if not return_est:
            return mean_loss
        reordered = self.reorder_source(est_targets, batch_indices)
        return mean_loss, reordered

    @staticmethod
    def get_pw_losses(loss_func, est_targets, targets, **kwargs):
        batch_size, n_src, *_ = targets.shape
        pair_wise_losses = targets.new_empty(batch_size, n_src, n_src)
        for est_idx, est_src in enumerate(est_targets.transpose(0, 1)):
            for target_idx, target_src in enumerate(targets.transpose(0, 1)):
                pair_wise_losses[:, est_idx, target_idx] = loss_func(est_src, target_src, **kwargs)
        return pair_wise_losses

    @staticmethod
    def find_best_perm(pair_wise_losses, perm_reduce=None, **kwargs):
        n_src = pair_wise_losses.shape[-1]
        # After transposition, dim 1 corresp. to sources and dim 2 to estimates
        pwl = pair_wise_losses.transpose(-1, -2)
        perms = pwl.new_tensor(list(permutations(range(n_src))), dtype=torch.long)
        # Column permutation indices
        idx = torch.unsqueeze(perms, 2)
        # Loss mean of each permutation
        if perm_reduce is None:
            # one-hot, [n_src!, n_src, n_src]
            perms_one_hot = pwl.new_zeros((*perms.size(), n_src)).scatter_(2, idx, 1)
            loss_set = torch.einsum("bij,pij->bp", [pwl, perms_one_hot])
            loss_set /= n_src
        else:
            # batch = pwl.shape[0]; n_perm = idx.shape[0]
            # [batch, n_src!, n_src] : Pairwise losses for each permutation.
            pwl_set = pwl[:, torch.arange(n_src), idx.squeeze(-1)]
            # Apply reduce [batch, n_src!, n_src] --> [batch, n_src!]
            loss_set = perm_reduce(pwl_set, **kwargs)
        # Indexes and values of min losses for each batch element
        min_loss, min_loss_idx = torch.min(loss_set, dim=1)

        # Permutation indices for each batch.
        batch_indices = torch.stack([perms[m] for m in min_loss_idx], dim=0)  # BREAK
        return min_loss, batch_indices

    @staticmethod
    def reorder_source(source, batch_indices):
        reordered_sources = torch.stack(
            [torch.index_select(s, 0, b) for s, b in zip(source, batch_indices)]
        )
        return reordered_sources


class TinySeparator(nn.Module):
    """Adaptation: stand-in for an asteroid separation model (encoder, masker, decoder)."""

    def __init__(self, n_src=3, n_filters=16, kernel_size=8, stride=4):
        super().__init__()
        self.n_src = n_src
        self.encoder = nn.Conv1d(1, n_filters, kernel_size, stride=stride, bias=False)
        self.masker = nn.Conv1d(n_filters, n_src * n_filters, 1)
        self.decoder = nn.ConvTranspose1d(n_filters, 1, kernel_size, stride=stride, bias=False)

    def forward(self, wav):
        tf_rep = torch.relu(self.encoder(wav.unsqueeze(1)))
        masks = torch.sigmoid(self.masker(tf_rep)).view(wav.shape[0], self.n_src, -1, tf_rep.shape[-1])
        masked = masks * tf_rep.unsqueeze(1)
        out = self.decoder(masked.view(-1, masked.shape[2], masked.shape[3]))
        return out.view(wav.shape[0], self.n_src, -1)[..., : wav.shape[-1]]


def weighted_reduce(perm_loss, src):
    weighted = perm_loss * src.norm(dim=-1)[:, None, :]
    return torch.mean(weighted, dim=-1)


def common_step(model, loss_func, batch, reduce_kwargs=None):
    inputs, targets = batch
    est_targets = model(inputs)
    loss, reordered = loss_func(est_targets, targets, return_est=True, reduce_kwargs=reduce_kwargs)
    return loss, reordered


def target():
    torch.manual_seed(0)
    model = TinySeparator(n_src=3)
    model.eval()
    pit = PITLossWrapper(pairwise_neg_sisdr, pit_from="pw_mtx")
    pit_weighted = PITLossWrapper(pairwise_neg_sisdr, pit_from="pw_mtx", perm_reduce=weighted_reduce)
    sources1 = torch.randn(4, 3, 64)
    sources2 = torch.randn(5, 3, 64)
    batch1 = (sources1.sum(1), sources1)
    batch2 = (sources2.sum(1), sources2)
    return [
        (common_step, (model, pit, batch1), {}),
        (common_step, (model, pit_weighted, batch2), {"reduce_kwargs": {"src": sources2}}),
    ]


EXPECT = ("rewrite: `torch.stack([perms[m] for m in min_loss_idx])` iterates a tensor in Python; it is "
          "`perms[min_loss_idx]` (one gather), and `reorder_source`'s zip comprehension is "
          "`torch.gather(source, 1, batch_indices[..., None].expand_as(source))`")
