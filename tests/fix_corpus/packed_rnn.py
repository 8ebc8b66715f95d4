"""A packed RNN over padded sequences (classic NLP encoder)."""
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 5, batch_first=True)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)  # BREAK
        out, h = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return out.sum() + h.sum()


def target():
    torch.manual_seed(0)
    return [(Encoder(), (torch.randn(3, 6, 4), torch.tensor([6, 4, 2])), {})]


EXPECT = ('split: pack, GRU and unpack run eagerly (the one-statement gap reveals the unpack break); the '
          'reduction compiles')
