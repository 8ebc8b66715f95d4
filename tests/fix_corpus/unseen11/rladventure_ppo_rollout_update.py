"""One PPO iteration for continuous control: vectorised rollout, GAE and minibatch updates from a generator
(higgsfield/RL-Adventure-2, `3.ppo.ipynb`: `ActorCritic`, `init_weights`, `compute_gae`, `ppo_iter`, `ppo_update`
and the body of the `while frame_idx < max_frames and not early_stop:` training loop). The rollout converts the
NumPy observations with `torch.FloatTensor(state)`, samples from a `Normal` policy, steps the environments with
`action.cpu().numpy()`, accumulates `entropy += dist.entropy().mean()` starting from the int `0`, and appends
`torch.FloatTensor(reward).unsqueeze(1)` / `torch.FloatTensor(1 - done).unsqueeze(1)` to Python lists;
`compute_gae` runs a reversed Python loop over the lists (`values + [next_value]`, `gae = 0`,
`returns.insert(0, ...)`); `ppo_iter` is a generator that draws `np.random.randint(0, batch_size, mini_batch_size)`
per minibatch and yields NumPy-indexed slices; `ppo_update` loops over epochs and the generator, computes the
clipped surrogate and value losses and runs `zero_grad`/`backward`/`step`.
Provenance note: the repository itself is not in the stored index; the code was read from a port whose header says
it was "modified from https://github.com/higgsfield/RL-Adventure-2/blob/master/3.ppo.ipynb" (its `compute_gae`,
`ppo_iter`, `ppo_update` with `model`/`optimizer` passed explicitly, and the loop body), and `ActorCritic`/
`init_weights` from another copy of the notebook's code found by code search (that copy adds an `nn.Tanh()` after
the actor's last layer; the notebook's form, without it, is used here).
Adaptations: gym's `Pendulum-v0` behind `SubprocVecEnv` (not installed; subprocesses) is a minimal NumPy stand-in
(`VecPendulum`: pendulum dynamics for several environments, `reset`/`step` returning observations, rewards, done
flags and infos, auto-resetting finished environments like `SubprocVecEnv`'s worker); the loop body becomes the
function `ppo_iteration` (the periodic `test_env` evaluation, the frame counter and `early_stop` are left out);
`device` is the CPU. The policy samples from torch's generator and `ppo_iter` from NumPy's, so the called function
(`run_iteration`, an adaptation) restores the model, optimizer and environments from copies taken in the factory
and seeds torch and NumPy first (`reset_`). The two calls use different environment counts, rollout lengths,
minibatch sizes and epochs."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions import Normal


class VecPendulum:
    """Adaptation: NumPy stand-in for SubprocVecEnv([make_env('Pendulum-v0')] * num_envs)."""

    def __init__(self, num_envs, horizon, seed):
        self.num_envs = num_envs
        self.horizon = horizon
        self.rng = np.random.RandomState(seed)
        self.th = np.zeros(num_envs)
        self.thdot = np.zeros(num_envs)
        self.t = np.zeros(num_envs, dtype=np.int64)

    def _obs(self):
        return np.stack([np.cos(self.th), np.sin(self.th), self.thdot], axis=1)

    def _reset_idx(self, idx):
        self.th[idx] = self.rng.uniform(-np.pi, np.pi, size=len(idx))  # BREAK
        self.thdot[idx] = self.rng.uniform(-1, 1, size=len(idx))  # BREAK
        self.t[idx] = 0

    def reset(self):
        self._reset_idx(np.arange(self.num_envs))
        return self._obs()

    def step(self, actions):
        u = np.clip(actions.reshape(self.num_envs), -2.0, 2.0)
        th_norm = ((self.th + np.pi) % (2 * np.pi)) - np.pi
        reward = -(th_norm ** 2 + 0.1 * self.thdot ** 2 + 0.001 * u ** 2)
        self.thdot = np.clip(self.thdot + (-3 * 10.0 / 2 * np.sin(self.th + np.pi) + 3.0 * u) * 0.05, -8, 8)
        self.th = self.th + self.thdot * 0.05
        self.t += 1
        done = self.t >= self.horizon
        obs = self._obs()
        if done.any():
            self._reset_idx(np.nonzero(done)[0])
            obs = self._obs()
        return obs, reward, done, [{} for _ in range(self.num_envs)]


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, mean=0., std=0.1)
        nn.init.constant_(m.bias, 0.1)


class ActorCritic(nn.Module):
    def __init__(self, num_inputs, num_outputs, hidden_size, std=0.0):
        super(ActorCritic, self).__init__()

        self.critic = nn.Sequential(
            nn.Linear(num_inputs, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, 1)
        )

        self.actor = nn.Sequential(
            nn.Linear(num_inputs, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, num_outputs),
        )
        self.log_std = nn.Parameter(torch.ones(1, num_outputs) * std)

        self.apply(init_weights)

    def forward(self, x):
        value = self.critic(x)
        mu    = self.actor(x)
        std   = self.log_std.exp().expand_as(mu)
        dist  = Normal(mu, std)
        return dist, value


def compute_gae(next_value, rewards, masks, values, gamma=0.99, tau=0.95):
    values = values + [next_value]
    gae = 0
    returns = []
    for step in reversed(range(len(rewards))):
        delta = rewards[step] + gamma * values[step + 1] * masks[step] - values[step]
        gae = delta + gamma * tau * masks[step] * gae
        returns.insert(0, gae + values[step])
    return returns


def ppo_iter(mini_batch_size, states, actions, log_probs, returns, advantage):
    batch_size = states.size(0)
    for _ in range(batch_size // mini_batch_size):
        rand_ids = np.random.randint(0, batch_size, mini_batch_size)
        yield states[rand_ids, :], actions[rand_ids, :], log_probs[rand_ids, :], returns[rand_ids, :], advantage[rand_ids, :]


def ppo_update(model, optimizer, ppo_epochs, mini_batch_size, states, actions, log_probs, returns, advantages, clip_param=0.2):
    for _ in range(ppo_epochs):
        for state, action, old_log_probs, return_, advantage in ppo_iter(mini_batch_size, states, actions, log_probs,
                                                                         returns, advantages):
            dist, value = model(state)
            entropy = dist.entropy().mean()
            new_log_probs = dist.log_prob(action)

            ratio = (new_log_probs - old_log_probs).exp()
            surr1 = ratio * advantage
            surr2 = torch.clamp(ratio, 1.0 - clip_param, 1.0 + clip_param) * advantage

            actor_loss = - torch.min(surr1, surr2).mean()
            critic_loss = (return_ - value).pow(2).mean()

            loss = 0.5 * critic_loss + actor_loss - 0.001 * entropy

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def ppo_iteration(model, optimizer, envs, state, num_steps, mini_batch_size, ppo_epochs, device):
    log_probs = []
    values = []
    states = []
    actions = []
    rewards = []
    masks = []
    entropy = 0

    for _ in range(num_steps):
        state = torch.FloatTensor(state).to(device)
        dist, value = model(state)

        action = dist.sample()
        next_state, reward, done, _ = envs.step(action.cpu().numpy())

        log_prob = dist.log_prob(action)
        entropy += dist.entropy().mean()

        log_probs.append(log_prob)
        values.append(value)
        rewards.append(torch.FloatTensor(reward).unsqueeze(1).to(device))
        masks.append(torch.FloatTensor(1 - done).unsqueeze(1).to(device))

        states.append(state)
        actions.append(action)

        state = next_state

    next_state = torch.FloatTensor(next_state).to(device)
    _, next_value = model(next_state)
    returns = compute_gae(next_value, rewards, masks, values)

    returns = torch.cat(returns).detach()
    log_probs = torch.cat(log_probs).detach()
    values = torch.cat(values).detach()
    states = torch.cat(states)
    actions = torch.cat(actions)
    advantage = returns - values

    ppo_update(model, optimizer, ppo_epochs, mini_batch_size, states, actions, log_probs, returns, advantage)
    return state, entropy, returns


def reset_(model, optimizer, model_state, opt_state, envs, env_state):
    """Adaptation: restore model/optimizer/environments and seed torch and NumPy so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)  # BREAK
    envs.__dict__.update(copy.deepcopy(env_state))  # BREAK
    torch.manual_seed(0)
    np.random.seed(0)


def run_iteration(model, optimizer, model_state, opt_state, envs, env_state, num_steps, mini_batch_size, ppo_epochs):
    reset_(model, optimizer, model_state, opt_state, envs, env_state)
    state = envs.reset()
    state, entropy, returns = ppo_iteration(model, optimizer, envs, state, num_steps, mini_batch_size, ppo_epochs,
                                            torch.device("cpu"))
    return model.actor[2].weight.detach().clone(), entropy, returns


def target():
    torch.manual_seed(0)
    model = ActorCritic(3, 1, 16)
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())
    envs1 = VecPendulum(4, horizon=6, seed=1)
    envs2 = VecPendulum(3, horizon=5, seed=2)
    env_state1 = copy.deepcopy(envs1.__dict__)
    env_state2 = copy.deepcopy(envs2.__dict__)
    return [
        (run_iteration, (model, optimizer, model_state, opt_state, envs1, env_state1, 8, 8, 2), {}),
        (run_iteration, (model, optimizer, model_state, opt_state, envs2, env_state2, 7, 5, 3), {}),
    ]


EXPECT = ("caller: the rollout steps a NumPy environment on the host (`action.cpu().numpy()`, `torch.FloatTensor(...)` "
          "of its outputs) and `ppo_iter` draws NumPy indices per minibatch; the policy/value forward and the PPO "
          "loss are the compilable parts, so the environment loop and the update loop stay with the caller")
