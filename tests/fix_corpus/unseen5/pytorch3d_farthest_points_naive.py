"""Pure-PyTorch farthest point sampling: `max_K = torch.max(K)` sizing `torch.full((max_K,), ...)`,
`points.new_full((lengths[n],), ...)`, `k_n = min(lengths[n], K[n])` and `for i in range(1, k_n):` (tensor sizes and
a tensor loop bound), then `masked_gather` (facebookresearch/pytorch3d pytorch3d/ops/sample_farthest_points.py:
sample_farthest_points_naive; pytorch3d/ops/utils.py: masked_gather). The caller is a small stand-in point-cloud
encoder (a per-point MLP and a max pool over the sampled centroids' features); `random_start_point=False` (the default)
so no random start is drawn. pytorch3d is not installed; the two functions are copied."""
from random import randint
from typing import List, Optional, Tuple, Union

import torch
import torch.nn as nn


def masked_gather(points: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """
    Helper function for torch.gather to collect the points at
    the given indices in idx where some of the indices might be -1 to
    indicate padding. These indices are first replaced with 0.
    Then the points are gathered after which the padded values
    are set to 0.0.
    """

    if len(idx) != len(points):
        raise ValueError("points and idx must have the same batch dimension")

    N, P, D = points.shape

    if idx.ndim == 3:
        # Case: KNN, Ball Query where idx is of shape (N, P', K)
        # where P' is not necessarily the same as P as the
        # points may be gathered from a different pointcloud.
        K = idx.shape[2]
        # Match dimensions for points and indices
        idx_expanded = idx[..., None].expand(-1, -1, -1, D)
        points = points[:, :, None, :].expand(-1, -1, K, -1)
    elif idx.ndim == 2:
        # Farthest point sampling where idx is of shape (N, K)
        idx_expanded = idx[..., None].expand(-1, -1, D)
    else:
        raise ValueError("idx format is not supported %s" % repr(idx.shape))

    idx_expanded_mask = idx_expanded.eq(-1)
    idx_expanded = idx_expanded.clone()
    # Replace -1 values with 0 for gather
    idx_expanded[idx_expanded_mask] = 0
    # Gather points
    selected_points = points.gather(dim=1, index=idx_expanded)
    # Replace padded values
    selected_points[idx_expanded_mask] = 0.0
    return selected_points


def sample_farthest_points_naive(
    points: torch.Tensor,
    lengths: Optional[torch.Tensor] = None,
    K: Union[int, List, torch.Tensor] = 50,
    random_start_point: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    Same Args/Returns as sample_farthest_points
    """
    N, P, D = points.shape
    device = points.device

    # Validate inputs
    if lengths is None:
        lengths = torch.full((N,), P, dtype=torch.int64, device=device)

    if lengths.shape[0] != N:
        raise ValueError("points and lengths must have same batch dimension.")

    # TODO: support providing K as a ratio of the total number of points instead of as an int
    if isinstance(K, int):
        K = torch.full((N,), K, dtype=torch.int64, device=device)
    elif isinstance(K, list):
        K = torch.tensor(K, dtype=torch.int64, device=device)

    if K.shape[0] != N:
        raise ValueError("K and points must have the same batch dimension")

    # Find max value of K
    max_K = torch.max(K)

    # List of selected indices from each batch element
    all_sampled_indices = []

    for n in range(N):
        # Initialize an array for the sampled indices, shape: (max_K,)
        sample_idx_batch = torch.full(  # BREAK
            (max_K,), fill_value=-1, dtype=torch.int64, device=device
        )

        # Initialize closest distances to inf, shape: (P,)
        # This will be updated at each iteration to track the closest distance of the
        # remaining points to any of the selected points
        closest_dists = points.new_full(
            (lengths[n],), float("inf"), dtype=torch.float32
        )

        # Select a random point index and save it as the starting point
        selected_idx = randint(0, lengths[n] - 1) if random_start_point else 0
        sample_idx_batch[0] = selected_idx

        # If the pointcloud has fewer than K points then only iterate over the min
        k_n = min(lengths[n], K[n])

        # Iteratively select points for a maximum of k_n
        for i in range(1, k_n):
            # Find the distance between the last selected point
            # and all the other points. If a point has already been selected
            # it's distance will be 0.0 so it will not be selected again as the max.
            dist = points[n, selected_idx, :] - points[n, : lengths[n], :]
            dist_to_last_selected = (dist ** 2).sum(-1)  # (P - i)

            # If closer than currently saved distance to one of the selected
            # points, then updated closest_dists
            closest_dists = torch.min(dist_to_last_selected, closest_dists)  # (P - i)

            # The aim is to pick the point that has the largest
            # nearest neighbour distance to any of the already selected points
            selected_idx = torch.argmax(closest_dists)
            sample_idx_batch[i] = selected_idx

        # Add the list of points for this batch to the final list
        all_sampled_indices.append(sample_idx_batch)

    all_sampled_indices = torch.stack(all_sampled_indices, dim=0)

    # Gather the points
    all_sampled_points = masked_gather(points, all_sampled_indices)

    # Return (N, max_K, D) subsampled points and indices
    return all_sampled_points, all_sampled_indices


class FPSEncoder(nn.Module):
    """Stand-in caller: per-point features, farthest-point centroids, pooled centroid features."""

    def __init__(self, num_samples=8, dim=16):
        super().__init__()
        self.num_samples = num_samples
        self.mlp = nn.Sequential(nn.Linear(3, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, points):
        centroids, idx = sample_farthest_points_naive(points, K=self.num_samples)
        feats = self.mlp(centroids)
        return feats.max(dim=1)[0], idx


def target():
    torch.manual_seed(0)
    model = FPSEncoder().eval()
    return [
        (model, (torch.randn(2, 32, 3),), {}),
        (model, (torch.rand(2, 32, 3) * 4.0,), {}),
    ]


EXPECT = ("rewrite: keep the sizes Python ints (`max_K = int(K.max())` once / `K` kept as the int it was given, "
          "`P` for the distance buffer since `lengths` defaults to `P`), so `torch.full`, `new_full` and the "
          "`range(1, k_n)` loop bound no longer read tensors")
