"""warn_if_padding_and_no_attention_mask: `pad_token_id in input_ids[:, [-1, 0]]` (Tensor.__contains__) then `logger.warning_once` (transformers modeling_utils, before its tracing guard)."""
import functools
import logging

import torch

logger = logging.getLogger(__name__)


@functools.lru_cache(None)
def warning_once(self, *args, **kwargs):
    """Same as `logger.warning()`, but emits a given message only once (transformers utils/logging.py)."""
    self.warning(*args, **kwargs)


logging.Logger.warning_once = warning_once


class BertConfig:
    vocab_size = 30
    hidden_size = 16
    max_position_embeddings = 16
    pad_token_id = 0
    bos_token_id = None
    eos_token_id = None
    sep_token_id = None
    layer_norm_eps = 1e-12


class TinyBertModel(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.word_embeddings = torch.nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = torch.nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.LayerNorm = torch.nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dense = torch.nn.Linear(config.hidden_size, config.hidden_size)

    def warn_if_padding_and_no_attention_mask(self, input_ids, attention_mask):
        """
        Shows a one-time warning if the input_ids appear to contain padding and no attention mask was given.
        """
        if (attention_mask is not None) or (self.config.pad_token_id is None):
            return

        # Check only the first and last input IDs to reduce overhead.
        if self.config.pad_token_id in input_ids[:, [-1, 0]]:  # BREAK
            warn_string = (
                "We strongly recommend passing in an `attention_mask` since your input_ids may be padded. See "
                "https://huggingface.co/docs/transformers/troubleshooting"
                "#incorrect-output-when-padding-tokens-arent-masked."
            )

            # If the pad token is equal to either BOS, EOS, or SEP, we do not know whether the user should use an
            # attention_mask or not. In this case, we should still show a warning because this is a rare case.
            if (
                (self.config.bos_token_id is not None and self.config.bos_token_id == self.config.pad_token_id)
                or (self.config.eos_token_id is not None and self.config.eos_token_id == self.config.pad_token_id)
                or (self.config.sep_token_id is not None and self.config.sep_token_id == self.config.pad_token_id)
            ):
                warn_string += (
                    f"\nYou may ignore this warning if your `pad_token_id` ({self.config.pad_token_id}) is identical "
                    f"to the `bos_token_id` ({self.config.bos_token_id}), `eos_token_id` ({self.config.eos_token_id}), "
                    f"or the `sep_token_id` ({self.config.sep_token_id}), and your input is not padded."
                )

            logger.warning_once(warn_string)

    def forward(self, input_ids=None, attention_mask=None):
        if input_ids is not None:
            self.warn_if_padding_and_no_attention_mask(input_ids, attention_mask)
            input_shape = input_ids.size()
        else:
            raise ValueError("You have to specify input_ids")

        batch_size, seq_length = input_shape
        if attention_mask is None:
            attention_mask = torch.ones((batch_size, seq_length), device=input_ids.device)

        position_ids = torch.arange(seq_length, device=input_ids.device).unsqueeze(0)
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        hidden = torch.tanh(self.dense(self.LayerNorm(embeddings)))
        return hidden * attention_mask.unsqueeze(-1)


def target():
    torch.manual_seed(0)
    model = TinyBertModel(BertConfig())
    padded = torch.randint(1, 30, (2, 6))
    padded[1, 4:] = 0
    unpadded = torch.randint(1, 30, (2, 6))
    return [(model, (padded,), {}), (model, (unpadded,), {})]


EXPECT = ("rewrite: the method only warns and never changes the outputs; return early under "
          "`torch.compiler.is_compiling()` (what transformers later did with `is_torchdynamo_compiling()`), so "
          "neither the `in` test on the tensor nor `logger.warning_once` is traced; a hatch "
          "(torch.compiler.disable on the method) also keeps outputs equal but leaves a break at its call")
