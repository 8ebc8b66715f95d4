"""Episodes of the DQN tutorial agent with a NumPy replay memory, from MorvanZhou/PyTorch-Tutorial
(`tutorial-contents/405_DQN_Reinforcement_learning.py`: the module-level hyperparameters, `Net`, `DQN`
`choose_action`/`store_transition`/`learn`, and the script's episode loop). `Net.__init__` initialises with
`weight.data.normal_(0, 0.1)`; `choose_action` wraps the state in `Variable(torch.unsqueeze(torch.FloatTensor(x),
0))`, decides with `np.random.uniform() < EPSILON` and returns `torch.max(actions_value, 1)[1].data.numpy()[0]` or
`np.random.randint(0, N_ACTIONS)`; `store_transition` writes an `np.hstack((s, [a, r], s_))` row into the NumPy
memory at `memory_counter % MEMORY_CAPACITY`; `learn` copies the evaluation net into the target net every
`TARGET_REPLACE_ITER` steps (`load_state_dict`), samples rows with `np.random.choice`, slices them into
`FloatTensor`/`LongTensor` (`.astype(int)`) batches, and regresses `gather`ed Q-values on `b_r + GAMMA *
q_next.max(1)[0].view(BATCH_SIZE, 1)`. The loop unpacks the next state into `x, x_dot, theta, theta_dot`, shapes the
reward from the environment's thresholds with Python `abs`, stores, learns once `memory_counter > MEMORY_CAPACITY`
and prints `round(ep_r, 2)` when done. Adaptations: gym's CartPole is a deterministic NumPy `ToyCartPole` with
`x_threshold`/`theta_threshold_radians`, `render()` a no-op; the hyperparameters are smaller module attributes
(`MEMORY_CAPACITY` 20, `BATCH_SIZE` 8, `TARGET_REPLACE_ITER` 5); the script's loop is the called function
`run_episodes`. Runnability fix after the first census (the compiled run failed in `torch.FloatTensor` of a
float64 array): the memory is `np.zeros(..., np.float32)` and the stand-in's states are float32. So that a call repeats, `run_episodes` restores both nets and the optimiser from the factory's copies,
zeroes the memory and counters (`reset_`) and seeds NumPy; it returns the episode returns, the learn-step count and
the evaluation net's output on a fixed state."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

# Hyper Parameters
BATCH_SIZE = 8
LR = 0.01                   # learning rate
EPSILON = 0.9               # greedy policy
GAMMA = 0.9                 # reward discount
TARGET_REPLACE_ITER = 5     # target update frequency
MEMORY_CAPACITY = 20
N_ACTIONS = 2
N_STATES = 4


class Net(nn.Module):
    def __init__(self, ):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(N_STATES, 10)
        self.fc1.weight.data.normal_(0, 0.1)   # initialization
        self.out = nn.Linear(10, N_ACTIONS)
        self.out.weight.data.normal_(0, 0.1)   # initialization

    def forward(self, x):
        x = self.fc1(x)
        x = F.relu(x)
        actions_value = self.out(x)
        return actions_value


class DQN(object):
    def __init__(self):
        self.eval_net, self.target_net = Net(), Net()

        self.learn_step_counter = 0                                     # for target updating
        self.memory_counter = 0                                         # for storing memory
        self.memory = np.zeros((MEMORY_CAPACITY, N_STATES * 2 + 2), np.float32)     # initialize memory
        self.optimizer = torch.optim.Adam(self.eval_net.parameters(), lr=LR)
        self.loss_func = nn.MSELoss()

    def choose_action(self, x):
        x = Variable(torch.unsqueeze(torch.FloatTensor(x), 0))  # BREAK
        # input only one sample
        if np.random.uniform() < EPSILON:   # greedy  # BREAK
            actions_value = self.eval_net.forward(x)
            action = torch.max(actions_value, 1)[1].data.numpy()[0]     # return the argmax
        else:   # random
            action = np.random.randint(0, N_ACTIONS)  # BREAK
        return action

    def store_transition(self, s, a, r, s_):
        transition = np.hstack((s, [a, r], s_))
        # replace the old memory with new memory
        index = self.memory_counter % MEMORY_CAPACITY
        self.memory[index, :] = transition
        self.memory_counter += 1

    def learn(self):
        # target parameter update
        if self.learn_step_counter % TARGET_REPLACE_ITER == 0:
            self.target_net.load_state_dict(self.eval_net.state_dict())  # BREAK
        self.learn_step_counter += 1

        # sample batch transitions
        sample_index = np.random.choice(MEMORY_CAPACITY, BATCH_SIZE)  # BREAK
        b_memory = self.memory[sample_index, :]
        b_s = Variable(torch.FloatTensor(b_memory[:, :N_STATES]))  # BREAK
        b_a = Variable(torch.LongTensor(b_memory[:, N_STATES:N_STATES+1].astype(int)))  # BREAK
        b_r = Variable(torch.FloatTensor(b_memory[:, N_STATES+1:N_STATES+2]))  # BREAK
        b_s_ = Variable(torch.FloatTensor(b_memory[:, -N_STATES:]))  # BREAK

        # q_eval w.r.t the action in experience
        q_eval = self.eval_net(b_s).gather(1, b_a)  # shape (batch, 1)
        q_next = self.target_net(b_s_).detach()     # detach from graph, don't backpropagate
        q_target = b_r + GAMMA * q_next.max(1)[0].view(BATCH_SIZE, 1)   # shape (batch, 1)
        loss = self.loss_func(q_eval, q_target)

        self.optimizer.zero_grad()  # BREAK
        loss.backward()  # BREAK
        self.optimizer.step()  # BREAK


# ---- stand-in
class ToyCartPole(object):
    """Stand-in for gym's CartPole-v0 (unwrapped): deterministic NumPy dynamics with the same thresholds."""
    def __init__(self, start):
        self.x_threshold = 2.4
        self.theta_threshold_radians = 12 * 2 * np.pi / 360
        self.start = np.asarray(start, dtype=np.float32)

    def reset(self):
        self.t = 0
        self.state = self.start.copy()
        return self.state

    def step(self, action):
        self.t += 1
        x, x_dot, theta, theta_dot = self.state
        force = 1.0 if action == 1 else -1.0  # BREAK
        x_dot = x_dot + 0.02 * force
        theta_dot = theta_dot + 0.05 * theta - 0.02 * force
        self.state = np.array([x + 0.1 * x_dot, x_dot, theta + 0.1 * theta_dot, theta_dot], np.float32)
        done = bool(abs(self.state[0]) > self.x_threshold or abs(self.state[2]) > self.theta_threshold_radians  # BREAK
                    or self.t >= 12)
        return self.state, 1.0, done, {}

    def render(self):
        pass


def run_episodes(dqn, env, n_episodes, states, seed):
    reset_(dqn, states)
    np.random.seed(seed)
    returns = []

    print('\nCollecting experience...')  # BREAK
    for i_episode in range(n_episodes):
        s = env.reset()
        ep_r = 0
        while True:
            env.render()
            a = dqn.choose_action(s)

            # take action
            s_, r, done, info = env.step(a)

            # modify the reward
            x, x_dot, theta, theta_dot = s_
            r1 = (env.x_threshold - abs(x)) / env.x_threshold - 0.8
            r2 = (env.theta_threshold_radians - abs(theta)) / env.theta_threshold_radians - 0.5
            r = r1 + r2

            dqn.store_transition(s, a, r, s_)

            ep_r += r
            if dqn.memory_counter > MEMORY_CAPACITY:
                dqn.learn()
                if done:
                    print('Ep: ', i_episode,
                          '| Ep_r: ', round(ep_r, 2))

            if done:
                break
            s = s_
        returns.append(ep_r)
    return returns, dqn.learn_step_counter, dqn.eval_net(torch.ones(1, N_STATES))


def reset_(dqn, states):
    """Adaptation: restore both nets and the optimiser, zero the memory and counters, so that a call repeats."""
    dqn.eval_net.load_state_dict(states[0])  # BREAK
    dqn.target_net.load_state_dict(states[1])
    dqn.optimizer.load_state_dict(states[2])
    dqn.memory[:] = 0
    dqn.memory_counter = 0
    dqn.learn_step_counter = 0


def target():
    torch.manual_seed(0)
    dqn = DQN()
    states = [copy.deepcopy(dqn.eval_net.state_dict()), copy.deepcopy(dqn.target_net.state_dict()),
              copy.deepcopy(dqn.optimizer.state_dict())]
    env1 = ToyCartPole([0.0, 0.0, 0.02, 0.0])
    env2 = ToyCartPole([0.5, -0.1, -0.05, 0.1])
    return [
        (run_episodes, (dqn, env1, 4, states, 0), {}),
        (run_episodes, (dqn, env2, 5, states, 1), {}),
    ]


EXPECT = ("extract: every step crosses to NumPy (`np.random.uniform`/`randint`/`choice`, the `.data.numpy()[0]` "
          "action, `np.hstack` memory rows, `torch.FloatTensor(b_memory[...])` batches) around a small Q-network; "
          "breaks expected at `choose_action`'s `torch.FloatTensor(x)`/`np.random.uniform()`/`.data.numpy()`, "
          "`learn`'s `load_state_dict`, `np.random.choice` and `torch.FloatTensor(...)` batch lines, "
          "`loss.backward()`/`self.optimizer.step()`, the driver's `env.step`/`round(ep_r, 2)` print, and `reset_`")
