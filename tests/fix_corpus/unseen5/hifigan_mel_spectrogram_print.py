"""HiFi-GAN mel spectrogram: `if torch.min(y) < -1.: print('min value is ', torch.min(y))` and the `max` twin as
range checks on the waveform, then module-level `mel_basis`/`hann_window` dict caches (the `if fmax not in mel_basis:`
test is always true because the keys are strings) filled from a librosa mel filterbank through `torch.from_numpy`
(jik876/hifi-gan meldataset.py: mel_spectrogram, dynamic_range_compression_torch, spectral_normalize_torch). Stand-ins:
`librosa.filters.mel` is a minimal NumPy Slaney-style filterbank (librosa is not installed); `torch.stft` gets
`return_complex=False`, which torch 2.x needs to return the (real, imag) pair the original squares and sums; the window
uses `win_size` instead of the hard-coded 1024, and the sizes are shrunk (n_fft 64, 8 mels)."""
import numpy as np
import torch


def librosa_mel_fn(sr, n_fft, n_mels, fmin, fmax):
    """Stand-in for librosa.filters.mel (htk=False, norm='slaney')."""
    def hz_to_mel(f):
        f = np.asanyarray(f, dtype=np.float64)  # BREAK
        f_sp = 200.0 / 3
        mels = f / f_sp
        min_log_hz = 1000.0
        min_log_mel = min_log_hz / f_sp
        logstep = np.log(6.4) / 27.0
        return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, mels)

    def mel_to_hz(m):
        m = np.asanyarray(m, dtype=np.float64)  # BREAK
        f_sp = 200.0 / 3
        freqs = f_sp * m
        min_log_hz = 1000.0
        min_log_mel = min_log_hz / f_sp
        logstep = np.log(6.4) / 27.0
        return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)

    fftfreqs = np.linspace(0, float(sr) / 2, int(1 + n_fft // 2))
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)  # BREAK
    weights = np.zeros((n_mels, int(1 + n_fft // 2)), dtype=np.float32)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


def dynamic_range_compression_torch(x, C=1, clip_val=1e-5):
    return torch.log(torch.clamp(x, min=clip_val) * C)


def dynamic_range_decompression_torch(x, C=1):
    return torch.exp(x) / C


def spectral_normalize_torch(magnitudes):
    output = dynamic_range_compression_torch(magnitudes)
    return output


mel_basis = {}
hann_window = {}


def mel_spectrogram(y, n_fft, num_mels, sampling_rate, hop_size, win_size, fmin, fmax, center=False):
    if torch.min(y) < -1.:  # BREAK
        print('min value is ', torch.min(y))  # BREAK
    if torch.max(y) > 1.:  # BREAK
        print('max value is ', torch.max(y))  # BREAK

    global mel_basis, hann_window
    if fmax not in mel_basis:
        mel = librosa_mel_fn(sampling_rate, n_fft, num_mels, fmin, fmax)
        mel_basis[str(fmax)+'_'+str(y.device)] = torch.from_numpy(mel).float().to(y.device)
        hann_window[str(y.device)] = torch.hann_window(win_size).to(y.device)

    y = torch.nn.functional.pad(y.unsqueeze(1), (int((n_fft-hop_size)/2), int((n_fft-hop_size)/2)), mode='reflect')
    y = y.squeeze(1)

    spec = torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size, window=hann_window[str(y.device)],
                      center=center, pad_mode='reflect', normalized=False, onesided=True, return_complex=False)

    spec = torch.sqrt(spec.pow(2).sum(-1)+(1e-9))

    spec = torch.matmul(mel_basis[str(fmax)+'_'+str(y.device)], spec)
    spec = spectral_normalize_torch(spec)

    return spec


def target():
    torch.manual_seed(0)
    quiet = torch.rand(2, 512) * 1.8 - 0.9       # within [-1, 1]: no message
    loud = torch.randn(2, 512) * 0.8             # exceeds the range: both messages
    kwargs = dict(n_fft=64, num_mels=8, sampling_rate=2000, hop_size=16, win_size=64, fmin=0, fmax=1000)
    return [
        (mel_spectrogram, (quiet,), dict(kwargs)),
        (mel_spectrogram, (loud,), dict(kwargs)),
    ]


EXPECT = ("extract: move the two waveform range checks (`if torch.min(y) < -1.: print(...)` and the `max` twin, "
          "which only print) into a helper under an escape hatch; the filterbank cache, STFT and mel projection stay "
          "compiled")
