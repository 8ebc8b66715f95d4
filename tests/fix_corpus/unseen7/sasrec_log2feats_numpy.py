"""SASRec's forward takes the batch as NumPy arrays: `log2feats` builds
`self.item_emb(torch.LongTensor(log_seqs).to(self.dev))`, the positions with
`np.tile(np.array(range(log_seqs.shape[1])), [log_seqs.shape[0], 1])` wrapped by `torch.LongTensor`, the padding mask
with `torch.BoolTensor(log_seqs == 0)`, then runs causal `torch.nn.MultiheadAttention` blocks with point-wise
Conv1d feed-forward layers; `predict` scores `torch.LongTensor(item_indices)` candidates against the last position
(pmixer/SASRec.pytorch model.py: PointWiseFeedForward, SASRec.__init__/log2feats/forward/predict; the evaluation in
utils.py passes `np.array` batches). Sizes are shrunk (hidden 8, 2 blocks, 1 head, maxlen 6, 20 items, 8 candidates);
`args` is a namespace. Eval mode (dropout off). The call is `predict`, the evaluation path."""
from types import SimpleNamespace

import numpy as np
import torch


class PointWiseFeedForward(torch.nn.Module):
    def __init__(self, hidden_units, dropout_rate):

        super(PointWiseFeedForward, self).__init__()

        self.conv1 = torch.nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.dropout1 = torch.nn.Dropout(p=dropout_rate)
        self.conv2 = torch.nn.Conv1d(hidden_units, hidden_units, kernel_size=1)
        self.dropout2 = torch.nn.Dropout(p=dropout_rate)

    def forward(self, inputs):
        outputs = self.dropout2(self.conv2(self.dropout1(self.conv1(inputs.transpose(-1, -2)))))
        outputs = outputs.transpose(-1, -2) # as Conv1D requires (N, C, Length)
        outputs += inputs
        return outputs


class SASRec(torch.nn.Module):
    def __init__(self, user_num, item_num, args):
        super(SASRec, self).__init__()

        self.user_num = user_num
        self.item_num = item_num
        self.dev = args.device

        self.item_emb = torch.nn.Embedding(self.item_num+1, args.hidden_units, padding_idx=0)
        self.pos_emb = torch.nn.Embedding(args.maxlen, args.hidden_units) # TO IMPROVE
        self.emb_dropout = torch.nn.Dropout(p=args.dropout_rate)

        self.attention_layernorms = torch.nn.ModuleList() # to be Q for self-attention
        self.attention_layers = torch.nn.ModuleList()
        self.forward_layernorms = torch.nn.ModuleList()
        self.forward_layers = torch.nn.ModuleList()

        self.last_layernorm = torch.nn.LayerNorm(args.hidden_units, eps=1e-8)

        for _ in range(args.num_blocks):
            new_attn_layernorm = torch.nn.LayerNorm(args.hidden_units, eps=1e-8)
            self.attention_layernorms.append(new_attn_layernorm)

            new_attn_layer =  torch.nn.MultiheadAttention(args.hidden_units,
                                                            args.num_heads,
                                                            args.dropout_rate)
            self.attention_layers.append(new_attn_layer)

            new_fwd_layernorm = torch.nn.LayerNorm(args.hidden_units, eps=1e-8)
            self.forward_layernorms.append(new_fwd_layernorm)

            new_fwd_layer = PointWiseFeedForward(args.hidden_units, args.dropout_rate)
            self.forward_layers.append(new_fwd_layer)

    def log2feats(self, log_seqs):
        seqs = self.item_emb(torch.LongTensor(log_seqs).to(self.dev))  # NO BREAK in torch 2.13
        seqs *= self.item_emb.embedding_dim ** 0.5
        positions = np.tile(np.array(range(log_seqs.shape[1])), [log_seqs.shape[0], 1])
        seqs += self.pos_emb(torch.LongTensor(positions).to(self.dev))
        seqs = self.emb_dropout(seqs)

        timeline_mask = torch.BoolTensor(log_seqs == 0).to(self.dev)
        seqs *= ~timeline_mask.unsqueeze(-1) # broadcast in last dim

        tl = seqs.shape[1] # time dim len for enforce causality
        attention_mask = ~torch.tril(torch.ones((tl, tl), dtype=torch.bool, device=self.dev))

        for i in range(len(self.attention_layers)):
            seqs = torch.transpose(seqs, 0, 1)
            Q = self.attention_layernorms[i](seqs)
            mha_outputs, _ = self.attention_layers[i](Q, seqs, seqs,
                                            attn_mask=attention_mask)
            seqs = Q + mha_outputs
            seqs = torch.transpose(seqs, 0, 1)

            seqs = self.forward_layernorms[i](seqs)
            seqs = self.forward_layers[i](seqs)
            seqs *=  ~timeline_mask.unsqueeze(-1)

        log_feats = self.last_layernorm(seqs) # (U, T, C) -> (U, -1, C)

        return log_feats

    def forward(self, user_ids, log_seqs, pos_seqs, neg_seqs): # for training
        log_feats = self.log2feats(log_seqs) # user_ids hasn't been used yet

        pos_embs = self.item_emb(torch.LongTensor(pos_seqs).to(self.dev))
        neg_embs = self.item_emb(torch.LongTensor(neg_seqs).to(self.dev))

        pos_logits = (log_feats * pos_embs).sum(dim=-1)
        neg_logits = (log_feats * neg_embs).sum(dim=-1)

        return pos_logits, neg_logits # pos_pred, neg_pred

    def predict(self, user_ids, log_seqs, item_indices): # for inference
        log_feats = self.log2feats(log_seqs) # user_ids hasn't been used yet

        final_feat = log_feats[:, -1, :] # only use last QKV classifier, a waste

        item_embs = self.item_emb(torch.LongTensor(item_indices).to(self.dev)) # (U, I, C)

        logits = item_embs.matmul(final_feat.unsqueeze(-1)).squeeze(-1)

        return logits # preds # (U, I)


def _batch(rng, users, maxlen, item_num, n_cand):
    log_seqs = rng.randint(1, item_num + 1, size=(users, maxlen))
    log_seqs[0, :2] = 0                                   # a short history, left-padded
    item_indices = rng.randint(1, item_num + 1, size=(users, n_cand))
    return np.arange(users), log_seqs, item_indices


def target():
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    args = SimpleNamespace(device='cpu', hidden_units=8, maxlen=6, dropout_rate=0.2, num_blocks=2, num_heads=1)
    model = SASRec(user_num=3, item_num=20, args=args)
    model.eval()
    u1, seq1, cand1 = _batch(rng, 3, 6, 20, 8)
    u2, seq2, cand2 = _batch(rng, 3, 6, 20, 8)
    return [
        (model.predict, (u1, seq1, cand1), {}),
        (model.predict, (u2, seq2, cand2), {}),
    ]


EXPECT = ("rewrite: build the index tensors with `torch.as_tensor(log_seqs, dtype=torch.long, device=self.dev)` "
          "(once, the mask as `log_seqs == 0` on that tensor) and the positions with `torch.arange(T).expand(B, T)` "
          "instead of the legacy `torch.LongTensor(...)`/`torch.BoolTensor(...)` constructors on NumPy arrays and "
          "`np.tile`; or convert the NumPy batch in the caller")
