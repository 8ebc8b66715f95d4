"""CycleGAN training iterations with the fake-image history pool (junyanz/pytorch-CycleGAN-and-pix2pix:
`util/image_pool.py`: `ImagePool`; `models/networks.py`: `GANLoss`; `models/cycle_gan_model.py`: `CycleGANModel`
(`set_input`, `forward`, `backward_D_basic`, `backward_D_A`, `backward_D_B`, `backward_G`,
`optimize_parameters`); `models/base_model.py`: `set_requires_grad`, `get_current_losses`). `ImagePool.query`
loops over the batch (`for image in images:` with `torch.unsqueeze(image.data, 0)`), appends to a Python list
while `self.num_imgs < self.pool_size`, otherwise draws `p = random.uniform(0, 1)` and, `if p > 0.5`, swaps with a
stored image at `random.randint(0, self.pool_size - 1)` (`.clone()`), and `torch.cat`s the list. `GANLoss` keeps
`real_label`/`fake_label` buffers, picks the criterion from a `gan_mode` string, `get_target_tensor` branches on the
Python bool `target_is_real` and `expand_as`es the label, `__call__` is overridden (`if self.gan_mode in ['lsgan',
'vanilla']:`). `optimize_parameters` runs the generators, toggles `param.requires_grad` on the discriminators
(`set_requires_grad`), steps the generator optimizer after `backward_G` (identity losses `if lambda_idt > 0`, else
the int `0`), then the discriminators with the pooled fakes; `get_current_losses` reads `float(getattr(self,
'loss_' + name))` for every name in `self.loss_names`.
Adaptations: the ResNet generators and PatchGAN discriminators are small conv stand-ins (3x16x16 images);
`BaseModel` is reduced to the two methods used and the option object to a `SimpleNamespace`; the models keep
`self.device = 'cpu'`; `GANLoss`, `CycleGANModel` and `BaseModel` were written from the collector's knowledge of the
repository's files (only `util/image_pool.py` was read from the stored copy). So that a call repeats exactly, the
called function (`train_iters`, an adaptation) restores the four networks and both optimizers from copies taken in
the factory, empties the pools and seeds `random` (`reset_`); it returns the per-iteration losses and the last
`fake_B`. The two calls use different batches, pool sizes and identity weights."""
import copy
import itertools
import random
from collections import OrderedDict
from types import SimpleNamespace

import torch
import torch.nn as nn


class ImagePool():
    """This class implements an image buffer that stores previously generated images.

    This buffer enables us to update discriminators using a history of generated images
    rather than the ones produced by the latest generators.
    """

    def __init__(self, pool_size):
        """Initialize the ImagePool class

        Parameters:
            pool_size (int) -- the size of image buffer, if pool_size=0, no buffer will be created
        """
        self.pool_size = pool_size
        if self.pool_size > 0:  # create an empty pool
            self.num_imgs = 0
            self.images = []

    def query(self, images):
        """Return an image from the pool.

        Parameters:
            images: the latest generated images from the generator

        Returns images from the buffer.

        By 50/100, the buffer will return input images.
        By 50/100, the buffer will return images previously stored in the buffer,
        and insert the current images to the buffer.
        """
        if self.pool_size == 0:  # if the buffer size is 0, do nothing
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:   # if the buffer is not full; keep inserting current images to the buffer
                self.num_imgs = self.num_imgs + 1
                self.images.append(image)
                return_images.append(image)
            else:
                p = random.uniform(0, 1)
                if p > 0.5:  # by 50% chance, the buffer will return a previously stored image, and insert the current image into the buffer  # BREAK
                    random_id = random.randint(0, self.pool_size - 1)  # randint is inclusive
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:       # by another 50% chance, the buffer will return the current image
                    return_images.append(image)
        return_images = torch.cat(return_images, 0)   # collect all the images and return
        return return_images


class GANLoss(nn.Module):
    """Define different GAN objectives."""

    def __init__(self, gan_mode, target_real_label=1.0, target_fake_label=0.0):
        super(GANLoss, self).__init__()
        self.register_buffer('real_label', torch.tensor(target_real_label))
        self.register_buffer('fake_label', torch.tensor(target_fake_label))
        self.gan_mode = gan_mode
        if gan_mode == 'lsgan':
            self.loss = nn.MSELoss()
        elif gan_mode == 'vanilla':
            self.loss = nn.BCEWithLogitsLoss()
        elif gan_mode in ['wgangp']:
            self.loss = None
        else:
            raise NotImplementedError('gan mode %s not implemented' % gan_mode)

    def get_target_tensor(self, prediction, target_is_real):
        if target_is_real:
            target_tensor = self.real_label
        else:
            target_tensor = self.fake_label
        return target_tensor.expand_as(prediction)

    def __call__(self, prediction, target_is_real):
        if self.gan_mode in ['lsgan', 'vanilla']:
            target_tensor = self.get_target_tensor(prediction, target_is_real)
            loss = self.loss(prediction, target_tensor)
        elif self.gan_mode == 'wgangp':
            if target_is_real:
                loss = -prediction.mean()
            else:
                loss = prediction.mean()
        return loss


def small_generator():
    """Adaptation: stand-in for networks.ResnetGenerator."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.InstanceNorm2d(8), nn.ReLU(True),
                         nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())


def small_discriminator():
    """Adaptation: stand-in for networks.NLayerDiscriminator (PatchGAN)."""
    return nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True),
                         nn.Conv2d(8, 1, 4, stride=1, padding=1))


class BaseModel():
    def set_requires_grad(self, nets, requires_grad=False):
        """Set requies_grad=Fasle for all the networks to avoid unnecessary computations"""
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad  # BREAK

    def get_current_losses(self):
        """Return traning losses / errors. train.py will print out these errors on console, and save them to a file"""
        errors_ret = OrderedDict()
        for name in self.loss_names:
            if isinstance(name, str):
                errors_ret[name] = float(getattr(self, 'loss_' + name))  # float(...) works for both scalar tensor and float number
        return errors_ret


class CycleGANModel(BaseModel):
    def __init__(self, opt):
        self.opt = opt
        self.device = 'cpu'
        self.loss_names = ['D_A', 'G_A', 'cycle_A', 'idt_A', 'D_B', 'G_B', 'cycle_B', 'idt_B']
        self.netG_A = small_generator()
        self.netG_B = small_generator()
        self.netD_A = small_discriminator()
        self.netD_B = small_discriminator()
        self.fake_A_pool = ImagePool(opt.pool_size)  # create image buffer to store previously generated images
        self.fake_B_pool = ImagePool(opt.pool_size)  # create image buffer to store previously generated images
        # define loss functions
        self.criterionGAN = GANLoss(opt.gan_mode).to(self.device)  # define GAN loss.
        self.criterionCycle = torch.nn.L1Loss()
        self.criterionIdt = torch.nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(itertools.chain(self.netG_A.parameters(), self.netG_B.parameters()), lr=opt.lr, betas=(opt.beta1, 0.999))
        self.optimizer_D = torch.optim.Adam(itertools.chain(self.netD_A.parameters(), self.netD_B.parameters()), lr=opt.lr, betas=(opt.beta1, 0.999))

    def set_input(self, input):
        AtoB = self.opt.direction == 'AtoB'
        self.real_A = input['A' if AtoB else 'B'].to(self.device)
        self.real_B = input['B' if AtoB else 'A'].to(self.device)
        self.image_paths = input['A_paths' if AtoB else 'B_paths']

    def forward(self):
        """Run forward pass; called by both functions <optimize_parameters> and <test>."""
        self.fake_B = self.netG_A(self.real_A)  # G_A(A)
        self.rec_A = self.netG_B(self.fake_B)   # G_B(G_A(A))
        self.fake_A = self.netG_B(self.real_B)  # G_B(B)
        self.rec_B = self.netG_A(self.fake_A)   # G_A(G_B(B))

    def backward_D_basic(self, netD, real, fake):
        # Real
        pred_real = netD(real)
        loss_D_real = self.criterionGAN(pred_real, True)
        # Fake
        pred_fake = netD(fake.detach())
        loss_D_fake = self.criterionGAN(pred_fake, False)
        # Combined loss and calculate gradients
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()  # BREAK
        return loss_D

    def backward_D_A(self):
        """Calculate GAN loss for discriminator D_A"""
        fake_B = self.fake_B_pool.query(self.fake_B)
        self.loss_D_A = self.backward_D_basic(self.netD_A, self.real_B, fake_B)

    def backward_D_B(self):
        """Calculate GAN loss for discriminator D_B"""
        fake_A = self.fake_A_pool.query(self.fake_A)
        self.loss_D_B = self.backward_D_basic(self.netD_B, self.real_A, fake_A)

    def backward_G(self):
        """Calculate the loss for generators G_A and G_B"""
        lambda_idt = self.opt.lambda_identity
        lambda_A = self.opt.lambda_A
        lambda_B = self.opt.lambda_B
        # Identity loss
        if lambda_idt > 0:
            # G_A should be identity if real_B is fed: ||G_A(B) - B||
            self.idt_A = self.netG_A(self.real_B)
            self.loss_idt_A = self.criterionIdt(self.idt_A, self.real_B) * lambda_B * lambda_idt
            # G_B should be identity if real_A is fed: ||G_B(A) - A||
            self.idt_B = self.netG_B(self.real_A)
            self.loss_idt_B = self.criterionIdt(self.idt_B, self.real_A) * lambda_A * lambda_idt
        else:
            self.loss_idt_A = 0
            self.loss_idt_B = 0

        # GAN loss D_A(G_A(A))
        self.loss_G_A = self.criterionGAN(self.netD_A(self.fake_B), True)
        # GAN loss D_B(G_B(B))
        self.loss_G_B = self.criterionGAN(self.netD_B(self.fake_A), True)
        # Forward cycle loss || G_B(G_A(A)) - A||
        self.loss_cycle_A = self.criterionCycle(self.rec_A, self.real_A) * lambda_A
        # Backward cycle loss || G_A(G_B(B)) - B||
        self.loss_cycle_B = self.criterionCycle(self.rec_B, self.real_B) * lambda_B
        # combined loss and calculate gradients
        self.loss_G = self.loss_G_A + self.loss_G_B + self.loss_cycle_A + self.loss_cycle_B + self.loss_idt_A + self.loss_idt_B
        self.loss_G.backward()

    def optimize_parameters(self):
        """Calculate losses, gradients, and update network weights; called in every training iteration"""
        # forward
        self.forward()      # compute fake images and reconstruction images.
        # G_A and G_B
        self.set_requires_grad([self.netD_A, self.netD_B], False)  # Ds require no gradients when optimizing Gs
        self.optimizer_G.zero_grad()  # set G_A and G_B's gradients to zero
        self.backward_G()             # calculate gradients for G_A and G_B
        self.optimizer_G.step()       # update G_A and G_B's weights  # BREAK
        # D_A and D_B
        self.set_requires_grad([self.netD_A, self.netD_B], True)
        self.optimizer_D.zero_grad()   # set D_A and D_B's gradients to zero
        self.backward_D_A()      # calculate gradients for D_A
        self.backward_D_B()      # calculate graidents for D_B
        self.optimizer_D.step()  # update D_A and D_B's weights  # BREAK


def reset_(model, states, opt_states, pool_size, lambda_identity, seed):
    """Adaptation: restore networks/optimizers, empty the pools and seed `random` so that a call repeats exactly."""
    for net, state in zip((model.netG_A, model.netG_B, model.netD_A, model.netD_B), states):
        net.load_state_dict(state)  # BREAK
    model.optimizer_G.load_state_dict(opt_states[0])
    model.optimizer_D.load_state_dict(opt_states[1])
    model.opt.pool_size = pool_size
    model.opt.lambda_identity = lambda_identity
    model.fake_A_pool = ImagePool(pool_size)
    model.fake_B_pool = ImagePool(pool_size)
    random.seed(seed)


def train_iters(model, batches, states, opt_states, pool_size, lambda_identity, seed):
    reset_(model, states, opt_states, pool_size, lambda_identity, seed)
    losses = []
    for data in batches:
        model.set_input(data)
        model.optimize_parameters()
        losses.append(model.get_current_losses())
    return losses, model.fake_B.detach()


def target():
    torch.manual_seed(0)
    opt = SimpleNamespace(pool_size=4, gan_mode='lsgan', lr=0.0002, beta1=0.5, direction='AtoB',
                          lambda_identity=0.5, lambda_A=10.0, lambda_B=10.0)
    model = CycleGANModel(opt)
    states = [copy.deepcopy(n.state_dict()) for n in (model.netG_A, model.netG_B, model.netD_A, model.netD_B)]
    opt_states = [copy.deepcopy(model.optimizer_G.state_dict()), copy.deepcopy(model.optimizer_D.state_dict())]

    def batches(n, b):
        return [{'A': torch.rand(b, 3, 16, 16) * 2 - 1, 'B': torch.rand(b, 3, 16, 16) * 2 - 1,
                 'A_paths': ['a%d.png' % i for i in range(b)], 'B_paths': ['b%d.png' % i for i in range(b)]}
                for _ in range(n)]

    return [
        (train_iters, (model, batches(3, 2), states, opt_states, 2, 0.5, 0), {}),
        (train_iters, (model, batches(2, 3), states, opt_states, 4, 0.0, 1), {}),
    ]


EXPECT = ("caller: `optimize_parameters` is an eager training step (two optimizers, `requires_grad` toggles, "
          "`backward` calls) and `ImagePool.query` is host logic (per-image Python loop over a list buffer, "
          "`random.uniform`/`random.randint` draws); compile the generator/discriminator forwards and the "
          "`GANLoss` call, keep the pool and the step eager. `get_current_losses`' `float(getattr(...))` is "
          "logging after the step")
