"""DDPG training episodes from udacity/deep-reinforcement-learning (`ddpg-pendulum/ddpg_agent.py`: `Agent`
(`step`, `act`, `reset`, `learn`, `soft_update`), `OUNoise`, `ReplayBuffer`; `ddpg-pendulum/model.py`: `Actor`,
`Critic`, `hidden_init`). `Agent.step` appends to a `deque` of namedtuples and learns once `len(self.memory) >
BATCH_SIZE`; `ReplayBuffer.sample` draws with `random.sample` and stacks the fields with `np.vstack` of list
comprehensions (`if e is not None`) into `torch.from_numpy(...).float().to(device)`; `act` converts a NumPy state,
switches the actor to `eval()` under `no_grad`, reads `.cpu().data.numpy()`, switches back to `train()` and adds
Ornstein-Uhlenbeck noise drawn with `random.random()` in a list comprehension, then `np.clip`s; `learn` does the
critic and actor updates (`zero_grad`/`backward`/`step`) and the `soft_update` loop of `target_param.data.copy_`.
The networks seed torch in their constructors (`self.seed = torch.manual_seed(seed)`).
Adaptations: the episode loop is written after the repository's `ddpg-pendulum` notebook/driver (`ddpg` function:
`agent.reset()`, `for t in range(max_t)`, `act`, `env.step`, `agent.step`, score sum, `break` on `done`,
`print` of the average score with `end=""`), not opened here; the gym `Pendulum-v0` environment (gym not installed)
is a small NumPy pendulum stand-in with the same `reset`/`step` interface and 3-dimensional observation; sizes are
shrunk (`BATCH_SIZE` 16, hidden units 32/24, `BUFFER_SIZE` 1000, 2 episodes of 30 steps). So that a call repeats,
the called function `ddpg` seeds NumPy and `random` and builds its `Agent` itself (the agent's constructors seed torch
and `random` as the original does); it returns the scores and the actor's final weights' sum."""
import copy
import random
from collections import namedtuple, deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

BUFFER_SIZE = int(1e3)  # replay buffer size  (adaptation: 1e5)
BATCH_SIZE = 16         # minibatch size      (adaptation: 128)
GAMMA = 0.99            # discount factor
TAU = 1e-3              # for soft update of target parameters
LR_ACTOR = 1e-4         # learning rate of the actor
LR_CRITIC = 1e-3        # learning rate of the critic
WEIGHT_DECAY = 0        # L2 weight decay

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


# ---- model.py
def hidden_init(layer):
    fan_in = layer.weight.data.size()[0]
    lim = 1. / np.sqrt(fan_in)
    return (-lim, lim)


class Actor(nn.Module):
    """Actor (Policy) Model."""

    def __init__(self, state_size, action_size, seed, fc1_units=32, fc2_units=24):
        super(Actor, self).__init__()  # BREAK
        self.seed = torch.manual_seed(seed)  # BREAK
        self.fc1 = nn.Linear(state_size, fc1_units)
        self.fc2 = nn.Linear(fc1_units, fc2_units)
        self.fc3 = nn.Linear(fc2_units, action_size)
        self.reset_parameters()

    def reset_parameters(self):
        self.fc1.weight.data.uniform_(*hidden_init(self.fc1))
        self.fc2.weight.data.uniform_(*hidden_init(self.fc2))
        self.fc3.weight.data.uniform_(-3e-3, 3e-3)

    def forward(self, state):
        """Build an actor (policy) network that maps states -> actions."""
        x = F.relu(self.fc1(state))
        x = F.relu(self.fc2(x))
        return F.tanh(self.fc3(x))


class Critic(nn.Module):
    """Critic (Value) Model."""

    def __init__(self, state_size, action_size, seed, fcs1_units=32, fc2_units=24):
        super(Critic, self).__init__()  # BREAK
        self.seed = torch.manual_seed(seed)
        self.fcs1 = nn.Linear(state_size, fcs1_units)
        self.fc2 = nn.Linear(fcs1_units+action_size, fc2_units)
        self.fc3 = nn.Linear(fc2_units, 1)
        self.reset_parameters()

    def reset_parameters(self):
        self.fcs1.weight.data.uniform_(*hidden_init(self.fcs1))
        self.fc2.weight.data.uniform_(*hidden_init(self.fc2))
        self.fc3.weight.data.uniform_(-3e-3, 3e-3)

    def forward(self, state, action):
        """Build a critic (value) network that maps (state, action) pairs -> Q-values."""
        xs = F.relu(self.fcs1(state))
        x = torch.cat((xs, action), dim=1)
        x = F.relu(self.fc2(x))
        return self.fc3(x)


# ---- ddpg_agent.py
class Agent():
    """Interacts with and learns from the environment."""

    def __init__(self, state_size, action_size, random_seed):
        self.state_size = state_size
        self.action_size = action_size
        self.seed = random.seed(random_seed)  # BREAK

        # Actor Network (w/ Target Network)
        self.actor_local = Actor(state_size, action_size, random_seed).to(device)
        self.actor_target = Actor(state_size, action_size, random_seed).to(device)
        self.actor_optimizer = optim.Adam(self.actor_local.parameters(), lr=LR_ACTOR)  # BREAK

        # Critic Network (w/ Target Network)
        self.critic_local = Critic(state_size, action_size, random_seed).to(device)
        self.critic_target = Critic(state_size, action_size, random_seed).to(device)
        self.critic_optimizer = optim.Adam(self.critic_local.parameters(), lr=LR_CRITIC, weight_decay=WEIGHT_DECAY)

        # Noise process
        self.noise = OUNoise(action_size, random_seed)

        # Replay memory
        self.memory = ReplayBuffer(action_size, BUFFER_SIZE, BATCH_SIZE, random_seed)

    def step(self, state, action, reward, next_state, done):
        """Save experience in replay memory, and use random sample from buffer to learn."""
        # Save experience / reward
        self.memory.add(state, action, reward, next_state, done)

        # Learn, if enough samples are available in memory
        if len(self.memory) > BATCH_SIZE:
            experiences = self.memory.sample()
            self.learn(experiences, GAMMA)

    def act(self, state, add_noise=True):
        """Returns actions for given state as per current policy."""
        state = torch.from_numpy(state).float().to(device)
        self.actor_local.eval()
        with torch.no_grad():
            action = self.actor_local(state).cpu().data.numpy()
        self.actor_local.train()
        if add_noise:
            action += self.noise.sample()
        return np.clip(action, -2, 2)

    def reset(self):
        self.noise.reset()

    def learn(self, experiences, gamma):
        states, actions, rewards, next_states, dones = experiences

        # ---------------------------- update critic ---------------------------- #
        # Get predicted next-state actions and Q values from target models
        actions_next = self.actor_target(next_states)
        Q_targets_next = self.critic_target(next_states, actions_next)
        # Compute Q targets for current states (y_i)
        Q_targets = rewards + (gamma * Q_targets_next * (1 - dones))
        # Compute critic loss
        Q_expected = self.critic_local(states, actions)
        critic_loss = F.mse_loss(Q_expected, Q_targets)
        # Minimize the loss
        self.critic_optimizer.zero_grad()  # BREAK
        critic_loss.backward()  # BREAK
        self.critic_optimizer.step()  # BREAK

        # ---------------------------- update actor ---------------------------- #
        # Compute actor loss
        actions_pred = self.actor_local(states)
        actor_loss = -self.critic_local(states, actions_pred).mean()
        # Minimize the loss
        self.actor_optimizer.zero_grad()  # BREAK
        actor_loss.backward()  # BREAK
        self.actor_optimizer.step()  # BREAK

        # ----------------------- update target networks ----------------------- #
        self.soft_update(self.critic_local, self.critic_target, TAU)
        self.soft_update(self.actor_local, self.actor_target, TAU)

    def soft_update(self, local_model, target_model, tau):
        for target_param, local_param in zip(target_model.parameters(), local_model.parameters()):
            target_param.data.copy_(tau*local_param.data + (1.0-tau)*target_param.data)


class OUNoise:
    """Ornstein-Uhlenbeck process."""

    def __init__(self, size, seed, mu=0., theta=0.15, sigma=0.2):
        """Initialize parameters and noise process."""
        self.mu = mu * np.ones(size)
        self.theta = theta
        self.sigma = sigma
        self.seed = random.seed(seed)  # BREAK
        self.reset()

    def reset(self):
        """Reset the internal state (= noise) to mean (mu)."""
        self.state = copy.copy(self.mu)  # BREAK

    def sample(self):
        """Update internal state and return it as a noise sample."""
        x = self.state
        dx = self.theta * (self.mu - x) + self.sigma * np.array([random.random() for i in range(len(x))])  # BREAK
        self.state = x + dx
        return self.state


class ReplayBuffer:
    """Fixed-size buffer to store experience tuples."""

    def __init__(self, action_size, buffer_size, batch_size, seed):
        self.action_size = action_size
        self.memory = deque(maxlen=buffer_size)  # internal memory (deque)
        self.batch_size = batch_size
        self.experience = namedtuple("Experience", field_names=["state", "action", "reward", "next_state", "done"])
        self.seed = random.seed(seed)

    def add(self, state, action, reward, next_state, done):
        """Add a new experience to memory."""
        e = self.experience(state, action, reward, next_state, done)
        self.memory.append(e)

    def sample(self):
        """Randomly sample a batch of experiences from memory."""
        experiences = random.sample(self.memory, k=self.batch_size)  # BREAK

        states = torch.from_numpy(np.vstack([e.state for e in experiences if e is not None])).float().to(device)
        actions = torch.from_numpy(np.vstack([e.action for e in experiences if e is not None])).float().to(device)
        rewards = torch.from_numpy(np.vstack([e.reward for e in experiences if e is not None])).float().to(device)
        next_states = torch.from_numpy(np.vstack([e.next_state for e in experiences if e is not None])).float().to(device)
        dones = torch.from_numpy(np.vstack([e.done for e in experiences if e is not None]).astype(np.uint8)).float().to(device)

        return (states, actions, rewards, next_states, dones)

    def __len__(self):
        """Return the current size of internal memory."""
        return len(self.memory)


# ---- stand-in for gym's Pendulum-v0
class PendulumEnv:
    def __init__(self, max_speed=8.0, dt=0.05, g=10.0):
        self.max_speed, self.dt, self.g = max_speed, dt, g
        self.th, self.thdot = 0.0, 0.0

    def reset(self):
        self.th = np.random.uniform(-np.pi, np.pi)  # BREAK
        self.thdot = np.random.uniform(-1, 1)  # BREAK
        return self._obs()

    def _obs(self):
        return np.array([np.cos(self.th), np.sin(self.th), self.thdot], dtype=np.float32)  # BREAK

    def step(self, u):
        u = float(np.clip(u, -2, 2)[0])  # BREAK
        th_norm = ((self.th + np.pi) % (2 * np.pi)) - np.pi
        cost = th_norm ** 2 + .1 * self.thdot ** 2 + .001 * u ** 2
        self.thdot = np.clip(self.thdot + (-3 * self.g / 2 * np.sin(self.th + np.pi) + 3. * u) * self.dt,
                             -self.max_speed, self.max_speed)
        self.th = self.th + self.thdot * self.dt
        return self._obs(), -cost, False, {}


# ---- driver (the ddpg-pendulum training function)
def ddpg(env, n_episodes=2, max_t=30, print_every=1, random_seed=2):
    np.random.seed(random_seed)  # adaptation: seed the stand-in environment
    random.seed(random_seed)  # BREAK
    agent = Agent(state_size=3, action_size=1, random_seed=random_seed)
    scores_deque = deque(maxlen=print_every)
    scores = []
    for i_episode in range(1, n_episodes+1):
        state = env.reset()
        agent.reset()
        score = 0
        for t in range(max_t):
            action = agent.act(state)
            next_state, reward, done, _ = env.step(action)
            agent.step(state, action, reward, next_state, done)
            state = next_state
            score += reward
            if done:
                break
        scores_deque.append(score)
        scores.append(score)
        print('\rEpisode {}\tAverage Score: {:.2f}'.format(i_episode, np.mean(scores_deque)), end="")
    print()
    return torch.tensor(scores), sum(p.detach().sum() for p in agent.actor_local.parameters())


def target():
    torch.manual_seed(0)
    env = PendulumEnv()
    return [
        (ddpg, (env,), {}),
        (ddpg, (env,), {"n_episodes": 2, "max_t": 25, "random_seed": 7}),
    ]


EXPECT = ("extract: the actor/critic forwards and the learn step's loss math are graph-friendly, but the replay "
          "buffer (`random.sample`, `np.vstack` into `torch.from_numpy`), `act`'s `.cpu().data.numpy()` with "
          "NumPy OU noise and the environment loop are host-side glue that has to stay eager")
