"""Score-SDE training and evaluation steps from yang-song/score_sde_pytorch (`losses.py`: `get_optimizer`,
`optimization_manager`, `get_sde_loss_fn`, `get_ddpm_loss_fn`, `get_step_fn`; `sde_lib.py`: `SDE`, `VPSDE`;
`models/utils.py`: `get_model_fn`, `get_score_fn`; `models/ema.py`: `ExponentialMovingAverage`; the PyTorch
revision of these files). `get_step_fn` picks the loss by `if continuous:` / `isinstance(sde, VESDE)` /
`isinstance(sde, VPSDE)` and returns a closure `step_fn(state, batch)` that, for training, zeroes the optimizer,
computes the loss, calls `loss.backward()`, runs `optimize_fn` (learning-rate warm-up written into
`optimizer.param_groups` with `np.minimum(step / warmup, 1.0)`, `clip_grad_norm_`, `optimizer.step()`), increments
`state['step']` and updates the EMA (a Python loop of in-place `sub_` under `no_grad`, with the decay from
`min(decay, (1 + num_updates) / (10 + num_updates))`); for evaluation it stores the parameters, copies the EMA
weights in, computes the loss and restores them, all under `no_grad`. The SDE loss draws `t` and `z`, perturbs the
data with `sde.marginal_prob`, calls the score function (`get_score_fn`'s `isinstance` dispatch and
`if continuous or isinstance(sde, sde_lib.subVPSDE):` branch, `model.train()`/`model.eval()` inside `model_fn`)
and reduces with a lambda or `torch.mean`; the DDPM loss indexes `sqrt_alphas_cumprod[labels, None, None, None]`
with random integer labels.
Adaptations: the NCSN++/DDPM score networks (`models/ncsnpp.py`, `models/ddpm.py`, not opened) are replaced by a
tiny time-conditioned convolutional network; `ml_collections` configs by `SimpleNamespace`s; `run_lib.train`'s
loop (not opened) is written from the collector's knowledge as the called function `train_steps`: it seeds
torch, restores the model from the factory's copy, builds the optimizer, the EMA and the `state` dict and the
train/eval step functions, scales each batch with the data scaler (`x * 2. - 1.`), logs the training loss with
`logging.info("step: %d, training_loss: %.5e" % (step, loss.item()))` every `log_freq` steps, runs one
evaluation step every `eval_freq` steps, and returns the losses and the EMA's shadow parameters. `VESDE` and
`subVPSDE` are kept only for the `isinstance` dispatch (minimal classes, their methods not used here), and `get_smld_loss_fn` is left out (its `VESDE` branch in `get_step_fn` is not reached). 8x8 images,
2 channels, batches of 4, 4 steps."""
import abc
import logging
import types

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


# ---- sde_lib.py
class SDE(abc.ABC):
  """SDE abstract class. Functions are designed for a mini-batch of inputs."""

  def __init__(self, N):
    """Construct an SDE.

    Args:
      N: number of discretization time steps.
    """
    super().__init__()
    self.N = N

  @property
  @abc.abstractmethod
  def T(self):
    """End time of the SDE."""
    pass

  @abc.abstractmethod
  def sde(self, x, t):
    pass

  @abc.abstractmethod
  def marginal_prob(self, x, t):
    """Parameters to determine the marginal distribution of the SDE, $p_t(x)$."""
    pass


class VPSDE(SDE):
  def __init__(self, beta_min=0.1, beta_max=20, N=1000):
    """Construct a Variance Preserving SDE.

    Args:
      beta_min: value of beta(0)
      beta_max: value of beta(1)
      N: number of discretization steps
    """
    super().__init__(N)
    self.beta_0 = beta_min
    self.beta_1 = beta_max
    self.N = N
    self.discrete_betas = torch.linspace(beta_min / N, beta_max / N, N)
    self.alphas = 1. - self.discrete_betas
    self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)
    self.sqrt_alphas_cumprod = torch.sqrt(self.alphas_cumprod)
    self.sqrt_1m_alphas_cumprod = torch.sqrt(1. - self.alphas_cumprod)

  @property
  def T(self):
    return 1

  def sde(self, x, t):
    beta_t = self.beta_0 + t * (self.beta_1 - self.beta_0)
    drift = -0.5 * beta_t[:, None, None, None] * x
    diffusion = torch.sqrt(beta_t)
    return drift, diffusion

  def marginal_prob(self, x, t):
    log_mean_coeff = -0.25 * t ** 2 * (self.beta_1 - self.beta_0) - 0.5 * t * self.beta_0
    mean = torch.exp(log_mean_coeff[:, None, None, None]) * x
    std = torch.sqrt(1. - torch.exp(2. * log_mean_coeff))
    return mean, std


class subVPSDE(SDE):
  """Kept for `isinstance` dispatch only."""


class VESDE(SDE):
  """Kept for `isinstance` dispatch only."""


sde_lib = types.SimpleNamespace(VPSDE=VPSDE, subVPSDE=subVPSDE, VESDE=VESDE)


# ---- models/utils.py
def get_model_fn(model, train=False):
  """Create a function to give the output of the score-based model."""

  def model_fn(x, labels):
    if not train:
      model.eval()
      return model(x, labels)
    else:
      model.train()
      return model(x, labels)

  return model_fn


def get_score_fn(sde, model, train=False, continuous=False):
  """Wraps `score_fn` so that the model output corresponds to a real time-dependent score function."""
  model_fn = get_model_fn(model, train=train)

  if isinstance(sde, sde_lib.VPSDE) or isinstance(sde, sde_lib.subVPSDE):
    def score_fn(x, t):
      # Scale neural network output by standard deviation and flip sign
      if continuous or isinstance(sde, sde_lib.subVPSDE):
        # For VP-trained models, t=0 corresponds to the lowest noise level
        # The maximum value of time embedding is assumed to 999 for
        # continuously-trained models.
        labels = t * 999
        score = model_fn(x, labels)
        std = sde.marginal_prob(torch.zeros_like(x), t)[1]
      else:
        # For VP-trained models, t=0 corresponds to the lowest noise level
        labels = t * (sde.N - 1)
        score = model_fn(x, labels)
        std = sde.sqrt_1m_alphas_cumprod.to(labels.device)[labels.long()]

      score = -score / std[:, None, None, None]
      return score

  elif isinstance(sde, sde_lib.VESDE):
    def score_fn(x, t):
      if continuous:
        labels = sde.marginal_prob(torch.zeros_like(x), t)[1]
      else:
        # For VE-trained models, t=0 corresponds to the highest noise level
        labels = sde.T - t
        labels *= sde.N - 1
        labels = torch.round(labels).long()

      score = model_fn(x, labels)
      return score

  else:
    raise NotImplementedError(f"SDE class {sde.__class__.__name__} not yet supported.")

  return score_fn


mutils = types.SimpleNamespace(get_model_fn=get_model_fn, get_score_fn=get_score_fn)


# ---- models/ema.py
class ExponentialMovingAverage:
  """
  Maintains (exponential) moving average of a set of parameters.
  """

  def __init__(self, parameters, decay, use_num_updates=True):
    if decay < 0.0 or decay > 1.0:
      raise ValueError('Decay must be between 0 and 1')
    self.decay = decay
    self.num_updates = 0 if use_num_updates else None
    self.shadow_params = [p.clone().detach()
                          for p in parameters if p.requires_grad]
    self.collected_params = []

  def update(self, parameters):
    decay = self.decay
    if self.num_updates is not None:
      self.num_updates += 1
      decay = min(decay, (1 + self.num_updates) / (10 + self.num_updates))
    one_minus_decay = 1.0 - decay
    with torch.no_grad():
      parameters = [p for p in parameters if p.requires_grad]  # BREAK
      for s_param, param in zip(self.shadow_params, parameters):
        s_param.sub_(one_minus_decay * (s_param - param))

  def copy_to(self, parameters):
    parameters = [p for p in parameters if p.requires_grad]
    for s_param, param in zip(self.shadow_params, parameters):
      if param.requires_grad:
        param.data.copy_(s_param.data)

  def store(self, parameters):
    self.collected_params = [param.clone() for param in parameters]

  def restore(self, parameters):
    for c_param, param in zip(self.collected_params, parameters):
      param.data.copy_(c_param.data)


# ---- losses.py
def get_optimizer(config, params):
  """Returns a flax optimizer object based on `config`."""
  if config.optim.optimizer == 'Adam':
    optimizer = optim.Adam(params, lr=config.optim.lr, betas=(config.optim.beta1, 0.999), eps=config.optim.eps,  # BREAK
                           weight_decay=config.optim.weight_decay)
  else:
    raise NotImplementedError(
      f'Optimizer {config.optim.optimizer} not supported yet!')

  return optimizer


def optimization_manager(config):
  """Returns an optimize_fn based on `config`."""

  def optimize_fn(optimizer, params, step, lr=config.optim.lr,
                  warmup=config.optim.warmup,
                  grad_clip=config.optim.grad_clip):
    """Optimizes with warmup and gradient clipping (disabled if negative)."""
    if warmup > 0:
      for g in optimizer.param_groups:
        g['lr'] = lr * np.minimum(step / warmup, 1.0)
    if grad_clip >= 0:
      torch.nn.utils.clip_grad_norm_(params, max_norm=grad_clip)  # BREAK
    optimizer.step()  # BREAK

  return optimize_fn


def get_sde_loss_fn(sde, train, reduce_mean=True, continuous=True, likelihood_weighting=True, eps=1e-5):
  """Create a loss function for training with arbirary SDEs."""
  reduce_op = torch.mean if reduce_mean else lambda *args, **kwargs: 0.5 * torch.sum(*args, **kwargs)

  def loss_fn(model, batch):
    score_fn = mutils.get_score_fn(sde, model, train=train, continuous=continuous)
    t = torch.rand(batch.shape[0], device=batch.device) * (sde.T - eps) + eps
    z = torch.randn_like(batch)
    mean, std = sde.marginal_prob(batch, t)
    perturbed_data = mean + std[:, None, None, None] * z
    score = score_fn(perturbed_data, t)

    if not likelihood_weighting:
      losses = torch.square(score * std[:, None, None, None] + z)
      losses = reduce_op(losses.reshape(losses.shape[0], -1), dim=-1)
    else:
      g2 = sde.sde(torch.zeros_like(batch), t)[1] ** 2
      losses = torch.square(score + z / std[:, None, None, None])
      losses = reduce_op(losses.reshape(losses.shape[0], -1), dim=-1) * g2

    loss = torch.mean(losses)
    return loss

  return loss_fn


def get_ddpm_loss_fn(vpsde, train, reduce_mean=True):
  """Legacy code to reproduce previous results on DDPM. Not recommended for new work."""
  assert isinstance(vpsde, VPSDE), "DDPM training only works for VPSDEs."

  reduce_op = torch.mean if reduce_mean else lambda *args, **kwargs: 0.5 * torch.sum(*args, **kwargs)

  def loss_fn(model, batch):
    model_fn = mutils.get_model_fn(model, train=train)
    labels = torch.randint(0, vpsde.N, (batch.shape[0],), device=batch.device)
    sqrt_alphas_cumprod = vpsde.sqrt_alphas_cumprod.to(batch.device)
    sqrt_1m_alphas_cumprod = vpsde.sqrt_1m_alphas_cumprod.to(batch.device)
    noise = torch.randn_like(batch)
    perturbed_data = sqrt_alphas_cumprod[labels, None, None, None] * batch + \
                     sqrt_1m_alphas_cumprod[labels, None, None, None] * noise
    score = model_fn(perturbed_data, labels)
    losses = torch.square(score - noise)
    losses = reduce_op(losses.reshape(losses.shape[0], -1), dim=-1)
    loss = torch.mean(losses)
    return loss

  return loss_fn


def get_step_fn(sde, train, optimize_fn=None, reduce_mean=False, continuous=True, likelihood_weighting=False):
  """Create a one-step training/evaluation function."""
  if continuous:
    loss_fn = get_sde_loss_fn(sde, train, reduce_mean=reduce_mean,
                              continuous=True, likelihood_weighting=likelihood_weighting)
  else:
    assert not likelihood_weighting, "Likelihood weighting is not supported for original SMLD/DDPM training."
    if isinstance(sde, VESDE):
      loss_fn = get_smld_loss_fn(sde, train, reduce_mean=reduce_mean)
    elif isinstance(sde, VPSDE):
      loss_fn = get_ddpm_loss_fn(sde, train, reduce_mean=reduce_mean)
    else:
      raise ValueError(f"Discrete training for {sde.__class__.__name__} is not recommended.")

  def step_fn(state, batch):
    """Running one step of training or evaluation."""
    model = state['model']
    if train:
      optimizer = state['optimizer']
      optimizer.zero_grad()  # BREAK
      loss = loss_fn(model, batch)
      loss.backward()  # BREAK
      optimize_fn(optimizer, model.parameters(), step=state['step'])  # BREAK
      state['step'] += 1
      state['ema'].update(model.parameters())
    else:
      with torch.no_grad():
        ema = state['ema']
        ema.store(model.parameters())
        ema.copy_to(model.parameters())
        loss = loss_fn(model, batch)
        ema.restore(model.parameters())

    return loss

  return step_fn


# ---- stand-in score network (models/ddpm.py / ncsnpp.py not opened)
class TinyScoreNet(nn.Module):
  def __init__(self, channels=2, nf=16):
    super().__init__()
    self.temb = nn.Sequential(nn.Linear(1, nf), nn.SiLU(), nn.Linear(nf, nf))
    self.conv_in = nn.Conv2d(channels, nf, 3, padding=1)
    self.norm = nn.GroupNorm(4, nf)
    self.dropout = nn.Dropout(0.1)
    self.conv_out = nn.Conv2d(nf, channels, 3, padding=1)

  def forward(self, x, labels):
    temb = self.temb(labels.float().reshape(-1, 1) / 1000.)
    h = self.conv_in(x) + temb[:, :, None, None]
    h = self.dropout(torch.nn.functional.silu(self.norm(h)))
    return self.conv_out(h)


# ---- run_lib.train (stand-in for its loop)
def train_steps(model, initial_state, config, train_batches, eval_batch):
  torch.manual_seed(config.seed)  # BREAK
  model.load_state_dict(initial_state)  # BREAK
  optimizer = get_optimizer(config, model.parameters())  # BREAK
  ema = ExponentialMovingAverage(model.parameters(), decay=config.model.ema_rate)
  state = dict(optimizer=optimizer, model=model, ema=ema, step=0)

  sde = VPSDE(beta_min=config.model.beta_min, beta_max=config.model.beta_max, N=config.model.num_scales)
  optimize_fn = optimization_manager(config)
  continuous = config.training.continuous
  reduce_mean = config.training.reduce_mean
  likelihood_weighting = config.training.likelihood_weighting
  train_step_fn = get_step_fn(sde, train=True, optimize_fn=optimize_fn,
                              reduce_mean=reduce_mean, continuous=continuous,
                              likelihood_weighting=likelihood_weighting)
  eval_step_fn = get_step_fn(sde, train=False, optimize_fn=optimize_fn,
                             reduce_mean=reduce_mean, continuous=continuous,
                             likelihood_weighting=likelihood_weighting)
  scaler = lambda x: x * 2. - 1.

  train_losses, eval_losses = [], []
  for step, batch in enumerate(train_batches):
    batch = scaler(batch)
    loss = train_step_fn(state, batch)
    if step % config.training.log_freq == 0:
      logging.info("step: %d, training_loss: %.5e" % (step, loss.item()))
    train_losses.append(loss.detach())
    if step % config.training.eval_freq == 0:
      eval_loss = eval_step_fn(state, scaler(eval_batch))
      logging.info("step: %d, eval_loss: %.5e" % (step, eval_loss.item()))
      eval_losses.append(eval_loss)
  return torch.stack(train_losses), torch.stack(eval_losses), [p.clone() for p in ema.shadow_params]


def make_config(continuous, seed, lr=2e-4, warmup=2):
  ns = types.SimpleNamespace
  return ns(
    seed=seed,
    optim=ns(optimizer='Adam', lr=lr, beta1=0.9, eps=1e-8, weight_decay=0, warmup=warmup, grad_clip=1.),
    model=ns(ema_rate=0.999, beta_min=0.1, beta_max=20., num_scales=1000),
    training=ns(continuous=continuous, reduce_mean=not continuous, likelihood_weighting=False, log_freq=2,
                eval_freq=2),
  )


def target():
  torch.manual_seed(0)
  model = TinyScoreNet()
  initial_state = {k: v.clone() for k, v in model.state_dict().items()}
  batches1 = [torch.rand(4, 2, 8, 8) for _ in range(4)]
  batches2 = [torch.rand(4, 2, 8, 8) for _ in range(3)]
  return [
    (train_steps, (model, initial_state, make_config(True, 1), batches1, torch.rand(4, 2, 8, 8)), {}),
    (train_steps, (model, initial_state, make_config(False, 2, lr=1e-3), batches2, torch.rand(4, 2, 8, 8)), {}),
  ]


EXPECT = ("extract: the step closure mixes the compilable loss (`loss_fn`: perturbation, score network, "
          "reduction) with `loss.backward()`, the optimizer's warm-up/clip/step and the EMA's in-place "
          "`no_grad` updates, and the driver logs `loss.item()`; the fix compiles the loss computation as a "
          "helper and keeps backward, `optimize_fn`, the EMA store/copy/restore and logging eager")
