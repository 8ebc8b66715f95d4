"""k-diffusion `sample_euler`: the step loop runs over `trange(len(sigmas) - 1, disable=disable)` (a tqdm
progress bar) and each step decides the churn with a chained comparison on a tensor,
`gamma = min(...) if s_tmin <= sigmas[i] <= s_tmax else 0.`, then `if gamma > 0:`.

Origin: crowsonkb/k-diffusion `k_diffusion/sampling.py` (`sample_euler`, `to_d`, `get_sigmas_karras`,
`append_zero`), `k_diffusion/utils.py` (`append_dims`) and `k_diffusion/layers.py` (`Denoiser`, the Karras
preconditioner wrapping the network). The same sampler is vendored in stable-diffusion-webui / Forge / ComfyUI.
The U-Net is replaced by a two-conv network conditioned on `log(sigma)`; 4 steps on 2x3x8x8 latents.
"""

import torch
from torch import nn
from tqdm.auto import trange


# --- k_diffusion/utils.py ---
def append_dims(x, target_dims):
    """Appends dimensions to the end of a tensor until it has target_dims dimensions."""
    dims_to_append = target_dims - x.ndim
    if dims_to_append < 0:
        raise ValueError(f'input has {x.ndim} dims but target_dims is {target_dims}, which is less')
    expanded = x[(...,) + (None,) * dims_to_append]
    # MPS will get inf values if it tries to index into the new axes, but detaching fixes this.
    # https://github.com/pytorch/pytorch/issues/84364
    return expanded.detach().clone() if expanded.device.type == 'mps' else expanded


# --- k_diffusion/layers.py ---
class Denoiser(nn.Module):
    """A Karras et al. preconditioner for denoising diffusion models."""

    def __init__(self, inner_model, sigma_data=1.):
        super().__init__()
        self.inner_model = inner_model
        self.sigma_data = sigma_data

    def get_scalings(self, sigma):
        c_skip = self.sigma_data ** 2 / (sigma ** 2 + self.sigma_data ** 2)
        c_out = sigma * self.sigma_data / (sigma ** 2 + self.sigma_data ** 2) ** 0.5
        c_in = 1 / (sigma ** 2 + self.sigma_data ** 2) ** 0.5
        return c_skip, c_out, c_in

    def forward(self, input, sigma, **kwargs):
        c_skip, c_out, c_in = [append_dims(x, input.ndim) for x in self.get_scalings(sigma)]
        return self.inner_model(input * c_in, sigma, **kwargs) * c_out + input * c_skip


class TinyEpsNet(nn.Module):
    """Stand-in for the U-Net: two convs with a noise-level embedding added in between."""

    def __init__(self, ch=3, hidden=8):
        super().__init__()
        self.conv_in = nn.Conv2d(ch, hidden, 3, padding=1)
        self.noise_emb = nn.Linear(1, hidden)
        self.conv_out = nn.Conv2d(hidden, ch, 3, padding=1)

    def forward(self, x, sigma):
        c_noise = sigma.log()[:, None] / 4
        h = torch.nn.functional.silu(self.conv_in(x) + self.noise_emb(c_noise)[:, :, None, None])
        return self.conv_out(h)


# --- k_diffusion/sampling.py ---
def append_zero(x):
    return torch.cat([x, x.new_zeros([1])])


def get_sigmas_karras(n, sigma_min, sigma_max, rho=7., device='cpu'):
    """Constructs the noise schedule of Karras et al. (2022)."""
    ramp = torch.linspace(0, 1, n)
    min_inv_rho = sigma_min ** (1 / rho)
    max_inv_rho = sigma_max ** (1 / rho)
    sigmas = (max_inv_rho + ramp * (min_inv_rho - max_inv_rho)) ** rho
    return append_zero(sigmas).to(device)


def to_d(x, sigma, denoised):
    """Converts a denoiser output to a Karras ODE derivative."""
    return (x - denoised) / append_dims(sigma, x.ndim)


@torch.no_grad()
def sample_euler(model, x, sigmas, extra_args=None, callback=None, disable=None, s_churn=0., s_tmin=0., s_tmax=float('inf'), s_noise=1.):
    """Implements Algorithm 2 (Euler steps) from Karras et al. (2022)."""
    extra_args = {} if extra_args is None else extra_args
    s_in = x.new_ones([x.shape[0]])
    for i in trange(len(sigmas) - 1, disable=disable):  # BREAK
        gamma = min(s_churn / (len(sigmas) - 1), 2 ** 0.5 - 1) if s_tmin <= sigmas[i] <= s_tmax else 0.
        eps = torch.randn_like(x) * s_noise
        sigma_hat = sigmas[i] * (gamma + 1)
        if gamma > 0:
            x = x + eps * (sigma_hat ** 2 - sigmas[i] ** 2) ** 0.5
        denoised = model(x, sigma_hat * s_in, **extra_args)
        d = to_d(x, sigma_hat, denoised)
        if callback is not None:
            callback({'x': x, 'i': i, 'sigma': sigmas[i], 'sigma_hat': sigma_hat, 'denoised': denoised})
        dt = sigmas[i + 1] - sigma_hat
        # Euler method
        x = x + d * dt
    return x


def target():
    torch.manual_seed(0)
    model = Denoiser(TinyEpsNet(), sigma_data=0.5).eval()
    sigmas = get_sigmas_karras(4, 0.03, 14.6)
    # initial latents are pure noise scaled to sigma_max, as the webui samplers do
    x1 = torch.randn(2, 3, 8, 8) * sigmas[0]
    x2 = torch.randn(2, 3, 8, 8) * sigmas[0]
    return [
        (sample_euler, (model, x1, sigmas), {"disable": True, "s_churn": 1.0}),
        (sample_euler, (model, x2, sigmas), {"disable": True, "s_churn": 1.0}),
    ]


EXPECT = ("split: keep the sampler loop (tqdm bar, per-step sigma comparison and churn branch) eager and "
          "compile only the denoiser called once per step; the loop body is already shape-static")
