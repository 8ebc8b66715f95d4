"""deepspeech.pytorch's `MaskConv`: after each module of the conv front end, a padding mask is built on the host,
`mask = torch.BoolTensor(x.size()).fill_(0)`, and filled per utterance in a Python loop,
`length = length.item()`, `if (mask[i].size(2) - length) > 0: mask[i].narrow(2, length, ...).fill_(1)`, before
`x = x.masked_fill(mask, 0)` (SeanNaren/deepspeech.pytorch deepspeech_pytorch/model.py: MaskConv.forward,
DeepSpeech.forward/get_seq_lens, SequenceWise, InferenceBatchSoftmax). The front end is the original two-conv stack
with smaller channels and kernels; the recurrent layers (`BatchRNN`, packed sequences) and the Lightning/CTC parts are
left out, so `DeepSpeech.forward` goes from the masked convolutions straight to the fully connected layer and the
inference softmax. Eval mode (BatchNorm uses its running statistics)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SequenceWise(nn.Module):
    def __init__(self, module):
        """
        Collapses input of dim T*N*H to (T*N)*H, and applies to a module.
        Allows handling of variable sequence lengths and minibatch sizes.
        :param module: Module to apply input to.
        """
        super(SequenceWise, self).__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        x = x.view(t * n, -1)
        x = self.module(x)
        x = x.view(t, n, -1)
        return x


class MaskConv(nn.Module):
    def __init__(self, seq_module):
        """
        Adds padding to the output of the module based on the given lengths. This is to ensure that the
        results of the model do not change when batch sizes change during inference.
        Input needs to be in the shape of (BxCxDxT)
        :param seq_module: The sequential module containing the conv stack.
        """
        super(MaskConv, self).__init__()
        self.seq_module = seq_module

    def forward(self, x, lengths):
        """
        :param x: The input of size BxCxDxT
        :param lengths: The actual length of each sequence in the batch
        :return: Masked output from the module
        """
        for module in self.seq_module:
            x = module(x)
            mask = torch.BoolTensor(x.size()).fill_(0)
            if x.is_cuda:
                mask = mask.cuda()
            for i, length in enumerate(lengths):
                length = length.item()  # BREAK
                if (mask[i].size(2) - length) > 0:
                    mask[i].narrow(2, length, mask[i].size(2) - length).fill_(1)
            x = x.masked_fill(mask, 0)
        return x, lengths


class InferenceBatchSoftmax(nn.Module):
    def forward(self, input_):
        if not self.training:
            return F.softmax(input_, dim=-1)
        else:
            return input_


class DeepSpeech(nn.Module):
    def __init__(self, labels, n_freq=16, channels=4):
        super(DeepSpeech, self).__init__()
        self.labels = labels
        num_classes = len(self.labels)

        self.conv = MaskConv(nn.Sequential(
            nn.Conv2d(1, channels, kernel_size=(5, 3), stride=(2, 2), padding=(2, 1)),
            nn.BatchNorm2d(channels),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(channels, channels, kernel_size=(3, 3), stride=(2, 1), padding=(1, 1)),
            nn.BatchNorm2d(channels),
            nn.Hardtanh(0, 20, inplace=True)
        ))
        rnn_input_size = (n_freq + 2 * 2 - 5) // 2 + 1
        rnn_input_size = (rnn_input_size + 2 * 1 - 3) // 2 + 1
        rnn_input_size *= channels

        fully_connected = nn.Sequential(
            nn.BatchNorm1d(rnn_input_size),
            nn.Linear(rnn_input_size, num_classes, bias=False)
        )
        self.fc = nn.Sequential(
            SequenceWise(fully_connected),
        )
        self.inference_softmax = InferenceBatchSoftmax()

    def forward(self, x, lengths):
        lengths = lengths.cpu().int()
        output_lengths = self.get_seq_lens(lengths)
        x, _ = self.conv(x, output_lengths)

        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])  # Collapse feature dimension
        x = x.transpose(1, 2).transpose(0, 1).contiguous()  # TxNxH

        x = self.fc(x)
        x = x.transpose(0, 1)
        # identity in training mode, softmax in eval mode
        x = self.inference_softmax(x)
        return x, output_lengths

    def get_seq_lens(self, input_length):
        """
        Given a 1D Tensor or Variable containing integer sequence lengths, return a 1D tensor or variable
        containing the size sequences that will be output by the network.
        :param input_length: 1D Tensor
        :return: 1D Tensor scaled by model
        """
        seq_len = input_length
        for m in self.conv.modules():
            if type(m) == nn.modules.conv.Conv2d:
                seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1) // m.stride[1] + 1)
        return seq_len.int()


def target():
    torch.manual_seed(0)
    model = DeepSpeech(labels="_'ABCDEFG ")
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    model.eval()
    spect1 = torch.randn(3, 1, 16, 20)
    lengths1 = torch.tensor([20, 13, 8])
    spect2 = torch.randn(3, 1, 16, 20)
    lengths2 = torch.tensor([20, 17, 5])
    return [
        (model, (spect1, lengths1), {}),
        (model, (spect2, lengths2), {}),
    ]


EXPECT = ("rewrite: build the padding mask without the host loop: `mask = torch.arange(x.size(3)) >= "
          "lengths.view(-1, 1, 1, 1)` (broadcast over channels and frequency) and `x = x.masked_fill(mask, 0)`; "
          "no `length.item()`, no `narrow(...).fill_(1)` on a legacy `torch.BoolTensor(x.size())`")
