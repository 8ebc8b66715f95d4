"""pytorch-metric-learning contrastive loss (0.9.8x): all positive/negative pairs from single-argument
`torch.where(matches)` / `torch.where(diffs)`, `if len(a1) > 0:` guards, then per pair kind
`num_non_zero_pairs = (per_pair_loss > 0).nonzero().size(0)` and `if num_non_zero_pairs > 0:` averaging over the
non-zero pairs, the counts stored as recordable attributes on the module, and `if loss == 0:` in the base forward
(KevinMusgrave/pytorch-metric-learning src/pytorch_metric_learning/losses/contrastive_loss.py (commit 00b65b6),
generic_pair_loss.py and base_metric_loss_function.py (the 0.9.8x forms, read from a flattened copy of that
revision), utils/loss_and_miner_utils.py: get_pairwise_mat, dist_mat, sim_mat, get_all_pairs_indices,
convert_to_pairs; utils/common_functions.py: add_to_recordable_attributes,
assert_embeddings_and_labels_are_same_size). The calls take a batch of embeddings and class labels, as a trainer's
`loss_func(embeddings, labels)` does; the second call uses a larger margin."""
import numpy as np
import torch


# ---- utils/common_functions.py ----
def add_to_recordable_attributes(input_obj, name=None, list_of_names=None):
    if not hasattr(input_obj, "record_these"):
        input_obj.record_these = []
    if name is not None:
        if name not in input_obj.record_these:
            input_obj.record_these.append(name)
        if not hasattr(input_obj, name):
            setattr(input_obj, name, 0)
    if list_of_names is not None and isinstance(list_of_names, list):
        for n in list_of_names:
            add_to_recordable_attributes(input_obj, name=n)


def assert_embeddings_and_labels_are_same_size(embeddings, labels):
    assert embeddings.size(0) == labels.size(0), "Number of embeddings must equal number of labels"


# ---- utils/loss_and_miner_utils.py ----
def sim_mat(x, y=None):
    """
    returns a matrix where entry (i,j) is the dot product of x[i] and x[j]
    """
    if y is None:
        y = x
    return torch.matmul(x, y.t())


def dist_mat(x, y=None, eps=1e-16, squared=False):
    """
    Input: x is a Nxd matrix
           y is an optional Mxd matirx
    Output: dist is a NxM matrix where dist[i,j]
    is the square norm between x[i,:] and y[j,:]
            if y is not given then use 'y=x'.
    i.e. dist[i,j] = ||x[i,:]-y[j,:]||
    """
    x_norm = (x ** 2).sum(1).view(-1, 1)
    if y is not None:
        y_t = torch.transpose(y, 0, 1)
        y_norm = (y ** 2).sum(1).view(1, -1)
    else:
        y_t = torch.transpose(x, 0, 1)
        y_norm = x_norm.view(1, -1)

    dist = x_norm + y_norm - 2.0 * torch.mm(x, y_t)
    # Ensure diagonal is zero if x=y
    if y is None:
        dist = dist - torch.diag(dist.diag())
    dist = torch.clamp(dist, 0.0, np.inf)
    if not squared:
        mask = (dist == 0).type(x.dtype)
        dist = dist + mask * eps
        dist = torch.sqrt(dist)
        dist = dist * (1.0 - mask)
    return dist


def get_pairwise_mat(x, y, use_similarity, squared):
    if x is y:
        y = None
    return sim_mat(x, y=y) if use_similarity else dist_mat(x, y=y, squared=squared)


def get_all_pairs_indices(labels, ref_labels=None):
    """
    Given a tensor of labels, this will return 4 tensors.
    The first 2 tensors are the indices which form all positive pairs
    The second 2 tensors are the indices which form all negative pairs
    """
    if ref_labels is None:
        ref_labels = labels
    labels1 = labels.unsqueeze(1)
    labels2 = ref_labels.unsqueeze(0)
    matches = (labels1 == labels2).byte()
    diffs = matches ^ 1
    if ref_labels is labels:
        matches.fill_diagonal_(0)
    a1_idx, p_idx = torch.where(matches)  # BREAK
    a2_idx, n_idx = torch.where(diffs)  # BREAK
    return a1_idx, p_idx, a2_idx, n_idx


def convert_to_pairs(indices_tuple, labels):
    """
    This returns anchor-positive and anchor-negative indices,
    regardless of what the input indices_tuple is
    Args:
        indices_tuple: tuple of tensors. Each tensor is 1d and specifies indices
                        within a batch
        labels: a tensor which has the label for each element in a batch
    """
    if indices_tuple is None:
        return get_all_pairs_indices(labels)
    elif len(indices_tuple) == 4:
        return indices_tuple
    else:
        a, p, n = indices_tuple
        return a, p, a, n


# ---- losses/base_metric_loss_function.py ----
class BaseMetricLossFunction(torch.nn.Module):
    """
    All loss functions extend this class
    """

    def __init__(self, normalize_embeddings=True, num_class_per_param=None, learnable_param_names=None):
        super().__init__()
        self.normalize_embeddings = normalize_embeddings
        self.num_class_per_param = num_class_per_param
        self.learnable_param_names = learnable_param_names
        self.add_to_recordable_attributes(name='avg_embedding_norm')

    def compute_loss(self, embeddings, labels, indices_tuple=None):
        """
        This has to be implemented and is what actually computes the loss.
        """
        raise NotImplementedError

    def forward(self, embeddings, labels, indices_tuple=None):
        """
        Args:
            embeddings: tensor of size (batch_size, embedding_size)
            labels: tensor of size (batch_size)
            indices_tuple: tuple of size 3 for triplets (anchors, positives, negatives)
                            or size 4 for pairs (anchor1, postives, anchor2, negatives)
                            Can also be left as None
        Returns: the loss (float)
        """
        assert_embeddings_and_labels_are_same_size(embeddings, labels)
        labels = labels.to(embeddings.device)
        if self.normalize_embeddings:
            embeddings = torch.nn.functional.normalize(embeddings, p=2, dim=1)
        self.embedding_norms = torch.norm(embeddings, p=2, dim=1)
        self.avg_embedding_norm = torch.mean(self.embedding_norms)
        loss = self.compute_loss(embeddings, labels, indices_tuple)
        if loss == 0:  # BREAK
            loss = torch.sum(embeddings * 0)
        return loss

    def add_to_recordable_attributes(self, name=None, list_of_names=None):
        add_to_recordable_attributes(self, name=name, list_of_names=list_of_names)


# ---- losses/generic_pair_loss.py ----
class GenericPairLoss(BaseMetricLossFunction):
    """
    The function pair_based_loss has to be implemented by the child class.
    By default, this class extracts every positive and negative pair within a
    batch (based on labels) and passes the pairs to the loss function.
    """

    def __init__(self, use_similarity, mat_based_loss, squared_distances=False, **kwargs):
        super().__init__(**kwargs)
        self.use_similarity = use_similarity
        self.squared_distances = squared_distances
        self.loss_method = self.mat_based_loss if mat_based_loss else self.pair_based_loss

    def compute_loss(self, embeddings, labels, indices_tuple):
        mat = get_pairwise_mat(embeddings, embeddings, self.use_similarity, self.squared_distances)
        if self.use_similarity and not self.normalize_embeddings:
            embedding_norms_mat = self.embedding_norms.unsqueeze(0) * self.embedding_norms.unsqueeze(1)
            mat = mat / embedding_norms_mat
        indices_tuple = convert_to_pairs(indices_tuple, labels)
        return self.loss_method(mat, labels, indices_tuple)

    def _compute_loss(self):
        raise NotImplementedError

    def mat_based_loss(self, mat, labels, indices_tuple):
        a1, p, a2, n = indices_tuple
        pos_mask, neg_mask = torch.zeros_like(mat), torch.zeros_like(mat)
        pos_mask[a1, p] = 1
        neg_mask[a2, n] = 1
        return self._compute_loss(mat, pos_mask, neg_mask)

    def pair_based_loss(self, mat, labels, indices_tuple):
        a1, p, a2, n = indices_tuple
        pos_pair, neg_pair = [], []
        if len(a1) > 0:
            pos_pair = mat[a1, p]
        if len(a2) > 0:
            neg_pair = mat[a2, n]
        return self._compute_loss(pos_pair, neg_pair, indices_tuple)


# ---- losses/contrastive_loss.py ----
class ContrastiveLoss(GenericPairLoss):
    """
    Contrastive loss using either distance or similarity.
    Args:
        pos_margin: The distance (or similarity) over (under) which positive pairs will contribute to the loss.
        neg_margin: The distance (or similarity) under (over) which negative pairs will contribute to the loss.
        use_similarity: If True, will use dot product between vectors instead of euclidean distance
        power: Each pair's loss will be raised to this power.
        avg_non_zero_only: Only pairs that contribute non-zero loss will be used in the final loss.
    """
    def __init__(
        self,
        pos_margin=0,
        neg_margin=1,
        use_similarity=False,
        power=1,
        avg_non_zero_only=True,
        **kwargs
    ):
        super().__init__(use_similarity=use_similarity, mat_based_loss=False, **kwargs)
        self.pos_margin = pos_margin
        self.neg_margin = neg_margin
        self.avg_non_zero_only = avg_non_zero_only
        self.power = power
        self.add_to_recordable_attributes(list_of_names=["num_non_zero_pos_pairs", "num_non_zero_neg_pairs"])

    def _compute_loss(self, pos_pair_dist, neg_pair_dist, *_):
        pos_loss, neg_loss = 0, 0
        self.num_non_zero_pos_pairs, self.num_non_zero_neg_pairs = 0, 0
        if len(pos_pair_dist) > 0:
            pos_loss, self.num_non_zero_pos_pairs = self.mask_margin_and_calculate_loss(pos_pair_dist, "pos")
        if len(neg_pair_dist) > 0:
            neg_loss, self.num_non_zero_neg_pairs = self.mask_margin_and_calculate_loss(neg_pair_dist, "neg")
        return pos_loss + neg_loss

    def mask_margin_and_calculate_loss(self, pair_dists, pos_or_neg):
        loss_calc_func = self.pos_calc if pos_or_neg == "pos" else self.neg_calc
        margin = self.pos_margin if pos_or_neg == "pos" else self.neg_margin
        per_pair_loss = loss_calc_func(pair_dists, margin) ** self.power
        num_non_zero_pairs = (per_pair_loss > 0).nonzero().size(0)  # BREAK
        if self.avg_non_zero_only:
            if num_non_zero_pairs > 0:
                loss = torch.sum(per_pair_loss) / num_non_zero_pairs
            else:
                loss = 0
        else:
            loss = torch.mean(per_pair_loss)
        return loss, num_non_zero_pairs

    def pos_calc(self, pos_pair_dist, margin):
        return (
            torch.nn.functional.relu(margin - pos_pair_dist)
            if self.use_similarity
            else torch.nn.functional.relu(pos_pair_dist - margin)
        )

    def neg_calc(self, neg_pair_dist, margin):
        return (
            torch.nn.functional.relu(neg_pair_dist - margin)
            if self.use_similarity
            else torch.nn.functional.relu(margin - neg_pair_dist)
        )


def target():
    torch.manual_seed(0)
    loss_func1 = ContrastiveLoss(pos_margin=0.2, neg_margin=0.9)
    loss_func2 = ContrastiveLoss(pos_margin=0.1, neg_margin=1.2)
    emb1, labels1 = torch.randn(10, 6), torch.randint(0, 3, (10,))
    emb2, labels2 = torch.randn(10, 6), torch.randint(0, 3, (10,))
    return [
        (loss_func1, (emb1, labels1), {}),
        (loss_func2, (emb2, labels2), {}),
    ]


EXPECT = ("rewrite: work on the full pairwise matrix with masks instead of index lists: `pos_mask = matches` "
          "(diagonal cleared), `neg_mask = diffs`, `per_pair_loss` computed for all pairs and multiplied by the mask, "
          "the non-zero count as `((per_pair_loss > 0) & mask).sum()` kept as a tensor and the average as "
          "`per_pair_loss.sum() / count.clamp(min=1)` (zero when count is 0), so neither `torch.where(matches)` nor "
          "`nonzero().size(0)` nor the `if count > 0` / `if loss == 0` branches remain; the recorded counts become "
          "0-d tensors")
