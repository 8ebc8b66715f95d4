"""The rollout storage of an A2C/PPO/ACKTR implementation: `compute_returns` with `use_gae` and
`use_proper_time_limits` writes `self.value_preds[-1] = next_value`, then runs the GAE recursion in a reversed Python
loop over the steps (`gae = 0` starting as a Python int, `delta = self.rewards[step] + gamma * self.value_preds[step +
1] * self.masks[step + 1] - self.value_preds[step]`, `gae = gae * self.bad_masks[step + 1]`,
`self.returns[step] = gae + self.value_preds[step]`: in-place writes into tensors held by a plain Python object), and
the PPO update then normalises the advantages with `(advantages - advantages.mean()) / (advantages.std() + 1e-5)`
(ikostrikov/pytorch-a2c-ppo-acktr-gail a2c_ppo_acktr/storage.py: `_flatten_helper`, `RolloutStorage.__init__/insert/
compute_returns`, the `action_space.__class__.__name__ == 'Discrete'` test; a2c_ppo_acktr/algo/ppo.py: the advantage
lines of `PPO.update`; main.py: the `next_value = actor_critic.get_value(...)` / `rollouts.compute_returns(...)`
step).
Adaptations: there are no environments or actor-critic network; the call fills the storage with `insert` from given
per-step tensors (4 processes, 6 steps, observation shape (3,)), the last value estimate `next_value` is given, and
the action space is a stand-in class named `Discrete`. Each call builds its own `RolloutStorage` (the storage is
written in place), returns `(returns, advantages)` and leaves no state behind. Expected control: no break."""
import torch


def _flatten_helper(T, N, _tensor):
    return _tensor.view(T * N, *_tensor.size()[2:])


class Discrete(object):
    """Stand-in for gym.spaces.Discrete (only the class name and `n` are read)."""

    def __init__(self, n):
        self.n = n


class RolloutStorage(object):
    def __init__(self, num_steps, num_processes, obs_shape, action_space,
                 recurrent_hidden_state_size):
        self.obs = torch.zeros(num_steps + 1, num_processes, *obs_shape)
        self.recurrent_hidden_states = torch.zeros(
            num_steps + 1, num_processes, recurrent_hidden_state_size)
        self.rewards = torch.zeros(num_steps, num_processes, 1)
        self.value_preds = torch.zeros(num_steps + 1, num_processes, 1)
        self.returns = torch.zeros(num_steps + 1, num_processes, 1)
        self.action_log_probs = torch.zeros(num_steps, num_processes, 1)
        if action_space.__class__.__name__ == 'Discrete':
            action_shape = 1
        else:
            action_shape = action_space.shape[0]
        self.actions = torch.zeros(num_steps, num_processes, action_shape)
        if action_space.__class__.__name__ == 'Discrete':
            self.actions = self.actions.long()
        self.masks = torch.ones(num_steps + 1, num_processes, 1)

        # Masks that indicate whether it's a true terminal state
        # or time limit end state
        self.bad_masks = torch.ones(num_steps + 1, num_processes, 1)

        self.num_steps = num_steps
        self.step = 0

    def insert(self, obs, recurrent_hidden_states, actions, action_log_probs,
               value_preds, rewards, masks, bad_masks):
        self.obs[self.step + 1].copy_(obs)
        self.recurrent_hidden_states[self.step +
                                     1].copy_(recurrent_hidden_states)
        self.actions[self.step].copy_(actions)
        self.action_log_probs[self.step].copy_(action_log_probs)
        self.value_preds[self.step].copy_(value_preds)
        self.rewards[self.step].copy_(rewards)
        self.masks[self.step + 1].copy_(masks)
        self.bad_masks[self.step + 1].copy_(bad_masks)

        self.step = (self.step + 1) % self.num_steps

    def compute_returns(self,
                        next_value,
                        use_gae,
                        gamma,
                        gae_lambda,
                        use_proper_time_limits=True):
        if use_proper_time_limits:
            if use_gae:
                self.value_preds[-1] = next_value
                gae = 0
                for step in reversed(range(self.rewards.size(0))):  # NO BREAK in torch 2.13
                    delta = self.rewards[step] + gamma * self.value_preds[
                        step + 1] * self.masks[step +
                                               1] - self.value_preds[step]
                    gae = delta + gamma * gae_lambda * self.masks[step +
                                                                  1] * gae
                    gae = gae * self.bad_masks[step + 1]
                    self.returns[step] = gae + self.value_preds[step]
            else:
                self.returns[-1] = next_value
                for step in reversed(range(self.rewards.size(0))):
                    self.returns[step] = (self.returns[step + 1] * \
                        gamma * self.masks[step + 1] + self.rewards[step]) * self.bad_masks[step + 1] \
                        + (1 - self.bad_masks[step + 1]) * self.value_preds[step]
        else:
            if use_gae:
                self.value_preds[-1] = next_value
                gae = 0
                for step in reversed(range(self.rewards.size(0))):
                    delta = self.rewards[step] + gamma * self.value_preds[
                        step + 1] * self.masks[step +
                                               1] - self.value_preds[step]
                    gae = delta + gamma * gae_lambda * self.masks[step +
                                                                  1] * gae
                    self.returns[step] = gae + self.value_preds[step]
            else:
                self.returns[-1] = next_value
                for step in reversed(range(self.rewards.size(0))):
                    self.returns[step] = self.returns[step + 1] * \
                        gamma * self.masks[step + 1] + self.rewards[step]


def returns_and_advantages(num_steps, num_processes, steps, next_value, gamma, gae_lambda):
    rollouts = RolloutStorage(num_steps, num_processes, (3,), Discrete(2), 1)
    for obs, actions, action_log_probs, value_preds, rewards, masks, bad_masks in steps:
        rollouts.insert(obs, torch.zeros(num_processes, 1), actions, action_log_probs,
                        value_preds, rewards, masks, bad_masks)
    rollouts.compute_returns(next_value, True, gamma, gae_lambda, True)

    advantages = rollouts.returns[:-1] - rollouts.value_preds[:-1]
    advantages = (advantages - advantages.mean()) / (
        advantages.std() + 1e-5)
    return rollouts.returns, _flatten_helper(num_steps, num_processes, advantages)


def _steps(gen, num_steps, num_processes):
    out = []
    for t in range(num_steps):
        obs = torch.randn(num_processes, 3, generator=gen)
        actions = torch.randint(0, 2, (num_processes, 1), generator=gen)
        action_log_probs = -torch.rand(num_processes, 1, generator=gen)
        value_preds = torch.randn(num_processes, 1, generator=gen)
        rewards = torch.rand(num_processes, 1, generator=gen)
        done = torch.rand(num_processes, 1, generator=gen) < 0.2
        masks = (~done).float()
        bad_masks = torch.where(done & (torch.rand(num_processes, 1, generator=gen) < 0.5),
                                torch.zeros(num_processes, 1), torch.ones(num_processes, 1))
        out.append((obs, actions, action_log_probs, value_preds, rewards, masks, bad_masks))
    return out


def target():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    steps1 = _steps(gen, 6, 4)
    steps2 = _steps(gen, 6, 4)
    next_value1 = torch.randn(4, 1, generator=gen)
    next_value2 = torch.randn(4, 1, generator=gen)
    return [
        (returns_and_advantages, (6, 4, steps1, next_value1, 0.99, 0.95), {}),
        (returns_and_advantages, (6, 4, steps2, next_value2, 0.99, 0.95), {}),
    ]


EXPECT = ("none: control, expected not to break (the reversed step loop unrolls over a fixed range, the Python-int "
          "`gae = 0` becomes a tensor after the first step, and the in-place writes into the storage's tensors "
          "trace)")
