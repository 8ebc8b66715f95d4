"""Music source separation inference with chunking and the random "shift trick" (facebookresearch/demucs:
`demucs/apply.py`: `BagOfModels`, `TensorChunk`, `tensor_chunk`, `apply_model`; `demucs/utils.py`:
`center_trim`). `apply_model` recurses: for a `BagOfModels` it applies each sub-model (moving it with
`sub_model.to(device)` after reading `next(iter(sub_model.parameters())).device`), weights each source in a Python
loop (`out[:, k, :, :] *= inst_weight`) and normalises; with `split` it walks `range(0, length, stride)` offsets
(optionally through `tqdm`), builds a triangular weight with `th.arange`, `assert len(weight) == segment`, calls
itself on `TensorChunk` objects (plain Python classes holding a tensor, offset and length, with `padded()` slicing
and `F.pad` and an `assert out.shape[-1] == target_length`), accumulates into `out[..., offset:offset + segment]`,
and `assert sum_weight.min() > 0` (a tensor test); with `shifts` it pads by half a second and, per shift, draws
`offset = random.randint(0, max_shift)` from Python's `random` and crops the shifted output; the innermost call pads
to `model.valid_length(length)`, runs the model under `th.no_grad()` and `center_trim`s the result (which raises a
`ValueError` with an f-string when the output is too short).
Adaptations: the Demucs/HDemucs networks (and their pretrained checkpoints) are replaced by a minimal stand-in
(`TinySeparator`: the attributes `sources`, `samplerate`, `audio_channels`, `segment` and a `valid_length` that
rounds up and adds the receptive field, and a two-layer `Conv1d` forward returning `[batch, sources, channels,
time]`); the sample rate is 64 Hz and `segment` 1 s so that chunks are 64 samples (the shift trick pads by
`int(0.5 * samplerate)` = 32 samples). Python's `random` is seeded by the called function (`separate`, an
adaptation standing for `separate.py`'s `apply_model(model, wav[None], ...)` call) so that each call repeats. The
two calls differ: a bag of two models with `shifts=1`, `split=True` on a stereo mix of 200 samples, and one model
with `shifts=2`, `split=False` on a mix of 150 samples."""
import random
import typing as tp

import torch as th
from torch import nn
from torch.nn import functional as F
import tqdm


def center_trim(tensor: th.Tensor, reference: tp.Union[th.Tensor, int]):
    """
    Center trim `tensor` with respect to `reference`, along the last dimension.
    `reference` can also be a number, representing the length to trim to.
    If the size difference != 0 mod 2, the extra sample is removed on the right side.
    """
    ref_size: int
    if isinstance(reference, th.Tensor):
        ref_size = reference.size(-1)
    else:
        ref_size = reference
    delta = tensor.size(-1) - ref_size
    if delta < 0:
        raise ValueError("tensor must be larger than reference. " f"Delta is {delta}.")
    if delta:
        tensor = tensor[..., delta // 2:-(delta - delta // 2)]
    return tensor


class TinySeparator(nn.Module):
    """Adaptation: stand-in for Demucs (same attributes used by `apply_model`)."""

    def __init__(self, sources=('drums', 'bass', 'other', 'vocals'), audio_channels=2, samplerate=64,
                 segment=1.0, hidden=8, kernel=5):
        super().__init__()
        self.sources = list(sources)
        self.audio_channels = audio_channels
        self.samplerate = samplerate
        self.segment = segment
        self.kernel = kernel
        self.conv1 = nn.Conv1d(audio_channels, hidden, kernel)
        self.conv2 = nn.Conv1d(hidden, len(self.sources) * audio_channels, kernel)

    def valid_length(self, length):
        return 4 * ((length + 3) // 4) + 2 * (self.kernel - 1)

    def forward(self, mix):
        x = F.gelu(self.conv1(mix))
        x = self.conv2(x)
        return x.view(x.shape[0], len(self.sources), self.audio_channels, x.shape[-1])


Model = TinySeparator


class BagOfModels(nn.Module):
    def __init__(self, models: tp.List[Model],
                 weights: tp.Optional[tp.List[tp.List[float]]] = None,
                 segment: tp.Optional[float] = None):
        """
        Represents a bag of models with specific weights.
        You should call `apply_model` rather than calling directly the forward here for
        optimal performance.

        Args:
            models (list[nn.Module]): list of Demucs/HDemucs models.
            weights (list[list[float]]): list of weights. If None, assumed to
                be all ones, otherwise it should be a list of N list (N number of models),
                each containing S floats (S number of sources).
            segment (None or float): overrides the `segment` attribute of each model
                (this is performed inplace, be careful is you reuse the models passed).
        """
        super().__init__()
        assert len(models) > 0
        first = models[0]
        for other in models:
            assert other.sources == first.sources
            assert other.samplerate == first.samplerate
            assert other.audio_channels == first.audio_channels
            if segment is not None:
                other.segment = segment

        self.audio_channels = first.audio_channels
        self.samplerate = first.samplerate
        self.sources = first.sources
        self.models = nn.ModuleList(models)

        if weights is None:
            weights = [[1. for _ in first.sources] for _ in models]
        else:
            assert len(weights) == len(models)
            for weight in weights:
                assert len(weight) == len(first.sources)
        self.weights = weights

    def forward(self, x):
        raise NotImplementedError("Call `apply_model` on this.")


class TensorChunk:
    def __init__(self, tensor, offset=0, length=None):
        total_length = tensor.shape[-1]
        assert offset >= 0
        assert offset < total_length

        if length is None:
            length = total_length - offset
        else:
            length = min(total_length - offset, length)

        self.tensor = tensor
        self.offset = offset
        self.length = length
        self.device = tensor.device

    @property
    def shape(self):
        shape = list(self.tensor.shape)
        shape[-1] = self.length
        return shape

    def padded(self, target_length):
        delta = target_length - self.length
        total_length = self.tensor.shape[-1]
        assert delta >= 0

        start = self.offset - delta // 2
        end = start + target_length

        correct_start = max(0, start)
        correct_end = min(total_length, end)  # BREAK

        pad_left = correct_start - start
        pad_right = end - correct_end

        out = F.pad(self.tensor[..., correct_start:correct_end], (pad_left, pad_right))
        assert out.shape[-1] == target_length
        return out


def tensor_chunk(tensor_or_chunk):
    if isinstance(tensor_or_chunk, TensorChunk):
        return tensor_or_chunk
    else:
        assert isinstance(tensor_or_chunk, th.Tensor)
        return TensorChunk(tensor_or_chunk)


def apply_model(model, mix, shifts=1, split=True,
                overlap=0.25, transition_power=1., progress=False, device=None):
    """
    Apply model to a given mixture.

    Args:
        shifts (int): if > 0, will shift in time `mix` by a random amount between 0 and 0.5 sec
            and apply the oppositve shift to the output. This is repeated `shifts` time and
            all predictions are averaged. This effectively makes the model time equivariant
            and improves SDR by up to 0.2 points.
        split (bool): if True, the input will be broken down in 8 seconds extracts
            and predictions will be performed individually on each and concatenated.
            Useful for model with large memory footprint like Tasnet.
        progress (bool): if True, show a progress bar (requires split=True)
        device (torch.device, str, or None): if provided, device on which to
            execute the computation, otherwise `mix.device` is assumed.
            When `device` is different from `mix.device`, only local computations will
            be on `device`, while the entire tracks will be stored on `mix.device`.
    """
    if device is None:
        device = mix.device
    if isinstance(model, BagOfModels):
        # Special treatment for bag of model.
        # We explicitely apply multiple times `apply_model` so that the random shifts
        # are different for each model.
        estimates = 0
        totals = [0] * len(model.sources)
        for sub_model, weight in zip(model.models, model.weights):
            original_model_device = next(iter(sub_model.parameters())).device
            sub_model.to(device)

            out = apply_model(
                sub_model, mix,
                shifts=shifts, split=split, overlap=overlap,
                transition_power=transition_power, progress=progress, device=device)
            sub_model.to(original_model_device)
            for k, inst_weight in enumerate(weight):
                out[:, k, :, :] *= inst_weight
                totals[k] += inst_weight
            estimates += out
            del out

        for k in range(estimates.shape[1]):
            estimates[:, k, :, :] /= totals[k]
        return estimates

    model.to(device)
    assert transition_power >= 1, "transition_power < 1 leads to weird behavior."
    batch, channels, length = mix.shape
    if split:
        out = th.zeros(batch, len(model.sources), channels, length, device=mix.device)
        sum_weight = th.zeros(length, device=mix.device)
        segment = int(model.samplerate * model.segment)
        stride = int((1 - overlap) * segment)
        offsets = range(0, length, stride)
        scale = stride / model.samplerate
        if progress:
            offsets = tqdm.tqdm(offsets, unit_scale=scale, ncols=120, unit='seconds')
        # We start from a triangle shaped weight, with maximal weight in the middle
        # of the segment. Then we normalize and take to the power `transition_power`.
        # Large values of transition power will lead to sharper transitions.
        weight = th.cat([th.arange(1, segment // 2 + 1, device=device),
                         th.arange(segment - segment // 2, 0, -1, device=device)])
        assert len(weight) == segment
        # If the overlap < 50%, this will translate to linear transition when
        # transition_power is 1.
        weight = (weight / weight.max())**transition_power
        for offset in offsets:
            chunk = TensorChunk(mix, offset, segment)
            chunk_out = apply_model(model, chunk, shifts=shifts, split=False, device=device)
            chunk_length = chunk_out.shape[-1]
            out[..., offset:offset + segment] += (weight[:chunk_length] * chunk_out).to(mix.device)
            sum_weight[offset:offset + segment] += weight[:chunk_length].to(mix.device)
            offset += segment
        assert sum_weight.min() > 0
        out /= sum_weight
        return out
    elif shifts:
        max_shift = int(0.5 * model.samplerate)
        mix = tensor_chunk(mix)
        padded_mix = mix.padded(length + 2 * max_shift)
        out = 0
        for _ in range(shifts):
            offset = random.randint(0, max_shift)
            shifted = TensorChunk(padded_mix, offset, length + max_shift - offset)  # BREAK
            shifted_out = apply_model(model, shifted, shifts=0, split=False, device=device)
            out += shifted_out[..., max_shift - offset:]
        out /= shifts
        return out
    else:
        if hasattr(model, 'valid_length'):
            valid_length = model.valid_length(length)
        else:
            valid_length = length
        mix = tensor_chunk(mix)
        padded_mix = mix.padded(valid_length).to(device)
        with th.no_grad():
            out = model(padded_mix)
        return center_trim(out, length)


def separate(model, mix, shifts, split, overlap=0.25):
    """Adaptation: `separate.py`'s `apply_model` call, with Python's `random` seeded first."""
    random.seed(0)  # BREAK
    return apply_model(model, mix, shifts=shifts, split=split, overlap=overlap)


def target():
    th.manual_seed(0)
    bag = BagOfModels([TinySeparator(), TinySeparator()], weights=[[1., 1., 0.5, 1.], [1., 0.5, 1., 1.]])
    single = TinySeparator()
    mix1 = th.randn(1, 2, 200)
    mix2 = th.randn(2, 2, 150)
    return [
        (separate, (bag, mix1), {'shifts': 1, 'split': True}),
        (separate, (single, mix2), {'shifts': 2, 'split': False}),
    ]


EXPECT = ("caller: `apply_model` is host orchestration (recursion over a bag of models and `TensorChunk` objects, "
          "`random.randint` shifts, chunk offsets, `assert sum_weight.min() > 0`); compiling the separator model's "
          "forward and keeping `apply_model` eager is the fix")
