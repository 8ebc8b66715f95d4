"""The attention GRU decoder of IBM's seq2seq library (IBM/pytorch-seq2seq seq2seq/models/DecoderRNN.py:
`DecoderRNN.__init__/forward_step/forward/_init_state/_cat_directions`; attention.py: `Attention`; baseRNN.py:
`BaseRNN.__init__`; EncoderRNN.py: `EncoderRNN`; seq2seq.py: `Seq2seq.forward`). `DecoderRNN.forward` draws
`use_teacher_forcing = True if random.random() < teacher_forcing_ratio else False` (host RNG), builds a start input
with `Variable(torch.LongTensor([self.sos_id]), volatile=True).view(batch_size, -1)` when no targets are given, keeps
`lengths = np.array([max_length] * batch_size)`, and its closure `decode` takes `topk(1)` symbols, moves
`symbols.data.eq(self.eos_id)` to NumPy (`eos_batches.cpu().view(-1).numpy()`), and updates
`lengths[update_idx] = len(sequence_symbols)` with `update_idx = ((lengths > di) & eos_batches) != 0` (reading the
enclosing loop's `di`); the result carries `lengths.tolist()`. Teacher forcing runs one `forward_step` over the whole
target; otherwise a Python loop feeds back the symbols step by step. `F.log_softmax` (the default `function`) and the
attention's `F.softmax` are called without `dim`, as in the original (deprecation warnings).
Adaptations: `BaseRNN` keeps only `__init__` (the later `balance`/`forward`/`forward_rnn` of the stored revision are
overridden or unused by this decoder); the `torch.cuda` branches are kept but never taken (no GPU); sizes: vocabulary
12, hidden 16, `max_len` 7, EOS id 2, SOS id 1; the factory adds 0.3 to the output bias of EOS so that some
sequences of the first call end early. So that a call repeats exactly, the called function seeds Python's
`random` first (`random.seed`, an adaptation) and returns the stacked step outputs, the symbols and the lengths.
The first call decodes a batch of 4 with targets and `teacher_forcing_ratio=0.5` (seed 3: teacher forcing is used);
the second decodes one sequence greedily without targets (the start-symbol path, which only works for batch 1, and
the step-by-step loop)."""
import random

import numpy as np

import torch
import torch.nn as nn
from torch.autograd import Variable
import torch.nn.functional as F

if torch.cuda.is_available():
    import torch.cuda as device
else:
    import torch as device


class Attention(nn.Module):
    def __init__(self, dim):
        super(Attention, self).__init__()
        self.linear_out = nn.Linear(dim*2, dim)
        self.mask = None

    def set_mask(self, mask):
        self.mask = mask

    def forward(self, output, context):
        batch_size = output.size(0)
        hidden_size = output.size(2)
        input_size = context.size(1)
        # (batch, out_len, dim) * (batch, in_len, dim) -> (batch, out_len, in_len)
        attn = torch.bmm(output, context.transpose(1, 2))
        if self.mask is not None:
            attn.data.masked_fill_(self.mask, -float('inf'))
        attn = F.softmax(attn.view(-1, input_size)).view(batch_size, -1, input_size)

        # (batch, out_len, in_len) * (batch, in_len, dim) -> (batch, out_len, dim)
        mix = torch.bmm(attn, context)

        # concat -> (batch, out_len, 2*dim)
        combined = torch.cat((mix, output), dim=2)
        # output -> (batch, out_len, dim)
        output = F.tanh(self.linear_out(combined.view(-1, 2 * hidden_size))).view(batch_size, -1, hidden_size)

        return output, attn


class BaseRNN(nn.Module):
    SYM_MASK = "MASK"
    SYM_EOS = "EOS"

    def __init__(self, vocab, max_len, hidden_size, input_dropout_p, dropout_p, n_layers, rnn_cell):
        super(BaseRNN, self).__init__()
        self.vocab = vocab
        self.max_len = max_len
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.input_dropout_p = input_dropout_p
        self.input_dropout = nn.Dropout(p=input_dropout_p)
        if rnn_cell.lower() == 'lstm':
            self.rnn_cell = nn.LSTM
        elif rnn_cell.lower() == 'gru':
            self.rnn_cell = nn.GRU
        else:
            raise ValueError("Unsupported RNN Cell: {0}".format(rnn_cell))

        self.dropout_p = dropout_p
        self.rnn = self.rnn_cell(
            hidden_size, hidden_size, n_layers, batch_first=True, dropout=dropout_p)


class EncoderRNN(BaseRNN):
    def __init__(self, vocab_size, max_len, hidden_size,
            input_dropout_p=0, dropout_p=0,
            n_layers=1, bidirectional=False, rnn_cell='gru', variable_lengths=False):
        super(EncoderRNN, self).__init__(vocab_size, max_len, hidden_size,
                input_dropout_p, dropout_p, n_layers, rnn_cell)

        self.variable_lengths = variable_lengths
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.rnn = self.rnn_cell(hidden_size, hidden_size, n_layers,
                                 batch_first=True, bidirectional=bidirectional, dropout=dropout_p)

    def forward(self, input_var, input_lengths=None):
        embedded = self.embedding(input_var)
        embedded = self.input_dropout(embedded)
        if self.variable_lengths:
            embedded = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths, batch_first=True)
        output, hidden = self.rnn(embedded)  # BREAK
        if self.variable_lengths:
            output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
        return output, hidden


class DecoderRNN(BaseRNN):
    KEY_ATTN_SCORE = 'attention_score'
    KEY_LENGTH = 'length'
    KEY_SEQUENCE = 'sequence'

    def __init__(self, vocab_size, max_len, hidden_size,
            sos_id, eos_id,
            n_layers=1, rnn_cell='gru', bidirectional=False,
            input_dropout_p=0, dropout_p=0, use_attention=False):
        super(DecoderRNN, self).__init__(vocab_size, max_len, hidden_size,
                input_dropout_p, dropout_p,
                n_layers, rnn_cell)

        self.bidirectional_encoder = bidirectional
        self.rnn = self.rnn_cell(hidden_size, hidden_size, n_layers, batch_first=True, dropout=dropout_p)

        self.output_size = vocab_size
        self.max_length = max_len
        self.use_attention = use_attention
        self.eos_id = eos_id
        self.sos_id = sos_id

        self.init_input = None

        self.embedding = nn.Embedding(self.output_size, self.hidden_size)
        if use_attention:
            self.attention = Attention(self.hidden_size)

        self.out = nn.Linear(self.hidden_size, self.output_size)

    def forward_step(self, input_var, hidden, encoder_outputs, function):
        batch_size = input_var.size(0)
        output_size = input_var.size(1)
        embedded = self.embedding(input_var)
        embedded = self.input_dropout(embedded)

        output, hidden = self.rnn(embedded, hidden)  # BREAK

        attn = None
        if self.use_attention:
            output, attn = self.attention(output, encoder_outputs)

        predicted_softmax = function(self.out(output.view(-1, self.hidden_size))).view(batch_size, output_size, -1)
        return predicted_softmax, hidden, attn

    def forward(self, inputs=None, encoder_hidden=None, function=F.log_softmax,
                    encoder_outputs=None, teacher_forcing_ratio=0):
        ret_dict = dict()
        if self.use_attention:
            if encoder_outputs is None:
                raise ValueError("Argument encoder_outputs cannot be None when attention is used.")
            ret_dict[DecoderRNN.KEY_ATTN_SCORE] = list()
        if inputs is None:
            if teacher_forcing_ratio > 0:
                raise ValueError("Teacher forcing has to be disabled (set 0) when no inputs is provided.")
        if inputs is None and encoder_hidden is None:
            batch_size = 1
        else:
            if inputs is not None:
                batch_size = inputs.size(0)
            else:
                if self.rnn_cell is nn.LSTM:
                    batch_size = encoder_hidden[0].size(1)
                elif self.rnn_cell is nn.GRU:
                    batch_size = encoder_hidden.size(1)

        if inputs is None:
            inputs = Variable(torch.LongTensor([self.sos_id]),  # BREAK
                                    volatile=True).view(batch_size, -1)
            if torch.cuda.is_available():
                inputs = inputs.cuda()
            max_length = self.max_length
        else:
            max_length = inputs.size(1) - 1 # minus the start of sequence symbol

        decoder_hidden = self._init_state(encoder_hidden)

        use_teacher_forcing = True if random.random() < teacher_forcing_ratio else False  # BREAK
# BREAK
        decoder_outputs = []
        sequence_symbols = []
        lengths = np.array([max_length] * batch_size)

        def decode(step, step_output, step_attn):
            decoder_outputs.append(step_output)
            if self.use_attention:
                ret_dict[DecoderRNN.KEY_ATTN_SCORE].append(step_attn)
            symbols = decoder_outputs[-1].topk(1)[1]
            sequence_symbols.append(symbols)

            eos_batches = symbols.data.eq(self.eos_id)
            if eos_batches.dim() > 0:
                eos_batches = eos_batches.cpu().view(-1).numpy()
                update_idx = ((lengths > di) & eos_batches) != 0
                lengths[update_idx] = len(sequence_symbols)
            return symbols

        # Manual unrolling is used to support random teacher forcing.
        # If teacher_forcing_ratio is True or False instead of a probability, the unrolling can be done in graph
        if use_teacher_forcing:
            decoder_input = inputs[:, :-1]
            decoder_output, decoder_hidden, attn = self.forward_step(decoder_input, decoder_hidden, encoder_outputs,
                                                                     function=function)

            for di in range(decoder_output.size(1)):
                step_output = decoder_output[:, di, :]
                if attn is not None:
                    step_attn = attn[:, di, :]
                else:
                    step_attn = None
                decode(di, step_output, step_attn)
        else:
            decoder_input = inputs[:, 0].unsqueeze(1)
            for di in range(max_length):
                decoder_output, decoder_hidden, step_attn = self.forward_step(decoder_input, decoder_hidden, encoder_outputs,
                                                                         function=function)
                step_output = decoder_output.squeeze(1)
                symbols = decode(di, step_output, step_attn)
                decoder_input = symbols

        ret_dict[DecoderRNN.KEY_SEQUENCE] = sequence_symbols
        ret_dict[DecoderRNN.KEY_LENGTH] = lengths.tolist()  # BREAK

        return decoder_outputs, decoder_hidden, ret_dict

    def _init_state(self, encoder_hidden):
        """ Initialize the encoder hidden state. """
        if encoder_hidden is None:
            return None
        if isinstance(encoder_hidden, tuple):
            encoder_hidden = tuple([self._cat_directions(h) for h in encoder_hidden])
        else:
            encoder_hidden = self._cat_directions(encoder_hidden)
        return encoder_hidden

    def _cat_directions(self, h):
        """ If the encoder is bidirectional, do the following transformation.
            (#directions * #layers, #batch, hidden_size) -> (#layers, #batch, #directions * hidden_size)
        """
        if self.bidirectional_encoder:
            h = torch.cat([h[0:h.size(0):2], h[1:h.size(0):2]], 2)
        return h


class Seq2seq(nn.Module):
    def __init__(self, encoder, decoder, decode_function=F.log_softmax):
        super(Seq2seq, self).__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.decode_function = decode_function

    def flatten_parameters(self):
        self.encoder.rnn.flatten_parameters()
        self.decoder.rnn.flatten_parameters()

    def forward(self, input_variable, input_lengths=None, target_variable=None,
                teacher_forcing_ratio=0):
        encoder_outputs, encoder_hidden = self.encoder(input_variable, input_lengths)
        result = self.decoder(inputs=target_variable,
                              encoder_hidden=encoder_hidden,
                              encoder_outputs=encoder_outputs,
                              function=self.decode_function,
                              teacher_forcing_ratio=teacher_forcing_ratio)
        return result


def translate(model, src, tgt, teacher_forcing_ratio, seed):
    random.seed(seed)  # adaptation: fixes the teacher-forcing draw  # BREAK
    model.eval()  # BREAK
    decoder_outputs, decoder_hidden, ret_dict = model(src, target_variable=tgt,
                                                      teacher_forcing_ratio=teacher_forcing_ratio)
    return (torch.stack(decoder_outputs, 1), torch.cat(ret_dict[DecoderRNN.KEY_SEQUENCE], 1),
            ret_dict[DecoderRNN.KEY_LENGTH])


def target():
    torch.manual_seed(0)
    vocab, hidden, max_len, sos_id, eos_id = 12, 16, 7, 1, 2
    encoder = EncoderRNN(vocab, max_len, hidden)
    decoder = DecoderRNN(vocab, max_len, hidden, sos_id, eos_id, use_attention=True)
    with torch.no_grad():
        decoder.out.bias[eos_id] += 0.3  # so that some sequences end early
    model = Seq2seq(encoder, decoder)
    gen = torch.Generator().manual_seed(0)
    src1 = torch.randint(3, vocab, (4, 5), generator=gen)
    tgt1 = torch.cat([torch.full((4, 1), sos_id), torch.randint(2, vocab, (4, 6), generator=gen)], 1)
    src2 = torch.randint(3, vocab, (1, 6), generator=gen)
    return [
        (translate, (model, src1, tgt1, 0.5, 3), {}),
        (translate, (model, src2, None, 0, 3), {}),
    ]


EXPECT = ("rewrite: keep `lengths` as a tensor (`torch.full((batch_size,), max_length)`) and update it with "
          "`torch.where((lengths > di) & symbols.view(-1).eq(self.eos_id), len(sequence_symbols), lengths)` instead "
          "of the NumPy round trip (`.cpu().view(-1).numpy()`), converting with `.tolist()` only in the caller; the "
          "`random.random()` teacher-forcing draw is host RNG and is better drawn by the caller and passed in")
