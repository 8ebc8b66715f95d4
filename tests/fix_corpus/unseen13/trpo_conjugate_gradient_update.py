"""One TRPO iteration (rollouts, GAE, L-BFGS value fit, natural-gradient policy step) from ikostrikov/pytorch-trpo
(`trpo.py` `conjugate_gradients`, `linesearch`, `trpo_step`; `main.py` `select_action`, `update_params` and the
batch-collection loop; `utils.py` `normal_log_density`, `get_flat_params_from`, `set_flat_params_to`,
`get_flat_grad_from`; `models.py` `Policy`, `Value`; `running_state.py` `RunningStat`, `ZFilter`;
`replay_memory.py` `Memory`). `conjugate_gradients` loops `nsteps` times with `if rdotr < residual_tol: break` on
a tensor; `linesearch` iterates `enumerate(.5**np.arange(max_backtracks))`, writes parameters with
`set_flat_params_to` (a loop with `int(np.prod(list(param.size())))` and `param.data.copy_`), prints and accepts
on `ratio > accept_ratio and actual_improve > 0`; `trpo_step` takes `torch.autograd.grad(..., create_graph=True)`,
defines the Fisher-vector-product closure `Fvp` (double backward through `get_kl`), and list comprehensions of
flattened grads. `update_params` builds tensors from the `Transition` lists (`np.concatenate`), runs the GAE
recursion in a reversed Python loop with element writes (`returns[i] = ...`, `prev_return = returns[i, 0]`),
fits the value net with `scipy.optimize.fmin_l_bfgs_b` through the closure `get_value_loss` (NumPy in/out,
`param.grad.data.fill_(0)` loop, L2 loop), normalises advantages and calls `trpo_step` with the closures
`get_loss(volatile=False)` (legacy `Variable(..., volatile=volatile)`) and `get_kl`. The collection loop calls
`select_action` (`torch.normal`), `action.data[0].numpy()`, `env.step`, the NumPy `ZFilter`s and `memory.push`.
Adaptations: gym (not installed) is a small deterministic linear-dynamics stand-in `ToyEnv` with `reset`/`step`
returning NumPy arrays (done after 6 steps); the models' stored revision imports tensorflow (unused; dropped);
`torch.set_default_tensor_type('torch.DoubleTensor')` is not set (global state; tensors are float32 and the
L-BFGS closure returns float64 NumPy as before); the old-torch 0-d indexing is adapted: `fval[0]`,
`actual_improve[0]`, `expected_improve[0]`, `ratio[0]` and `newfval[0]` read `.item()`, `lm[0]` divides by the
0-d `lm`, and `value_loss.data.double().numpy()[0]` is `float(...)`; `torch.Tensor(batch.state)` takes
`np.array(batch.state, dtype=np.float32)` and `select_action` adds `.float()` (the states are float64 NumPy arrays; float32 since the runnability commit); `args` is an `argparse.Namespace`
(`batch_size` 24 steps, `max_kl` 1e-2). So that a call repeats exactly, the called function `trpo_iteration`
restores both nets from copies taken in the factory, seeds NumPy and torch and rebuilds the `ZFilter`s
(`reset_`); it returns the mean episode reward and the flat parameters of both nets."""
import argparse
import copy
from collections import namedtuple

import numpy as np
import scipy.optimize

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
import math


# ---- utils.py
def normal_log_density(x, mean, log_std, std):
    var = std.pow(2)
    log_density = -(x - mean).pow(2) / (
        2 * var) - 0.5 * math.log(2 * math.pi) - log_std
    return log_density.sum(1)


def get_flat_params_from(model):
    params = []
    for param in model.parameters():
        params.append(param.data.view(-1))

    flat_params = torch.cat(params)
    return flat_params


def set_flat_params_to(model, flat_params):
    prev_ind = 0
    for param in model.parameters():
        flat_size = int(np.prod(list(param.size())))  # BREAK
        param.data.copy_(
            flat_params[prev_ind:prev_ind + flat_size].view(param.size()))
        prev_ind += flat_size


def get_flat_grad_from(net, grad_grad=False):
    grads = []
    for param in net.parameters():
        if grad_grad:
            grads.append(param.grad.grad.view(-1))
        else:
            grads.append(param.grad.view(-1))

    flat_grad = torch.cat(grads)
    return flat_grad


# ---- models.py
class Policy(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(num_inputs, 16)
        self.affine2 = nn.Linear(16, 16)

        self.action_mean = nn.Linear(16, num_outputs)
        self.action_mean.weight.data.mul_(0.1)
        self.action_mean.bias.data.mul_(0.0)

        self.action_log_std = nn.Parameter(torch.zeros(1, num_outputs))

        self.saved_actions = []
        self.rewards = []
        self.final_value = 0

    def forward(self, x):
        x = F.tanh(self.affine1(x))
        x = F.tanh(self.affine2(x))

        action_mean = self.action_mean(x)
        action_log_std = self.action_log_std.expand_as(action_mean)
        action_std = torch.exp(action_log_std)

        return action_mean, action_log_std, action_std


class Value(nn.Module):
    def __init__(self, num_inputs):
        super(Value, self).__init__()
        self.affine1 = nn.Linear(num_inputs, 16)
        self.affine2 = nn.Linear(16, 16)
        self.value_head = nn.Linear(16, 1)
        self.value_head.weight.data.mul_(0.1)
        self.value_head.bias.data.mul_(0.0)

    def forward(self, x):
        x = F.tanh(self.affine1(x))
        x = F.tanh(self.affine2(x))

        state_values = self.value_head(x)
        return state_values


# ---- replay_memory.py
Transition = namedtuple('Transition', ('state', 'action', 'mask', 'next_state',
                                       'reward'))


class Memory(object):
    def __init__(self):
        self.memory = []

    def push(self, *args):
        """Saves a transition."""
        self.memory.append(Transition(*args))

    def sample(self):
        return Transition(*zip(*self.memory))

    def __len__(self):
        return len(self.memory)


# ---- running_state.py
class RunningStat(object):
    def __init__(self, shape):
        self._n = 0
        self._M = np.zeros(shape)
        self._S = np.zeros(shape)

    def push(self, x):
        x = np.asarray(x)
        assert x.shape == self._M.shape
        self._n += 1
        if self._n == 1:
            self._M[...] = x
        else:
            oldM = self._M.copy()
            self._M[...] = oldM + (x - oldM) / self._n
            self._S[...] = self._S + (x - oldM) * (x - self._M)

    @property
    def n(self):
        return self._n

    @property
    def mean(self):
        return self._M

    @property
    def var(self):
        return self._S / (self._n - 1) if self._n > 1 else np.square(self._M)

    @property
    def std(self):
        return np.sqrt(self.var)


class ZFilter:
    """
    y = (x-mean)/std
    using running estimates of mean,std
    """

    def __init__(self, shape, demean=True, destd=True, clip=10.0):
        self.demean = demean
        self.destd = destd
        self.clip = clip

        self.rs = RunningStat(shape)

    def __call__(self, x, update=True):
        if update: self.rs.push(x)
        if self.demean:
            x = x - self.rs.mean
        if self.destd:
            x = x / (self.rs.std + 1e-8)
        if self.clip:
            x = np.clip(x, -self.clip, self.clip)
        return x


# ---- trpo.py
def conjugate_gradients(Avp, b, nsteps, residual_tol=1e-10):
    x = torch.zeros(b.size())
    r = b.clone()
    p = b.clone()
    rdotr = torch.dot(r, r)
    for i in range(nsteps):
        _Avp = Avp(p)
        alpha = rdotr / torch.dot(p, _Avp)
        x += alpha * p
        r -= alpha * _Avp
        new_rdotr = torch.dot(r, r)
        betta = new_rdotr / rdotr
        p = r + betta * p
        rdotr = new_rdotr
        if rdotr < residual_tol:
            break
    return x


def linesearch(model,
               f,
               x,
               fullstep,
               expected_improve_rate,
               max_backtracks=10,
               accept_ratio=.1):
    fval = f(True).data
    print("fval before", fval.item())  # BREAK
    for (_n_backtracks, stepfrac) in enumerate(.5**np.arange(max_backtracks)):
        xnew = x + stepfrac * fullstep
        set_flat_params_to(model, xnew)  # BREAK
        newfval = f(True).data
        actual_improve = fval - newfval
        expected_improve = expected_improve_rate * stepfrac
        ratio = actual_improve / expected_improve
        print("a/e/r", actual_improve.item(), expected_improve.item(), ratio.item())

        if ratio.item() > accept_ratio and actual_improve.item() > 0:
            print("fval after", newfval.item())
            return True, xnew
    return False, x


def trpo_step(model, get_loss, get_kl, max_kl, damping):
    loss = get_loss()
    grads = torch.autograd.grad(loss, model.parameters(), create_graph=True)  # BREAK
    loss_grad = torch.cat([grad.view(-1) for grad in grads]).data

    def Fvp(v):
        kl = get_kl()
        kl = kl.mean()

        grads = torch.autograd.grad(kl, model.parameters(), create_graph=True)  # BREAK
        flat_grad_kl = torch.cat([grad.view(-1) for grad in grads])

        kl_v = (flat_grad_kl * Variable(v)).sum()
        grads = torch.autograd.grad(kl_v, model.parameters())
        flat_grad_grad_kl = torch.cat([grad.view(-1) for grad in grads]).data

        return flat_grad_grad_kl + v * damping

    stepdir = conjugate_gradients(Fvp, -loss_grad, 10)

    shs = 0.5 * (stepdir * Fvp(stepdir)).sum(0)

    lm = torch.sqrt(shs / max_kl)
    fullstep = stepdir / lm

    neggdotstepdir = (-loss_grad * stepdir).sum(0)
    print(("lagrange multiplier:", lm.item(), "grad_norm:", loss_grad.norm().item()))

    prev_params = get_flat_params_from(model)
    success, new_params = linesearch(model, get_loss, prev_params, fullstep,
                                     neggdotstepdir / lm)
    set_flat_params_to(model, new_params)

    return loss


# ---- main.py (module globals of the script: set by the factory)
args = argparse.Namespace(gamma=0.995, tau=0.97, l2_reg=1e-3, max_kl=1e-2, damping=1e-1, seed=543, batch_size=24,
                          render=False, log_interval=1)
policy_net = None
value_net = None
running_state = None
running_reward = None


class ToyEnv(object):
    """Stand-in for a gym MuJoCo env: deterministic linear dynamics, quadratic reward, 6-step episodes."""
    def __init__(self, num_inputs=4, num_actions=2):
        self.A = np.eye(num_inputs) * 0.9
        self.B = np.ones((num_inputs, num_actions)) * 0.1
        self.t = 0
        self.s = None

    def reset(self):
        self.t = 0
        self.s = np.linspace(-1, 1, self.A.shape[0])
        return self.s.copy()

    def step(self, action):
        self.t += 1
        self.s = self.A @ self.s + self.B @ np.asarray(action, dtype=np.float64)
        reward = -float(np.sum(self.s ** 2)) - 0.01 * float(np.sum(np.square(action)))  # BREAK
        return self.s.copy(), reward, self.t >= 6, {}


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    action_mean, _, action_std = policy_net(Variable(state))  # BREAK
    action = torch.normal(action_mean, action_std)
    return action


def update_params(batch):
    rewards = torch.Tensor(batch.reward)
    masks = torch.Tensor(batch.mask)
    actions = torch.Tensor(np.concatenate(batch.action, 0))
    states = torch.Tensor(np.array(batch.state, dtype=np.float32))
    values = value_net(Variable(states))  # BREAK

    returns = torch.Tensor(actions.size(0),1)
    deltas = torch.Tensor(actions.size(0),1)
    advantages = torch.Tensor(actions.size(0),1)

    prev_return = 0
    prev_value = 0
    prev_advantage = 0
    for i in reversed(range(rewards.size(0))):
        returns[i] = rewards[i] + args.gamma * prev_return * masks[i]
        deltas[i] = rewards[i] + args.gamma * prev_value * masks[i] - values.data[i]
        advantages[i] = deltas[i] + args.gamma * args.tau * prev_advantage * masks[i]

        prev_return = returns[i, 0]
        prev_value = values.data[i, 0]
        prev_advantage = advantages[i, 0]

    targets = Variable(returns)  # BREAK

    # Original code uses the same LBFGS to optimize the value loss
    def get_value_loss(flat_params):
        set_flat_params_to(value_net, torch.Tensor(flat_params))
        for param in value_net.parameters():
            if param.grad is not None:
                param.grad.data.fill_(0)

        values_ = value_net(Variable(states))  # BREAK

        value_loss = (values_ - targets).pow(2).mean()

        # weight decay
        for param in value_net.parameters():
            value_loss += param.pow(2).sum() * args.l2_reg
        value_loss.backward()  # BREAK
        return (float(value_loss.data.double().numpy()), get_flat_grad_from(value_net).data.double().numpy())  # BREAK

    flat_params, _, opt_info = scipy.optimize.fmin_l_bfgs_b(get_value_loss, get_flat_params_from(value_net).double().numpy(), maxiter=25)
    set_flat_params_to(value_net, torch.Tensor(flat_params))

    advantages = (advantages - advantages.mean()) / advantages.std()

    action_means, action_log_stds, action_stds = policy_net(Variable(states))  # BREAK
    fixed_log_prob = normal_log_density(Variable(actions), action_means, action_log_stds, action_stds).data  # BREAK

    def get_loss(volatile=False):
        action_means, action_log_stds, action_stds = policy_net(Variable(states, volatile=volatile))  # BREAK
        log_prob = normal_log_density(Variable(actions), action_means, action_log_stds, action_stds)  # BREAK
        action_loss = -Variable(advantages) * torch.exp(log_prob - Variable(fixed_log_prob))  # BREAK
        return action_loss.mean()


    def get_kl():
        mean1, log_std1, std1 = policy_net(Variable(states))  # BREAK

        mean0 = Variable(mean1.data)  # BREAK
        log_std0 = Variable(log_std1.data)  # BREAK
        std0 = Variable(std1.data)  # BREAK
        kl = log_std1 - log_std0 + (std0.pow(2) + (mean0 - mean1).pow(2)) / (2.0 * std1.pow(2)) - 0.5
        return kl.sum(1)

    trpo_step(policy_net, get_loss, get_kl, args.max_kl, args.damping)


def reset_(states, num_inputs, seed):
    """Adaptation: restore both nets, seed NumPy/torch, rebuild the running filters."""
    global running_state, running_reward
    policy_net.load_state_dict(states[0])  # BREAK
    value_net.load_state_dict(states[1])  # BREAK
    np.random.seed(seed)
    torch.manual_seed(seed)  # BREAK
    running_state = ZFilter((num_inputs,), clip=5)
    running_reward = ZFilter((1,), demean=False, clip=10)


def trpo_iteration(env, states, i_episode=1, seed=543):
    reset_(states, env.A.shape[0], seed)
    memory = Memory()

    num_steps = 0
    reward_batch = 0
    num_episodes = 0
    while num_steps < args.batch_size:
        state = env.reset()
        state = running_state(state)

        reward_sum = 0
        for t in range(10000): # Don't infinite loop while learning
            action = select_action(state)
            action = action.data[0].numpy()
            next_state, reward, done, _ = env.step(action)
            reward_sum += reward

            next_state = running_state(next_state)

            mask = 1
            if done:
                mask = 0

            memory.push(state, np.array([action]), mask, next_state, reward)

            if args.render:
                env.render()
            if done:
                break

            state = next_state
        num_steps += (t-1)
        num_episodes += 1
        reward_batch += reward_sum

    reward_batch /= num_episodes
    batch = memory.sample()
    update_params(batch)

    if i_episode % args.log_interval == 0:
        print('Episode {}\tLast reward: {}\tAverage reward {:.2f}'.format(
            i_episode, reward_sum, reward_batch))
    return torch.tensor(reward_batch), get_flat_params_from(policy_net).clone(), get_flat_params_from(value_net).clone()


def target():
    global policy_net, value_net
    torch.manual_seed(args.seed)
    env = ToyEnv(num_inputs=4, num_actions=2)
    num_inputs = 4
    num_actions = 2
    policy_net = Policy(num_inputs, num_actions)
    value_net = Value(num_inputs)
    states = (copy.deepcopy(policy_net.state_dict()), copy.deepcopy(value_net.state_dict()))
    return [
        (trpo_iteration, (env, states), {}),
        (trpo_iteration, (env, states), {"i_episode": 2, "seed": 7}),
    ]


EXPECT = ("none: TRPO's update is host-driven numerics: a SciPy L-BFGS value fit through a NumPy closure, "
          "conjugate gradients that stop on `if rdotr < residual_tol` (a data-dependent early exit changing the "
          "result), a backtracking line search accepting on `.item()` ratios, NumPy `ZFilter`s and a gym-style "
          "rollout; no rewrite keeps this in graphs with the same outputs")
