"""Keras-style model summary through forward hooks (sksq96/pytorch-summary: `torchsummary/torchsummary.py`:
`summary`, `summary_string`; the test models of `torchsummary/tests/test_models/test_model.py`: `SingleInputNet`,
`MultipleInputNet`). `summary_string` builds random inputs `torch.rand(2, *in_size).type(dtype).to(device=device)`
for each input size, registers a forward hook on every module through `model.apply(register_hook)` (a closure that
appends `module.register_forward_hook(hook)` handles to a list unless the module is a `Sequential`/`ModuleList`);
each hook call names the layer from `str(module.__class__)` and `len(summary)` (the enclosing `OrderedDict`), stores
`list(input[0].size())`/`list(output.size())` with the batch entry overwritten, and counts parameters with
`torch.prod(torch.LongTensor(list(module.weight.size())))`; after the forward pass the hooks are removed, and a text
table is formatted (`"{0:,}".format(...)` of tensor counts, `np.prod` of the shapes, the size estimates) and
printed by `summary`, which returns `(total_params, trainable_params)`.
Adaptations: the calls pass `device=torch.device('cpu')` (the default is `cuda:0`); the random inputs do not
influence what is returned or printed, but so that each call draws the same numbers the called function
(`summary_seeded`, an adaptation) seeds torch's generator before calling `summary`. The two calls summarise the
repository's two test models (a single-input CNN with input size `(1, 28, 28)` and a two-input MLP with
`[(1, 300), (1, 300)]`); in the second, `fc2a.weight` is frozen in the factory (`requires_grad_(False)`, an
adaptation) so that the trainable count differs from the total."""
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def summary(model, input_size, batch_size=-1, device=torch.device('cuda:0'), dtypes=None):
    result, params_info = summary_string(
        model, input_size, batch_size, device, dtypes)
    print(result)  # BREAK

    return params_info


def summary_string(model, input_size, batch_size=-1, device=torch.device('cuda:0'), dtypes=None):
    if dtypes == None:
        dtypes = [torch.FloatTensor]*len(input_size)

    summary_str = ''

    def register_hook(module):
        def hook(module, input, output):
            class_name = str(module.__class__).split(".")[-1].split("'")[0]
            module_idx = len(summary)

            m_key = "%s-%i" % (class_name, module_idx + 1)
            summary[m_key] = OrderedDict()
            summary[m_key]["input_shape"] = list(input[0].size())
            summary[m_key]["input_shape"][0] = batch_size
            if isinstance(output, (list, tuple)):
                summary[m_key]["output_shape"] = [
                    [-1] + list(o.size())[1:] for o in output if isinstance(o, (list, tuple))
                ]
            else:
                summary[m_key]["output_shape"] = list(output.size())
                summary[m_key]["output_shape"][0] = batch_size

            params = 0
            if hasattr(module, "weight") and hasattr(module.weight, "size"):
                params += torch.prod(torch.LongTensor(list(module.weight.size())))
                summary[m_key]["trainable"] = module.weight.requires_grad
            if hasattr(module, "bias") and hasattr(module.bias, "size"):
                params += torch.prod(torch.LongTensor(list(module.bias.size())))
            summary[m_key]["nb_params"] = params

        if (
            not isinstance(module, nn.Sequential)
            and not isinstance(module, nn.ModuleList)
        ):
            hooks.append(module.register_forward_hook(hook))  # BREAK

    # multiple inputs to the network
    if isinstance(input_size, tuple):
        input_size = [input_size]

    # batch_size of 2 for batchnorm
    x = [torch.rand(2, *in_size).type(dtype).to(device=device)
         for in_size, dtype in zip(input_size, dtypes)]

    # create properties
    summary = OrderedDict()
    hooks = []

    # register hook
    model.apply(register_hook)

    # make a forward pass
    # print(x.shape)
    model(*x)

    # remove these hooks
    for h in hooks:
        h.remove()  # BREAK

    summary_str += "----------------------------------------------------------------" + "\n"
    line_new = "{:>20}  {:>25} {:>15}".format(
        "Layer (type)", "Output Shape", "Param #")
    summary_str += line_new + "\n"
    summary_str += "================================================================" + "\n"
    total_params = 0
    total_output = 0
    trainable_params = 0
    for layer in summary:
        # input_shape, output_shape, trainable, nb_params
        line_new = "{:>20}  {:>25} {:>15}".format(
            layer,
            str(summary[layer]["output_shape"]),
            "{0:,}".format(summary[layer]["nb_params"]),
        )
        total_params += summary[layer]["nb_params"]

        total_output += np.prod(summary[layer]["output_shape"])
        if "trainable" in summary[layer]:
            if summary[layer]["trainable"] == True:
                trainable_params += summary[layer]["nb_params"]
        summary_str += line_new + "\n"

    # assume 4 bytes/number (float on cuda).
    total_input_size = abs(np.prod(sum(input_size, ()))
                           * batch_size * 4. / (1024 ** 2.))
    total_output_size = abs(2. * total_output * 4. /
                            (1024 ** 2.))  # x2 for gradients
    total_params_size = abs(total_params * 4. / (1024 ** 2.))
    total_size = total_params_size + total_output_size + total_input_size

    summary_str += "================================================================" + "\n"
    summary_str += "Total params: {0:,}".format(total_params) + "\n"
    summary_str += "Trainable params: {0:,}".format(trainable_params) + "\n"
    summary_str += "Non-trainable params: {0:,}".format(total_params -
                                                        trainable_params) + "\n"
    summary_str += "----------------------------------------------------------------" + "\n"
    summary_str += "Input size (MB): %0.2f" % total_input_size + "\n"
    summary_str += "Forward/backward pass size (MB): %0.2f" % total_output_size + "\n"
    summary_str += "Params size (MB): %0.2f" % total_params_size + "\n"
    summary_str += "Estimated Total Size (MB): %0.2f" % total_size + "\n"
    summary_str += "----------------------------------------------------------------" + "\n"
    # return summary
    return summary_str, (total_params, trainable_params)


class SingleInputNet(nn.Module):
    def __init__(self):
        super(SingleInputNet, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d(0.3)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


class MultipleInputNet(nn.Module):
    def __init__(self):
        super(MultipleInputNet, self).__init__()
        self.fc1a = nn.Linear(300, 50)
        self.fc1b = nn.Linear(50, 10)

        self.fc2a = nn.Linear(300, 50)
        self.fc2b = nn.Linear(50, 10)

    def forward(self, x1, x2):
        x1 = F.relu(self.fc1a(x1))
        x1 = self.fc1b(x1)
        x2 = F.relu(self.fc2a(x2))
        x2 = self.fc2b(x2)
        x = torch.cat((x1, x2), 0)
        return F.log_softmax(x, dim=1)


def summary_seeded(model, input_size, **kwargs):
    """Adaptation: seed torch's generator so that the random inputs repeat."""
    torch.manual_seed(0)  # BREAK
    return summary(model, input_size, **kwargs)


def target():
    torch.manual_seed(0)
    single = SingleInputNet()
    multiple = MultipleInputNet()
    multiple.fc2a.weight.requires_grad_(False)
    cpu = torch.device('cpu')
    return [
        (summary_seeded, (single, (1, 28, 28)), {'device': cpu}),
        (summary_seeded, (multiple, [(1, 300), (1, 300)]), {'device': cpu}),
    ]


EXPECT = ("hatch: the whole function is host-side introspection (hooks registered and removed around the forward, "
          "`str(module.__class__)`, `torch.LongTensor(list(...))` counts, string formatting, `print`); nothing in it "
          "is worth compiling, so running `summary` eagerly (a disable decorator) is the right fix, `caller` "
          "(do not compile the summary call at all) the alternative")
