"""Character-level sampling loop `generate` from spro/practical-pytorch (`char-rnn-generation/generate.py`, the
stored revision fc6fe17 whose `generate(decoder, prime_str, predict_len, temperature)` uses the module-level
`all_characters`; a later revision that passes `all_characters` as an argument was read and not used, because the
stored `helpers.py` has the one-argument `char_tensor`), with `char-rnn-generation/model.py` (`RNN`) and
`char-rnn-generation/helpers.py` (`all_characters = string.printable`, `char_tensor`, `time_since`).
`generate` primes a GRU hidden state over the prime string in a Python loop, then for each step samples
`torch.multinomial(output.data.view(-1).div(temperature).exp(), 1)[0]`, indexes the Python string
`all_characters` with that 0-d tensor, appends the character to a Python string and rebuilds the next input with
`char_tensor` (a Python loop of `tensor[c] = all_characters.index(string[c])`).
Adaptations: `helpers.read_file` (unidecode, reads a text file) is left out; the trained `decoder` that the
original loads with `torch.load` is a randomly initialised original `RNN` made in the factory (hidden size 16,
two layers); `from helpers import *`/`from model import *` are inlined. Randomness: `torch.multinomial` draws from
torch's global generator, seeded in the factory only."""
import math
import string
import time

import torch
import torch.nn as nn
from torch.autograd import Variable


# ---- char-rnn-generation/helpers.py
all_characters = string.printable
n_characters = len(all_characters)


# Turning a string into a tensor

def char_tensor(string):
    tensor = torch.zeros(len(string)).long()
    for c in range(len(string)):
        tensor[c] = all_characters.index(string[c])
    return Variable(tensor)  # BREAK


# Readable time elapsed

def time_since(since):
    s = time.time() - since
    m = math.floor(s / 60)
    s -= m * 60
    return '%dm %ds' % (m, s)


# ---- char-rnn-generation/model.py
class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=1):
        super(RNN, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers

        self.encoder = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        input = self.encoder(input.view(1, -1))
        output, hidden = self.gru(input.view(1, 1, -1), hidden)  # BREAK
        output = self.decoder(output.view(1, -1))
        return output, hidden

    def init_hidden(self):
        return Variable(torch.zeros(self.n_layers, 1, self.hidden_size))  # BREAK


# ---- char-rnn-generation/generate.py
def generate(decoder, prime_str='A', predict_len=100, temperature=0.8):
    hidden = decoder.init_hidden()
    prime_input = char_tensor(prime_str)
    predicted = prime_str

    # Use priming string to "build up" hidden state
    for p in range(len(prime_str) - 1):
        _, hidden = decoder(prime_input[p], hidden)

    inp = prime_input[-1]

    for p in range(predict_len):
        output, hidden = decoder(inp, hidden)

        # Sample from the network as a multinomial distribution
        output_dist = output.data.view(-1).div(temperature).exp()
        top_i = torch.multinomial(output_dist, 1)[0]

        # Add predicted character to string and use as next input
        predicted_char = all_characters[top_i]
        predicted += predicted_char
        inp = char_tensor(predicted_char)

    return predicted


def target():
    torch.manual_seed(0)
    decoder = RNN(n_characters, 16, n_characters, n_layers=2)
    return [
        (generate, (decoder,), {"prime_str": "Wh", "predict_len": 12, "temperature": 0.8}),
        (generate, (decoder,), {"prime_str": "The", "predict_len": 8, "temperature": 0.5}),
    ]


EXPECT = ("none: every step indexes a Python string with the sampled 0-d tensor and rebuilds the next input from "
          "a Python string through a per-character loop; the sampled text is Python data the loop needs at each step")
