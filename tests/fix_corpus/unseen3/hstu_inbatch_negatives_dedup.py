"""Generative-recommenders (HSTU) in-batch negative sampling: `InBatchNegativesSampler.process_batch` keeps the
present ids with boolean masks (`ids[presences]`, `embeddings[presences]`) and de-duplicates them with
`torch.unique(..., sorted=False, return_inverse=True)` before the sampled BCE loss draws negatives from the cache.

Origin: facebookresearch/generative-recommenders
`generative_recommenders/modeling/sequential/autoregressive_losses.py` (`NegativesSampler`,
`InBatchNegativesSampler.process_batch` / `forward`, `BCELoss.jagged_forward`) and the training step of
`generative_recommenders/trainer/train.py` (`negatives_sampler.process_batch(ids=in_batch_ids,
presences=(in_batch_ids != 0), embeddings=...)` then `ar_loss(...)`). The HSTU encoder is replaced by a causal
running-mean encoder, `fbgemm.dense_to_jagged` (not installed) by flattening `[B, N-1]` with the `ar_mask` weights,
and the similarity module by a dot-product `interaction` stand-in.
"""
import abc
from typing import Tuple

import torch
import torch.nn.functional as F


class NegativesSampler(torch.nn.Module):
    def __init__(self, l2_norm: bool, l2_norm_eps: float) -> None:
        super().__init__()

        self._l2_norm: bool = l2_norm
        self._l2_norm_eps: float = l2_norm_eps

    def normalize_embeddings(self, x: torch.Tensor) -> torch.Tensor:
        return self._maybe_l2_norm(x)

    def _maybe_l2_norm(self, x: torch.Tensor) -> torch.Tensor:
        if self._l2_norm:
            x = x / torch.clamp(
                torch.linalg.norm(x, ord=2, dim=-1, keepdim=True),
                min=self._l2_norm_eps,
            )
        return x

    @abc.abstractmethod
    def process_batch(
        self,
        ids: torch.Tensor,
        presences: torch.Tensor,
        embeddings: torch.Tensor,
    ) -> None:
        pass


class InBatchNegativesSampler(NegativesSampler):
    def __init__(
        self,
        l2_norm: bool,
        l2_norm_eps: float,
        dedup_embeddings: bool,
    ) -> None:
        super().__init__(l2_norm=l2_norm, l2_norm_eps=l2_norm_eps)

        self._dedup_embeddings: bool = dedup_embeddings

    def process_batch(
        self,
        ids: torch.Tensor,
        presences: torch.Tensor,
        embeddings: torch.Tensor,
    ) -> None:
        """
        Args:
           ids: (N') or (B, N) x int64
           presences: (N') or (B, N) x bool
           embeddings: (N', D) or (B, N, D) x float
        """
        assert ids.size() == presences.size()
        assert ids.size() == embeddings.size()[:-1]
        if self._dedup_embeddings:
            valid_ids = ids[presences]  # BREAK
            unique_ids, unique_ids_inverse_indices = torch.unique(  # BREAK
                input=valid_ids, sorted=False, return_inverse=True
            )
            device = unique_ids.device
            unique_embedding_offsets = torch.empty(
                (unique_ids.numel(),),
                dtype=torch.int64,
                device=device,
            )
            unique_embedding_offsets[unique_ids_inverse_indices] = torch.arange(
                valid_ids.numel(), dtype=torch.int64, device=device
            )
            unique_embeddings = embeddings[presences][unique_embedding_offsets, :]  # BREAK
            self._cached_embeddings = self._maybe_l2_norm(unique_embeddings)
            self._cached_ids = unique_ids
        else:
            self._cached_embeddings = self._maybe_l2_norm(embeddings[presences])
            self._cached_ids = ids[presences]

    def forward(
        self,
        positive_ids: torch.Tensor,
        num_to_sample: int,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        Returns:
            A tuple of (sampled_ids, sampled_negative_embeddings,).
        """
        X = self._cached_ids.size(0)
        sampled_offsets = torch.randint(
            low=0,
            high=X,
            size=positive_ids.size() + (num_to_sample,),
            dtype=positive_ids.dtype,
            device=positive_ids.device,
        )
        return (
            self._cached_ids[sampled_offsets],
            self._cached_embeddings[sampled_offsets],
        )


class DotProductSimilarity(torch.nn.Module):
    """Stand-in for the similarity module: `interaction` returns (logits, aux)."""

    def interaction(self, input_embeddings, target_ids, target_embeddings):
        # [N', D] x [N', R, D] -> [N', R]
        return torch.bmm(target_embeddings, input_embeddings.unsqueeze(2)).squeeze(2), {}


class BCELoss(torch.nn.Module):
    def __init__(
        self,
        temperature: float,
        model,
    ) -> None:
        super().__init__()
        self._temperature: float = temperature
        self._model = model

    def jagged_forward(
        self,
        output_embeddings: torch.Tensor,
        supervision_ids: torch.Tensor,
        supervision_embeddings: torch.Tensor,
        supervision_weights: torch.Tensor,
        negatives_sampler: NegativesSampler,
    ) -> torch.Tensor:
        assert output_embeddings.size() == supervision_embeddings.size()
        assert supervision_ids.size() == supervision_embeddings.size()[:-1]
        assert supervision_ids.size() == supervision_weights.size()

        sampled_ids, sampled_negative_embeddings = negatives_sampler(
            positive_ids=supervision_ids,
            num_to_sample=1,
        )

        positive_logits = (
            self._model.interaction(
                input_embeddings=output_embeddings,  # [B, D] = [N', D]
                target_ids=supervision_ids.unsqueeze(1),  # [N', 1]
                target_embeddings=supervision_embeddings.unsqueeze(
                    1
                ),  # [N', D] -> [N', 1, D]
            )[0].squeeze(1)
            / self._temperature
        )  # [N']

        sampled_negatives_logits = (
            self._model.interaction(
                input_embeddings=output_embeddings,  # [N', D]
                target_ids=sampled_ids,  # [N', 1]
                target_embeddings=sampled_negative_embeddings,  # [N', 1, D]
            )[0].squeeze(1)
            / self._temperature
        )  # [N']
        sampled_negatives_valid_mask = (
            supervision_ids != sampled_ids.squeeze(1)
        ).float()  # [N']
        loss_weights = supervision_weights * sampled_negatives_valid_mask
        weighted_losses = (
            (
                F.binary_cross_entropy_with_logits(
                    input=positive_logits,
                    target=torch.ones_like(positive_logits),
                    reduction="none",
                )
                + F.binary_cross_entropy_with_logits(
                    input=sampled_negatives_logits,
                    target=torch.zeros_like(sampled_negatives_logits),
                    reduction="none",
                )
            )
            * loss_weights
            * 0.5
        )
        return weighted_losses.sum() / loss_weights.sum()


class SequentialRetrievalTrainStep(torch.nn.Module):
    """The loss side of one training step of `train.py`, with a small causal encoder in place of HSTU."""

    def __init__(self, num_items=50, dim=8):
        super().__init__()
        self._item_emb = torch.nn.Embedding(num_items + 1, dim, padding_idx=0)
        self._proj = torch.nn.Linear(dim, dim)
        self.negatives_sampler = InBatchNegativesSampler(l2_norm=True, l2_norm_eps=1e-6, dedup_embeddings=True)
        self.ar_loss = BCELoss(temperature=0.05, model=DotProductSimilarity())

    def get_item_embeddings(self, item_ids):
        return self._item_emb(item_ids)

    def encode(self, past_embeddings):
        steps = torch.arange(1, past_embeddings.size(1) + 1, device=past_embeddings.device)
        return self._proj(past_embeddings.cumsum(1) / steps[None, :, None])

    def forward(self, past_ids):
        input_embeddings = self.get_item_embeddings(past_ids)
        seq_embeddings = self.encode(input_embeddings)  # [B, N, D]

        supervision_ids = past_ids

        # get_item_embeddings currently assume 1-d tensor.
        in_batch_ids = supervision_ids.view(-1)
        self.negatives_sampler.process_batch(
            ids=in_batch_ids,
            presences=(in_batch_ids != 0),
            embeddings=self.get_item_embeddings(in_batch_ids),
        )

        ar_mask = supervision_ids[:, 1:] != 0
        D = input_embeddings.size(-1)
        return self.ar_loss.jagged_forward(
            output_embeddings=seq_embeddings[:, :-1, :].reshape(-1, D),  # [B*(N-1), D]
            supervision_ids=supervision_ids[:, 1:].reshape(-1),  # [B*(N-1)]
            supervision_embeddings=input_embeddings[:, 1:, :].reshape(-1, D),
            supervision_weights=ar_mask.float().reshape(-1),
            negatives_sampler=self.negatives_sampler,
        )


def _histories(lengths, n=8, num_items=50):
    rows = []
    for length in lengths:
        ids = torch.randint(1, num_items + 1, (length,)).tolist()
        rows.append(ids + [0] * (n - length))
    return torch.tensor(rows)


def target():
    torch.manual_seed(0)
    step = SequentialRetrievalTrainStep()
    ids1 = _histories([8, 5, 6, 3])
    ids2 = _histories([4, 8, 7, 6])
    return [
        (step, (ids1,), {}),
        (step, (ids2,), {}),
    ]


EXPECT = ("config: `torch._dynamo.config.capture_dynamic_output_shape_ops = True` lets the boolean-mask reads and "
          "`torch.unique(..., return_inverse=True)` trace with unbacked sizes; the cache is written once per step")
