"""Episodes of discrete PPO with a Monte Carlo return update, from nikhilbarhate99/PPO-PyTorch (`PPO.py`, an early
revision: `Memory`, `ActorCritic.act`/`evaluate`, `PPO.update`, `main`'s training loop). `ActorCritic.act` turns
the NumPy state into a tensor with `torch.from_numpy(state).float()`, samples a `Categorical`, appends the state,
action and log-probability tensors to the `Memory` lists and returns `action.item()`; `forward` raises
`NotImplementedError`. `PPO.update` builds discounted returns in a Python loop over `reversed(memory.rewards)`
(`rewards.insert(0, ...)`), `torch.tensor(rewards)`, normalises with `rewards.std() + 1e-5`, `torch.stack`s the
memory lists, and runs `K_epochs` of the clipped surrogate with `MseLoss` and an entropy bonus, `loss.mean()
.backward()`, then copies the policy into `policy_old` with `load_state_dict`. `main` steps the environment with
`ppo.policy_old.act(state, memory)`, appends rewards, updates every `update_timestep` steps (`memory.clear_memory()`
deletes the list contents with `del ...[:]`), breaks on `done`, stops when `running_reward > log_interval *
solved_reward` and logs `int(...)` averages every `log_interval` episodes with `str.format`. Adaptations: gym's
LunarLander is a deterministic NumPy `ToyEnv` (4-dim state, 4 actions); the hyperparameters are small and passed in;
the solved checkpoint `torch.save` is a list append. So that a call repeats, the called function `main` restores
both networks and the optimiser from the factory's copies (`reset_`), clears the memory and seeds torch (the
original's `random_seed` branch); it returns the running reward, the episode count and the last policy weights'
sum."""
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


class Memory:
    def __init__(self):
        self.actions = []
        self.states = []
        self.logprobs = []
        self.rewards = []

    def clear_memory(self):
        del self.actions[:]
        del self.states[:]
        del self.logprobs[:]
        del self.rewards[:]


class ActorCritic(nn.Module):
    def __init__(self, state_dim, action_dim, n_latent_var):
        super(ActorCritic, self).__init__()
        self.affine = nn.Linear(state_dim, n_latent_var)

        # actor
        self.action_layer = nn.Sequential(
                nn.Linear(state_dim, n_latent_var),
                nn.Tanh(),
                nn.Linear(n_latent_var, n_latent_var),
                nn.Tanh(),
                nn.Linear(n_latent_var, action_dim),
                nn.Softmax(dim=-1)
                )

        # critic
        self.value_layer = nn.Sequential(
                nn.Linear(state_dim, n_latent_var),
                nn.Tanh(),
                nn.Linear(n_latent_var, n_latent_var),
                nn.Tanh(),
                nn.Linear(n_latent_var, 1)
                )

    def forward(self):
        raise NotImplementedError

    def act(self, state, memory):
        state = torch.from_numpy(state).float().to(device)
        action_probs = self.action_layer(state)
        dist = Categorical(action_probs)
        action = dist.sample()

        memory.states.append(state)
        memory.actions.append(action)
        memory.logprobs.append(dist.log_prob(action))

        return action.item()  # BREAK

    def evaluate(self, state, action):
        action_probs = self.action_layer(state)
        dist = Categorical(action_probs)

        action_logprobs = dist.log_prob(action)
        dist_entropy = dist.entropy()

        state_value = self.value_layer(state)

        return action_logprobs, torch.squeeze(state_value), dist_entropy


class PPO:
    def __init__(self, state_dim, action_dim, n_latent_var, lr, betas, gamma, K_epochs, eps_clip):
        self.lr = lr
        self.betas = betas
        self.gamma = gamma
        self.eps_clip = eps_clip
        self.K_epochs = K_epochs

        self.policy = ActorCritic(state_dim, action_dim, n_latent_var).to(device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(),
                                              lr=lr, betas=betas)
        self.policy_old = ActorCritic(state_dim, action_dim, n_latent_var).to(device)

        self.MseLoss = nn.MSELoss()

    def update(self, memory):
        # Monte Carlo estimate of state rewards:
        rewards = []
        discounted_reward = 0
        for reward in reversed(memory.rewards):
            discounted_reward = reward + (self.gamma * discounted_reward)
            rewards.insert(0, discounted_reward)

        # Normalizing the rewards:
        rewards = torch.tensor(rewards).to(device)
        rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-5)

        # convert list to tensor
        old_states = torch.stack(memory.states).to(device).detach()
        old_actions = torch.stack(memory.actions).to(device).detach()
        old_logprobs = torch.stack(memory.logprobs).to(device).detach()

        # Optimize policy for K epochs:
        for _ in range(self.K_epochs):
            # Evaluating old actions and values :
            logprobs, state_values, dist_entropy = self.policy.evaluate(old_states, old_actions)

            # Finding the ratio (pi_theta / pi_theta__old):
            ratios = torch.exp(logprobs - old_logprobs.detach())

            # Finding Surrogate Loss:
            advantages = rewards - state_values.detach()
            surr1 = ratios * advantages
            surr2 = torch.clamp(ratios, 1-self.eps_clip, 1+self.eps_clip) * advantages
            loss = -torch.min(surr1, surr2) + 0.5*self.MseLoss(state_values, rewards) - 0.01*dist_entropy

            # take gradient step
            self.optimizer.zero_grad()  # BREAK
            loss.mean().backward()
            self.optimizer.step()  # BREAK

        # Copy new weights into old policy:
        self.policy_old.load_state_dict(self.policy.state_dict())


# ---- stand-in
class ToyEnv(object):
    """Stand-in for gym's LunarLander: deterministic NumPy dynamics, 4 actions."""
    def __init__(self, state_dim=4):
        self.state_dim = state_dim
        self.moves = np.array([[0.1, 0, 0, 0], [-0.1, 0, 0, 0], [0, 0.1, 0, 0], [0, -0.1, 0, 0]], np.float32)

    def reset(self):
        self.t = 0
        self.s = np.array([0.5, -0.5, 0.2, 0.1], np.float32)
        return self.s

    def step(self, action):
        self.t += 1
        self.s = (0.95 * self.s + self.moves[action]).astype(np.float32)  # BREAK
        reward = float(1.0 - np.abs(self.s).sum())  # BREAK
        done = self.t >= 5
        return self.s, reward, done, None

    def render(self):
        pass


saved = []


def main(ppo, memory, env, hp, states):
    ############## Hyperparameters ##############
    env_name = hp['env_name']
    render = False
    solved_reward = hp['solved_reward']  # stop training if avg_reward > solved_reward
    log_interval = hp['log_interval']    # print avg reward in the interval
    max_episodes = hp['max_episodes']    # max training episodes
    max_timesteps = hp['max_timesteps']  # max timesteps in one episode
    update_timestep = hp['update_timestep']  # update policy every n timesteps
    random_seed = hp['random_seed']
    #############################################

    reset_(ppo, memory, states)
    if random_seed:
        torch.manual_seed(random_seed)  # BREAK

    # logging variables
    running_reward = 0
    avg_length = 0
    timestep = 0

    # training loop
    for i_episode in range(1, max_episodes+1):
        state = env.reset()
        for t in range(max_timesteps):
            timestep += 1

            # Running policy_old:
            action = ppo.policy_old.act(state, memory)
            state, reward, done, _ = env.step(action)
            # Saving reward:
            memory.rewards.append(reward)

            # update if its time
            if timestep % update_timestep == 0:
                ppo.update(memory)
                memory.clear_memory()
                timestep = 0

            running_reward += reward
            if render:
                env.render()
            if done:
                break

        avg_length += t

        # stop training if avg_reward > solved_reward
        if running_reward > (log_interval*solved_reward):
            print("########## Solved! ##########")
            saved.append(('./PPO_{}.pth'.format(env_name), copy.deepcopy(ppo.policy.state_dict())))
            break

        # logging
        if i_episode % log_interval == 0:
            avg_length = int(avg_length/log_interval)
            running_reward = int((running_reward/log_interval))

            print('Episode {} \t avg length: {} \t reward: {}'.format(i_episode, avg_length, running_reward))
            running_reward = 0
            avg_length = 0

    return running_reward, i_episode, sum(p.sum() for p in ppo.policy.parameters())


def reset_(ppo, memory, states):
    """Adaptation: restore both networks and the optimiser from the factory's copies, clear the memory."""
    ppo.policy.load_state_dict(states[0])  # BREAK
    ppo.policy_old.load_state_dict(states[1])
    ppo.optimizer.load_state_dict(states[2])
    memory.clear_memory()
    del saved[:]


def target():
    torch.manual_seed(0)
    state_dim, action_dim, n_latent_var = 4, 4, 16
    lr, betas, gamma, K_epochs, eps_clip = 0.002, (0.9, 0.999), 0.99, 2, 0.2
    ppo = PPO(state_dim, action_dim, n_latent_var, lr, betas, gamma, K_epochs, eps_clip)
    states = [copy.deepcopy(ppo.policy.state_dict()), copy.deepcopy(ppo.policy_old.state_dict()),
              copy.deepcopy(ppo.optimizer.state_dict())]
    memory = Memory()
    env = ToyEnv(state_dim)
    hp1 = dict(env_name='ToyLander', solved_reward=230, log_interval=2, max_episodes=4, max_timesteps=8,
               update_timestep=6, random_seed=3)
    hp2 = dict(env_name='ToyLander', solved_reward=-0.5, log_interval=3, max_episodes=6, max_timesteps=8,
               update_timestep=4, random_seed=5)
    return [
        (main, (ppo, memory, env, hp1, states), {}),
        (main, (ppo, memory, env, hp2, states), {}),
    ]


EXPECT = ("extract: the update needs the Python reward list (a reversed discounting loop over host floats, "
          "`torch.tensor(rewards)`), `backward()`/`step()` and `load_state_dict`; breaks expected at `act`'s "
          "`torch.from_numpy(state)` and `action.item()`, `update`'s `torch.tensor(rewards)`, "
          "`loss.mean().backward()`, `self.optimizer.step()`, `load_state_dict` in `update` and `reset_`, and the "
          "driver's `env.step` (NumPy); the `int(...)` logging is plain host arithmetic")
