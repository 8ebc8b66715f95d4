"""A decoding step that deep-copies its generation config before updating it with kwargs (transformers generate)."""
import copy

import torch


class GenerationConfig:
    def __init__(self, temperature=1.0, top_k=0, repetition_penalty=1.0):
        self.temperature = temperature
        self.top_k = top_k
        self.repetition_penalty = repetition_penalty

    def update(self, **kwargs):
        to_remove = []
        for key, value in kwargs.items():
            if hasattr(self, key):
                setattr(self, key, value)
                to_remove.append(key)
        return {k: v for k, v in kwargs.items() if k not in to_remove}


class Decoder(torch.nn.Module):
    def __init__(self, vocab=12, d=8):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.lm_head = torch.nn.Linear(d, vocab)
        self.generation_config = GenerationConfig()

    def forward(self, input_ids, generation_config=None, **kwargs):
        generation_config = generation_config or self.generation_config
        generation_config = copy.deepcopy(generation_config)  # NO BREAK in torch 2.13
        model_kwargs = generation_config.update(**kwargs)
        logits = self.lm_head(self.embed(input_ids))[:, -1, :]
        score = torch.gather(logits, 1, input_ids)
        score = torch.where(score < 0, score * generation_config.repetition_penalty,
                            score / generation_config.repetition_penalty)
        logits = logits.scatter(1, input_ids, score) / generation_config.temperature
        return logits + model_kwargs.get("bias", 0.0)


def target():
    torch.manual_seed(0)
    return [(Decoder(), (torch.tensor([[1, 5, 3], [2, 2, 7]]),), {"temperature": 0.7, "repetition_penalty": 1.3})]


EXPECT = ("none: copy.deepcopy of a plain Python config object is expected to trace in torch 2.13 (control); if it "
          "breaks, the right fix is copy.copy / a fresh config built from its fields (rewrite)")
