"""SimCLR InfoNCE loss with boolean-mask indexing: the diagonal is dropped with `labels[~mask]` /
`similarity_matrix[~mask]`, positives and negatives are picked with `similarity_matrix[labels.bool()]` /
`similarity_matrix[~labels.bool()]` (sthalles/SimCLR simclr.py: SimCLR.info_nce_loss, the body of SimCLR.train's
batch loop; utils.py: accuracy; models/resnet_simclr.py: ResNetSimCLR's projection head). The ResNet backbone is
replaced by a minimal convolutional stand-in with the original's MLP projection head; the tensorboard writer,
GradScaler, backward and optimizer step of the training loop are left out (the step returns the loss and the top-1/top-5
accuracies it would log); `fp16_precision` is False, as on CPU, so the `autocast` context is left out too.
The stored copy of simclr.py is a fork that writes `range(2)` for `range(self.args.n_views)`; the upstream form is kept."""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))

        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


class ResNetSimCLR(nn.Module):
    """Stand-in backbone (a small conv net instead of torchvision's resnet18) with SimCLR's projection MLP."""

    def __init__(self, out_dim):
        super(ResNetSimCLR, self).__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten(), nn.Linear(8, out_dim))
        dim_mlp = self.backbone[-1].in_features

        # add mlp projection head
        self.backbone[-1] = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone[-1])

    def forward(self, x):
        return self.backbone(x)


class SimCLR(object):

    def __init__(self, *args, **kwargs):
        self.args = kwargs['args']
        self.model = kwargs['model'].to(self.args.device)
        self.criterion = torch.nn.CrossEntropyLoss().to(self.args.device)

    def info_nce_loss(self, features):

        labels = torch.cat([torch.arange(self.args.batch_size) for i in range(self.args.n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        labels = labels.to(self.args.device)

        features = F.normalize(features, dim=1)

        similarity_matrix = torch.matmul(features, features.T)
        # assert similarity_matrix.shape == (
        #     self.args.n_views * self.args.batch_size, self.args.n_views * self.args.batch_size)
        # assert similarity_matrix.shape == labels.shape

        # discard the main diagonal from both: labels and similarities matrix
        mask = torch.eye(labels.shape[0], dtype=torch.bool).to(self.args.device)
        labels = labels[~mask].view(labels.shape[0], -1)  # BREAK
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)  # BREAK
        # assert similarity_matrix.shape == labels.shape

        # select and combine multiple positives
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)  # BREAK

        # select only the negatives the negatives
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)  # BREAK

        logits = torch.cat([positives, negatives], dim=1)
        labels = torch.zeros(logits.shape[0], dtype=torch.long).to(self.args.device)

        logits = logits / self.args.temperature
        return logits, labels

    def train_step(self, images):
        """The body of SimCLR.train's `for images, _ in tqdm(train_loader):` loop, up to the logged values."""
        images = torch.cat(images, dim=0)

        images = images.to(self.args.device)

        features = self.model(images)
        logits, labels = self.info_nce_loss(features)
        loss = self.criterion(logits, labels)

        top1, top5 = accuracy(logits, labels, topk=(1, 5))
        return loss, top1[0], top5[0]


def _views(batch_size, n_views=2, size=8):
    base = torch.randn(batch_size, 3, size, size)
    return [base + 0.3 * torch.randn(batch_size, 3, size, size) for _ in range(n_views)]


def target():
    torch.manual_seed(0)
    args = SimpleNamespace(device=torch.device('cpu'), batch_size=6, n_views=2, temperature=0.07)
    model = ResNetSimCLR(out_dim=16).eval()
    simclr = SimCLR(args=args, model=model)
    images1 = _views(args.batch_size)
    images2 = _views(args.batch_size)
    return [
        (simclr.train_step, (images1,), {}),
        (simclr.train_step, (images2,), {}),
    ]


EXPECT = ("rewrite: the masks are fixed by the batch layout (an identity mask and a block of n_views labels), so each "
          "boolean selection keeps a known number of entries per row; replace `x[~mask].view(n, -1)` and the "
          "positive/negative selections with static index tensors or `masked_select`-free gathers (e.g. precomputed "
          "`torch.nonzero` of the constant masks built from shapes, or `x.flatten()[1:].view(n-1, n+1)[:, :-1]` for the "
          "off-diagonal), so no data-dependent output shape is produced")
