"""MAC/parameter counting with forward hooks and temporary buffers (Lyken17/pytorch-OpCounter: `thop/profile.py`:
`register_hooks`, `prRed`, `profile` with its closures `add_hooks` and `dfs_count`; `thop/vision/basic_hooks.py`:
`count_parameters`, `zero_ops`, `count_convNd`, `count_normalization`, `count_relu`, `count_adap_avgpool`,
`count_linear`; `thop/vision/calc_func.py`: `l_prod`, `calculate_parameters`, `calculate_zero_ops`,
`calculate_conv2d_flops`, `calculate_norm`, `calculate_relu_flops`, `calculate_adaptive_avg`, `calculate_linear`).
`profile` puts the model in eval mode, `model.apply(add_hooks)`: each module gets `register_buffer('total_ops',
torch.zeros(1, dtype=torch.float64))`/`total_params`, a `type(m)` lookup in a module-level dict of hook functions,
`print("[INFO] Register %s() for %s." % (fn.__qualname__, m_type))` (or the red warning), and two
`register_forward_hook`s kept in a dict keyed by module. The forward runs under `torch.no_grad()`; the hooks do
`m.total_ops += torch.DoubleTensor([int(...)])` from `list(x.shape)`/`numel()`, and `count_parameters` sums
`torch.DoubleTensor([p.numel()])` and writes `m.total_params[0] = ...` inside a bare `try/except` with
`logging.warning`. `dfs_count` recurses over children reading `m.total_ops.item()`; at the end the hooks are
removed and the buffers popped from `m._buffers`.
Adaptations: the model is a small CNN (`Conv2d`, `BatchNorm2d`, `ReLU`, `AdaptiveAvgPool2d`, `Linear`) instead of
a torchvision ResNet; `register_hooks` lists only the layer types used; the stored `basic_hooks.py` calls
`calculate_conv2d_flops` and `calculate_relu_flops`, which are not in the stored `calc_func.py` revision, so they
are written here after its `calculate_conv_flops`/`calculate_relu` (same formulas, keyword arguments);
`count_normalization` is registered for `BatchNorm2d` (the `count_bn` name of the stored `profile.py` is not in the
stored `basic_hooks.py`); the `LooseVersion` checks are dropped (distutils is gone in Python 3.12+). `profile`
cleans up after itself, so a call repeats exactly; the wrapper `profile_model` (an adaptation) returns the counts
and the model's output. The two calls use different input sizes."""
import logging

import torch
import torch.nn as nn
from torch.nn.modules.conv import _ConvNd


def l_prod(in_list):
    res = 1
    for _ in in_list:
        res *= _
    return res


def calculate_parameters(param_list):
    total_params = 0
    for p in param_list:
        total_params += torch.DoubleTensor([p.nelement()])
    return total_params


def calculate_zero_ops():
    return torch.DoubleTensor([int(0)])


def calculate_conv2d_flops(input_size: list, output_size: list, kernel_size: list, groups: int, bias: bool = False):
    # n, in_c, ih, iw = input_size
    # out_c, in_c, kh, kw = kernel_size
    in_c = input_size[1]
    g = groups
    return l_prod(output_size) * (in_c // g) * l_prod(kernel_size[2:])


def calculate_norm(input_size):
    """input is a number not a array or tensor"""
    return torch.DoubleTensor([2 * input_size])


def calculate_relu_flops(input_size):
    # x[x < 0] = 0
    return 0


def calculate_adaptive_avg(kernel_size, output_size):
    total_div = 1
    kernel_op = kernel_size + total_div
    return torch.DoubleTensor([int(kernel_op * output_size)])  # BREAK


def calculate_linear(in_feature, num_elements):
    return torch.DoubleTensor([int(in_feature * num_elements)])


def count_parameters(m, x, y):
    total_params = 0
    for p in m.parameters():
        total_params += torch.DoubleTensor([p.numel()])
    # m.total_params[0] = calculate_parameters(m.parameters())
    try:
        if m.total_params:  # BREAK
            m.total_params[0] = calculate_parameters(m.parameters())
    except:
        logging.warning('no m.total_params[0]')


def zero_ops(m, x, y):
    m.total_ops += calculate_zero_ops()


def count_convNd(m: _ConvNd, x, y: torch.Tensor):
    x = x[0]

    kernel_ops = torch.zeros(m.weight.size()[2:]).numel()  # Kw x Kh
    bias_ops = 1 if m.bias is not None else 0

    m.total_ops += calculate_conv2d_flops(
        input_size = list(x.shape),
        output_size = list(y.shape),
        kernel_size = list(m.weight.shape),
        groups = m.groups,
        bias = m.bias
    )


def count_normalization(m: nn.modules.batchnorm._BatchNorm, x, y):
    # TODO: add test cases
    # https://github.com/Lyken17/pytorch-OpCounter/issues/124
    # y = (x - mean) / sqrt(eps + var) * weight + bias
    x = x[0]
    # bn is by default fused in inference
    flops = calculate_norm(x.numel())
    if m.affine:
        flops *= 2
    try:
        if m.total_ops:  # BREAK
            m.total_ops += flops
    except:
        logging.warning('no m.total_ops')


def count_relu(m, x, y):
    x = x[0]

    nelements = x.numel()

    m.total_ops += calculate_relu_flops(list(x.shape))


def count_adap_avgpool(m, x, y):
    kernel = torch.div(
        torch.DoubleTensor([*(x[0].shape[2:])]),
        torch.DoubleTensor([*(y.shape[2:])])
    )
    total_add = torch.prod(kernel)
    num_elements = y.numel()
    m.total_ops += calculate_adaptive_avg(total_add, num_elements)


# nn.Linear
def count_linear(m, x, y):
    # per output element
    total_mul = m.in_features
    # total_add = m.in_features - 1
    # total_add += 1 if m.bias is not None else 0
    num_elements = y.numel()

    m.total_ops += calculate_linear(total_mul, num_elements)


def prRed(skk): print("\033[91m{}\033[00m".format(skk))  # BREAK


register_hooks = {
    nn.Conv2d: count_convNd,
    nn.BatchNorm2d: count_normalization,
    nn.ReLU: zero_ops,
    nn.AdaptiveAvgPool2d: count_adap_avgpool,
    nn.Linear: count_linear,
    nn.Dropout: zero_ops,
}


def profile(model: nn.Module, inputs, custom_ops=None, verbose=True):
    handler_collection = {}
    types_collection = set()
    if custom_ops is None:
        custom_ops = {}

    def add_hooks(m: nn.Module):
        m.register_buffer('total_ops', torch.zeros(1, dtype=torch.float64))
        m.register_buffer('total_params', torch.zeros(1, dtype=torch.float64))

        # for p in m.parameters():
        #     m.total_params += torch.DoubleTensor([p.numel()])

        m_type = type(m)

        fn = None
        if m_type in custom_ops:  # if defined both op maps, use custom_ops to overwrite.
            fn = custom_ops[m_type]
            if m_type not in types_collection and verbose:
                print("[INFO] Customize rule %s() %s." % (fn.__qualname__, m_type))
        elif m_type in register_hooks:
            fn = register_hooks[m_type]
            if m_type not in types_collection and verbose:
                print("[INFO] Register %s() for %s." % (fn.__qualname__, m_type))  # BREAK
        else:
            if m_type not in types_collection and verbose:
                prRed("[WARN] Cannot find rule for %s. Treat it as zero Macs and zero Params." % m_type)

        if fn is not None:
            handler_collection[m] = (m.register_forward_hook(fn), m.register_forward_hook(count_parameters))  # BREAK
        types_collection.add(m_type)

    prev_training_status = model.training

    model.eval()
    model.apply(add_hooks)

    with torch.no_grad():
        model(*inputs)

    def dfs_count(module: nn.Module, prefix="\t") -> (int, int):
        total_ops, total_params = 0, 0
        for m in module.children():
            if m in handler_collection and not isinstance(m, (nn.Sequential, nn.ModuleList)):
                m_ops, m_params = m.total_ops.item(), m.total_params.item()  # BREAK
            else:
                m_ops, m_params = dfs_count(m, prefix=prefix + "\t")
            total_ops += m_ops
            total_params += m_params
        #  print(prefix, module._get_name(), (total_ops.item(), total_params.item()))
        return total_ops, total_params

    total_ops, total_params = dfs_count(model)  # BREAK

    # reset model to original status
    model.train(prev_training_status)
    for m, (op_handler, params_handler) in handler_collection.items():
        op_handler.remove()
        params_handler.remove()
        m._buffers.pop("total_ops")
        m._buffers.pop("total_params")

    return total_ops, total_params


class SmallNet(nn.Module):
    """Adaptation: small stand-in for the torchvision models profiled in the README."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(self.features(x)).flatten(1)
        return self.fc(x)


def profile_model(model, x):
    macs, params = profile(model, inputs=(x,))
    with torch.no_grad():
        out = model(x)
    return macs, params, out


def target():
    torch.manual_seed(0)
    model = SmallNet()
    return [
        (profile_model, (model, torch.randn(1, 3, 16, 16)), {}),
        (profile_model, (model, torch.randn(2, 3, 24, 24)), {}),
    ]


EXPECT = ("hatch: `profile` is a host-side instrumentation utility (registering buffers and forward hooks in "
          "`model.apply`, `%`-formatted prints, hooks doing `+=` of fresh `torch.DoubleTensor([int(...)])` "
          "values with bare `try/except`, `.item()` in `dfs_count`, `_buffers.pop`); run it eagerly (disable "
          "compilation of `profile`) and compile only the model's forward")
