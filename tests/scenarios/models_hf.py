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


def hubert():
    """Breaks in transformers' own code (a logger.debug reached through is_fsdp_managed_module),
    called from the model file's encoder."""
    from transformers import HubertConfig, HubertModel
    torch.manual_seed(0)
    cfg = HubertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                       num_conv_pos_embedding_groups=2, do_stable_layer_norm=False)
    model = HubertModel(cfg).eval()
    return model, (torch.randn(1, 400),), {}
