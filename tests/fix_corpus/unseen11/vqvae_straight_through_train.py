"""VQ-VAE training epoch with straight-through custom autograd Functions (ritheshkumar95/pytorch-vqvae:
`functions.py`: `VectorQuantization`, `VectorQuantizationStraightThrough`, `vq`, `vq_st`; `modules.py`:
`weights_init`, `VQEmbedding`, `ResBlock`, `VectorQuantizedVAE`; `vqvae.py`: `train`). `VectorQuantization` is a
`torch.autograd.Function` whose `forward` runs under `torch.no_grad()`, computes codebook distances with
`torch.addmm(..., alpha=-2.0, beta=1.0)` and calls `ctx.mark_non_differentiable(indices)` (its `backward` raises);
`VectorQuantizationStraightThrough.forward` calls `vq(...)` (the other Function's `apply`) inside its own forward,
saves tensors, marks the indices non-differentiable and returns `(codes, indices_flatten)`; its `backward` checks
`ctx.needs_input_grad[...]` and scatters the codebook gradient with `index_add_`. `VQEmbedding.straight_through`
applies it to `self.embedding.weight.detach()` and gathers `z_q_x_bar` with `index_select`; `train` runs
`model.train()`, `optimizer.zero_grad()`, the three MSE losses, `loss.backward()`,
`writer.add_scalar(..., loss_recons.item(), args.steps)`, `optimizer.step()` and `args.steps += 1` per batch.
Provenance note: `functions.py` and `modules.py` were read from stored revisions of the repository; the stored
`functions.py` revision returns only `codes` from the straight-through Function while the stored `modules.py`
unpacks `z_q_x_, indices = vq_st(...)`, so the program uses the repository's later `functions.py` (two outputs,
`mark_non_differentiable(indices_flatten)`, `backward(ctx, grad_output, grad_indices)`), whose text was read from
an identical vendored copy found by code search.
Adaptations: tensorboardX's `SummaryWriter` is a minimal in-memory stand-in (`ScalarWriter.add_scalar` appends to a
list); the torchvision data loader is a list of `(images, labels)` batches made in the factory; the sizes are shrunk
(3-channel 16x16 images, `hidden_size` 16, `k` 32); `args` is a `SimpleNamespace` with the fields read. So that a
call repeats exactly, the called function (`train_epoch`, an adaptation) restores the model and optimizer from
copies taken in the factory, resets `args.steps` and the writer (`reset_`), then calls `train`; it returns the logged
scalars and the reconstruction of the first batch. The two calls use different data and `beta`."""
import copy
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function


class VectorQuantization(Function):
    @staticmethod
    def forward(ctx, inputs, codebook):
        with torch.no_grad():
            embedding_size = codebook.size(1)
            inputs_size = inputs.size()
            inputs_flatten = inputs.view(-1, embedding_size)

            codebook_sqr = torch.sum(codebook ** 2, dim=1)
            inputs_sqr = torch.sum(inputs_flatten ** 2, dim=1, keepdim=True)

            # Compute the distances to the codebook
            distances = torch.addmm(codebook_sqr + inputs_sqr,
                inputs_flatten, codebook.t(), alpha=-2.0, beta=1.0)

            _, indices_flatten = torch.min(distances, dim=1)
            indices = indices_flatten.view(*inputs_size[:-1])
            ctx.mark_non_differentiable(indices)

            return indices

    @staticmethod
    def backward(ctx, grad_output):
        raise RuntimeError('Trying to call `.grad()` on graph containing '
            '`VectorQuantization`. The function `VectorQuantization` '
            'is not differentiable. Use `VectorQuantizationStraightThrough` '
            'if you want a straight-through estimator of the gradient.')


class VectorQuantizationStraightThrough(Function):
    @staticmethod
    def forward(ctx, inputs, codebook):
        indices = vq(inputs, codebook)
        indices_flatten = indices.view(-1)
        ctx.save_for_backward(indices_flatten, codebook)
        ctx.mark_non_differentiable(indices_flatten)

        codes_flatten = torch.index_select(codebook, dim=0,
            index=indices_flatten)
        codes = codes_flatten.view_as(inputs)

        return (codes, indices_flatten)

    @staticmethod
    def backward(ctx, grad_output, grad_indices):
        grad_inputs, grad_codebook = None, None

        if ctx.needs_input_grad[0]:
            # Straight-through estimator
            grad_inputs = grad_output.clone()
        if ctx.needs_input_grad[1]:
            # Gradient wrt. the codebook
            indices, codebook = ctx.saved_tensors
            embedding_size = codebook.size(1)

            grad_output_flatten = (grad_output.contiguous()
                                              .view(-1, embedding_size))
            grad_codebook = torch.zeros_like(codebook)
            grad_codebook.index_add_(0, indices, grad_output_flatten)

        return (grad_inputs, grad_codebook)


vq = VectorQuantization.apply
vq_st = VectorQuantizationStraightThrough.apply
__all__ = [vq, vq_st]


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        try:
            nn.init.xavier_uniform_(m.weight.data)
            m.bias.data.fill_(0)
        except AttributeError:
            print("Skipping initialization of ", classname)


class VQEmbedding(nn.Module):
    def __init__(self, K, D):
        super().__init__()
        self.embedding = nn.Embedding(K, D)
        self.embedding.weight.data.uniform_(-1./K, 1./K)

    def forward(self, z_e_x):
        z_e_x_ = z_e_x.permute(0, 2, 3, 1).contiguous()
        latents = vq(z_e_x_, self.embedding.weight)
        return latents

    def straight_through(self, z_e_x):
        z_e_x_ = z_e_x.permute(0, 2, 3, 1).contiguous()
        z_q_x_, indices = vq_st(z_e_x_, self.embedding.weight.detach())
        z_q_x = z_q_x_.permute(0, 3, 1, 2).contiguous()

        z_q_x_bar_flatten = torch.index_select(self.embedding.weight,
            dim=0, index=indices)
        z_q_x_bar_ = z_q_x_bar_flatten.view_as(z_e_x_)
        z_q_x_bar = z_q_x_bar_.permute(0, 3, 1, 2).contiguous()

        return z_q_x, z_q_x_bar


class ResBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = nn.Sequential(
            nn.ReLU(True),
            nn.Conv2d(dim, dim, 3, 1, 1),
            nn.BatchNorm2d(dim),
            nn.ReLU(True),
            nn.Conv2d(dim, dim, 1),
            nn.BatchNorm2d(dim)
        )

    def forward(self, x):
        return x + self.block(x)


class VectorQuantizedVAE(nn.Module):
    def __init__(self, input_dim, dim, K=512):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(input_dim, dim, 4, 2, 1),
            nn.BatchNorm2d(dim),
            nn.ReLU(True),
            nn.Conv2d(dim, dim, 4, 2, 1),
            ResBlock(dim),
            ResBlock(dim),
        )

        self.codebook = VQEmbedding(K, dim)

        self.decoder = nn.Sequential(
            ResBlock(dim),
            ResBlock(dim),
            nn.ReLU(True),
            nn.ConvTranspose2d(dim, dim, 4, 2, 1),
            nn.BatchNorm2d(dim),
            nn.ReLU(True),
            nn.ConvTranspose2d(dim, input_dim, 4, 2, 1),
            nn.Tanh()
        )

        self.apply(weights_init)

    def encode(self, x):
        z_e_x = self.encoder(x)
        latents = self.codebook(z_e_x)
        return latents

    def decode(self, latents):
        z_q_x = self.codebook.embedding(latents).permute(0, 3, 1, 2)  # (B, D, H, W)
        x_tilde = self.decoder(z_q_x)
        return x_tilde

    def forward(self, x):
        z_e_x = self.encoder(x)
        z_q_x_st, z_q_x = self.codebook.straight_through(z_e_x)
        x_tilde = self.decoder(z_q_x_st)
        return x_tilde, z_e_x, z_q_x


class ScalarWriter:
    """Adaptation: in-memory stand-in for tensorboardX.SummaryWriter."""

    def __init__(self):
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))


def train(data_loader, model, optimizer, args, writer):
    model.train()

    for images, _ in data_loader:
        images = images.to(args.device)

        optimizer.zero_grad()  # BREAK
        x_tilde, z_e_x, z_q_x = model(images)

        # Reconstruction loss
        loss_recons = F.mse_loss(x_tilde, images)
        # Vector quantization objective
        loss_vq = F.mse_loss(z_q_x, z_e_x.detach())
        # Commitment objective
        loss_commit = F.mse_loss(z_e_x, z_q_x.detach())

        loss = loss_recons + loss_vq + args.beta * loss_commit
        loss.backward()

        # Logs
        writer.add_scalar('loss/train/reconstruction', loss_recons.item(), args.steps)
        writer.add_scalar('loss/train/quantization', loss_vq.item(), args.steps)

        optimizer.step()  # BREAK
        args.steps += 1


def reset_(model, optimizer, model_state, opt_state, args, writer):
    """Adaptation: restore the initial model/optimizer/step counter so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)
    args.steps = 0
    writer.scalars = []


def train_epoch(data_loader, model, optimizer, model_state, opt_state, args, writer):
    reset_(model, optimizer, model_state, opt_state, args, writer)
    train(data_loader, model, optimizer, args, writer)
    model.eval()
    with torch.no_grad():
        x_tilde, _, _ = model(data_loader[0][0])
    return writer.scalars, x_tilde


def target():
    torch.manual_seed(0)
    model = VectorQuantizedVAE(3, 16, 32)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())
    writer = ScalarWriter()
    loader1 = [(torch.rand(8, 3, 16, 16) * 2 - 1, torch.zeros(8)) for _ in range(2)]
    loader2 = [(torch.rand(6, 3, 16, 16) * 2 - 1, torch.zeros(6)) for _ in range(3)]
    args1 = SimpleNamespace(device='cpu', beta=1.0, steps=0)
    args2 = SimpleNamespace(device='cpu', beta=0.25, steps=0)
    return [
        (train_epoch, (loader1, model, optimizer, model_state, opt_state, args1, writer), {}),
        (train_epoch, (loader2, model, optimizer, model_state, opt_state, args2, writer), {}),
    ]


EXPECT = ("caller: the per-step `loss_recons.item()`/`loss_vq.item()` writer logging and the optimizer step belong to "
          "the eager training loop (compile the model's forward and loss; log after the step); the two custom "
          "autograd Functions (`vq` applied inside `VectorQuantizationStraightThrough.forward`, "
          "`mark_non_differentiable`) are expected to trace")
