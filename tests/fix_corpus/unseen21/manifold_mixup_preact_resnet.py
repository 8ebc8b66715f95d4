"""Manifold Mixup inside the model's forward, from vikasverma1077/manifold_mixup (`supervised/preact_resnet.py`,
stored revision 5e759dd, one of two stored revisions; `supervised/utils.py` `to_one_hot`, `mixup_process`, stored
revision f14738c). `PreActResNet.forward` picks the mixing layer with Python's `random.randint(0,2)` when
`layer_mix == 'rand'` and `mixup_hidden` is set, builds a one-hot target with the legacy `torch.FloatTensor(...)`
constructor, `.zero_()`, `scatter_` of `inp.unsqueeze(1).data.cpu()` and a `Variable`, and mixes the hidden state of
the chosen layer in `mixup_process` with a NumPy permutation (`np.random.permutation(out.size(0))`) used as an index;
`lam` is a one-element tensor expanded over the batch. The blocks use `hasattr(self, 'shortcut')`.
Adaptations: `to_one_hot` returned `Variable(y_onehot.cuda(), ...)`; `.cuda()` is dropped (CPU only). Only the
utilities the model uses are kept from `utils.py` (`to_var`, `denorm`, `make_dir_if_not_exists` left out). Sizes:
`initial_channels` 8 (the training script's default is larger), 32x32 inputs, batch 4, 10 classes. The mixing weight
`lam` is made in the factory as the training script does (a NumPy Beta draw turned into a float32 one-element
tensor; `train_classifier_mixup.py` was not read, this step is from the collector's knowledge). Randomness: Python's
`random` and NumPy's global generator, seeded in the factory only. The model runs in training mode (batch
statistics), so its calls repeat on the same object."""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


# ---- supervised/utils.py
def to_one_hot(inp,num_classes):
    y_onehot = torch.FloatTensor(inp.size(0), num_classes)
    y_onehot.zero_()

    y_onehot.scatter_(1, inp.unsqueeze(1).data.cpu(), 1)
    
    return Variable(y_onehot,requires_grad=False)  # BREAK


def mixup_process(out, target_reweighted,lam):

    indices = np.random.permutation(out.size(0))  # BREAK
    out = out*lam.expand_as(out) + out[indices]*(1-lam.expand_as(out))
    target_shuffled_onehot = target_reweighted[indices]
    target_reweighted = target_reweighted * lam.expand_as(target_reweighted) + target_shuffled_onehot * (1 - lam.expand_as(target_reweighted))
    return out, target_reweighted


# ---- supervised/preact_resnet.py
class PreActBlock(nn.Module):
    '''Pre-activation version of the BasicBlock.'''
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(PreActBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)

        if stride != 1 or in_planes != self.expansion*planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion*planes, kernel_size=1, stride=stride, bias=False)
            )

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, 'shortcut') else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class PreActResNet(nn.Module):
    def __init__(self, block, num_blocks, mixup_hidden, initial_channels, num_classes):
        super(PreActResNet, self).__init__()
        self.in_planes = initial_channels

        self.mixup_hidden = mixup_hidden
        self.num_classes = num_classes

        self.conv1 = nn.Conv2d(3, initial_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.layer1 = self._make_layer(block, initial_channels, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, initial_channels*2, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, initial_channels*4, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, initial_channels*8, num_blocks[3], stride=2)
        self.linear = nn.Linear(initial_channels*8*block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1]*(num_blocks-1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def compute_h1(self,x):
        out = x
        out = self.conv1(out)
        out = self.layer1(out)
        return out

    def compute_h2(self,x):
        out = x
        out = self.conv1(out)
        out = self.layer1(out)
        out = self.layer2(out)
        return out

    def forward(self, x, lam=None, target=None, target_reweighted=None, layer_mix='rand'):

        if layer_mix == 'rand':
            if self.mixup_hidden:
                layer_mix = random.randint(0,2)
            else:
                layer_mix = 0

        out = x

        if lam is not None:
            if target_reweighted is None:
                target_reweighted = to_one_hot(target,self.num_classes)
            else:
                assert target is None
            if layer_mix == 0:
                out, target_reweighted = mixup_process(out, target_reweighted, lam)

        out = self.conv1(out)
        out = self.layer1(out)

        if lam is not None and layer_mix == 1:
            out, target_reweighted = mixup_process(out, target_reweighted, lam=lam)

        out = self.layer2(out)

        if lam is not None and layer_mix == 2:
            out, target_reweighted = mixup_process(out, target_reweighted, lam=lam)

        out = self.layer3(out)
        out = self.layer4(out)
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        out = self.linear(out)

        if lam is None:
            return out
        else:
            return out, target_reweighted


def PreActResNet18(mixup_hidden,initial_channels,num_classes):
    return PreActResNet(PreActBlock, [2,2,2,2],mixup_hidden,initial_channels,num_classes)


def target():
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    net = PreActResNet18(mixup_hidden=True, initial_channels=8, num_classes=10)
    net.train()
    x1 = torch.randn(4, 3, 32, 32)
    y1 = torch.randint(0, 10, (4,))
    lam1 = Variable(torch.from_numpy(np.array([np.random.beta(2.0, 2.0)]).astype('float32')))
    x2 = torch.randn(4, 3, 32, 32)
    y2 = torch.randint(0, 10, (4,))
    lam2 = Variable(torch.from_numpy(np.array([np.random.beta(2.0, 2.0)]).astype('float32')))
    return [
        (net, (x1,), {"lam": lam1, "target": y1}),
        (net, (x2,), {"lam": lam2, "target": y2}),
        (net, (x2,), {}),
    ]


EXPECT = ("none: the mixing layer is chosen by Python's `random.randint` and the batch permutation is a NumPy draw "
          "(`np.random.permutation`), both host RNG state that a compiled graph cannot reproduce without changing "
          "the random stream; the legacy `torch.FloatTensor(n, c)` one-hot constructor could be rewritten "
          "(`torch.zeros`), but the host draws must stay eager")
