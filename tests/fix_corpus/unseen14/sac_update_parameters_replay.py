"""Soft actor-critic updates from a replay memory, from pranz24/pytorch-soft-actor-critic (`sac.py`
`SAC.__init__`, `select_action`, `update_parameters`; `replay_memory.py` `ReplayMemory`; `utils.py` `soft_update`,
`hard_update`; `main.py`'s inner loop). `ReplayMemory.push` grows a Python list to `capacity` and wraps
`position`; `sample` draws with `random.sample` and `map(np.stack, zip(*batch))`. `update_parameters` converts the
NumPy batch with `torch.FloatTensor(...).to(device)` (`.unsqueeze(1)` for rewards and masks), builds the target
under `torch.no_grad()` from `policy.sample`, steps the critic optimiser twice, the policy once, and with
`automatic_entropy_tuning` the `log_alpha` optimiser, replacing the Python-float `self.alpha` by the tensor
`self.log_alpha.exp()` (so the second update runs with a tensor `alpha`); every `target_update_interval` updates
(`updates % ...`) it runs `soft_update`'s `param.data` loop; it returns five `.item()`s. `select_action` turns the
state into a `FloatTensor`, samples and returns `action.detach().cpu().numpy()[0]`. The driver is `main.py`'s inner
loop: choose an action, step the environment, `memory.push(...)` with `mask = 1 if episode_steps == max_episode_steps
else float(not done)`, and `if len(memory) > batch_size:` run `updates_per_step` updates, collecting the losses.
The stored `sac.py` is a fork's revision that builds `GaussianPolicy` twice (the second call with undefined
attributes); the first (upstream) construction is kept. The stored `model.py` is an older revision without
`sample`; `QNetwork` (twin heads returning `x1, x2`), `GaussianPolicy` (`action_scale`/`action_bias` buffers,
`sample` with `rsample`, `tanh` squashing and the log-det correction) and `weights_init_` are written from the
collector's knowledge of the upstream file. Adaptations: gym is a deterministic NumPy `ToyEnv` with a Box-like
`action_space` (`shape`, `high`, `low`, `sample()` from a seeded `RandomState`); sizes are small; tensorboard
logging is dropped (the losses are returned). Runnability fix after the first census (the compiled run failed
in `torch.FloatTensor` of the float64 reward batch): `ReplayMemory.sample` stacks into float32 arrays. So that a call repeats, the called function `run_updates` restores
every network and optimiser from the factory's copies (`reset_`), refills the memory from the factory's list and
seeds Python's `random` and torch; it returns the losses and the last action."""
import copy
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal
from torch.optim import Adam

LOG_SIG_MAX = 2
LOG_SIG_MIN = -20
epsilon = 1e-6


# ---- utils.py
def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(param.data)


# ---- replay_memory.py
class ReplayMemory:
    def __init__(self, capacity):
        self.capacity = capacity
        self.buffer = []
        self.position = 0

    def push(self, state, action, reward, next_state, done):
        if len(self.buffer) < self.capacity:
            self.buffer.append(None)
        self.buffer[self.position] = (state, action, reward, next_state, done)
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)  # BREAK
        state, action, reward, next_state, done = map(lambda x: np.stack(x).astype(np.float32), zip(*batch))
        return state, action, reward, next_state, done

    def __len__(self):
        return len(self.buffer)


# ---- model.py (upstream layout, from the collector's knowledge)
def weights_init_(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight, gain=1)
        torch.nn.init.constant_(m.bias, 0)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super(QNetwork, self).__init__()

        # Q1 architecture
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)

        # Q2 architecture
        self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear5 = nn.Linear(hidden_dim, hidden_dim)
        self.linear6 = nn.Linear(hidden_dim, 1)

        self.apply(weights_init_)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)

        x1 = F.relu(self.linear1(xu))
        x1 = F.relu(self.linear2(x1))
        x1 = self.linear3(x1)

        x2 = F.relu(self.linear4(xu))
        x2 = F.relu(self.linear5(x2))
        x2 = self.linear6(x2)

        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, action_space=None):
        super(GaussianPolicy, self).__init__()

        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)

        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)

        self.apply(weights_init_)

        # action rescaling
        if action_space is None:
            self.action_scale = torch.tensor(1.)
            self.action_bias = torch.tensor(0.)
        else:
            self.action_scale = torch.FloatTensor(
                (action_space.high - action_space.low) / 2.)
            self.action_bias = torch.FloatTensor(
                (action_space.high + action_space.low) / 2.)

    def forward(self, state):
        x = F.relu(self.linear1(state))
        x = F.relu(self.linear2(x))
        mean = self.mean_linear(x)
        log_std = self.log_std_linear(x)
        log_std = torch.clamp(log_std, min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample()  # for reparameterization trick (mean + std * N(0,1))
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        # Enforcing Action Bound
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean


# ---- sac.py
class SAC(object):
    def __init__(self, num_inputs, action_space, args):

        self.gamma = args.gamma
        self.tau = args.tau
        self.alpha = args.alpha

        self.policy_type = args.policy
        self.target_update_interval = args.target_update_interval
        self.automatic_entropy_tuning = args.automatic_entropy_tuning

        self.device = torch.device("cuda" if args.cuda else "cpu")

        self.critic = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(device=self.device)
        self.critic_optim = Adam(self.critic.parameters(), lr=args.lr)

        self.critic_target = QNetwork(num_inputs, action_space.shape[0], args.hidden_size).to(self.device)
        hard_update(self.critic_target, self.critic)

        if self.policy_type == "Gaussian":
            # Target Entropy = -dim(A) (e.g. , -6 for HalfCheetah-v2) as given in the paper
            if self.automatic_entropy_tuning == True:
                self.target_entropy = -torch.prod(torch.Tensor(action_space.shape).to(self.device)).item()
                self.log_alpha = torch.zeros(1, requires_grad=True, device=self.device)
                self.alpha_optim = Adam([self.log_alpha], lr=args.lr)

            self.policy = GaussianPolicy(num_inputs, action_space.shape[0], args.hidden_size, action_space).to(self.device)
            self.policy_optim = Adam(self.policy.parameters(), lr=args.lr)

    def select_action(self, state, eval=False):
        state = torch.FloatTensor(state).to(self.device).unsqueeze(0)
        if eval == False:
            action, _, _ = self.policy.sample(state)
        else:
            _, _, action = self.policy.sample(state)
        action = action.detach().cpu().numpy()
        return action[0]

    def update_parameters(self, memory, batch_size, updates):
        # Sample a batch from memory
        state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory.sample(batch_size=batch_size)

        state_batch = torch.FloatTensor(state_batch).to(self.device)
        next_state_batch = torch.FloatTensor(next_state_batch).to(self.device)
        action_batch = torch.FloatTensor(action_batch).to(self.device)
        reward_batch = torch.FloatTensor(reward_batch).to(self.device).unsqueeze(1)
        mask_batch = torch.FloatTensor(mask_batch).to(self.device).unsqueeze(1)

        with torch.no_grad():
            next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)
            qf1_next_target, qf2_next_target = self.critic_target(next_state_batch, next_state_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - self.alpha * next_state_log_pi
            next_q_value = reward_batch + mask_batch * self.gamma * (min_qf_next_target)

        qf1, qf2 = self.critic(state_batch, action_batch)  # Two Q-functions to mitigate positive bias in the policy improvement step
        qf1_loss = F.mse_loss(qf1, next_q_value)
        qf2_loss = F.mse_loss(qf2, next_q_value)

        self.critic_optim.zero_grad()  # BREAK
        qf1_loss.backward()  # BREAK
        self.critic_optim.step()  # BREAK

        self.critic_optim.zero_grad()  # BREAK
        qf2_loss.backward()  # BREAK
        self.critic_optim.step()  # BREAK

        pi, log_pi, _ = self.policy.sample(state_batch)

        qf1_pi, qf2_pi = self.critic(state_batch, pi)
        min_qf_pi = torch.min(qf1_pi, qf2_pi)

        policy_loss = ((self.alpha * log_pi) - min_qf_pi).mean()

        self.policy_optim.zero_grad()  # BREAK
        policy_loss.backward()  # BREAK
        self.policy_optim.step()  # BREAK

        if self.automatic_entropy_tuning:
            alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()

            self.alpha_optim.zero_grad()  # BREAK
            alpha_loss.backward()  # BREAK
            self.alpha_optim.step()  # BREAK

            self.alpha = self.log_alpha.exp()
            alpha_tlogs = self.alpha.clone()  # For TensorboardX logs
        else:
            alpha_loss = torch.tensor(0.).to(self.device)
            alpha_tlogs = torch.tensor(self.alpha)  # For TensorboardX logs

        if updates % self.target_update_interval == 0:
            soft_update(self.critic_target, self.critic, self.tau)

        return qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item(), alpha_tlogs.item()  # BREAK


# ---- stand-ins
class Box(object):
    """Stand-in for gym.spaces.Box."""
    def __init__(self, low, high, seed=0):
        self.low, self.high = low, high
        self.shape = low.shape
        self.rng = np.random.RandomState(seed)

    def sample(self):
        return self.rng.uniform(self.low, self.high).astype(np.float32)  # BREAK


class ToyEnv(object):
    """Stand-in for a gym environment: deterministic linear dynamics, quadratic cost."""
    def __init__(self, obs_dim=3, act_dim=2):
        self.obs_dim = obs_dim
        self.action_space = Box(-np.ones(act_dim, np.float32), np.ones(act_dim, np.float32))
        self.A = np.eye(obs_dim, dtype=np.float32) * 0.9
        self.B = np.ones((obs_dim, act_dim), np.float32) * 0.1
        self._max_episode_steps = 6

    def reset(self):
        self.t = 0
        self.s = np.linspace(-1, 1, self.obs_dim).astype(np.float32)
        return self.s

    def step(self, a):
        self.t += 1
        self.s = (self.A @ self.s + self.B @ a).astype(np.float32)
        reward = float(-(self.s ** 2).sum() - 0.01 * (a ** 2).sum())  # BREAK
        done = self.t >= 4
        return self.s, reward, done, {}


# ---- main.py's inner loop
def run_updates(agent, memory, env, args, states, seed, transitions):
    reset_(agent, memory, env, states, seed, transitions)
    losses = []
    updates = 0
    total_numsteps = 0
    for i_episode in range(args.num_episodes):
        episode_reward = 0
        episode_steps = 0
        done = False
        state = env.reset()

        while not done:
            if args.start_steps > total_numsteps:
                action = env.action_space.sample()  # Sample random action
            else:
                action = agent.select_action(state)  # Sample action from policy

            if len(memory) > args.batch_size:
                # Number of updates per step in environment
                for i in range(args.updates_per_step):
                    # Update parameters of all the networks
                    critic_1_loss, critic_2_loss, policy_loss, ent_loss, alpha = agent.update_parameters(memory, args.batch_size, updates)
                    losses.append((critic_1_loss, critic_2_loss, policy_loss, ent_loss, alpha))
                    updates += 1

            next_state, reward, done, _ = env.step(action)  # Step
            episode_steps += 1
            total_numsteps += 1
            episode_reward += reward

            # Ignore the "done" signal if it comes from hitting the time horizon.
            mask = 1 if episode_steps == env._max_episode_steps else float(not done)

            memory.push(state, action, reward, next_state, mask)  # Append transition to memory

            state = next_state
    return losses, action


def reset_(agent, memory, env, states, seed, transitions):
    """Adaptation: restore networks/optimisers/alpha and the memory from the factory's copies; seed random, torch."""
    agent.critic.load_state_dict(states['critic'])  # BREAK
    agent.critic_target.load_state_dict(states['critic_target'])  # BREAK
    agent.policy.load_state_dict(states['policy'])  # BREAK
    agent.critic_optim.load_state_dict(states['critic_optim'])  # BREAK
    agent.policy_optim.load_state_dict(states['policy_optim'])  # BREAK
    agent.alpha = states['alpha']
    if agent.automatic_entropy_tuning:
        with torch.no_grad():
            agent.log_alpha.zero_()
        agent.alpha_optim.load_state_dict(states['alpha_optim'])  # BREAK
    memory.buffer = list(transitions)
    memory.position = len(transitions) % memory.capacity
    env.action_space.rng = np.random.RandomState(seed)  # BREAK
    random.seed(seed)  # BREAK
    torch.manual_seed(seed)  # BREAK


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(0)
    env = ToyEnv()
    args = Args(gamma=0.99, tau=0.005, alpha=0.2, policy='Gaussian', target_update_interval=1,
                automatic_entropy_tuning=True, cuda=False, hidden_size=16, lr=3e-4, batch_size=4,
                updates_per_step=1, start_steps=3, num_episodes=2)
    agent = SAC(env.obs_dim, env.action_space, args)
    states = {
        'critic': copy.deepcopy(agent.critic.state_dict()),
        'critic_target': copy.deepcopy(agent.critic_target.state_dict()),
        'policy': copy.deepcopy(agent.policy.state_dict()),
        'critic_optim': copy.deepcopy(agent.critic_optim.state_dict()),
        'policy_optim': copy.deepcopy(agent.policy_optim.state_dict()),
        'alpha_optim': copy.deepcopy(agent.alpha_optim.state_dict()),
        'alpha': args.alpha,
    }
    rng = np.random.RandomState(0)
    transitions = [(rng.randn(3).astype(np.float32), rng.uniform(-1, 1, 2).astype(np.float32), float(rng.randn()),
                    rng.randn(3).astype(np.float32), 1.0) for _ in range(5)]
    memory = ReplayMemory(32)
    return [
        (run_updates, (agent, memory, env, args, states, 1, transitions), {}),
        (run_updates, (agent, memory, env, args, states, 2, transitions[:3]), {}),
    ]


EXPECT = ("extract: the update is a sequence of optimiser steps around `backward()` calls with host input "
          "(`random.sample` + `np.stack` batches turned into `torch.FloatTensor`s) and `.item()` outputs; breaks "
          "expected at `torch.FloatTensor(state_batch)` (a NumPy input), the `backward()`/`step()` lines, the five "
          "`.item()`s of the return, `select_action`'s `.numpy()` and `reset_`'s `load_state_dict` calls")
