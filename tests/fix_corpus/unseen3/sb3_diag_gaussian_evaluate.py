"""Stable-Baselines3 ActorCriticPolicy.evaluate_actions with a DiagGaussianDistribution: a
`torch.distributions.Normal(mean_actions, action_std)` built on every call (argument validation on by default),
then `log_prob(actions)` (sample validation) and `entropy()` in the PPO update's forward.

Origin: DLR-RM/stable-baselines3 `stable_baselines3/common/policies.py` (`ActorCriticPolicy.evaluate_actions`,
`_get_action_dist_from_latent`, `extract_features`), `stable_baselines3/common/torch_layers.py` (`MlpExtractor`,
`FlattenExtractor`) and `stable_baselines3/common/distributions.py` (`DiagGaussianDistribution`,
`sum_independent_dims`). gymnasium spaces are replaced by the observation/action sizes; a Box observation is
preprocessed with `.float()` as `preprocess_obs` does for Box spaces.
"""
from typing import Optional, Tuple

import torch as th
from torch import nn
from torch.distributions import Normal


def sum_independent_dims(tensor: th.Tensor) -> th.Tensor:
    """
    Continuous actions are usually considered to be independent,
    so we can sum components of the ``log_prob`` or the entropy.
    """
    if len(tensor.shape) > 1:
        tensor = tensor.sum(dim=1)
    else:
        tensor = tensor.sum()
    return tensor


class DiagGaussianDistribution:
    """
    Gaussian distribution with diagonal covariance matrix, for continuous actions.
    """

    def __init__(self, action_dim: int):
        super().__init__()
        self.distribution = None
        self.action_dim = action_dim
        self.mean_actions = None
        self.log_std = None

    def proba_distribution_net(self, latent_dim: int, log_std_init: float = 0.0) -> Tuple[nn.Module, nn.Parameter]:
        mean_actions = nn.Linear(latent_dim, self.action_dim)
        # TODO: allow action dependent std
        log_std = nn.Parameter(th.ones(self.action_dim) * log_std_init, requires_grad=True)
        return mean_actions, log_std

    def proba_distribution(self, mean_actions: th.Tensor, log_std: th.Tensor) -> "DiagGaussianDistribution":
        action_std = th.ones_like(mean_actions) * log_std.exp()
        self.distribution = Normal(mean_actions, action_std)  # NO BREAK in torch 2.13
        return self

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        log_prob = self.distribution.log_prob(actions)
        return sum_independent_dims(log_prob)

    def entropy(self) -> Optional[th.Tensor]:
        return sum_independent_dims(self.distribution.entropy())


class FlattenExtractor(nn.Module):
    def __init__(self, features_dim: int) -> None:
        super().__init__()
        self.features_dim = features_dim
        self.flatten = nn.Flatten()

    def forward(self, observations: th.Tensor) -> th.Tensor:
        return self.flatten(observations)


class MlpExtractor(nn.Module):
    def __init__(self, feature_dim: int, net_arch, activation_fn) -> None:
        super().__init__()
        policy_net, value_net = [], []
        last_layer_dim_pi = last_layer_dim_vf = feature_dim
        for curr_layer_dim in net_arch["pi"]:
            policy_net.append(nn.Linear(last_layer_dim_pi, curr_layer_dim))
            policy_net.append(activation_fn())
            last_layer_dim_pi = curr_layer_dim
        for curr_layer_dim in net_arch["vf"]:
            value_net.append(nn.Linear(last_layer_dim_vf, curr_layer_dim))
            value_net.append(activation_fn())
            last_layer_dim_vf = curr_layer_dim
        self.latent_dim_pi = last_layer_dim_pi
        self.latent_dim_vf = last_layer_dim_vf
        self.policy_net = nn.Sequential(*policy_net)
        self.value_net = nn.Sequential(*value_net)

    def forward(self, features: th.Tensor) -> Tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self.policy_net(features)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.value_net(features)


class ActorCriticPolicy(nn.Module):
    def __init__(self, obs_dim: int, action_dim: int, net_arch=None, activation_fn=nn.Tanh,
                 log_std_init: float = 0.0, share_features_extractor: bool = True):
        super().__init__()
        if net_arch is None:
            net_arch = dict(pi=[16, 16], vf=[16, 16])
        self.share_features_extractor = share_features_extractor
        self.features_extractor = FlattenExtractor(obs_dim)
        self.pi_features_extractor = self.features_extractor
        self.vf_features_extractor = self.features_extractor
        self.mlp_extractor = MlpExtractor(obs_dim, net_arch=net_arch, activation_fn=activation_fn)
        self.action_dist = DiagGaussianDistribution(action_dim)
        self.action_net, self.log_std = self.action_dist.proba_distribution_net(
            latent_dim=self.mlp_extractor.latent_dim_pi, log_std_init=log_std_init
        )
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)

    def extract_features(self, obs: th.Tensor, features_extractor: Optional[nn.Module] = None):
        if self.share_features_extractor:
            preprocessed_obs = obs.float()  # preprocess_obs for a Box space
            return self.features_extractor(preprocessed_obs)
        else:
            pi_features = self.pi_features_extractor(obs.float())
            vf_features = self.vf_features_extractor(obs.float())
            return pi_features, vf_features

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> DiagGaussianDistribution:
        """
        Retrieve action distribution given the latent codes.
        """
        mean_actions = self.action_net(latent_pi)

        if isinstance(self.action_dist, DiagGaussianDistribution):
            return self.action_dist.proba_distribution(mean_actions, self.log_std)
        else:
            raise ValueError("Invalid action distribution")

    def evaluate_actions(self, obs: th.Tensor, actions: th.Tensor) -> Tuple[th.Tensor, th.Tensor, Optional[th.Tensor]]:
        """
        Evaluate actions according to the current policy,
        given the observations.
        """
        # Preprocess the observation if needed
        features = self.extract_features(obs)
        if self.share_features_extractor:
            latent_pi, latent_vf = self.mlp_extractor(features)
        else:
            pi_features, vf_features = features
            latent_pi = self.mlp_extractor.forward_actor(pi_features)
            latent_vf = self.mlp_extractor.forward_critic(vf_features)
        distribution = self._get_action_dist_from_latent(latent_pi)
        log_prob = distribution.log_prob(actions)
        values = self.value_net(latent_vf)
        entropy = distribution.entropy()
        return values, log_prob, entropy


def target():
    th.manual_seed(0)
    policy = ActorCriticPolicy(obs_dim=6, action_dim=2)
    # a PPO minibatch: observations and the actions taken during the rollout
    return [
        (policy.evaluate_actions, (th.randn(8, 6), th.randn(8, 2)), {}),
        (policy.evaluate_actions, (th.randn(8, 6), th.randn(8, 2)), {}),
    ]


EXPECT = ("rewrite: build the Gaussian with `Normal(mean_actions, action_std, validate_args=False)` (or "
          "`Distribution.set_default_validate_args(False)` once): the per-call argument and sample validation "
          "checks are data-dependent")
