"""T5 `_shift_right`: `assert torch.all(shifted_input_ids >= 0).item(), "..."` when the decoder inputs are made
from the labels inside the training forward.

Origin: huggingface/transformers `src/transformers/models/t5/modeling_t5.py` (v4.x,
`T5PreTrainedModel._shift_right`, called from `T5ForConditionalGeneration.forward` when `labels` are given and
`decoder_input_ids` are not); the same lines are in ProphetNet / XLM-ProphetNet and many T5 fine-tuning repositories.
The encoder and decoder stacks are shrunk to one embedding + attention layer each; `_shift_right`, the forward's
branch structure, the `tie_word_embeddings` rescale and the loss keep the original's lines.
"""
import torch
from torch import nn
from torch.nn import CrossEntropyLoss


class T5Config:
    def __init__(self, vocab_size=40, d_model=16, decoder_start_token_id=0, pad_token_id=0,
                 tie_word_embeddings=True):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.decoder_start_token_id = decoder_start_token_id
        self.pad_token_id = pad_token_id
        self.tie_word_embeddings = tie_word_embeddings


def is_torch_fx_proxy(x):
    return isinstance(x, torch.fx.Proxy)


class TinyStack(nn.Module):
    """One self-attention (+ cross-attention for the decoder) layer standing in for `T5Stack`."""

    def __init__(self, config, embed_tokens, is_decoder=False):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.is_decoder = is_decoder
        d = config.d_model
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.ff = nn.Sequential(nn.Linear(d, 2 * d, bias=False), nn.ReLU(), nn.Linear(2 * d, d, bias=False))

    def attend(self, x, mem, causal):
        scores = self.q(x) @ self.k(mem).transpose(-1, -2)
        if causal:
            n = x.shape[1]
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return self.o(scores.softmax(-1) @ self.v(mem))

    def forward(self, input_ids, encoder_hidden_states=None):
        h = self.embed_tokens(input_ids)
        h = h + self.attend(h, h, causal=self.is_decoder)
        if encoder_hidden_states is not None:
            h = h + self.attend(h, encoder_hidden_states, causal=False)
        return h + self.ff(h)


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model_dim = config.d_model
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = TinyStack(config, self.shared)
        self.decoder = TinyStack(config, self.shared, is_decoder=True)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def _shift_right(self, input_ids):
        decoder_start_token_id = self.config.decoder_start_token_id
        pad_token_id = self.config.pad_token_id

        assert decoder_start_token_id is not None, (
            "self.model.config.decoder_start_token_id has to be defined. In T5 it is usually set to the pad_token_id."
            " See T5 docs for more information"
        )

        # shift inputs to the right
        if is_torch_fx_proxy(input_ids):
            # Item assignment is not supported natively for proxies.
            shifted_input_ids = torch.full(input_ids.shape[:-1] + (1,), decoder_start_token_id)
            shifted_input_ids = torch.cat([shifted_input_ids, input_ids[..., :-1]], dim=-1)
        else:
            shifted_input_ids = input_ids.new_zeros(input_ids.shape)
            shifted_input_ids[..., 1:] = input_ids[..., :-1].clone()
            shifted_input_ids[..., 0] = decoder_start_token_id

        assert pad_token_id is not None, "self.model.config.pad_token_id has to be defined."
        # replace possible -100 values in labels by `pad_token_id`
        shifted_input_ids.masked_fill_(shifted_input_ids == -100, pad_token_id)

        assert torch.all(shifted_input_ids >= 0).item(), "Verify that `shifted_input_ids` has only positive values"  # BREAK

        return shifted_input_ids

    def forward(self, input_ids=None, decoder_input_ids=None, labels=None, decoder_inputs_embeds=None):
        # Encode
        encoder_outputs = self.encoder(input_ids)
        hidden_states = encoder_outputs

        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            # get decoder inputs from shifting lm labels to the right
            decoder_input_ids = self._shift_right(labels)

        # Decode
        decoder_outputs = self.decoder(decoder_input_ids, encoder_hidden_states=hidden_states)
        sequence_output = decoder_outputs

        if self.config.tie_word_embeddings:
            # Rescale output before projecting on vocab
            # See https://github.com/tensorflow/mesh/blob/fa19d69eafc9a482aff0b59ddd96b025c0cb207d/mesh_tensorflow/transformer/transformer.py#L586
            sequence_output = sequence_output * (self.model_dim**-0.5)

        lm_logits = self.lm_head(sequence_output)

        loss = None
        if labels is not None:
            loss_fct = CrossEntropyLoss(ignore_index=-100)
            loss = loss_fct(lm_logits.view(-1, lm_logits.size(-1)), labels.view(-1))

        return loss, lm_logits


def target():
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config())
    src1, src2 = torch.randint(1, 40, (2, 7)), torch.randint(1, 40, (2, 7))
    lab1 = torch.tensor([[5, 9, 13, 1, -100, -100], [7, 3, 22, 31, 8, 1]])
    lab2 = torch.tensor([[4, 4, 18, 26, 11, 1], [12, 30, 1, -100, -100, -100]])
    return [
        (model, (), {"input_ids": src1, "labels": lab1}),
        (model, (), {"input_ids": src2, "labels": lab2}),
    ]


EXPECT = ("rewrite: drop the `.item()` in the assert (`assert torch.all(shifted_input_ids >= 0)`, or "
          "`torch._assert_async`), so the check stays a tensor op and the labels-to-decoder-inputs shift traces")
