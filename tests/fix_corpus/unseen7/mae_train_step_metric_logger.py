"""The step of MAE's pre-training loop: under `torch.cuda.amp.autocast()`, `loss, _, _ = model(samples,
mask_ratio=args.mask_ratio)`, then `loss_value = loss.item()`, `if not math.isfinite(loss_value): print(...);
sys.exit(1)`, `loss /= accum_iter`, `metric_logger.update(loss=loss_value)` into a `MetricLogger` of
`SmoothedValue`s (a `deque`, running totals), `lr = optimizer.param_groups[0]["lr"]`, `metric_logger.update(lr=lr)`
and `misc.all_reduce_mean(loss_value)` (facebookresearch/mae engine_pretrain.py: train_one_epoch's loop body;
util/misc.py: SmoothedValue, MetricLogger.update/add_meter, is_dist_avail_and_initialized, get_world_size,
all_reduce_mean). The loop is one call per batch; the backward/`loss_scaler` and `lr_sched.adjust_learning_rate`
are left out, and `torch.cuda.synchronize()` is dropped (CPU). The MAE model is replaced by a tiny stand-in with the
same call signature and return (`loss, pred, mask`): patchify, a linear encoder over the kept patches, a linear
decoder, and the normalised-pixel MSE over the masked patches; its masking keeps the first
`int(L * (1 - mask_ratio))` patches instead of MAE's `torch.rand` shuffle, so the step is deterministic. The
optimizer is an SGD over the stand-in's parameters (only its learning rate is read). The call returns the divided
loss and the reduced loss value."""
import math
import sys
from collections import defaultdict, deque

import torch
import torch.distributed as dist
import torch.nn as nn


class SmoothedValue(object):
    """Track a series of values and provide access to smoothed values over a
    window or the global series average.
    """

    def __init__(self, window_size=20, fmt=None):
        if fmt is None:
            fmt = "{median:.4f} ({global_avg:.4f})"
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def global_avg(self):
        return self.total / self.count


class MetricLogger(object):
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if v is None:
                continue
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def add_meter(self, name, meter):
        self.meters[name] = meter


def is_dist_avail_and_initialized():
    if not dist.is_available():
        return False
    if not dist.is_initialized():
        return False
    return True


def get_world_size():
    if not is_dist_avail_and_initialized():
        return 1
    return dist.get_world_size()


def all_reduce_mean(x):
    world_size = get_world_size()
    if world_size > 1:
        x_reduce = torch.tensor(x).cuda()
        dist.all_reduce(x_reduce)
        x_reduce /= world_size
        return x_reduce.item()
    else:
        return x


class TinyMAE(nn.Module):
    """Stand-in for models_mae.MaskedAutoencoderViT (forward(imgs, mask_ratio) -> loss, pred, mask)."""

    def __init__(self, patch_size=4, in_chans=3, embed_dim=8, norm_pix_loss=True):
        super().__init__()
        self.patch_size = patch_size
        self.norm_pix_loss = norm_pix_loss
        self.encoder = nn.Linear(patch_size ** 2 * in_chans, embed_dim)
        self.decoder = nn.Linear(embed_dim, patch_size ** 2 * in_chans)
        self.mask_token = nn.Parameter(0.02 * torch.randn(1, 1, embed_dim))

    def patchify(self, imgs):
        p = self.patch_size
        h = w = imgs.shape[2] // p
        x = imgs.reshape(shape=(imgs.shape[0], 3, h, p, w, p))
        x = torch.einsum('nchpwq->nhwpqc', x)
        x = x.reshape(shape=(imgs.shape[0], h * w, p**2 * 3))
        return x

    def forward(self, imgs, mask_ratio=0.75):
        target = self.patchify(imgs)
        N, L, _ = target.shape
        len_keep = int(L * (1 - mask_ratio))
        mask = torch.ones(N, L)
        mask[:, :len_keep] = 0
        latent = self.encoder(target[:, :len_keep])
        tokens = torch.cat([latent, self.mask_token.expand(N, L - len_keep, -1)], dim=1)
        tokens = tokens + latent.mean(1, keepdim=True)
        pred = self.decoder(tokens)
        if self.norm_pix_loss:
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.e-6)**.5
        loss = (pred - target) ** 2
        loss = loss.mean(dim=-1)  # [N, L], mean loss per patch
        loss = (loss * mask).sum() / mask.sum()  # mean loss on removed patches
        return loss, pred, mask


def train_step(model, samples, optimizer, metric_logger, device, args):
    accum_iter = args.accum_iter

    samples = samples.to(device, non_blocking=True)

    with torch.cuda.amp.autocast():
        loss, _, _ = model(samples, mask_ratio=args.mask_ratio)

    loss_value = loss.item()  # BREAK

    if not math.isfinite(loss_value):  # BREAK
        print("Loss is {}, stopping training".format(loss_value))
        sys.exit(1)

    loss /= accum_iter

    metric_logger.update(loss=loss_value)

    lr = optimizer.param_groups[0]["lr"]
    metric_logger.update(lr=lr)

    loss_value_reduce = all_reduce_mean(loss_value)
    return loss, loss_value_reduce


def target():
    torch.manual_seed(0)

    class Args:
        accum_iter = 2
        mask_ratio = 0.75

    model = TinyMAE()
    model.eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.5e-4)
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter('lr', SmoothedValue(window_size=1, fmt='{value:.6f}'))
    device = torch.device('cpu')
    samples1 = torch.randn(2, 3, 8, 8)
    samples2 = torch.randn(2, 3, 8, 8)
    return [
        (train_step, (model, samples1, optimizer, metric_logger, device, Args()), {}),
        (train_step, (model, samples2, optimizer, metric_logger, device, Args()), {}),
    ]


EXPECT = ("caller: compile the model forward (and the loss division) only, return the loss tensor, and do the host "
          "bookkeeping in the training loop after it: `loss.item()`, the `math.isfinite` check with `print`/"
          "`sys.exit`, the `MetricLogger` updates and `all_reduce_mean`; the deprecated `torch.cuda.amp.autocast()` "
          "becomes `torch.autocast('cuda')`")
