"""Person re-ID training step with batch-hard triplet mining and label-smoothed cross entropy
(KaiyangZhou/deep-person-reid: `torchreid/losses/hard_mine_triplet_loss.py`: `TripletLoss`;
`torchreid/losses/cross_entropy_loss.py`: `CrossEntropyLoss`; `torchreid/metrics/accuracy.py`: `accuracy`;
`torchreid/engine/image/triplet.py`: `ImageTripletEngine.forward_backward`; `torchreid/engine/engine.py`:
`compute_loss`, `parse_data_for_train`). `TripletLoss.forward` builds the pairwise distance matrix with the legacy
`dist.addmm_(1, -2, inputs, inputs.t())` overload, then loops `for i in range(n):` appending
`dist[i][mask[i]].max().unsqueeze(0)` and `dist[i][mask[i] == 0].min().unsqueeze(0)` (boolean-mask selections of
data-dependent size) before `torch.cat` and `MarginRankingLoss`. `CrossEntropyLoss.forward` builds one-hot targets
on the host with `zeros.scatter_(1, targets.unsqueeze(1).data.cpu(), 1)` and an `if self.use_gpu:` branch;
`accuracy` takes `max(topk)`, `isinstance(output, (tuple, list))`, `topk`/`eq` and a per-k loop with in-place
`mul_`. `forward_backward` weights the two losses (`if self.weight_t > 0:` ...), records `loss_t.item()`,
`loss_x.item()` and `metrics.accuracy(outputs, pids)[0].item()` into a dict, asserts it is non-empty, then
`zero_grad`/`backward`/`step`.
Adaptations: the OSNet/ResNet backbone is a small stand-in returning `(logits, features)` in training mode
(`Linear`/`BatchNorm1d` on 20-dim inputs, 6 identities); the engine is reduced to a plain class holding the model,
optimizer, criteria and weights; `use_gpu` is False; `CrossEntropyLoss`, `accuracy` and the engine methods were
written from the collector's knowledge of the repository (only `hard_mine_triplet_loss.py` was read from the stored
copy). So that a call repeats exactly, the called function (`train_steps`, an adaptation) restores the model and
optimizer from copies taken in the factory (`reset_`); it returns the loss summaries and the eval features of the
first batch. The two calls use different batches and loss weights."""
import copy

import torch
import torch.nn as nn


class TripletLoss(nn.Module):
    """Triplet loss with hard positive/negative mining.

    Reference:
    Hermans et al. In Defense of the Triplet Loss for Person Re-Identification. arXiv:1703.07737.

    Imported from https://github.com/Cysu/open-reid/blob/master/reid/loss/triplet.py.

    Args:
        margin (float): margin for triplet.
    """

    def __init__(self, margin=0.3):
        super(TripletLoss, self).__init__()
        self.margin = margin
        self.ranking_loss = nn.MarginRankingLoss(margin=margin)

    def forward(self, inputs, targets):
        """
        Args:
            inputs: feature matrix with shape (batch_size, feat_dim)
            targets: ground truth labels with shape (num_classes)
        """
        n = inputs.size(0)

        # Compute pairwise distance, replace by the official when merged
        dist = torch.pow(inputs, 2).sum(dim=1, keepdim=True).expand(n, n)
        dist = dist + dist.t()
        dist.addmm_(1, -2, inputs, inputs.t())
        dist = dist.clamp(min=1e-12).sqrt()  # for numerical stability

        # For each anchor, find the hardest positive and negative
        mask = targets.expand(n, n).eq(targets.expand(n, n).t())
        dist_ap, dist_an = [], []
        for i in range(n):
            dist_ap.append(dist[i][mask[i]].max().unsqueeze(0))  # BREAK
            dist_an.append(dist[i][mask[i] == 0].min().unsqueeze(0))
        dist_ap = torch.cat(dist_ap)
        dist_an = torch.cat(dist_an)

        # Compute ranking hinge loss
        y = torch.ones_like(dist_an)
        return self.ranking_loss(dist_an, dist_ap, y)


class CrossEntropyLoss(nn.Module):
    r"""Cross entropy loss with label smoothing regularizer."""

    def __init__(self, num_classes, eps=0.1, use_gpu=True, label_smooth=True):
        super(CrossEntropyLoss, self).__init__()
        self.num_classes = num_classes
        self.eps = eps if label_smooth else 0
        self.use_gpu = use_gpu
        self.logsoftmax = nn.LogSoftmax(dim=1)

    def forward(self, inputs, targets):
        log_probs = self.logsoftmax(inputs)
        zeros = torch.zeros(log_probs.size())
        targets = zeros.scatter_(1, targets.unsqueeze(1).data.cpu(), 1)
        if self.use_gpu:
            targets = targets.cuda()
        targets = (1 - self.eps) * targets + self.eps / self.num_classes
        return (-targets * log_probs).mean(0).sum()


def accuracy(output, target, topk=(1, )):
    """Computes the accuracy over the k top predictions for
    the specified values of k.
    """
    maxk = max(topk)
    batch_size = target.size(0)

    if isinstance(output, (tuple, list)):
        output = output[0]

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].view(-1).float().sum(0, keepdim=True)
        acc = correct_k.mul_(100.0 / batch_size)
        res.append(acc)

    return res


class ReIDNet(nn.Module):
    """Adaptation: small stand-in for the torchreid backbones (returns (logits, features) when training)."""

    def __init__(self, num_classes, in_dim=20, feat_dim=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, feat_dim))
        self.bn = nn.BatchNorm1d(feat_dim)
        self.classifier = nn.Linear(feat_dim, num_classes)

    def forward(self, x):
        v = self.backbone(x)
        if not self.training:
            return v
        y = self.classifier(self.bn(v))
        return y, v


class ImageTripletEngine:
    def __init__(self, model, optimizer, margin=0.3, weight_t=1, weight_x=1, use_gpu=False,
                 label_smooth=True):
        self.model = model
        self.optimizer = optimizer
        self.use_gpu = use_gpu
        self.weight_t = weight_t
        self.weight_x = weight_x
        self.criterion_t = TripletLoss(margin=margin)
        self.criterion_x = CrossEntropyLoss(
            num_classes=6,
            use_gpu=self.use_gpu,
            label_smooth=label_smooth
        )

    def parse_data_for_train(self, data):
        imgs = data['img']
        pids = data['pid']
        return imgs, pids

    def compute_loss(self, criterion, outputs, targets):
        if isinstance(outputs, (tuple, list)):
            loss = DeepSupervision(criterion, outputs, targets)
        else:
            loss = criterion(outputs, targets)
        return loss

    def forward_backward(self, data):
        imgs, pids = self.parse_data_for_train(data)

        if self.use_gpu:
            imgs = imgs.cuda()
            pids = pids.cuda()

        outputs, features = self.model(imgs)

        loss = 0
        loss_summary = {}

        if self.weight_t > 0:
            loss_t = self.compute_loss(self.criterion_t, features, pids)
            loss += self.weight_t * loss_t
            loss_summary['loss_t'] = loss_t.item()  # BREAK

        if self.weight_x > 0:
            loss_x = self.compute_loss(self.criterion_x, outputs, pids)
            loss += self.weight_x * loss_x
            loss_summary['loss_x'] = loss_x.item()  # BREAK
            loss_summary['acc'] = accuracy(outputs, pids)[0].item()  # BREAK

        assert loss_summary  # BREAK

        self.optimizer.zero_grad()  # BREAK
        loss.backward()  # BREAK
        self.optimizer.step()  # BREAK

        return loss_summary


def DeepSupervision(criterion, xs, y):
    loss = 0.
    for x in xs:
        loss += criterion(x, y)
    loss /= len(xs)
    return loss


def reset_(engine, model_state, opt_state, weight_t, weight_x):
    """Adaptation: restore the initial model/optimizer so that a call repeats exactly."""
    engine.model.load_state_dict(model_state)  # BREAK
    engine.optimizer.load_state_dict(opt_state)
    engine.weight_t = weight_t
    engine.weight_x = weight_x


def train_steps(engine, batches, model_state, opt_state, weight_t, weight_x):
    reset_(engine, model_state, opt_state, weight_t, weight_x)
    engine.model.train()
    summaries = [engine.forward_backward(data) for data in batches]
    engine.model.eval()
    with torch.no_grad():
        feats = engine.model(batches[0]['img'])
    return summaries, feats


def target():
    torch.manual_seed(0)
    model = ReIDNet(num_classes=6)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    engine = ImageTripletEngine(model, optimizer)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def batches(n, ids, per_id):
        out = []
        for _ in range(n):
            pids = torch.arange(ids).repeat_interleave(per_id)
            imgs = torch.randn(ids * per_id, 20) + pids.float().unsqueeze(1) * 0.3
            out.append({'img': imgs, 'pid': pids})
        return out

    return [
        (train_steps, (engine, batches(2, 4, 2), model_state, opt_state, 1, 1), {}),
        (train_steps, (engine, batches(3, 3, 3), model_state, opt_state, 1, 0.5), {}),
    ]


EXPECT = ("rewrite: `TripletLoss.forward`'s per-anchor loop of boolean-mask `max`/`min` selections is the "
          "batch-hard mining that vectorises exactly (`dist.masked_fill(~mask, -inf).max(1)` / "
          "`dist.masked_fill(mask, inf).min(1)`), and `CrossEntropyLoss`'s `.data.cpu()` one-hot can stay on the "
          "device; `forward_backward`'s `.item()` summaries and optimizer step are caller work (keep the step "
          "eager)")
