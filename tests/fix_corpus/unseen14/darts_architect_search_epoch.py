"""DARTS architecture-search epochs (first- and second-order), from quark0/darts (`cnn/train_search.py` `main`'s
epoch loop, `train`, `infer`; `cnn/architect.py` `_concat`, `Architect`; `cnn/model_search.py` `MixedOp`, `Cell`,
`Network` with `_loss`, `_initialize_alphas`, `arch_parameters`, `genotype`; `cnn/utils.py` `AvgrageMeter`,
`accuracy`). Each epoch steps `CosineAnnealingLR` first and reads `scheduler.get_lr()[0]`, logs `model.genotype()`
(NumPy `softmax(...).data.cpu().numpy()` weights parsed by the nested `_parse` with a `sorted(..., key=lambda x:
-max(... generator ...))` and a Python arg-max loop over `PRIMITIVES.index('none')`), prints the softmaxed alphas,
trains and infers. `train` draws `next(iter(search_queue))` each step, calls `architect.step` (Adam on the alphas;
`_backward_step` zeroes `v.grad.data` for alphas with a grad, or, `unrolled`, `_compute_unrolled_model` concatenates
`network_optimizer.state[v]['momentum_buffer']` inside a bare `try/except`, `autograd.grad`s the weights, builds a
model from the flat `theta` with `np.prod(v.size())` slices, `load_state_dict` and an `assert offset == len(theta)`,
and `_hessian_vector_product` perturbs `p.data` in place with `R = r / _concat(vector).norm()`), returns the
`clip_grad_norm` of the alphas, then takes the weight step with `nn.utils.clip_grad_norm` and updates three
meters; `infer` logs with `logging.info('%03d %e %f %f', ...)`. Adaptations: `operations.py` (not read) is a small
stand-in `OPS` dict over four `PRIMITIVES` (`none`, `max_pool_3x3`, `skip_connect`, `conv_3x3`) with `Zero`,
`FactorizedReduce` and `ReLUConvBN`; `Genotype` is the namedtuple; the network is tiny (C=4, 3 layers, 2 steps);
CIFAR queues are lists of random batches made in the factory; `.cuda()`/`async=True` are dropped (the alphas are
plain `requires_grad` tensors, `Variable(...)` kept); old-torch `loss.data[0]`/`prec1.data[0]` are `.item()`;
`p.data.add_(R, v)`/`sub_(2*R, v)` (a 0-d tensor as the positional alpha, refused by this torch) are
`add_(v, alpha=R.item())`/`sub_(v, alpha=2*R.item())`; the module-level `args` is set by `main` from its argument;
`utils.save` keeps the state dict in a list. So that a call repeats, the called function `main` restores the
weights and alphas from the factory's copies, rebuilds the architect, optimiser and scheduler as the original does
and seeds torch and NumPy (as the original's `main`); it returns the last accuracies, the arch gradient norm and the
genotype."""
import copy
import logging
import sys
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

Genotype = namedtuple('Genotype', 'normal normal_concat reduce reduce_concat')
PRIMITIVES = ['none', 'max_pool_3x3', 'skip_connect', 'conv_3x3']


# ---- stand-in for operations.py (not read)
class Zero(nn.Module):
    def __init__(self, stride):
        super(Zero, self).__init__()  # BREAK
        self.stride = stride

    def forward(self, x):
        if self.stride == 1:
            return x.mul(0.)
        return x[:, :, ::self.stride, ::self.stride].mul(0.)


class ReLUConvBN(nn.Module):
    def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
        super(ReLUConvBN, self).__init__()  # BREAK
        self.op = nn.Sequential(nn.ReLU(inplace=False),
                                nn.Conv2d(C_in, C_out, kernel_size, stride=stride, padding=padding, bias=False),
                                nn.BatchNorm2d(C_out, affine=affine))

    def forward(self, x):
        return self.op(x)


class FactorizedReduce(nn.Module):
    def __init__(self, C_in, C_out, affine=True):
        super(FactorizedReduce, self).__init__()  # BREAK
        self.relu = nn.ReLU(inplace=False)
        self.conv_1 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)  # BREAK
        self.conv_2 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
        self.bn = nn.BatchNorm2d(C_out, affine=affine)

    def forward(self, x):
        x = self.relu(x)
        out = torch.cat([self.conv_1(x), self.conv_2(x[:, :, 1:, 1:])], dim=1)
        return self.bn(out)


OPS = {
    'none': lambda C, stride, affine: Zero(stride),
    'max_pool_3x3': lambda C, stride, affine: nn.MaxPool2d(3, stride=stride, padding=1),
    'skip_connect': lambda C, stride, affine: nn.Identity() if stride == 1 else FactorizedReduce(C, C, affine=affine),
    'conv_3x3': lambda C, stride, affine: ReLUConvBN(C, C, 3, stride, 1, affine=affine),
}


# ---- model_search.py
class MixedOp(nn.Module):

    def __init__(self, C, stride):
        super(MixedOp, self).__init__()  # BREAK
        self._ops = nn.ModuleList()
        for primitive in PRIMITIVES:
            op = OPS[primitive](C, stride, False)
            if 'pool' in primitive:
                op = nn.Sequential(op, nn.BatchNorm2d(C, affine=False))
            self._ops.append(op)

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class Cell(nn.Module):

    def __init__(self, steps, multiplier, C_prev_prev, C_prev, C, reduction, reduction_prev):
        super(Cell, self).__init__()  # BREAK
        self.reduction = reduction

        if reduction_prev:
            self.preprocess0 = FactorizedReduce(C_prev_prev, C, affine=False)
        else:
            self.preprocess0 = ReLUConvBN(C_prev_prev, C, 1, 1, 0, affine=False)
        self.preprocess1 = ReLUConvBN(C_prev, C, 1, 1, 0, affine=False)
        self._steps = steps
        self._multiplier = multiplier

        self._ops = nn.ModuleList()
        self._bns = nn.ModuleList()
        for i in range(self._steps):
            for j in range(2+i):
                stride = 2 if reduction and j < 2 else 1
                op = MixedOp(C, stride)
                self._ops.append(op)

    def forward(self, s0, s1, weights):
        s0 = self.preprocess0(s0)
        s1 = self.preprocess1(s1)

        states = [s0, s1]
        offset = 0
        for i in range(self._steps):
            s = sum(self._ops[offset+j](h, weights[offset+j]) for j, h in enumerate(states))
            offset += len(states)
            states.append(s)

        return torch.cat(states[-self._multiplier:], dim=1)


class Network(nn.Module):

    def __init__(self, C, num_classes, layers, criterion, steps=2, multiplier=2, stem_multiplier=3):
        super(Network, self).__init__()  # BREAK
        self._C = C
        self._num_classes = num_classes
        self._layers = layers
        self._criterion = criterion
        self._steps = steps
        self._multiplier = multiplier

        C_curr = stem_multiplier*C
        self.stem = nn.Sequential(
            nn.Conv2d(3, C_curr, 3, padding=1, bias=False),  # BREAK
            nn.BatchNorm2d(C_curr)
        )

        C_prev_prev, C_prev, C_curr = C_curr, C_curr, C
        self.cells = nn.ModuleList()
        reduction_prev = False
        for i in range(layers):
            if i in [layers//3, 2*layers//3]:
                C_curr *= 2
                reduction = True
            else:
                reduction = False
            cell = Cell(steps, multiplier, C_prev_prev, C_prev, C_curr, reduction, reduction_prev)
            reduction_prev = reduction
            self.cells += [cell]
            C_prev_prev, C_prev = C_prev, multiplier*C_curr

        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(C_prev, num_classes)

        self._initialize_alphas()

    def forward(self, input):
        s0 = s1 = self.stem(input)
        for i, cell in enumerate(self.cells):
            if cell.reduction:
                weights = F.softmax(self.alphas_reduce, dim=-1)
            else:
                weights = F.softmax(self.alphas_normal, dim=-1)
            s0, s1 = s1, cell(s0, s1, weights)
        out = self.global_pooling(s1)
        logits = self.classifier(out.view(out.size(0),-1))
        return logits

    def _loss(self, input, target):
        logits = self(input)
        return self._criterion(logits, target)

    def _initialize_alphas(self):
        k = sum(1 for i in range(self._steps) for n in range(2+i))
        num_ops = len(PRIMITIVES)

        self.alphas_normal = Variable(1e-3*torch.randn(k, num_ops), requires_grad=True)  # BREAK
        self.alphas_reduce = Variable(1e-3*torch.randn(k, num_ops), requires_grad=True)  # BREAK
        self._arch_parameters = [
            self.alphas_normal,
            self.alphas_reduce,
        ]

    def arch_parameters(self):
        return self._arch_parameters

    def genotype(self):

        def _parse(weights):
            gene = []
            n = 2
            start = 0
            for i in range(self._steps):
                end = start + n
                W = weights[start:end].copy()
                edges = sorted(range(i + 2), key=lambda x: -max(W[x][k] for k in range(len(W[x])) if k != PRIMITIVES.index('none')))[:2]  # BREAK
                for j in edges:
                    k_best = None
                    for k in range(len(W[j])):
                        if k != PRIMITIVES.index('none'):
                            if k_best is None or W[j][k] > W[j][k_best]:
                                k_best = k
                    gene.append((PRIMITIVES[k_best], j))
                start = end
                n += 1
            return gene

        gene_normal = _parse(F.softmax(self.alphas_normal, dim=-1).data.cpu().numpy())
        gene_reduce = _parse(F.softmax(self.alphas_reduce, dim=-1).data.cpu().numpy())

        concat = range(2+self._steps-self._multiplier, self._steps+2)
        genotype = Genotype(
            normal=gene_normal, normal_concat=concat,
            reduce=gene_reduce, reduce_concat=concat
        )
        return genotype


# ---- architect.py
def _concat(xs):
    return torch.cat([x.view(-1) for x in xs])  # BREAK


class Architect(object):

    def __init__(self, model, args):
        self.network_momentum = args.momentum
        self.network_weight_decay = args.weight_decay
        self.model = model
        self.optimizer = torch.optim.Adam(self.model.arch_parameters(),  # BREAK
            lr=args.arch_learning_rate, betas=(0.5, 0.999), weight_decay=args.arch_weight_decay)

    def _compute_unrolled_model(self, input, target, eta, network_optimizer):
        loss = self.model._loss(input, target)
        theta = _concat(self.model.parameters()).data
        try:
            moment = _concat(network_optimizer.state[v]['momentum_buffer'] for v in self.model.parameters()).mul_(self.network_momentum)
        except:
            moment = torch.zeros_like(theta)
        dtheta = _concat(torch.autograd.grad(loss, self.model.parameters())).data + self.network_weight_decay*theta  # BREAK
        model_unrolled = self._construct_model_from_theta(theta.sub(eta, moment+dtheta))
        return model_unrolled

    def step(self, input_train, target_train, input_valid, target_valid, eta, network_optimizer, unrolled):
        self.optimizer.zero_grad()  # BREAK
        if unrolled:
            self._backward_step_unrolled(
                input_train, target_train, input_valid, target_valid, eta, network_optimizer)
        else:
            self._backward_step(input_valid, target_valid)

        grad_norm = nn.utils.clip_grad_norm(self.model.arch_parameters(), 10.)
        self.optimizer.step()  # BREAK
        return grad_norm

    def _backward_step(self, input_valid, target_valid):
        loss = self.model._loss(input_valid, target_valid)
        for v in self.model.arch_parameters():
            if v.grad is not None:
                v.grad.data.zero_()
        loss.backward()  # BREAK

    def _backward_step_unrolled(self, input_train, target_train, input_valid, target_valid, eta, network_optimizer):
        model_unrolled = self._compute_unrolled_model(input_train, target_train, eta, network_optimizer)
        loss = model_unrolled._loss(input_valid, target_valid)
        grads = torch.autograd.grad(loss, model_unrolled.arch_parameters(), retain_graph=True)  # BREAK

        theta = model_unrolled.parameters()
        dtheta = torch.autograd.grad(loss, model_unrolled.parameters())  # BREAK
        vector = [dt.add(self.network_weight_decay, t).data for dt, t in zip(dtheta, theta)]
        implicit_grads = self._hessian_vector_product(model_unrolled, vector, input_train, target_train)

        for g, ig in zip(grads, implicit_grads):
            g.data.sub_(eta, ig.data)

        for v, g in zip(self.model.arch_parameters(), grads):
            if v.grad is None:
                v.grad = Variable(g.data)
            else:
                v.grad.data.copy_(g.data)

    def _construct_model_from_theta(self, theta):
        model_clone = Network(self.model._C, self.model._num_classes, self.model._layers, self.model._criterion)

        for x, y in zip(model_clone.arch_parameters(), self.model.arch_parameters()):
            x.data.copy_(y.data)
        model_dict = self.model.state_dict()

        params, offset = {}, 0
        for k, v in self.model.named_parameters():
            v_length = np.prod(v.size())
            params[k] = theta[offset: offset+v_length].view(v.size())  # BREAK
            offset += v_length

        assert offset == len(theta)
        model_dict.update(params)
        model_clone.load_state_dict(model_dict)
        return model_clone

    def _hessian_vector_product(self, model, vector, input, target, r=1e-2):
        R = r / _concat(vector).norm()
        for p, v in zip(model.parameters(), vector):
            p.data.add_(v, alpha=R.item())  # BREAK
        loss = model._loss(input, target)
        grads_p = torch.autograd.grad(loss, model.arch_parameters())

        for p, v in zip(model.parameters(), vector):
            p.data.sub_(v, alpha=2*R.item())
        loss = model._loss(input, target)
        grads_n = torch.autograd.grad(loss, model.arch_parameters())

        for p, v in zip(model.parameters(), vector):
            p.data.add_(v, alpha=R.item())

        return [(x-y).div_(2*R) for x, y in zip(grads_p, grads_n)]  # BREAK


# ---- utils.py
class AvgrageMeter(object):

    def __init__(self):
        self.reset()

    def reset(self):
        self.avg = 0
        self.sum = 0
        self.cnt = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.cnt += n
        self.avg = self.sum / self.cnt


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0)
        res.append(correct_k.mul_(100.0/batch_size))
    return res


saved = []
args = None
CIFAR_CLASSES = 10
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='%(asctime)s %(message)s',
                    datefmt='%m/%d %I:%M:%S %p')


# ---- train_search.py
def main(model, train_queue, search_queue, valid_queue, run_args, states):
    global args
    args = run_args
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)  # BREAK
    reset_(model, states)
    criterion = model._criterion

    optimizer = torch.optim.SGD(  # BREAK
        model.parameters(),
        args.learning_rate,
        momentum=args.momentum,
        weight_decay=args.weight_decay)

    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
          optimizer, float(args.epochs), eta_min=args.learning_rate_min)

    architect = Architect(model, args)

    for epoch in range(args.epochs):
        scheduler.step()
        lr = scheduler.get_lr()[0]
        logging.info('epoch %d lr %e', epoch, lr)

        genotype = model.genotype()
        logging.info('genotype = %s', genotype)

        print(F.softmax(model.alphas_normal, dim=-1))
        print(F.softmax(model.alphas_reduce, dim=-1))

        # training
        train_acc, train_obj, arch_grad_norm = train(train_queue, search_queue, model, architect, criterion, optimizer, lr)
        logging.info('train_acc %f', train_acc)

        # validation
        valid_acc, valid_obj = infer(valid_queue, model, criterion)
        logging.info('valid_acc %f', valid_acc)

        saved.append(copy.deepcopy(model.state_dict()))  # utils.save(model, os.path.join(args.save, 'weights.pt'))
    return train_acc, valid_acc, arch_grad_norm, genotype.normal, genotype.reduce


def train(train_queue, search_queue, model, architect, criterion, optimizer, lr):
    objs = AvgrageMeter()
    top1 = AvgrageMeter()
    top5 = AvgrageMeter()
    grad = AvgrageMeter()

    for step, (input, target) in enumerate(train_queue):
        model.train()
        n = input.size(0)

        input = Variable(input, requires_grad=False)  # BREAK
        target = Variable(target, requires_grad=False)

        # get a random minibatch from the search queue with replacement
        input_search, target_search = next(iter(search_queue))
        input_search = Variable(input_search, requires_grad=False)
        target_search = Variable(target_search, requires_grad=False)

        arch_grad_norm = architect.step(input, target, input_search, target_search, lr, optimizer, unrolled=args.unrolled)
        grad.update(arch_grad_norm)

        optimizer.zero_grad()
        logits = model(input)
        loss = criterion(logits, target)

        loss.backward()
        nn.utils.clip_grad_norm(model.parameters(), args.grad_clip)
        optimizer.step()  # BREAK

        prec1, prec5 = accuracy(logits, target, topk=(1, 5))
        objs.update(loss.item(), n)
        top1.update(prec1.item(), n)
        top5.update(prec5.item(), n)

        if step % args.report_freq == 0:
            logging.info('train %03d %e %f %f', step, objs.avg, top1.avg, top5.avg)

    return top1.avg, objs.avg, grad.avg


def infer(valid_queue, model, criterion):
    objs = AvgrageMeter()
    top1 = AvgrageMeter()
    top5 = AvgrageMeter()
    model.eval()

    for step, (input, target) in enumerate(valid_queue):
        input = Variable(input, volatile=True)  # BREAK
        target = Variable(target, volatile=True)

        logits = model(input)
        loss = criterion(logits, target)

        prec1, prec5 = accuracy(logits, target, topk=(1, 5))
        n = input.size(0)
        objs.update(loss.item(), n)
        top1.update(prec1.item(), n)
        top5.update(prec5.item(), n)

        if step % args.report_freq == 0:
            logging.info('valid %03d %e %f %f', step, objs.avg, top1.avg, top5.avg)

    return top1.avg, objs.avg


def reset_(model, states):
    """Adaptation: restore weights and alphas from the factory's copies, so that a call repeats."""
    model.load_state_dict(states[0])  # BREAK
    with torch.no_grad():
        for a, saved_a in zip(model.arch_parameters(), states[1]):
            a.copy_(saved_a)
            a.grad = None
    del saved[:]


class Args(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def target():
    torch.manual_seed(2)
    criterion = nn.CrossEntropyLoss()
    model = Network(4, CIFAR_CLASSES, 3, criterion)
    states = (copy.deepcopy(model.state_dict()), [a.detach().clone() for a in model.arch_parameters()])

    def batches(n, bs):
        return [(torch.randn(bs, 3, 8, 8), torch.randint(0, CIFAR_CLASSES, (bs,))) for _ in range(n)]

    train_queue, search_queue, valid_queue = batches(2, 4), batches(2, 4), batches(1, 4)
    common = dict(learning_rate=0.025, learning_rate_min=0.001, momentum=0.9, weight_decay=3e-4, report_freq=1,
                  epochs=2, grad_clip=5, arch_learning_rate=3e-4, arch_weight_decay=1e-3, seed=2)
    args1 = Args(unrolled=False, **common)
    args2 = Args(unrolled=True, **common)
    return [
        (main, (model, train_queue, search_queue, valid_queue, args1, states), {}),
        (main, (model, train_queue, search_queue, valid_queue, args2, states), {}),
    ]


EXPECT = ("none: architecture search is an optimiser of optimisers (`loss.backward()`/`autograd.grad` inside "
          "`Architect.step`, a model rebuilt from a flat `theta` with `load_state_dict`, in-place `.data` "
          "perturbations, `.item()` meters, `genotype()`'s NumPy parsing, `scheduler.get_lr()` and logging); breaks "
          "expected at `genotype`'s `.data.cpu().numpy()`, the `print(F.softmax(...))`s, `loss.backward()` in "
          "`_backward_step`/`train`, `autograd.grad` in `_compute_unrolled_model`/`_backward_step_unrolled`, "
          "`R.item()`, `self.optimizer.step()`/`optimizer.step()`, the `.item()` meter updates and `reset_`")
