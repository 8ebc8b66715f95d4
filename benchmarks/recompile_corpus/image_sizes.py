"""Detection-style inputs whose height and width both change per image."""
import torch
from torch import nn

EXPECT = "fixed"


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, img):
        return self.conv(img).relu().amax(dim=(2, 3))


def target():
    torch.manual_seed(0)
    m = Backbone().eval()
    return [(m, (torch.randn(1, 3, h, w),), {}) for h, w in ((32, 40), (48, 36), (40, 56))]
