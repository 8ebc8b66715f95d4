"""Quantile-regression DQN episodes from ShangtongZhang/DeepRL (`deep_rl/agent/QuantileRegressionDQN_agent.py`,
the stored revision with `episode(self, deterministic=False)`: `QuantileRegressionDQNAgent.__init__`, `huber`,
`evaluation_action`, `episode`). `episode` resets the task and loops `while True:` computing quantile values with
`self.network.predict(np.stack([...]))`, averaging them into action values with
`.sum(-1).cpu().detach().numpy().flatten()`, choosing the action by `np.argmax` (deterministic), by
`np.random.randint` while `self.total_steps < self.config.exploration_steps`, or by the epsilon-greedy policy's
`sample`; it steps the task, feeds the replay, and every `sgd_update_frequency` steps after exploration samples a
batch, builds the distributional target (`torch.max` over `q_next`, `gather` of the greedy action's quantiles,
`rewards.view(-1, 1) + discount * (1 - terminals.view(-1, 1)) * quantiles_next`), computes the quantile Huber loss
(`self.huber(diff) * (self.cumulative_density.view(1, -1) - (diff.detach() < 0).float()).abs()`) and steps the
optimizer; it calls `self.evaluate()`, copies the network into the target network every
`target_network_update_freq` steps, updates epsilon, breaks on `done`, and logs the episode time with
`self.config.logger.debug('... %d ... %f ... %f' % (...))`.
Adaptations: the library pieces the agent imports with `from ..network import *` etc. were not opened and are
stand-ins written from the collector's knowledge of the DeepRL revision of that time: `BaseAgent` (its `evaluate`
is a no-op here), `Config`, a `QuantileNet` (an MLP with `predict` and `tensor` as DeepRL's `BaseNet`), the list
`Replay` (`feed`, `sample` by `np.random.randint` indices and `zip(*sampled_data)`), `GreedyPolicy` (linear epsilon
decay, `np.random.rand()` test) and a small deterministic NumPy chain task replacing the gym task (gym is not
installed). Sizes are shrunk (4-d states, 2 actions, 8 quantiles, a 16-unit network, episodes of at most 25 steps).
The called function `run_episodes` is the collector's driver (the original's `run_episodes` loop in `utils`, not
opened): it seeds NumPy and torch, builds the agent from the config (so that a call repeats exactly), runs
`num_episodes` training episodes and one deterministic episode, and returns the rewards, step counts, the final
network output on a fixed state and the greedy evaluation action."""
import logging
import time

import numpy as np
import torch
import torch.nn as nn


# ---- stand-ins for deep_rl.network / component / utils / BaseAgent
class BaseAgent:
    def __init__(self, config):
        self.config = config

    def evaluate(self):
        pass


class Config:
    def __init__(self):
        self.task_fn = None
        self.network_fn = None
        self.optimizer_fn = None
        self.replay_fn = None
        self.policy_fn = None
        self.state_normalizer = lambda x: x
        self.reward_normalizer = lambda x: x
        self.discount = 0.99
        self.num_quantiles = 8
        self.exploration_steps = 10
        self.sgd_update_frequency = 2
        self.target_network_update_freq = 20
        self.logger = logging.getLogger('deeprl')


class QuantileNet(nn.Module):
    def __init__(self, state_dim, action_dim, num_quantiles, hidden=16):
        super(QuantileNet, self).__init__()  # BREAK
        self.action_dim = action_dim
        self.num_quantiles = num_quantiles
        self.body = nn.Sequential(nn.Linear(state_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())  # BREAK
        self.fc_head = nn.Linear(hidden, action_dim * num_quantiles)

    def tensor(self, x):
        if isinstance(x, torch.Tensor):
            return x
        x = torch.tensor(np.asarray(x), dtype=torch.float32)
        return x

    def predict(self, x):
        x = self.tensor(x)
        y = self.fc_head(self.body(x))
        return y.view((-1, self.action_dim, self.num_quantiles))


class Replay:
    def __init__(self, memory_size, batch_size):
        self.memory_size = memory_size
        self.batch_size = batch_size
        self.data = []
        self.pos = 0

    def feed(self, experience):
        if self.pos >= len(self.data):
            self.data.append(experience)
        else:
            self.data[self.pos] = experience
        self.pos = (self.pos + 1) % self.memory_size

    def sample(self):
        sampled_indices = [np.random.randint(0, len(self.data)) for _ in range(self.batch_size)]  # BREAK
        sampled_data = [self.data[ind] for ind in sampled_indices]
        batch_data = list(map(lambda x: np.asarray(x), zip(*sampled_data)))
        return batch_data


class GreedyPolicy:
    def __init__(self, epsilon, final_step, min_epsilon):
        self.init_epsilon = epsilon
        self.current_epsilon = epsilon
        self.min_epsilon = min_epsilon
        self.final_step = final_step

    def sample(self, action_value):
        if np.random.rand() < self.current_epsilon:  # BREAK
            return np.random.randint(0, len(action_value))  # BREAK
        return np.argmax(action_value)

    def update_epsilon(self):
        diff = float(self.init_epsilon - self.min_epsilon) / self.final_step
        self.current_epsilon = max(self.min_epsilon, self.current_epsilon - diff)


class ChainTask:
    """Stand-in for the gym task: a noisy 1-d chain observed through 4 features; reward at the right end."""
    def __init__(self, length=6, max_steps=25):
        self.state_dim = 4
        self.action_dim = 2
        self.length = length
        self.max_steps = max_steps

    def _obs(self):
        p = self.pos / self.length
        return np.array([p, 1.0 - p, np.sin(3 * p), self.t / self.max_steps], dtype=np.float32)  # BREAK

    def reset(self):
        self.pos = 1
        self.t = 0
        return self._obs()

    def step(self, action):
        self.t += 1
        self.pos = min(self.length, max(0, self.pos + (1 if action == 1 else -1)))
        reward = 1.0 if self.pos == self.length else -0.05
        done = self.pos == self.length or self.t >= self.max_steps
        return self._obs(), reward, done, {}


# ---- deep_rl/agent/QuantileRegressionDQN_agent.py
class QuantileRegressionDQNAgent(BaseAgent):
    def __init__(self, config):
        BaseAgent.__init__(self, config)
        self.config = config
        self.task = config.task_fn()
        self.network = config.network_fn(self.task.state_dim, self.task.action_dim)
        self.target_network = config.network_fn(self.task.state_dim, self.task.action_dim)
        self.optimizer = config.optimizer_fn(self.network.parameters())  # BREAK
        self.criterion = nn.MSELoss()
        self.target_network.load_state_dict(self.network.state_dict())
        self.replay = config.replay_fn()
        self.policy = config.policy_fn()
        self.total_steps = 0
        self.quantile_weight = 1.0 / self.config.num_quantiles
        self.cumulative_density = self.network.tensor(
            (2 * np.arange(self.config.num_quantiles) + 1) / (2.0 * self.config.num_quantiles))

    def huber(self, x):
        cond = (x.abs() < 1.0).float().detach()
        return 0.5 * x.pow(2) * cond + (x.abs() - 0.5) * (1 - cond)

    def evaluation_action(self, state):
        value = self.network.predict(np.stack([self.config.state_normalizer(state)])).squeeze(0).detach()
        value = (value * self.quantile_weight).sum(-1).cpu().detach().numpy().flatten()
        return np.argmax(value)

    def episode(self, deterministic=False):
        episode_start_time = time.time()  # BREAK
        state = self.task.reset()
        total_reward = 0.0
        steps = 0
        while True:
            value = self.network.predict(np.stack([self.config.state_normalizer(state)])).squeeze(0).detach()
            value = (value * self.quantile_weight).sum(-1).cpu().detach().numpy().flatten()
            if deterministic:
                action = np.argmax(value)
            elif self.total_steps < self.config.exploration_steps:
                action = np.random.randint(0, len(value))  # BREAK
            else:
                action = self.policy.sample(value)
            next_state, reward, done, _ = self.task.step(action)
            total_reward += reward
            reward = self.config.reward_normalizer(reward)
            if not deterministic:
                self.replay.feed([state, action, reward, next_state, int(done)])
                self.total_steps += 1
            steps += 1
            state = next_state

            if not deterministic and self.total_steps > self.config.exploration_steps \
                    and self.total_steps % self.config.sgd_update_frequency == 0:
                experiences = self.replay.sample()
                states, actions, rewards, next_states, terminals = experiences
                states = self.config.state_normalizer(states)
                next_states = self.config.state_normalizer(next_states)

                quantiles_next = self.target_network.predict(next_states).detach()
                q_next = (quantiles_next * self.quantile_weight).sum(-1)
                _, a_next = torch.max(q_next, dim=1)
                a_next = a_next.view(-1, 1, 1).expand(-1, -1, quantiles_next.size(2))
                quantiles_next = quantiles_next.gather(1, a_next).squeeze(1)

                rewards = self.network.tensor(rewards)
                terminals = self.network.tensor(terminals)
                quantiles_next = rewards.view(-1, 1) + self.config.discount * (1 - terminals.view(-1, 1)) * quantiles_next

                quantiles = self.network.predict(states)
                actions = self.network.tensor(actions).long()
                actions = actions.view(-1, 1, 1).expand(-1, -1, quantiles.size(2))
                quantiles = quantiles.gather(1, actions).squeeze(1)

                quantiles_next = quantiles_next.t().unsqueeze(-1)
                diff = quantiles_next - quantiles
                loss = self.huber(diff) * (self.cumulative_density.view(1, -1) - (diff.detach() < 0).float()).abs()

                self.optimizer.zero_grad()
                loss.mean(0).mean(1).sum().backward()
                self.optimizer.step()  # BREAK

            self.evaluate()
            if not deterministic and self.total_steps % self.config.target_network_update_freq == 0:
                self.target_network.load_state_dict(self.network.state_dict())
            if not deterministic and self.total_steps > self.config.exploration_steps:
                self.policy.update_epsilon()

            if done:
                break

        episode_time = time.time() - episode_start_time
        self.config.logger.debug('episode steps %d, episode time %f, time per step %f' %
                          (steps, episode_time, episode_time / float(steps)))
        return total_reward, steps


def make_config(num_quantiles=8, lr=1e-3, chain_length=6, batch_size=8):
    config = Config()
    config.num_quantiles = num_quantiles
    config.task_fn = lambda: ChainTask(length=chain_length)
    config.network_fn = lambda state_dim, action_dim: QuantileNet(state_dim, action_dim, num_quantiles)
    config.optimizer_fn = lambda params: torch.optim.RMSprop(params, lr=lr)  # BREAK
    config.replay_fn = lambda: Replay(memory_size=1000, batch_size=batch_size)
    config.policy_fn = lambda: GreedyPolicy(epsilon=1.0, final_step=40, min_epsilon=0.1)
    return config


def run_episodes(config, seed, num_episodes=3):
    """Collector's driver: seeds, builds the agent, runs training episodes and one deterministic episode."""
    np.random.seed(seed)
    torch.manual_seed(seed)  # BREAK
    agent = QuantileRegressionDQNAgent(config)
    rewards, steps = [], []
    for ep in range(num_episodes):
        reward, step = agent.episode()
        rewards.append(reward)
        steps.append(step)
    test_reward, test_steps = agent.episode(deterministic=True)
    probe = np.array([0.5, 0.5, np.sin(1.5), 0.0], dtype=np.float32)
    final_quantiles = agent.network.predict(np.stack([probe])).detach()
    return (torch.tensor(rewards), torch.tensor(steps), test_reward, test_steps, final_quantiles,
            int(agent.evaluation_action(probe)))


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    return [
        (run_episodes, (make_config(), 1), {}),
        (run_episodes, (make_config(num_quantiles=4, lr=3e-3, chain_length=5, batch_size=6), 2),
         {"num_episodes": 2}),
    ]


EXPECT = ("extract: the episode loop is NumPy/replay/gym glue (`predict(np.stack(...))`, `.cpu().numpy()` "
          "action values, `np.random` exploration, the task's `step`, replay `feed`/`sample`, `time.time()` "
          "and the logger); only the quantile-target and Huber-loss block is tensor work, and it sits between "
          "a NumPy replay sample and the optimizer step, so the right fix moves that block into a helper that "
          "compiles and leaves the loop eager")
