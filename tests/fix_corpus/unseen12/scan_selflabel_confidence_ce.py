"""SCAN clustering and self-labelling epochs (wvangansbeke/Unsupervised-Classification: `losses/losses.py`:
`MaskedCrossEntropyLoss`, `ConfidenceBasedCE`, `entropy`, `SCANLoss`; `utils/train_utils.py`: `scan_train`,
`selflabel_train`; `utils/utils.py`: `AverageMeter`, `ProgressMeter`; `models/models.py`: `ClusteringModel`).
`scan_train` runs every cluster head (`ClusteringModel.forward` returns a list comprehension over
`self.cluster_head`, dispatching on a `forward_pass` string), collects the per-head losses of `SCANLoss` (softmax,
`torch.bmm` similarity, BCE, `entropy` with `len(b.size())` branches and a `%`-formatted `ValueError`) into Python
lists, updates the meters with `np.mean([v.item() for v in total_loss])`, sums `torch.stack(...)`, steps the
optimizer and `progress.display(i)` prints every 25 iterations. `selflabel_train` computes the weak-augmentation
output under `torch.no_grad()`, then `ConfidenceBasedCE.forward`: `mask = max_prob > self.threshold`,
`torch.masked_select(target, mask.squeeze())`, `n = target_masked.size(0)`, class balancing with
`torch.unique(target_masked, return_counts = True)`, `freq = 1/(counts.float()/n)`, `weight[idx] = freq`; and
`MaskedCrossEntropyLoss.forward` raises `ValueError` `if not (mask != 0).any()` and selects rows with
`torch.masked_select(input, mask.view(b, 1)).view(n, c)`; `losses.update(loss.item())`.
Adaptations: the `.cuda(...)` calls are dropped (`torch.ones(c).cuda()` is `torch.ones(c)`); the ResNet backbone is
a small stand-in (`Linear`/`BatchNorm1d`/`ReLU` on 12-dim inputs, `dim` 16) with two cluster heads of 4 clusters;
`ClusteringModel` was written from the collector's knowledge of `models/models.py` (not read from the stored copy);
the data loaders are lists of dict batches made in the factory (`anchor`/`neighbor`, `image`/`image_augmented`);
the self-label threshold is 0.6 (0.99 in the configs, for trained models). So that a call repeats exactly, the called
function (`train_round`, an adaptation) restores the model and optimizer from copies taken in the factory
(`reset_`); it returns the meters' averages and the first head's logits. The two calls use different data and
entropy weights."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
EPS=1e-8


class MaskedCrossEntropyLoss(nn.Module):
    def __init__(self):
        super(MaskedCrossEntropyLoss, self).__init__()

    def forward(self, input, target, mask, weight, reduction='mean'):
        if not (mask != 0).any():  # BREAK
            raise ValueError('Mask in MaskedCrossEntropyLoss is all zeros.')
        target = torch.masked_select(target, mask)  # BREAK
        b, c = input.size()
        n = target.size(0)
        input = torch.masked_select(input, mask.view(b, 1)).view(n, c)  # BREAK
        return F.cross_entropy(input, target, weight = weight, reduction = reduction)


class ConfidenceBasedCE(nn.Module):
    def __init__(self, threshold, apply_class_balancing):
        super(ConfidenceBasedCE, self).__init__()
        self.loss = MaskedCrossEntropyLoss()
        self.softmax = nn.Softmax(dim = 1)
        self.threshold = threshold
        self.apply_class_balancing = apply_class_balancing

    def forward(self, anchors_weak, anchors_strong):
        """
        Loss function during self-labeling

        input: logits for original samples and for its strong augmentations
        output: cross entropy
        """
        # Retrieve target and mask based on weakly augmentated anchors
        weak_anchors_prob = self.softmax(anchors_weak)
        max_prob, target = torch.max(weak_anchors_prob, dim = 1)
        mask = max_prob > self.threshold
        b, c = weak_anchors_prob.size()
        target_masked = torch.masked_select(target, mask.squeeze())  # BREAK
        n = target_masked.size(0)

        # Inputs are strongly augmented anchors
        input_ = anchors_strong

        # Class balancing weights
        if self.apply_class_balancing:
            idx, counts = torch.unique(target_masked, return_counts = True)  # BREAK
            freq = 1/(counts.float()/n)
            weight = torch.ones(c)
            weight[idx] = freq

        else:
            weight = None

        # Loss
        loss = self.loss(input_, target, mask, weight = weight, reduction='mean')

        return loss


def entropy(x, input_as_probabilities):
    """
    Helper function to compute the entropy over the batch

    input: batch w/ shape [b, num_classes]
    output: entropy value [is ideally -log(num_classes)]
    """

    if input_as_probabilities:
        x_ =  torch.clamp(x, min = EPS)
        b =  x_ * torch.log(x_)
    else:
        b = F.softmax(x, dim = 1) * F.log_softmax(x, dim = 1)

    if len(b.size()) == 2: # Sample-wise entropy
        return -b.sum(dim = 1).mean()
    elif len(b.size()) == 1: # Distribution-wise entropy
        return - b.sum()
    else:
        raise ValueError('Input tensor is %d-Dimensional' %(len(b.size())))


class SCANLoss(nn.Module):
    def __init__(self, entropy_weight = 2.0):
        super(SCANLoss, self).__init__()
        self.softmax = nn.Softmax(dim = 1)
        self.bce = nn.BCELoss()
        self.entropy_weight = entropy_weight # Default = 2.0

    def forward(self, anchors, neighbors):
        """
        input:
            - anchors: logits for anchor images w/ shape [b, num_classes]
            - neighbors: logits for neighbor images w/ shape [b, num_classes]

        output:
            - Loss
        """
        # Softmax
        b, n = anchors.size()
        anchors_prob = self.softmax(anchors)
        positives_prob = self.softmax(neighbors)

        # Similarity in output space
        similarity = torch.bmm(anchors_prob.view(b, 1, n), positives_prob.view(b, n, 1)).squeeze()
        ones = torch.ones_like(similarity)
        consistency_loss = self.bce(similarity, ones)

        # Entropy loss
        entropy_loss = entropy(torch.mean(anchors_prob, 0), input_as_probabilities = True)

        # Total loss
        total_loss = consistency_loss - self.entropy_weight * entropy_loss

        return total_loss, consistency_loss, entropy_loss


class AverageMeter(object):
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


class ProgressMeter(object):
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print('\t'.join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = '{:' + str(num_digits) + 'd}'
        return '[' + fmt + '/' + fmt.format(num_batches) + ']'


class ClusteringModel(nn.Module):
    def __init__(self, backbone, nclusters, nheads=1):
        super(ClusteringModel, self).__init__()
        self.backbone = backbone['backbone']
        self.backbone_dim = backbone['dim']
        self.nheads = nheads
        assert(isinstance(self.nheads, int))
        assert(self.nheads > 0)
        self.cluster_head = nn.ModuleList([nn.Linear(self.backbone_dim, nclusters) for _ in range(self.nheads)])

    def forward(self, x, forward_pass='default'):
        if forward_pass == 'default':
            features = self.backbone(x)
            out = [cluster_head(features) for cluster_head in self.cluster_head]

        elif forward_pass == 'backbone':
            out = self.backbone(x)

        elif forward_pass == 'head':
            out = [cluster_head(x) for cluster_head in self.cluster_head]

        elif forward_pass == 'return_all':
            features = self.backbone(x)
            out = {'features': features, 'output': [cluster_head(features) for cluster_head in self.cluster_head]}

        else:
            raise ValueError('Invalid forward pass {}'.format(forward_pass))

        return out


def scan_train(train_loader, model, criterion, optimizer, epoch, update_cluster_head_only=False):
    """
    Train w/ SCAN-Loss
    """
    total_losses = AverageMeter('Total Loss', ':.4e')
    consistency_losses = AverageMeter('Consistency Loss', ':.4e')
    entropy_losses = AverageMeter('Entropy', ':.4e')
    progress = ProgressMeter(len(train_loader),
        [total_losses, consistency_losses, entropy_losses],
        prefix="Epoch: [{}]".format(epoch))

    if update_cluster_head_only:
        model.eval() # No need to update BN
    else:
        model.train() # Update BN

    for i, batch in enumerate(train_loader):
        # Forward pass
        anchors = batch['anchor']
        neighbors = batch['neighbor']

        if update_cluster_head_only: # Only calculate gradient for backprop of linear layer
            with torch.no_grad():
                anchors_features = model(anchors, forward_pass='backbone')
                neighbors_features = model(neighbors, forward_pass='backbone')
            anchors_output = model(anchors_features, forward_pass='head')
            neighbors_output = model(neighbors_features, forward_pass='head')

        else: # Calculate gradient for backprop of complete network
            anchors_output = model(anchors)
            neighbors_output = model(neighbors)

        # Loss for every head
        total_loss, consistency_loss, entropy_loss = [], [], []
        for anchors_output_subhead, neighbors_output_subhead in zip(anchors_output, neighbors_output):
            total_loss_, consistency_loss_, entropy_loss_ = criterion(anchors_output_subhead,
                                                                         neighbors_output_subhead)
            total_loss.append(total_loss_)
            consistency_loss.append(consistency_loss_)
            entropy_loss.append(entropy_loss_)

        # Register the mean loss and backprop the total loss to cover all subheads
        total_losses.update(np.mean([v.item() for v in total_loss]))  # BREAK
        consistency_losses.update(np.mean([v.item() for v in consistency_loss]))
        entropy_losses.update(np.mean([v.item() for v in entropy_loss]))

        total_loss = torch.sum(torch.stack(total_loss, dim=0))

        optimizer.zero_grad()
        total_loss.backward()
        optimizer.step()  # BREAK

        if i % 25 == 0:
            progress.display(i)
    return total_losses.avg


def selflabel_train(train_loader, model, criterion, optimizer, epoch, ema=None):
    """
    Self-labeling based on confident samples
    """
    losses = AverageMeter('Loss', ':.4e')
    progress = ProgressMeter(len(train_loader), [losses],
                                prefix="Epoch: [{}]".format(epoch))
    model.train()

    for i, batch in enumerate(train_loader):
        images = batch['image']
        images_augmented = batch['image_augmented']

        with torch.no_grad():
            output = model(images)[0]
        output_augmented = model(images_augmented)[0]

        loss = criterion(output, output_augmented)
        losses.update(loss.item())

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if ema is not None: # Apply EMA to update the weights of the network
            ema.update_params(model)
            ema.apply_shadow(model)

        if i % 25 == 0:
            progress.display(i)
    return losses.avg


def reset_(model, optimizer, model_state, opt_state):
    """Adaptation: restore the initial model/optimizer so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)


def train_round(scan_loader, selflabel_loader, model, optimizer, model_state, opt_state, entropy_weight):
    reset_(model, optimizer, model_state, opt_state)
    scan_avg = scan_train(scan_loader, model, SCANLoss(entropy_weight), optimizer, 0)
    selflabel_avg = selflabel_train(selflabel_loader, model, ConfidenceBasedCE(0.6, True), optimizer, 0)
    model.eval()
    with torch.no_grad():
        out = model(selflabel_loader[0]['image'])[0]
    return scan_avg, selflabel_avg, out


def target():
    torch.manual_seed(0)
    backbone = {'backbone': nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU()), 'dim': 16}
    model = ClusteringModel(backbone, nclusters=4, nheads=2)
    with torch.no_grad():
        for head in model.cluster_head:
            head.weight.mul_(6.0)  # confident heads, as after the SCAN step
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def scan_batches(n, b):
        out = []
        for _ in range(n):
            a = torch.randn(b, 12)
            out.append({'anchor': a, 'neighbor': a + 0.1 * torch.randn(b, 12)})
        return out

    def selflabel_batches(n, b):
        out = []
        for _ in range(n):
            x = torch.randn(b, 12)
            out.append({'image': x, 'image_augmented': x + 0.2 * torch.randn(b, 12)})
        return out

    return [
        (train_round, (scan_batches(2, 16), selflabel_batches(2, 16), model, optimizer, model_state, opt_state, 2.0), {}),
        (train_round, (scan_batches(3, 12), selflabel_batches(2, 12), model, optimizer, model_state, opt_state, 5.0), {}),
    ]


EXPECT = ("caller: both epochs are eager training loops (`np.mean([v.item() ...])` meters, optimizer steps, "
          "`progress.display` prints); compile the model and the loss bodies, keep the loops eager. Inside "
          "`ConfidenceBasedCE`/`MaskedCrossEntropyLoss` the data-dependent `masked_select`, `torch.unique(..., "
          "return_counts=True)` and the `if not (mask != 0).any(): raise` check remain (dynamic shapes); a "
          "rewrite to weighted full-batch cross entropy (mask as per-sample weights) would remove them")
