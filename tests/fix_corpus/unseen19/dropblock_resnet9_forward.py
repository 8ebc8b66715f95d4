"""DropBlock with its linear drop-probability scheduler inside a ResNet forward, from miguelvr/dropblock
(`dropblock/dropblock.py` `DropBlock2D`/`DropBlock3D`, stored revision fb9b8c6; `dropblock/scheduler.py`
`LinearScheduler`; `examples/resnet-cifar10.py` `ResNetCustom`/`resnet9`). `ResNetCustom.forward` calls
`self.dropblock.step()` on every forward (`LinearScheduler.step` reads `self.drop_values[self.i]`, a NumPy
`linspace` element, into the module attribute `drop_prob` and increments the Python counter `self.i`), then applies
the scheduled `DropBlock2D` after `layer1` and `layer2`; `DropBlock2D.forward` asserts the rank, returns early when
`not self.training or self.drop_prob == 0.`, samples a Bernoulli mask with `torch.rand(x.shape[0], *x.shape[2:]) <
gamma`, max-pools it into blocks and rescales by `block_mask.numel() / block_mask.sum()`.
Adaptations: torchvision does not import here, so `torchvision.models.resnet.BasicBlock` and the
`ResNet._make_layer` that `ResNetCustom` inherits are minimal stand-ins written from the collector's knowledge of
torchvision (same structure: 3x3 convs, BatchNorm, ReLU, a 1x1 downsample when the shape changes); the ignite
training engine, CIFAR-10 loading and argument parsing of the example are not used. `nr_steps=5e3` is shrunk to `4`
so that the drop probability grows within a few calls. The called function is the original `ResNetCustom.forward`,
passed unbound with one of two `resnet9` models made in the factory (the second a copy of the first whose scheduler
was stepped twice); they run in training mode, so `forward` changes BatchNorm statistics and the scheduler counter,
and a call repeats exactly only on a fresh copy. Randomness: `torch.rand` draws from torch's global generator,
seeded in the factory only."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- dropblock/dropblock.py
class DropBlock2D(nn.Module):
    r"""Randomly zeroes 2D spatial blocks of the input tensor.

    As described in the paper
    `DropBlock: A regularization method for convolutional networks`_ ,
    dropping whole blocks of feature map allows to remove semantic
    information as compared to regular dropout.

    Args:
        drop_prob (float): probability of an element to be dropped.
        block_size (int): size of the block to drop

    Shape:
        - Input: `(N, C, H, W)`
        - Output: `(N, C, H, W)`
    """

    def __init__(self, drop_prob, block_size):
        super(DropBlock2D, self).__init__()

        self.drop_prob = drop_prob
        self.block_size = block_size

    def forward(self, x):
        # shape: (bsize, channels, height, width)

        assert x.dim() == 4, \
            "Expected input with 4 dimensions (bsize, channels, height, width)"

        if not self.training or self.drop_prob == 0.:  # BREAK
            return x
        else:
            # get gamma value
            gamma = self._compute_gamma(x)

            # sample mask
            mask = (torch.rand(x.shape[0], *x.shape[2:]) < gamma).float()

            # place mask on input device
            mask = mask.to(x.device)

            # compute block mask
            block_mask = self._compute_block_mask(mask)

            # apply block mask
            out = x * block_mask[:, None, :, :]

            # scale output
            out = out * block_mask.numel() / block_mask.sum()

            return out

    def _compute_block_mask(self, mask):
        block_mask = F.max_pool2d(input=mask[:, None, :, :],
                                  kernel_size=(self.block_size, self.block_size),
                                  stride=(1, 1),
                                  padding=self.block_size // 2)

        if self.block_size % 2 == 0:
            block_mask = block_mask[:, :, :-1, :-1]

        block_mask = 1 - block_mask.squeeze(1)

        return block_mask

    def _compute_gamma(self, x):
        return self.drop_prob / (self.block_size ** 2)


# ---- dropblock/scheduler.py
class LinearScheduler(nn.Module):
    def __init__(self, dropblock, start_value, stop_value, nr_steps):
        super(LinearScheduler, self).__init__()
        self.dropblock = dropblock
        self.i = 0
        self.drop_values = np.linspace(start=start_value, stop=stop_value, num=int(nr_steps))

    def forward(self, x):
        return self.dropblock(x)

    def step(self):
        if self.i < len(self.drop_values):
            self.dropblock.drop_prob = self.drop_values[self.i]

        self.i += 1


# ---- stand-ins for torchvision.models.resnet (torchvision does not import here)
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)


# ---- examples/resnet-cifar10.py
class ResNetCustom(ResNet):

    def __init__(self, block, layers, num_classes=1000, drop_prob=0., block_size=5):
        super(ResNet, self).__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3,
                               bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.dropblock = LinearScheduler(
            DropBlock2D(drop_prob=drop_prob, block_size=block_size),
            start_value=0.,
            stop_value=drop_prob,
            nr_steps=4
        )
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        self.dropblock.step()  # increment number of iterations

        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)

        x = self.dropblock(self.layer1(x))
        x = self.dropblock(self.layer2(x))
        x = self.layer3(x)
        x = self.layer4(x)

        x = self.avgpool(x)
        x = x.view(x.shape[0], -1)
        x = self.fc(x)

        return x


def resnet9(**kwargs):
    return ResNetCustom(BasicBlock, [1, 1, 1, 1], **kwargs)


def target():
    torch.manual_seed(0)
    model = resnet9(num_classes=10, drop_prob=0.3, block_size=3)
    model.train()
    stepped = copy.deepcopy(model)
    stepped.dropblock.step()
    stepped.dropblock.step()
    x1 = torch.randn(2, 3, 32, 32)
    x2 = torch.randn(3, 3, 32, 32)
    return [
        (ResNetCustom.forward, (model, x1), {}),
        (ResNetCustom.forward, (stepped, x2), {}),
    ]


EXPECT = ("extract: the scheduler step (a NumPy array read into a module attribute and a Python counter) is "
          "bookkeeping that belongs outside the compiled forward; the DropBlock mask itself is tensor code")
