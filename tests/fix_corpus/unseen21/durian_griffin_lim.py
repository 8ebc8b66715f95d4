"""Griffin-Lim phase reconstruction from ivanvovk/durian-pytorch (`torchaudio/vocoders.py` `griffin_lim`,
`torchaudio/stft.py` `STFT`, `torchaudio/autils.py` `window_sumsquare`, all stored revision 5d0e667). `griffin_lim`
draws random phases on the host (`np.angle(np.exp(2j * np.pi * np.random.rand(*magnitudes.size())))`), wraps them
with `torch.from_numpy` in a `Variable` and iterates `STFT.transform`/`STFT.inverse`. `STFT` (after Prem
Seetharaman's pytorch-stft) computes a conv1d STFT whose output is moved with `.cpu()`, a phase through
`torch.autograd.Variable(torch.atan2(imag_part.data, real_part.data))`, and in `inverse` recomputes the window
envelope on the host each call (`window_sumsquare`, a Python loop over frames filling a NumPy array), finds the
non-zero positions with `np.where(window_sum > tiny(window_sum))`, converts both with `torch.from_numpy`, picks
`.cuda()` by `magnitude.is_cuda`, and divides in place at those indices.
Adaptations: librosa is not installed; `librosa.util` is replaced by a minimal stand-in namespace `librosa_util`
with `pad_center`, `tiny` and `normalize` (the three functions the code uses; `normalize(S, norm=None)` returns `S`,
as librosa does), and `stft.py`'s `from librosa.util import pad_center, tiny` imports from it. The relative import
`from .autils import window_sumsquare` and `autils.py`'s `sys.path.insert` are dropped (one module here). Sizes:
`filter_length=64`, `hop_length=16`, `win_length=64` (800/200/800 in the original), short random signals, 4 and 2
iterations. The magnitudes are made in the factory with the original `STFT.transform` of random signals. NumPy's
global generator is seeded in the factory only; the STFT module keeps no state between calls that matters (it sets
`num_samples` and, in `forward`, `magnitude`/`phase`; `forward` is not called)."""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import Variable
from scipy.signal import get_window


# ---- stand-in for librosa.util (librosa is not installed)
def _pad_center(data, size, axis=-1, **kwargs):
    n = data.shape[axis]
    lpad = int((size - n) // 2)
    lengths = [(0, 0)] * data.ndim
    lengths[axis] = (lpad, int(size - n - lpad))
    return np.pad(data, lengths, **kwargs)  # BREAK


def _tiny(x):
    x = np.asarray(x)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float32  # BREAK
    return np.finfo(dtype).tiny


def _normalize(S, norm=None, **kwargs):
    if norm is None:
        return S
    return S / np.max(np.abs(S))


librosa_util = SimpleNamespace(pad_center=_pad_center, tiny=_tiny, normalize=_normalize)
pad_center, tiny = librosa_util.pad_center, librosa_util.tiny


# ---- torchaudio/autils.py
def window_sumsquare(window, n_frames, hop_length=200, win_length=800,
                     n_fft=800, dtype=np.float32, norm=None):
    """
    # from librosa 0.6
    Computes the sum-square envelope of a window function at a given hop length.
    This is used to estimate modulation effects induced by windowing
    observations in short-time fourier transforms.
    """
    if win_length is None:
        win_length = n_fft

    n = n_fft + hop_length * (n_frames - 1)
    x = np.zeros(n, dtype=dtype)

    # Compute the squared window at the desired length
    win_sq = get_window(window, win_length, fftbins=True)
    win_sq = librosa_util.normalize(win_sq, norm=norm)**2
    win_sq = librosa_util.pad_center(win_sq, n_fft)

    # Fill the envelope
    for i in range(n_frames):
        sample = i * hop_length
        x[sample:min(n, sample + n_fft)] += win_sq[:max(0, min(n_fft, n - sample))]
    return x


# ---- torchaudio/stft.py
class STFT(torch.nn.Module):
    """adapted from Prem Seetharaman's https://github.com/pseeth/pytorch-stft"""
    def __init__(self, filter_length=800, hop_length=200, win_length=800,
                 window='hann'):
        super(STFT, self).__init__()
        self.filter_length = filter_length
        self.hop_length = hop_length
        self.win_length = win_length
        self.window = window
        self.forward_transform = None
        scale = self.filter_length / self.hop_length
        fourier_basis = np.fft.fft(np.eye(self.filter_length))

        cutoff = int((self.filter_length / 2 + 1))
        fourier_basis = np.vstack([np.real(fourier_basis[:cutoff, :]),
                                   np.imag(fourier_basis[:cutoff, :])])

        forward_basis = torch.FloatTensor(fourier_basis[:, None, :])
        inverse_basis = torch.FloatTensor(
            np.linalg.pinv(scale * fourier_basis).T[:, None, :])

        if window is not None:
            assert(filter_length >= win_length)
            # get window and zero center pad it to filter_length
            fft_window = get_window(window, win_length, fftbins=True)
            fft_window = pad_center(fft_window, filter_length)
            fft_window = torch.from_numpy(fft_window).float()

            # window the bases
            forward_basis *= fft_window
            inverse_basis *= fft_window

        self.register_buffer('forward_basis', forward_basis.float())
        self.register_buffer('inverse_basis', inverse_basis.float())

    def transform(self, input_data):
        num_batches = input_data.size(0)
        num_samples = input_data.size(1)

        self.num_samples = num_samples

        # similar to librosa, reflect-pad the input
        input_data = input_data.view(num_batches, 1, num_samples)
        input_data = F.pad(
            input_data.unsqueeze(1),
            (int(self.filter_length / 2), int(self.filter_length / 2), 0, 0),
            mode='reflect')
        input_data = input_data.squeeze(1)

        forward_transform = F.conv1d(
            input_data,
            Variable(self.forward_basis, requires_grad=False),  # BREAK
            stride=self.hop_length,
            padding=0).cpu()

        cutoff = int((self.filter_length / 2) + 1)
        real_part = forward_transform[:, :cutoff, :]
        imag_part = forward_transform[:, cutoff:, :]

        magnitude = torch.sqrt(real_part**2 + imag_part**2)
        phase = torch.autograd.Variable(
            torch.atan2(imag_part.data, real_part.data))

        return magnitude, phase
# BREAK
    def inverse(self, magnitude, phase):
        recombine_magnitude_phase = torch.cat(
            [magnitude*torch.cos(phase), magnitude*torch.sin(phase)], dim=1)

        inverse_transform = F.conv_transpose1d(
            recombine_magnitude_phase,
            Variable(self.inverse_basis, requires_grad=False),  # BREAK
            stride=self.hop_length,
            padding=0)

        if self.window is not None:
            window_sum = window_sumsquare(
                self.window, magnitude.size(-1), hop_length=self.hop_length,
                win_length=self.win_length, n_fft=self.filter_length,
                dtype=np.float32)
            # remove modulation effects
            approx_nonzero_indices = torch.from_numpy(
                np.where(window_sum > tiny(window_sum))[0])  # BREAK
            window_sum = torch.autograd.Variable(  # BREAK
                torch.from_numpy(window_sum), requires_grad=False)
            window_sum = window_sum.cuda() if magnitude.is_cuda else window_sum
            inverse_transform[:, :, approx_nonzero_indices] /= window_sum[approx_nonzero_indices]

            # scale by hop ratio
            inverse_transform *= float(self.filter_length) / self.hop_length

        inverse_transform = inverse_transform[:, :, int(self.filter_length/2):]
        inverse_transform = inverse_transform[:, :, :-int(self.filter_length/2):]

        return inverse_transform

    def forward(self, input_data):
        self.magnitude, self.phase = self.transform(input_data)
        reconstruction = self.inverse(self.magnitude, self.phase)
        return reconstruction


# ---- torchaudio/vocoders.py
def griffin_lim(magnitudes, stft_fn, n_iters=100):
    """
    PARAMS
    ------
    magnitudes: spectrogram magnitudes
    stft_fn: STFT class with transform (STFT) and inverse (ISTFT) methods

    RETURNS
    ------
    signal: estimated signal from given real-valued spectrogram
    """

    angles = np.angle(np.exp(2j * np.pi * np.random.rand(*magnitudes.size())))
    angles = angles.astype(np.float32)
    angles = torch.autograd.Variable(torch.from_numpy(angles))  # BREAK
    signal = stft_fn.inverse(magnitudes, angles).squeeze(1)

    for _ in range(n_iters):
        _, angles = stft_fn.transform(signal)
        signal = stft_fn.inverse(magnitudes, angles).squeeze(1)
    return signal


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    stft_fn = STFT(filter_length=64, hop_length=16, win_length=64, window='hann')
    with torch.no_grad():
        mag1, _ = stft_fn.transform(torch.randn(1, 256))
        mag2, _ = stft_fn.transform(torch.randn(2, 192))
    return [
        (griffin_lim, (mag1, stft_fn), {"n_iters": 4}),
        (griffin_lim, (mag2, stft_fn), {"n_iters": 2}),
    ]


EXPECT = ("extract: the initial phases are a NumPy draw and `STFT.inverse` rebuilds its window envelope on the host "
          "every call (`window_sumsquare`'s frame loop, `np.where`, `torch.from_numpy`); moving the host envelope and "
          "random phases into an eager helper leaves the conv1d STFT/ISTFT iterations as compiled tensor code")
