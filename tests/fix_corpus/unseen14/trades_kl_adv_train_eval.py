"""TRADES adversarial training epochs with natural evaluation, from yaodongyu/TRADES (`trades.py` `trades_loss`,
`squared_l2_norm`, `l2_norm`; `train_trades_mnist.py` `train`, `eval_train`, `eval_test`, `adjust_learning_rate`,
`main`). `trades_loss` switches the model to `eval()`, starts from `x_natural.detach() + 0.001 * torch.randn(...)`
and, for `distance == 'l_inf'`, runs `perturb_steps` of `autograd.grad` of a `KLDivLoss(size_average=False)` under
`torch.enable_grad()` with sign steps and `min`/`max`/`clamp` projections; for `'l_2'` it optimises a `Variable`
`delta` with its own SGD (`loss.backward()`, in-place gradient renorm, `if (grad_norms == 0).any():` with a masked
`randn_like` write, `.data.add_/clamp_/sub_/renorm_`); then `model.train()`, `Variable(torch.clamp(...),
requires_grad=False)`, `optimizer.zero_grad()` and the natural + `beta`-weighted robust loss. `train` logs with
`str.format` and `loss.item()` every `log_interval` batches; `eval_train`/`eval_test` sum `F.cross_entropy(...,
size_average=False).item()` and `pred.eq(...).sum().item()` and print; `adjust_learning_rate` reads the module's
`args`. The stored `trades.py` is a fork's revision (a separate `perturb_kl`, no `distance` argument); the upstream
`trades_loss` kept here (with `distance`, `model.eval()`, the `l_2` branch, `batch_size = len(x_natural)`) was read
from a verbatim copy found by `find_string`. Adaptations: `SmallCNN` is a two-layer stand-in; MNIST loaders are
lists of random `[0, 1]` batches made in the factory (`len(train_loader.dataset)` is the `Loader` stand-in's sample
count); `.cuda()` is dropped; `args` is a module attribute set by `main` from its argument (the original parses it
at import); checkpoints (`torch.save` every `save_freq` epochs) are kept in a list. So that a call repeats, the called
function `main` restores model from the factory's copy and seeds torch (`reset_`), and builds its optimizer itself
as the original does; it returns the last train/test losses and accuracies."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


# ---- trades.py
def squared_l2_norm(x):
    flattened = x.view(x.unsqueeze(0).shape[0], -1)
    return (flattened ** 2).sum(1)


def l2_norm(x):
    return squared_l2_norm(x).sqrt()


def trades_loss(model,
                x_natural,
                y,
                optimizer,
                step_size=0.003,
                epsilon=0.031,
                perturb_steps=10,
                beta=1.0,
                distance='l_inf'):
    # define KL-loss
    criterion_kl = nn.KLDivLoss(size_average=False)  # BREAK
    model.eval()
    batch_size = len(x_natural)
    # generate adversarial example
    x_adv = x_natural.detach() + 0.001 * torch.randn(x_natural.shape).detach()
    if distance == 'l_inf':
        for _ in range(perturb_steps):
            x_adv.requires_grad_()
            with torch.enable_grad():
                loss_kl = criterion_kl(F.log_softmax(model(x_adv), dim=1),
                                       F.softmax(model(x_natural), dim=1))
            grad = torch.autograd.grad(loss_kl, [x_adv])[0]  # BREAK
            x_adv = x_adv.detach() + step_size * torch.sign(grad.detach())
            x_adv = torch.min(torch.max(x_adv, x_natural - epsilon), x_natural + epsilon)
            x_adv = torch.clamp(x_adv, 0.0, 1.0)
    elif distance == 'l_2':
        delta = 0.001 * torch.randn(x_natural.shape).detach()
        delta = Variable(delta.data, requires_grad=True)

        # Setup optimizers
        optimizer_delta = optim.SGD([delta], lr=epsilon / perturb_steps * 2)

        for _ in range(perturb_steps):
            adv = x_natural + delta

            # optimize
            optimizer_delta.zero_grad()
            with torch.enable_grad():
                loss = (-1) * criterion_kl(F.log_softmax(model(adv), dim=1),
                                           F.softmax(model(x_natural), dim=1))
            loss.backward()
            # renorming gradient
            grad_norms = delta.grad.view(batch_size, -1).norm(p=2, dim=1)
            delta.grad.div_(grad_norms.view(-1, 1, 1, 1))
            # avoid nan or inf if gradient is 0
            if (grad_norms == 0).any():
                delta.grad[grad_norms == 0] = torch.randn_like(delta.grad[grad_norms == 0])
            optimizer_delta.step()  # BREAK

            # projection
            delta.data.add_(x_natural)
            delta.data.clamp_(0, 1).sub_(x_natural)
            delta.data.renorm_(p=2, dim=0, maxnorm=epsilon)
        x_adv = Variable(x_natural + delta, requires_grad=False)
    else:
        x_adv = torch.clamp(x_adv, 0.0, 1.0)
    model.train()

    x_adv = Variable(torch.clamp(x_adv, 0.0, 1.0), requires_grad=False)
    # zero gradient
    optimizer.zero_grad()
    # calculate robust loss
    logits = model(x_natural)
    loss_natural = F.cross_entropy(logits, y)
    loss_robust = (1.0 / batch_size) * criterion_kl(F.log_softmax(model(x_adv), dim=1),
                                                    F.softmax(model(x_natural), dim=1))
    loss = loss_natural + beta * loss_robust
    return loss


# ---- stand-ins
class SmallCNN(nn.Module):
    """Stand-in for models.small_cnn.SmallCNN (two convs and a classifier)."""
    def __init__(self, num_labels=10):
        super(SmallCNN, self).__init__()
        self.feature_extractor = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
                                               nn.Conv2d(8, 8, 3), nn.ReLU())
        self.classifier = nn.Linear(8 * 3 * 3, num_labels)

    def forward(self, input):
        features = self.feature_extractor(input)
        logits = self.classifier(features.view(-1, 8 * 3 * 3))
        return logits


class Loader(list):
    """Stand-in for a DataLoader over MNIST: a list of batches with a `.dataset` of the right length."""
    def __init__(self, batches):
        super(Loader, self).__init__(batches)
        self.dataset = range(sum(len(b[0]) for b in batches))


saved = []
args = None


# ---- train_trades_mnist.py
def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)

        optimizer.zero_grad()  # BREAK

        # calculate robust loss
        loss = trades_loss(model=model,
                           x_natural=data,
                           y=target,
                           optimizer=optimizer,
                           step_size=args.step_size,
                           epsilon=args.epsilon,
                           perturb_steps=args.num_steps,
                           beta=args.beta,
                           distance=args.distance)

        loss.backward()
        optimizer.step()  # BREAK

        # print progress
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def eval_train(model, device, train_loader):
    model.eval()
    train_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in train_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            train_loss += F.cross_entropy(output, target, size_average=False).item()  # BREAK
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
    train_loss /= len(train_loader.dataset)
    print('Training: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)'.format(
        train_loss, correct, len(train_loader.dataset),
        100. * correct / len(train_loader.dataset)))
    training_accuracy = correct / len(train_loader.dataset)
    return train_loss, training_accuracy


def eval_test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.cross_entropy(output, target, size_average=False).item()  # BREAK
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print('Test: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))
    test_accuracy = correct / len(test_loader.dataset)
    return test_loss, test_accuracy


def adjust_learning_rate(optimizer, epoch):
    """decrease the learning rate"""
    lr = args.lr
    if epoch >= 55:
        lr = args.lr * 0.1
    elif epoch >= 75:
        lr = args.lr * 0.01
    elif epoch >= 90:
        lr = args.lr * 0.001
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def main(model, device, train_loader, test_loader, run_args, initial_state):
    global args
    args = run_args
    reset_(model, initial_state)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)  # BREAK

    for epoch in range(1, args.epochs + 1):
        # adjust learning rate for SGD
        adjust_learning_rate(optimizer, epoch)

        # adversarial training
        train(args, model, device, train_loader, optimizer, epoch)

        # evaluation on natural examples
        print('================================================================')
        train_stats = eval_train(model, device, train_loader)
        test_stats = eval_test(model, device, test_loader)
        print('================================================================')

        # save checkpoint
        if epoch % args.save_freq == 0:
            saved.append(('model-nn-epoch{}.pt'.format(epoch), copy.deepcopy(model.state_dict())))
            saved.append(('opt-nn-checkpoint_epoch{}.tar'.format(epoch), optimizer.state_dict()))
    return train_stats, test_stats


def reset_(model, initial_state):
    """Adaptation: restore the model from the factory's copy and seed torch, so that a call repeats."""
    model.load_state_dict(initial_state)  # BREAK
    torch.manual_seed(1)  # BREAK
    del saved[:]


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(1)
    device = torch.device('cpu')
    model = SmallCNN()
    initial_state = copy.deepcopy(model.state_dict())

    def batches(n, bs):
        return Loader([(torch.rand(bs, 1, 12, 12), torch.randint(0, 10, (bs,))) for _ in range(n)])

    train_loader, test_loader = batches(2, 4), batches(1, 4)
    common = dict(lr=0.01, momentum=0.9, epochs=2, log_interval=1, save_freq=2, beta=1.0)
    args1 = Args(epsilon=0.3, num_steps=3, step_size=0.01, distance='l_inf', **common)
    args2 = Args(epsilon=0.5, num_steps=2, step_size=0.05, distance='l_2', **common)
    return [
        (main, (model, device, train_loader, test_loader, args1, initial_state), {}),
        (main, (model, device, train_loader, test_loader, args2, initial_state), {}),
    ]


EXPECT = ("extract: `trades_loss`'s inner attack (`torch.autograd.grad` under `enable_grad` for l_inf; an inner SGD "
          "with `loss.backward()`, `if (grad_norms == 0).any():` and `.data` in-place projections for l_2) is not "
          "traceable and must stay eager; breaks expected at the `autograd.grad` line, `loss.backward()`/"
          "`optimizer_delta.step()`, the `(grad_norms == 0).any()` test, `optimizer.step()` in `train`, the "
          "`.item()` accumulations in `eval_train`/`eval_test` and `reset_`'s `load_state_dict`")
