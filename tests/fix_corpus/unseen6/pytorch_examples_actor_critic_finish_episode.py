"""Actor-critic episode update from the PyTorch examples: discounted returns built in a Python list
(`returns.insert(0, R)`), normalised with `(returns - returns.mean()) / (returns.std() + eps)` where
`eps = np.finfo(np.float32).eps.item()`, then per step `advantage = R - value.item()` and
`F.smooth_l1_loss(value, torch.tensor([R]))` over `zip(saved_actions, returns)` (a namedtuple list on the module),
and the buffers are cleared with `del model.rewards[:]` / `del model.saved_actions[:]` (pytorch/examples
reinforcement_learning/actor_critic.py: SavedAction, Policy, select_action, finish_episode). The gym environment is
left out: the call replays a recorded episode (states, the actions taken and the rewards) through `select_action`'s
bookkeeping, with the recorded action in place of `m.sample()` (so nothing is drawn), then runs `finish_episode()`.
`finish_episode` returns the loss instead of running `loss.backward()` and `optimizer.step()`; `args` is the parsed
default namespace. The module globals `model`, `args` and `eps` are kept as in the example (`target()` rebuilds
`model` with a fixed seed)."""
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

args = SimpleNamespace(gamma=0.99, seed=543, render=False, log_interval=10)

SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])


class Policy(nn.Module):
    """
    implements both actor and critic in one model
    """
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)

        # actor's layer
        self.action_head = nn.Linear(128, 2)

        # critic's layer
        self.value_head = nn.Linear(128, 1)

        # action & reward buffer
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        """
        forward of both actor and critic
        """
        x = F.relu(self.affine1(x))

        # actor: choses action to take from state s_t
        # by returning probability of each action
        action_prob = F.softmax(self.action_head(x), dim=-1)

        # critic: evaluates being in the state s_t
        state_values = self.value_head(x)

        # return values for both actor and critic as a tupel of 2 values:
        # 1. a list with the probability of each action over the action space
        # 2. the value from state s_t
        return action_prob, state_values


model = Policy()
eps = np.finfo(np.float32).eps.item()


def select_action(state, action):
    """select_action with the recorded action instead of `action = m.sample()`."""
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)

    # create a categorical distribution over the list of probabilities of actions
    m = Categorical(probs)

    # save to action buffer
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))

    # the action to take (left or right)
    return action.item()  # BREAK


def finish_episode():
    """
    Training code. Calculates actor and critic loss and performs backprop.
    """
    R = 0
    saved_actions = model.saved_actions
    policy_losses = [] # list to save actor (policy) loss
    value_losses = [] # list to save critic (value) loss
    returns = [] # list to save the true values

    # calculate the true value using rewards returned from the environment
    for r in model.rewards[::-1]:
        # calculate the discounted value
        R = r + args.gamma * R
        returns.insert(0, R)

    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)

    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()  # BREAK

        # calculate actor (policy) loss
        policy_losses.append(-log_prob * advantage)

        # calculate critic (value) loss using L1 smooth loss
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))

    # sum up all the values of policy_losses and value_losses
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()

    # (here the example runs optimizer.zero_grad(), loss.backward(), optimizer.step())

    # reset rewards and action buffer
    del model.rewards[:]
    del model.saved_actions[:]
    return loss


def replay_episode(states, actions, rewards):
    """The example's episode loop with the environment replaced by a recorded episode, then the update."""
    for state, action, reward in zip(states, actions, rewards):
        select_action(state, action)
        model.rewards.append(reward)
    return finish_episode()


def _episode(length):
    states = [np.random.RandomState(length + t).randn(4).astype(np.float32) for t in range(length)]
    actions = [torch.tensor(t % 2) for t in range(length)]
    rewards = [1.0] * (length - 1) + [0.0]
    return states, actions, rewards


def target():
    global model
    torch.manual_seed(args.seed)
    model = Policy()
    ep1 = _episode(6)
    ep2 = _episode(9)
    return [
        (replay_episode, ep1, {}),
        (replay_episode, ep2, {}),
    ]


EXPECT = ("rewrite: keep the advantage as a tensor (`advantage = R - value.detach()` instead of `R - value.item()`) "
          "and build the critic target from the 0-d return without a host round-trip (`R.reshape(1)` / "
          "`R.unsqueeze(0)` instead of `torch.tensor([R])`); better, vectorise the loop over steps with "
          "`torch.stack` of the saved log-probs and values. The replay's `action.item()` (select_action's return "
          "value) is a host read for the environment and stays (caller)")
