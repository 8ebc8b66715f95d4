"""A widely copied focal loss module: for N,C,H,W inputs it flattens to (N*H*W, C), takes `F.log_softmax(input)`
without `dim` (the deprecated implicit-dimension call, which warns), gathers the target log-probabilities, wraps
`logpt.data.exp()` in a legacy `Variable`, and re-types the class weights when
`if self.alpha.type()!=input.data.type(): self.alpha = self.alpha.type_as(input.data)` (a comparison of the type
strings `'torch.FloatTensor'` / `'torch.DoubleTensor'`, and an attribute re-assigned inside the forward) before
`self.alpha.gather(0,target.data.view(-1))` (clcarwin/focal_loss_pytorch focalloss.py: `FocalLoss`; the index's stored revision has no
`logpt = logpt.view(-1)` after the gather (so `(N,1) * (N,)` broadcasts); the line is kept as in the copies of the
module found by exact-string search).
Adaptations: Python 2's `long` in the `isinstance(alpha,(float,int,long))` test is dropped (`(float,int)`); the loss is
applied to the output of a small convolutional segmentation stand-in (3 classes, 8x8 images) inside an evaluation
step. The first call passes float32 inputs (the `alpha` type already matches); the second passes float64 inputs
through a float64 copy of the model, so the branch re-types `self.alpha` to a DoubleTensor. So that a call gives the
same result when it is run again, the step first resets `criterion.alpha` to the float32 tensor built in `__init__`
(`reset_alpha_`, an adaptation)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class FocalLoss(nn.Module):
    def __init__(self, gamma=0, alpha=None, size_average=True):
        super(FocalLoss, self).__init__()
        self.gamma = gamma
        self.alpha = alpha
        if isinstance(alpha,(float,int)): self.alpha = torch.Tensor([alpha,1-alpha])
        if isinstance(alpha,list): self.alpha = torch.Tensor(alpha)
        self.size_average = size_average

    def forward(self, input, target):
        if input.dim()>2:
            input = input.view(input.size(0),input.size(1),-1)  # N,C,H,W => N,C,H*W
            input = input.transpose(1,2)    # N,C,H*W => N,H*W,C
            input = input.contiguous().view(-1,input.size(2))   # N,H*W,C => N*H*W,C
        target = target.view(-1,1)

        logpt = F.log_softmax(input)
        logpt = logpt.gather(1,target)
        logpt = logpt.view(-1)
        pt = Variable(logpt.data.exp())  # BREAK

        if self.alpha is not None:
            if self.alpha.type()!=input.data.type():
                self.alpha = self.alpha.type_as(input.data)
            at = self.alpha.gather(0,target.data.view(-1))
            logpt = logpt * Variable(at)  # BREAK

        loss = -1 * (1-pt)**self.gamma * logpt
        if self.size_average: return loss.mean()
        else: return loss.sum()


class TinySegNet(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, num_classes, 1)

    def forward(self, x):
        return self.conv2(F.relu(self.conv1(x)))


def reset_alpha_(criterion, alpha0):
    """Adaptation: restore the float32 class weights built in __init__."""
    criterion.alpha = alpha0


def eval_step(model, criterion, alpha0, images, labels):
    reset_alpha_(criterion, alpha0)
    with torch.no_grad():
        logits = model(images)
    loss = criterion(logits, labels)
    return loss, criterion.alpha.dtype


def target():
    torch.manual_seed(0)
    model = TinySegNet(3)
    model64 = TinySegNet(3).double()
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    criterion = FocalLoss(gamma=2, alpha=[0.25, 0.5, 0.25])
    alpha0 = criterion.alpha
    gen = torch.Generator().manual_seed(0)
    images1 = torch.randn(2, 3, 8, 8, generator=gen)
    labels1 = torch.randint(0, 3, (2, 8, 8), generator=gen)
    images2 = torch.randn(2, 3, 8, 8, generator=gen).double()
    labels2 = torch.randint(0, 3, (2, 8, 8), generator=gen)
    return [
        (eval_step, (model, criterion, alpha0, images1, labels1), {}),
        (eval_step, (model64, criterion, alpha0, images2, labels2), {}),
    ]


EXPECT = ("rewrite: compare dtypes, not type strings: `if self.alpha.dtype != input.dtype: self.alpha = "
          "self.alpha.to(input.dtype)` (or use `self.alpha.to(input)` unconditionally, without re-assigning the "
          "attribute), and pass `dim=1` to `F.log_softmax` so no deprecation warning is raised in the graph; "
          "`Variable(...)` is a no-op wrapper that can be dropped")
