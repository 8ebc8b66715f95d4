"""Beam search of attention-is-all-you-need-pytorch's Translator: each decoding step takes
`b.get_current_state()` (which rebuilds the hypotheses by walking the back-pointers and converts them with
`torch.from_numpy(np.array(hyps))`), runs the decoder, and calls `Beam.advance(word_lk)`: `topk` over the flattened
beam x vocabulary scores, back-pointers `prev_k = best_scores_id // num_words` appended to Python lists on the Beam
object, and the end test `if self.next_ys[-1][0] == Constants.EOS: self._done = True`; the loop stops when the beam
is done, then `sort_scores` and `get_hypothesis` give the n-best (jadore801120/attention-is-all-you-need-pytorch
transformer/Beam.py: Beam; transformer/Translator.py: Translator.translate_batch; transformer/Constants.py). The
Transformer is replaced by a tiny stand-in encoder/decoder (embeddings, mean pooling, a linear projection and
LogSoftmax) and the batch is one sentence, so `translate_batch`'s compaction of finished instances is not needed.
`prev_k = best_scores_id / num_words` is written with `//` as in the repository's later revision (true division
gives float back-pointers under current torch). The hypotheses are returned as stacked tensors."""
import numpy as np
import torch
import torch.nn as nn

PAD = 0
UNK = 1
BOS = 2
EOS = 3


class Constants:
    PAD = PAD
    UNK = UNK
    BOS = BOS
    EOS = EOS


class Beam():
    ''' Store the necessary info for beam search. '''

    def __init__(self, size, device=False):

        self.size = size
        self._done = False

        # The score for each translation on the beam.
        self.scores = torch.zeros((size,), dtype=torch.float, device=device)
        self.all_scores = []

        # The backpointers at each time-step.
        self.prev_ks = []

        # The outputs at each time-step.
        self.next_ys = [torch.full((size,), Constants.PAD, dtype=torch.long, device=device)]
        self.next_ys[0][0] = Constants.BOS

    def get_current_state(self):
        "Get the outputs for the current timestep."
        return self.get_tentative_hypothesis()

    def get_current_origin(self):
        "Get the backpointers for the current timestep."
        return self.prev_ks[-1]

    @property
    def done(self):
        return self._done

    def advance(self, word_lk):
        "Update beam status and check if finished or not."
        num_words = word_lk.size(1)

        # Sum the previous scores.
        if len(self.prev_ks) > 0:
            beam_lk = word_lk + self.scores.unsqueeze(1).expand_as(word_lk)
        else:
            beam_lk = word_lk[0]

        flat_beam_lk = beam_lk.view(-1)

        best_scores, best_scores_id = flat_beam_lk.topk(self.size, 0, True, True) # 1st sort
        best_scores, best_scores_id = flat_beam_lk.topk(self.size, 0, True, True) # 2nd sort

        self.all_scores.append(self.scores)
        self.scores = best_scores

        # bestScoresId is flattened beam x word array, so calculate which
        # word and beam each score came from
        prev_k = best_scores_id // num_words
        self.prev_ks.append(prev_k)
        self.next_ys.append(best_scores_id - prev_k * num_words)

        # End condition is when top-of-beam is EOS.
        if self.next_ys[-1][0] == Constants.EOS:  # BREAK
            self._done = True
            self.all_scores.append(self.scores)

        return self._done

    def sort_scores(self):
        "Sort the scores."
        return torch.sort(self.scores, 0, True)

    def get_the_best_score_and_idx(self):
        "Get the score of the best in the beam."
        scores, ids = self.sort_scores()
        return scores[1], ids[1]

    def get_tentative_hypothesis(self):
        "Get the decoded sequence for the current timestep."

        if len(self.next_ys) == 1:
            dec_seq = self.next_ys[0].unsqueeze(1)
        else:
            _, keys = self.sort_scores()
            hyps = [self.get_hypothesis(k) for k in keys]
            hyps = [[Constants.BOS] + h for h in hyps]
            dec_seq = torch.from_numpy(np.array(hyps))  # BREAK

        return dec_seq

    def get_hypothesis(self, k):
        """
        Walk back to construct the full hypothesis.
        """
        hyp = []
        for j in range(len(self.prev_ks) - 1, -1, -1):
            hyp.append(self.next_ys[j+1][k])  # BREAK
            k = self.prev_ks[j][k]

        return hyp[::-1]


class TinySeq2Seq(nn.Module):
    """Stand-in for transformer.Models.Transformer: encoder, decoder, tgt_word_proj, prob_projection."""

    def __init__(self, src_vocab, tgt_vocab, d_model):
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(tgt_vocab, d_model, padding_idx=PAD)
        self.mix = nn.Linear(2 * d_model, d_model)
        self.tgt_word_proj = nn.Linear(d_model, tgt_vocab, bias=False)
        self.prob_projection = nn.LogSoftmax(dim=-1)

    def encoder(self, src_seq):
        return self.src_emb(src_seq).mean(1)

    def decoder(self, dec_seq, enc_output):
        h = self.tgt_emb(dec_seq)
        last = h[:, -1]
        ctx = h.mean(1) + enc_output.expand(dec_seq.size(0), -1)
        return torch.tanh(self.mix(torch.cat([last, ctx], -1)))


def translate_sentence(model, src_seq, beam_size=3, max_token_seq_len=8, n_best=2):
    ''' Translation of one sentence (translate_batch with batch_size 1) '''
    enc_output = model.encoder(src_seq)
    beam = Beam(beam_size, device=src_seq.device)

    for i in range(max_token_seq_len):
        dec_partial_seq = beam.get_current_state()
        dec_output = model.decoder(dec_partial_seq, enc_output)
        dec_output = model.tgt_word_proj(dec_output)
        word_lk = model.prob_projection(dec_output)
        if beam.advance(word_lk):
            # the instance has finished its path to <EOS>
            break

    scores, tail_idxs = beam.sort_scores()
    hyps = [beam.get_hypothesis(i) for i in tail_idxs[:n_best]]
    return scores[:n_best], [torch.stack(h) for h in hyps]  # BREAK


def target():
    torch.manual_seed(0)
    model = TinySeq2Seq(src_vocab=12, tgt_vocab=9, d_model=8)
    with torch.no_grad():
        model.tgt_word_proj.weight[EOS] += 0.3
    model.eval()
    src1 = torch.tensor([[4, 7, 5, 9, 3]])
    src2 = torch.tensor([[6, 11, 8, 3, 0]])
    return [
        (translate_sentence, (model, src1), {}),
        (translate_sentence, (model, src2), {}),
    ]


EXPECT = ("caller: compile only the model step (decoder, projection, LogSoftmax on the current hypotheses) and keep "
          "the beam bookkeeping in the eager loop that calls it: `Beam.advance`'s Python lists of back-pointers and "
          "its `if self.next_ys[-1][0] == EOS` end test, the NumPy rebuild in `get_tentative_hypothesis`, the early "
          "`break` and the n-best walk-back")
