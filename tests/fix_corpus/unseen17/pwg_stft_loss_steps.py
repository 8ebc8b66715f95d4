"""Multi-resolution STFT loss training steps from kan-bayashi/ParallelWaveGAN
(`parallel_wavegan/losses/stft_loss.py`, the stored early revision: `stft`, `SpectralConvergengeLoss`,
`LogSTFTMagnitudeLoss`, `STFTLoss`, `MultiResolutionSTFTLoss`). `stft` takes `torch.stft`'s real/imaginary pair
(`x_stft[..., 0]`, `x_stft[..., 1]`), the magnitude with `sqrt` and `transpose`, and clamps it; `STFTLoss` builds
its window with `getattr(torch, window_type)(window_length)` and adds the spectral-convergence (Frobenius norms over
frequency) and log-magnitude (L1 norm over frequency divided by `x_mag.size(2)`) losses; `MultiResolutionSTFTLoss`
asserts the three lists have equal lengths, builds a `ModuleList` with `+=` in a `zip` loop, and in `forward`
accumulates `loss += f(x, y)` from a float `0.0` over the resolutions and divides by `len(self.stft_losses)`.
Adaptations: `torch.stft` gets `return_complex=False` (torch 2.13 requires the argument for real input; the
original predates it and received the real/imaginary pair this way); the resolutions are shrunk
(`fft_sizes=[128, 256, 64]`, `shift_sizes=[16, 32, 8]`, `window_lengths=[64, 128, 32]`) for 1024-sample signals.
The generator (`parallel_wavegan/models/parallel_wavegan.py`) and the trainer (`bin/train.py`) were not opened:
the called function `generator_steps` is the collector's stand-in for the trainer's generator warm-up steps (no
discriminator): it seeds torch, restores a small dilated-convolution generator from the factory's copy, builds
Adam, and for each batch of (noise, auxiliary features, target audio) computes the generated audio, the STFT loss
on `squeeze(1)`ed signals, backpropagates, clips with `clip_grad_norm_` and steps, keeping `loss.item()` in a
dict as the trainer's `total_train_loss` does; it returns those losses and the last generated audio."""
import logging

import torch


def stft(x, fft_size, hop_size, window_length, window):
    """Perform STFT and convert to magnitude spectrogram.

    Args:
        x (Tensor): Input signal tensor (B, T).

    Returns:
        Tensor: Magnitude spectrogram (B, #frames, fft_size // 2 + 1).

    """
    x_stft = torch.stft(x, fft_size, hop_size, window_length, window, return_complex=False)
    real = x_stft[..., 0]
    imag = x_stft[..., 1]
    mag = torch.sqrt(real ** 2 + imag ** 2).transpose(2, 1)
    # TODO(kan-bayashi): need to investigate suitable range
    return torch.clamp(mag, min=1e-9)


class SpectralConvergengeLoss(torch.nn.Module):
    """Spectral convergence loss module."""

    def __init__(self):
        """Initilize spectral convergence loss module."""
        super(SpectralConvergengeLoss, self).__init__()  # BREAK

    def forward(self, x_mag, y_mag):
        """Calculate forward propagation.

        Args:
            x_mag (Tensor): Magnitude spectrogram of predicted signal (B, #frames, #freq_bins).
            y_mag (Tensor): Magnitude spectrogram of groundtruth signal (B, #frames, #freq_bins).

        Returns:
            Tensor: Spectral convergence loss values.

        """
        numerator = torch.norm(y_mag - x_mag, p='fro', dim=2).view(-1)
        denominator = torch.norm(y_mag, p='fro', dim=2).view(-1)

        return torch.mean(numerator / denominator)


class LogSTFTMagnitudeLoss(torch.nn.Module):
    """Log STFT magnitude loss module."""

    def __init__(self):
        """Initilize los STFT magnitude loss module."""
        super(LogSTFTMagnitudeLoss, self).__init__()  # BREAK

    def forward(self, x_mag, y_mag):
        """Calculate forward propagation.

        Args:
            x_mag (Tensor): Magnitude spectrogram of predicted signal (B, #frames, #freq_bins).
            y_mag (Tensor): Magnitude spectrogram of groundtruth signal (B, #frames, #freq_bins).

        Returns:
            Tensor: Log STFT magnitude loss values.

        """
        n_bins = x_mag.size(2)
        x_lmag = torch.log(x_mag)
        y_lmag = torch.log(y_mag)

        return torch.mean(torch.norm(y_lmag - x_lmag, p=1, dim=2) / n_bins)


class STFTLoss(torch.nn.Module):
    """STFT loss module."""

    def __init__(self, fft_size=1024, shift_size=120, window_length=600, window_type='hann_window'):
        """Initialize STFT loss module."""
        super(STFTLoss, self).__init__()  # BREAK
        self.fft_size = fft_size
        self.shift_size = shift_size
        self.window_length = window_length
        self.window = getattr(torch, window_type)(window_length)
        self.spectral_convergenge_loss = SpectralConvergengeLoss()
        self.log_stft_magnitude_loss = LogSTFTMagnitudeLoss()

    def forward(self, x, y):
        """Calculate forward propagation.

        Args:
            x (Tensor): Predicted signal (B, T).
            y (Tensor): Groundtruth signal (B, T).

        Returns:
            Tensor: STFT loss values.

        """
        x_mag = stft(x, self.fft_size, self.shift_size, self.window_length, self.window)
        y_mag = stft(y, self.fft_size, self.shift_size, self.window_length, self.window)
        sc_loss = self.spectral_convergenge_loss(x_mag, y_mag)
        mag_loss = self.log_stft_magnitude_loss(x_mag, y_mag)

        return sc_loss + mag_loss


class MultiResolutionSTFTLoss(torch.nn.Module):
    """Multi resolution STFT loss module."""

    def __init__(self,
                 fft_sizes=[1024, 2048, 512],
                 shift_sizes=[120, 240, 50],
                 window_lengths=[600, 1200, 240],
                 window_type='hann_window'):
        """Initialize Multi resolution STFT loss module."""
        super(MultiResolutionSTFTLoss, self).__init__()  # BREAK
        assert len(fft_sizes) == len(shift_sizes) == len(window_lengths)
        self.stft_losses = torch.nn.ModuleList()
        for fs, ss, wl in zip(fft_sizes, shift_sizes, window_lengths):
            self.stft_losses += [STFTLoss(fs, ss, wl, window_type)]

    def forward(self, x, y):
        """Calculate forward propagation.

        Args:
            x (Tensor): Predicted signal (B, T).
            y (Tensor): Groundtruth signal (B, T).

        Returns:
            Tensor: Mutli resolution STFT loss values.

        """
        loss = 0.0
        for f in self.stft_losses:
            loss += f(x, y)

        return loss / len(self.stft_losses)


# ---- stand-in generator (parallel_wavegan/models not opened)
class TinyGenerator(torch.nn.Module):
    def __init__(self, aux_channels=4, channels=8, layers=4):
        super().__init__()
        self.first = torch.nn.Conv1d(1, channels, 1)
        self.aux = torch.nn.Conv1d(aux_channels, channels, 1)
        self.convs = torch.nn.ModuleList(
            [torch.nn.Conv1d(channels, 2 * channels, 3, padding=2 ** i, dilation=2 ** i) for i in range(layers)])
        self.last = torch.nn.Conv1d(channels, 1, 1)

    def forward(self, z, c):
        x = self.first(z)
        c = self.aux(torch.nn.functional.interpolate(c, size=z.size(-1)))
        for conv in self.convs:
            a, b = conv(x + c).chunk(2, dim=1)
            x = x + torch.tanh(a) * torch.sigmoid(b)
        return self.last(x)


def generator_steps(model, initial_state, batches, lr=1e-3, grad_norm=10.0, seed=0):
    torch.manual_seed(seed)  # BREAK
    model.load_state_dict(initial_state)  # BREAK
    criterion = MultiResolutionSTFTLoss(fft_sizes=[128, 256, 64], shift_sizes=[16, 32, 8],
                                        window_lengths=[64, 128, 32])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)  # BREAK
    total_train_loss = {"train/stft_loss": 0.0}
    losses = []
    for steps, (z, c, y) in enumerate(batches):
        y_ = model(z, c)
        loss = criterion(y_.squeeze(1), y.squeeze(1))
        total_train_loss["train/stft_loss"] += loss.item()
        optimizer.zero_grad()
        loss.backward()
        if grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_norm)
        optimizer.step()  # BREAK
        losses.append(loss.detach())
        logging.debug(f"(Steps: {steps}) train/stft_loss = {loss.item():.4f}.")
    return torch.stack(losses), total_train_loss, y_.detach()


def target():
    torch.manual_seed(0)
    model = TinyGenerator()
    initial_state = {k: v.clone() for k, v in model.state_dict().items()}

    def batches(n, b, T):
        t = torch.arange(T).float()
        return [(torch.randn(b, 1, T), torch.randn(b, 4, T // 64),
                 (torch.sin(t * (0.05 + 0.01 * i)) * 0.5 + 0.05 * torch.randn(b, T)).unsqueeze(1))
                for i in range(n)]

    return [
        (generator_steps, (model, initial_state, batches(3, 2, 1024)), {}),
        (generator_steps, (model, initial_state, batches(2, 3, 1024)), {"lr": 5e-4, "seed": 1}),
    ]


EXPECT = ("caller: the STFT loss modules trace whole (`torch.stft` with `return_complex=False`, norms, a "
          "Python loop over a `ModuleList`); the breaks come from the training-step driver (`loss.item()`, "
          "`backward`, `clip_grad_norm_`, the optimizer step), so the fix is at the caller: compile the "
          "generator-and-loss forward and leave the step eager")
