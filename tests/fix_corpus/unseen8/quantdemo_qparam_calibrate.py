"""Post-training quantization calibration from a quantization tutorial repository: `direct_quantize` runs
`model.quantize_forward` over the loader; every quantized module's `QParam.update` keeps the running range with
`if self.max.nelement() == 0 or self.max.data < tensor.max().data: self.max.data = tensor.max().data` (a tensor
comparison deciding a Python branch, on a buffer that starts empty) and `calcScaleZeroPoint` branches on
`if zero_point < qmin:` / `elif zero_point > qmax:` before `zero_point.round_()`; the activations and weights go
through the custom `autograd.Function` `FakeQuantize.apply(x, self.qi)` (a module passed as an argument), and
`self.scale, self.zero_point = ...` re-assigns registered buffers (Jermmy/pytorch-quantization-demo module.py:
`calcScaleZeroPoint`, `quantize_tensor`, `dequantize_tensor`, `QParam`, `QModule`, `QConv2d`, `QLinear`, `QReLU`,
`QMaxPooling2d`; function.py: `FakeQuantize`; model.py: `Net.quantize/quantize_forward`; post_training_quantize.py:
`direct_quantize`).
Adaptations: the MNIST network is narrowed (8 channels instead of 40, `groups=4` instead of 20) and randomly
initialised instead of loading `ckpt/mnist_cnn.pt`; the loader is a given list of `(data, target)` pairs of 28x28
images (3 batches of 4). So that a call gives the same result when it is run again, the call first empties every
`QParam`'s buffers (`reset_qparams_`, an adaptation: the state `quantize()` creates), then calibrates and returns the
output of the last batch and copies of every `QParam`'s `(min, max, scale, zero_point)`."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function


class FakeQuantize(Function):

    @staticmethod
    def forward(ctx, x, qparam):
        x = qparam.quantize_tensor(x)
        x = qparam.dequantize_tensor(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


def calcScaleZeroPoint(min_val, max_val, num_bits=8):
    qmin = 0.
    qmax = 2. ** num_bits - 1.
    scale = (max_val - min_val) / (qmax - qmin)

    zero_point = qmax - max_val / scale

    if zero_point < qmin:  # BREAK
        zero_point = torch.tensor([qmin], dtype=torch.float32).to(min_val.device)
    elif zero_point > qmax:  # BREAK
        # zero_point = qmax
        zero_point = torch.tensor([qmax], dtype=torch.float32).to(max_val.device)

    zero_point.round_()

    return scale, zero_point


def quantize_tensor(x, scale, zero_point, num_bits=8, signed=False):
    if signed:
        qmin = - 2. ** (num_bits - 1)
        qmax = 2. ** (num_bits - 1) - 1
    else:
        qmin = 0.
        qmax = 2. ** num_bits - 1.

    q_x = zero_point + x / scale
    q_x.clamp_(qmin, qmax).round_()

    return q_x


def dequantize_tensor(q_x, scale, zero_point):
    return scale * (q_x - zero_point)


class QParam(nn.Module):

    def __init__(self, num_bits=8):
        super(QParam, self).__init__()
        self.num_bits = num_bits
        scale = torch.tensor([], requires_grad=False)
        zero_point = torch.tensor([], requires_grad=False)
        min = torch.tensor([], requires_grad=False)
        max = torch.tensor([], requires_grad=False)
        self.register_buffer('scale', scale)
        self.register_buffer('zero_point', zero_point)
        self.register_buffer('min', min)
        self.register_buffer('max', max)

    def update(self, tensor):
        if self.max.nelement() == 0 or self.max.data < tensor.max().data:  # BREAK
            self.max.data = tensor.max().data  # BREAK
        self.max.clamp_(min=0)

        if self.min.nelement() == 0 or self.min.data > tensor.min().data:  # BREAK
            self.min.data = tensor.min().data
        self.min.clamp_(max=0)

        self.scale, self.zero_point = calcScaleZeroPoint(self.min, self.max, self.num_bits)

    def quantize_tensor(self, tensor):
        return quantize_tensor(tensor, self.scale, self.zero_point, num_bits=self.num_bits)

    def dequantize_tensor(self, q_x):
        return dequantize_tensor(q_x, self.scale, self.zero_point)


class QModule(nn.Module):

    def __init__(self, qi=True, qo=True, num_bits=8):
        super(QModule, self).__init__()
        if qi:
            self.qi = QParam(num_bits=num_bits)
        if qo:
            self.qo = QParam(num_bits=num_bits)

    def freeze(self):
        pass

    def quantize_inference(self, x):
        raise NotImplementedError('quantize_inference should be implemented.')


class QConv2d(QModule):

    def __init__(self, conv_module, qi=True, qo=True, num_bits=8):
        super(QConv2d, self).__init__(qi=qi, qo=qo, num_bits=num_bits)
        self.num_bits = num_bits
        self.conv_module = conv_module
        self.qw = QParam(num_bits=num_bits)
        self.register_buffer('M', torch.tensor([], requires_grad=False))  # 将M注册为buffer

    def forward(self, x):
        if hasattr(self, 'qi'):
            self.qi.update(x)
            x = FakeQuantize.apply(x, self.qi)

        self.qw.update(self.conv_module.weight.data)

        x = F.conv2d(x, FakeQuantize.apply(self.conv_module.weight, self.qw), self.conv_module.bias,
                     stride=self.conv_module.stride,
                     padding=self.conv_module.padding, dilation=self.conv_module.dilation,
                     groups=self.conv_module.groups)

        if hasattr(self, 'qo'):
            self.qo.update(x)
            x = FakeQuantize.apply(x, self.qo)

        return x


class QLinear(QModule):

    def __init__(self, fc_module, qi=True, qo=True, num_bits=8):
        super(QLinear, self).__init__(qi=qi, qo=qo, num_bits=num_bits)
        self.num_bits = num_bits
        self.fc_module = fc_module
        self.qw = QParam(num_bits=num_bits)
        self.register_buffer('M', torch.tensor([], requires_grad=False))  # 将M注册为buffer

    def forward(self, x):
        if hasattr(self, 'qi'):
            self.qi.update(x)
            x = FakeQuantize.apply(x, self.qi)

        self.qw.update(self.fc_module.weight.data)

        x = F.linear(x, FakeQuantize.apply(self.fc_module.weight, self.qw), self.fc_module.bias)

        if hasattr(self, 'qo'):
            self.qo.update(x)
            x = FakeQuantize.apply(x, self.qo)

        return x


class QReLU(QModule):

    def __init__(self, qi=False, num_bits=None):
        super(QReLU, self).__init__(qi=qi, num_bits=num_bits)

    def forward(self, x):
        if hasattr(self, 'qi'):
            self.qi.update(x)
            x = FakeQuantize.apply(x, self.qi)

        x = F.relu(x)

        return x


class QMaxPooling2d(QModule):

    def __init__(self, kernel_size=3, stride=1, padding=0, qi=False, num_bits=None):
        super(QMaxPooling2d, self).__init__(qi=qi, num_bits=num_bits)
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x):
        if hasattr(self, 'qi'):
            self.qi.update(x)
            x = FakeQuantize.apply(x, self.qi)

        x = F.max_pool2d(x, self.kernel_size, self.stride, self.padding)

        return x


class Net(nn.Module):

    def __init__(self, num_channels=1):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(num_channels, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 8, 3, 1, groups=4)
        self.fc = nn.Linear(5*5*8, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2, 2)
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2, 2)
        x = x.view(-1, 5*5*8)
        x = self.fc(x)
        return x

    def quantize(self, num_bits=8):
        self.qconv1 = QConv2d(self.conv1, qi=True, qo=True, num_bits=num_bits)
        self.qrelu1 = QReLU()
        self.qmaxpool2d_1 = QMaxPooling2d(kernel_size=2, stride=2, padding=0)
        self.qconv2 = QConv2d(self.conv2, qi=False, qo=True, num_bits=num_bits)
        self.qrelu2 = QReLU()
        self.qmaxpool2d_2 = QMaxPooling2d(kernel_size=2, stride=2, padding=0)
        self.qfc = QLinear(self.fc, qi=False, qo=True, num_bits=num_bits)

    def quantize_forward(self, x):
        x = self.qconv1(x)
        x = self.qrelu1(x)
        x = self.qmaxpool2d_1(x)
        x = self.qconv2(x)
        x = self.qrelu2(x)
        x = self.qmaxpool2d_2(x)
        x = x.view(-1, 5*5*8)
        x = self.qfc(x)
        return x


def direct_quantize(model, test_loader):
    for i, (data, target) in enumerate(test_loader, 1):
        output = model.quantize_forward(data)
        if i % 500 == 0:
            break
    print('direct quantization finish')
    return output


def reset_qparams_(model):
    """Adaptation: empty every QParam's buffers, as `quantize()` leaves them."""
    for m in model.modules():
        if isinstance(m, QParam):
            for name in ('scale', 'zero_point', 'min', 'max'):
                setattr(m, name, torch.tensor([], requires_grad=False))


def calibrate(model, loader):
    reset_qparams_(model)
    output = direct_quantize(model, loader)
    qparams = [(m.min.clone(), m.max.clone(), m.scale.clone(), m.zero_point.clone())
               for m in model.modules() if isinstance(m, QParam) and m.max.nelement() > 0]
    return output, qparams


def target():
    torch.manual_seed(0)
    model = Net()
    model.eval()
    model.quantize(num_bits=8)
    model.eval()
    gen = torch.Generator().manual_seed(0)
    loader1 = [(torch.randn(4, 1, 28, 28, generator=gen), torch.randint(0, 10, (4,), generator=gen)) for _ in range(3)]
    loader2 = [(torch.randn(4, 1, 28, 28, generator=gen) * 2 + 0.5, torch.randint(0, 10, (4,), generator=gen))
               for _ in range(3)]
    return [
        (calibrate, (model, loader1), {}),
        (calibrate, (model, loader2), {}),
    ]


EXPECT = ("rewrite: keep the running range branch-free on tensors: `self.max = torch.maximum(self.max, tensor.max())` "
          "/ `torch.minimum` (with the empty-buffer case handled once, outside the graph or by initialising the "
          "buffers), and `zero_point = torch.clamp(qmax - max_val / scale, qmin, qmax).round()` instead of the "
          "`if zero_point < qmin` / `elif zero_point > qmax` branches; `FakeQuantize.apply` with a module argument may "
          "break on its own (then `hatch`/extract of the fake-quantize call)")
