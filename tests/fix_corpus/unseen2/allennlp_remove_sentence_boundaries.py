"""remove_sentence_boundaries: `mask.sum(dim=1).detach().cpu().numpy()` then a per-row Python loop `if j > 2:` slicing `tensor[i, 1 : (j - 1), :]` (AllenNLP nn/util.py, used by modules/elmo.py)."""
from typing import List, Tuple

import torch


def remove_sentence_boundaries(
    tensor: torch.Tensor, mask: torch.BoolTensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    Remove begin/end of sentence embeddings from the batch of sentences.
    Given a batch of sentences with size `(batch_size, timesteps, dim)`
    this returns a tensor of shape `(batch_size, timesteps - 2, dim)` after removing
    the beginning and end sentence markers.  The sentences are assumed to be padded on the right,
    with the beginning of each sentence assumed to occur at index 0 (i.e., `mask[:, 0]` is assumed
    to be 1).

    Returns both the new tensor and updated mask.
    """
    sequence_lengths = mask.sum(dim=1).detach().cpu().numpy()
    tensor_shape = list(tensor.data.shape)
    new_shape = list(tensor_shape)
    new_shape[1] = tensor_shape[1] - 2
    tensor_without_boundary_tokens = tensor.new_zeros(*new_shape)
    new_mask = tensor.new_zeros((new_shape[0], new_shape[1]), dtype=torch.bool)
    for i, j in enumerate(sequence_lengths):
        if j > 2:  # BREAK
            tensor_without_boundary_tokens[i, : (j - 2), :] = tensor[i, 1 : (j - 1), :]
            new_mask[i, : (j - 2)] = True

    return tensor_without_boundary_tokens, new_mask


class ScalarMix(torch.nn.Module):
    """
    Computes a parameterised scalar mixture of N tensors, `mixture = gamma * sum(s_k * tensor_k)`
    where `s = softmax(w)`, with `w` and `gamma` scalar parameters.
    """

    def __init__(self, mixture_size: int, trainable: bool = True) -> None:
        super().__init__()
        self.mixture_size = mixture_size
        self.do_layer_norm = False
        initial_scalar_parameters = [0.0] * mixture_size
        self.scalar_parameters = torch.nn.ParameterList(
            [
                torch.nn.Parameter(
                    torch.FloatTensor([initial_scalar_parameters[i]]), requires_grad=trainable
                )
                for i in range(mixture_size)
            ]
        )
        self.gamma = torch.nn.Parameter(torch.FloatTensor([1.0]), requires_grad=trainable)

    def forward(self, tensors: List[torch.Tensor], mask: torch.BoolTensor = None) -> torch.Tensor:
        normed_weights = torch.nn.functional.softmax(
            torch.cat([parameter for parameter in self.scalar_parameters]), dim=0
        )
        normed_weights = torch.split(normed_weights, split_size_or_sections=1)

        pieces = []
        for weight, tensor in zip(normed_weights, tensors):
            pieces.append(weight * tensor)
        return self.gamma * sum(pieces)


class TinyElmo(torch.nn.Module):
    """Elmo.forward with keep_sentence_boundaries=False over a stand-in biLM (token embedding + 2 layers)."""

    def __init__(self, vocab=20, dim=6, num_output_representations=1):
        super().__init__()
        self._token_embedder = torch.nn.Embedding(vocab, dim, padding_idx=0)
        self._layers = torch.nn.ModuleList([torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)])
        self._keep_sentence_boundaries = False
        self._dropout = torch.nn.Dropout(p=0.0)
        self._scalar_mixes = []
        for k in range(num_output_representations):
            scalar_mix = ScalarMix(len(self._layers) + 1)
            self.add_module("scalar_mix_{}".format(k), scalar_mix)
            self._scalar_mixes.append(scalar_mix)

    def _elmo_lstm(self, inputs_with_bos_eos):
        mask_with_bos_eos = inputs_with_bos_eos > 0
        x = self._token_embedder(inputs_with_bos_eos)
        activations = [x]
        for layer in self._layers:
            x = torch.tanh(layer(x))
            activations.append(x)
        return {"activations": activations, "mask": mask_with_bos_eos}

    def forward(self, inputs):
        bilm_output = self._elmo_lstm(inputs)
        layer_activations = bilm_output["activations"]
        mask_with_bos_eos = bilm_output["mask"]

        # compute the elmo representations
        representations = []
        for i in range(len(self._scalar_mixes)):
            scalar_mix = getattr(self, "scalar_mix_{}".format(i))
            representation_with_bos_eos = scalar_mix(layer_activations, mask_with_bos_eos)
            if self._keep_sentence_boundaries:
                processed_representation = representation_with_bos_eos
                processed_mask = mask_with_bos_eos
            else:
                representation_without_bos_eos, mask_without_bos_eos = remove_sentence_boundaries(
                    representation_with_bos_eos, mask_with_bos_eos
                )
                processed_representation = representation_without_bos_eos
                processed_mask = mask_without_bos_eos
            representations.append(self._dropout(processed_representation))

        return {"elmo_representations": representations, "mask": processed_mask}


def target():
    torch.manual_seed(0)
    elmo = TinyElmo()
    # token ids with <S>=1 ... </S>=2 and right padding 0
    ids1 = torch.tensor([[1, 5, 7, 9, 2, 0, 0], [1, 4, 2, 0, 0, 0, 0], [1, 3, 3, 8, 6, 11, 2]])
    ids2 = torch.tensor([[1, 9, 2, 0, 0, 0, 0], [1, 4, 6, 12, 13, 2, 0], [1, 2, 0, 0, 0, 0, 0]])
    return [(elmo, (ids1,), {}), (elmo, (ids2,), {})]


EXPECT = ("rewrite: the `.cpu().numpy()` lengths only drive a per-row copy; the same result is "
          "`tensor[:, 1:-1] * keep[..., None]` with `keep = arange(T - 2)[None] < (lengths - 2)[:, None]` "
          "(rows of length <= 2 stay all zeros) and `new_mask = keep`, no host copy, equal outputs")
