"""BYOL self-supervised training steps with a lazily created projector and target encoder
(lucidrains/byol-pytorch: `byol_pytorch/byol_pytorch.py`: `default`, `flatten`, `singleton`, `get_module_device`,
`set_requires_grad`, `loss_fn`, `RandomApply`, `EMA`, `update_moving_average`, `MLP`, `NetWrapper`, `BYOL`; the
README's training loop). `NetWrapper` finds the hidden layer (`type(self.layer) == int` → `[*self.net.children()]`),
registers a forward hook on first use (`if not self.hook_registered:`) that stores `flatten(output)` in a dict keyed
by `input[0].device`, clears and reads that dict around `self.net(x)` with an f-string `assert`, and builds its
projector through the `@singleton('projector')` decorator (a closure that `getattr`s the cache attribute and
`setattr`s it on first call, `projector.to(hidden)`). `BYOL.forward` asserts on `x.shape[0]`, applies two
augmentation pipelines (`RandomApply.forward`: `if random.random() > self.p: return x`), runs the online encoder
and predictor, and under `torch.no_grad()` the `@singleton('target_encoder')` `copy.deepcopy` of the online encoder
(`set_requires_grad(..., False)`), with in-place `detach_()` on its outputs. After `backward`/`step` the loop calls
`update_moving_average`, which reassigns `ma_params.data = ema_updater.update_average(old, new)` with an `if old is
None` branch.
Adaptations: torchvision's augmentations (`ColorJitter`, `RandomGrayscale`, `RandomHorizontalFlip`,
`GaussianBlur`, `RandomResizedCrop`, `Normalize`) are replaced by a small stand-in pipeline passed as `augment_fn`
(`RandomApply` of a brightness jitter and of a flip, then a fixed normalisation), since torchvision does not
import; the stored revision's `forward` signature lacks a comma after `return_projection = True` (a syntax error),
added here; the ResNet is a small CNN whose second-to-last child is the pooling layer (`hidden_layer=-2`); sizes are
shrunk (8x8 images, projection 16, hidden 32). So that a call repeats exactly, the called function (`train_steps`,
an adaptation) restores the learner (online/target encoders, projector, predictor) and optimizer from copies taken
in the factory and seeds `random` and torch (`reset_`); it returns the losses and the online embedding of the first
batch. The two calls use different batches and step counts."""
import copy
import random
from functools import wraps

import torch
from torch import nn
import torch.nn.functional as F

# helper functions

def default(val, def_val):
    return def_val if val is None else val

def flatten(t):
    return t.reshape(t.shape[0], -1)

def singleton(cache_key):
    def inner_fn(fn):
        @wraps(fn)
        def wrapper(self, *args, **kwargs):
            instance = getattr(self, cache_key)
            if instance is not None:
                return instance

            instance = fn(self, *args, **kwargs)
            setattr(self, cache_key, instance)
            return instance
        return wrapper
    return inner_fn

def get_module_device(module):
    return next(module.parameters()).device

def set_requires_grad(model, val):
    for p in model.parameters():
        p.requires_grad = val

# loss fn

def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)

# augmentation utils

class RandomApply(nn.Module):
    def __init__(self, fn, p):
        super().__init__()
        self.fn = fn
        self.p = p
    def forward(self, x):
        if random.random() > self.p:  # BREAK
            return x
        return self.fn(x)

# exponential moving average

class EMA():
    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def update_average(self, old, new):
        if old is None:
            return new
        return old * self.beta + (1 - self.beta) * new

def update_moving_average(ema_updater, ma_model, current_model):
    for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
        old_weight, up_weight = ma_params.data, current_params.data
        ma_params.data = ema_updater.update_average(old_weight, up_weight)

# MLP class for projector and predictor

def MLP(dim, projection_size, hidden_size=4096):
    return nn.Sequential(
        nn.Linear(dim, hidden_size),
        nn.BatchNorm1d(hidden_size),
        nn.ReLU(inplace=True),
        nn.Linear(hidden_size, projection_size)
    )

# a wrapper class for the base neural network
# will manage the interception of the hidden layer output
# and pipe it into the projecter and predictor nets

class NetWrapper(nn.Module):
    def __init__(self, net, projection_size, projection_hidden_size, layer = -2):
        super().__init__()
        self.net = net
        self.layer = layer

        self.projector = None
        self.projection_size = projection_size
        self.projection_hidden_size = projection_hidden_size

        self.hidden = {}
        self.hook_registered = False

    def _find_layer(self):
        if type(self.layer) == str:
            modules = dict([*self.net.named_modules()])
            return modules.get(self.layer, None)
        elif type(self.layer) == int:
            children = [*self.net.children()]
            return children[self.layer]
        return None

    def _hook(self, _, input, output):
        device = input[0].device
        self.hidden[device] = flatten(output)

    def _register_hook(self):
        layer = self._find_layer()
        assert layer is not None, f'hidden layer ({self.layer}) not found'
        handle = layer.register_forward_hook(self._hook)
        self.hook_registered = True

    @singleton('projector')
    def _get_projector(self, hidden):
        _, dim = hidden.shape
        projector = MLP(dim, self.projection_size, self.projection_hidden_size)
        return projector.to(hidden)

    def get_representation(self, x):
        if self.layer == -1:
            return self.net(x)

        if not self.hook_registered:
            self._register_hook()

        self.hidden.clear()
        _ = self.net(x)
        hidden = self.hidden[x.device]
        self.hidden.clear()

        assert hidden is not None, f'hidden layer {self.layer} never emitted an output'
        return hidden

    def forward(self, x, return_projection = True):
        representation = self.get_representation(x)

        if not return_projection:
            return representation

        projector = self._get_projector(representation)
        projection = projector(representation)
        return projection, representation

# main class

class BYOL(nn.Module):
    def __init__(
        self,
        net,
        image_size,
        hidden_layer = -2,
        projection_size = 256,
        projection_hidden_size = 4096,
        augment_fn = None,
        augment_fn2 = None,
        moving_average_decay = 0.99,
        use_momentum = True
    ):
        super().__init__()
        self.net = net

        self.augment1 = augment_fn
        self.augment2 = default(augment_fn2, self.augment1)

        self.online_encoder = NetWrapper(net, projection_size, projection_hidden_size, layer=hidden_layer)

        self.use_momentum = use_momentum
        self.target_encoder = None
        self.target_ema_updater = EMA(moving_average_decay)

        self.online_predictor = MLP(projection_size, projection_size, projection_hidden_size)

        # get device of network and make wrapper same device
        device = get_module_device(net)
        self.to(device)

        # send a mock image tensor to instantiate singleton parameters
        self.forward(torch.randn(2, 3, image_size, image_size, device=device))

    @singleton('target_encoder')
    def _get_target_encoder(self):
        target_encoder = copy.deepcopy(self.online_encoder)
        set_requires_grad(target_encoder, False)
        return target_encoder

    def reset_moving_average(self):
        del self.target_encoder
        self.target_encoder = None

    def update_moving_average(self):
        assert self.use_momentum, 'you do not need to update the moving average, since you have turned off momentum for the target encoder'
        assert self.target_encoder is not None, 'target encoder has not been created yet'
        update_moving_average(self.target_ema_updater, self.target_encoder, self.online_encoder)

    def forward(
        self,
        x,
        return_embedding = False,
        return_projection = True,
        training = True
    ):
        assert not (training and x.shape[0] == 1), 'you must have greater than 1 sample when training, due to the batchnorm in the projection layer'

        if return_embedding:
            return self.online_encoder(x, return_projection = return_projection)

        image_one, image_two = self.augment1(x), self.augment2(x)

        online_proj_one, _ = self.online_encoder(image_one)
        online_proj_two, _ = self.online_encoder(image_two)

        online_pred_one = self.online_predictor(online_proj_one)
        online_pred_two = self.online_predictor(online_proj_two)

        with torch.no_grad():
            target_encoder = self._get_target_encoder() if self.use_momentum else self.online_encoder
            target_proj_one, _ = target_encoder(image_one)
            target_proj_two, _ = target_encoder(image_two)
            target_proj_one.detach_()
            target_proj_two.detach_()

        loss_one = loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = loss_fn(online_pred_two, target_proj_one.detach())

        loss = loss_one + loss_two
        return loss.mean()


class Brightness(nn.Module):
    """Adaptation: stand-in for T.ColorJitter (brightness only)."""

    def forward(self, x):
        return x * (1 + 0.2 * torch.rand(x.shape[0], 1, 1, 1, device=x.device))


class HFlip(nn.Module):
    """Adaptation: stand-in for T.RandomHorizontalFlip (applied through RandomApply)."""

    def forward(self, x):
        return x.flip(-1)


class Normalize(nn.Module):
    """Adaptation: stand-in for T.Normalize."""

    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer('mean', torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer('std', torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x):
        return (x - self.mean) / self.std


def small_resnet():
    """Adaptation: small stand-in for torchvision's resnet50 (children[-2] is the pooling layer)."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Sequential(nn.Flatten(), nn.Linear(8, 10)),
    )


def reset_(learner, opt, learner_state, opt_state, seed):
    """Adaptation: restore learner and optimizer and seed the RNGs so that a call repeats exactly."""
    learner.load_state_dict(learner_state)  # BREAK
    opt.load_state_dict(opt_state)  # BREAK
    random.seed(seed)  # BREAK
    torch.manual_seed(seed)  # BREAK


def train_steps(learner, opt, learner_state, opt_state, batches, seed):
    reset_(learner, opt, learner_state, opt_state, seed)
    losses = []
    for images in batches:
        loss = learner(images)
        opt.zero_grad()
        loss.backward()
        opt.step()  # BREAK
        learner.update_moving_average() # update moving average of target encoder
        losses.append(loss.item())
    learner.eval()
    with torch.no_grad():
        projection, embedding = learner(batches[0], return_embedding = True)
    learner.train()
    return losses, embedding


def target():
    torch.manual_seed(0)
    random.seed(0)
    augment = nn.Sequential(
        RandomApply(Brightness(), p = 0.3),
        RandomApply(HFlip(), p = 0.5),
        Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    )
    learner = BYOL(small_resnet(), image_size = 8, hidden_layer = -2, projection_size = 16,
                   projection_hidden_size = 32, augment_fn = augment)
    opt = torch.optim.Adam(learner.parameters(), lr=3e-4)
    learner_state = copy.deepcopy(learner.state_dict())
    opt_state = copy.deepcopy(opt.state_dict())
    batches1 = [torch.rand(4, 3, 8, 8) for _ in range(2)]
    batches2 = [torch.rand(6, 3, 8, 8) for _ in range(3)]
    return [
        (train_steps, (learner, opt, learner_state, opt_state, batches1, 1), {}),
        (train_steps, (learner, opt, learner_state, opt_state, batches2, 2), {}),
    ]


EXPECT = ("caller: the training loop (`backward`/`step`, `update_moving_average` reassigning `.data`, "
          "`loss.item()`) stays eager; `BYOL.forward` itself has Python-random augmentation decisions "
          "(`RandomApply`: `random.random()`), a forward hook writing into a dict and `singleton` caches that "
          "`setattr` on first call; after warm-up the caches are plain attribute reads, so the expected sites are "
          "the `random.random()` calls and the hook/dict traffic (none for the random draws: they must stay on "
          "the host; hatch or split the augmentation out of the compiled region)")
