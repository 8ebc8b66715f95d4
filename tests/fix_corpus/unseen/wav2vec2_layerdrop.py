"""Encoder with LayerDrop: `torch.rand([]) < layerdrop` decides whether to skip a layer (transformers Wav2Vec2Encoder)."""
import torch


class EncoderLayer(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, hidden_states):
        return (self.norm(hidden_states + self.ff(hidden_states)),)


class Encoder(torch.nn.Module):
    def __init__(self, d=8, layers=3, layerdrop=0.3):
        super().__init__()
        self.layers = torch.nn.ModuleList(EncoderLayer(d) for _ in range(layers))
        self.layerdrop = layerdrop

    def forward(self, hidden_states, output_hidden_states=False):
        all_hidden_states = () if output_hidden_states else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            # add LayerDrop (see https://arxiv.org/abs/1909.11556 for description)
            dropout_probability = torch.rand([])
            skip_the_layer = True if self.training and (dropout_probability < self.layerdrop) else False  # noqa: SIM210  # BREAK
            if not skip_the_layer:
                layer_outputs = layer(hidden_states)
                hidden_states = layer_outputs[0]
        return hidden_states


def target():
    torch.manual_seed(0)
    m = Encoder().train()
    return [(m, (torch.randn(2, 5, 8),), {})]


EXPECT = ("rewrite: keep the draw as a tensor and select with torch.where(dropout_probability < layerdrop, "
          "hidden_states, layer(hidden_states)) (same RNG consumption, both branches computed)")
