"""Epochs of the CIFAR-10 demo of Luolc/AdaBound with the AdaBound / AMSBound optimizer
(`adabound/adabound.py` `AdaBound`; `demos/cifar10/main.py` `create_optimizer`, `train`, `test`, the `main` epoch
loop). `AdaBound.__init__` keeps `self.base_lrs = list(map(lambda group: group['lr'], self.param_groups))`;
`step(closure=None)` zips `param_groups` with `base_lrs`, skips `p.grad is None`, raises on `grad.is_sparse`,
lazily initialises `state` when `len(state) == 0` with a Python-int `state['step']`, uses the deprecated
positional-alpha forms `grad.add(group['weight_decay'], p.data)`, `exp_avg.mul_(beta1).add_(1 - beta1, grad)` and
`addcmul_(1 - beta2, grad, grad)`, the AMSBound `torch.max(..., out=...)` branch, `math.sqrt` bias corrections
on the int step, bounds computed in Python floats from `group['gamma'] * state['step']`, a
`torch.full_like(denom, step_size)` clamped in place, and `p.data.add_(-step_size)`. The demo's `train`/`test`
accumulate `loss.item()` and `predicted.eq(targets).sum().item()`, print `%`-formatted accuracies, and the epoch
loop steps `StepLR` (`step_size=150`) before each epoch and keeps the best accuracy (checkpoint `torch.save`).
Adaptations: ResNet34/DenseNet121 (`models/`) are a small stand-in CNN; `build_dataset`'s torchvision CIFAR-10
loaders are lists of `(inputs, targets)` batches of random tensors made in the factory; checkpoint and curve
`torch.save` calls keep their dicts in memory (`saved`); 2 epochs per call, `StepLR` with `step_size=1` stepped after each epoch
(current torch warns when the scheduler steps before the optimizer); the first call uses AdaBound, the
second AMSBound (`create_optimizer`'s two branches). So that a call repeats exactly, the called function
`run_epochs` restores the net and the optimizer from copies taken in the factory and rebuilds `StepLR`
(`reset_`); it returns the accuracies and a weight of the net."""
from __future__ import print_function

import argparse
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim import Optimizer


class AdaBound(Optimizer):
    """Implements AdaBound algorithm.
    It has been proposed in `Adaptive Gradient Methods with Dynamic Bound of Learning Rate`_.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), final_lr=0.1, gamma=1e-3,
                 eps=1e-8, weight_decay=0, amsbound=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        if not 0.0 <= final_lr:
            raise ValueError("Invalid final learning rate: {}".format(final_lr))
        if not 0.0 <= gamma < 1.0:
            raise ValueError("Invalid gamma parameter: {}".format(gamma))
        defaults = dict(lr=lr, betas=betas, final_lr=final_lr, gamma=gamma, eps=eps,
                        weight_decay=weight_decay, amsbound=amsbound)
        super(AdaBound, self).__init__(params, defaults)

        self.base_lrs = list(map(lambda group: group['lr'], self.param_groups))

    def __setstate__(self, state):
        super(AdaBound, self).__setstate__(state)
        for group in self.param_groups:
            group.setdefault('amsbound', False)

    def step(self, closure=None):
        """Performs a single optimization step.
        Arguments:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """
        loss = None
        if closure is not None:
            loss = closure()

        for group, base_lr in zip(self.param_groups, self.base_lrs):
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                if grad.is_sparse:
                    raise RuntimeError(
                        'Adam does not support sparse gradients, please consider SparseAdam instead')
                amsbound = group['amsbound']

                state = self.state[p]

                # State initialization
                if len(state) == 0:
                    state['step'] = 0
                    # Exponential moving average of gradient values
                    state['exp_avg'] = torch.zeros_like(p.data)
                    # Exponential moving average of squared gradient values
                    state['exp_avg_sq'] = torch.zeros_like(p.data)
                    if amsbound:
                        # Maintains max of all exp. moving avg. of sq. grad. values
                        state['max_exp_avg_sq'] = torch.zeros_like(p.data)

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                if amsbound:
                    max_exp_avg_sq = state['max_exp_avg_sq']
                beta1, beta2 = group['betas']

                state['step'] += 1

                if group['weight_decay'] != 0:
                    grad = grad.add(group['weight_decay'], p.data)

                # Decay the first and second moment running average coefficient
                exp_avg.mul_(beta1).add_(1 - beta1, grad)  # BREAK
                exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)
                if amsbound:
                    # Maintains the maximum of all 2nd moment running avg. till now
                    torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                    # Use the max. for normalizing running avg. of gradient
                    denom = max_exp_avg_sq.sqrt().add_(group['eps'])
                else:
                    denom = exp_avg_sq.sqrt().add_(group['eps'])

                bias_correction1 = 1 - beta1 ** state['step']
                bias_correction2 = 1 - beta2 ** state['step']
                step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1

                # Applies bounds on actual learning rate
                # lr_scheduler cannot affect final_lr, this is a workaround to apply lr decay
                final_lr = group['final_lr'] * group['lr'] / base_lr
                lower_bound = final_lr * (1 - 1 / (group['gamma'] * state['step'] + 1))
                upper_bound = final_lr * (1 + 1 / (group['gamma'] * state['step']))
                step_size = torch.full_like(denom, step_size)
                step_size.div_(denom).clamp_(lower_bound, upper_bound).mul_(exp_avg)

                p.data.add_(-step_size)

        return loss


class SmallNet(nn.Module):
    """Stand-in for the demo's ResNet34 / DenseNet121."""
    def __init__(self, num_classes=10):
        super(SmallNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.linear = nn.Linear(8, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.adaptive_avg_pool2d(out, 1).view(out.size(0), -1)
        return self.linear(out)


def create_optimizer(args, model_params):
    if args.optim == 'sgd':
        return optim.SGD(model_params, args.lr, momentum=args.momentum,
                         weight_decay=args.weight_decay)
    elif args.optim == 'adabound':
        return AdaBound(model_params, args.lr, betas=(args.beta1, args.beta2),
                        final_lr=args.final_lr, gamma=args.gamma,
                        weight_decay=args.weight_decay)
    else:
        assert args.optim == 'amsbound'
        return AdaBound(model_params, args.lr, betas=(args.beta1, args.beta2),
                        final_lr=args.final_lr, gamma=args.gamma,
                        weight_decay=args.weight_decay, amsbound=True)


def train(net, epoch, device, data_loader, optimizer, criterion):
    print('\nEpoch: %d' % epoch)  # BREAK
    net.train()
    train_loss = 0
    correct = 0
    total = 0
    for batch_idx, (inputs, targets) in enumerate(data_loader):
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()  # BREAK
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()

    accuracy = 100. * correct / total
    print('train acc %.3f' % accuracy)

    return accuracy


def test(net, device, data_loader, criterion):
    net.eval()
    test_loss = 0
    correct = 0
    total = 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(data_loader):
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = net(inputs)
            loss = criterion(outputs, targets)

            test_loss += loss.item()  # BREAK
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()

    accuracy = 100. * correct / total
    print(' test acc %.3f' % accuracy)

    return accuracy


def reset_(net, optimizer, net_state, opt_state):
    """Adaptation: restore net/optimizer from the factory's copies and rebuild the scheduler."""
    net.load_state_dict(net_state)  # BREAK
    optimizer.load_state_dict(opt_state)  # BREAK
    for group in optimizer.param_groups:
        group.pop('initial_lr', None)
    return optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1, last_epoch=-1)  # BREAK


def run_epochs(net, optimizer, criterion, train_loader, test_loader, net_state, opt_state, epochs=2):
    device = 'cpu'
    scheduler = reset_(net, optimizer, net_state, opt_state)
    best_acc = 0
    start_epoch = -1
    saved = {}
    train_accuracies = []
    test_accuracies = []

    for epoch in range(start_epoch + 1, epochs):
        train_acc = train(net, epoch, device, train_loader, optimizer, criterion)
        test_acc = test(net, device, test_loader, criterion)
        scheduler.step()

        # Save checkpoint.
        if test_acc > best_acc:
            print('Saving..')
            state = {
                'net': net.state_dict(),
                'acc': test_acc,
                'epoch': epoch,
            }
            saved['ckpt'] = copy.deepcopy(state)  # torch.save(state, os.path.join('checkpoint', ckpt_name))
            best_acc = test_acc

        train_accuracies.append(train_acc)
        test_accuracies.append(test_acc)
        saved['curve'] = {'train_acc': list(train_accuracies), 'test_acc': list(test_accuracies)}
    return train_accuracies, test_accuracies, best_acc, net.linear.weight.detach().clone()


def target():
    torch.manual_seed(0)
    criterion = nn.CrossEntropyLoss()
    calls = []
    for optim_name in ('adabound', 'amsbound'):
        args = argparse.Namespace(model='resnet', optim=optim_name, lr=1e-3, final_lr=0.1, gamma=1e-3,
                                  momentum=0.9, beta1=0.9, beta2=0.999, weight_decay=5e-4)
        net = SmallNet()
        optimizer = create_optimizer(args, net.parameters())
        net_state = copy.deepcopy(net.state_dict())
        opt_state = copy.deepcopy(optimizer.state_dict())
        train_loader = [(torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))) for _ in range(3)]
        test_loader = [(torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))) for _ in range(2)]
        calls.append((run_epochs, (net, optimizer, criterion, train_loader, test_loader, net_state, opt_state), {}))
    return calls


EXPECT = ("extract: the driver's `loss.item()`/`.sum().item()` accumulations and `%`-formatted prints go into "
          "helpers under an escape hatch; `AdaBound.step` itself (Python-float bounds from the int step, "
          "deprecated positional-alpha `add_`/`addcmul_`, lazy state init) is traced or left to Dynamo's "
          "optimizer handling, not rewritten")
