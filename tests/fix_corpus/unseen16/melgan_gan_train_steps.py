"""MelGAN training steps from descriptinc/melgan-neurips (`scripts/train.py` `main`; `mel2wav/modules.py`:
`weights_init` (class-name `find` branches), `WNConv1d`/`WNConvTranspose1d` (`weight_norm`), `Audio2Mel` (reflect pad,
`torch.stft`, `unbind(-1)` magnitude, mel matmul, `log10(clamp)`), `ResnetBlock`, `Generator` (ratio loop building
upsampling layers and residual stacks), `NLayerDiscriminator` (a `ModuleDict` of layers, `forward` iterating
`self.model.items()` and collecting every feature map), `Discriminator` (multi-scale `ModuleDict` with `AvgPool1d`
downsampling between scales)). The training loop dumps the test audio (`fft(x_t).detach()`, `save_sample`,
`writer.add_audio`, `break` at `n_test_samples`), then per batch: generator forward, mel reconstruction error
`F.l1_loss(...).item()` under `no_grad`, hinge losses accumulated in Python loops over the discriminator scales,
feature-matching loss over `range(args.num_D)` x `range(len(D_fake[i]) - 1)`, the two `zero_grad`/`backward`/`step`
pairs, `costs.append([loss_D.item(), loss_G.item(), loss_feat.item(), s_error])`, four `writer.add_scalar`s, and every
`log_interval` steps a formatted `print` with `np.asarray(costs).mean(0)` and `time.time()`.
Adaptations: `librosa.filters.mel` (librosa not installed) is a NumPy stand-in `librosa_mel_fn` (triangular Slaney-
style filters, same signature and shape); `torch.stft` gets `return_complex=False` (torch 2 requires the argument for
real input; the old real-pair output is what `unbind(-1)` expects); `.cuda()` calls are dropped; the
`AudioDataset`/`DataLoader`s are lists of audio batches made in the factory; `SummaryWriter` (tensorboard not
installed) and `save_sample` are recorders; the argument parsing, `root.mkdir`, `yaml.dump` of the arguments, and
`load_path` loading are left out (`args` is a namespace); sizes are small (`n_mel_channels` 16, `ngf` 4, one
residual layer, `num_D` 2, single 1024-sample clips; `ndf` 16 and `n_layers_D` 4 are the defaults, which the
last discriminator layers need: they take `nf_prev` channels where `nf` is meant, equal only at the 1024 cap); `save_interval` is larger than the number
of steps, so the checkpoint branch with `torch.save` is kept but not reached; one epoch. So that a call repeats,
the called function `train` seeds torch and builds the networks, the mel front-end and the optimizers itself, as
`main` does; it returns the recorded scalars and the last generator output.
Runnability fix after the first census (exit 3: the compiled run, under `no_grad`, failed at `loss_D.backward()`;
the census reported that the inputs could not be copied for an eager reference run): the first version built the
networks in the factory and passed them in, with state-dict copies to restore; weight-normed modules (their
computed `weight` attribute) cannot be deep-copied, so `train` now builds them as the original `main` does and the
factory passes only `args` and the audio batches."""
import copy
import time
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm


# ---- stand-in for librosa.filters.mel
def librosa_mel_fn(sr, n_fft, n_mels=128, fmin=0.0, fmax=None):
    if fmax is None:
        fmax = float(sr) / 2
    n_freq = 1 + n_fft // 2
    fftfreqs = np.linspace(0, float(sr) / 2, n_freq)

    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (np.asarray(m) / 2595.0) - 1.0)

    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)  # BREAK
    weights = np.zeros((n_mels, n_freq), dtype=np.float32)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


# ---- mel2wav/modules.py
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("BatchNorm2d") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def WNConv1d(*args, **kwargs):
    return weight_norm(nn.Conv1d(*args, **kwargs))  # BREAK


def WNConvTranspose1d(*args, **kwargs):
    return weight_norm(nn.ConvTranspose1d(*args, **kwargs))  # BREAK


class Audio2Mel(nn.Module):
    def __init__(
        self,
        n_fft=1024,
        hop_length=256,
        win_length=1024,
        sampling_rate=22050,
        n_mel_channels=80,
        mel_fmin=0.0,
        mel_fmax=None,
    ):
        super().__init__()  # BREAK
        ##############################################
        # FFT Parameters                              #
        ##############################################
        window = torch.hann_window(win_length).float()
        mel_basis = librosa_mel_fn(
            sr=sampling_rate,
            n_fft=n_fft,
            n_mels=n_mel_channels,
            fmin=mel_fmin,
            fmax=mel_fmax
        )
        mel_basis = torch.from_numpy(mel_basis).float()
        self.register_buffer("mel_basis", mel_basis)
        self.register_buffer("window", window)
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.win_length = win_length
        self.sampling_rate = sampling_rate
        self.n_mel_channels = n_mel_channels

    def forward(self, audio):
        p = (self.n_fft - self.hop_length) // 2
        audio = F.pad(audio, (p, p), "reflect").squeeze(1)
        fft = torch.stft(
            audio,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            win_length=self.win_length,
            window=self.window,
            center=False,
            return_complex=False,  # adaptation: required in torch 2
        )
        real_part, imag_part = fft.unbind(-1)
        magnitude = torch.sqrt(real_part ** 2 + imag_part ** 2)
        mel_output = torch.matmul(self.mel_basis, magnitude)
        log_mel_spec = torch.log10(torch.clamp(mel_output, min=1e-5))
        return log_mel_spec


class ResnetBlock(nn.Module):
    def __init__(self, dim, dilation=1):
        super().__init__()  # BREAK
        self.block = nn.Sequential(
            nn.LeakyReLU(0.2),
            nn.ReflectionPad1d(dilation),
            WNConv1d(dim, dim, kernel_size=3, dilation=dilation),
            nn.LeakyReLU(0.2),
            WNConv1d(dim, dim, kernel_size=1),
        )
        self.shortcut = WNConv1d(dim, dim, kernel_size=1)

    def forward(self, x):
        return self.shortcut(x) + self.block(x)


class Generator(nn.Module):
    def __init__(self, input_size, ngf, n_residual_layers):
        super().__init__()  # BREAK
        ratios = [8, 8, 2, 2]
        self.hop_length = np.prod(ratios)
        mult = int(2 ** len(ratios))

        model = [
            nn.ReflectionPad1d(3),
            WNConv1d(input_size, mult * ngf, kernel_size=7, padding=0),
        ]

        # Upsample to raw audio scale
        for i, r in enumerate(ratios):
            model += [
                nn.LeakyReLU(0.2),
                WNConvTranspose1d(
                    mult * ngf,
                    mult * ngf // 2,
                    kernel_size=r * 2,
                    stride=r,
                    padding=r // 2 + r % 2,
                    output_padding=r % 2,
                ),
            ]

            for j in range(n_residual_layers):
                model += [ResnetBlock(mult * ngf // 2, dilation=3 ** j)]

            mult //= 2

        model += [
            nn.LeakyReLU(0.2),
            nn.ReflectionPad1d(3),
            WNConv1d(ngf, 1, kernel_size=7, padding=0),
            nn.Tanh(),
        ]

        self.model = nn.Sequential(*model)
        self.apply(weights_init)

    def forward(self, x):
        return self.model(x)


class NLayerDiscriminator(nn.Module):
    def __init__(self, ndf, n_layers, downsampling_factor):
        super().__init__()  # BREAK
        model = nn.ModuleDict()

        model["layer_0"] = nn.Sequential(
            nn.ReflectionPad1d(7),
            WNConv1d(1, ndf, kernel_size=15),
            nn.LeakyReLU(0.2, True),
        )

        nf = ndf
        stride = downsampling_factor
        for n in range(1, n_layers + 1):
            nf_prev = nf
            nf = min(nf * stride, 1024)

            model["layer_%d" % n] = nn.Sequential(
                WNConv1d(
                    nf_prev,
                    nf,
                    kernel_size=stride * 10 + 1,
                    stride=stride,
                    padding=stride * 5,
                    groups=nf_prev // 4,
                ),
                nn.LeakyReLU(0.2, True),
            )

        nf = min(nf * 2, 1024)
        model["layer_%d" % (n_layers + 1)] = nn.Sequential(
            WNConv1d(nf_prev, nf, kernel_size=5, stride=1, padding=2),
            nn.LeakyReLU(0.2, True),
        )

        model["layer_%d" % (n_layers + 2)] = WNConv1d(
            nf, 1, kernel_size=3, stride=1, padding=1
        )

        self.model = model

    def forward(self, x):
        results = []
        for key, layer in self.model.items():
            x = layer(x)
            results.append(x)
        return results


class Discriminator(nn.Module):
    def __init__(self, num_D, ndf, n_layers, downsampling_factor):
        super().__init__()  # BREAK
        self.model = nn.ModuleDict()
        for i in range(num_D):
            self.model[f"disc_{i}"] = NLayerDiscriminator(
                ndf, n_layers, downsampling_factor
            )

        self.downsample = nn.AvgPool1d(4, stride=2, padding=1, count_include_pad=False)
        self.apply(weights_init)

    def forward(self, x):
        results = []
        for key, disc in self.model.items():
            results.append(disc(x))
            x = self.downsample(x)
        return results


# ---- stand-ins: mel2wav.utils.save_sample, torch.utils.tensorboard.SummaryWriter
SAVED = []


def save_sample(file_path, sampling_rate, audio):
    SAVED.append((str(file_path), sampling_rate, tuple(audio.shape)))


class SummaryWriter(object):
    def __init__(self, logdir=''):
        self.logdir = logdir
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, float(value), step))

    def add_audio(self, tag, audio, step, sample_rate=22050):
        self.scalars.append((tag, tuple(audio.shape), step))


# ---- scripts/train.py main (the training part)
def train(args, train_loader, test_loader):
    torch.manual_seed(0)  # adaptation: so that a call repeats  # BREAK
    root = args.save_path
    writer = SummaryWriter(str(root))

    #######################
    # Load PyTorch Models #
    #######################
    netG = Generator(args.n_mel_channels, args.ngf, args.n_residual_layers)
    netD = Discriminator(
        args.num_D, args.ndf, args.n_layers_D, args.downsamp_factor
    )
    fft = Audio2Mel(n_mel_channels=args.n_mel_channels)

    #####################
    # Create optimizers #
    #####################
    optG = torch.optim.Adam(netG.parameters(), lr=1e-4, betas=(0.5, 0.9))  # BREAK
    optD = torch.optim.Adam(netD.parameters(), lr=1e-4, betas=(0.5, 0.9))

    ##########################
    # Dumping original audio #
    ##########################
    test_voc = []
    test_audio = []
    for i, x_t in enumerate(test_loader):
        s_t = fft(x_t).detach()

        test_voc.append(s_t)
        test_audio.append(x_t)

        audio = x_t.squeeze().cpu()
        save_sample(root + ("original_%d.wav" % i), 22050, audio)
        writer.add_audio("original/sample_%d.wav" % i, audio, 0, sample_rate=22050)

        if i == args.n_test_samples - 1:
            break

    costs = []
    start = time.time()

    # enable cudnn autotuner to speed up training
    torch.backends.cudnn.benchmark = True

    best_mel_reconst = 1000000
    steps = 0
    for epoch in range(1, args.epochs + 1):
        for iterno, x_t in enumerate(train_loader):
            s_t = fft(x_t).detach()
            x_pred_t = netG(s_t)

            with torch.no_grad():
                s_pred_t = fft(x_pred_t.detach())
                s_error = F.l1_loss(s_t, s_pred_t).item()

            #######################
            # Train Discriminator #
            #######################
            D_fake_det = netD(x_pred_t.detach())
            D_real = netD(x_t)

            loss_D = 0
            for scale in D_fake_det:
                loss_D += F.relu(1 + scale[-1]).mean()

            for scale in D_real:
                loss_D += F.relu(1 - scale[-1]).mean()

            netD.zero_grad()
            loss_D.backward()
            optD.step()  # BREAK

            ###################
            # Train Generator #
            ###################
            D_fake = netD(x_pred_t)

            loss_G = 0
            for scale in D_fake:
                loss_G += -scale[-1].mean()

            loss_feat = 0
            feat_weights = 4.0 / (args.n_layers_D + 1)
            D_weights = 1.0 / args.num_D
            wt = D_weights * feat_weights
            for i in range(args.num_D):
                for j in range(len(D_fake[i]) - 1):
                    loss_feat += wt * F.l1_loss(D_fake[i][j], D_real[i][j].detach())

            netG.zero_grad()
            (loss_G + args.lambda_feat * loss_feat).backward()
            optG.step()  # BREAK

            ######################
            # Update tensorboard #
            ######################
            costs.append([loss_D.item(), loss_G.item(), loss_feat.item(), s_error])

            writer.add_scalar("loss/discriminator", costs[-1][0], steps)
            writer.add_scalar("loss/generator", costs[-1][1], steps)
            writer.add_scalar("loss/feature_matching", costs[-1][2], steps)
            writer.add_scalar("loss/mel_reconstruction", costs[-1][3], steps)
            steps += 1

            if steps % args.save_interval == 0:
                st = time.time()
                with torch.no_grad():
                    for i, (voc, _) in enumerate(zip(test_voc, test_audio)):
                        pred_audio = netG(voc)
                        pred_audio = pred_audio.squeeze().cpu()
                        save_sample(root + ("generated_%d.wav" % i), 22050, pred_audio)
                        writer.add_audio(
                            "generated/sample_%d.wav" % i,
                            pred_audio,
                            epoch,
                            sample_rate=22050,
                        )

                torch.save(netG.state_dict(), root + "netG.pt")
                torch.save(optG.state_dict(), root + "optG.pt")

                torch.save(netD.state_dict(), root + "netD.pt")
                torch.save(optD.state_dict(), root + "optD.pt")

                if np.asarray(costs).mean(0)[-1] < best_mel_reconst:
                    best_mel_reconst = np.asarray(costs).mean(0)[-1]
                    torch.save(netD.state_dict(), root + "best_netD.pt")
                    torch.save(netG.state_dict(), root + "best_netG.pt")

                print("Took %5.4fs to generate samples" % (time.time() - st))
                print("-" * 100)

            if steps % args.log_interval == 0:
                print(
                    "Epoch {} | Iters {} / {} | ms/batch {:5.2f} | loss {}".format(
                        epoch,
                        iterno,
                        len(train_loader),
                        1000 * (time.time() - start) / args.log_interval,
                        np.asarray(costs).mean(0),
                    )
                )
                costs = []
                start = time.time()
    return [s for s in writer.scalars if s[0].startswith("loss")], x_pred_t.detach()


def target():
    torch.manual_seed(0)
    args = argparse.Namespace(save_path="logs/", n_mel_channels=16, ngf=4, n_residual_layers=1, ndf=16, num_D=2,
                              n_layers_D=4, downsamp_factor=4, lambda_feat=10, batch_size=1, seq_len=1024,
                              epochs=1, log_interval=2, save_interval=1000, n_test_samples=1)

    def clips(n, bs, length):
        t = torch.linspace(0, 1, length)
        out = []
        for _ in range(n):
            f0 = torch.rand(bs, 1, 1) * 400 + 100
            out.append((0.5 * torch.sin(2 * np.pi * f0 * t) + 0.05 * torch.randn(bs, 1, length)).clamp(-1, 1))
        return out

    train1, test1 = clips(2, 1, args.seq_len), clips(1, 1, args.seq_len)
    train2, test2 = clips(2, 1, args.seq_len), clips(1, 1, args.seq_len)
    return [
        (train, (args, train1, test1), {}),
        (train, (args, train2, test2), {}),
    ]


EXPECT = ("extract: generator, discriminator and mel front-end forwards compile; the loop's `.item()` costs, "
          "`np.asarray(costs)` logging with `time.time()`, the recorders and the two optimizer steps remain eager "
          "glue between compiled parts")
