"""PPO policy loss with logged statistics: `approx_kl = (logp_old - logp).mean().item()`,
`ent = pi.entropy().mean().item()` and `clipfrac = torch.as_tensor(clipped, dtype=torch.float32).mean().item()`
computed next to the clipped surrogate loss (openai/spinningup spinup/algos/pytorch/ppo/ppo.py: the
`compute_loss_pi` closure of `ppo()`; spinup/algos/pytorch/ppo/core.py: mlp, Actor, MLPGaussianActor, MLPCritic,
MLPActorCritic). The gym Box space is a small stand-in class (the Discrete/categorical actor is left out); the closure is built by a factory that plays the
role of `ppo()`."""
import numpy as np
import torch
import torch.nn as nn
from torch.distributions.normal import Normal


class Box:
    """Stand-in for gym.spaces.Box (only `.shape` is read)."""

    def __init__(self, low, high, shape):
        self.low, self.high, self.shape = low, high, shape


def mlp(sizes, activation, output_activation=nn.Identity):
    layers = []
    for j in range(len(sizes)-1):
        act = activation if j < len(sizes)-2 else output_activation
        layers += [nn.Linear(sizes[j], sizes[j+1]), act()]
    return nn.Sequential(*layers)


class Actor(nn.Module):

    def _distribution(self, obs):
        raise NotImplementedError

    def _log_prob_from_distribution(self, pi, act):
        raise NotImplementedError

    def forward(self, obs, act=None):
        # Produce action distributions for given observations, and
        # optionally compute the log likelihood of given actions under
        # those distributions.
        pi = self._distribution(obs)
        logp_a = None
        if act is not None:
            logp_a = self._log_prob_from_distribution(pi, act)
        return pi, logp_a


class MLPGaussianActor(Actor):

    def __init__(self, obs_dim, act_dim, hidden_sizes, activation):
        super().__init__()
        log_std = -0.5 * np.ones(act_dim, dtype=np.float32)
        self.log_std = torch.nn.Parameter(torch.as_tensor(log_std))
        self.mu_net = mlp([obs_dim] + list(hidden_sizes) + [act_dim], activation)

    def _distribution(self, obs):
        mu = self.mu_net(obs)
        std = torch.exp(self.log_std)
        return Normal(mu, std)

    def _log_prob_from_distribution(self, pi, act):
        return pi.log_prob(act).sum(axis=-1)    # Last axis sum needed for Torch Normal distribution


class MLPCritic(nn.Module):

    def __init__(self, obs_dim, hidden_sizes, activation):
        super().__init__()
        self.v_net = mlp([obs_dim] + list(hidden_sizes) + [1], activation)

    def forward(self, obs):
        return torch.squeeze(self.v_net(obs), -1)  # Critical to ensure v has right shape.


class MLPActorCritic(nn.Module):

    def __init__(self, observation_space, action_space,
                 hidden_sizes=(64, 64), activation=nn.Tanh):
        super().__init__()

        obs_dim = observation_space.shape[0]

        # policy builder depends on action space
        if isinstance(action_space, Box):
            self.pi = MLPGaussianActor(obs_dim, action_space.shape[0], hidden_sizes, activation)

        # build value function
        self.v = MLPCritic(obs_dim, hidden_sizes, activation)

    def step(self, obs):
        with torch.no_grad():
            pi = self.pi._distribution(obs)
            a = pi.sample()
            logp_a = self.pi._log_prob_from_distribution(pi, a)
            v = self.v(obs)
        return a.numpy(), v.numpy(), logp_a.numpy()

    def act(self, obs):
        return self.step(obs)[0]


def make_compute_loss_pi(ac, clip_ratio=0.2):
    """The part of `ppo()` that defines the policy-loss closure over `ac` and `clip_ratio`."""

    # Set up function for computing PPO policy loss
    def compute_loss_pi(data):
        obs, act, adv, logp_old = data['obs'], data['act'], data['adv'], data['logp']

        # Policy loss
        pi, logp = ac.pi(obs, act)
        ratio = torch.exp(logp - logp_old)
        clip_adv = torch.clamp(ratio, 1-clip_ratio, 1+clip_ratio) * adv
        loss_pi = -(torch.min(ratio * adv, clip_adv)).mean()

        # Useful extra info
        approx_kl = (logp_old - logp).mean().item()  # BREAK
        ent = pi.entropy().mean().item()  # BREAK
        clipped = ratio.gt(1+clip_ratio) | ratio.lt(1-clip_ratio)
        clipfrac = torch.as_tensor(clipped, dtype=torch.float32).mean().item()  # BREAK
        pi_info = dict(kl=approx_kl, ent=ent, cf=clipfrac)

        return loss_pi, pi_info

    return compute_loss_pi


def target():
    torch.manual_seed(0)
    obs_space = Box(-np.inf, np.inf, (8,))
    act_space = Box(-1.0, 1.0, (2,))
    ac = MLPActorCritic(obs_space, act_space, hidden_sizes=(32, 32))
    compute_loss_pi = make_compute_loss_pi(ac, clip_ratio=0.2)

    def data():
        obs = torch.randn(64, 8)
        act = torch.randn(64, 2) * 0.5
        with torch.no_grad():
            logp = ac.pi(obs, act)[1] + 0.3 * torch.randn(64)  # the policy has moved since the rollout
        return {'obs': obs, 'act': act, 'adv': torch.randn(64), 'logp': logp}

    return [
        (compute_loss_pi, (data(),), {}),
        (compute_loss_pi, (data(),), {}),
    ]


EXPECT = ("rewrite: return `approx_kl`, `ent` and `clipfrac` as detached tensors (drop the three `.item()`s) and "
          "convert them to floats after the compiled loss, where they are logged")
