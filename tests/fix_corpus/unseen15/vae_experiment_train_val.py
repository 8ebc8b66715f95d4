"""A training/validation epoch of AntixK/PyTorch-VAE's `VanillaVAE` under its Lightning experiment
(`models/vanilla_vae.py`: `__init__` building encoder/decoder `nn.Sequential`s from `hidden_dims` with
`hidden_dims.reverse()`, `encode` returning a list, `decode` with the hard-coded `result.view(-1, 512, 2, 2)`,
`reparameterize` with `torch.randn_like`, `forward` returning `[recons, input, mu, log_var]`, `loss_function(*args,
**kwargs)` reading `kwargs['M_N']` and returning a dict with `-kld_loss`, `sample` and `generate`;
`experiment.py`, the stored (early) revision: `VAEXperiment.training_step` (`self.forward(real_img, labels=labels)`,
`M_N = self.params['batch_size'] / self.num_train_imgs`, `self.logger.experiment.log({key: val.item() for key,
val in train_loss.items()})`), `validation_step`, `validation_end` (`torch.stack([x['loss'] for x in
outputs]).mean()`, `sample_images`), `sample_images` (`next(iter(self.sample_dataloader))`, `generate`, `sample`,
`.cpu()`, f-string file names, `int(math.sqrt(...))`), `backward` with `retain_graph` by `self.hold_graph`,
`configure_optimizers` (the `try/except` chains over `params['LR_2']`/`params['scheduler_gamma']`)).
Adaptations: pytorch_lightning is not installed, so `LightningModule` is a stand-in `nn.Module` base with a
`logger` recorder (`experiment.log`, `save_dir`, `name`, `version`) and `current_epoch`, and the Trainer is a
minimal `fit_epoch` written for this program that does what Lightning's loop does for one epoch (train steps
with `zero_grad`/`backward`/`step`, the scheduler step, validation steps and `validation_end`);
`vutils.save_image` is a recorder (no file), the CelebA loaders are lists of random batches with
`num_train_imgs` set from the factory; images are 64x64 (the model's `view(-1, 512, 2, 2)` needs five stride-2
stages, so `hidden_dims` keeps 512 last and shrinks the others). The called function `fit_epoch` seeds torch
and restores the model from the factory's copy first, so that a call repeats; it steps only the first optimizer
(the second call's params also build the `LR_2` optimizer over the decoder, which the stand-in loop leaves unused)."""
import copy
import math

import torch
from torch import nn, optim, Tensor
from torch.nn import functional as F
from typing import List


# ---- stand-ins (adaptation)
class _Experiment:
    def __init__(self):
        self.records = []

    def log(self, d):
        self.records.append(d)


class _Logger:
    def __init__(self):
        self.experiment = _Experiment()
        self.save_dir = 'logs/'
        self.name = 'VanillaVAE'
        self.version = 0


class LightningModule(nn.Module):
    """Stand-in for pl.LightningModule: a module with a logger and an epoch counter."""
    def __init__(self):
        super().__init__()
        self.logger = _Logger()
        self.current_epoch = 0


class vutils:
    saved = []

    @staticmethod
    def save_image(tensor, path, normalize=False, nrow=8):
        vutils.saved.append((path, tuple(tensor.shape), nrow))


class BaseVAE(nn.Module):
    def __init__(self) -> None:
        super(BaseVAE, self).__init__()


# ---- models/vanilla_vae.py
class VanillaVAE(BaseVAE):

    def __init__(self,
                 in_channels: int,
                 latent_dim: int,
                 hidden_dims: List = None,
                 **kwargs) -> None:
        super(VanillaVAE, self).__init__()

        self.latent_dim = latent_dim

        modules = []
        if hidden_dims is None:
            hidden_dims = [32, 64, 128, 256, 512]

        # Build Encoder
        for h_dim in hidden_dims:
            modules.append(
                nn.Sequential(
                    nn.Conv2d(in_channels, out_channels=h_dim,
                              kernel_size= 3, stride= 2, padding  = 1),
                    nn.BatchNorm2d(h_dim),
                    nn.LeakyReLU())
            )
            in_channels = h_dim

        self.encoder = nn.Sequential(*modules)
        self.fc_mu = nn.Linear(hidden_dims[-1]*4, latent_dim)
        self.fc_var = nn.Linear(hidden_dims[-1]*4, latent_dim)


        # Build Decoder
        modules = []

        self.decoder_input = nn.Linear(latent_dim, hidden_dims[-1] * 4)

        hidden_dims.reverse()

        for i in range(len(hidden_dims) - 1):
            modules.append(
                nn.Sequential(
                    nn.ConvTranspose2d(hidden_dims[i],
                                       hidden_dims[i + 1],
                                       kernel_size=3,
                                       stride = 2,
                                       padding=1,
                                       output_padding=1),
                    nn.BatchNorm2d(hidden_dims[i + 1]),
                    nn.LeakyReLU())
            )



        self.decoder = nn.Sequential(*modules)

        self.final_layer = nn.Sequential(
                            nn.ConvTranspose2d(hidden_dims[-1],
                                               hidden_dims[-1],
                                               kernel_size=3,
                                               stride=2,
                                               padding=1,
                                               output_padding=1),
                            nn.BatchNorm2d(hidden_dims[-1]),
                            nn.LeakyReLU(),
                            nn.Conv2d(hidden_dims[-1], out_channels= 3,
                                      kernel_size= 3, padding= 1),
                            nn.Tanh())

    def encode(self, input: Tensor) -> List[Tensor]:
        result = self.encoder(input)
        result = torch.flatten(result, start_dim=1)

        # Split the result into mu and var components
        # of the latent Gaussian distribution
        mu = self.fc_mu(result)
        log_var = self.fc_var(result)

        return [mu, log_var]

    def decode(self, z: Tensor) -> Tensor:
        result = self.decoder_input(z)
        result = result.view(-1, 512, 2, 2)
        result = self.decoder(result)
        result = self.final_layer(result)
        return result

    def reparameterize(self, mu: Tensor, logvar: Tensor) -> Tensor:
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return eps * std + mu

    def forward(self, input: Tensor, **kwargs) -> List[Tensor]:
        mu, log_var = self.encode(input)
        z = self.reparameterize(mu, log_var)
        return  [self.decode(z), input, mu, log_var]

    def loss_function(self,
                      *args,
                      **kwargs) -> dict:
        recons = args[0]
        input = args[1]
        mu = args[2]
        log_var = args[3]

        kld_weight = kwargs['M_N'] # Account for the minibatch samples from the dataset
        recons_loss =F.mse_loss(recons, input)


        kld_loss = torch.mean(-0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp(), dim = 1), dim = 0)

        loss = recons_loss + kld_weight * kld_loss
        return {'loss': loss, 'Reconstruction_Loss':recons_loss, 'KLD':-kld_loss}

    def sample(self,
               num_samples:int,
               current_device: int, **kwargs) -> Tensor:
        z = torch.randn(num_samples,
                        self.latent_dim)

        z = z.to(current_device)

        samples = self.decode(z)
        return samples

    def generate(self, x: Tensor, **kwargs) -> Tensor:
        return self.forward(x)[0]


# ---- experiment.py
class VAEXperiment(LightningModule):

    def __init__(self,
                 vae_model: BaseVAE,
                 params: dict) -> None:
        super(VAEXperiment, self).__init__()

        self.model = vae_model
        self.params = params
        self.curr_device = None
        self.hold_graph = False
        try:
            self.hold_graph = self.params['retain_first_backpass']
        except:
            pass

    def forward(self, input: Tensor, **kwargs) -> Tensor:
        return self.model(input, **kwargs)

    def training_step(self, batch, batch_idx, optimizer_idx = 0):
        real_img, labels = batch
        self.curr_device = real_img.device

        results = self.forward(real_img, labels = labels)
        train_loss = self.model.loss_function(*results,
                                              M_N = self.params['batch_size']/ self.num_train_imgs,
                                              optimizer_idx=optimizer_idx,
                                              batch_idx = batch_idx)

        self.logger.experiment.log({key: val.item() for key, val in train_loss.items()})  # BREAK

        return train_loss

    def validation_step(self, batch, batch_idx, optimizer_idx = 0):
        real_img, labels = batch
        self.curr_device = real_img.device

        results = self.forward(real_img, labels = labels)
        val_loss = self.model.loss_function(*results,
                                            M_N = self.params['batch_size']/ self.num_train_imgs,
                                            optimizer_idx = optimizer_idx,
                                            batch_idx = batch_idx)

        return val_loss

    def validation_end(self, outputs):
        avg_loss = torch.stack([x['loss'] for x in outputs]).mean()
        tensorboard_logs = {'avg_val_loss': avg_loss}
        self.sample_images()
        return {'val_loss': avg_loss, 'log': tensorboard_logs}

    def sample_images(self):
        # Get sample reconstruction image
        test_input, test_label = next(iter(self.sample_dataloader))
        test_input = test_input.to(self.curr_device)
        test_label = test_label.to(self.curr_device)
        recons = self.model.generate(test_input, labels = test_label)
        vutils.save_image(recons.data,
                          f"{self.logger.save_dir}{self.logger.name}/version_{self.logger.version}/"
                          f"recons_{self.logger.name}_{self.current_epoch}.png",
                          normalize=True,
                          nrow=int(math.sqrt(self.params['batch_size'])))

        samples = self.model.sample(self.params['batch_size'],
                                    self.curr_device,
                                    labels = test_label).cpu()
        vutils.save_image(samples.data,
                          f"{self.logger.save_dir}{self.logger.name}/version_{self.logger.version}/"
                          f"{self.logger.name}_{self.current_epoch}.png",
                          normalize=True,
                          nrow=int(math.sqrt(self.params['batch_size'])))


        del test_input, recons, samples

    def backward(self, use_amp, loss, optimizer, optimizer_idx):
        if self.hold_graph and optimizer_idx == 0:
            loss.backward(retain_graph = True)  # BREAK
        else:
            loss.backward(retain_graph = False)  # BREAK

    def configure_optimizers(self):

        optims = []
        scheds = []

        optimizer = optim.Adam(self.model.parameters(),  # BREAK
                               lr=self.params['LR'],
                               weight_decay=self.params['weight_decay'])
        optims.append(optimizer)
        # Check if more than 1 optimizer is required (Used for adversarial training)
        try:
            if self.params['LR_2'] is not None:
                optimizer2 = optim.Adam(getattr(self.model,self.params['submodel']).parameters(),
                                        lr=self.params['LR_2'])
                optims.append(optimizer2)
        except:
            pass

        try:
            if self.params['scheduler_gamma'] is not None:
                scheduler = optim.lr_scheduler.ExponentialLR(optims[0],
                                                             gamma = self.params['scheduler_gamma'])
                scheds.append(scheduler)

                # Check if another scheduler is required for the second optimizer
                try:
                    if self.params['scheduler_gamma_2'] is not None:
                        scheduler2 = optim.lr_scheduler.ExponentialLR(optims[1],
                                                                      gamma = self.params['scheduler_gamma_2'])
                        scheds.append(scheduler2)
                except:
                    pass
                return optims, scheds
        except:
            return optims


# ---- stand-in for the Lightning trainer's epoch (adaptation)
def fit_epoch(experiment, train_batches, val_batches, num_train_imgs, initial_state):
    torch.manual_seed(0)  # BREAK
    experiment.model.load_state_dict(initial_state)  # BREAK
    experiment.logger.experiment.records.clear()
    experiment.num_train_imgs = num_train_imgs
    experiment.sample_dataloader = val_batches
    configured = experiment.configure_optimizers()
    if isinstance(configured, tuple):
        optims, scheds = configured
    else:
        optims, scheds = configured, []
    experiment.train()
    for batch_idx, batch in enumerate(train_batches):
        optims[0].zero_grad()  # BREAK
        train_loss = experiment.training_step(batch, batch_idx)
        experiment.backward(False, train_loss['loss'], optims[0], 0)
        optims[0].step()  # BREAK
    for s in scheds:
        s.step()
    experiment.eval()
    with torch.no_grad():
        outputs = [experiment.validation_step(batch, i) for i, batch in enumerate(val_batches)]  # BREAK
        result = experiment.validation_end(outputs)
    return result['val_loss'], [r['loss'] for r in experiment.logger.experiment.records]


def target():
    torch.manual_seed(0)
    model = VanillaVAE(in_channels=3, latent_dim=8, hidden_dims=[4, 8, 16, 32, 512])
    initial_state = copy.deepcopy(model.state_dict())
    params1 = {'LR': 0.005, 'weight_decay': 0.0, 'batch_size': 4, 'scheduler_gamma': 0.95}
    params2 = {'LR': 0.001, 'weight_decay': 1e-5, 'batch_size': 4, 'scheduler_gamma': 0.9, 'LR_2': 0.001, 'submodel': 'decoder',
               'retain_first_backpass': True}
    exp1 = VAEXperiment(model, params1)
    exp2 = VAEXperiment(model, params2)

    def batches(n, bs):
        return [(torch.rand(bs, 3, 64, 64) * 2 - 1, torch.randint(0, 40, (bs,))) for _ in range(n)]

    return [
        (fit_epoch, (exp1, batches(3, 4), batches(2, 4), 12, initial_state), {}),
        (fit_epoch, (exp2, batches(2, 4), batches(1, 4), 200, initial_state), {}),
    ]


EXPECT = ("extract: the model and loss (`forward`, `loss_function`'s dict) are traceable; the breaks are the "
          "logging dict comprehension of `.item()`s in `training_step`, the optimizer/`backward` plumbing and "
          "`sample_images`' save calls, which belong eagerly around a compiled forward+loss (moved into a helper "
          "under an escape hatch)")
