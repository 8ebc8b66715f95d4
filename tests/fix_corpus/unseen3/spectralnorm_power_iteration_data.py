"""SN-GAN SpectralNorm wrapper: each forward runs a power iteration that assigns `v.data = ...` and
`u.data = ...` on the wrapped layer's `_u` / `_v` parameters, then `setattr(self.module, self.name, w / sigma)` and
calls `self.module.forward(*args)`; the discriminator builds `nn.LeakyReLU(leak)` modules inside its forward.

Origin: christiancosgrove/pytorch-spectral-normalization-gan `spectral_normalization.py` (`l2normalize`,
`SpectralNorm._update_u_v`, `_made_params`, `_make_params`, `forward`) and `model.py` (`Discriminator`), a wrapper
copied into many GAN / inpainting / super-resolution repositories. Shrunk to 16x16 images and three convolutions.
The factory runs a few eager discriminator steps first so the power iteration has converged (as after training
starts), which keeps the eager reference run comparable.
"""
import torch
from torch import nn
from torch.nn import Parameter

channels = 3
leak = 0.1
w_g = 4


def l2normalize(v, eps=1e-12):
    return v / (v.norm() + eps)


class SpectralNorm(nn.Module):
    def __init__(self, module, name='weight', power_iterations=1):
        super(SpectralNorm, self).__init__()
        self.module = module
        self.name = name
        self.power_iterations = power_iterations
        if not self._made_params():
            self._make_params()

    def _update_u_v(self):
        u = getattr(self.module, self.name + "_u")
        v = getattr(self.module, self.name + "_v")
        w = getattr(self.module, self.name + "_bar")

        height = w.data.shape[0]
        for _ in range(self.power_iterations):
            v.data = l2normalize(torch.mv(torch.t(w.view(height,-1).data), u.data))  # NO BREAK in torch 2.13
            u.data = l2normalize(torch.mv(w.view(height,-1).data, v.data))

        # sigma = torch.dot(u.data, torch.mv(w.view(height,-1).data, v.data))
        sigma = u.dot(w.view(height, -1).mv(v))
        setattr(self.module, self.name, w / sigma.expand_as(w))

    def _made_params(self):
        try:
            u = getattr(self.module, self.name + "_u")
            v = getattr(self.module, self.name + "_v")
            w = getattr(self.module, self.name + "_bar")
            return True
        except AttributeError:
            return False


    def _make_params(self):
        w = getattr(self.module, self.name)

        height = w.data.shape[0]
        width = w.view(height, -1).data.shape[1]

        u = Parameter(w.data.new(height).normal_(0, 1), requires_grad=False)
        v = Parameter(w.data.new(width).normal_(0, 1), requires_grad=False)
        u.data = l2normalize(u.data)
        v.data = l2normalize(v.data)
        w_bar = Parameter(w.data)

        del self.module._parameters[self.name]

        self.module.register_parameter(self.name + "_u", u)
        self.module.register_parameter(self.name + "_v", v)
        self.module.register_parameter(self.name + "_bar", w_bar)


    def forward(self, *args):
        self._update_u_v()
        return self.module.forward(*args)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        self.conv1 = SpectralNorm(nn.Conv2d(channels, 16, 3, stride=1, padding=(1,1)))
        self.conv2 = SpectralNorm(nn.Conv2d(16, 32, 4, stride=2, padding=(1,1)))
        self.conv3 = SpectralNorm(nn.Conv2d(32, 32, 4, stride=2, padding=(1,1)))

        self.fc = SpectralNorm(nn.Linear(w_g * w_g * 32, 1))

    def forward(self, x):
        m = x
        m = nn.LeakyReLU(leak)(self.conv1(m))
        m = nn.LeakyReLU(leak)(self.conv2(m))
        m = nn.LeakyReLU(leak)(self.conv3(m))

        return self.fc(m.view(-1,w_g * w_g * 32))


def target():
    torch.manual_seed(0)
    disc = Discriminator()
    with torch.no_grad():
        for _ in range(40):  # earlier discriminator steps: the power iteration converges
            disc(torch.randn(2, channels, 16, 16))
    return [
        (disc, (torch.randn(4, channels, 16, 16),), {}),
        (disc, (torch.randn(4, channels, 16, 16),), {}),
    ]


EXPECT = ("rewrite: update the power-iteration vectors in place under `torch.no_grad()` "
          "(`v.copy_(l2normalize(...))`, `u.copy_(...)`) instead of assigning `.data`")
