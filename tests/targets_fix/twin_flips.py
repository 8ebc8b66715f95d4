"""Two augmentation classes whose `forward`s break on the same line of code (torchvision's
RandomHorizontalFlip/RandomVerticalFlip shape): two sites, same text, same function name."""
import torch
from torch import nn


class HFlip(nn.Module):
    def forward(self, img):
        if torch.rand(1) < 0.5:  # H
            return torch.flip(img, dims=[-1])
        return img


class VFlip(nn.Module):
    def forward(self, img):
        if torch.rand(1) < 0.5:  # V
            return torch.flip(img, dims=[-2])
        return img


class Augment(nn.Module):
    def __init__(self):
        super().__init__()
        self.h, self.v = HFlip(), VFlip()

    def forward(self, img):
        return self.v(self.h(img)) * 2


def target():
    torch.manual_seed(0)
    return [(Augment(), (torch.randn(2, 3, 4, 4),), {})]
