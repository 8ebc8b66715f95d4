"""An InfoGAN training epoch from eriklindernoren/PyTorch-GAN (`implementations/infogan/infogan.py`): the
module-level `opt`, `weights_init_normal` (class-name `find` dispatch), `to_categorical` (a NumPy one-hot
`y_cat[range(y.shape[0]), y] = 1.` wrapped as `Variable(FloatTensor(y_cat))`), `Generator` (latent + label + code
concatenation, `view`, upsampling conv blocks) and `Discriminator` (a nested `discriminator_block` helper
returning layer lists spliced with `*`, three heads including `nn.Softmax()` without `dim`), the static sampling
inputs built with list comprehensions and `np.zeros`, `sample_image` (NumPy `linspace`/`repeat`/`concatenate`
codes), and the training loop body: `Variable(FloatTensor(batch_size, 1).fill_(1.0), requires_grad=False)`
ground truths, `labels.numpy()` into `to_categorical`, `np.random.normal`/`np.random.randint`/`np.random.uniform`
noise, labels and codes turned into tensors every step, generator/discriminator/information updates with three
Adam optimizers (`itertools.chain` parameters for the information loss), a `%`-formatted print with three
`.item()`s and `sample_image` every `sample_interval` batches.
Adaptations: the script's module-level training is wrapped in a function `train_epoch` (the loop body is
unchanged) and `opt` is an `argparse.Namespace` with small sizes (latent 6, 3 classes, code 2, 8x8 images,
1 channel, `sample_interval` 2); the MNIST loader is a list of `(imgs, labels)` batches made in the factory;
`save_image` appends the image tensors to an in-memory list (`saved_images`); the `os.makedirs` calls are
dropped; `.cuda()` paths are not taken (`cuda = False`). So that a call repeats exactly, the called function
`train_epoch` restores generator, discriminator and the three optimizers from copies taken in the factory and
seeds NumPy and torch (`reset_`); it returns the last losses, a generator weight and the number of saved grids."""
import argparse
import copy
import itertools

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

opt = argparse.Namespace(n_epochs=1, batch_size=4, lr=0.0002, b1=0.5, b2=0.999, n_cpu=1, latent_dim=6,
                         code_dim=2, n_classes=3, img_size=8, channels=1, sample_interval=2)

cuda = False  # adaptation: CPU (the original: True if torch.cuda.is_available() else False)

FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor

saved_images = []


def save_image(tensor, path, nrow=8, normalize=False):
    """Stand-in for torchvision.utils.save_image: keep the grid in memory."""
    saved_images.append((path, tensor.detach().clone()))


def weights_init_normal(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight.data, 1.0, 0.02)
        torch.nn.init.constant_(m.bias.data, 0.0)


def to_categorical(y, num_columns):
    """Returns one-hot encoded Variable"""
    y_cat = np.zeros((y.shape[0], num_columns))
    y_cat[range(y.shape[0]), y] = 1.

    return Variable(FloatTensor(y_cat))


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        input_dim = opt.latent_dim + opt.n_classes + opt.code_dim

        self.init_size = opt.img_size // 4 # Initial size before upsampling
        self.l1 = nn.Sequential(nn.Linear(input_dim, 16*self.init_size**2))

        self.conv_blocks = nn.Sequential(
            nn.BatchNorm2d(16),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(16, 16, 3, stride=1, padding=1),
            nn.BatchNorm2d(16, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(16, 8, 3, stride=1, padding=1),
            nn.BatchNorm2d(8, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(8, opt.channels, 3, stride=1, padding=1),
            nn.Tanh()
        )

    def forward(self, noise, labels, code):
        gen_input = torch.cat((noise, labels, code), -1)
        out = self.l1(gen_input)
        out = out.view(out.shape[0], 16, self.init_size, self.init_size)
        img = self.conv_blocks(out)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        def discriminator_block(in_filters, out_filters, bn=True):
            """Returns layers of each discriminator block"""
            block = [   nn.Conv2d(in_filters, out_filters, 3, 2, 1),
                        nn.LeakyReLU(0.2, inplace=True),
                        nn.Dropout2d(0.25)]
            if bn:
                block.append(nn.BatchNorm2d(out_filters, 0.8))
            return block

        self.conv_blocks = nn.Sequential(
            *discriminator_block(opt.channels, 8, bn=False),
            *discriminator_block(8, 16),
        )

        # The height and width of downsampled image
        ds_size = opt.img_size // 2**2

        # Output layers
        self.adv_layer = nn.Sequential(nn.Linear(16*ds_size**2, 1))
        self.aux_layer = nn.Sequential(
            nn.Linear(16*ds_size**2, opt.n_classes),
            nn.Softmax()
        )
        self.latent_layer = nn.Sequential(nn.Linear(16*ds_size**2, opt.code_dim))

    def forward(self, img):
        out = self.conv_blocks(img)
        out = out.view(out.shape[0], -1)
        validity = self.adv_layer(out)
        label = self.aux_layer(out)
        latent_code = self.latent_layer(out)

        return validity, label, latent_code


# Loss functions
adversarial_loss = torch.nn.MSELoss()
categorical_loss = torch.nn.CrossEntropyLoss()
continuous_loss = torch.nn.MSELoss()

# Loss weights
lambda_cat = 1
lambda_con = 0.1

# Static generator inputs for sampling
static_z = Variable(FloatTensor(np.zeros((opt.n_classes**2, opt.latent_dim))))
static_label = to_categorical(np.array([num for _ in range(opt.n_classes) for num in range(opt.n_classes)]),
                                num_columns=opt.n_classes)
static_code = Variable(FloatTensor(np.zeros((opt.n_classes**2, opt.code_dim))))


def sample_image(generator, n_row, batches_done):
    """Saves a grid of generated digits ranging from 0 to n_classes"""
    # Static sample
    z = Variable(FloatTensor(np.random.normal(0, 1, (n_row**2, opt.latent_dim))))
    static_sample = generator(z, static_label, static_code)
    save_image(static_sample.data, 'images/static/%d.png' % batches_done, nrow=n_row, normalize=True)

    # Get varied c1 and c2
    zeros = np.zeros((n_row**2, 1))
    c_varied = np.repeat(np.linspace(-1, 1, n_row)[:, np.newaxis], n_row, 0)
    c1 = Variable(FloatTensor(np.concatenate((c_varied, zeros), -1)))
    c2 = Variable(FloatTensor(np.concatenate((zeros, c_varied), -1)))
    sample1 = generator(static_z, static_label, c1)
    sample2 = generator(static_z, static_label, c2)
    save_image(sample1.data, 'images/varying_c1/%d.png' % batches_done, nrow=n_row, normalize=True)
    save_image(sample2.data, 'images/varying_c2/%d.png' % batches_done, nrow=n_row, normalize=True)


def reset_(generator, discriminator, optimizers, states, seed):
    """Adaptation: restore nets/optimizers from the factory's copies, seed NumPy and torch."""
    generator.load_state_dict(states[0])  # BREAK
    discriminator.load_state_dict(states[1])  # BREAK
    for o, s in zip(optimizers, states[2:]):
        o.load_state_dict(s)  # BREAK
    saved_images.clear()
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_epoch(generator, discriminator, optimizers, dataloader, states, seed=0):
    reset_(generator, discriminator, optimizers, states, seed)
    optimizer_G, optimizer_D, optimizer_info = optimizers
    for epoch in range(opt.n_epochs):
        for i, (imgs, labels) in enumerate(dataloader):

            batch_size = imgs.shape[0]

            # Adversarial ground truths
            valid = Variable(FloatTensor(batch_size, 1).fill_(1.0), requires_grad=False)  # BREAK
            fake = Variable(FloatTensor(batch_size, 1).fill_(0.0), requires_grad=False)

            # Configure input
            real_imgs = Variable(imgs.type(FloatTensor))
            labels = to_categorical(labels.numpy(), num_columns=opt.n_classes)

            # -----------------
            #  Train Generator
            # -----------------

            optimizer_G.zero_grad()

            # Sample noise and labels as generator input
            z = Variable(FloatTensor(np.random.normal(0, 1, (batch_size, opt.latent_dim))))
            label_input = to_categorical(np.random.randint(0, opt.n_classes, batch_size), num_columns=opt.n_classes)
            code_input = Variable(FloatTensor(np.random.uniform(-1, 1, (batch_size, opt.code_dim))))

            # Generate a batch of images
            gen_imgs = generator(z, label_input, code_input)

            # Loss measures generator's ability to fool the discriminator
            validity, _, _ = discriminator(gen_imgs)
            g_loss = adversarial_loss(validity, valid)

            g_loss.backward()
            optimizer_G.step()

            # ---------------------
            #  Train Discriminator
            # ---------------------

            optimizer_D.zero_grad()

            # Loss for real images
            real_pred, _, _ = discriminator(real_imgs)
            d_real_loss = adversarial_loss(real_pred, valid)

            # Loss for fake images
            fake_pred, _, _ = discriminator(gen_imgs.detach())
            d_fake_loss = adversarial_loss(fake_pred, fake)

            # Total discriminator loss
            d_loss = (d_real_loss + d_fake_loss) / 2

            d_loss.backward()
            optimizer_D.step()

            #------------------
            # Information Loss
            #------------------

            optimizer_info.zero_grad()

            # Sample labels
            sampled_labels = np.random.randint(0, opt.n_classes, batch_size)

            # Ground truth labels
            gt_labels = Variable(LongTensor(sampled_labels), requires_grad=False)


            # Sample noise, labels and code as generator input
            z = Variable(FloatTensor(np.random.normal(0, 1, (batch_size, opt.latent_dim))))
            label_input = to_categorical(sampled_labels, num_columns=opt.n_classes)
            code_input = Variable(FloatTensor(np.random.normal(-1, 1, (batch_size, opt.code_dim))))

            gen_imgs = generator(z, label_input, code_input)
            _, pred_label, pred_code = discriminator(gen_imgs)

            info_loss = lambda_cat * categorical_loss(pred_label, gt_labels) + \
                        lambda_con * continuous_loss(pred_code, code_input)

            info_loss.backward()
            optimizer_info.step()

            #--------------
            # Log Progress
            #--------------

            print ("[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f] [info loss: %f]" % (epoch, opt.n_epochs, i, len(dataloader),
                                                                d_loss.item(), g_loss.item(), info_loss.item()))
            batches_done = epoch * len(dataloader) + i
            if batches_done % opt.sample_interval == 0:
                sample_image(generator, n_row=opt.n_classes, batches_done=batches_done)
    return (torch.stack([d_loss.detach(), g_loss.detach(), info_loss.detach()]),
            generator.l1[0].weight.detach().clone(), len(saved_images))


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    # Initialize generator and discriminator
    generator = Generator()
    discriminator = Discriminator()
    # Initialize weights
    generator.apply(weights_init_normal)
    discriminator.apply(weights_init_normal)
    # Optimizers
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
    optimizer_info = torch.optim.Adam(itertools.chain(generator.parameters(), discriminator.parameters()),
                                        lr=opt.lr, betas=(opt.b1, opt.b2))
    optimizers = (optimizer_G, optimizer_D, optimizer_info)
    states = tuple(copy.deepcopy(x.state_dict()) for x in (generator, discriminator) + optimizers)
    loader1 = [(torch.rand(opt.batch_size, 1, 8, 8) * 2 - 1, torch.randint(0, opt.n_classes, (opt.batch_size,)))
               for _ in range(3)]
    loader2 = [(torch.rand(opt.batch_size, 1, 8, 8) * 2 - 1, torch.randint(0, opt.n_classes, (opt.batch_size,)))
               for _ in range(2)]
    return [
        (train_epoch, (generator, discriminator, optimizers, loader1, states), {"seed": 1}),
        (train_epoch, (generator, discriminator, optimizers, loader2, states), {"seed": 2}),
    ]


EXPECT = ("none: every step draws its noise, labels and codes from NumPy's global RNG (`np.random.normal`/"
          "`randint`/`uniform`) and builds tensors from host arrays (`to_categorical`'s `np.zeros` one-hot, "
          "`labels.numpy()`); replacing them with torch ops changes the random stream, so no verified rewrite keeps "
          "the outputs, and the loop is host-driven (three optimizers, `.item()` prints, sampling)")
