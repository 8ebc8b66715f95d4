"""HAWQ's integer-only quantization modules: `QuantAct.forward` tracks the activation range in buffers with
`if self.x_min == self.x_max: self.x_min += x_min; self.x_max += x_max` (initialisation) else a momentum update,
`symmetric_linear_quantization_params` takes the Python `max(saturation_min.abs(), saturation_max.abs())` of two
tensors, and after a quantized layer `fixedpoint_fn` requantizes through `batch_frexp`, which decomposes the scale on
the host (`np.frexp(inputs.cpu().numpy())`, a `Decimal(m * (2 ** 31)).quantize(...)` loop, `torch.from_numpy`);
`QuantLinear.forward` computes per-channel weight scales and integer weights/biases with `SymmetricQuantFunction`
and `ste_round` (Zhen-Dong/HAWQ utils/quantization_utils/quant_modules.py: QuantLinear.set_param/forward,
QuantAct.__init__/forward; quant_utils.py: get_percentile_min_max, linear_quantize,
symmetric_linear_quantization_params, batch_frexp, ste_round, SymmetricQuantFunction, transfer_fc_size,
fixedpoint_fn (case 0; the identity-branch case 1, QuantAct's asymmetric and multi-branch paths and the
backward passes are left out)). The model is a two-layer
quantized MLP in the style of HAWQ's q_resnet head (`quant_input` -> QuantLinear -> ReLU -> QuantAct with the
previous scales -> QuantLinear). The `.cuda()` calls are dropped (CPU). The activation-range buffers are state: so that
a call gives the same result when it is run again, the call first zeroes them (`reset_ranges_`, an adaptation), so
every call takes the initialisation branch."""
import decimal
from decimal import Decimal

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
from torch.nn import Module, Parameter


def transfer_fc_size(input_tensor):
    return input_tensor.view(1, -1)


def get_percentile_min_max(input, lower_percentile, upper_percentile, output_tensor=False):
    """
    Calculate the percentile max and min values in a given tensor
    """
    input_length = input.shape[0]

    lower_index = round(input_length * (1 - lower_percentile * 0.01))
    upper_index = round(input_length * upper_percentile * 0.01)

    upper_bound = torch.kthvalue(input, k=upper_index).values

    if lower_percentile == 0:
        lower_bound = upper_bound * 0
    else:
        lower_bound = -torch.kthvalue(-input, k=lower_index).values

    if not output_tensor:
        lower_bound = lower_bound.item()
        upper_bound = upper_bound.item()
    return lower_bound, upper_bound


def linear_quantize(input, scale, zero_point, inplace=False):
    """
    Quantize floating point input tensor to integers with the given scaling factor and zeropoint.
    """
    # reshape scale and zeropoint for convolutional weights and activations
    if len(input.shape) == 4:
        scale = scale.view(-1, 1, 1, 1)
        zero_point = zero_point.view(-1, 1, 1, 1)
    # reshape scale and zeropoint for linear weights
    elif len(input.shape) == 2:
        scale = scale.view(-1, 1)
        zero_point = zero_point.view(-1, 1)
    else:
        scale = scale.view(-1)
        zero_point = zero_point.view(-1)
    if inplace:
        input.mul_(1. / scale).add_(zero_point).round_()
        return input
    return torch.round(1. / scale * input + zero_point)


def symmetric_linear_quantization_params(num_bits,
                                         saturation_min,
                                         saturation_max,
                                         per_channel=False):
    """
    Compute the scaling factor and zeropoint with the given quantization range for symmetric quantization.
    """

    # these computation do not require any gradients, to enforce this, we use torch.no_grad()
    with torch.no_grad():
        n = 2 ** (num_bits - 1) - 1
        if per_channel:
            scale, _ = torch.max(torch.stack([saturation_min.abs(), saturation_max.abs()], dim=1), dim=1)
            scale = torch.clamp(scale, min=1e-8) / n
        else:
            scale = max(saturation_min.abs(), saturation_max.abs())
            scale = torch.clamp(scale, min=1e-8) / n

    return scale


def batch_frexp(inputs):
    """
    Decompose the scaling factor into mantissa and twos exponent.
    """
    shape_of_input = inputs.size()

    # transform the input to be a 1-d tensor
    inputs = inputs.view(-1)

    output_m, output_e = np.frexp(inputs.cpu().numpy())  # BREAK

    tmp_m = []
    for m in output_m:
        int_m_shifted = int(Decimal(m * (2 ** 31)).quantize(Decimal('1'), rounding=decimal.ROUND_HALF_UP))  # BREAK
        tmp_m.append(int_m_shifted)
    output_m = np.array(tmp_m)

    output_e = 31. - output_e

    return torch.from_numpy(output_m).view(shape_of_input), \
           torch.from_numpy(output_e).view(shape_of_input)


class ste_round(Function):
    """
    Straight-through Estimator(STE) for torch.round()
    """

    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clone()


class SymmetricQuantFunction(Function):
    """
    Class to quantize the given floating-point values using symmetric quantization with given range and bitwidth.
    """

    @staticmethod
    def forward(ctx, x, k, specified_scale=None):
        n = 2 ** (k - 1) - 1

        if specified_scale is not None:
            scale = specified_scale
        else:
            raise ValueError("The SymmetricQuantFunction requires a pre-calculated scaling factor")

        zero_point = torch.tensor(0.)

        new_quant_x = linear_quantize(x, scale, zero_point, inplace=False)

        new_quant_x = torch.clamp(new_quant_x, -n - 1, n)

        ctx.scale = scale
        return new_quant_x


class fixedpoint_fn(Function):
    """
    Function to perform fixed-point arthmetic that can match integer arthmetic on hardware.
    """

    @staticmethod
    def forward(ctx, z, bitwidth, quant_mode, z_scaling_factor, case, pre_act_scaling_factor=None,
                pre_weight_scaling_factor=None, identity=None, identity_scaling_factor=None,
                identity_weight_scaling_factor=None):
        if quant_mode == 'symmetric':
            n = 2 ** (bitwidth - 1) - 1
        else:
            n = 2 ** bitwidth - 1

        with torch.no_grad():
            # reshape all the tensors to have correct sizes.
            if len(z.shape) == 2:
                z_scaling_factor = transfer_fc_size(z_scaling_factor)
                pre_act_scaling_factor = transfer_fc_size(pre_act_scaling_factor)
                pre_weight_scaling_factor = transfer_fc_size(pre_weight_scaling_factor)
            ctx.z_scaling_factor = z_scaling_factor

            if case == 0:
                # convert z from floating point to integer first
                z_int = torch.round(z / pre_act_scaling_factor / pre_weight_scaling_factor)
                # follow TVM's computation
                _A = (pre_act_scaling_factor.type(torch.double) * pre_weight_scaling_factor.type(torch.double))
                _B = (_A.type(torch.float)).type(torch.double)
                _C = (z_scaling_factor.type(torch.float)).type(torch.double)
                new_scale = _B / _C

                if len(z.shape) == 2:
                    new_scale = transfer_fc_size(new_scale)

                m, e = batch_frexp(new_scale)

                output = z_int.type(torch.double) * m.type(torch.double)

                output = torch.round(output / (2.0 ** e))

                if quant_mode == 'symmetric':
                    return torch.clamp(output.type(torch.float), -n - 1, n)
                else:
                    return torch.clamp(output.type(torch.float), 0, n)


class QuantLinear(Module):
    """
    Class to quantize weights of given linear layer
    """

    def __init__(self,
                 weight_bit=4,
                 bias_bit=None,
                 full_precision_flag=False,
                 quant_mode='symmetric',
                 per_channel=False,
                 fix_flag=False,
                 weight_percentile=0,
                 ):
        super(QuantLinear, self).__init__()
        self.full_precision_flag = full_precision_flag
        self.weight_bit = weight_bit
        self.quant_mode = quant_mode
        self.per_channel = per_channel
        self.fix_flag = fix_flag
        self.weight_percentile = weight_percentile
        self.bias_bit = bias_bit
        self.quantize_bias = (False if bias_bit is None else True)
        self.quant_mode = quant_mode
        self.counter = 0

    def set_param(self, linear):
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.register_buffer('fc_scaling_factor', torch.zeros(self.out_features))
        self.weight = Parameter(linear.weight.data.clone())
        self.register_buffer('weight_integer', torch.zeros_like(self.weight))
        self.register_buffer('bias_integer', torch.zeros_like(linear.bias))
        try:
            self.bias = Parameter(linear.bias.data.clone())
        except AttributeError:
            self.bias = None

    def forward(self, x, prev_act_scaling_factor=None):
        """
        using quantized weights to forward activation x
        """
        if type(x) is tuple:
            prev_act_scaling_factor = x[1]
            x = x[0]

        if self.quant_mode == "symmetric":
            self.weight_function = SymmetricQuantFunction.apply  # BREAK
        else:
            raise ValueError("unknown quant mode: {}".format(self.quant_mode))

        w = self.weight
        w_transform = w.data.detach()
        # calculate the quantization range of weights and bias
        if self.per_channel:
            w_min, _ = torch.min(w_transform, dim=1, out=None)
            w_max, _ = torch.max(w_transform, dim=1, out=None)
            if self.quantize_bias:
                b_min = self.bias.data
                b_max = self.bias.data
        else:
            w_min = w_transform.min().expand(1)
            w_max = w_transform.max().expand(1)
            if self.quantize_bias:
                b_min = self.bias.data.min()
                b_max = self.bias.data.max()

        # perform the quantization
        if not self.full_precision_flag:
            if self.quant_mode == 'symmetric':
                self.fc_scaling_factor = symmetric_linear_quantization_params(self.weight_bit, w_min, w_max,
                                                                              self.per_channel)
                self.weight_integer = self.weight_function(self.weight, self.weight_bit, self.fc_scaling_factor)

                bias_scaling_factor = self.fc_scaling_factor.view(1, -1) * prev_act_scaling_factor.view(1, -1)
                self.bias_integer = self.weight_function(self.bias, self.bias_bit, bias_scaling_factor)
            else:
                raise Exception('For weight, we only support symmetric quantization.')
        else:
            w = self.weight
            b = self.bias

        prev_act_scaling_factor = prev_act_scaling_factor.view(1, -1)
        x_int = x / prev_act_scaling_factor
        correct_output_scale = bias_scaling_factor[0].view(1, -1)

        return ste_round.apply(
            F.linear(x_int, weight=self.weight_integer, bias=self.bias_integer)) * correct_output_scale


class QuantAct(Module):
    """
    Class to quantize given activations
    """

    def __init__(self,
                 activation_bit=4,
                 act_range_momentum=0.95,
                 full_precision_flag=False,
                 running_stat=True,
                 quant_mode="symmetric",
                 fix_flag=False,
                 act_percentile=0,
                 fixed_point_quantization=False):
        super(QuantAct, self).__init__()

        self.activation_bit = activation_bit
        self.act_range_momentum = act_range_momentum
        self.full_precision_flag = full_precision_flag
        self.running_stat = running_stat
        self.quant_mode = quant_mode
        self.fix_flag = fix_flag
        self.act_percentile = act_percentile
        self.fixed_point_quantization = fixed_point_quantization

        self.register_buffer('x_min', torch.zeros(1))
        self.register_buffer('x_max', torch.zeros(1))
        self.register_buffer('act_scaling_factor', torch.zeros(1))

        self.register_buffer('pre_weight_scaling_factor', torch.ones(1))
        self.register_buffer('identity_weight_scaling_factor', torch.ones(1))

    def forward(self, x, pre_act_scaling_factor=None, pre_weight_scaling_factor=None, identity=None,
                identity_scaling_factor=None, identity_weight_scaling_factor=None):
        if type(x) is tuple:
            if len(x) == 3:
                channel_num = x[2]
            pre_act_scaling_factor = x[1]
            x = x[0]

        if self.quant_mode == "symmetric":
            self.act_function = SymmetricQuantFunction.apply  # BREAK
        else:
            raise ValueError("unknown quant mode: {}".format(self.quant_mode))

        # calculate the quantization range of the activations
        if self.running_stat:
            if self.act_percentile == 0:
                x_min = x.data.min()
                x_max = x.data.max()
            elif self.quant_mode == 'symmetric':
                x_min, x_max = get_percentile_min_max(x.detach().view(-1), 100 - self.act_percentile,
                                                      self.act_percentile, output_tensor=True)

            # Initialization
            if self.x_min == self.x_max:  # BREAK
                self.x_min += x_min
                self.x_max += x_max

            # use momentum to update the quantization range
            elif self.act_range_momentum == -1:
                self.x_min = min(self.x_min, x_min)
                self.x_max = max(self.x_max, x_max)
            else:
                self.x_min = self.x_min * self.act_range_momentum + x_min * (1 - self.act_range_momentum)
                self.x_max = self.x_max * self.act_range_momentum + x_max * (1 - self.act_range_momentum)

        # perform the quantization
        if not self.full_precision_flag:
            if self.quant_mode == 'symmetric':
                self.act_scaling_factor = symmetric_linear_quantization_params(self.activation_bit,
                                                                               self.x_min, self.x_max, False)
            if (pre_act_scaling_factor is None) or (self.fixed_point_quantization == True):
                # this is for the case of input quantization,
                # or the case using fixed-point rather than integer-only quantization
                quant_act_int = self.act_function(x, self.activation_bit, self.act_scaling_factor)
            else:
                if identity is None:
                    if pre_weight_scaling_factor is None:
                        pre_weight_scaling_factor = self.pre_weight_scaling_factor
                    quant_act_int = fixedpoint_fn.apply(x, self.activation_bit, self.quant_mode,
                                                        self.act_scaling_factor, 0, pre_act_scaling_factor,
                                                        pre_weight_scaling_factor)
            correct_output_scale = self.act_scaling_factor.view(-1)
            return (quant_act_int * correct_output_scale, self.act_scaling_factor)
        else:
            return x


class QuantMLP(nn.Module):
    """Two quantized linear layers in the style of HAWQ's q_resnet stem/head."""

    def __init__(self, fc1, fc2):
        super().__init__()
        self.quant_input = QuantAct(8)
        self.quant_fc1 = QuantLinear(4, bias_bit=32, per_channel=True)
        self.quant_fc1.set_param(fc1)
        self.quant_act1 = QuantAct(8)
        self.quant_output = QuantLinear(8, bias_bit=32)
        self.quant_output.set_param(fc2)

    def forward(self, x):
        x, act_scaling_factor = self.quant_input(x)
        x = self.quant_fc1(x, act_scaling_factor)
        x = F.relu(x)
        x, act_scaling_factor = self.quant_act1(x, act_scaling_factor, self.quant_fc1.fc_scaling_factor)
        x = self.quant_output(x, act_scaling_factor)
        return x


def reset_ranges_(model):
    """Adaptation: zero the activation-range buffers so that every call starts from the same state."""
    for m in model.modules():
        if isinstance(m, QuantAct):
            m.x_min.zero_()
            m.x_max.zero_()


def quant_forward(model, x):
    reset_ranges_(model)
    return model(x)


def target():
    torch.manual_seed(0)
    model = QuantMLP(nn.Linear(6, 8), nn.Linear(8, 3))
    model.eval()
    x1 = torch.randn(4, 6)
    x2 = torch.randn(4, 6) * 2
    return [
        (quant_forward, (model, x1), {}),
        (quant_forward, (model, x2), {}),
    ]


EXPECT = ("rewrite: keep the range bookkeeping on tensors: `torch.where(self.x_min == self.x_max, ...)` for the "
          "initialisation-or-momentum update (written into the buffers with `copy_`), `torch.maximum(saturation_min"
          ".abs(), saturation_max.abs())` for the Python `max`, and `torch.frexp` with a rounded `ldexp` for "
          "`batch_frexp`'s NumPy/Decimal mantissa loop")
