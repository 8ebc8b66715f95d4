"""AWD-LSTM language-model training epoch: DropConnect by re-registering parameters in `forward`, embedding
dropout, locked dropout and NumPy-drawn BPTT lengths (salesforce/awd-lstm-lm: `weight_drop.py`: `WeightDrop`;
`embed_regularize.py`: `EmbeddingDropout` (the stored revision's class form); `locked_dropout.py`:
`LockedDropout`; `model.py`: `RNNModel`; `utils.py`: `repackage_hidden`, `batchify`, `get_batch`; `main.py`:
`train`). `WeightDrop._setup` prints, deletes `self.module._parameters[name_w]` and registers `name_w + '_raw'`;
`_setweights` (called from `forward`) applies `F.dropout` to the raw weight and re-attaches it with
`setattr(self.module, name_w, torch.nn.Parameter(w))`; the LSTM's `flatten_parameters` is replaced by a no-op
method. `EmbeddingDropout.forward` draws a row mask with `self.weight.data.new(...).bernoulli_(1 - dropout)` behind
`if self.training`/`if dropout:` branches. `LockedDropout.forward` returns early `if not self.training or not
dropout` and otherwise draws a `bernoulli_` mask through `x.data.new(...)`. `train` loops `while i <
train_data.size(0) - 1 - 1:` with `bptt = args.bptt if np.random.random() < 0.95 else args.bptt / 2.` and `seq_len
= max(5, int(np.random.normal(bptt, 5)))`, rescales `optimizer.param_groups[0]['lr']` by `seq_len / args.bptt`,
`repackage_hidden` (recursive `isinstance` on tuples), the AR/TAR penalties as `sum(...)` over generator
expressions, `clip_grad_norm_`, `optimizer.step()`, `total_loss += raw_loss.data`, and every `log_interval`
batches prints a `str.format` line with `total_loss.item()`, `time.time()` elapsed and `math.exp`.
Adaptations: the corpus is a random token tensor made in the factory (40 tokens of vocabulary); `RNNModel`,
`LockedDropout`, `repackage_hidden`, `batchify`, `get_batch` and the rest of `train` after the lines quoted in the
stored copies were written from the collector's knowledge of the repository (`weight_drop.py` and
`embed_regularize.py` were read from the stored copy, `train`'s loop head from a copy found by code search);
`SplitCrossEntropyLoss` is a full-softmax stand-in taking `(weight, bias, output, targets)`; sizes are shrunk
(embedding 8, hidden 12, two LSTM layers, `bptt` 6, batch 4); `args` is a `SimpleNamespace`; `.cuda()` is dropped.
So that a call repeats exactly, the called function (`train_epoch`, an adaptation) restores the model and optimizer
from copies taken in the factory (`strict=False`: the dropped `weight_hh_l0` that each forward re-registers is
not in the factory's state) and seeds NumPy and torch (`reset_`); it returns the raw losses and the decoder
output for the first batch. The two calls use different corpora and `alpha`/`beta`."""
import copy
import math
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.nn import Parameter


class WeightDrop(torch.nn.Module):
    def __init__(self, module, weights, dropout=0, variational=False):
        super(WeightDrop, self).__init__()
        self.module = module
        self.weights = weights
        self.dropout = dropout
        self.variational = variational
        self._setup()

    def widget_demagnetizer_y2k_edition(*args, **kwargs):
        # We need to replace flatten_parameters with a nothing function
        # It must be a function rather than a lambda as otherwise pickling explodes
        return

    def _setup(self):
        # Terrible temporary solution to an issue regarding compacting weights re: CUDNN RNN
        if issubclass(type(self.module), torch.nn.RNNBase):
            self.module.flatten_parameters = self.widget_demagnetizer_y2k_edition

        for name_w in self.weights:
            print('Applying weight drop of {} to {}'.format(self.dropout, name_w))
            w = getattr(self.module, name_w)
            del self.module._parameters[name_w]
            self.module.register_parameter(name_w + '_raw', Parameter(w.data))

    def _setweights(self):
        for name_w in self.weights:
            raw_w = getattr(self.module, name_w + '_raw')  # BREAK
            w = None
            if self.variational:
                mask = torch.autograd.Variable(torch.ones(raw_w.size(0), 1))
                if raw_w.is_cuda: mask = mask.cuda()
                mask = torch.nn.functional.dropout(mask, p=self.dropout, training=True)
                w = mask.expand_as(raw_w) * raw_w
            else:
                w = torch.nn.functional.dropout(raw_w, p=self.dropout, training=self.training)
            setattr(self.module, name_w, torch.nn.Parameter(w))

    def forward(self, *args):
        self._setweights()
        return self.module.forward(*args)  # BREAK


class EmbeddingDropout(torch.nn.Embedding):

  def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
               norm_type=2, scale_grad_by_freq=False,
               sparse = False, dropout=0.1, scale = None):
    super(EmbeddingDropout, self).__init__(num_embeddings, embedding_dim, padding_idx,
                            max_norm, norm_type, scale_grad_by_freq, sparse)
    self.dropout=dropout
    self.padding_idx = padding_idx if padding_idx else -1
    assert dropout>=0.0 and dropout<1.0 , "Dropout must be >= 0.0 and < 1.0"
    self.scale = scale

  def forward(self, input):
    if self.training:
      dropout = self.dropout
    else:
      dropout = 0

    if dropout:
      mask = self.weight.data.new(self.weight.size(0), 1)
      mask.bernoulli_(1 - dropout)
      mask = mask.expand_as(self.weight)
      mask = mask / (1 - dropout)
      masked_weight = self.weight * Variable(mask)  # BREAK
    else:
      masked_weight = self.weight
    if self.scale and self.scale != 1:
      masked_weight = masked_weight * scale

    X = F.embedding(input, masked_weight,
                                       self.padding_idx, self.max_norm, self.norm_type,
                                       self.scale_grad_by_freq, self.sparse
    )

    return X


class LockedDropout(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, dropout=0.5):
        if not self.training or not dropout:
            return x
        m = x.data.new(1, x.size(1), x.size(2)).bernoulli_(1 - dropout)
        mask = Variable(m, requires_grad=False) / (1 - dropout)  # BREAK
        mask = mask.expand_as(x)
        return mask * x


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, dropouth=0.5, dropouti=0.5, dropoute=0.1, wdrop=0, tie_weights=False):
        super(RNNModel, self).__init__()
        self.lockdrop = LockedDropout()
        self.encoder = EmbeddingDropout(ntoken, ninp, dropout=dropoute)
        assert rnn_type in ['LSTM'], 'RNN type is not supported'
        if rnn_type == 'LSTM':
            self.rnns = [torch.nn.LSTM(ninp if l == 0 else nhid, nhid if l != nlayers - 1 else (ninp if tie_weights else nhid), 1, dropout=0) for l in range(nlayers)]
            if wdrop:
                self.rnns = [WeightDrop(rnn, ['weight_hh_l0'], dropout=wdrop) for rnn in self.rnns]
        self.rnns = torch.nn.ModuleList(self.rnns)
        self.decoder = nn.Linear(nhid, ntoken)

        self.ninp = ninp
        self.nhid = nhid
        self.nlayers = nlayers
        self.dropout = dropout
        self.dropouti = dropouti
        self.dropouth = dropouth
        self.dropoute = dropoute
        self.tie_weights = tie_weights

    def forward(self, input, hidden, return_h=False):
        emb = self.encoder(input)

        emb = self.lockdrop(emb, self.dropouti)

        raw_output = emb
        new_hidden = []
        raw_outputs = []
        outputs = []
        for l, rnn in enumerate(self.rnns):
            current_input = raw_output
            raw_output, new_h = rnn(raw_output, hidden[l])
            new_hidden.append(new_h)
            raw_outputs.append(raw_output)
            if l != self.nlayers - 1:
                raw_output = self.lockdrop(raw_output, self.dropouth)
                outputs.append(raw_output)
        hidden = new_hidden

        output = self.lockdrop(raw_output, self.dropout)
        outputs.append(output)

        result = output.view(output.size(0)*output.size(1), output.size(2))
        if return_h:
            return result, hidden, raw_outputs, outputs
        return result, hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters()).data
        return [(Variable(weight.new(1, bsz, self.nhid if l != self.nlayers - 1 else (self.ninp if self.tie_weights else self.nhid)).zero_()),  # BREAK
                Variable(weight.new(1, bsz, self.nhid if l != self.nlayers - 1 else (self.ninp if self.tie_weights else self.nhid)).zero_()))
                for l in range(self.nlayers)]


class SplitCrossEntropyLoss(nn.Module):
    """Adaptation: full-softmax stand-in for splitcross.SplitCrossEntropyLoss."""

    def forward(self, weight, bias, hiddens, targets):
        return F.cross_entropy(F.linear(hiddens, weight, bias), targets)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors,
    to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz, args):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    data = data.view(bsz, -1).t().contiguous()
    return data


def get_batch(source, i, args, seq_len=None, evaluation=False):
    seq_len = min(seq_len if seq_len else args.bptt, len(source) - 1 - i)
    data = source[i:i+seq_len]
    target = source[i+1:i+1+seq_len].view(-1)
    return data, target


def train(model, train_data, optimizer, criterion, params, args, epoch):
    # Turn on training mode which enables dropout.
    total_loss = 0
    start_time = time.time()  # BREAK
    hidden = model.init_hidden(args.batch_size)
    batch, i = 0, 0
    raw_losses = []
    while i < train_data.size(0) - 1 - 1:
        bptt = args.bptt if np.random.random() < 0.95 else args.bptt / 2.  # BREAK
        # Prevent excessively small or negative sequence lengths
        seq_len = max(5, int(np.random.normal(bptt, 5)))
        # There's a very small chance that it could select a very long sequence length resulting in OOM
        # seq_len = min(seq_len, args.bptt + 10)

        lr2 = optimizer.param_groups[0]['lr']
        optimizer.param_groups[0]['lr'] = lr2 * seq_len / args.bptt
        model.train()
        data, targets = get_batch(train_data, i, args, seq_len=seq_len)

        # Starting each batch, we detach the hidden state from how it was previously produced.
        # If we didn't, the model would try backpropagating all the way to start of the dataset.
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()

        output, hidden, rnn_hs, dropped_rnn_hs = model(data, hidden, return_h=True)
        raw_loss = criterion(model.decoder.weight, model.decoder.bias, output, targets)

        loss = raw_loss
        # Activiation Regularization
        if args.alpha: loss = loss + sum(args.alpha * dropped_rnn_h.pow(2).mean() for dropped_rnn_h in dropped_rnn_hs[-1:])
        # Temporal Activation Regularization (slowness)
        if args.beta: loss = loss + sum(args.beta * (rnn_h[1:] - rnn_h[:-1]).pow(2).mean() for rnn_h in rnn_hs[-1:])
        loss.backward()

        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        if args.clip: torch.nn.utils.clip_grad_norm_(params, args.clip)
        optimizer.step()  # BREAK

        total_loss += raw_loss.data
        raw_losses.append(raw_loss.detach())
        optimizer.param_groups[0]['lr'] = lr2
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss.item() / args.log_interval
            elapsed = time.time() - start_time
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:05.5f} | ms/batch {:5.2f} | '
                    'loss {:5.2f} | ppl {:8.2f} | bpc {:8.3f}'.format(
                epoch, batch, len(train_data) // args.bptt, optimizer.param_groups[0]['lr'],
                elapsed * 1000 / args.log_interval, cur_loss, math.exp(cur_loss), cur_loss / math.log(2)))
            total_loss = 0
            start_time = time.time()
        ###
        batch += 1
        i += seq_len
    return raw_losses


def reset_(model, optimizer, model_state, opt_state, seed):
    """Adaptation: restore the initial model/optimizer and seed NumPy/torch so that a call repeats exactly."""
    model.load_state_dict(model_state, strict=False)  # `weight_hh_l0` is re-registered by every forward  # BREAK
    optimizer.load_state_dict(opt_state)  # BREAK
    np.random.seed(seed)
    torch.manual_seed(seed)  # BREAK


def train_epoch(model, corpus, optimizer, criterion, model_state, opt_state, args):
    reset_(model, optimizer, model_state, opt_state, args.seed)
    train_data = batchify(corpus, args.batch_size, args)
    params = list(model.parameters()) + list(criterion.parameters())  # BREAK
    raw_losses = train(model, train_data, optimizer, criterion, params, args, 1)
    model.eval()
    with torch.no_grad():
        out, _ = model(train_data[:args.bptt], model.init_hidden(args.batch_size))
    return raw_losses, out


def target():
    torch.manual_seed(0)
    ntokens = 40
    model = RNNModel('LSTM', ntokens, 8, 12, 2, dropout=0.4, dropouth=0.25, dropouti=0.4, dropoute=0.1, wdrop=0.5)
    criterion = SplitCrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0, weight_decay=1.2e-6)
    model_state = copy.deepcopy(model.state_dict())
    opt_state = copy.deepcopy(optimizer.state_dict())
    corpus1 = torch.randint(0, ntokens, (4 * 30,))
    corpus2 = torch.randint(0, ntokens, (4 * 24,))
    args1 = SimpleNamespace(bptt=6, batch_size=4, alpha=2, beta=1, clip=0.25, log_interval=2, seed=1)
    args2 = SimpleNamespace(bptt=6, batch_size=4, alpha=0, beta=2, clip=0.25, log_interval=2, seed=2)
    return [
        (train_epoch, (model, corpus1, optimizer, criterion, model_state, opt_state, args1), {}),
        (train_epoch, (model, corpus2, optimizer, criterion, model_state, opt_state, args2), {}),
    ]


EXPECT = ("caller: `train` is an eager epoch loop (NumPy-drawn `seq_len`, learning-rate rescaling in "
          "`param_groups`, `repackage_hidden`, clip/step, `.item()`/`time.time()` logging); compile the model's "
          "forward and the loss, keep the loop eager. Inside the forward, `WeightDrop._setweights` re-registers "
          "a fresh `nn.Parameter` with `setattr` on every call (module mutation); that is `none: parameter "
          "re-registration in forward cannot be traced faithfully` unless rewritten to a functional weight "
          "(`torch.func.functional_call`)")
