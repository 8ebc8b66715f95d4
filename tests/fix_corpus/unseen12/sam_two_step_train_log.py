"""Sharpness-aware minimisation training epoch with BatchNorm bypass and the example's step logger
(davda54/sam: `sam.py`: `SAM` with `@torch.no_grad()` `first_step`/`second_step` and `_grad_norm`;
`example/utility/bypass_bn.py`: `disable_running_stats`, `enable_running_stats`; `example/model/
smooth_cross_entropy.py`: `smooth_crossentropy`; `example/utility/step_lr.py`: `StepLR`; `example/utility/log.py`:
`Log`; `example/train.py`: the epoch loop). `SAM.first_step` computes `_grad_norm` (a `torch.stack` of
`p.grad.norm(p=2).to(shared_device)` from a nested comprehension with an `if p.grad is not None` filter), climbs to
`w + e(w)` with `p.add_(e_w)` and stores `self.state[p]["e_w"]`; `second_step` subtracts it and calls the base
SGD's `step()`. The bypass helpers `model.apply` closures that set `module.backup_momentum`/`module.momentum = 0` on
every `_BatchNorm` (and `hasattr(module, "backup_momentum")` to restore it). Per batch the loop does
`enable_running_stats`, forward, `smooth_crossentropy(...).mean().backward()`, `first_step(zero_grad=True)`,
`disable_running_stats`, the second forward/backward, `second_step(zero_grad=True)`, then under `torch.no_grad()`
`correct = torch.argmax(predictions.data, 1) == targets`, `log(model, loss.cpu(), correct.cpu(), scheduler.lr())`
(`Log._train_step` accumulates `loss.sum().item()`/`accuracy.sum().item()` and prints an f-string progress line
with the elapsed `time.time()`) and `scheduler(epoch)`.
Adaptations: the WideResNet is a small stand-in (`Conv2d`/`BatchNorm2d`/`ReLU`/pool/`Linear`, 3x8x8 inputs,
10 labels); CIFAR loaders are lists of `(inputs, targets)` batches made in the factory; `LoadingBar` is a minimal
stand-in returning a bar string; the `adaptive` keyword is not passed (the stored `sam.py` revision has no
`adaptive` option and would pass it on to SGD); `.to(device)` targets the CPU. So that a call repeats exactly, the
called function (`train_epoch`, an adaptation) restores the model, the SAM optimizer and its base SGD (whose momentum buffers live
in its own state) from copies taken in the factory (`reset_`) and makes a fresh `Log`; it returns the log's epoch sums and the model's eval logits on the first batch.
The two calls use different data and `rho`."""
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"

        defaults = dict(rho=rho, **kwargs)
        super(SAM, self).__init__(params, defaults)

        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)

            for p in group["params"]:
                if p.grad is None: continue
                e_w = p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"
                self.state[p]["e_w"] = e_w

        if zero_grad: self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None: continue
                p.sub_(self.state[p]["e_w"])  # get back to "w" from "w + e(w)"

        self.base_optimizer.step()  # do the actual "sharpness-aware" update  # BREAK

        if zero_grad: self.zero_grad()

    def step(self, closure=None):
        raise NotImplementedError("SAM doesn't work like the other optimizers, you should first call `first_step` and the `second_step`; see the documentation for more info.")

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device  # put everything on the same device, in case of model parallelism
        norm = torch.norm(
                    torch.stack([
                        p.grad.norm(p=2).to(shared_device)
                        for group in self.param_groups for p in group["params"]
                        if p.grad is not None
                    ]),
                    p=2
               )
        return norm


def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, _BatchNorm):
            module.backup_momentum = module.momentum
            module.momentum = 0

    model.apply(_disable)

def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, _BatchNorm) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum

    model.apply(_enable)


def smooth_crossentropy(pred, gold, smoothing=0.1):
    n_class = pred.size(1)

    one_hot = torch.full_like(pred, fill_value=smoothing / (n_class - 1))
    one_hot.scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
    log_prob = F.log_softmax(pred, dim=1)

    return F.kl_div(input=log_prob, target=one_hot, reduction='none').sum(-1)


class StepLR:
    def __init__(self, optimizer, learning_rate: float, total_epochs: int):
        self.optimizer = optimizer
        self.total_epochs = total_epochs
        self.base = learning_rate

    def __call__(self, epoch):
        if epoch < self.total_epochs * 3/10:
            lr = self.base
        elif epoch < self.total_epochs * 6/10:
            lr = self.base * 0.2
        elif epoch < self.total_epochs * 8/10:
            lr = self.base * 0.2 ** 2
        else:
            lr = self.base * 0.2 ** 3

        for param_group in self.optimizer.param_groups:
            param_group["lr"] = lr

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]


class LoadingBar:
    """Adaptation: minimal stand-in for utility/loading_bar.py."""

    def __init__(self, length: int = 40):
        self.length = length

    def __call__(self, progress: float) -> str:
        n = int(progress * self.length)
        return "[" + "=" * n + " " * (self.length - n) + "]"


class Log:
    def __init__(self, log_each: int, initial_epoch=-1):
        self.loading_bar = LoadingBar(length=27)
        self.best_accuracy = 0.0
        self.log_each = log_each
        self.epoch = initial_epoch

    def train(self, len_dataset: int) -> None:
        self.epoch += 1
        if self.epoch == 0:
            self._print_header()
        else:
            self.flush()

        self.is_train = True
        self.last_steps_state = {"loss": 0.0, "accuracy": 0.0, "steps": 0}
        self._reset(len_dataset)

    def __call__(self, model, loss, accuracy, learning_rate: float = None) -> None:
        if self.is_train:
            self._train_step(model, loss, accuracy, learning_rate)
        else:
            self._eval_step(loss, accuracy)

    def flush(self) -> None:
        if self.is_train:
            loss = self.epoch_state["loss"] / self.epoch_state["steps"]
            accuracy = self.epoch_state["accuracy"] / self.epoch_state["steps"]

            print(
                f"\r|{self.epoch:12d}  |{loss:12.4f}  |{100*accuracy:10.2f} %  |{self.learning_rate:12.3e}  |{self._time():>12}  |",
                end="",
                flush=True,
            )

        else:
            loss = self.epoch_state["loss"] / self.epoch_state["steps"]
            accuracy = self.epoch_state["accuracy"] / self.epoch_state["steps"]

            print(f"{loss:12.4f}  |{100*accuracy:10.2f} %  |", flush=True)

            if accuracy > self.best_accuracy:
                self.best_accuracy = accuracy

    def _train_step(self, model, loss, accuracy, learning_rate: float) -> None:
        self.learning_rate = learning_rate
        self.last_steps_state["loss"] += loss.sum().item()  # BREAK
        self.last_steps_state["accuracy"] += accuracy.sum().item()  # BREAK
        self.last_steps_state["steps"] += loss.size(0)
        self.epoch_state["loss"] += loss.sum().item()  # BREAK
        self.epoch_state["accuracy"] += accuracy.sum().item()  # BREAK
        self.epoch_state["steps"] += loss.size(0)
        self.step += 1

        if self.step % self.log_each == self.log_each - 1:
            loss = self.last_steps_state["loss"] / self.last_steps_state["steps"]
            accuracy = self.last_steps_state["accuracy"] / self.last_steps_state["steps"]

            self.last_steps_state = {"loss": 0.0, "accuracy": 0.0, "steps": 0}
            progress = self.step / self.len_dataset

            print(
                f"\r|{self.epoch:12d}  |{loss:12.4f}  |{100*accuracy:10.2f} %  |{learning_rate:12.3e}  |{self._time():>12}  {self.loading_bar(progress)}",
                end="",
                flush=True,
            )

    def _eval_step(self, loss, accuracy) -> None:
        self.epoch_state["loss"] += loss.sum().item()
        self.epoch_state["accuracy"] += accuracy.sum().item()
        self.epoch_state["steps"] += loss.size(0)

    def _reset(self, len_dataset: int) -> None:
        self.start_time = time.time()
        self.step = 0
        self.len_dataset = len_dataset
        self.epoch_state = {"loss": 0.0, "accuracy": 0.0, "steps": 0}

    def _time(self) -> str:
        time_seconds = int(time.time() - self.start_time)  # BREAK
        return f"{time_seconds // 60:02d}:{time_seconds % 60:02d} min"

    def _print_header(self) -> None:
        print(f"|-----------------------T--R--A--I--N-----------------S--T--A--T--S-----------------V--A--L--I--D--------|")  # BREAK
        print(f"|       epoch  |        loss  |    accuracy  |        l.r.  |     elapsed  |        loss  |    accuracy  |")


class SmallResNet(nn.Module):
    """Adaptation: small stand-in for example/model/wide_res_net.py's WideResNet."""

    def __init__(self, in_channels=3, labels=10):
        super().__init__()
        self.f = nn.Sequential(
            nn.Conv2d(in_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, labels),
        )

    def forward(self, x):
        return self.f(x)


def train(model, dataset_train, optimizer, scheduler, log, epoch, device):
    model.train()
    log.train(len_dataset=len(dataset_train))

    for batch in dataset_train:
        inputs, targets = (b.to(device) for b in batch)

        # first forward-backward step
        enable_running_stats(model)
        predictions = model(inputs)
        loss = smooth_crossentropy(predictions, targets)
        loss.mean().backward()  # BREAK
        optimizer.first_step(zero_grad=True)

        # second forward-backward step
        disable_running_stats(model)
        smooth_crossentropy(model(inputs), targets).mean().backward()
        optimizer.second_step(zero_grad=True)

        with torch.no_grad():
            correct = torch.argmax(predictions.data, 1) == targets
            log(model, loss.cpu(), correct.cpu(), scheduler.lr())
            scheduler(epoch)


def reset_(model, optimizer, model_state, opt_state, rho):
    """Adaptation: restore the initial model/optimizer so that a call repeats exactly."""
    model.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state[0])  # BREAK
    optimizer.base_optimizer.load_state_dict(opt_state[1])  # BREAK
    optimizer.param_groups = optimizer.base_optimizer.param_groups  # re-share the groups, as SAM.__init__ does
    for group in optimizer.param_groups:
        group["rho"] = rho
    enable_running_stats(model)


def train_epoch(dataset_train, model, optimizer, model_state, opt_state, rho):
    reset_(model, optimizer, model_state, opt_state, rho)
    scheduler = StepLR(optimizer, 0.1, 10)
    log = Log(log_each=2)
    train(model, dataset_train, optimizer, scheduler, log, 0, torch.device("cpu"))
    model.eval()
    with torch.no_grad():
        logits = model(dataset_train[0][0])
    return dict(log.epoch_state), logits


def target():
    torch.manual_seed(0)
    model = SmallResNet(in_channels=3, labels=10)
    base_optimizer = torch.optim.SGD
    optimizer = SAM(model.parameters(), base_optimizer, rho=2.0, lr=0.1, momentum=0.9, weight_decay=0.0005)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = (copy.deepcopy(optimizer.state_dict()), copy.deepcopy(optimizer.base_optimizer.state_dict()))
    data1 = [(torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))) for _ in range(3)]
    data2 = [(torch.randn(6, 3, 8, 8), torch.randint(0, 10, (6,))) for _ in range(2)]
    return [
        (train_epoch, (data1, model, optimizer, model_state, opt_state, 2.0), {}),
        (train_epoch, (data2, model, optimizer, model_state, opt_state, 0.5), {}),
    ]


EXPECT = ("caller: the SAM epoch is an eager driver (two backward passes and two optimizer half-steps per batch, "
          "`model.apply` closures flipping BatchNorm momentum, `Log`'s per-step `.item()` sums, `time.time()` and "
          "f-string prints); compile the model and the loss, keep the loop, the optimizer steps and the logging "
          "eager. `SAM.first_step`/`second_step` under `@torch.no_grad()` are expected to trace")
