"""DANN domain-adaptation training epoch with a gradient-reversal autograd Function (fungtion/DANN:
`train/main.py` (the epoch loop), `models/model.py` (`CNNModel`), `models/functions.py` (`ReverseLayerF`)).
Per iteration the loop computes the reversal weight on the host, `p = float(i + epoch * len_dataloader) / n_epoch /
len_dataloader; alpha = 2. / (1. + np.exp(-10 * p)) - 1` (a NumPy float), pulls the next source and target
batches from their iterators, builds domain labels with `torch.zeros(batch_size).long()`/`torch.ones(...)`, runs
`my_net(input_data=..., alpha=alpha)` (whose forward does `input_data.expand(input_data.data.shape[0], 3, 28, 28)`
and `ReverseLayerF.apply(feature, alpha)`, a `torch.autograd.Function` storing `ctx.alpha` and returning
`x.view_as(x)`, with `grad_output.neg() * ctx.alpha` in `backward`), sums the three NLL losses, calls
`err.backward()`/`optimizer.step()`, writes a progress line with `sys.stdout.write('\r epoch: ...' % (...,
err_s_label.data.cpu().numpy(), ..., err_t_domain.data.cpu().item()))`, `sys.stdout.flush()` and saves the model
with `torch.save(my_net, ...)` every iteration.
Provenance note: the stored `train/main.py` is the early Python 2 revision (`xrange`, `print` statements,
`torch.FloatTensor(...).resize_as_(...).copy_(...)`, `Variable`); the loop body used here is the repository's
later Python 3 form (`for i in range(len_dataloader)`, `sys.stdout.write`/`flush`, `torch.save` of the current
model), read from a fork whose loop text is identical. The stored `models/model.py` uses `nn.BatchNorm2d` on the
fully-connected features and `nn.LogSoftmax()` without `dim` (both fail or warn in current torch); the later
revision's `nn.BatchNorm1d`, `nn.Dropout()` and `nn.LogSoftmax(dim=1)` are used. `ReverseLayerF` was checked
against several identical copies found by code search (`models/functions.py` is not in the stored copy).
Adaptations: the module-level script becomes the function `train_epoch` (its body is the loop body of one epoch);
MNIST/MNIST-M data loaders are lists of batches made in the factory (3x28x28 source and target images);
`data_source_iter.next()` is `next(data_source_iter)` (current iterators have no `.next()`); `cuda = False`;
`torch.save` writes into an in-memory `io.BytesIO` instead of `./models/...pth`; the convolution widths are shrunk
(64/50 to 16/12, hidden 100 to 32). So that a call repeats exactly, the called function restores the model and
optimizer from copies taken in the factory and seeds torch (dropout) first (`reset_`); it returns the domain head's
weights after the epoch and the network's outputs on the first source batch. The two calls run different epochs
(`epoch` 0 and 30 of `n_epoch` 100, so different `alpha`s) on different data."""
import copy
import io
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Function

cuda = False
n_epoch = 100


class ReverseLayerF(Function):

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha

        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        output = grad_output.neg() * ctx.alpha

        return output, None


class CNNModel(nn.Module):

    def __init__(self):
        super(CNNModel, self).__init__()
        self.feature = nn.Sequential()
        self.feature.add_module('f_conv1', nn.Conv2d(3, 16, kernel_size=5))
        self.feature.add_module('f_bn1', nn.BatchNorm2d(16))
        self.feature.add_module('f_pool1', nn.MaxPool2d(2))
        self.feature.add_module('f_relu1', nn.ReLU(True))
        self.feature.add_module('f_conv2', nn.Conv2d(16, 12, kernel_size=5))
        self.feature.add_module('f_bn2', nn.BatchNorm2d(12))
        self.feature.add_module('f_drop1', nn.Dropout2d())
        self.feature.add_module('f_pool2', nn.MaxPool2d(2))
        self.feature.add_module('f_relu2', nn.ReLU(True))

        self.class_classifier = nn.Sequential()
        self.class_classifier.add_module('c_fc1', nn.Linear(12 * 4 * 4, 32))
        self.class_classifier.add_module('c_bn1', nn.BatchNorm1d(32))
        self.class_classifier.add_module('c_relu1', nn.ReLU(True))
        self.class_classifier.add_module('c_drop1', nn.Dropout())
        self.class_classifier.add_module('c_fc2', nn.Linear(32, 32))
        self.class_classifier.add_module('c_bn2', nn.BatchNorm1d(32))
        self.class_classifier.add_module('c_relu2', nn.ReLU(True))
        self.class_classifier.add_module('c_fc3', nn.Linear(32, 10))
        self.class_classifier.add_module('c_softmax', nn.LogSoftmax(dim=1))

        self.domain_classifier = nn.Sequential()
        self.domain_classifier.add_module('d_fc1', nn.Linear(12 * 4 * 4, 32))
        self.domain_classifier.add_module('d_bn1', nn.BatchNorm1d(32))
        self.domain_classifier.add_module('d_relu1', nn.ReLU(True))
        self.domain_classifier.add_module('d_fc2', nn.Linear(32, 2))
        self.domain_classifier.add_module('d_softmax', nn.LogSoftmax(dim=1))

    def forward(self, input_data, alpha):
        input_data = input_data.expand(input_data.data.shape[0], 3, 28, 28)
        feature = self.feature(input_data)
        feature = feature.view(-1, 12 * 4 * 4)
        reverse_feature = ReverseLayerF.apply(feature, alpha)
        class_output = self.class_classifier(feature)
        domain_output = self.domain_classifier(reverse_feature)

        return class_output, domain_output


def train_epoch(my_net, optimizer, loss_class, loss_domain, dataloader_source, dataloader_target, epoch):
    model_buffer = io.BytesIO()  # BREAK

    len_dataloader = min(len(dataloader_source), len(dataloader_target))
    data_source_iter = iter(dataloader_source)
    data_target_iter = iter(dataloader_target)

    for i in range(len_dataloader):

        p = float(i + epoch * len_dataloader) / n_epoch / len_dataloader
        alpha = 2. / (1. + np.exp(-10 * p)) - 1

        # training model using source data
        data_source = next(data_source_iter)
        s_img, s_label = data_source

        my_net.zero_grad()
        batch_size = len(s_label)

        domain_label = torch.zeros(batch_size).long()

        if cuda:
            s_img = s_img.cuda()
            s_label = s_label.cuda()
            domain_label = domain_label.cuda()


        class_output, domain_output = my_net(input_data=s_img, alpha=alpha)
        err_s_label = loss_class(class_output, s_label)
        err_s_domain = loss_domain(domain_output, domain_label)

        # training model using target data
        data_target = next(data_target_iter)
        t_img, _ = data_target

        batch_size = len(t_img)

        domain_label = torch.ones(batch_size).long()

        if cuda:
            t_img = t_img.cuda()
            domain_label = domain_label.cuda()

        _, domain_output = my_net(input_data=t_img, alpha=alpha)
        err_t_domain = loss_domain(domain_output, domain_label)
        err = err_t_domain + err_s_domain + err_s_label
        err.backward()  # BREAK
        optimizer.step()  # BREAK

        sys.stdout.write('\r epoch: %d, [iter: %d / all %d], err_s_label: %f, err_s_domain: %f, err_t_domain: %f' \
              % (epoch, i + 1, len_dataloader, err_s_label.data.cpu().numpy(),
                 err_s_domain.data.cpu().numpy(), err_t_domain.data.cpu().item()))
        sys.stdout.flush()
        torch.save(my_net, model_buffer)

    print('\n')


def reset_(my_net, optimizer, model_state, opt_state):
    """Adaptation: restore the initial model/optimizer and seed dropout so that a call repeats exactly."""
    my_net.load_state_dict(model_state)  # BREAK
    optimizer.load_state_dict(opt_state)  # BREAK
    torch.manual_seed(0)  # BREAK


def run_epoch(my_net, optimizer, model_state, opt_state, loss_class, loss_domain, dataloader_source,
              dataloader_target, epoch):
    reset_(my_net, optimizer, model_state, opt_state)
    my_net.train()
    train_epoch(my_net, optimizer, loss_class, loss_domain, dataloader_source, dataloader_target, epoch)
    my_net.eval()
    with torch.no_grad():
        outputs = my_net(input_data=dataloader_source[0][0], alpha=0.0)
    return my_net.domain_classifier.d_fc2.weight.detach().clone(), outputs


def target():
    torch.manual_seed(0)
    my_net = CNNModel()
    optimizer = optim.Adam(my_net.parameters(), lr=1e-3)
    loss_class = torch.nn.NLLLoss()
    loss_domain = torch.nn.NLLLoss()
    for p in my_net.parameters():
        p.requires_grad = True
    model_state = copy.deepcopy(my_net.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())

    def loader(n, bs):
        return [(torch.randn(bs, 3, 28, 28), torch.randint(0, 10, (bs,))) for _ in range(n)]

    src1, tgt1 = loader(2, 6), loader(3, 6)
    src2, tgt2 = loader(3, 5), loader(3, 4)
    common = (my_net, optimizer, model_state, opt_state, loss_class, loss_domain)
    return [
        (run_epoch, common + (src1, tgt1, 0), {}),
        (run_epoch, common + (src2, tgt2, 30), {}),
    ]


EXPECT = ("caller: the epoch loop is host-driven (NumPy `alpha` schedule, iterators, `.data.cpu().numpy()`/`.item()` "
          "progress writes, `torch.save` every iteration, `backward`/`step`); compile the network's forward and the "
          "losses and keep the loop eager. The gradient-reversal `ReverseLayerF.apply` is expected to trace")
