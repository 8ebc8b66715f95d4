"""One WGAN-GP training epoch from EmilienDupont/wgan-gp (`training.py`: `Trainer.__init__`,
`_critic_train_iteration`, `_generator_train_iteration`, `_gradient_penalty`, `_train_epoch`, `sample_generator`,
stored revision 50361ca, one of two stored revisions of the file, the other not read; `models.py`: `Generator`,
`Discriminator`, stored revision b047893). `_train_epoch` counts steps in `self.num_steps`, runs a critic iteration
per batch and a generator iteration every `critic_iterations` steps, and prints the last recorded losses every
`print_every` batches with `str.format`. The critic iteration wraps data in `Variable`, computes the gradient
penalty with `torch.autograd.grad(..., create_graph=True)` on `Variable(interpolated, requires_grad=True)` (a
`torch.rand` mixing weight), appends Python numbers to `self.losses` lists, and steps the critic's optimizer; the
generator iteration samples latents with `torch.randn` and steps the generator's optimizer.

Adaptations: `.data[0]` (four places) is written `.item()` (indexing a 0-d tensor fails in current torch);
`models.py` divides image sizes with `/` (`self.img_size[0] / 16`, `img_size[0] / 16`), which gives floats that
`nn.Linear` and `view` reject in Python 3: written `//`. `_train_epoch` returns nothing in the original; a final
`return self.losses` was added so that a call has an output to compare. `train` (torchvision's `make_grid`, imageio
GIF writing) is not used; `torchvision`/`imageio` imports are dropped. Sizes: 16x16 single-channel images,
`dim=4`, latent 8, batches of 4, `critic_iterations=2`, `print_every=2`. The trainers, networks and Adam optimizers
(lr 1e-4, betas (.5, .9), the collector's choice: `main.py` was not read) are built in the factory, one set per
call; the data loaders are lists of `(images, labels)` tuples.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.autograd import grad as torch_grad


# ---- models.py
class Generator(nn.Module):
    def __init__(self, img_size, latent_dim, dim):
        super(Generator, self).__init__()

        self.dim = dim
        self.latent_dim = latent_dim
        self.img_size = img_size
        self.feature_sizes = (self.img_size[0] // 16, self.img_size[1] // 16)

        self.latent_to_features = nn.Sequential(
            nn.Linear(latent_dim, 8 * dim * self.feature_sizes[0] * self.feature_sizes[1]),
            nn.ReLU()
        )

        self.features_to_image = nn.Sequential(
            nn.ConvTranspose2d(8 * dim, 4 * dim, 4, 2, 1),
            nn.ReLU(),
            nn.BatchNorm2d(4 * dim),
            nn.ConvTranspose2d(4 * dim, 2 * dim, 4, 2, 1),
            nn.ReLU(),
            nn.BatchNorm2d(2 * dim),
            nn.ConvTranspose2d(2 * dim, dim, 4, 2, 1),
            nn.ReLU(),
            nn.BatchNorm2d(dim),
            nn.ConvTranspose2d(dim, self.img_size[2], 4, 2, 1),
            nn.Sigmoid()
        )

    def forward(self, input_data):
        # Map latent into appropriate size for transposed convolutions
        x = self.latent_to_features(input_data)
        # Reshape
        x = x.view(-1, 8 * self.dim, self.feature_sizes[0], self.feature_sizes[1])
        # Return generated image
        return self.features_to_image(x)

    def sample_latent(self, num_samples):
        return torch.randn((num_samples, self.latent_dim))


class Discriminator(nn.Module):
    def __init__(self, img_size, dim):
        """
        img_size : (int, int, int)
            Height and width must be powers of 2.  E.g. (32, 32, 1) or
            (64, 128, 3). Last number indicates number of channels, e.g. 1 for
            grayscale or 3 for RGB
        """
        super(Discriminator, self).__init__()

        self.img_size = img_size

        self.image_to_features = nn.Sequential(
            nn.Conv2d(self.img_size[2], dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(dim, 2 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * dim, 4 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(4 * dim, 8 * dim, 4, 2, 1),
            nn.Sigmoid()
        )

        # 4 convolutions of stride 2, i.e. halving of size everytime
        # So output size will be 8 * (img_size / 2 ^ 4) * (img_size / 2 ^ 4)
        output_size = 8 * dim * (img_size[0] // 16) * (img_size[1] // 16)
        self.features_to_prob = nn.Sequential(
            nn.Linear(output_size, 1),
            nn.Sigmoid()
        )

    def forward(self, input_data):
        batch_size = input_data.size()[0]
        x = self.image_to_features(input_data)
        x = x.view(batch_size, -1)
        return self.features_to_prob(x)


# ---- training.py
class Trainer():
    def __init__(self, generator, discriminator, gen_optimizer, dis_optimizer,
                 gp_weight=10, critic_iterations=5, print_every=50,
                 use_cuda=False):
        self.G = generator
        self.G_opt = gen_optimizer
        self.D = discriminator
        self.D_opt = dis_optimizer
        self.losses = {'G': [], 'D': [], 'GP': [], 'gradient_norm': []}
        self.num_steps = 0
        self.use_cuda = use_cuda
        self.gp_weight = gp_weight
        self.critic_iterations = critic_iterations
        self.print_every = print_every

        if self.use_cuda:
            self.G.cuda()
            self.D.cuda()

    def _critic_train_iteration(self, data):
        """ """
        # Get generated data
        batch_size = data.size()[0]
        generated_data = self.sample_generator(batch_size)

        # Calculate probabilities on real and generated data
        data = Variable(data)  # BREAK
        if self.use_cuda:
            data = data.cuda()
        d_real = self.D(data)
        d_generated = self.D(generated_data)

        # Get gradient penalty
        gradient_penalty = self._gradient_penalty(data, generated_data)
        self.losses['GP'].append(gradient_penalty.item())  # BREAK

        # Create total loss and optimize
        self.D_opt.zero_grad()  # BREAK
        d_loss = d_generated.mean() - d_real.mean() + gradient_penalty
        d_loss.backward()  # BREAK

        self.D_opt.step()  # BREAK

        # Record loss
        self.losses['D'].append(d_loss.item())  # BREAK

    def _generator_train_iteration(self, data):
        """ """
        self.G_opt.zero_grad()  # BREAK

        # Get generated data
        batch_size = data.size()[0]
        generated_data = self.sample_generator(batch_size)

        # Calculate loss and optimize
        d_generated = self.D(generated_data)
        g_loss = - d_generated.mean()
        g_loss.backward()  # BREAK
        self.G_opt.step()  # BREAK

        # Record loss
        self.losses['G'].append(g_loss.item())  # BREAK

    def _gradient_penalty(self, real_data, generated_data):
        batch_size = real_data.size()[0]

        # Calculate interpolation
        alpha = torch.rand(batch_size, 1, 1, 1)
        alpha = alpha.expand_as(real_data)
        if self.use_cuda:
            alpha = alpha.cuda()
        interpolated = alpha * real_data.data + (1 - alpha) * generated_data.data
        interpolated = Variable(interpolated, requires_grad=True)  # BREAK
        if self.use_cuda:
            interpolated = interpolated.cuda()

        # Calculate probability of interpolated examples
        prob_interpolated = self.D(interpolated)

        # Calculate gradients of probabilities with respect to examples
        gradients = torch_grad(outputs=prob_interpolated, inputs=interpolated,  # BREAK
                               grad_outputs=torch.ones(prob_interpolated.size()).cuda() if self.use_cuda else torch.ones(
                               prob_interpolated.size()),
                               create_graph=True, retain_graph=True)[0]

        # Gradients have shape (batch_size, num_channels, img_width, img_height),
        # so flatten to easily take norm per example in batch
        gradients = gradients.view(batch_size, -1)
        self.losses['gradient_norm'].append(gradients.norm(2, dim=1).mean().item())  # BREAK

        # Derivatives of the gradient close to 0 can cause problems because of
        # the square root, so manually calculate norm and add epsilon
        gradients_norm = torch.sqrt(torch.sum(gradients ** 2, dim=1) + 1e-12)

        # Return gradient penalty
        return self.gp_weight * ((gradients_norm - 1) ** 2).mean()

    def _train_epoch(self, data_loader):
        for i, data in enumerate(data_loader):
            self.num_steps += 1
            self._critic_train_iteration(data[0])
            # Only update generator every |critic_iterations| iterations
            if self.num_steps % self.critic_iterations == 0:
                self._generator_train_iteration(data[0])

            if i % self.print_every == 0:
                print("Iteration {}".format(i + 1))
                print("D: {}".format(self.losses['D'][-1]))
                print("GP: {}".format(self.losses['GP'][-1]))
                print("Gradient norm: {}".format(self.losses['gradient_norm'][-1]))
                if self.num_steps > self.critic_iterations:
                    print("G: {}".format(self.losses['G'][-1]))
        return self.losses  # adaptation: added so that the call has an output

    def sample_generator(self, num_samples):
        latent_samples = Variable(self.G.sample_latent(num_samples))  # BREAK
        if self.use_cuda:
            latent_samples = latent_samples.cuda()
        generated_data = self.G(latent_samples)
        return generated_data

    def sample(self, num_samples):
        generated_data = self.sample_generator(num_samples)
        # Remove color channel
        return generated_data.data.cpu().numpy()[:, 0, :, :]


def target():
    torch.manual_seed(0)
    img_size = (16, 16, 1)
    base_G = Generator(img_size=img_size, latent_dim=8, dim=4)
    base_D = Discriminator(img_size=img_size, dim=4)

    calls = []
    for n_batches in (4, 3):
        generator = Generator(img_size=img_size, latent_dim=8, dim=4)
        discriminator = Discriminator(img_size=img_size, dim=4)
        generator.load_state_dict(base_G.state_dict())
        discriminator.load_state_dict(base_D.state_dict())
        G_optimizer = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(.5, .9))
        D_optimizer = torch.optim.Adam(discriminator.parameters(), lr=1e-4, betas=(.5, .9))
        trainer = Trainer(generator, discriminator, G_optimizer, D_optimizer,
                          critic_iterations=2, print_every=2)
        loader = [(torch.rand(4, 1, 16, 16), torch.zeros(4, dtype=torch.long)) for _ in range(n_batches)]
        calls.append((Trainer._train_epoch, (trainer, loader), {}))
    return calls


EXPECT = ("extract: the critic and generator iterations are compilable forward/backward work interrupted by "
          "host logging (loss.item() appended to Python lists, str.format prints) and the optimizer steps; "
          "moving the logging out under an escape hatch leaves the penalty and losses traced, while "
          "torch.autograd.grad(create_graph=True) and the optimizer steps remain eager glue")
