"""MoCo's forward: the momentum update of the key encoder under `@torch.no_grad()`, the DDP batch shuffle
(`torch.randperm`, a broadcast, `torch.argsort`, the rank's slice) and unshuffle around the key encoder, the positive and
negative logits by `torch.einsum` against `self.queue.clone().detach()`, and `_dequeue_and_enqueue`, which reads the
queue pointer buffer on the host with `ptr = int(self.queue_ptr)`, checks `assert self.K % batch_size == 0`, writes
`self.queue[:, ptr : ptr + batch_size] = keys.T` and stores `self.queue_ptr[0] = ptr` (facebookresearch/moco
moco/builder.py: `MoCo.__init__/_momentum_update_key_encoder/_dequeue_and_enqueue/_batch_shuffle_ddp/
_batch_unshuffle_ddp/forward`, `concat_all_gather`; main_moco.py: the `train` loop body up to the loss).
Adaptations: the ResNet `base_encoder` is a two-layer MLP stand-in with an `fc` head built as
`base_encoder(num_classes=dim)` (no BatchNorm, so the shuffle does not change the keys); there is no process group,
so `torch.distributed` is replaced by a single-process stand-in (`dist` below: world size 1, rank 0, `broadcast` a
no-op, `all_gather` a copy); `.cuda()` calls are dropped; sizes are small (dim 8, K 16, batches of 4 flattened 2x4x4
"images"). So that a call gives the same result when it is run again, the call first restores the key encoder, the
queue and the pointer (`reset_`, an adaptation; the original keeps them across iterations), then takes two steps
(so the pointer moves) and returns the logits, labels and losses of both steps and a copy of the queue."""
import torch
import torch.nn as nn


class _DistStandIn(object):
    """Single-process stand-in for the torch.distributed calls MoCo makes."""

    def get_world_size(self):
        return 1

    def get_rank(self):
        return 0

    def broadcast(self, tensor, src=0):
        return None

    def all_gather(self, tensor_list, tensor, async_op=False):
        for t in tensor_list:
            t.copy_(tensor)


dist = _DistStandIn()


class MoCo(nn.Module):
    """
    Build a MoCo model with: a query encoder, a key encoder, and a queue
    https://arxiv.org/abs/1911.05722
    """

    def __init__(self, base_encoder, dim=128, K=65536, m=0.999, T=0.07, mlp=False):
        """
        dim: feature dimension (default: 128)
        K: queue size; number of negative keys (default: 65536)
        m: moco momentum of updating key encoder (default: 0.999)
        T: softmax temperature (default: 0.07)
        """
        super(MoCo, self).__init__()

        self.K = K
        self.m = m
        self.T = T

        # create the encoders
        # num_classes is the output fc dimension
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)

        if mlp:  # hack: brute-force replacement
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc
            )
            self.encoder_k.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc
            )

        for param_q, param_k in zip(
            self.encoder_q.parameters(), self.encoder_k.parameters()
        ):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not update by gradient

        # create the queue
        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)

        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        """
        Momentum update of the key encoder
        """
        for param_q, param_k in zip(
            self.encoder_q.parameters(), self.encoder_k.parameters()
        ):
            param_k.mul_(self.m).add_(param_q.mul(1. - self.m))

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        # gather keys before updating queue
        keys = concat_all_gather(keys)

        batch_size = keys.shape[0]

        ptr = int(self.queue_ptr)  # BREAK
        assert self.K % batch_size == 0  # for simplicity

        # replace the keys at ptr (dequeue and enqueue)
        self.queue[:, ptr : ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K  # move pointer

        self.queue_ptr[0] = ptr

    @torch.no_grad()
    def _batch_shuffle_ddp(self, x):
        """
        Batch shuffle, for making use of BatchNorm.
        *** Only support DistributedDataParallel (DDP) model. ***
        """
        # gather from all gpus
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]

        num_gpus = batch_size_all // batch_size_this

        # random shuffle index
        idx_shuffle = torch.randperm(batch_size_all)

        # broadcast to all gpus
        dist.broadcast(idx_shuffle, src=0)

        # index for restoring
        idx_unshuffle = torch.argsort(idx_shuffle)

        # shuffled index for this gpu
        gpu_idx = dist.get_rank()
        idx_this = idx_shuffle.view(num_gpus, -1)[gpu_idx]

        return x_gather[idx_this], idx_unshuffle

    @torch.no_grad()
    def _batch_unshuffle_ddp(self, x, idx_unshuffle):
        """
        Undo batch shuffle.
        *** Only support DistributedDataParallel (DDP) model. ***
        """
        # gather from all gpus
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]

        num_gpus = batch_size_all // batch_size_this

        # restored index for this gpu
        gpu_idx = dist.get_rank()
        idx_this = idx_unshuffle.view(num_gpus, -1)[gpu_idx]

        return x_gather[idx_this]

    def forward(self, im_q, im_k):
        """
        Input:
            im_q: a batch of query images
            im_k: a batch of key images
        Output:
            logits, targets
        """

        # compute query features
        q = self.encoder_q(im_q)  # queries: NxC
        q = nn.functional.normalize(q, dim=1)

        # compute key features
        with torch.no_grad():  # no gradient to keys
            self._momentum_update_key_encoder()  # update the key encoder

            # shuffle for making use of BN
            im_k, idx_unshuffle = self._batch_shuffle_ddp(im_k)

            k = self.encoder_k(im_k)  # keys: NxC
            k = nn.functional.normalize(k, dim=1)

            # undo shuffle
            k = self._batch_unshuffle_ddp(k, idx_unshuffle)

        # compute logits
        # Einstein sum is more intuitive
        # positive logits: Nx1
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        # negative logits: NxK
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])

        # logits: Nx(1+K)
        logits = torch.cat([l_pos, l_neg], dim=1)

        # apply temperature
        logits /= self.T

        # labels: positive key indicators
        labels = torch.zeros(logits.shape[0], dtype=torch.long)

        # dequeue and enqueue
        self._dequeue_and_enqueue(k)

        return logits, labels


# utils
@torch.no_grad()
def concat_all_gather(tensor):
    """
    Performs all_gather operation on the provided tensors.
    *** Warning ***: torch.distributed.all_gather has no gradient.
    """
    tensors_gather = [
        torch.ones_like(tensor) for _ in range(dist.get_world_size())
    ]
    dist.all_gather(tensors_gather, tensor, async_op=False)

    output = torch.cat(tensors_gather, dim=0)
    return output


class MLPEncoder(nn.Module):
    """Stand-in for torchvision's ResNet as `base_encoder`: flatten, a hidden layer, an `fc` head."""

    def __init__(self, num_classes=128):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(32, 16), nn.ReLU())
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(self.body(x))


def reset_(model, snapshot):
    """Adaptation: restore the key encoder, the queue and the pointer."""
    with torch.no_grad():
        for p, p0 in zip(model.encoder_k.parameters(), snapshot["encoder_k"]):
            p.copy_(p0)
        model.queue.copy_(snapshot["queue"])
        model.queue_ptr.zero_()


def train_steps(model, criterion, snapshot, batches):
    reset_(model, snapshot)
    outs = []
    for images in batches:
        # compute output
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)
        outs.append((output, target, loss))
    return outs, model.queue.clone()


def target():
    torch.manual_seed(0)
    model = MoCo(MLPEncoder, dim=8, K=16, m=0.99, T=0.07, mlp=False)
    criterion = nn.CrossEntropyLoss()
    snapshot = {"encoder_k": [p.detach().clone() for p in model.encoder_k.parameters()],
                "queue": model.queue.detach().clone()}
    gen = torch.Generator().manual_seed(0)

    def batch():
        x = torch.randn(4, 2, 4, 4, generator=gen)
        return [x + 0.1 * torch.randn(4, 2, 4, 4, generator=gen), x + 0.1 * torch.randn(4, 2, 4, 4, generator=gen)]

    batches1 = [batch(), batch()]
    batches2 = [batch(), batch()]
    return [
        (train_steps, (model, criterion, snapshot, batches1), {}),
        (train_steps, (model, criterion, snapshot, batches2), {}),
    ]


EXPECT = ("rewrite: keep the queue pointer a tensor: write the keys with `index_copy_` / a modular index "
          "(`idx = (self.queue_ptr + torch.arange(batch_size)) % self.K`, `self.queue[:, idx] = keys.T`, "
          "`self.queue_ptr.add_(batch_size).remainder_(self.K)`) instead of `ptr = int(self.queue_ptr)` and a slice "
          "with host bounds; the `torch.randperm` shuffle is not a break by itself (`config: capture_scalar_outputs` "
          "is the fallback for the `int()`)")
