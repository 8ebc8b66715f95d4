"""Batched sample-by-sample generation from fatchord/WaveRNN (`models/fatchord_version.py`, the stored revision:
`WaveRNN.generate` in RAW mode with `batched=True`/`False`; `get_gru_cell` copying `nn.GRU` weights into a new
`nn.GRUCell` through `.data` assignments; `pad_tensor` writing into a `torch.zeros` buffer by `side`;
`fold_with_overlap` (Python arithmetic on sizes, an `if remaining != 0:` pad, a loop writing `folded[i] =
x[:, start:end, :]`); `xfade_and_unfold` (scipy `signal.get_window('hann', ...)`, NumPy in-place gains and a
loop of `unfolded[start:end] += y[i]`); `gen_display` (`time.time()`, `progbar`, an f-string with `:.1f`,
`stream`); and the classes it runs: `ResBlock`, `MelResNet`, `Stretch2d`, `UpsampleNetwork` (convs filled with
`1. / k_size[1]` through `.data.fill_`), `WaveRNN.__init__` (mode branches, `nn.Parameter(torch.zeros(1).long(),
requires_grad=False)` step, `num_params` printing `np.prod` sizes)). `generate` runs `self.eval()`, a Python loop
over `seq_len` steps under `torch.no_grad()` with a generator expression unpacking four aux slices, samples from
`torch.distributions.Categorical(posterior)`, appends to a list, prints progress every 100 steps, then stacks,
goes to NumPy (`.cpu().numpy().astype(np.float64)`), unfolds, decodes mu-law, fades out with `np.linspace`,
saves, and calls `self.train()`.
Adaptations: `.cuda()` calls are dropped (CPU); `np.cumproduct` (removed from NumPy 2) is `np.cumprod`;
`utils.display` `progbar`/`stream`, `utils.dsp` `decode_mu_law`/`label_2_float` are small copies written from the
collector's knowledge of the public code, and `save_wav` is a recorder (no file); the model is shrunk
(`rnn_dims=32`, `fc_dims=32`, `bits=9`, two upsample factors (2, 3), hop 6, two res blocks). The called function
`generate_` (written for this program) seeds torch and returns the waveform as a tensor; the weights are not
changed by generation, so no restore is needed."""
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy import signal


# ---- utils/display.py, utils/dsp.py (stand-ins, adaptation)
def progbar(i, n, size=16):
    done = (i * size) // n
    bar = ''
    for i in range(size):
        bar += '█' if i <= done else '░'
    return bar


def stream(message):
    sys.stdout.write(f"\r{message}")


def label_2_float(x, bits):
    return 2 * x / (2**bits - 1.) - 1.


def decode_mu_law(y, mu, from_labels=True):
    if from_labels:
        y = label_2_float(y, math.log2(mu))
    mu = mu - 1
    x = np.sign(y) / mu * ((1 + mu) ** np.abs(y) - 1)
    return x


SAVED = []


def save_wav(x, path):
    SAVED.append((path, len(x)))


# ---- models/fatchord_version.py
class ResBlock(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.conv1 = nn.Conv1d(dims, dims, kernel_size=1, bias=False)
        self.conv2 = nn.Conv1d(dims, dims, kernel_size=1, bias=False)
        self.batch_norm1 = nn.BatchNorm1d(dims)
        self.batch_norm2 = nn.BatchNorm1d(dims)

    def forward(self, x):
        residual = x
        x = self.conv1(x)
        x = self.batch_norm1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = self.batch_norm2(x)
        return x + residual


class MelResNet(nn.Module):
    def __init__(self, res_blocks, in_dims, compute_dims, res_out_dims, pad):
        super().__init__()
        k_size = pad * 2 + 1
        self.conv_in = nn.Conv1d(in_dims, compute_dims, kernel_size=k_size, bias=False)
        self.batch_norm = nn.BatchNorm1d(compute_dims)
        self.layers = nn.ModuleList()
        for i in range(res_blocks):
            self.layers.append(ResBlock(compute_dims))
        self.conv_out = nn.Conv1d(compute_dims, res_out_dims, kernel_size=1)

    def forward(self, x):
        x = self.conv_in(x)
        x = self.batch_norm(x)
        x = F.relu(x)
        for f in self.layers: x = f(x)
        x = self.conv_out(x)
        return x


class Stretch2d(nn.Module):
    def __init__(self, x_scale, y_scale):
        super().__init__()
        self.x_scale = x_scale
        self.y_scale = y_scale

    def forward(self, x):
        b, c, h, w = x.size()
        x = x.unsqueeze(-1).unsqueeze(3)
        x = x.repeat(1, 1, 1, self.y_scale, 1, self.x_scale)
        return x.view(b, c, h * self.y_scale, w * self.x_scale)  # BREAK


class UpsampleNetwork(nn.Module):
    def __init__(self, feat_dims, upsample_scales, compute_dims,
                 res_blocks, res_out_dims, pad):
        super().__init__()
        total_scale = np.cumprod(upsample_scales)[-1]
        self.indent = pad * total_scale
        self.resnet = MelResNet(res_blocks, feat_dims, compute_dims, res_out_dims, pad)
        self.resnet_stretch = Stretch2d(total_scale, 1)
        self.up_layers = nn.ModuleList()
        for scale in upsample_scales:
            k_size = (1, scale * 2 + 1)
            padding = (0, scale)
            stretch = Stretch2d(scale, 1)
            conv = nn.Conv2d(1, 1, kernel_size=k_size, padding=padding, bias=False)
            conv.weight.data.fill_(1. / k_size[1])
            self.up_layers.append(stretch)
            self.up_layers.append(conv)

    def forward(self, m):
        aux = self.resnet(m).unsqueeze(1)
        aux = self.resnet_stretch(aux)
        aux = aux.squeeze(1)
        m = m.unsqueeze(1)
        for f in self.up_layers: m = f(m)
        m = m.squeeze(1)[:, :, self.indent:-self.indent]  # BREAK
        return m.transpose(1, 2), aux.transpose(1, 2)


class WaveRNN(nn.Module):
    def __init__(self, rnn_dims, fc_dims, bits, pad, upsample_factors,
                 feat_dims, compute_dims, res_out_dims, res_blocks,
                 hop_length, sample_rate, mode='RAW'):
        super().__init__()
        self.mode = mode
        self.pad = pad
        if self.mode == 'RAW' :
            self.n_classes = 2 ** bits
        elif self.mode == 'MOL' :
            self.n_classes = 30
        else :
            RuntimeError("Unknown model mode value - ", self.mode)

        self.rnn_dims = rnn_dims
        self.aux_dims = res_out_dims // 4
        self.hop_length = hop_length
        self.sample_rate = sample_rate

        self.upsample = UpsampleNetwork(feat_dims, upsample_factors, compute_dims, res_blocks, res_out_dims, pad)
        self.I = nn.Linear(feat_dims + self.aux_dims + 1, rnn_dims)
        self.rnn1 = nn.GRU(rnn_dims, rnn_dims, batch_first=True)
        self.rnn2 = nn.GRU(rnn_dims + self.aux_dims, rnn_dims, batch_first=True)
        self.fc1 = nn.Linear(rnn_dims + self.aux_dims, fc_dims)
        self.fc2 = nn.Linear(fc_dims + self.aux_dims, fc_dims)
        self.fc3 = nn.Linear(fc_dims, self.n_classes)

        self.step = nn.Parameter(torch.zeros(1).long(), requires_grad=False)
        self.num_params()

    def generate(self, mels, save_path, batched, target, overlap, mu_law):

        mu_law = mu_law if self.mode == 'RAW' else False

        self.eval()  # BREAK
        output = []
        start = time.time()  # BREAK
        rnn1 = self.get_gru_cell(self.rnn1)  # BREAK
        rnn2 = self.get_gru_cell(self.rnn2)

        with torch.no_grad():

            mels = mels
            wave_len = (mels.size(-1) - 1) * self.hop_length
            mels = self.pad_tensor(mels.transpose(1, 2), pad=self.pad, side='both')
            mels, aux = self.upsample(mels.transpose(1, 2))

            if batched:
                mels = self.fold_with_overlap(mels, target, overlap)
                aux = self.fold_with_overlap(aux, target, overlap)

            b_size, seq_len, _ = mels.size()

            h1 = torch.zeros(b_size, self.rnn_dims)
            h2 = torch.zeros(b_size, self.rnn_dims)
            x = torch.zeros(b_size, 1)

            d = self.aux_dims
            aux_split = [aux[:, :, d * i:d * (i + 1)] for i in range(4)]

            for i in range(seq_len):

                m_t = mels[:, i, :]

                a1_t, a2_t, a3_t, a4_t = \
                    (a[:, i, :] for a in aux_split)

                x = torch.cat([x, m_t, a1_t], dim=1)
                x = self.I(x)
                h1 = rnn1(x, h1)

                x = x + h1
                inp = torch.cat([x, a2_t], dim=1)
                h2 = rnn2(inp, h2)

                x = x + h2
                x = torch.cat([x, a3_t], dim=1)
                x = F.relu(self.fc1(x))

                x = torch.cat([x, a4_t], dim=1)
                x = F.relu(self.fc2(x))

                logits = self.fc3(x)

                if self.mode == 'MOL':
                    raise RuntimeError("MOL sampling not carried")  # adaptation: RAW mode only
                elif self.mode == 'RAW' :
                    posterior = F.softmax(logits, dim=1)
                    distrib = torch.distributions.Categorical(posterior)

                    sample = 2 * distrib.sample().float() / (self.n_classes - 1.) - 1.
                    output.append(sample)
                    x = sample.unsqueeze(-1)
                else:
                    raise RuntimeError("Unknown model mode value - ", self.mode)

                if i % 100 == 0 : self.gen_display(i, seq_len, b_size, start)

        output = torch.stack(output).transpose(0, 1)
        output = output.cpu().numpy()
        output = output.astype(np.float64)

        if batched:
            output = self.xfade_and_unfold(output, target, overlap)
        else:
            output = output[0]

        if mu_law :
            output = decode_mu_law(output, self.n_classes, False)

        # Fade-out at the end to avoid signal cutting out suddenly
        fade_out = np.linspace(1, 0, 20 * self.hop_length)
        output = output[:wave_len]
        output[-20 * self.hop_length:] *= fade_out

        save_wav(output, save_path)

        self.train()

        return output

    def gen_display(self, i, seq_len, b_size, start):
        gen_rate = (i + 1) / (time.time() - start) * b_size / 1000  # BREAK
        pbar = progbar(i, seq_len)
        msg = f'| {pbar} {i*b_size}/{seq_len*b_size} | Batch Size: {b_size} | Gen Rate: {gen_rate:.1f}kHz | '
        stream(msg)

    def get_gru_cell(self, gru):
        gru_cell = nn.GRUCell(gru.input_size, gru.hidden_size)  # BREAK
        gru_cell.weight_hh.data = gru.weight_hh_l0.data
        gru_cell.weight_ih.data = gru.weight_ih_l0.data
        gru_cell.bias_hh.data = gru.bias_hh_l0.data
        gru_cell.bias_ih.data = gru.bias_ih_l0.data
        return gru_cell

    def pad_tensor(self, x, pad, side='both'):
        # NB - this is just a quick method i need right now
        # i.e., it won't generalise to other shapes/dims
        b, t, c = x.size()
        total = t + 2 * pad if side == 'both' else t + pad
        padded = torch.zeros(b, total, c)
        if side == 'before' or side == 'both':
            padded[:, pad:pad + t, :] = x
        elif side == 'after':
            padded[:, :t, :] = x
        return padded

    def fold_with_overlap(self, x, target, overlap):
        _, total_len, features = x.size()

        # Calculate variables needed
        num_folds = (total_len - overlap) // (target + overlap)
        extended_len = num_folds * (overlap + target) + overlap
        remaining = total_len - extended_len

        # Pad if some time steps poking out
        if remaining != 0:
            num_folds += 1
            padding = target + 2 * overlap - remaining
            x = self.pad_tensor(x, padding, side='after')

        folded = torch.zeros(num_folds, target + 2 * overlap, features)

        # Get the values for the folded tensor
        for i in range(num_folds):
            start = i * (target + overlap)
            end = start + target + 2 * overlap
            folded[i] = x[:, start:end, :]

        return folded

    def xfade_and_unfold(self, y, target, overlap):
        num_folds, length = y.shape
        target = length - 2 * overlap
        total_len = num_folds * (target + overlap) + overlap

        # Equal power crossfade
        window = signal.get_window('hann', 2 * overlap)
        fade_in = window[:overlap]
        fade_out = window[overlap:]

        # Apply the gain to the overlap samples
        y[:, :overlap] *= fade_in
        y[:, -overlap:] *= fade_out

        unfolded = np.zeros((total_len), dtype=np.float64)

        # Loop to add up all the samples
        for i in range(num_folds):
            start = i * (target + overlap)
            end = start + target + 2 * overlap
            unfolded[start:end] += y[i]

        return unfolded

    def get_step(self) :
        return self.step.data.item()

    def num_params(self, print_out=True):
        parameters = filter(lambda p: p.requires_grad, self.parameters())
        parameters = sum([np.prod(p.size()) for p in parameters]) / 1_000_000
        if print_out :
            print('Trainable Parameters: %.3fM' % parameters)


def generate_(model, mels, batched, target, overlap, mu_law, seed):
    """Adaptation: seed, then call `generate` as `gen_wavernn.py` does; return the waveform as a tensor."""
    torch.manual_seed(seed)  # BREAK
    output = model.generate(mels, 'model_outputs/sample.wav', batched, target, overlap, mu_law)
    return torch.from_numpy(output)


def target():
    torch.manual_seed(0)
    model = WaveRNN(rnn_dims=32, fc_dims=32, bits=9, pad=2, upsample_factors=(2, 3), feat_dims=8,
                    compute_dims=16, res_out_dims=16, res_blocks=2, hop_length=6, sample_rate=2400, mode='RAW')
    mels1 = torch.rand(1, 8, 24)
    mels2 = torch.rand(1, 8, 22)
    return [
        (generate_, (model, mels1, True, 30, 6, True, 1), {}),
        (generate_, (model, mels2, False, 30, 6, False, 2), {}),
    ]


EXPECT = ("extract: generation is an autoregressive Python loop that samples (`Categorical(...).sample()`) and "
          "feeds the sample back, with NumPy post-processing; the per-step cell math can be compiled but the "
          "sampling loop, `gen_display` timing/printing and the NumPy unfold/mu-law/save stay eager, so the step "
          "body belongs in a helper and the rest under an escape hatch")
