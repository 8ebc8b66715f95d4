"""DQN replay update from sweetice/Deep-reinforcement-learning-with-pytorch (`Char01 DQN/DQN_CartPole-v0.py`,
stored revision 2ad8b9f: `Net`, `DQN.select_action`, `DQN.store_transition`, `DQN.update`, the `Transition`
namedtuple and the module-level environment constants). `DQN.update` checks the Python counter `memory_count`
against the capacity, builds tensors from list comprehensions over the namedtuple replay memory
(`torch.tensor([t.state for t in self.memory])`, `torch.LongTensor([...])`), normalises the rewards, computes the
target under `torch.no_grad()`, and loops over `BatchSampler(SubsetRandomSampler(range(len(self.memory))), ...)`
index lists: gather, MSE loss, Adam step, `self.writer.add_scalar('loss/value_loss', loss, self.update_count)`, a
Python step counter and, every 100 updates, `self.target_net.load_state_dict(self.act_net.state_dict())`.
Adaptations: gym and tensorboardX are not installed, so the module-level `env = gym.make('CartPole-v0').unwrapped`
is a stand-in (`CartPoleStandIn`: a NumPy random walk with the same `reset`/`step`/`observation_space`/
`action_space` interface, four state numbers and two actions) and `SummaryWriter` is a stand-in that records its
`add_scalar` calls in a list; `matplotlib`/`pickle`/`argparse` imports and the `main()` episode loop are left out.
The class constants are shrunk (`capacity` 8000 -> 64, `batch_size` 256 -> 16), and `update` ends its training
branch with `return loss` (the original returns nothing; the added line makes the calls' outputs comparable).
The agents are built in the factory, whose driver fills their replay memories with `select_action`/
`store_transition` steps on the stand-in environment, as `main()` does; the second agent is a copy of the first with
more transitions stored and its `update_count` at 98 (so its update reaches the target-network copy). `update`
trains the agent, so a call repeats exactly only on a fresh copy. Randomness: `SubsetRandomSampler` draws from
torch's global generator, seeded in the factory."""
from collections import namedtuple
from itertools import count

import copy
import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Normal, Categorical
from torch.utils.data.sampler import BatchSampler, SubsetRandomSampler


# ---- stand-ins for gym and tensorboardX (not installed)
class _Space(object):
    def __init__(self, shape=None, n=None):
        self.shape = shape
        self.n = n


class CartPoleStandIn(object):
    """Stand-in for gym.make('CartPole-v0').unwrapped: a NumPy random walk with the same interface."""
    def __init__(self):
        self.observation_space = _Space(shape=(4,))
        self.action_space = _Space(n=2)
        self.rng = np.random.RandomState(0)
        self.state = None

    def seed(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state

    def step(self, action):
        push = 0.1 if action == 1 else -0.1
        self.state = self.state + np.array([self.state[1], push, self.state[3], -push]) * 0.5 \
            + self.rng.normal(0, 0.01, size=4)
        done = bool(abs(self.state[0]) > 0.5 or abs(self.state[2]) > 0.5)
        return self.state, 1.0, done, {}


class SummaryWriter(object):
    """Stand-in for tensorboardX.SummaryWriter: records add_scalar calls."""
    def __init__(self, logdir=None):
        self.logdir = logdir
        self.records = []

    def add_scalar(self, tag, value, global_step=None):
        self.records.append((tag, value, global_step))


# Hyper-parameters
seed = 1
render = False
num_episodes = 2000
env = CartPoleStandIn()
num_state = env.observation_space.shape[0]
num_action = env.action_space.n
torch.manual_seed(seed)
env.seed(seed)

Transition = namedtuple('Transition', ['state', 'action', 'reward', 'next_state'])

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(num_state, 100)
        self.fc2 = nn.Linear(100, num_action)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        action_value = self.fc2(x)
        return action_value

class DQN():

    capacity = 64
    learning_rate = 1e-3
    memory_count = 0
    batch_size = 16
    gamma = 0.995
    update_count = 0

    def __init__(self):
        super(DQN, self).__init__()
        self.target_net, self.act_net = Net(), Net()
        self.memory = [None]*self.capacity
        self.optimizer = optim.Adam(self.act_net.parameters(), self.learning_rate)
        self.loss_func = nn.MSELoss()
        self.writer = SummaryWriter('./DQN/logs')


    def select_action(self,state):
        state = torch.tensor(state, dtype=torch.float).unsqueeze(0)
        value = self.act_net(state)
        action_max_value, index = torch.max(value, 1)
        action = index.item()
        if np.random.rand(1) >= 0.9: # epslion greedy
            action = np.random.choice(range(num_action), 1).item()
        return action

    def store_transition(self,transition):
        index = self.memory_count % self.capacity
        self.memory[index] = transition
        self.memory_count += 1
        return self.memory_count >= self.capacity

    def update(self):
        if self.memory_count >= self.capacity:
            state = torch.tensor([t.state for t in self.memory]).float()
            action = torch.LongTensor([t.action for t in self.memory]).view(-1,1).long()
            reward = torch.tensor([t.reward for t in self.memory]).float()
            next_state = torch.tensor([t.next_state for t in self.memory]).float()

            reward = (reward - reward.mean()) / (reward.std() + 1e-7)
            with torch.no_grad():
                target_v = reward + self.gamma * self.target_net(next_state).max(1)[0]

            #Update...
            for index in BatchSampler(SubsetRandomSampler(range(len(self.memory))), batch_size=self.batch_size, drop_last=False):  # BREAK
                v = (self.act_net(state).gather(1, action))[index]
                loss = self.loss_func(target_v[index].unsqueeze(1), (self.act_net(state).gather(1, action))[index])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()  # BREAK
                self.writer.add_scalar('loss/value_loss', loss, self.update_count)
                self.update_count +=1
                if self.update_count % 100 ==0:
                    self.target_net.load_state_dict(self.act_net.state_dict())
            return loss
        else:
            print("Memory Buff is too less")


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    env.seed(seed)
    agent = DQN()

    def fill(agent, n):
        state = env.reset()
        for _ in range(n):
            action = agent.select_action(state)
            next_state, reward, done, info = env.step(action)
            agent.store_transition(Transition(state, action, reward, next_state))
            state = env.reset() if done else next_state

    fill(agent, agent.capacity)
    agent2 = copy.deepcopy(agent)
    fill(agent2, 20)
    agent2.update_count = 98
    return [
        (DQN.update, (agent,), {}),
        (DQN.update, (agent2,), {}),
    ]


EXPECT = ("extract: the replay-memory tensor building (list comprehensions over namedtuples), the sampler loop, the "
          "optimizer step, the writer call and the periodic load_state_dict are eager glue around the compilable "
          "Q-value/target/loss computation")
