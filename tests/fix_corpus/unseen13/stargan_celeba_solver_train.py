"""StarGAN training iterations on CelebA-style attribute labels through `Solver.train` of yunjey/stargan
(`solver.py`, the stored early revision: `Solver.__init__`/`build_model`, `update_lr`, `reset_grad`, `to_var`,
`denorm`, `threshold`, `compute_accuracy`, `make_celeb_labels`, `train`). `train` collects four fixed batches with
an early `break`, builds the fixed target labels with `make_celeb_labels` (nested Python loops over label rows
doing `c[:3] = y[i]` and `c[i] = 0 if c[i] == 1 else 1` on tensor elements), then per iteration draws
`torch.randperm` fake labels, wraps tensors in legacy `Variable`s via `to_var` (`torch.cuda.is_available()` test),
computes the D losses (`binary_cross_entropy_with_logits(..., size_average=False) / size`), every `log_step`
prints `compute_accuracy` (`F.sigmoid`, `threshold`, per-attribute mean) formatted through
`accuracies.data.cpu().numpy()` in a list comprehension, detaches the fake through `Variable(fake_x.data)`, does
the WGAN-GP gradient penalty with `torch.autograd.grad(create_graph=True)` on a `Variable(..., requires_grad=True)`
interpolate, fills a `loss` dict, trains G every `d_train_repeat` iterations, prints an elapsed-time log built
from `time.time()`/`datetime.timedelta` and the loss dict, translates the fixed images every `sample_step`, and
decays the learning rates through `update_lr` (writing `param_groups`).
Adaptations: `Generator`/`Discriminator` (`model.py`) are small stand-ins with the same call signatures
(`G(x, c)` tiles `c` over the image and concatenates; `D(x)` returns `(out_src, out_cls)`); `.cuda()` calls
are dropped; the old-torch `loss.data[0]` reads are `.item()` (a 0-d tensor cannot be indexed in current
torch); `save_image` and `torch.save` write into in-memory lists (`self.samples`, `self.checkpoints`);
`print_network` and the tensorboard logger are not called; the CelebA loader is a list of `(images, labels)`
batches (labels 0/1 over 5 attributes, one-hot hair colour) made in the factory; `config` is an
`argparse.Namespace` (image 8x8, c_dim 5, log_step 1, sample_step 2, d_train_repeat 2, 1 epoch with decay).
So that a call repeats exactly, the called function `train_solver` restores G, D and both optimizers from copies
taken in the factory and seeds torch (`reset_`); it returns the last loss dict, a G weight and the learning
rates after decay."""
import argparse
import copy
import datetime
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class Generator(nn.Module):
    """Stand-in for model.Generator (same call signature)."""
    def __init__(self, conv_dim=8, c_dim=5, repeat_num=1):
        super(Generator, self).__init__()
        self.main = nn.Sequential(nn.Conv2d(3 + c_dim, conv_dim, 3, padding=1), nn.InstanceNorm2d(conv_dim, affine=True),
                                  nn.ReLU(inplace=True), nn.Conv2d(conv_dim, 3, 3, padding=1), nn.Tanh())

    def forward(self, x, c):
        c = c.unsqueeze(2).unsqueeze(3)
        c = c.expand(c.size(0), c.size(1), x.size(2), x.size(3))
        x = torch.cat([x, c], dim=1)
        return self.main(x)


class Discriminator(nn.Module):
    """Stand-in for model.Discriminator (same call signature)."""
    def __init__(self, image_size=8, conv_dim=8, c_dim=5, repeat_num=2):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(nn.Conv2d(3, conv_dim, 4, 2, 1), nn.LeakyReLU(0.01, inplace=True),
                                  nn.Conv2d(conv_dim, conv_dim * 2, 4, 2, 1), nn.LeakyReLU(0.01, inplace=True))
        k_size = int(image_size / np.power(2, repeat_num))
        self.conv1 = nn.Conv2d(conv_dim * 2, 1, kernel_size=3, stride=1, padding=1, bias=False)
        self.conv2 = nn.Conv2d(conv_dim * 2, c_dim, kernel_size=k_size, bias=False)

    def forward(self, x):
        h = self.main(x)
        out_real = self.conv1(h)
        out_aux = self.conv2(h)
        return out_real.squeeze(), out_aux.squeeze()


class Solver(object):

    def __init__(self, celebA_loader, rafd_loader, config):
        # Data loader
        self.celebA_loader = celebA_loader
        self.rafd_loader = rafd_loader

        # Model hyper-parameters
        self.c_dim = config.c_dim
        self.c2_dim = config.c2_dim
        self.image_size = config.image_size
        self.g_conv_dim = config.g_conv_dim
        self.d_conv_dim = config.d_conv_dim
        self.g_repeat_num = config.g_repeat_num
        self.d_repeat_num = config.d_repeat_num
        self.d_train_repeat = config.d_train_repeat

        # Hyper-parameteres
        self.lambda_cls = config.lambda_cls
        self.lambda_rec = config.lambda_rec
        self.lambda_gp = config.lambda_gp
        self.g_lr = config.g_lr
        self.d_lr = config.d_lr
        self.beta1 = config.beta1
        self.beta2 = config.beta2

        # Training settings
        self.dataset = config.dataset
        self.num_epochs = config.num_epochs
        self.num_epochs_decay = config.num_epochs_decay
        self.batch_size = config.batch_size
        self.use_tensorboard = config.use_tensorboard
        self.pretrained_model = config.pretrained_model

        # Path
        self.sample_path = config.sample_path
        self.model_save_path = config.model_save_path

        # Step size
        self.log_step = config.log_step
        self.sample_step = config.sample_step
        self.model_save_step = config.model_save_step

        self.samples = []       # adaptation: save_image target
        self.checkpoints = []   # adaptation: torch.save target

        self.build_model()

    def build_model(self):
        # Define a generator and a discriminator
        if self.dataset == 'Both':
            self.G = Generator(self.g_conv_dim, self.c_dim+self.c2_dim+2, self.g_repeat_num)   # 2 for mask vector
            self.D = Discriminator(self.image_size, self.d_conv_dim, self.c_dim+self.c2_dim, self.d_repeat_num)
        else:
            self.G = Generator(self.g_conv_dim, self.c_dim, self.g_repeat_num)
            self.D = Discriminator(self.image_size, self.d_conv_dim, self.c_dim, self.d_repeat_num)

        # Optimizers
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), self.g_lr, [self.beta1, self.beta2])
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), self.d_lr, [self.beta1, self.beta2])

    def update_lr(self, g_lr, d_lr):
        for param_group in self.g_optimizer.param_groups:
            param_group['lr'] = g_lr
        for param_group in self.d_optimizer.param_groups:
            param_group['lr'] = d_lr

    def reset_grad(self):
        self.g_optimizer.zero_grad()
        self.d_optimizer.zero_grad()

    def to_var(self, x, volatile=False):
        if torch.cuda.is_available():
            x = x.cuda()
        return Variable(x, volatile=volatile)  # BREAK

    def denorm(self, x):
        out = (x + 1) / 2
        return out.clamp_(0, 1)

    def threshold(self, x):
        x = x.clone()
        x = (x >= 0.5).float()
        x = (x < 0.5).float()
        return x

    def compute_accuracy(self, x, y, dataset):
        if dataset == 'CelebA':
            x = F.sigmoid(x)
            predicted = self.threshold(x)
            correct = (predicted == y).float()
            accuracy = torch.mean(correct, dim=0) * 100.0
        else:
            _, predicted = torch.max(x, dim=1)
            correct = (predicted == y).float()
            accuracy = torch.mean(correct) * 100.0
        return accuracy

    def one_hot(self, labels, dim):
        """Convert label indices to one-hot vector"""
        batch_size = labels.size(0)
        out = torch.zeros(batch_size, dim)
        out[np.arange(batch_size), labels.long()] = 1
        return out

    def make_celeb_labels(self, real_c):
        """Generate domain labels for CelebA for debugging/testing.

        if dataset == 'CelebA':
            return single and multiple attribute changes
        elif dataset == 'Both':
            return single attribute changes
        """
        y = [torch.FloatTensor([1, 0, 0]),  # black hair
             torch.FloatTensor([0, 1, 0]),  # blond hair
             torch.FloatTensor([0, 0, 1])]  # brown hair

        fixed_c_list = []

        # single attribute transfer
        for i in range(self.c_dim):
            fixed_c = real_c.clone()
            for c in fixed_c:
                if i < 3:
                    c[:3] = y[i]
                else:
                    c[i] = 0 if c[i] == 1 else 1   # opposite value
            fixed_c_list.append(self.to_var(fixed_c, volatile=True))

        # multi-attribute transfer (H+G, H+A, G+A, H+G+A)
        if self.dataset == 'CelebA':
            for i in range(4):
                fixed_c = real_c.clone()
                for c in fixed_c:
                    if i in [0, 1, 3]:   # Hair color to brown
                        c[:3] = y[2]
                    if i in [0, 2, 3]:   # Gender
                        c[3] = 0 if c[3] == 1 else 1
                    if i in [1, 2, 3]:   # Aged
                        c[4] = 0 if c[4] == 1 else 1
                fixed_c_list.append(self.to_var(fixed_c, volatile=True))
        return fixed_c_list

    def train(self):
        """Train StarGAN within a single dataset."""

        # Set dataloader
        if self.dataset == 'CelebA':
            self.data_loader = self.celebA_loader
        else:
            self.data_loader = self.rafd_loader

        # The number of iterations per epoch
        iters_per_epoch = len(self.data_loader)

        fixed_x = []
        real_c = []
        for i, (images, labels) in enumerate(self.data_loader):
            fixed_x.append(images)
            real_c.append(labels)
            if i == 3:
                break

        # Fixed inputs and target domain labels for debugging
        fixed_x = torch.cat(fixed_x, dim=0)
        fixed_x = self.to_var(fixed_x, volatile=True)
        real_c = torch.cat(real_c, dim=0)

        if self.dataset == 'CelebA':
            fixed_c_list = self.make_celeb_labels(real_c)
        elif self.dataset == 'RaFD':
            fixed_c_list = []
            for i in range(self.c_dim):
                fixed_c = self.one_hot(torch.ones(fixed_x.size(0)) * i, self.c_dim)
                fixed_c_list.append(self.to_var(fixed_c, volatile=True))

        # lr cache for decaying
        g_lr = self.g_lr
        d_lr = self.d_lr

        # Start with trained model if exists
        if self.pretrained_model:
            start = int(self.pretrained_model.split('_')[0])
        else:
            start = 0

        # Start training
        start_time = time.time()  # BREAK
        for e in range(start, self.num_epochs):
            for i, (real_x, real_label) in enumerate(self.data_loader):

                # Generat fake labels randomly (target domain labels)
                rand_idx = torch.randperm(real_label.size(0))
                fake_label = real_label[rand_idx]

                if self.dataset == 'CelebA':
                    real_c = real_label.clone()
                    fake_c = fake_label.clone()
                else:
                    real_c = self.one_hot(real_label, self.c_dim)
                    fake_c = self.one_hot(fake_label, self.c_dim)

                # Convert tensor to variable
                real_x = self.to_var(real_x)
                real_c = self.to_var(real_c)           # input for the generator
                fake_c = self.to_var(fake_c)
                real_label = self.to_var(real_label)   # this is same as real_c if dataset == 'CelebA'
                fake_label = self.to_var(fake_label)

                # ================== Train D ================== #

                # Compute loss with real images
                out_src, out_cls = self.D(real_x)
                d_loss_real = - torch.mean(out_src)

                if self.dataset == 'CelebA':
                    d_loss_cls = F.binary_cross_entropy_with_logits(
                        out_cls, real_label, size_average=False) / real_x.size(0)
                else:
                    d_loss_cls = F.cross_entropy(out_cls, real_label)

                # Compute classification accuracy of the discriminator
                if (i+1) % self.log_step == 0:
                    accuracies = self.compute_accuracy(out_cls, real_label, self.dataset)
                    log = ["{:.2f}".format(acc) for acc in accuracies.data.cpu().numpy()]
                    if self.dataset == 'CelebA':
                        print('Classification Acc (Black/Blond/Brown/Gender/Aged): ', end='')
                    else:
                        print('Classification Acc (8 emotional expressions): ', end='')
                    print(log)

                # Compute loss with fake images
                fake_x = self.G(real_x, fake_c)
                fake_x = Variable(fake_x.data)
                out_src, out_cls = self.D(fake_x)
                d_loss_fake = torch.mean(out_src)

                # Backward + Optimize
                d_loss = d_loss_real + d_loss_fake + self.lambda_cls * d_loss_cls
                self.reset_grad()
                d_loss.backward()
                self.d_optimizer.step()  # BREAK

                # Compute gradient penalty
                alpha = torch.rand(real_x.size(0), 1, 1, 1).expand_as(real_x)
                interpolated = Variable(alpha * real_x.data + (1 - alpha) * fake_x.data, requires_grad=True)
                out, out_cls = self.D(interpolated)

                grad = torch.autograd.grad(outputs=out,
                                           inputs=interpolated,
                                           grad_outputs=torch.ones(out.size()),
                                           retain_graph=True,
                                           create_graph=True,
                                           only_inputs=True)[0]

                grad = grad.view(grad.size(0), -1)
                grad_l2norm = torch.sqrt(torch.sum(grad ** 2, dim=1))
                d_loss_gp = torch.mean((grad_l2norm - 1)**2)

                # Backward + Optimize
                d_loss = self.lambda_gp * d_loss_gp
                self.reset_grad()
                d_loss.backward()
                self.d_optimizer.step()

                # Logging
                loss = {}
                loss['D/loss_real'] = d_loss_real.item()
                loss['D/loss_fake'] = d_loss_fake.item()
                loss['D/loss_cls'] = d_loss_cls.item()
                loss['D/loss_gp'] = d_loss_gp.item()

                # ================== Train G ================== #
                if (i+1) % self.d_train_repeat == 0:

                    # Original-to-target and target-to-original domain
                    fake_x = self.G(real_x, fake_c)
                    rec_x = self.G(fake_x, real_c)

                    # Compute losses
                    out_src, out_cls = self.D(fake_x)
                    g_loss_fake = - torch.mean(out_src)
                    g_loss_rec = torch.mean(torch.abs(real_x - rec_x))

                    if self.dataset == 'CelebA':
                        g_loss_cls = F.binary_cross_entropy_with_logits(
                            out_cls, fake_label, size_average=False) / fake_x.size(0)
                    else:
                        g_loss_cls = F.cross_entropy(out_cls, fake_label)

                    # Backward + Optimize
                    g_loss = g_loss_fake + self.lambda_rec * g_loss_rec + self.lambda_cls * g_loss_cls
                    self.reset_grad()
                    g_loss.backward()
                    self.g_optimizer.step()  # BREAK

                    # Logging
                    loss['G/loss_fake'] = g_loss_fake.item()
                    loss['G/loss_rec'] = g_loss_rec.item()
                    loss['G/loss_cls'] = g_loss_cls.item()

                # Print out log info
                if (i+1) % self.log_step == 0:
                    elapsed = time.time() - start_time
                    elapsed = str(datetime.timedelta(seconds=elapsed))

                    log = "Elapsed [{}], Epoch [{}/{}], Iter [{}/{}]".format(
                        elapsed, e+1, self.num_epochs, i+1, iters_per_epoch)

                    for tag, value in loss.items():
                        log += ", {}: {:.4f}".format(tag, value)
                    print(log)

                # Translate fixed images for debugging
                if (i+1) % self.sample_step == 0:
                    fake_image_list = [fixed_x]
                    for fixed_c in fixed_c_list:
                        fake_image_list.append(self.G(fixed_x, fixed_c))
                    fake_images = torch.cat(fake_image_list, dim=3)
                    self.samples.append((self.denorm(fake_images.data),   # save_image(...)
                        os.path.join(self.sample_path, '{}_{}_fake.png'.format(e+1, i+1))))
                    print('Translated images and saved into {}..!'.format(self.sample_path))

                # Save model checkpoints
                if (i+1) % self.model_save_step == 0:
                    self.checkpoints.append(copy.deepcopy(self.G.state_dict()))   # torch.save(...)

            # Decay learning rate
            if (e+1) > (self.num_epochs - self.num_epochs_decay):
                g_lr -= (self.g_lr / float(self.num_epochs_decay))
                d_lr -= (self.d_lr / float(self.num_epochs_decay))
                self.update_lr(g_lr, d_lr)
                print ('Decay learning rate to g_lr: {}, d_lr: {}.'.format(g_lr, d_lr))
        return loss


def reset_(solver, states):
    """Adaptation: restore G, D and both optimizers from the factory's copies, seed torch."""
    solver.G.load_state_dict(states[0])  # BREAK
    solver.D.load_state_dict(states[1])  # BREAK
    solver.g_optimizer.load_state_dict(states[2])  # BREAK
    solver.d_optimizer.load_state_dict(states[3])  # BREAK
    solver.samples.clear()
    solver.checkpoints.clear()
    torch.manual_seed(3)  # BREAK


def train_solver(solver, states, loader):
    reset_(solver, states)
    solver.celebA_loader = loader
    loss = solver.train()
    return (loss, solver.G.main[0].weight.detach().clone(),
            [solver.g_optimizer.param_groups[0]['lr'], solver.d_optimizer.param_groups[0]['lr']])


def target():
    torch.manual_seed(0)
    config = argparse.Namespace(c_dim=5, c2_dim=8, image_size=8, g_conv_dim=8, d_conv_dim=8, g_repeat_num=1,
                                d_repeat_num=2, d_train_repeat=2, lambda_cls=1, lambda_rec=10, lambda_gp=10,
                                g_lr=0.0001, d_lr=0.0001, beta1=0.5, beta2=0.999, dataset='CelebA', num_epochs=1,
                                num_epochs_decay=1, batch_size=2, use_tensorboard=False, pretrained_model=None,
                                sample_path='./stargan/samples', model_save_path='./stargan/models', log_step=1,
                                sample_step=2, model_save_step=1000)

    def make_loader(n, bs):
        out = []
        for _ in range(n):
            labels = torch.zeros(bs, 5)
            labels[torch.arange(bs), torch.randint(0, 3, (bs,))] = 1
            labels[:, 3:] = (torch.rand(bs, 2) > 0.5).float()
            out.append((torch.rand(bs, 3, 8, 8) * 2 - 1, labels))
        return out

    loader1 = make_loader(4, 2)
    loader2 = make_loader(3, 3)
    solver = Solver(loader1, None, config)
    states = tuple(copy.deepcopy(x.state_dict()) for x in (solver.G, solver.D, solver.g_optimizer, solver.d_optimizer))
    return [
        (train_solver, (solver, states, loader1), {}),
        (train_solver, (solver, states, loader2), {}),
    ]


EXPECT = ("hatch: `Solver.train` is a whole training driver (two optimizers stepped, `autograd.grad` with "
          "`create_graph`, `Variable(x.data)` detaches, Python loops over label rows with tensor-valued `if`s in "
          "`make_celeb_labels`, `.cpu().numpy()` accuracy logs, `time.time()` prints); no piece rewrites to "
          "one graph, and the verified fix is to keep the driver out of the compiled region")
