"""TD3 training iterations (sfujim/TD3 TD3.py: `var`, `Actor`, `Critic`, `TD3.__init__/train`, the early revision
with `Variable(..., volatile=...)`; utils.py: `ReplayBuffer.add/sample`). Each iteration samples the replay buffer on
the host (`np.random.randint` indices, a Python loop building lists of NumPy rows, `np.array(...)`), wraps the NumPy
batches with `var(torch.FloatTensor(x))`, draws the target-policy smoothing noise with
`np.clip(np.random.normal(...), -noise_clip, noise_clip)`, sets `target_Q.volatile = False` (a removed attribute: it
warns and does nothing), runs the critic update (`backward`, `Adam.step`), and on `if it % policy_freq == 0:` the
actor update and the Polyak updates `target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)`.
Adaptations: the layer sizes 400/300 became 32/24; `var`'s `.cuda()` branch is kept but never taken (no GPU);
the `.cuda()` moves in `__init__` likewise; `save`/`load` (file I/O) and `select_action` are left out; the replay
buffer is filled in the factory with 64 transitions drawn from a seeded NumPy generator (state_dim 3, action_dim 2,
max_action 1.0); rewards and done flags are stored as 0-d NumPy arrays, so that NumPy 2's
`np.array(R, copy=False)` needs no copy (a Python float raises there). So that a call gives the same result when it is run again, the called step first restores the four
networks and both Adam optimizers from copies taken in the factory (`reset_`, an adaptation) and seeds NumPy's global
generator with the call's seed (`np.random.seed`, an adaptation), and returns clones of the actor's and the critic's
last-layer weights and of the target actor's last weight (the original returns nothing). The first call runs 3
iterations with batch 16, the second 4 iterations with batch 8 and a different seed."""
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
import torch.nn.functional as F


# Implementation of Twin Delayed Deep Deterministic Policy Gradients (TD3)


def var(tensor, volatile=False):
	if torch.cuda.is_available():
		return Variable(tensor, volatile=volatile).cuda()
	else:
		return Variable(tensor, volatile=volatile)  # BREAK


# Simple replay buffer (utils.py)
class ReplayBuffer(object):
	def __init__(self):
		self.storage = []

	# Expects tuples of (state, next_state, action, reward, done)
	def add(self, data):
		self.storage.append(data)

	def sample(self, batch_size=100):
		ind = np.random.randint(0, len(self.storage), size=batch_size)
		x, y, u, r, d = [], [], [], [], []

		for i in ind: 
			X, Y, U, R, D = self.storage[i]  # BREAK
			x.append(np.array(X, copy=False))
			y.append(np.array(Y, copy=False))
			u.append(np.array(U, copy=False))
			r.append(np.array(R, copy=False))
			d.append(np.array(D, copy=False))

		return np.array(x), np.array(y), np.array(u), np.array(r).reshape(-1, 1), np.array(d).reshape(-1, 1)


class Actor(nn.Module):
	def __init__(self, state_dim, action_dim, max_action):
		super(Actor, self).__init__()

		self.l1 = nn.Linear(state_dim, 32)
		self.l2 = nn.Linear(32, 24)
		self.l3 = nn.Linear(24, action_dim)
		
		self.max_action = max_action


	def forward(self, x):
		x = F.relu(self.l1(x))
		x = F.relu(self.l2(x))
		x = self.max_action * F.tanh(self.l3(x)) 
		return x


class Critic(nn.Module):
	def __init__(self, state_dim, action_dim):
		super(Critic, self).__init__()

		# Q1 architecture
		self.l1 = nn.Linear(state_dim + action_dim, 32)
		self.l2 = nn.Linear(32, 24)
		self.l3 = nn.Linear(24, 1)

		# Q2 architecture
		self.l4 = nn.Linear(state_dim + action_dim, 32)
		self.l5 = nn.Linear(32, 24)
		self.l6 = nn.Linear(24, 1)


	def forward(self, x, u):
		x1 = F.relu(self.l1(torch.cat([x, u], 1)))
		x1 = F.relu(self.l2(x1))
		x1 = self.l3(x1)

		x2 = F.relu(self.l4(torch.cat([x, u], 1)))
		x2 = F.relu(self.l5(x2))
		x2 = self.l6(x2)

		return x1, x2


class TD3(object):
	def __init__(self, state_dim, action_dim, max_action):
		self.actor = Actor(state_dim, action_dim, max_action)
		self.actor_target = Actor(state_dim, action_dim, max_action)
		self.actor_target.load_state_dict(self.actor.state_dict())
		self.actor_optimizer = torch.optim.Adam(self.actor.parameters())

		self.critic = Critic(state_dim, action_dim)
		self.critic_target = Critic(state_dim, action_dim)
		self.critic_target.load_state_dict(self.critic.state_dict())
		self.critic_optimizer = torch.optim.Adam(self.critic.parameters())		

		if torch.cuda.is_available():
			self.actor = self.actor.cuda()
			self.actor_target = self.actor_target.cuda()
			self.critic = self.critic.cuda()
			self.critic_target = self.critic_target.cuda()

		self.criterion = nn.MSELoss()
		self.state_dim = state_dim
		self.action_dim = action_dim
		self.max_action = max_action


	def train(self, replay_buffer, iterations, batch_size=100, discount=0.99, tau=0.005, policy_noise=0.2, noise_clip=0.5, policy_freq=2):

		for it in range(iterations):

			# Sample replay buffer 
			x, y, u, r, d = replay_buffer.sample(batch_size)
			state = var(torch.FloatTensor(x))
			action = var(torch.FloatTensor(u))
			next_state = var(torch.FloatTensor(y), volatile=True)
			done = var(torch.FloatTensor(1 - d))
			reward = var(torch.FloatTensor(r))

			# Select action according to policy and add clipped noise 
			noise = np.clip(np.random.normal(0, policy_noise, size=(batch_size, self.action_dim)), -noise_clip, noise_clip)
			next_action = self.actor_target(next_state) + var(torch.FloatTensor(noise))
			next_action = next_action.clamp(-self.max_action, self.max_action)

			# Q target = reward + discount * min(Qi(next_state, pi(next_state)))
			target_Q1, target_Q2 = self.critic_target(next_state, next_action)
			target_Q = torch.min(torch.cat([target_Q1, target_Q2], 1), 1)[0].view(-1, 1)
			target_Q.volatile = False 
			target_Q = reward + (done * discount * target_Q)

			# Get current Q estimates
			current_Q1, current_Q2 = self.critic(state, action)

			# Compute critic loss
			critic_loss = self.criterion(current_Q1, target_Q) + self.criterion(current_Q2, target_Q) 

			# Optimize the critic
			self.critic_optimizer.zero_grad()
			critic_loss.backward()
			self.critic_optimizer.step()

			# Delayed policy updates
			if it % policy_freq == 0:

				# Compute actor loss
				Q1, Q2 = self.critic(state, self.actor(state)) 
				actor_loss = -Q1.mean()
				
				# Optimize the actor 
				self.actor_optimizer.zero_grad()
				actor_loss.backward()
				self.actor_optimizer.step()

				# Update the frozen target models
				for param, target_param in zip(self.critic.parameters(), self.critic_target.parameters()):
					target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)

				for param, target_param in zip(self.actor.parameters(), self.actor_target.parameters()):
					target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


def reset_(policy, snapshot):
	"""Adaptation: restore networks and optimizers to the factory's state."""
	policy.actor.load_state_dict(snapshot["actor"])  # BREAK
	policy.actor_target.load_state_dict(snapshot["actor_target"])
	policy.critic.load_state_dict(snapshot["critic"])
	policy.critic_target.load_state_dict(snapshot["critic_target"])
	policy.actor_optimizer.load_state_dict(snapshot["actor_optimizer"])
	policy.critic_optimizer.load_state_dict(snapshot["critic_optimizer"])


def train_td3(policy, replay_buffer, snapshot, iterations, batch_size, seed):
	reset_(policy, snapshot)
	np.random.seed(seed)
	policy.train(replay_buffer, iterations, batch_size=batch_size)
	return (policy.actor.l3.weight.detach().clone(), policy.critic.l3.weight.detach().clone(),
			policy.actor_target.l3.weight.detach().clone())


def target():
	torch.manual_seed(0)
	state_dim, action_dim, max_action = 3, 2, 1.0
	policy = TD3(state_dim, action_dim, max_action)
	snapshot = {
		"actor": copy.deepcopy(policy.actor.state_dict()),
		"actor_target": copy.deepcopy(policy.actor_target.state_dict()),
		"critic": copy.deepcopy(policy.critic.state_dict()),
		"critic_target": copy.deepcopy(policy.critic_target.state_dict()),
		"actor_optimizer": copy.deepcopy(policy.actor_optimizer.state_dict()),
		"critic_optimizer": copy.deepcopy(policy.critic_optimizer.state_dict()),
	}
	rng = np.random.RandomState(0)
	replay_buffer = ReplayBuffer()
	for _ in range(64):
		s = rng.randn(state_dim)
		s2 = rng.randn(state_dim)
		a = rng.uniform(-1, 1, size=action_dim)
		rew = np.array(rng.randn())
		done = np.array(float(rng.rand() < 0.1))
		replay_buffer.add((s, s2, a, rew, done))
	return [
		(train_td3, (policy, replay_buffer, snapshot, 3, 16, 1), {}),
		(train_td3, (policy, replay_buffer, snapshot, 4, 8, 2), {}),
	]


EXPECT = ("caller: the replay-buffer sampling (`np.random.randint`, the Python loop over stored NumPy rows) and the "
          "`np.random.normal` smoothing noise are host work and host RNG: draw them in the caller and pass the batch "
          "and the noise in as tensors, compiling one iteration's update; the `backward`/`optimizer.step` calls "
          "stay per iteration. `Variable(..., volatile=...)` and `target_Q.volatile = False` are no-ops that can be "
          "dropped")
