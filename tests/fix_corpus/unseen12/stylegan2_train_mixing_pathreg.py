"""StyleGAN2 training iterations with style mixing, lazy R1 and path-length regularisation
(rosinality/stylegan2-pytorch: `train.py`: `requires_grad`, `accumulate`, `sample_data`, `d_logistic_loss`,
`d_r1_loss`, `g_nonsaturating_loss`, `g_path_regularize`, `make_noise`, `train`; `distributed.py`: `get_rank`,
`get_world_size`, `reduce_sum`, `reduce_loss_dict`; `model.py`: `Generator.forward`'s style-mixing branch). Per
iteration `train` draws `next(loader)` from the infinite generator `sample_data`, toggles `p.requires_grad` on
every parameter, mixes styles `if args.mixing > 0 and random.random() < args.mixing:` (`make_noise` returns an
`unbind` tuple or one tensor), runs the discriminator step, sets `real_img.requires_grad = True` on `i %
args.d_reg_every == 0` and takes the R1 penalty through `autograd.grad(..., create_graph=True)`, runs the generator
step and every `g_reg_every` iterations the path-length penalty (`torch.randn_like` noise scaled by
`math.sqrt(h * w)`, `autograd.grad` w.r.t. the latents, a running `mean_path_length` that starts as the int `0`),
`accumulate`s the EMA generator with the deprecated `add_(1 - decay, tensor)` overload, reduces the loss dict, reads
four `.mean().item()` values and sets an f-string `pbar.set_description` when `get_rank() == 0`; every 100
iterations it samples the EMA generator under `torch.no_grad()` and saves an image. `Generator.forward` picks
`inject_index = random.randint(1, self.n_latent - 1)` when two styles are given and repeats/concatenates them.
Adaptations: the Generator/Discriminator are small stand-ins (mapping MLP with `PixelNorm`, a per-layer
style-modulated linear synthesis to 1x8x8 images; a two-layer conv discriminator) keeping `Generator.forward`'s
`styles`/`inject_index`/`return_latents` logic, written from the collector's knowledge of `model.py`; the
LMDB `MultiResolutionDataset`/`DataLoader` is a list of image batches; `tqdm` wraps the range as in the original
(`dynamic_ncols` kept); `utils.save_image` (torchvision) and the periodic `torch.save` checkpoint are an in-memory
list and `io.BytesIO` (`save_image_`, `ckpt_buffer`); `generator.module`/`discriminator.module` (DDP) are the plain
modules (the repository's later revisions use `g_module`); wandb is absent (`wandb = None`). So that a call repeats
exactly, the called function (`train_run`, an adaptation) restores the three networks and both optimizers from
copies taken in the factory and seeds `random` and torch (`reset_`); it returns the last loss values and an EMA
sample. The two calls use different `iter`/`mixing`/regularisation intervals."""
import copy
import io
import math
import random
from types import SimpleNamespace

import torch
from torch import nn, autograd, optim
from torch.nn import functional as F
from tqdm import tqdm
from torch import distributed as dist

wandb = None


def get_rank():
    if not dist.is_available():
        return 0

    if not dist.is_initialized():
        return 0

    return dist.get_rank()


def get_world_size():
    if not dist.is_available():
        return 1

    if not dist.is_initialized():
        return 1

    return dist.get_world_size()


def reduce_sum(tensor):
    if not dist.is_available():
        return tensor

    if not dist.is_initialized():
        return tensor

    tensor = tensor.clone()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)

    return tensor


def reduce_loss_dict(loss_dict):
    world_size = get_world_size()

    if world_size < 2:
        return loss_dict

    with torch.no_grad():
        keys = []
        losses = []

        for k in sorted(loss_dict.keys()):
            keys.append(k)
            losses.append(loss_dict[k])

        losses = torch.stack(losses, 0)
        dist.reduce(losses, dst=0)

        if dist.get_rank() == 0:
            losses /= world_size

        reduced_losses = {k: v for k, v in zip(keys, losses)}

    return reduced_losses


class PixelNorm(nn.Module):
    def forward(self, input):
        return input * torch.rsqrt(torch.mean(input ** 2, dim=1, keepdim=True) + 1e-8)


class Generator(nn.Module):
    """Adaptation: small stand-in keeping model.py's Generator.forward style-mixing logic."""

    def __init__(self, size, style_dim, n_mlp):
        super().__init__()
        self.size = size
        self.style_dim = style_dim
        layers = [PixelNorm()]
        for i in range(n_mlp):
            layers.append(nn.Linear(style_dim, style_dim))
            layers.append(nn.LeakyReLU(0.2))
        self.style = nn.Sequential(*layers)
        self.n_latent = 4
        self.input = nn.Parameter(torch.randn(1, 16))
        self.mods = nn.ModuleList([nn.Linear(style_dim, 16) for _ in range(self.n_latent)])
        self.convs = nn.ModuleList([nn.Linear(16, 16) for _ in range(self.n_latent - 1)])
        self.to_rgb = nn.Linear(16, size * size)

    def forward(self, styles, return_latents=False, inject_index=None, truncation=1,
                truncation_latent=None, input_is_latent=False):
        if not input_is_latent:
            styles = [self.style(s) for s in styles]

        if truncation < 1:
            style_t = []

            for style in styles:
                style_t.append(
                    truncation_latent + truncation * (style - truncation_latent)
                )

            styles = style_t

        if len(styles) < 2:
            inject_index = self.n_latent

            if styles[0].ndim < 3:
                latent = styles[0].unsqueeze(1).repeat(1, inject_index, 1)

            else:
                latent = styles[0]

        else:
            if inject_index is None:
                inject_index = random.randint(1, self.n_latent - 1)

            latent = styles[0].unsqueeze(1).repeat(1, inject_index, 1)  # BREAK
            latent2 = styles[1].unsqueeze(1).repeat(1, self.n_latent - inject_index, 1)

            latent = torch.cat([latent, latent2], 1)

        out = self.input.repeat(latent.shape[0], 1) * self.mods[0](latent[:, 0])
        for i, conv in enumerate(self.convs):
            out = F.leaky_relu(conv(out) * self.mods[i + 1](latent[:, i + 1]), 0.2)
        image = torch.tanh(self.to_rgb(out)).view(-1, 1, self.size, self.size)

        if return_latents:
            return image, latent

        else:
            return image, None


class Discriminator(nn.Module):
    """Adaptation: small stand-in for model.py's Discriminator."""

    def __init__(self, size):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.LeakyReLU(0.2),
                                   nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2))
        self.final = nn.Linear(8 * (size // 2) * (size // 2), 1)

    def forward(self, input):
        return self.final(self.convs(input).flatten(1))


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag  # BREAK


def accumulate(model1, model2, decay=0.999):
    par1 = dict(model1.named_parameters())
    par2 = dict(model2.named_parameters())

    for k in par1.keys():
        par1[k].data.mul_(decay).add_(1 - decay, par2[k].data)  # BREAK


def sample_data(loader):
    while True:
        for batch in loader:  # BREAK
            yield batch


def d_logistic_loss(real_pred, fake_pred):
    real_loss = F.softplus(-real_pred)
    fake_loss = F.softplus(fake_pred)

    return real_loss.mean() + fake_loss.mean()


def d_r1_loss(real_pred, real_img):
    grad_real, = autograd.grad(  # BREAK
        outputs=real_pred.sum(), inputs=real_img, create_graph=True
    )
    grad_penalty = (grad_real.view(grad_real.shape[0], -1).norm(2, dim=1) ** 2).mean()

    return grad_penalty


def g_nonsaturating_loss(fake_pred):
    loss = F.softplus(-fake_pred).mean()

    return loss


def g_path_regularize(fake_img, latents, mean_path_length, decay=0.01):
    noise = torch.randn_like(fake_img) / math.sqrt(
        fake_img.shape[2] * fake_img.shape[3]
    )
    grad, = autograd.grad(  # BREAK
        outputs=(fake_img * noise).sum(), inputs=latents, create_graph=True
    )
    path_lengths = torch.sqrt(grad.pow(2).sum(2).mean(1))

    path_mean = mean_path_length + decay * (
        path_lengths.detach().mean() - mean_path_length
    )

    path_penalty = (path_lengths - path_mean).pow(2).mean()

    return path_penalty, path_mean


def make_noise(batch, latent_dim, n_noise, device):
    if n_noise == 1:
        return torch.randn(batch, latent_dim, device=device)

    noises = torch.randn(n_noise, batch, latent_dim, device=device).unbind(0)

    return noises


saved_images = []
ckpt_buffer = io.BytesIO()


def save_image_(sample, path):
    """Adaptation: in-memory stand-in for torchvision.utils.save_image."""
    saved_images.append((path, sample.clone()))


def train(args, loader, generator, discriminator, g_optim, d_optim, g_ema, device):
    loader = sample_data(loader)

    pbar = range(args.iter)

    if get_rank() == 0:
        pbar = tqdm(pbar, dynamic_ncols=True)  # BREAK

    mean_path_length = 0

    d_loss_val = 0
    r1_loss = torch.tensor(0.0, device=device)
    g_loss_val = 0
    path_loss = torch.tensor(0.0, device=device)
    loss_dict = {}

    sample_z = torch.randn(8, args.latent, device=device)

    for i in pbar:
        real_img = next(loader)
        real_img = real_img.to(device)

        requires_grad(generator, False)
        requires_grad(discriminator, True)

        if args.mixing > 0 and random.random() < args.mixing:
            noises = make_noise(args.batch, args.latent, 4, device)
            noise1 = noises[:2]
            noise2 = noises[2:]

        else:
            noise1, noise2 = make_noise(args.batch, args.latent, 2, device)
            noise1 = [noise1]
            noise2 = [noise2]

        fake_img, _ = generator(noise1)
        fake_pred = discriminator(fake_img)

        real_pred = discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)

        loss_dict['d'] = d_loss

        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()  # BREAK

        d_regularize = i % args.d_reg_every == 0

        if d_regularize:
            real_img.requires_grad = True
            real_pred = discriminator(real_img)
            r1_loss = d_r1_loss(real_pred, real_img)

            discriminator.zero_grad()
            (args.r1 / 2 * r1_loss * args.d_reg_every).backward()
            d_optim.step()

        loss_dict['r1'] = r1_loss

        requires_grad(generator, True)
        requires_grad(discriminator, False)

        fake_img, latents = generator(noise2, return_latents=True)
        fake_pred = discriminator(fake_img)
        g_loss = g_nonsaturating_loss(fake_pred)

        loss_dict['g'] = g_loss

        g_regularize = i % args.g_reg_every == 0

        generator.zero_grad()
        g_loss.backward()
        g_optim.step()  # BREAK

        if g_regularize:
            fake_img, latents = generator(noise2, return_latents=True)
            path_loss, mean_path_length = g_path_regularize(
                fake_img, latents, mean_path_length
            )

            generator.zero_grad()
            (args.path_regularize * path_loss * args.g_reg_every).backward()
            g_optim.step()

            mean_path_length_avg = reduce_sum(mean_path_length) / get_world_size()

        loss_dict['path'] = path_loss

        accumulate(g_ema, generator)

        loss_reduced = reduce_loss_dict(loss_dict)

        d_loss_val = loss_reduced['d'].mean().item()
        g_loss_val = loss_reduced['g'].mean().item()
        r1_val = loss_reduced['r1'].mean().item()
        path_loss_val = loss_reduced['path'].mean().item()

        if get_rank() == 0:
            pbar.set_description(
                (
                    f'd: {d_loss_val:.4f}; g: {g_loss_val:.4f}; r1: {r1_val:.4f}; '
                    f'path: {path_loss_val:.4f}; mean path: {mean_path_length_avg:.4f}'
                )
            )

            if wandb and args.wandb:
                wandb.log(
                    {
                        'Generator': g_loss_val,
                        'Discriminator': d_loss_val,
                        'R1': r1_val,
                        'Path Length Regularization': path_loss_val,
                        'Mean Path Length': mean_path_length,
                    }
                )

            if i % 100 == 0:
                with torch.no_grad():
                    g_ema.eval()
                    sample, _ = g_ema([sample_z])
                    save_image_(
                        sample,
                        f'sample/{str(i).zfill(6)}.png',
                    )

            if i % 10000 == 0:
                torch.save(
                    {
                        'g': generator.state_dict(),
                        'd': discriminator.state_dict(),
                        'g_ema': g_ema.state_dict(),
                        'g_optim': g_optim.state_dict(),
                        'd_optim': d_optim.state_dict(),
                    },
                    ckpt_buffer,
                )

    return d_loss_val, g_loss_val, r1_val, path_loss_val


def reset_(nets, states, optims, opt_states, seed):
    """Adaptation: restore networks/optimizers and seed the RNGs so that a call repeats exactly."""
    for net, state in zip(nets, states):
        net.load_state_dict(state)  # BREAK
    for opt, state in zip(optims, opt_states):
        opt.load_state_dict(state)
    random.seed(seed)
    torch.manual_seed(seed)
    saved_images.clear()
    ckpt_buffer.seek(0)
    ckpt_buffer.truncate()


def train_run(args, loader, generator, discriminator, g_optim, d_optim, g_ema, states, opt_states):
    reset_((generator, discriminator, g_ema), states, (g_optim, d_optim), opt_states, args.seed)
    vals = train(args, loader, generator, discriminator, g_optim, d_optim, g_ema, 'cpu')
    with torch.no_grad():
        sample, _ = g_ema([torch.ones(2, args.latent)])
    return vals, sample


def target():
    torch.manual_seed(0)
    size, latent, n_mlp = 8, 16, 2
    generator = Generator(size, latent, n_mlp)
    discriminator = Discriminator(size)
    g_ema = Generator(size, latent, n_mlp)
    g_ema.eval()
    accumulate(g_ema, generator, 0)
    g_reg_ratio = 4 / (4 + 1)
    d_reg_ratio = 16 / (16 + 1)
    g_optim = optim.Adam(generator.parameters(), lr=0.002 * g_reg_ratio,
                         betas=(0 ** g_reg_ratio, 0.99 ** g_reg_ratio))
    d_optim = optim.Adam(discriminator.parameters(), lr=0.002 * d_reg_ratio,
                         betas=(0 ** d_reg_ratio, 0.99 ** d_reg_ratio))
    states = [copy.deepcopy(m.state_dict()) for m in (generator, discriminator, g_ema)]
    opt_states = [copy.deepcopy(o.state_dict()) for o in (g_optim, d_optim)]
    loader = [torch.rand(4, 1, size, size) * 2 - 1 for _ in range(2)]
    args1 = SimpleNamespace(iter=3, batch=4, latent=latent, mixing=0.9, d_reg_every=2, g_reg_every=2,
                            r1=10.0, path_regularize=2.0, wandb=False, seed=1)
    args2 = SimpleNamespace(iter=2, batch=4, latent=latent, mixing=0.5, d_reg_every=16, g_reg_every=1,
                            r1=1.0, path_regularize=1.0, wandb=False, seed=2)
    return [
        (train_run, (args1, loader, generator, discriminator, g_optim, d_optim, g_ema, states, opt_states), {}),
        (train_run, (args2, loader, generator, discriminator, g_optim, d_optim, g_ema, states, opt_states), {}),
    ]


EXPECT = ("caller: `train` is the eager GAN loop (infinite generator, `requires_grad` toggles, "
          "`random.random()` mixing decision, several backward/step pairs, lazy regularisation on `i %` tests, "
          "`.item()` logging into `tqdm`, EMA `accumulate`, image/checkpoint saving); compile the networks and "
          "the loss helpers (`d_logistic_loss`, `g_nonsaturating_loss`), keep the loop eager. "
          "`Generator.forward`'s `random.randint` inject index is a Python-random site of its own (none: the "
          "draw must stay on the host; pass `inject_index` in)")
