"""DataCollatorForLanguageModeling.torch_mask_tokens: `labels.tolist()` fed row by row to the tokenizer's
`get_special_tokens_mask` (a Python list comprehension building the no-mask mask), then
`inputs[indices_random] = random_words[indices_random]` (boolean-mask read of the random words).

Origin: huggingface/transformers `src/transformers/data/data_collator.py`
(`DataCollatorForLanguageModeling.torch_mask_tokens`); the tokenizer stand-in's `get_special_tokens_mask` is the
`already_has_special_tokens=True` path of `src/transformers/tokenization_utils_base.py`
(`PreTrainedTokenizerBase.get_special_tokens_mask`). The whole-word-mask branches (which need offset mappings and
NumPy helpers) are left out; everything else keeps the original's lines.
"""
from dataclasses import dataclass
from typing import Any

import torch


class TinyWordPieceTokenizer:
    """Stand-in for a BERT fast tokenizer: only the members `torch_mask_tokens` touches."""

    def __init__(self):
        special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        words = [f"w{i}" for i in range(27)]
        self.vocab = {tok: i for i, tok in enumerate(special + words)}
        self.mask_token = "[MASK]"
        self.all_special_ids = [self.vocab[t] for t in special]

    def __len__(self):
        return len(self.vocab)

    def convert_tokens_to_ids(self, token):
        return self.vocab[token]

    def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, already_has_special_tokens=False):
        if already_has_special_tokens:
            if token_ids_1 is not None:
                raise ValueError(
                    "You should not supply a second sequence if the provided sequence of ids is already formatted "
                    "with special tokens for the model."
                )
            special_ids = set(self.all_special_ids)
            return [1 if int(tid) in special_ids else 0 for tid in token_ids_0]
        raise NotImplementedError(
            f"{self.__class__.__name__} does not implement get_special_tokens_mask for non-formatted sequences"
        )


@dataclass
class DataCollatorForLanguageModeling:
    tokenizer: Any
    mlm: bool = True
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    generator: Any = None

    def torch_mask_tokens(self, inputs, special_tokens_mask=None):
        """
        Prepare masked tokens inputs/labels for masked language modeling.
        """
        labels = inputs.clone()
        # We sample a few tokens in each sequence for MLM training (with probability `self.mlm_probability`)
        probability_matrix = torch.full(labels.shape, self.mlm_probability)
        if special_tokens_mask is None:
            special_tokens_mask = [
                self.tokenizer.get_special_tokens_mask(val, already_has_special_tokens=True) for val in labels.tolist()  # BREAK
            ]

        no_mask_mask = (
            special_tokens_mask.bool()
            if isinstance(special_tokens_mask, torch.Tensor)
            else torch.tensor(special_tokens_mask, dtype=torch.bool)
        )

        probability_matrix.masked_fill_(no_mask_mask, value=0.0)
        masked_indices = torch.bernoulli(probability_matrix, generator=self.generator).bool()

        labels[~masked_indices] = -100  # We only compute loss on masked tokens

        # mask_replace_prob% of the time, we replace masked input tokens with tokenizer.mask_token ([MASK])
        indices_replaced = (
            torch.bernoulli(torch.full(labels.shape, self.mask_replace_prob), generator=self.generator).bool()
            & masked_indices
        )
        inputs[indices_replaced] = self.tokenizer.convert_tokens_to_ids(self.tokenizer.mask_token)

        if self.mask_replace_prob == 1 or self.random_replace_prob == 0:
            return inputs, labels

        remaining_prob = 1 - self.mask_replace_prob
        # scaling the random_replace_prob to the remaining probability for example if
        # mask_replace_prob = 0.8 and random_replace_prob = 0.1,
        # then random_replace_prob_scaled = 0.1 / 0.2 = 0.5
        random_replace_prob_scaled = self.random_replace_prob / remaining_prob

        # random_replace_prob% of the time, we replace masked input tokens with random word
        indices_random = (
            torch.bernoulli(torch.full(labels.shape, random_replace_prob_scaled), generator=self.generator).bool()
            & masked_indices
            & ~indices_replaced
        )
        random_words = torch.randint(len(self.tokenizer), labels.shape, dtype=torch.long, generator=self.generator)
        inputs[indices_random] = random_words[indices_random]  # BREAK

        # The rest of the time ((1-random_replace_prob-mask_replace_prob)% of the time) we keep the masked input tokens unchanged
        return inputs, labels


def _batch(n_words):
    # [CLS] w ... w [SEP] [PAD] ...: 4 sequences of length 12, right-padded
    rows = []
    for length in n_words:
        ids = torch.randint(5, 32, (length,)).tolist()
        row = [2] + ids + [3]
        rows.append(row + [0] * (12 - len(row)))
    return torch.tensor(rows)


def target():
    torch.manual_seed(0)
    collator = DataCollatorForLanguageModeling(tokenizer=TinyWordPieceTokenizer(), mlm_probability=0.3)
    b1 = _batch([10, 7, 9, 5])
    b2 = _batch([6, 10, 8, 10])
    return [
        (collator.torch_mask_tokens, (b1,), {}),
        (collator.torch_mask_tokens, (b2,), {}),
    ]


EXPECT = ("rewrite: build the special-tokens mask on tensors (`torch.isin(labels, torch.tensor(all_special_ids))`) "
          "instead of `labels.tolist()` + the tokenizer's Python loop, and write the random words with "
          "`torch.where(indices_random, random_words, inputs)` instead of the boolean-mask read")
