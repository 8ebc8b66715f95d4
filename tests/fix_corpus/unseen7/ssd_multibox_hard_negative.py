"""ssd.pytorch's `MultiBoxLoss`: per image, `match` writes the encoded targets of the best-overlapping ground truth
into preallocated `torch.Tensor(num, num_priors, 4)` / `torch.LongTensor(num, num_priors)` (a Python loop forcing
each truth's best prior, `conf[best_truth_overlap < threshold] = 0`); then the localisation loss over the positive
priors by boolean-mask indexing (`loc_data[pos_idx].view(-1, 4)`), hard negative mining by a double sort
(`loss_c[pos.view(-1, 1)] = 0`, `idx_rank < num_neg`), and the confidence loss over
`conf_data[(pos_idx+neg_idx).gt(0)]` / `conf_t[(pos+neg).gt(0)]`, both divided by `N = num_pos.data.sum()`
(amdegroot/ssd.pytorch layers/modules/multibox_loss.py: MultiBoxLoss; layers/box_utils.py: point_form, intersect,
jaccard, match, encode, log_sum_exp). `data.coco`'s config is replaced by its `variance` entry; `use_gpu=False`.
The SSD network is replaced by its outputs (random location/confidence predictions over 32 priors, 4 classes); the
legacy `Variable` wrappers and `size_average=False` arguments are kept as in the original."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

cfg = {'variance': [0.1, 0.2]}


def point_form(boxes):
    """ Convert prior_boxes to (xmin, ymin, xmax, ymax)
    representation for comparison to point form ground truth data.
    """
    return torch.cat((boxes[:, :2] - boxes[:, 2:]/2,     # xmin, ymin
                     boxes[:, :2] + boxes[:, 2:]/2), 1)  # xmax, ymax


def intersect(box_a, box_b):
    """ We resize both tensors to [A,B,2] without new malloc:
    [A,2] -> [A,1,2] -> [A,B,2]
    [B,2] -> [1,B,2] -> [A,B,2]
    Then we compute the area of intersect between box_a and box_b.
    """
    A = box_a.size(0)
    B = box_b.size(0)
    max_xy = torch.min(box_a[:, 2:].unsqueeze(1).expand(A, B, 2),
                       box_b[:, 2:].unsqueeze(0).expand(A, B, 2))
    min_xy = torch.max(box_a[:, :2].unsqueeze(1).expand(A, B, 2),
                       box_b[:, :2].unsqueeze(0).expand(A, B, 2))
    inter = torch.clamp((max_xy - min_xy), min=0)
    return inter[:, :, 0] * inter[:, :, 1]


def jaccard(box_a, box_b):
    """Compute the jaccard overlap of two sets of boxes."""
    inter = intersect(box_a, box_b)
    area_a = ((box_a[:, 2]-box_a[:, 0]) *
              (box_a[:, 3]-box_a[:, 1])).unsqueeze(1).expand_as(inter)  # [A,B]
    area_b = ((box_b[:, 2]-box_b[:, 0]) *
              (box_b[:, 3]-box_b[:, 1])).unsqueeze(0).expand_as(inter)  # [A,B]
    union = area_a + area_b - inter
    return inter / union  # [A,B]


def match(threshold, truths, priors, variances, labels, loc_t, conf_t, idx):
    """Match each prior box with the ground truth box of the highest jaccard
    overlap, encode the bounding boxes, then return the matched indices
    corresponding to both confidence and location preds.
    """
    # jaccard index
    overlaps = jaccard(
        truths,
        point_form(priors)
    )
    # (Bipartite Matching)
    # [1,num_objects] best prior for each ground truth
    best_prior_overlap, best_prior_idx = overlaps.max(1, keepdim=True)
    # [1,num_priors] best ground truth for each prior
    best_truth_overlap, best_truth_idx = overlaps.max(0, keepdim=True)
    best_truth_idx.squeeze_(0)
    best_truth_overlap.squeeze_(0)
    best_prior_idx.squeeze_(1)
    best_prior_overlap.squeeze_(1)
    best_truth_overlap.index_fill_(0, best_prior_idx, 2)  # ensure best prior
    # TODO refactor: index  best_prior_idx with long tensor
    # ensure every gt matches with its prior of max overlap
    for j in range(best_prior_idx.size(0)):
        best_truth_idx[best_prior_idx[j]] = j  # BREAK
    matches = truths[best_truth_idx]          # Shape: [num_priors,4]
    conf = labels[best_truth_idx] + 1         # Shape: [num_priors]
    conf[best_truth_overlap < threshold] = 0  # label as background
    loc = encode(matches, priors, variances)
    loc_t[idx] = loc    # [num_priors,4] encoded offsets to learn
    conf_t[idx] = conf  # [num_priors] top class label for each prior


def encode(matched, priors, variances):
    """Encode the variances from the priorbox layers into the ground truth boxes
    we have matched (based on jaccard overlap) with the prior boxes.
    """

    # dist b/t match center and prior's center
    g_cxcy = (matched[:, :2] + matched[:, 2:])/2 - priors[:, :2]
    # encode variance
    g_cxcy /= (variances[0] * priors[:, 2:])
    # match wh / prior wh
    g_wh = (matched[:, 2:] - matched[:, :2]) / priors[:, 2:]
    g_wh = torch.log(g_wh) / variances[1]
    # return target for smooth_l1_loss
    return torch.cat([g_cxcy, g_wh], 1)  # [num_priors,4]


def log_sum_exp(x):
    """Utility function for computing log_sum_exp while determining
    This will be used to determine unaveraged confidence loss across
    all examples in a batch.
    """
    x_max = x.data.max()
    return torch.log(torch.sum(torch.exp(x-x_max), 1, keepdim=True)) + x_max


class MultiBoxLoss(nn.Module):
    """SSD Weighted Loss Function"""

    def __init__(self, num_classes, overlap_thresh, prior_for_matching,
                 bkg_label, neg_mining, neg_pos, neg_overlap, encode_target,
                 use_gpu=True):
        super(MultiBoxLoss, self).__init__()
        self.use_gpu = use_gpu
        self.num_classes = num_classes
        self.threshold = overlap_thresh
        self.background_label = bkg_label
        self.encode_target = encode_target
        self.use_prior_for_matching = prior_for_matching
        self.do_neg_mining = neg_mining
        self.negpos_ratio = neg_pos
        self.neg_overlap = neg_overlap
        self.variance = cfg['variance']

    def forward(self, predictions, targets):
        """Multibox Loss
        Args:
            predictions (tuple): A tuple containing loc preds, conf preds,
            and prior boxes from SSD net.
            targets (tensor): Ground truth boxes and labels for a batch,
                shape: [batch_size,num_objs,5] (last idx is the label).
        """
        loc_data, conf_data, priors = predictions
        num = loc_data.size(0)
        priors = priors[:loc_data.size(1), :]
        num_priors = (priors.size(0))
        num_classes = self.num_classes

        # match priors (default boxes) and ground truth boxes
        loc_t = torch.Tensor(num, num_priors, 4)
        conf_t = torch.LongTensor(num, num_priors)
        for idx in range(num):
            truths = targets[idx][:, :-1].data
            labels = targets[idx][:, -1].data
            defaults = priors.data
            match(self.threshold, truths, defaults, self.variance, labels,
                  loc_t, conf_t, idx)
        if self.use_gpu:
            loc_t = loc_t.cuda()
            conf_t = conf_t.cuda()
        # wrap targets
        loc_t = Variable(loc_t, requires_grad=False)
        conf_t = Variable(conf_t, requires_grad=False)

        pos = conf_t > 0
        num_pos = pos.sum(dim=1, keepdim=True)

        # Localization Loss (Smooth L1)
        # Shape: [batch,num_priors,4]
        pos_idx = pos.unsqueeze(pos.dim()).expand_as(loc_data)
        loc_p = loc_data[pos_idx].view(-1, 4)
        loc_t = loc_t[pos_idx].view(-1, 4)
        loss_l = F.smooth_l1_loss(loc_p, loc_t, size_average=False)

        # Compute max conf across batch for hard negative mining
        batch_conf = conf_data.view(-1, self.num_classes)
        loss_c = log_sum_exp(batch_conf) - batch_conf.gather(1, conf_t.view(-1, 1))

        # Hard Negative Mining
        loss_c[pos.view(-1, 1)] = 0  # filter out pos boxes for now
        loss_c = loss_c.view(num, -1)
        _, loss_idx = loss_c.sort(1, descending=True)
        _, idx_rank = loss_idx.sort(1)
        num_pos = pos.long().sum(1, keepdim=True)
        num_neg = torch.clamp(self.negpos_ratio*num_pos, max=pos.size(1)-1)
        neg = idx_rank < num_neg.expand_as(idx_rank)

        # Confidence Loss Including Positive and Negative Examples
        pos_idx = pos.unsqueeze(2).expand_as(conf_data)
        neg_idx = neg.unsqueeze(2).expand_as(conf_data)
        conf_p = conf_data[(pos_idx+neg_idx).gt(0)].view(-1, self.num_classes)
        targets_weighted = conf_t[(pos+neg).gt(0)]
        loss_c = F.cross_entropy(conf_p, targets_weighted, size_average=False)

        # Sum of losses: L(x,c,l,g) = (Lconf(x, c) + αLloc(x,l,g)) / N

        N = num_pos.data.sum()
        loss_l /= N.float()
        loss_c /= N.float()
        return loss_l, loss_c


def _priors():
    # center-size priors on a 4x4 grid, two sizes (the PriorBox layer's output form)
    cs = (torch.arange(4, dtype=torch.float32) + 0.5) / 4
    cy, cx = torch.meshgrid(cs, cs, indexing='ij')
    out = []
    for s in (0.2, 0.45):
        out.append(torch.stack([cx.flatten(), cy.flatten(), torch.full((16,), s), torch.full((16,), s)], 1))
    return torch.cat(out, 0)


def _batch(num, num_priors, num_classes, boxes_per_image):
    loc = 0.1 * torch.randn(num, num_priors, 4)
    conf = torch.randn(num, num_priors, num_classes)
    targets = []
    for n in boxes_per_image:
        xy = torch.rand(n, 2) * 0.6
        wh = 0.15 + torch.rand(n, 2) * 0.3
        labels = torch.randint(0, num_classes - 1, (n, 1)).float()
        targets.append(torch.cat([xy, xy + wh, labels], 1))
    return loc, conf, targets


def target():
    torch.manual_seed(0)
    num_classes = 4
    criterion = MultiBoxLoss(num_classes, 0.5, True, 0, True, 3, 0.5, False, use_gpu=False)
    priors = _priors()
    loc1, conf1, t1 = _batch(2, 32, num_classes, (2, 3))
    loc2, conf2, t2 = _batch(2, 32, num_classes, (1, 2))
    return [
        (criterion, ((loc1, conf1, priors), t1), {}),
        (criterion, ((loc2, conf2, priors), t2), {}),
    ]


EXPECT = ("rewrite: replace the boolean-mask selections by masked sums over the full tensors: "
          "`loss_l = (F.smooth_l1_loss(loc_data, loc_t, reduction='none') * pos_idx).sum()` and "
          "`loss_c = (F.cross_entropy(conf_data.view(-1, C), conf_t.view(-1), reduction='none') * "
          "(pos | neg).view(-1)).sum()`, `loss_c.masked_fill(pos.view(-1, 1), 0)` for the in-place mask write; the "
          "same sums, no data-dependent shapes")
