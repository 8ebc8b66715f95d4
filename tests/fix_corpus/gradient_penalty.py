"""WGAN-GP gradient penalty with `torch.autograd.grad` (adapted from GAN training code)."""
import torch


class Critic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))

    def forward(self, real, fake):
        with torch.enable_grad():
            eps = torch.full((real.shape[0], 1), 0.3)
            mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
            score = self.net(mix)
            g = torch.autograd.grad(score.sum(), mix, create_graph=True)[0]  # BREAK
        return ((g.norm(dim=1) - 1) ** 2).mean().detach()


def target():
    torch.manual_seed(0)
    return [(Critic(), (torch.randn(3, 4), torch.randn(3, 4)), {})]


EXPECT = ('extract: autograd.grad moved into a nonstrict_trace helper verifies; the second site (requires_grad_'
          ' on an intermediate) gets a region split (the enable_grad block runs eagerly)')
