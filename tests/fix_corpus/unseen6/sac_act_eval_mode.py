"""SAC evaluation action: under the custom context manager `with utils.eval_mode(agent):` (its `__enter__` records
`model.training` in a list and calls `model.train(False)`, `__exit__` restores), `agent.act(obs, sample=False)` builds
`torch.FloatTensor(obs)` from a NumPy observation, takes the mean of a `SquashedNormal` (a TransformedDistribution with a
custom `TanhTransform`), clamps with `*self.action_range`, asserts the shape and returns `utils.to_np(action[0])`
(`t.cpu().detach().numpy()`) (denisyarats/pytorch_sac, the revision with agent/actor.py and utils.py at the top level:
agent/sac.py: SACAgent.__init__/train/act; agent/actor.py: TanhTransform, SquashedNormal, DiagGaussianActor;
utils.py: eval_mode, to_np, mlp, weight_init; train.py: Workspace.evaluate's action selection). The critic, its
target network and the optimizers are left out of the agent (not used by `act`); the call is the body of
`evaluate`'s loop up to the action, for one NumPy observation (the environment is left out). `utils.weight_init`'s
orthogonal init is kept."""
import math

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torch import distributions as pyd


# ---- utils.py ----
class eval_mode(object):
    def __init__(self, *models):
        self.models = models

    def __enter__(self):
        self.prev_states = []
        for model in self.models:
            self.prev_states.append(model.training)
            model.train(False)

    def __exit__(self, *args):
        for model, state in zip(self.models, self.prev_states):
            model.train(state)
        return False


def weight_init(m):
    """Custom weight init for Conv2D and Linear layers."""
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight.data)
        if hasattr(m.bias, 'data'):
            m.bias.data.fill_(0.0)


def mlp(input_dim, hidden_dim, output_dim, hidden_depth, output_mod=None):
    if hidden_depth == 0:
        mods = [nn.Linear(input_dim, output_dim)]
    else:
        mods = [nn.Linear(input_dim, hidden_dim), nn.ReLU(inplace=True)]
        for i in range(hidden_depth - 1):
            mods += [nn.Linear(hidden_dim, hidden_dim), nn.ReLU(inplace=True)]
        mods.append(nn.Linear(hidden_dim, output_dim))
    if output_mod is not None:
        mods.append(output_mod)
    trunk = nn.Sequential(*mods)
    return trunk


def to_np(t):
    if t is None:
        return None
    elif t.nelement() == 0:
        return np.array([])
    else:
        return t.cpu().detach().numpy()


# ---- agent/actor.py ----
class TanhTransform(pyd.transforms.Transform):
    domain = pyd.constraints.real
    codomain = pyd.constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __init__(self, cache_size=1):
        super().__init__(cache_size=cache_size)

    @staticmethod
    def atanh(x):
        return 0.5 * (x.log1p() - (-x).log1p())

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        # We do not clamp to the boundary here as it may degrade the performance of certain algorithms.
        # one should use `cache_size=1` instead
        return self.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # We use a formula that is more numerically stable, see details in the following link
        # https://github.com/tensorflow/probability/commit/ef6bb176e0ebd1cf6e25c6b5cecdd2428c22963f#diff-e120f70e92e6741bca649f04fcd907b7
        return 2. * (math.log(2.) - x - F.softplus(-2. * x))


class SquashedNormal(pyd.transformed_distribution.TransformedDistribution):
    def __init__(self, loc, scale):
        self.loc = loc
        self.scale = scale

        self.base_dist = pyd.Normal(loc, scale)
        transforms = [TanhTransform()]
        super().__init__(self.base_dist, transforms)

    @property
    def mean(self):
        mu = self.loc
        for tr in self.transforms:
            mu = tr(mu)
        return mu


class DiagGaussianActor(nn.Module):
    """torch.distributions implementation of an diagonal Gaussian policy."""
    def __init__(self, obs_dim, action_dim, hidden_dim, hidden_depth,
                 log_std_bounds):
        super().__init__()

        self.log_std_bounds = log_std_bounds
        self.trunk = mlp(obs_dim, hidden_dim, 2 * action_dim,
                         hidden_depth)

        self.outputs = dict()
        self.apply(weight_init)

    def forward(self, obs):
        mu, log_std = self.trunk(obs).chunk(2, dim=-1)

        # constrain log_std inside [log_std_min, log_std_max]
        log_std = torch.tanh(log_std)
        log_std_min, log_std_max = self.log_std_bounds
        log_std = log_std_min + 0.5 * (log_std_max - log_std_min) * (log_std +
                                                                     1)

        std = log_std.exp()

        self.outputs['mu'] = mu
        self.outputs['std'] = std

        dist = SquashedNormal(mu, std)
        return dist


# ---- agent/sac.py ----
class SACAgent(object):
    """SAC algorithm (the parts `act` uses)."""
    def __init__(self, obs_dim, action_dim, action_range, device, actor_cfg, init_temperature):
        super().__init__()

        self.action_range = action_range
        self.device = torch.device(device)

        self.actor = DiagGaussianActor(**actor_cfg).to(self.device)

        self.log_alpha = torch.tensor(np.log(init_temperature)).to(self.device)
        self.log_alpha.requires_grad = True
        # set target entropy to -|A|
        self.target_entropy = -action_dim

        self.train()

    def train(self, training=True):
        self.training = training
        self.actor.train(training)

    @property
    def alpha(self):
        return self.log_alpha.exp()

    def act(self, obs, sample=False):
        obs = torch.FloatTensor(obs).to(self.device)
        obs = obs.unsqueeze(0)
        dist = self.actor(obs)
        action = dist.sample() if sample else dist.mean
        action = action.clamp(*self.action_range)
        assert action.ndim == 2 and action.shape[0] == 1
        return to_np(action[0])


# ---- train.py (Workspace.evaluate, the action selection) ----
def evaluate_action(agent, obs):
    with eval_mode(agent):  # NO BREAK in torch 2.13
        action = agent.act(obs, sample=False)
    return action


def target():
    torch.manual_seed(0)
    obs_dim, action_dim = 6, 2
    agent = SACAgent(obs_dim, action_dim, action_range=[-1.0, 1.0], device='cpu',
                     actor_cfg=dict(obs_dim=obs_dim, action_dim=action_dim, hidden_dim=16, hidden_depth=2,
                                    log_std_bounds=[-5, 2]),
                     init_temperature=0.1)
    obs1 = torch.randn(obs_dim).numpy().astype(np.float32)
    obs2 = torch.randn(obs_dim).numpy().astype(np.float32)
    return [
        (evaluate_action, (agent, obs1), {}),
        (evaluate_action, (agent, obs2), {}),
    ]


EXPECT = ("caller: the function takes and returns NumPy and flips module modes through a custom context manager; "
          "convert the observation with `torch.as_tensor` in the caller, compile only the actor's mean computation "
          "(`torch.tanh(mu)` of the trunk output, clamped) and call `.numpy()` on the result outside; `eval_mode` "
          "stays in the eager caller")
