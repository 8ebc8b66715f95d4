"""The ``diffusers`` registry: the main denoisers and autoencoders, from small configs, with
synthesized latents, timesteps and encoder states.

Each recipe is ``(constructor kwargs, inputs(torch, gen) -> dict)``. Batch 2 (Dynamo
specializes on 0 and 1), latents 8x8 to 32x32, 1 or 2 layers, channel counts of 32/64 and
GroupNorm groups that divide them. Timesteps are a float tensor of shape (batch,).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import CreateError

B = 2


def _t(torch, gen):
    return torch.tensor([10.0, 500.0])


def _randn(torch, gen, *shape):
    return torch.randn(*shape, generator=gen)


_UNET_BLOCKS = dict(block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8)

RECIPES: dict[str, tuple[dict[str, Any], Callable]] = {
    "UNet2DModel": (
        dict(sample_size=16, in_channels=3, out_channels=3, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
             up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=8, **_UNET_BLOCKS),
        lambda torch, g: {"sample": _randn(torch, g, B, 3, 16, 16), "timestep": _t(torch, g)}),
    "UNet2DConditionModel": (
        dict(sample_size=16, in_channels=4, out_channels=4, cross_attention_dim=32, attention_head_dim=8,
             down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
             up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), **_UNET_BLOCKS),
        lambda torch, g: {"sample": _randn(torch, g, B, 4, 16, 16), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32)}),
    "UNet3DConditionModel": (
        dict(sample_size=8, in_channels=4, out_channels=4, cross_attention_dim=32, attention_head_dim=8,
             block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8,
             down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
             up_block_types=("UpBlock3D", "CrossAttnUpBlock3D")),
        lambda torch, g: {"sample": _randn(torch, g, B, 4, 2, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32)}),
    "ControlNetModel": (
        dict(in_channels=4, cross_attention_dim=32, attention_head_dim=8, conditioning_embedding_out_channels=(16, 32),
             down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), **_UNET_BLOCKS),
        lambda torch, g: {"sample": _randn(torch, g, B, 4, 16, 16), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32),
                          "controlnet_cond": _randn(torch, g, B, 3, 32, 32)}),
    "AutoencoderKL": (
        dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(32, 64), layers_per_block=1,
             norm_num_groups=8, down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2),
        lambda torch, g: {"sample": _randn(torch, g, B, 3, 32, 32)}),
    "AutoencoderTiny": (
        dict(in_channels=3, out_channels=3, latent_channels=4, encoder_block_out_channels=(16, 16),
             decoder_block_out_channels=(16, 16), num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1)),
        lambda torch, g: {"sample": _randn(torch, g, B, 3, 32, 32)}),
    "VQModel": (
        dict(in_channels=3, out_channels=3, latent_channels=3, block_out_channels=(32, 64), layers_per_block=1,
             norm_num_groups=8, num_vq_embeddings=64, down_block_types=("DownEncoderBlock2D",) * 2,
             up_block_types=("UpDecoderBlock2D",) * 2),
        lambda torch, g: {"sample": _randn(torch, g, B, 3, 32, 32)}),
    "DiTTransformer2DModel": (
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, num_layers=2,
             sample_size=8, patch_size=2, num_embeds_ada_norm=10, norm_num_groups=8),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 4, 8, 8), "timestep": _t(torch, g),
                          "class_labels": torch.tensor([1, 3])}),
    "PixArtTransformer2DModel": (
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=2,
             sample_size=8, patch_size=2, cross_attention_dim=16, caption_channels=32, norm_num_groups=8),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 4, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32),
                          "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}),
    "SD3Transformer2DModel": (
        dict(sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8, num_attention_heads=2,
             joint_attention_dim=32, caption_projection_dim=16, pooled_projection_dim=32, out_channels=4,
             pos_embed_max_size=16),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 4, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32),
                          "pooled_projections": _randn(torch, g, B, 32)}),
    "FluxTransformer2DModel": (
        dict(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
             num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32, axes_dims_rope=(4, 4, 8)),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 16, 16), "timestep": _t(torch, g) / 1000,
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32),
                          "pooled_projections": _randn(torch, g, B, 32),
                          "img_ids": _grid_ids(torch, 4, 4), "txt_ids": torch.zeros(8, 3)}),
    "SanaTransformer2DModel": (
        dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=8, num_layers=2,
             num_cross_attention_heads=2, cross_attention_head_dim=8, cross_attention_dim=16, caption_channels=32,
             sample_size=8, patch_size=1),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 4, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32)}),
    "WanTransformer3DModel": (
        dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4,
             text_dim=32, freq_dim=32, ffn_dim=32, num_layers=2, rope_max_seq_len=32),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 4, 2, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32)}),
    "CogVideoXTransformer3DModel": (
        dict(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, time_embed_dim=8,
             text_embed_dim=16, num_layers=1, sample_width=8, sample_height=8, sample_frames=8, patch_size=2,
             temporal_compression_ratio=4, max_text_seq_length=8),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 2, 4, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 16)}),
    "AuraFlowTransformer2DModel": (
        dict(sample_size=8, patch_size=2, in_channels=4, num_mmdit_layers=1, num_single_dit_layers=1,
             attention_head_dim=8, num_attention_heads=2, joint_attention_dim=32, caption_projection_dim=16,
             out_channels=4, pos_embed_max_size=64),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 4, 8, 8), "timestep": _t(torch, g),
                          "encoder_hidden_states": _randn(torch, g, B, 8, 32)}),
    "PriorTransformer": (
        dict(num_attention_heads=2, attention_head_dim=4, num_layers=2, embedding_dim=8, num_embeddings=7,
             additional_embeddings=4),
        lambda torch, g: {"hidden_states": _randn(torch, g, B, 8), "timestep": _t(torch, g),
                          "proj_embedding": _randn(torch, g, B, 8),
                          "encoder_hidden_states": _randn(torch, g, B, 7, 8),
                          "attention_mask": torch.ones(B, 7, dtype=torch.bool)}),
}


def _grid_ids(torch, h: int, w: int):
    ids = torch.zeros(h, w, 3)
    ids[..., 1] = torch.arange(h)[:, None]
    ids[..., 2] = torch.arange(w)[None, :]
    return ids.reshape(h * w, 3)


def list_names() -> list[str]:
    return sorted(RECIPES)


def build(name: str, mode: str) -> list[tuple]:
    try:
        import diffusers
    except ImportError as e:
        raise CreateError("missing dependency", "diffusers (pip install 'graphstitch[zoo]')") from e
    import torch

    from . import seed_all

    kwargs, make_inputs = RECIPES[name]
    cls = getattr(diffusers, name, None)
    if cls is None:
        raise CreateError("class not in the installed diffusers", name)
    seed_all(0)
    try:
        model = cls(**kwargs)
    except Exception as e:
        raise CreateError("model cannot be built", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}") from e
    model.train(mode == "train")
    gen = torch.Generator().manual_seed(0)
    return [(model, (), make_inputs(torch, gen))]
