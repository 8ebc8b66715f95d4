"""The per-batch `processor` of gram-ai/capsule-networks (`capsule_network.py`, stored revision 4e16285: the one with
`augmentation`, routing logits made per call and a masked decoder input; an older revision 0aae011 whose
`CapsuleNet.forward` gathers `x[batch, index.data[0], :]` in a Python loop was read and not used, because indexing a
0-d tensor with `[0]` fails in current torch). `processor(sample)` unpacks `data, labels, training`, shifts the
images with `augmentation` (a NumPy `randint` shift turned into Python slices, copied into `torch.zeros`), builds
one-hot labels with `torch.eye(NUM_CLASSES).index_select`, runs `CapsuleNet` (primary capsules as a list
comprehension over convolutions, dynamic routing as a Python `for` loop with an `if i != self.num_iterations - 1`
branch and the module's own transpose/view `softmax`; without labels it one-hots the argmax capsule) and returns
`CapsuleLoss` and the class probabilities.
Adaptations: `.cuda()` calls are removed (CPU only) and `from torch.autograd import Variable`, which the original
imports inside `if __name__ == "__main__":` and uses as a module global, is imported at the top; in
`CapsuleNet.forward` the decoder input `(x * y[:, :, None]).view(...)` is written `(x * y[:, :,
None]).contiguous().view(...)` (current torch keeps the transposed layout of `x` in the product, so the bare `view`
fails). Sizes are shrunk: conv1 has 16 channels instead of 256, each primary capsule 4 instead of 32 (so
`num_route_nodes` is `4 * 6 * 6`), the decoder's hidden layers 32 and 64 instead of 512 and 1024. As in the original
`__main__` block, `model` and `capsule_loss` are module globals: the factory builds them (and puts the model in eval
mode); the torchnet engine, meters, Visdom loggers and MNIST loading are not used, and the samples are random 28x28
uint8 batches made in the factory. The called function is the original `processor`; one call is a training sample
(labels given to the model), one a test sample. Randomness: `augmentation` draws from NumPy's global generator,
seeded in the factory."""
import sys
sys.setrecursionlimit(15000)

import torch
import torch.nn.functional as F
from torch import nn
import numpy as np
from torch.autograd import Variable

BATCH_SIZE = 100
NUM_CLASSES = 10
NUM_EPOCHS = 500
NUM_ROUTING_ITERATIONS = 3


def softmax(input, dim=1):
    transposed_input = input.transpose(dim, len(input.size()) - 1)
    softmaxed_output = F.softmax(transposed_input.contiguous().view(-1, transposed_input.size(-1)), dim=-1)
    return softmaxed_output.view(*transposed_input.size()).transpose(dim, len(input.size()) - 1)


def augmentation(x, max_shift=2):
    _, _, height, width = x.size()

    h_shift, w_shift = np.random.randint(-max_shift, max_shift + 1, size=2)
    source_height_slice = slice(max(0, h_shift), h_shift + height)  # BREAK
    source_width_slice = slice(max(0, w_shift), w_shift + width)  # BREAK
    target_height_slice = slice(max(0, -h_shift), -h_shift + height)  # BREAK
    target_width_slice = slice(max(0, -w_shift), -w_shift + width)  # BREAK

    shifted_image = torch.zeros(*x.size())
    shifted_image[:, :, source_height_slice, source_width_slice] = x[:, :, target_height_slice, target_width_slice]
    return shifted_image.float()


class CapsuleLayer(nn.Module):
    def __init__(self, num_capsules, num_route_nodes, in_channels, out_channels, kernel_size=None, stride=None,
                 num_iterations=NUM_ROUTING_ITERATIONS):
        super(CapsuleLayer, self).__init__()

        self.num_route_nodes = num_route_nodes
        self.num_iterations = num_iterations

        self.num_capsules = num_capsules

        if num_route_nodes != -1:
            self.route_weights = nn.Parameter(torch.randn(num_capsules, num_route_nodes, in_channels, out_channels))
        else:
            self.capsules = nn.ModuleList(
                [nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride, padding=0) for _ in
                 range(num_capsules)])

    def squash(self, tensor, dim=-1):
        squared_norm = (tensor ** 2).sum(dim=dim, keepdim=True)
        scale = squared_norm / (1 + squared_norm)
        return scale * tensor / torch.sqrt(squared_norm)

    def forward(self, x):
        if self.num_route_nodes != -1:
            priors = x[None, :, :, None, :] @ self.route_weights[:, None, :, :, :]

            logits = Variable(torch.zeros(*priors.size()))  # BREAK
            for i in range(self.num_iterations):
                probs = softmax(logits, dim=2)
                outputs = self.squash((probs * priors).sum(dim=2, keepdim=True))

                if i != self.num_iterations - 1:
                    delta_logits = (priors * outputs).sum(dim=-1, keepdim=True)
                    logits = logits + delta_logits
        else:
            outputs = [capsule(x).view(x.size(0), -1, 1) for capsule in self.capsules]
            outputs = torch.cat(outputs, dim=-1)
            outputs = self.squash(outputs)

        return outputs


class CapsuleNet(nn.Module):
    def __init__(self):
        super(CapsuleNet, self).__init__()

        self.conv1 = nn.Conv2d(in_channels=1, out_channels=16, kernel_size=9, stride=1)
        self.primary_capsules = CapsuleLayer(num_capsules=8, num_route_nodes=-1, in_channels=16, out_channels=4,
                                             kernel_size=9, stride=2)
        self.digit_capsules = CapsuleLayer(num_capsules=NUM_CLASSES, num_route_nodes=4 * 6 * 6, in_channels=8,
                                           out_channels=16)

        self.decoder = nn.Sequential(
            nn.Linear(16 * NUM_CLASSES, 32),
            nn.ReLU(inplace=True),
            nn.Linear(32, 64),
            nn.ReLU(inplace=True),
            nn.Linear(64, 784),
            nn.Sigmoid()
        )

    def forward(self, x, y=None):
        x = F.relu(self.conv1(x), inplace=True)
        x = self.primary_capsules(x)
        x = self.digit_capsules(x).squeeze().transpose(0, 1)

        classes = (x ** 2).sum(dim=-1) ** 0.5
        classes = F.softmax(classes, dim=-1)

        if y is None:
            # In all batches, get the most active capsule.
            _, max_length_indices = classes.max(dim=1)
            y = Variable(torch.eye(NUM_CLASSES)).index_select(dim=0, index=max_length_indices.data)  # BREAK

        reconstructions = self.decoder((x * y[:, :, None]).contiguous().view(x.size(0), -1))

        return classes, reconstructions


class CapsuleLoss(nn.Module):
    def __init__(self):
        super(CapsuleLoss, self).__init__()
        self.reconstruction_loss = nn.MSELoss(size_average=False)

    def forward(self, images, labels, classes, reconstructions):
        left = F.relu(0.9 - classes, inplace=True) ** 2
        right = F.relu(classes - 0.1, inplace=True) ** 2

        margin_loss = labels * left + 0.5 * (1. - labels) * right
        margin_loss = margin_loss.sum()

        assert torch.numel(images) == torch.numel(reconstructions)
        images = images.view(reconstructions.size()[0], -1)
        reconstruction_loss = self.reconstruction_loss(reconstructions, images)

        return (margin_loss + 0.0005 * reconstruction_loss) / images.size(0)


model = None
capsule_loss = None


def processor(sample):
    data, labels, training = sample

    data = augmentation(data.unsqueeze(1).float() / 255.0)
    labels = torch.LongTensor(labels)

    labels = torch.eye(NUM_CLASSES).index_select(dim=0, index=labels)

    data = Variable(data)  # BREAK
    labels = Variable(labels)  # BREAK

    if training:
        classes, reconstructions = model(data, labels)
    else:
        classes, reconstructions = model(data)

    loss = capsule_loss(data, labels, classes, reconstructions)

    return loss, classes


def target():
    global model, capsule_loss
    torch.manual_seed(0)
    np.random.seed(0)
    model = CapsuleNet()
    model.eval()
    capsule_loss = CapsuleLoss()
    train_sample = [torch.randint(0, 256, (4, 28, 28), dtype=torch.uint8), torch.randint(0, 10, (4,)), True]
    test_sample = [torch.randint(0, 256, (3, 28, 28), dtype=torch.uint8), torch.randint(0, 10, (3,)), False]
    return [
        (processor, (train_sample,), {}),
        (processor, (test_sample,), {}),
    ]


EXPECT = ("rewrite: the NumPy shift in `augmentation` can draw with torch (`torch.randint`) and the shifted copy "
          "stays tensor code, so the processor's routing and loss compile whole")
