"""Loss criteria of wolny/pytorch-3dunet (`pytorch3dunet/unet3d/losses.py`, the stored revision: `get_loss_criterion`
(an `if/elif` chain on the configured name, `loss_config.get(...)` defaults, `torch.tensor(weight).to(device)`),
`compute_per_channel_dice` (`target.clone().ne_(ignore_index)` mask with `requires_grad = False`, `flatten`),
`DiceLoss` (sigmoid/softmax normalisation module, `Variable(self.weight, requires_grad=False)`, `skip_last_target`
slice), `GeneralizedDiceLoss` (class weights `1 / (target_sum * target_sum).clamp(...)` wrapped in `Variable`),
`WeightedCrossEntropyLoss` (`_class_weights` staticmethod using `F.softmax(input, _stacklevel=5)` with the implicit
dimension), `BCELossWrapper` (`hasattr` check, masked inputs), `PixelWiseCrossEntropyLoss` (`expand_as_one_hot`,
`Variable(target.data.ne(...).float())`, `register_buffer('class_weights', ...)` inside `forward` when none were
given, `view(1, -1, 1, 1, 1)`), `MSEWithLogitsLoss`, `WeightedSmoothL1Loss` (boolean-mask read-modify-write
`l1[mask] = l1[mask] * self.weight`), `flatten` (`permute` with a computed axis order)).
Adaptations: `expand_as_one_hot` (`pytorch3dunet/unet3d/utils.py`, not opened) is written from the collector's
knowledge (unsqueeze, scatter into a zero tensor, optional `ignore_index` mask written back); `ContrastiveLoss`
(`pytorch3dunet/embeddings/contrastive_loss.py`) is a stub (its branch is not configured); the called function
`compute_losses` is a stand-in for the trainer's use of the criterion (`pytorch3dunet/unet3d/trainer.py`, not
opened here): for every configuration it builds the criterion with `get_loss_criterion(config)` and applies it to
the network output and the target form the loss expects. Sizes are small (one volume of 3 channels, 4x6x6, per call: `PixelWiseCrossEntropyLoss`'s
`weights.unsqueeze(0).expand_as(input)` only fits a batch of one). No
randomness and no module state survive a call (criteria are built in the call); it returns the losses by name."""
import torch
import torch.nn.functional as F
from torch import nn as nn
from torch.autograd import Variable
from torch.nn import MSELoss, SmoothL1Loss, L1Loss


# ---- stand-ins: pytorch3dunet.embeddings.contrastive_loss.ContrastiveLoss, pytorch3dunet.unet3d.utils.expand_as_one_hot
class ContrastiveLoss(nn.Module):
    def __init__(self, *args):
        raise NotImplementedError("stub: not configured in this program")


def expand_as_one_hot(input, C, ignore_index=None):
    assert input.dim() == 4
    # expand the input tensor to Nx1xDxHxW before scattering
    input = input.unsqueeze(1)
    # create result tensor shape (NxCxDxHxW)
    shape = list(input.size())
    shape[1] = C
    if ignore_index is not None:
        # create ignore_index mask for the result
        mask = input.expand(shape) == ignore_index
        # clone the lbl tensor and zero out ignore_index in the input
        input = input.clone()
        input[input == ignore_index] = 0
        # scatter to get the one-hot tensor
        result = torch.zeros(shape).to(input.device).scatter_(1, input, 1)
        # bring back the ignore_index in the result
        result[mask] = ignore_index
        return result
    else:
        # scatter to get the one-hot tensor
        return torch.zeros(shape).to(input.device).scatter_(1, input, 1)


# ---- pytorch3dunet/unet3d/losses.py
def compute_per_channel_dice(input, target, epsilon=1e-5, ignore_index=None, weight=None):
    # assumes that input is a normalized probability

    # input and target shapes must match
    assert input.size() == target.size(), "'input' and 'target' must have the same shape"

    # mask ignore_index if present
    if ignore_index is not None:
        mask = target.clone().ne_(ignore_index)
        mask.requires_grad = False  # BREAK

        input = input * mask
        target = target * mask

    input = flatten(input)
    target = flatten(target)

    target = target.float()
    # Compute per channel Dice Coefficient
    intersect = (input * target).sum(-1)
    if weight is not None:
        intersect = weight * intersect

    denominator = (input + target).sum(-1)
    return 2. * intersect / denominator.clamp(min=epsilon)


class DiceLoss(nn.Module):
    """Computes Dice Loss, which just 1 - DiceCoefficient described above.
    Additionally allows per-class weights to be provided.
    """

    def __init__(self, epsilon=1e-5, weight=None, ignore_index=None, sigmoid_normalization=True,
                 skip_last_target=False):
        super(DiceLoss, self).__init__()
        self.epsilon = epsilon
        self.register_buffer('weight', weight)
        self.ignore_index = ignore_index
        if sigmoid_normalization:
            self.normalization = nn.Sigmoid()
        else:
            self.normalization = nn.Softmax(dim=1)
        # if True skip the last channel in the target
        self.skip_last_target = skip_last_target

    def forward(self, input, target):
        # get probabilities from logits
        input = self.normalization(input)
        if self.weight is not None:
            weight = Variable(self.weight, requires_grad=False)  # BREAK
        else:
            weight = None

        if self.skip_last_target:
            target = target[:, :-1, ...]

        per_channel_dice = compute_per_channel_dice(input, target, epsilon=self.epsilon, ignore_index=self.ignore_index,
                                                    weight=weight)
        # Average the Dice score across all channels/classes
        return torch.mean(1. - per_channel_dice)


class GeneralizedDiceLoss(nn.Module):
    """Computes Generalized Dice Loss (GDL) as described in https://arxiv.org/pdf/1707.03237.pdf
    """

    def __init__(self, epsilon=1e-5, weight=None, ignore_index=None, sigmoid_normalization=True):
        super(GeneralizedDiceLoss, self).__init__()
        self.epsilon = epsilon
        self.register_buffer('weight', weight)
        self.ignore_index = ignore_index
        if sigmoid_normalization:
            self.normalization = nn.Sigmoid()
        else:
            self.normalization = nn.Softmax(dim=1)

    def forward(self, input, target):
        # get probabilities from logits
        input = self.normalization(input)

        assert input.size() == target.size(), "'input' and 'target' must have the same shape"

        # mask ignore_index if present
        if self.ignore_index is not None:
            mask = target.clone().ne_(self.ignore_index)
            mask.requires_grad = False

            input = input * mask
            target = target * mask

        input = flatten(input)
        target = flatten(target)

        target = target.float()
        target_sum = target.sum(-1)
        class_weights = Variable(1. / (target_sum * target_sum).clamp(min=self.epsilon), requires_grad=False)  # BREAK

        intersect = (input * target).sum(-1) * class_weights
        if self.weight is not None:
            weight = Variable(self.weight, requires_grad=False)
            intersect = weight * intersect
        intersect = intersect.sum()

        denominator = ((input + target).sum(-1) * class_weights).sum()

        return 1. - 2. * intersect / denominator.clamp(min=self.epsilon)


class WeightedCrossEntropyLoss(nn.Module):
    """WeightedCrossEntropyLoss (WCE) as described in https://arxiv.org/pdf/1707.03237.pdf
    """

    def __init__(self, weight=None, ignore_index=-1):
        super(WeightedCrossEntropyLoss, self).__init__()
        self.register_buffer('weight', weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        class_weights = self._class_weights(input)
        if self.weight is not None:
            weight = Variable(self.weight, requires_grad=False)
            class_weights = class_weights * weight
        return F.cross_entropy(input, target, weight=class_weights, ignore_index=self.ignore_index)

    @staticmethod
    def _class_weights(input):
        # normalize the input first
        input = F.softmax(input, _stacklevel=5)
        flattened = flatten(input)
        nominator = (1. - flattened).sum(-1)
        denominator = flattened.sum(-1)
        class_weights = Variable(nominator / denominator, requires_grad=False)  # BREAK
        return class_weights


class BCELossWrapper:
    """
    Wrapper around BCE loss functions allowing to pass 'ignore_index' as well as 'skip_last_target' option.
    """

    def __init__(self, loss_criterion, ignore_index=-1, skip_last_target=False):
        if hasattr(loss_criterion, 'ignore_index'):
            raise RuntimeError(f"Cannot wrap {type(loss_criterion)}. Use 'ignore_index' attribute instead")
        self.loss_criterion = loss_criterion
        self.ignore_index = ignore_index
        self.skip_last_target = skip_last_target

    def __call__(self, input, target):
        if self.skip_last_target:
            target = target[:, :-1, ...]

        assert input.size() == target.size()

        masked_input = input
        masked_target = target
        if self.ignore_index is not None:
            mask = target.clone().ne_(self.ignore_index)
            mask.requires_grad = False  # BREAK

            masked_input = input * mask
            masked_target = target * mask

        return self.loss_criterion(masked_input, masked_target)


class PixelWiseCrossEntropyLoss(nn.Module):
    def __init__(self, class_weights=None, ignore_index=None):
        super(PixelWiseCrossEntropyLoss, self).__init__()
        self.register_buffer('class_weights', class_weights)
        self.ignore_index = ignore_index
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, target, weights):
        assert target.size() == weights.size()
        # normalize the input
        log_probabilities = self.log_softmax(input)
        # standard CrossEntropyLoss requires the target to be (NxDxHxW), so we need to expand it to (NxCxDxHxW)
        target = expand_as_one_hot(target, C=input.size()[1], ignore_index=self.ignore_index)
        # expand weights
        weights = weights.unsqueeze(0)
        weights = weights.expand_as(input)

        # mask ignore_index if present
        if self.ignore_index is not None:
            mask = Variable(target.data.ne(self.ignore_index).float(), requires_grad=False)  # BREAK
            log_probabilities = log_probabilities * mask
            target = target * mask

        # create default class_weights if None
        if self.class_weights is None:
            class_weights = torch.ones(input.size()[1]).float().to(input.device)
            self.register_buffer('class_weights', class_weights)

        # resize class_weights to be broadcastable into the weights
        class_weights = self.class_weights.view(1, -1, 1, 1, 1)

        # multiply weights tensor by class weights
        weights = class_weights * weights

        # compute the losses
        result = -weights * target * log_probabilities
        # average the losses
        return result.mean()


class MSEWithLogitsLoss(MSELoss):
    """
    This loss combines a `Sigmoid` layer and the `MSELoss` in one single class.
    """

    def __init__(self):
        super(MSEWithLogitsLoss, self).__init__()
        self.sigmoid = nn.Sigmoid()

    def forward(self, input, target):
        return super().forward(self.sigmoid(input), target)


class WeightedSmoothL1Loss(nn.SmoothL1Loss):
    def __init__(self, threshold, initial_weight, apply_below_threshold=True):
        super().__init__(reduction="none")
        self.threshold = threshold
        self.apply_below_threshold = apply_below_threshold
        self.weight = initial_weight

    def forward(self, input, target):
        l1 = super().forward(input, target)

        if self.apply_below_threshold:
            mask = target < self.threshold
        else:
            mask = target >= self.threshold

        l1[mask] = l1[mask] * self.weight  # BREAK

        return l1.mean()


def flatten(tensor):
    """Flattens a given tensor such that the channel axis is first.
    The shapes are transformed as follows:
       (N, C, D, H, W) -> (C, N * D * H * W)
    """
    C = tensor.size(1)
    # new axis order
    axis_order = (1, 0) + tuple(range(2, tensor.dim()))
    # Transpose: (N, C, D, H, W) -> (C, N, D, H, W)
    transposed = tensor.permute(axis_order)
    # Flatten: (C, N, D, H, W) -> (C, N * D * H * W)
    return transposed.contiguous().view(C, -1)


SUPPORTED_LOSSES = ['BCEWithLogitsLoss', 'CrossEntropyLoss', 'WeightedCrossEntropyLoss', 'PixelWiseCrossEntropyLoss',
                    'GeneralizedDiceLoss', 'DiceLoss', 'TagsAngularLoss', 'MSEWithLogitsLoss', 'MSELoss',
                    'SmoothL1Loss', 'L1Loss', 'WeightedSmoothL1Loss']


def get_loss_criterion(config):
    """
    Returns the loss function based on provided configuration
    :param config: (dict) a top level configuration object containing the 'loss' key
    :return: an instance of the loss function
    """
    assert 'loss' in config, 'Could not find loss function configuration'
    loss_config = config['loss']
    name = loss_config['name']

    ignore_index = loss_config.get('ignore_index', None)
    weight = loss_config.get('weight', None)

    if weight is not None:
        # convert to cuda tensor if necessary
        weight = torch.tensor(weight).to(config['device'])

    if name == 'BCEWithLogitsLoss':
        skip_last_target = loss_config.get('skip_last_target', False)
        if ignore_index is None and not skip_last_target:
            return nn.BCEWithLogitsLoss()
        else:
            return BCELossWrapper(nn.BCEWithLogitsLoss(), ignore_index=ignore_index, skip_last_target=skip_last_target)
    elif name == 'CrossEntropyLoss':
        if ignore_index is None:
            ignore_index = -100  # use the default 'ignore_index' as defined in the CrossEntropyLoss
        return nn.CrossEntropyLoss(weight=weight, ignore_index=ignore_index)  # BREAK
    elif name == 'WeightedCrossEntropyLoss':
        if ignore_index is None:
            ignore_index = -100  # use the default 'ignore_index' as defined in the CrossEntropyLoss
        return WeightedCrossEntropyLoss(weight=weight, ignore_index=ignore_index)
    elif name == 'PixelWiseCrossEntropyLoss':
        return PixelWiseCrossEntropyLoss(class_weights=weight, ignore_index=ignore_index)
    elif name == 'GeneralizedDiceLoss':
        return GeneralizedDiceLoss(weight=weight, ignore_index=ignore_index)
    elif name == 'DiceLoss':
        sigmoid_normalization = loss_config.get('sigmoid_normalization', True)
        skip_last_target = loss_config.get('skip_last_target', False)
        return DiceLoss(weight=weight, ignore_index=ignore_index, sigmoid_normalization=sigmoid_normalization,
                        skip_last_target=skip_last_target)
    elif name == 'MSEWithLogitsLoss':
        return MSEWithLogitsLoss()
    elif name == 'MSELoss':
        return MSELoss()
    elif name == 'SmoothL1Loss':
        return SmoothL1Loss()
    elif name == 'L1Loss':
        return L1Loss()
    elif name == 'ContrastiveLoss':
        return ContrastiveLoss(loss_config['delta_var'], loss_config['delta_dist'], loss_config['norm'],
                               loss_config['alpha'], loss_config['beta'], loss_config['gamma'])
    elif name == 'WeightedSmoothL1Loss':
        return WeightedSmoothL1Loss(threshold=loss_config['threshold'], initial_weight=loss_config['initial_weight'],
                                    apply_below_threshold=loss_config.get('apply_below_threshold', True))
    else:
        raise RuntimeError(f"Unsupported loss function: '{name}'. Supported losses: {SUPPORTED_LOSSES}")


# ---- stand-in for the trainer's use of the criterion
def compute_losses(configs, output, seg, weight_map, regression_target):
    results = {}
    for config in configs:
        loss_criterion = get_loss_criterion(config)
        name = config['loss']['name']
        if name in ('CrossEntropyLoss', 'WeightedCrossEntropyLoss'):
            loss = loss_criterion(output, seg)
        elif name == 'PixelWiseCrossEntropyLoss':
            loss = loss_criterion(output, seg, weight_map)
        elif name in ('WeightedSmoothL1Loss', 'MSEWithLogitsLoss', 'MSELoss', 'SmoothL1Loss', 'L1Loss'):
            loss = loss_criterion(output, regression_target)
        else:
            onehot = expand_as_one_hot(seg, C=output.size()[1], ignore_index=config['loss'].get('ignore_index'))
            loss = loss_criterion(output, onehot)
        results[name] = loss
    return results


def target():
    torch.manual_seed(0)
    dev = 'cpu'
    configs1 = [
        {'device': dev, 'loss': {'name': 'DiceLoss', 'weight': [1.0, 2.0, 0.5]}},
        {'device': dev, 'loss': {'name': 'GeneralizedDiceLoss', 'sigmoid_normalization': False}},
        {'device': dev, 'loss': {'name': 'WeightedCrossEntropyLoss'}},
        {'device': dev, 'loss': {'name': 'PixelWiseCrossEntropyLoss'}},
        {'device': dev, 'loss': {'name': 'WeightedSmoothL1Loss', 'threshold': 0.0, 'initial_weight': 0.3}},
    ]
    configs2 = [
        {'device': dev, 'loss': {'name': 'DiceLoss', 'sigmoid_normalization': False, 'ignore_index': -1}},
        {'device': dev, 'loss': {'name': 'BCEWithLogitsLoss', 'ignore_index': -1}},
        {'device': dev, 'loss': {'name': 'CrossEntropyLoss', 'weight': [0.2, 1.0, 1.0], 'ignore_index': -1}},
        {'device': dev, 'loss': {'name': 'PixelWiseCrossEntropyLoss', 'ignore_index': -1, 'weight': [1.0, 1.0, 3.0]}},
        {'device': dev, 'loss': {'name': 'MSEWithLogitsLoss'}},
    ]

    def volume(n):
        output = torch.randn(n, 3, 4, 6, 6)
        seg = torch.randint(0, 3, (n, 4, 6, 6))
        return output, seg, torch.rand(n, 4, 6, 6), torch.randn(n, 3, 4, 6, 6)

    out1, seg1, w1, r1 = volume(1)
    out2, seg2, w2, r2 = volume(1)
    seg2[:, 0, 0, :3] = -1
    return [
        (compute_losses, (configs1, out1, seg1, w1, r1), {}),
        (compute_losses, (configs2, out2, seg2, w2, r2), {}),
    ]


EXPECT = ("rewrite: the criteria are tensor code; `WeightedSmoothL1Loss`'s `l1[mask] = l1[mask] * self.weight` is "
          "a value select (`torch.where(mask, l1 * self.weight, l1)`), and `PixelWiseCrossEntropyLoss` registering "
          "a buffer inside `forward` when no class weights were configured can use a local ones tensor instead")
