"""RAFT's training loop from princeton-vl/RAFT (`train.py`, the stored revision): `sequence_loss` (a Python loop
over the list of flow predictions with `gamma**(n_predictions - i - 1)` weights, `valid = (valid >= 0.5) & (mag <
max_flow)`, the boolean-mask selection `epe.view(-1)[valid.view(-1)]`, and a metrics dict of four `.item()`s),
`count_parameters` (a generator over `requires_grad` parameters), `fetch_optimizer` (AdamW + `OneCycleLR` with
`anneal_strategy='linear'`), the dummy `GradScaler` fallback class, `Logger` (`push` summing metrics into
`running_loss` with `if key not in ...`, `_print_training_status` every `SUM_FREQ` steps with a list comprehension
over `sorted(self.running_loss.keys())`, `"{:6d}, {:10.7f}"` formats and `("{:10.4f}, "*len(metrics_data))`,
a lazily created `SummaryWriter`, `write_dict`, `close`) and `train` (`while should_keep_training:` around the
loader loop, a list comprehension moving the data blob, `args.add_noise` drawing `np.random.uniform(0.0, 5.0)`
and adding `stdv * torch.randn(*image1.shape)` with `clamp`, `scaler.scale(loss).backward()`,
`scaler.unscale_`, `clip_grad_norm_`, `scaler.step`, `scheduler.step()`, `scaler.update()`, `logger.push`, the
`VAL_FREQ` checkpoint/validation block, `total_steps > args.num_steps` break, and the final checkpoint).
Adaptations: the RAFT network (`core/raft.py`, correlation pyramid and GRU update block, not carried) is a small
stand-in `RAFT` with the same call (`model(image1, image2, iters=...)` returning a list of `iters` flow
predictions, `freeze_bn`); `nn.DataParallel`, `.cuda()`, `args.gpus` are dropped; the `GradScaler` used is
`torch.amp.GradScaler('cpu', enabled=args.mixed_precision)` (mixed precision off: scale/unscale/step pass
through) in place of `torch.cuda.amp.GradScaler`; `SummaryWriter` (tensorboard not installed) is a recorder;
`torch.save` checkpoints are kept in a list; `datasets.fetch_dataloader` is a list of random batches made in the
factory; `SUM_FREQ` is 3 (100 upstream) so that the status print runs in a short run, and `VAL_FREQ` keeps 5000
(the validation block, which needs `evaluate.py`, does not run). The called function `train` seeds torch and
NumPy and restores the model from the factory's copy first (`reset_`), so a call repeats; it returns the
recorded scalars and the last loss."""
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

try:
    from torch.amp import GradScaler as _AmpGradScaler

    def GradScaler(enabled=False):
        return _AmpGradScaler('cpu', enabled=enabled)  # BREAK
except:
    # dummy GradScaler for PyTorch < 1.6
    class GradScaler:
        def __init__(self):
            pass
        def scale(self, loss):
            return loss
        def unscale_(self, optimizer):
            pass
        def step(self, optimizer):
            optimizer.step()
        def update(self):
            pass


# exclude extremly large displacements
MAX_FLOW = 400
SUM_FREQ = 3
VAL_FREQ = 5000

CHECKPOINTS = []


# ---- stand-ins (adaptation)
class SummaryWriter:
    def __init__(self):
        self.records = []

    def add_scalar(self, tag, value, step):
        self.records.append((tag, float(value), step))

    def close(self):
        pass


class RAFT(nn.Module):
    """Stand-in for core/raft.py RAFT: iterative refinement returning one flow per iteration."""
    def __init__(self, args):
        super().__init__()
        self.fnet = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.update = nn.Conv2d(8 * 2 + 2, 2, 3, padding=1)

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()

    def forward(self, image1, image2, iters=12):
        image1 = 2 * (image1 / 255.0) - 1.0
        image2 = 2 * (image2 / 255.0) - 1.0
        f1, f2 = self.fnet(image1), self.fnet(image2)
        flow = torch.zeros(image1.shape[0], 2, image1.shape[2], image1.shape[3])
        flow_predictions = []
        for itr in range(iters):
            flow = flow + self.update(torch.cat([f1, f2, flow], dim=1))
            flow_predictions.append(flow)
        return flow_predictions


# ---- train.py
def sequence_loss(flow_preds, flow_gt, valid, gamma=0.8, max_flow=MAX_FLOW):
    """ Loss function defined over sequence of flow predictions """

    n_predictions = len(flow_preds)
    flow_loss = 0.0

    # exlude invalid pixels and extremely large diplacements
    mag = torch.sum(flow_gt**2, dim=1).sqrt()
    valid = (valid >= 0.5) & (mag < max_flow)

    for i in range(n_predictions):
        i_weight = gamma**(n_predictions - i - 1)
        i_loss = (flow_preds[i] - flow_gt).abs()
        flow_loss += i_weight * (valid[:, None] * i_loss).mean()

    epe = torch.sum((flow_preds[-1] - flow_gt)**2, dim=1).sqrt()
    epe = epe.view(-1)[valid.view(-1)]  # BREAK

    metrics = {
        'epe': epe.mean().item(),  # BREAK
        '1px': (epe < 1).float().mean().item(),  # BREAK
        '3px': (epe < 3).float().mean().item(),  # BREAK
        '5px': (epe < 5).float().mean().item(),  # BREAK
    }

    return flow_loss, metrics


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def fetch_optimizer(args, model):
    """ Create the optimizer and learning rate scheduler """
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.wdecay, eps=args.epsilon)  # BREAK

    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, args.lr, args.num_steps+100,
        pct_start=0.05, cycle_momentum=False, anneal_strategy='linear')

    return optimizer, scheduler


class Logger:
    def __init__(self, model, scheduler):
        self.model = model
        self.scheduler = scheduler
        self.total_steps = 0
        self.running_loss = {}
        self.writer = None

    def _print_training_status(self):
        metrics_data = [self.running_loss[k]/SUM_FREQ for k in sorted(self.running_loss.keys())]
        training_str = "[{:6d}, {:10.7f}] ".format(self.total_steps+1, self.scheduler.get_last_lr()[0])
        metrics_str = ("{:10.4f}, "*len(metrics_data)).format(*metrics_data)

        # print the training status
        print(training_str + metrics_str)

        if self.writer is None:
            self.writer = SummaryWriter()

        for k in self.running_loss:
            self.writer.add_scalar(k, self.running_loss[k]/SUM_FREQ, self.total_steps)
            self.running_loss[k] = 0.0

    def push(self, metrics):
        self.total_steps += 1

        for key in metrics:
            if key not in self.running_loss:
                self.running_loss[key] = 0.0

            self.running_loss[key] += metrics[key]

        if self.total_steps % SUM_FREQ == SUM_FREQ-1:
            self._print_training_status()
            self.running_loss = {}

    def write_dict(self, results):
        if self.writer is None:
            self.writer = SummaryWriter()

        for key in results:
            self.writer.add_scalar(key, results[key], self.total_steps)

    def close(self):
        self.writer.close()


def train(args, model, train_loader, initial_state):
    reset_(model, initial_state)
    print("Parameter Count: %d" % count_parameters(model))  # BREAK

    model.train()

    if args.stage != 'chairs':
        model.freeze_bn()

    optimizer, scheduler = fetch_optimizer(args, model)

    total_steps = 0
    scaler = GradScaler(enabled=args.mixed_precision)
    logger = Logger(model, scheduler)

    VAL_FREQ = 5000
    add_noise = True

    should_keep_training = True
    while should_keep_training:

        for i_batch, data_blob in enumerate(train_loader):
            optimizer.zero_grad()  # BREAK
            image1, image2, flow, valid = [x for x in data_blob]

            if args.add_noise:
                stdv = np.random.uniform(0.0, 5.0)
                image1 = (image1 + stdv * torch.randn(*image1.shape)).clamp(0.0, 255.0)
                image2 = (image2 + stdv * torch.randn(*image2.shape)).clamp(0.0, 255.0)

            flow_predictions = model(image1, image2, iters=args.iters)

            loss, metrics = sequence_loss(flow_predictions, flow, valid, args.gamma)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)

            scaler.step(optimizer)  # BREAK
            scheduler.step()
            scaler.update()

            logger.push(metrics)

            if total_steps % VAL_FREQ == VAL_FREQ - 1:
                PATH = 'checkpoints/%d_%s.pth' % (total_steps+1, args.name)
                CHECKPOINTS.append((PATH, model.state_dict()))

                results = {}
                logger.write_dict(results)

                model.train()
                if args.stage != 'chairs':
                    model.freeze_bn()

            total_steps += 1

            if total_steps > args.num_steps:
                should_keep_training = False
                break

    logger.close()
    PATH = 'checkpoints/%s.pth' % args.name
    CHECKPOINTS.append((PATH, model.state_dict()))

    return logger.writer.records, loss.detach()


def reset_(model, initial_state):
    """Adaptation: seed and restore the model so that a call repeats."""
    torch.manual_seed(1234)  # BREAK
    np.random.seed(1234)
    CHECKPOINTS.clear()
    model.load_state_dict(initial_state)  # BREAK


def target():
    torch.manual_seed(0)
    base = argparse.Namespace(name='raft', stage='chairs', lr=0.0004, num_steps=5, iters=3, wdecay=.00005,
                              epsilon=1e-8, clip=1.0, gamma=0.8, add_noise=False, mixed_precision=False)
    model = RAFT(base)
    initial_state = copy.deepcopy(model.state_dict())

    def loader(n, bs, h, w):
        out = []
        for _ in range(n):
            valid = (torch.rand(bs, h, w) > 0.2).float()
            out.append((torch.rand(bs, 3, h, w) * 255, torch.rand(bs, 3, h, w) * 255,
                        torch.randn(bs, 2, h, w) * 3, valid))
        return out

    args2 = argparse.Namespace(**vars(base))
    args2.stage, args2.add_noise, args2.num_steps, args2.iters = 'things', True, 4, 4
    return [
        (train, (base, model, loader(4, 2, 16, 16), initial_state), {}),
        (train, (args2, model, loader(3, 2, 12, 16), initial_state), {}),
    ]


EXPECT = ("extract: `sequence_loss`'s metrics block selects `epe.view(-1)[valid.view(-1)]` by a boolean mask "
          "and calls `.item()` four times to build a dict of floats for the logger; that block belongs in an eager "
          "helper (escape hatch) while the weighted loss over the prediction list stays compiled; the training "
          "driver (scaler, OneCycle scheduler, `np.random.uniform` noise, logger printing) stays eager glue")
