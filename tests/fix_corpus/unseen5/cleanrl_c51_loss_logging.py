"""C51 distributional DQN training step: the categorical projection (a per-sample `index_add_` loop under
`torch.no_grad()`), the cross-entropy loss, then every 100 steps `writer.add_scalar("losses/loss", loss.item(), ...)`,
`old_val.mean().item()` and `print("SPS:", int(global_step / (time.time() - start_time)))` (vwxyzjn/cleanrl
cleanrl/c51.py: the `# ALGO LOGIC: training.` block of the main loop, QNetwork.get_action, Args). The script's loop
body is written as a function of the step; stand-ins: the gym env (only its space shapes), the replay buffer sample
(a named tuple like stable-baselines3's ReplayBufferSamples) and tensorboard's SummaryWriter (a dict of scalars). The
optimizer step after the loss is left out (the function returns the loss), so the networks are the same on every
call; sizes are shrunk (11 atoms, batch 8)."""
import time
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn


@dataclass
class Args:
    gamma: float = 0.99
    """the discount factor gamma"""
    n_atoms: int = 11
    """the number of atoms"""
    v_min: float = -100
    """the return lower bound"""
    v_max: float = 100
    """the return upper bound"""
    batch_size: int = 8
    """the batch size of sample from the reply memory"""
    learning_starts: int = 10
    """timestep to start learning"""
    train_frequency: int = 10
    """the frequency of training"""


class _Box:
    def __init__(self, shape):
        self.shape = shape


class _Discrete:
    def __init__(self, n):
        self.n = n


class _Envs:
    """Stand-in for gym.vector.SyncVectorEnv (CartPole-like spaces)."""
    single_observation_space = _Box((4,))
    single_action_space = _Discrete(2)
    num_envs = 1


class SummaryWriter:
    """Stand-in for torch.utils.tensorboard.SummaryWriter."""

    def __init__(self, log_dir=None):
        self.scalars = {}

    def add_scalar(self, tag, scalar_value, global_step=None):
        self.scalars.setdefault(tag, []).append((global_step, scalar_value))


ReplayBufferSamples = namedtuple("ReplayBufferSamples",
                                 ["observations", "actions", "next_observations", "dones", "rewards"])


class QNetwork(nn.Module):
    def __init__(self, env, n_atoms=101, v_min=-100, v_max=100):
        super().__init__()
        self.env = env
        self.n_atoms = n_atoms
        self.register_buffer("atoms", torch.linspace(v_min, v_max, steps=n_atoms))
        self.n = env.single_action_space.n
        self.network = nn.Sequential(
            nn.Linear(np.array(env.single_observation_space.shape).prod(), 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, self.n * n_atoms),
        )

    def get_action(self, x, action=None):
        logits = self.network(x)
        # probability mass function for each action
        pmfs = torch.softmax(logits.view(len(x), self.n, self.n_atoms), dim=2)
        q_values = (pmfs * self.atoms).sum(2)
        if action is None:
            action = torch.argmax(q_values, 1)
        return action, pmfs[torch.arange(len(x)), action]


def train_step(args, q_network, target_network, data, writer, global_step, start_time):
    """The body of `if global_step % args.train_frequency == 0:` in c51.py, up to the loss and its logging."""
    with torch.no_grad():
        _, next_pmfs = target_network.get_action(data.next_observations)
        next_atoms = data.rewards + args.gamma * target_network.atoms * (1 - data.dones)
        # projection
        delta_z = target_network.atoms[1] - target_network.atoms[0]
        tz = next_atoms.clamp(args.v_min, args.v_max)

        b = (tz - args.v_min) / delta_z
        l = b.floor().clamp(0, args.n_atoms - 1)
        u = b.ceil().clamp(0, args.n_atoms - 1)
        # (l == u).float() handles the case where bj is exactly an integer
        # example bj = 1, then the upper ceiling should be uj= 2, and lj= 1
        d_m_l = (u + (l == u).float() - b) * next_pmfs
        d_m_u = (b - l) * next_pmfs
        target_pmfs = torch.zeros_like(next_pmfs)
        for i in range(target_pmfs.size(0)):
            target_pmfs[i].index_add_(0, l[i].long(), d_m_l[i])
            target_pmfs[i].index_add_(0, u[i].long(), d_m_u[i])

    _, old_pmfs = q_network.get_action(data.observations, data.actions.flatten())
    loss = (-(target_pmfs * old_pmfs.clamp(min=1e-5, max=1 - 1e-5).log()).sum(-1)).mean()

    if global_step % 100 == 0:
        writer.add_scalar("losses/loss", loss.item(), global_step)  # BREAK
        old_val = (old_pmfs * q_network.atoms).sum(1)
        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)  # BREAK
        print("SPS:", int(global_step / (time.time() - start_time)))  # BREAK
        writer.add_scalar("charts/SPS", int(global_step / (time.time() - start_time)), global_step)  # BREAK

    return loss


def _sample(args, envs):
    obs_dim = envs.single_observation_space.shape[0]
    return ReplayBufferSamples(
        observations=torch.randn(args.batch_size, obs_dim),
        actions=torch.randint(0, envs.single_action_space.n, (args.batch_size, 1)),
        next_observations=torch.randn(args.batch_size, obs_dim),
        dones=(torch.rand(args.batch_size, 1) < 0.2).float(),
        rewards=torch.randn(args.batch_size, 1) * 10,
    )


def target():
    torch.manual_seed(0)
    args = Args()
    envs = _Envs()
    q_network = QNetwork(envs, n_atoms=args.n_atoms, v_min=args.v_min, v_max=args.v_max)
    target_network = QNetwork(envs, n_atoms=args.n_atoms, v_min=args.v_min, v_max=args.v_max)
    target_network.load_state_dict(q_network.state_dict())
    writer = SummaryWriter("runs/c51")
    start_time = time.time() - 1.0
    return [
        (train_step, (args, q_network, target_network, _sample(args, envs), writer, 100, start_time), {}),
        (train_step, (args, q_network, target_network, _sample(args, envs), writer, 200, start_time), {}),
    ]


EXPECT = ("extract: move the `if global_step % 100 == 0:` logging block (two `.item()`s, the `time.time()` SPS "
          "print and the writer calls) into a helper under an escape hatch; the projection and loss stay compiled")
