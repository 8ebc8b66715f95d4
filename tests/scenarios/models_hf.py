"""Real models from transformers, built from configs (nothing is downloaded)."""
import torch


def bert():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    model = BertModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def longformer():
    from transformers import LongformerConfig, LongformerModel
    torch.manual_seed(0)
    cfg = LongformerConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=128, attention_window=8)
    model = LongformerModel(cfg).eval()
    return model, (), {"input_ids": torch.randint(0, 100, (1, 16))}



class Captioner(torch.nn.Module):
    """A user's model around a transformers GPT-2 asked for its attentions: the break is in
    transformers' own output-capturing code, reached from this file."""

    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2Model
        self.gpt2 = GPT2Model(GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2))
        self.head = torch.nn.Linear(32, 4)

    def forward(self, ids):
        out = self.gpt2(ids, output_attentions=True)  # OWNER_GPT2
        return self.head(out.last_hidden_state)


def captioner():
    torch.manual_seed(0)
    return Captioner().eval(), (torch.randint(0, 100, (1, 16)),), {}
