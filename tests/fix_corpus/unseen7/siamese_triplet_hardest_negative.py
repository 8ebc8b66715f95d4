"""Online triplet mining of siamese-triplet: `OnlineTripletLoss.forward` asks a `FunctionNegativeTripletSelector`
(built by `HardestNegativeTripletSelector(margin)`) for triplets; `get_triplets` computes `pdist(embeddings)`, moves
the distances and labels to the host (`distance_matrix.cpu()`, `labels.cpu().data.numpy()`), loops over
`set(labels)`, forms `list(combinations(label_indices, 2))` anchor-positive pairs, and per pair takes
`loss_values.data.cpu().numpy()` and `np.argmax` (`hardest_negative`), returning `torch.LongTensor(np.array(triplets))`;
the loss gathers the triplets and returns `losses.mean(), len(triplets)` (adambielski/siamese-triplet losses.py:
OnlineTripletLoss; utils.py: pdist, TripletSelector, hardest_negative, FunctionNegativeTripletSelector,
HardestNegativeTripletSelector; networks.py: EmbeddingNet; trainer.py: train_epoch's loss step). The embedding
network is the original's conv/PReLU/pool + fully connected structure, shrunk (12x12 inputs, 4/8 channels, 2-d
embedding). No backward pass: the call returns the loss and the number of triplets."""
from itertools import combinations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def pdist(vectors):
    distance_matrix = -2 * vectors.mm(torch.t(vectors)) + vectors.pow(2).sum(dim=1).view(1, -1) + vectors.pow(2).sum(
        dim=1).view(-1, 1)
    return distance_matrix


class TripletSelector:
    """
    Implementation should return indices of anchors, positive and negative samples
    return np array of shape [N_triplets x 3]
    """

    def __init__(self):
        pass

    def get_pairs(self, embeddings, labels):
        raise NotImplementedError


def hardest_negative(loss_values):
    hard_negative = np.argmax(loss_values)
    return hard_negative if loss_values[hard_negative] > 0 else None  # BREAK


class FunctionNegativeTripletSelector(TripletSelector):
    """
    For each positive pair, takes the hardest negative sample (with the greatest triplet loss value) to create a triplet
    Margin should match the margin used in triplet loss.
    negative_selection_fn should take array of loss_values for a given anchor-positive pair and all negative samples
    and return a negative index for that pair
    """

    def __init__(self, margin, negative_selection_fn, cpu=True):
        super(FunctionNegativeTripletSelector, self).__init__()
        self.cpu = cpu
        self.margin = margin
        self.negative_selection_fn = negative_selection_fn

    def get_triplets(self, embeddings, labels):
        if self.cpu:
            embeddings = embeddings.cpu()
        distance_matrix = pdist(embeddings)
        distance_matrix = distance_matrix.cpu()

        labels = labels.cpu().data.numpy()
        triplets = []

        for label in set(labels):  # BREAK
            label_mask = (labels == label)
            label_indices = np.where(label_mask)[0]
            if len(label_indices) < 2:
                continue
            negative_indices = np.where(np.logical_not(label_mask))[0]
            anchor_positives = list(combinations(label_indices, 2))  # All anchor-positive pairs
            anchor_positives = np.array(anchor_positives)

            ap_distances = distance_matrix[anchor_positives[:, 0], anchor_positives[:, 1]]
            for anchor_positive, ap_distance in zip(anchor_positives, ap_distances):
                loss_values = ap_distance - distance_matrix[torch.LongTensor(np.array([anchor_positive[0]])), torch.LongTensor(negative_indices)] + self.margin
                loss_values = loss_values.data.cpu().numpy()
                hard_negative = self.negative_selection_fn(loss_values)
                if hard_negative is not None:
                    hard_negative = negative_indices[hard_negative]
                    triplets.append([anchor_positive[0], anchor_positive[1], hard_negative])

        if len(triplets) == 0:
            triplets.append([anchor_positive[0], anchor_positive[1], negative_indices[0]])

        triplets = np.array(triplets)

        return torch.LongTensor(triplets)


def HardestNegativeTripletSelector(margin, cpu=False): return FunctionNegativeTripletSelector(margin=margin,
                                                                                 negative_selection_fn=hardest_negative,
                                                                                 cpu=cpu)


class OnlineTripletLoss(nn.Module):
    """
    Online Triplets loss
    Takes a batch of embeddings and corresponding labels.
    Triplets are generated using triplet_selector object that take embeddings and targets and return indices of
    triplets
    """

    def __init__(self, margin, triplet_selector):
        super(OnlineTripletLoss, self).__init__()
        self.margin = margin
        self.triplet_selector = triplet_selector

    def forward(self, embeddings, target):

        triplets = self.triplet_selector.get_triplets(embeddings, target)

        if embeddings.is_cuda:
            triplets = triplets.cuda()

        ap_distances = (embeddings[triplets[:, 0]] - embeddings[triplets[:, 1]]).pow(2).sum(1)  # .pow(.5)
        an_distances = (embeddings[triplets[:, 0]] - embeddings[triplets[:, 2]]).pow(2).sum(1)  # .pow(.5)
        losses = F.relu(ap_distances - an_distances + self.margin)

        return losses.mean(), len(triplets)


class EmbeddingNet(nn.Module):
    def __init__(self):
        super(EmbeddingNet, self).__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 4, 5), nn.PReLU(),
                                     nn.MaxPool2d(2, stride=2),
                                     nn.Conv2d(4, 8, 3), nn.PReLU(),
                                     nn.MaxPool2d(2, stride=2))

        self.fc = nn.Sequential(nn.Linear(8 * 1 * 1, 16),
                                nn.PReLU(),
                                nn.Linear(16, 16),
                                nn.PReLU(),
                                nn.Linear(16, 2)
                                )

    def forward(self, x):
        output = self.convnet(x)
        output = output.view(output.size()[0], -1)
        output = self.fc(output)
        return output

    def get_embedding(self, x):
        return self.forward(x)


def loss_step(model, loss_fn, data, target):
    """The loss part of trainer.train_epoch's loop body (no backward, no optimizer step)."""
    if not type(data) in (tuple, list):
        data = (data,)
    outputs = model(*data)

    if type(outputs) not in (tuple, list):
        outputs = (outputs,)
    loss_inputs = outputs
    if target is not None:
        target = (target,)
        loss_inputs += target

    loss_outputs = loss_fn(*loss_inputs)
    loss = loss_outputs[0] if type(loss_outputs) in (tuple, list) else loss_outputs
    return loss, loss_outputs[1]


def target():
    torch.manual_seed(0)
    model = EmbeddingNet()
    model.eval()
    margin = 1.
    loss_fn = OnlineTripletLoss(margin, HardestNegativeTripletSelector(margin))
    data1 = torch.randn(8, 1, 12, 12)
    target1 = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    data2 = torch.randn(8, 1, 12, 12)
    target2 = torch.tensor([1, 1, 0, 2, 0, 2, 2, 1])
    return [
        (loss_step, (model, loss_fn, data1, target1), {}),
        (loss_step, (model, loss_fn, data2, target2), {}),
    ]


EXPECT = ("rewrite: mine the hardest negatives on the device from the batch distance matrix: `same = labels[:, None] "
          "== labels[None]`, anchor-positive pairs from `torch.triu(same, 1)`, per pair the triplet loss against every "
          "sample masked to `-inf` where `same`, `max` over negatives, keep pairs whose hardest loss is > 0, and the "
          "mean and count as masked sums; no NumPy, `set(labels)` or `combinations` on the host")
