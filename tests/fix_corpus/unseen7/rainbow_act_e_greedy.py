"""Rainbow's evaluation policy: `Agent.act_e_greedy(state, epsilon=0.001)` draws
`np.random.random() < epsilon` (and `np.random.randint(0, self.action_space)` on the ε branch), otherwise calls
`Agent.act`, which takes `(self.online_net(state.unsqueeze(0)) * self.support).sum(2).argmax(1).item()` under
`torch.no_grad()` from the distributional dueling network with noisy linear layers (Kaixhin/Rainbow agent.py:
Agent.__init__/act/act_e_greedy/eval; model.py: NoisyLinear, DQN with the 'data-efficient' convolutions; test.py's
evaluation loop calls `dqn.act_e_greedy(state)` after `dqn.eval()`). Sizes are shrunk (2 stacked 25x25 frames,
hidden 16, 11 atoms, 6 actions); the target network, optimiser and checkpoint loading of `Agent.__init__` are left out.
The network is in eval mode (noisy layers use their means). NumPy's global RNG is seeded in `target()`: with the seed
fixed and ε = 0.001 the ε branch is not taken in the first 5,800 draws (seed 22), so the returned actions do not depend on the
draw (the draw itself still advances NumPy's RNG state)."""
import math
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


# Factorised NoisyLinear layer with bias
class NoisyLinear(nn.Module):
  def __init__(self, in_features, out_features, std_init=0.5):
    super(NoisyLinear, self).__init__()
    self.in_features = in_features
    self.out_features = out_features
    self.std_init = std_init
    self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
    self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
    self.register_buffer('weight_epsilon', torch.empty(out_features, in_features))
    self.bias_mu = nn.Parameter(torch.empty(out_features))
    self.bias_sigma = nn.Parameter(torch.empty(out_features))
    self.register_buffer('bias_epsilon', torch.empty(out_features))
    self.reset_parameters()
    self.reset_noise()

  def reset_parameters(self):
    mu_range = 1 / math.sqrt(self.in_features)
    self.weight_mu.data.uniform_(-mu_range, mu_range)
    self.weight_sigma.data.fill_(self.std_init / math.sqrt(self.in_features))
    self.bias_mu.data.uniform_(-mu_range, mu_range)
    self.bias_sigma.data.fill_(self.std_init / math.sqrt(self.out_features))

  def _scale_noise(self, size):
    x = torch.randn(size, device=self.weight_mu.device)
    return x.sign().mul_(x.abs().sqrt_())

  def reset_noise(self):
    epsilon_in = self._scale_noise(self.in_features)
    epsilon_out = self._scale_noise(self.out_features)
    self.weight_epsilon.copy_(epsilon_out.ger(epsilon_in))
    self.bias_epsilon.copy_(epsilon_out)

  def forward(self, input):
    if self.training:
      return F.linear(input, self.weight_mu + self.weight_sigma * self.weight_epsilon, self.bias_mu + self.bias_sigma * self.bias_epsilon)
    else:
      return F.linear(input, self.weight_mu, self.bias_mu)


class DQN(nn.Module):
  def __init__(self, args, action_space):
    super(DQN, self).__init__()
    self.atoms = args.atoms
    self.action_space = action_space

    if args.architecture == 'data-efficient':
      self.convs = nn.Sequential(nn.Conv2d(args.history_length, 8, 5, stride=5, padding=0), nn.ReLU(),
                                 nn.Conv2d(8, 16, 5, stride=5, padding=0), nn.ReLU())
      self.conv_output_size = 16
    self.fc_h_v = NoisyLinear(self.conv_output_size, args.hidden_size, std_init=args.noisy_std)
    self.fc_h_a = NoisyLinear(self.conv_output_size, args.hidden_size, std_init=args.noisy_std)
    self.fc_z_v = NoisyLinear(args.hidden_size, self.atoms, std_init=args.noisy_std)
    self.fc_z_a = NoisyLinear(args.hidden_size, action_space * self.atoms, std_init=args.noisy_std)

  def forward(self, x, log=False):
    x = self.convs(x)
    x = x.view(-1, self.conv_output_size)
    v = self.fc_z_v(F.relu(self.fc_h_v(x)))  # Value stream
    a = self.fc_z_a(F.relu(self.fc_h_a(x)))  # Advantage stream
    v, a = v.view(-1, 1, self.atoms), a.view(-1, self.action_space, self.atoms)
    q = v + a - a.mean(1, keepdim=True)  # Combine streams
    if log:  # Use log softmax for numerical stability
      q = F.log_softmax(q, dim=2)  # Log probabilities with action over second dimension
    else:
      q = F.softmax(q, dim=2)  # Probabilities with action over second dimension
    return q


class Agent():
  def __init__(self, args, action_space):
    self.action_space = action_space
    self.atoms = args.atoms
    self.Vmin = args.V_min
    self.Vmax = args.V_max
    self.support = torch.linspace(args.V_min, args.V_max, self.atoms).to(device=args.device)  # Support (range) of z
    self.delta_z = (args.V_max - args.V_min) / (self.atoms - 1)

    self.online_net = DQN(args, self.action_space).to(device=args.device)
    self.online_net.train()

  # Acts based on single state (no batch)
  def act(self, state):
    with torch.no_grad():
      return (self.online_net(state.unsqueeze(0)) * self.support).sum(2).argmax(1).item()  # BREAK

  # Acts with an ε-greedy policy (used for evaluation only)
  def act_e_greedy(self, state, epsilon=0.001):  # High ε can reduce evaluation scores drastically
    return np.random.randint(0, self.action_space) if np.random.random() < epsilon else self.act(state)  # BREAK

  def train(self):
    self.online_net.train()

  def eval(self):
    self.online_net.eval()


def target():
  torch.manual_seed(0)
  np.random.seed(22)
  args = SimpleNamespace(atoms=11, V_min=-10, V_max=10, device='cpu', architecture='data-efficient',
                         history_length=2, hidden_size=16, noisy_std=0.1)
  dqn = Agent(args, action_space=6)
  dqn.eval()
  state1 = torch.rand(2, 25, 25)
  state2 = torch.randn(2, 25, 25) * 20
  return [
    (dqn.act_e_greedy, (state1,), {}),
    (dqn.act_e_greedy, (state2,), {}),
  ]


EXPECT = ("caller: keep the ε-greedy draw (`np.random.random()`, `np.random.randint`) and the `.item()` on the host: "
          "compile only the Q-value computation (`(self.online_net(state.unsqueeze(0)) * self.support).sum(2)"
          ".argmax(1)`, returned as a tensor) and take the action and the exploration decision in the caller")
