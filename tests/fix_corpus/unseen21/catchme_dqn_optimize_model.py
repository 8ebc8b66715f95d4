"""One DQN update of the epsilon-greedy chaser agent from nicehiro/catch-me-if-you-can (`agent/e_greedy_agent.py`
`EGreedyAgent`, stored revision 184c8c9, one of three stored revisions; `net/dqn.py` `DQN`, stored revision d211bc1;
`utils.py` `ReplayMemory`, `Transition`, stored revision 184c8c9; the update follows the PyTorch DQN tutorial).
`optimize_model` returns `0.0` early while `len(self.memory) < self.batch_size`, samples with Python's
`random.sample`, transposes with `Transition(*zip(*transitions))`, builds the non-final mask with
`torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)))`, concatenates per-transition tensors made by
list comprehensions (`torch.cat([torch.tensor([s], dtype=torch.float) for s in batch.next_state if s is not None])`),
writes the target network's maxima into `q_next[non_final_mask]`, steps RMSprop and returns `loss.item()`.
Adaptations: the base class `MAEAgent` (from the author's `grid_world` package, not stored) is a minimal stand-in
that only records its constructor arguments; the environment is a `SimpleNamespace` with `action_space.n` (nothing
else of it is read). `act`, `save` and `restore` are kept but not called (`act` has a typo, `self.ep.s_end`, in this
revision; `save`/`restore` write/read files). Sizes: 4 features, 4 actions, replay capacity 32 filled in the factory
with the original `ReplayMemory.push` (some `next_state` are `None`), batch 8 and 6 (256 in the original); the hidden
widths 50 are the original's. The update changes the agent (RMSprop step), so each call gets its own agent built in
the factory; the called method is the original `EGreedyAgent.optimize_model`, passed unbound with the agent as its
first argument. Python's global `random` (the replay sample) is seeded in the factory only."""
import math
import random
from collections import namedtuple
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---- net/dqn.py
class DQN(nn.Module):
    """DQN net.
    Three fully connected hiden layer.
    """

    def __init__(self, features_n, outputs_n, layer1_kernels_n, layer2_kernels_n, layer3_kernels_n):
        super(DQN, self).__init__()
        self.layer1 = nn.Linear(features_n, layer1_kernels_n)
        self.layer2 = nn.Linear(layer1_kernels_n, layer2_kernels_n)
        self.layer3 = nn.Linear(layer2_kernels_n, layer3_kernels_n)
        self.layer4 = nn.Linear(layer3_kernels_n, outputs_n)

    def forward(self, x):
        x = F.relu(self.layer1(x))
        x = F.relu(self.layer2(x))
        x = F.relu(self.layer3(x))
        return self.layer4(x)


# ---- utils.py
Transition = namedtuple('Transition',
                        ('state', 'action', 'next_state', 'reward'))


class ReplayMemory(object):
    """Memory Replay list.
    """

    def __init__(self, capacity):
        self.capacity = capacity
        self.memory = []
        self.position = 0

    def push(self, *args):
        if len(self.memory) < self.capacity:
            self.memory.append(None)
        self.memory[self.position] = Transition(*args)
        self.position = (self.position + 1) % self.capacity

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)  # BREAK

    def __len__(self):
        return len(self.memory)


# ---- stand-in for grid_world.envs.MAEAgent (package not stored)
class MAEAgent(object):
    def __init__(self, pos, default_reward, color, env, name, default_type, default_value):
        self.pos = pos
        self.default_reward = default_reward
        self.color = color
        self.env = env
        self.name = name
        self.default_type = default_type
        self.default_value = default_value


# ---- agent/e_greedy_agent.py
class EGreedyAgent(MAEAgent):
    """Epsilon greedy agent.
    """

    def __init__(self,
                 default_reward,
                 name,
                 color,
                 env,
                 agent_type,
                 features_n,
                 memory_capacity,
                 init_value=0.0,
                 batch_size=256,
                 gamma=0.99,
                 eps_start=0.9,
                 eps_end=0.01,
                 eps_decay=50,
                 need_reload=False,
                 reload_path=None,
                 need_exploit=True):
        super(EGreedyAgent, self).__init__(
            (0, 0),
            default_reward=default_reward,
            color=color,
            env=env,
            name=name,
            default_type=agent_type,
            default_value=init_value
        )
        self.actions_n = env.action_space.n
        # discounted value
        self.gamma = gamma
        self.batch_size = batch_size
        self.eps_start = eps_start
        self.eps_end = eps_end
        self.eps_decay = eps_decay
        self.features_n = features_n
        self.memory_capacity = memory_capacity
        self.memory = ReplayMemory(self.memory_capacity)
        self.steps_count = 0
        self.device = 'cpu'
        # for evaluate Q_value
        self.policy_net = DQN(self.features_n, self.actions_n, 50, 50, 50)
        # evaluate Q_target
        self.target_net = DQN(self.features_n, self.actions_n, 50, 50, 50)
        if need_reload:
            self.restore(reload_path)
        # let target net has the same params as policy net
        self.target_net.eval()
        self.target_net.load_state_dict(self.policy_net.state_dict())
        self.optimizer = optim.RMSprop(self.policy_net.parameters(), lr=0.01)
        self.save_file_path = './model/'
        self.need_exploit = need_exploit

    def act(self, state):
        """Chose action greedily.
        """
        # Trans list state to tensor, shape is (1, 4)
        # [[1,2,3,4]]
        state = torch.FloatTensor([state])
        sample = random.random()
        # chose action randomly at the beginning, then slowly chose max Q_value
        eps_threhold = self.ep.s_end + (self.eps_start - self.eps_end) * \
            math.exp(-1. * self.steps_count / self.eps_decay) \
                if self.need_exploit else 0.01
        self.steps_count += 1
        if sample > eps_threhold:
            with torch.no_grad():
                return self.policy_net(state).max(1)[1].view(1, 1).item()
        else:
            return random.randrange(self.actions_n)

    def optimize_model(self):
        """
        Train model.
        """
        if len(self.memory) < self.batch_size:
            return 0.0
        transitions = self.memory.sample(self.batch_size)
        # batch is ([state], [action], [next_state], [reward])
        batch = Transition(*zip(*transitions))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None,
                                                batch.next_state)), device=self.device)
        non_final_next_states = torch.cat([torch.tensor([s], dtype=torch.float)
                                           for s in batch.next_state if s is not None])
        state_batch = torch.cat(
            [torch.tensor([s], dtype=torch.float) for s in batch.state])
        action_batch = torch.cat(
            [torch.tensor([[s]], dtype=torch.long) for s in batch.action])
        reward_batch = torch.cat(
            [torch.tensor([[s]], dtype=torch.float) for s in batch.reward])
        q_eval = self.policy_net(state_batch).gather(1, action_batch)
        q_next = torch.zeros(self.batch_size, device=self.device)
        q_next[non_final_mask] = self.target_net(
            non_final_next_states).max(1)[0].detach()
        q_target = (q_next * self.gamma) + reward_batch.squeeze()

        loss = F.mse_loss(q_eval, q_target.unsqueeze(1))
        self.optimizer.zero_grad()
        loss.backward()  # BREAK
        self.optimizer.step()  # BREAK
        return loss.item()  # BREAK

    def save(self, name):
        """
        Save trained model to model/`name.
        """
        torch.save(self.target_net.state_dict(), self.save_file_path + name)

    def restore(self, path):
        """
        Restore model from `path.
        """
        params = torch.load(path)
        self.target_net.load_state_dict(params)
        self.policy_net.load_state_dict(params)


def target():
    torch.manual_seed(0)
    random.seed(0)
    env = SimpleNamespace(action_space=SimpleNamespace(n=4))

    def make_agent(batch_size):
        agent = EGreedyAgent(default_reward=-1.0, name='chaser', color=(255, 0, 0), env=env, agent_type=1,
                             features_n=4, memory_capacity=32, batch_size=batch_size)
        for t in range(32):
            state = [random.random() for _ in range(4)]
            nxt = None if t % 5 == 4 else [random.random() for _ in range(4)]
            agent.memory.push(state, random.randrange(4), nxt, random.uniform(-1.0, 1.0))
        return agent

    a1 = make_agent(8)
    a2 = make_agent(6)
    return [
        (EGreedyAgent.optimize_model, (a1,), {}),
        (EGreedyAgent.optimize_model, (a2,), {}),
    ]


EXPECT = ("none: the update starts from host data (Python `random.sample` over a list of namedtuples, tuples of "
          "Python floats turned into tensors one transition at a time, a `map(lambda ...)` mask) and ends with an "
          "RMSprop step and `loss.item()`; only the Q-network arithmetic in the middle is graph work")
