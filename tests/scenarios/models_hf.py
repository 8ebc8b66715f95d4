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
