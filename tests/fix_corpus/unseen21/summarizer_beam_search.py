"""Beam-search decoding of an attention GRU encoder-decoder, from vtien/abstractive-text-summarizer
(`beam_search.py` `beam_search_decode`, stored revision 1e94ec0; `model.py` `EncoderDecoder`, `Generator`, `Encoder`,
`Decoder`, `BahdanauAttention`, `make_model`, stored revision d65dc41; the model follows Bastings' "annotated
encoder-decoder"). `beam_search_decode` keeps hypotheses as Python `[list, float]` pairs: at each step it decodes
one token per beam under `torch.no_grad()`, appends `model.decoder.attention.alphas.cpu().numpy()` to a list, takes
`torch.topk`, reads `.data[0]`, extends each hypothesis with `next_words[j].cpu().item()` and `scores[j].item()`,
sorts the candidates with `sorted(..., key=lambda tup: tup[1])`, finds each survivor's parent with
`next_words.tolist().index(...)`, rebuilds `next_words = torch.Tensor(next_words)` from Python ints, and feeds
`torch.ones(1, 1).type_as(src).fill_(next_words[k].item())` back; at the end it cuts at the first EOS with
`np.where` and returns NumPy arrays. The encoder packs the source with `pack_padded_sequence(x, lengths.cpu(), ...)`;
the attention fills masked scores through `scores.data.masked_fill_` and stores `self.alphas` on the module.
Adaptations: `beam_search.py` has no import lines in the repository (it was used beside the notebook); `import
numpy as np` and `import torch` are added. From `model.py`, the module-level `print`s, the seeding lines, the
`DEVICE = torch.device('cuda:0')` line and the unused imports (`matplotlib`, `IPython`'s `set_trace`, `math`, `copy`,
`time`) are dropped, and `Batch` is left out (not used); `USE_CUDA = torch.cuda.is_available()` is kept (False here,
so `make_model` returns the CPU model). Sizes: vocabularies 12, embedding 8, hidden 8 (256/512 in the original),
beam width 3, 4 decoding steps. The model is built with the original `make_model` in the factory and put in eval
mode (dropout off). The decode draws nothing."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

# we will use CUDA if it is available
USE_CUDA = torch.cuda.is_available()


# ---- model.py
class EncoderDecoder(nn.Module):
    """
    A standard Encoder-Decoder architecture. Base for this and many 
    other models.
    """
    def __init__(self, encoder, decoder, src_embed, trg_embed, generator):
        super(EncoderDecoder, self).__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.trg_embed = trg_embed
        self.generator = generator
        
    def forward(self, src, trg, src_mask, trg_mask, src_lengths, trg_lengths):
        """Take in and process masked src and target sequences."""
        encoder_hidden, encoder_final = self.encode(src, src_mask, src_lengths)
        return self.decode(encoder_hidden, encoder_final, src_mask, trg, trg_mask)
    
    def encode(self, src, src_mask, src_lengths):
        return self.encoder(self.src_embed(src), src_mask, src_lengths)
    
    def decode(self, encoder_hidden, encoder_final, src_mask, trg, trg_mask,
               decoder_hidden=None):
        return self.decoder(self.trg_embed(trg), encoder_hidden, encoder_final,
                            src_mask, trg_mask, hidden=decoder_hidden)


class Generator(nn.Module):
    """Define standard linear + softmax generation step."""
    def __init__(self, hidden_size, vocab_size):
        super(Generator, self).__init__()
        self.proj = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)
    

class Encoder(nn.Module):
    """Encodes a sequence of word embeddings"""
    def __init__(self, input_size, hidden_size, num_layers=1, dropout=0.):
        super(Encoder, self).__init__()
        self.num_layers = num_layers
        #self.rnn = nn.LSTM(input_size, hidden_size, num_layers, 
        #                  batch_first=True, bidirectional=True, dropout=dropout)
        self.rnn = nn.GRU(input_size, hidden_size, num_layers, 
                          batch_first=True, bidirectional=True, dropout=dropout)        
        
    def forward(self, x, mask, lengths):
        """
        Applies a bidirectional GRU to sequence of embeddings x.
        The input mini-batch x needs to be sorted by length.
        x should have dimensions [batch, time, dim].
        """
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True)  # BREAK
        output, final = self.rnn(packed)  # BREAK
        #output, (final, cell) = self.rnn(packed)
        output, _ = pad_packed_sequence(output, batch_first=True)

        # we need to manually concatenate the final states for both directions
        fwd_final = final[0:final.size(0):2]
        bwd_final = final[1:final.size(0):2]
        final = torch.cat([fwd_final, bwd_final], dim=2)  # [num_layers, batch, 2*dim]

        return output, final


class Decoder(nn.Module):
    """A conditional RNN decoder with attention."""
    
    def __init__(self, emb_size, hidden_size, attention, num_layers=1, dropout=0.5,
                 bridge=True):
        super(Decoder, self).__init__()
        
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.attention = attention
        self.dropout = dropout
                 
        # self.rnn = nn.LSTM(emb_size + 2*hidden_size, hidden_size, num_layers,
        #                   batch_first=True, dropout=dropout)
        self.rnn = nn.GRU(emb_size + 2*hidden_size, hidden_size, num_layers,
                          batch_first=True, dropout=dropout)        
                 
        # to initialize from the final encoder state
        self.bridge = nn.Linear(2*hidden_size, hidden_size, bias=True) if bridge else None

        self.dropout_layer = nn.Dropout(p=dropout)
        self.pre_output_layer = nn.Linear(hidden_size + 2*hidden_size + emb_size,
                                          hidden_size, bias=False)
        
    def forward_step(self, prev_embed, encoder_hidden, src_mask, proj_key, hidden):
        """Perform a single decoder step (1 word)"""

        # compute context vector using attention mechanism
        query = hidden[-1].unsqueeze(1)  # [#layers, B, D] -> [B, 1, D]
        context, attn_probs = self.attention(
            query=query, proj_key=proj_key,
            value=encoder_hidden, mask=src_mask)

        # update rnn hidden state
        rnn_input = torch.cat([prev_embed, context], dim=2)
        output, hidden = self.rnn(rnn_input, hidden)  # BREAK
        #output, (hidden, cell) = self.rnn(rnn_input, hidden)
        
        pre_output = torch.cat([prev_embed, output, context], dim=2)
        pre_output = self.dropout_layer(pre_output)
        pre_output = self.pre_output_layer(pre_output)

        return output, hidden, pre_output
    
    def forward(self, trg_embed, encoder_hidden, encoder_final, 
                src_mask, trg_mask, hidden=None, max_len=None):
        """Unroll the decoder one step at a time."""
                                         
        # the maximum number of steps to unroll the RNN
        if max_len is None:
            max_len = trg_mask.size(-1)

        # initialize decoder hidden state
        if hidden is None:
            hidden = self.init_hidden(encoder_final)
        
        # pre-compute projected encoder hidden states
        # (the "keys" for the attention mechanism)
        # this is only done for efficiency
        proj_key = self.attention.key_layer(encoder_hidden)
        
        # here we store all intermediate hidden states and pre-output vectors
        decoder_states = []
        pre_output_vectors = []
        
        # unroll the decoder RNN for max_len steps
        for i in range(max_len):
            prev_embed = trg_embed[:, i].unsqueeze(1)
            output, hidden, pre_output = self.forward_step(prev_embed, encoder_hidden, 
                                                           src_mask, proj_key, hidden)
            decoder_states.append(output)
            pre_output_vectors.append(pre_output)

        decoder_states = torch.cat(decoder_states, dim=1)
        pre_output_vectors = torch.cat(pre_output_vectors, dim=1)
        return decoder_states, hidden, pre_output_vectors  # [B, N, D]

    def init_hidden(self, encoder_final):
        """Returns the initial decoder state,
        conditioned on the final encoder state."""

        if encoder_final is None:
            return None  # start with zeros

        return torch.tanh(self.bridge(encoder_final))


class BahdanauAttention(nn.Module):
    """Implements Bahdanau (MLP) attention"""
    
    def __init__(self, hidden_size, key_size=None, query_size=None):
        super(BahdanauAttention, self).__init__()
        
        # We assume a bi-directional encoder so key_size is 2*hidden_size
        key_size = 2 * hidden_size if key_size is None else key_size
        query_size = hidden_size if query_size is None else query_size

        self.key_layer = nn.Linear(key_size, hidden_size, bias=False)
        self.query_layer = nn.Linear(query_size, hidden_size, bias=False)
        self.energy_layer = nn.Linear(hidden_size, 1, bias=False)
        
        # to store attention scores
        self.alphas = None
        
    def forward(self, query=None, proj_key=None, value=None, mask=None):
        assert mask is not None, "mask is required"

        # We first project the query (the decoder state).
        # The projected keys (the encoder states) were already pre-computated.
        query = self.query_layer(query)
        
        # Calculate scores.
        scores = self.energy_layer(torch.tanh(query + proj_key))
        scores = scores.squeeze(2).unsqueeze(1)
        
        # Mask out invalid positions.
        # The mask marks valid positions so we invert it using `mask & 0`.
        scores.data.masked_fill_(mask == 0, -float('inf'))
        
        # Turn scores to probabilities.
        alphas = F.softmax(scores, dim=-1)
        self.alphas = alphas        
        
        # The context vector is the weighted sum of the values.
        context = torch.bmm(alphas, value)
        
        # context shape: [B, 1, 2D], alphas shape: [B, 1, M]
        return context, alphas


def make_model(src_vocab, tgt_vocab, emb_size=256, hidden_size=512, num_layers=1, dropout=0.1):
    "Helper: Construct a model from hyperparameters."

    attention = BahdanauAttention(hidden_size)

    model = EncoderDecoder(
        Encoder(emb_size, hidden_size, num_layers=num_layers, dropout=dropout),
        Decoder(emb_size, hidden_size, attention, num_layers=num_layers, dropout=dropout),
        nn.Embedding(src_vocab, emb_size),
        nn.Embedding(tgt_vocab, emb_size),
        Generator(hidden_size, tgt_vocab))

    return model.cuda() if USE_CUDA else model


# ---- beam_search.py
def beam_search_decode(model, src, src_mask, src_lengths, max_len=100, sos_index=1, eos_index=None, beam_width=3):
    """Beam search to decode the summaries."""

    with torch.no_grad():
        encoder_hidden, encoder_final = model.encode(src, src_mask, src_lengths)
        prev_y = torch.ones(1, 1).fill_(sos_index).type_as(src)
        trg_mask = torch.ones_like(prev_y)

    sequences = [[list(), 0.0]]
    attention_scores = []
    hidden = None

    for i in range(max_len):
      all_candidates = []
      if i==0: #on first iteration, we only use the sos_index to feed into the decoder
          with torch.no_grad():
              out, hidden, pre_output = model.decode(encoder_hidden, encoder_final, src_mask,
                                                    prev_y, trg_mask, hidden)
              prob = model.generator(pre_output[:, -1])
              top_hiddens = [hidden]*beam_width #these will all be the same for first iteration

          attention_scores.append(model.decoder.attention.alphas.cpu().numpy())
          seq, score = sequences[i]
          scores, next_words = torch.topk(prob, k=beam_width, dim=1) #scores are the log(prob) values and next_words are the indices
          scores, next_words = scores.data[0], next_words.data[0]
          for j in range(len(next_words)):
            candidates = [seq + [next_words[j].cpu().item()], score + scores[j].item()]
            all_candidates.append(candidates) #sequences are length 3 at the end of this

          ordered = sorted(all_candidates, key=lambda tup:tup[1], reverse=True)
          sequences = ordered[:beam_width]

      else: #after first iteration, we have k words to use as prior distribution in order to decode next word
        hidden_states = []
        for k in range(len(sequences)):          
            with torch.no_grad():
                use_hidden = top_hiddens[k]
                prev_y = torch.ones(1, 1).type_as(src).fill_(next_words[k].item())
                out, hidden, pre_output = model.decode(encoder_hidden, encoder_final, src_mask,
                                                      prev_y, trg_mask, use_hidden)   
                prob = model.generator(pre_output[:, -1])
                hidden_states.append(hidden)

            attention_scores.append(model.decoder.attention.alphas.cpu().numpy())
            seq, score = sequences[k]
            new_scores, new_next_words = torch.topk(prob, k=beam_width, dim=1) #next words are the indices
            new_scores, new_next_words = new_scores.data[0], new_next_words.data[0] #index into double list
            for j in range(len(new_scores)):
                candidates = [seq + [new_next_words[j].cpu().item()], score + new_scores[j].item()]
                all_candidates.append(candidates)

        #prune ouputs to include top k probabilities
        ordered = sorted(all_candidates, key=lambda tup:tup[1], reverse=True)
        sequences = ordered[:beam_width]

        #create hidden states to use in next time step based off the word use to achieve the best next word (likelihood, which is the second
        # to last number in the sequences structure)
        top_hiddens = []
        for h in range(len(next_words)):
          idx = next_words.tolist().index(sequences[h][0][-2])
          top_hiddens.append(hidden_states[idx])

        #create next words to be used as prev_y in decoder 
        next_words = []
        for w in range(len(sequences)):
          next_words.append(sequences[w][0][-1])
        next_words = torch.Tensor(next_words)
    
    #at end of loop prune to the single best sequence found through beam search. This will be the first sequence since we have been ordering them
    output = np.array(sequences[0][0])
        
    # cut off everything starting from </s>
    # (only when eos_index provided)
    if eos_index is not None:
        first_eos = np.where(output==eos_index)[0]
        if len(first_eos) > 0:
            output = output[:first_eos[0]]      
    
    return output, np.concatenate(attention_scores, axis=1)


def target():
    torch.manual_seed(0)
    model = make_model(12, 12, emb_size=8, hidden_size=8, num_layers=1, dropout=0.1)
    model.eval()
    src1 = torch.randint(3, 12, (1, 6))
    src2 = torch.randint(3, 12, (1, 4))
    calls = []
    for src, eos in ((src1, None), (src2, 2)):
        src_mask = (src != 0).unsqueeze(-2)
        src_lengths = torch.tensor([src.size(1)])
        calls.append((beam_search_decode, (model, src, src_mask, src_lengths),
                      {"max_len": 4, "sos_index": 1, "eos_index": eos, "beam_width": 3}))
    return calls


EXPECT = ("none: the beam is Python data (lists of token ids and float scores, `sorted` by a lambda, "
          "`list.index` to find parents) fed by `.item()` reads after every `topk`, and the attention maps go to "
          "NumPy each step; only the per-step decoder call is graph-friendly, and batching the beam into tensors "
          "is a redesign rather than a fix")
