"""The ``transformers`` registry: every model class of the auto mappings, built from its
config class (shrunk), with inputs synthesized from its ``forward`` signature.

Listing reads the auto mappings' source with :mod:`ast` (no torch, no transformers import,
well under a second); if that source ever stops being plain literals it falls back to
importing ``transformers.models.auto.modeling_auto``.

Building a model (``build(name, mode)``):

1. the config: ``AutoConfig.for_model(model_type)`` of the mapping entry, or a small recipe
   for the composite configs that need sub-configs at init (encoder-decoder wrappers, ...);
2. shrunk, trying levels from smallest to largest until one constructs and runs:
   ``tiny`` (2 layers, hidden 64 with 4 heads of 16, FFN 128, vocab 512, short positions,
   small images and audio, 4 experts), ``narrow`` (layers, experts, vocab and positions
   only: the widths are the config's own), ``shallow`` (layers and experts only). Every
   nested sub-config (``text_config``, ``vision_config``, ...) is shrunk the same way.
   Token ids that fall outside a shrunk vocabulary are moved to distinct ids at its top, the
   same old id to the same new id everywhere in the config tree. A level whose model would
   have more than ``MAX_PARAMS`` parameters (counted on the meta device) is skipped;
3. inputs from ``forward``'s signature and ``main_input_name``: ``input_ids`` (+
   ``attention_mask``) avoiding every special token id, ``pixel_values`` at the vision
   config's image size, ``input_values`` / ``input_features`` for audio,
   ``decoder_input_ids`` for encoder-decoders, and for image-text models exactly as many
   image tokens in ``input_ids`` as ``get_image_features`` yields. Where the layout is
   ambiguous there are several candidates;
4. a probe: one eager forward (no grad) per candidate and level, the first that runs is
   returned. When nothing runs but something constructed, the smallest constructed model is
   returned with its first inputs, so the caller's own eager run reports the real error
   (``eager_error``). When nothing constructs, :class:`CreateError`.

Mode ``train``: ``model.train()`` and ``labels`` where ``forward`` takes them (the input ids
for LM heads, decoder ids for seq2seq heads).
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import os
import re
from typing import Any

from ..files import parse_python
from . import CreateError

# The auto mappings whose classes are listed: every base model, every LM head, the
# seq2seq / speech / vision-text / multimodal generation heads, text-to-speech.
MAPPINGS = (
    "MODEL_MAPPING_NAMES",
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES",
    "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES",
)

MAX_PARAMS = 200_000_000  # a shrink level over this is skipped (800 MB of fp32 weights)
BATCH = 2  # not 0 or 1: Dynamo specializes on those
SEQ = 16
SHRINK_LEVELS = ("tiny", "narrow", "shallow")


# ----------------------------------------------------------------------------- listing


def _modeling_auto_path() -> str | None:
    spec = importlib.util.find_spec("transformers")  # top-level: finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "models", "auto", "modeling_auto.py")
    return path if os.path.exists(path) else None


def _read_mappings_ast(path: str) -> dict[str, dict[str, Any]]:
    """The ``*_MAPPING_NAMES = OrderedDict([...])`` literals of ``modeling_auto.py``; an
    element ``*list(OTHER.items())`` is expanded from a mapping read before it."""
    with open(path, encoding="utf-8") as f:
        tree = parse_python(f.read(), path)
    out: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_MAPPING_NAMES")):
            continue
        val = node.value
        if isinstance(val, ast.Call) and len(val.args) == 1:  # OrderedDict([...])
            val = val.args[0]
        if not isinstance(val, (ast.List, ast.Tuple)):
            continue
        items: dict[str, Any] = {}
        try:
            for elt in val.elts:
                if isinstance(elt, ast.Starred):
                    ref = elt.value  # list(OTHER.items())
                    while isinstance(ref, ast.Call) and ref.args:
                        ref = ref.args[0]
                    if isinstance(ref, ast.Call):
                        ref = ref.func
                    if isinstance(ref, ast.Attribute):
                        ref = ref.value
                    if not (isinstance(ref, ast.Name) and ref.id in out):
                        raise ValueError("unresolved reference")
                    items.update(out[ref.id])
                else:
                    k, v = ast.literal_eval(elt)
                    items[k] = v
        except ValueError:
            continue
        out[node.targets[0].id] = items
    return out


@functools.lru_cache(maxsize=1)
def catalog() -> dict[str, tuple[str, str]]:
    """class name -> (model_type, mapping name) for every listed class (first mapping wins)."""
    path = _modeling_auto_path()
    if path is None:
        raise CreateError("missing dependency", "transformers")
    maps = _read_mappings_ast(path)
    if any(m not in maps for m in MAPPINGS):
        import transformers.models.auto.modeling_auto as ma  # the slow, exact way

        maps = {m: dict(getattr(ma, m, {})) for m in MAPPINGS}
    out: dict[str, tuple[str, str]] = {}
    for mapping in MAPPINGS:
        for model_type, names in maps.get(mapping, {}).items():
            for name in names if isinstance(names, (tuple, list)) else (names,):
                out.setdefault(name, (model_type, mapping))
    return out


def list_names() -> list[str]:
    try:
        return sorted(catalog())
    except CreateError:
        return []


# ----------------------------------------------------------------------------- configs

_LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers",
               "decoder_layers", "num_encoder_layers", "num_decoder_layers", "depth", "layers",
               "num_blocks", "encoder_num_hidden_layers", "decoder_num_hidden_layers")
_PER_LAYER_LISTS = ("layer_types", "layers_block_type", "no_rope_layers", "attn_type_list",
                    "block_types", "layer_block_types", "sliding_window_pattern_list")
_HEAD_KEYS = ("num_attention_heads", "encoder_attention_heads", "decoder_attention_heads",
              "n_head", "n_heads", "num_heads", "attention_heads")
_KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
_HEAD_DIM_KEYS = ("head_dim", "d_kv", "attention_head_dim", "kv_channels")
_HIDDEN_KEYS = ("hidden_size", "d_model", "n_embd", "embed_dim", "emb_dim", "dim",
                "word_embed_proj_dim", "out_hidden_size", "text_hidden_size",
                "projector_hidden_size", "encoder_hidden_size", "decoder_hidden_size",
                "projection_dim", "embedding_size", "pooler_output_size")
_FFN_KEYS = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff",
             "n_inner", "moe_intermediate_size", "shared_expert_intermediate_size",
             "shared_intermediate_size", "mlp_dim", "ffn_hidden_size",
             "decoder_intermediate_size", "moe_shared_expert_intermediate_size")
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOPK_KEYS = ("num_experts_per_tok", "num_selected_experts", "top_k", "moe_topk",
              "num_experts_per_token", "moe_k")
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_target_positions",
                  "max_seq_len", "max_sequence_length")
_VOCAB_KEYS = ("vocab_size", "input_vocab_size", "output_vocab_size")

TINY = {"heads": 4, "head_dim": 16, "ffn": 128, "vocab": 512, "positions": 128,
        "source_positions": 32, "experts": 4, "layers": 2}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _sub_configs(cfg) -> list[tuple[str, Any]]:
    from transformers import PretrainedConfig

    out = []
    for k, v in list(vars(cfg).items()):
        if isinstance(v, PretrainedConfig):
            out.append((k, v))
    return out


def _set(cfg, key: str, value: Any) -> None:
    try:
        setattr(cfg, key, value)
    except Exception:  # noqa: BLE001 - some configs refuse an attribute (property, validator)
        pass


def _shrink_layers(cfg) -> None:
    n_new = TINY["layers"]
    orig = {}
    depths = vars(cfg).get("depths")
    for key in _LAYER_KEYS:
        v = vars(cfg).get(key)
        if isinstance(depths, (list, tuple)) and v == len(depths):
            continue  # a stage count (Swin-like backbones), not a layer count
        if _is_int(v) and v > n_new:
            orig[key] = v
            _set(cfg, key, n_new)
    for key in ("depths", "blocks_per_stage", "stage_num_blocks", "num_block_repeats",
                "stage_numb_of_layers", "encoder_layers_per_stage"):
        v = vars(cfg).get(key)
        if isinstance(v, (list, tuple)) and v and all(_is_int(x) for x in v):
            _set(cfg, key, type(v)(min(x, 1 if key != "depths" else 2) for x in v))
    n_orig = orig.get("num_hidden_layers") or next(iter(orig.values()), None)
    if n_orig is None:
        return
    n = getattr(cfg, "num_hidden_layers", None) if "num_hidden_layers" in orig else n_new
    if not _is_int(n):
        n = n_new
    # per-layer lists: keep one of each kind, then fill with the last kind
    for key, v in list(vars(cfg).items()):
        if not isinstance(v, (list, tuple)) or len(v) != n_orig or n_orig <= n:
            continue
        if key in _PER_LAYER_LISTS or (v and all(isinstance(x, str) for x in v)) \
                or (v and all(isinstance(x, bool) or x in (0, 1) for x in v) and "layer" in key):
            kinds = list(dict.fromkeys(v))
            if len(kinds) > n:  # every kind needs a layer: grow the stack
                n = len(kinds)
                for lk in orig:
                    _set(cfg, lk, n)
            new = kinds + [kinds[-1]] * (n - len(kinds))
            _set(cfg, key, type(v)(new) if isinstance(v, tuple) else new)
    # layer index lists: scale into the new range
    for key, v in list(vars(cfg).items()):
        if not isinstance(v, (list, tuple)) or not v or not all(_is_int(x) for x in v):
            continue
        if not re.search(r"(index|indexes|indices|_layers|layer_ids|layer_idx)$", key):
            continue
        if key in _PER_LAYER_LISTS or len(v) == n_orig:
            continue
        if key.endswith("out_indices") and isinstance(vars(cfg).get("depths"), (list, tuple)):
            continue  # stage indices of a hierarchical backbone, not layer indices
        if max(v) > n_orig or min(v) < -n_orig:
            continue
        new = sorted(dict.fromkeys(min(x * n // n_orig, n if x == n_orig else n - 1) if x >= 0 else x
                                   for x in v))
        _set(cfg, key, type(v)(new) if isinstance(v, tuple) else new)
    d = vars(cfg)
    if "attn_layer_indices" in d and d["attn_layer_indices"] is None and "mamba_d_state" in d:
        _set(cfg, "attn_layer_indices", [n - 1])  # an all-Mamba default has no attention cache
    for per_key in ("attn_layer_period", "expert_layer_period"):
        off_key = per_key.replace("_period", "_offset")
        if _is_int(d.get(per_key)) and _is_int(d.get(off_key)) and d[off_key] >= n:
            _set(cfg, per_key, n)
            _set(cfg, off_key, n - 1)
    for key in ("max_window_layers", "first_k_dense_replace", "num_kv_shared_layers"):
        v = vars(cfg).get(key)
        if _is_int(v) and v > n:
            _set(cfg, key, min(v, 1))


def _shrink_experts(cfg) -> None:
    n_exp = None
    for key in _EXPERT_KEYS:
        v = vars(cfg).get(key)
        if _is_int(v) and v > TINY["experts"]:
            _set(cfg, key, TINY["experts"])
        if _is_int(vars(cfg).get(key)):
            n_exp = vars(cfg)[key]
    if n_exp:
        for key in _TOPK_KEYS:
            v = vars(cfg).get(key)
            if _is_int(v) and v > min(2, n_exp):
                _set(cfg, key, min(2, n_exp))
        for key in ("n_group", "topk_group"):
            if _is_int(vars(cfg).get(key)):
                _set(cfg, key, 1)


def _shrink_width(cfg) -> None:
    d = vars(cfg)
    heads = TINY["heads"]
    hd = TINY["head_dim"]
    has_heads = False
    for key in _HEAD_KEYS:
        if _is_int(d.get(key)):
            has_heads = True
            _set(cfg, key, min(d[key], heads) if d[key] < heads else heads)
    h = min([d[k] for k in _HEAD_KEYS if _is_int(d.get(k))] or [heads])
    for key in _KV_HEAD_KEYS:
        v = d.get(key)
        if _is_int(v):
            kv = max(k for k in range(1, h + 1) if h % k == 0 and k <= max(1, min(v, h)))
            _set(cfg, key, kv)
    for key in _HEAD_DIM_KEYS:
        if _is_int(d.get(key)) and d[key] > hd:
            _set(cfg, key, hd)
    hidden = heads * hd if has_heads else 64
    nh_list, depths = d.get("num_heads"), d.get("depths")
    if isinstance(nh_list, (list, tuple)) and isinstance(depths, (list, tuple)) and _is_int(d.get("embed_dim")) \
            and len(nh_list) == len(depths):
        # Swin-like: stage i has embed_dim * 2**i channels and num_heads[i] heads
        _set(cfg, "num_heads", type(nh_list)(2 ** min(i, 2) for i in range(len(nh_list))))
        _set(cfg, "embed_dim", 32)
        if _is_int(d.get("hidden_size")):
            _set(cfg, "hidden_size", 32 * 2 ** (len(depths) - 1))
        for key in _FFN_KEYS:
            if _is_int(d.get(key)) and d[key] > TINY["ffn"]:
                _set(cfg, key, TINY["ffn"])
        return
    for key in _HIDDEN_KEYS:
        v = d.get(key)
        if _is_int(v) and v > hidden:
            _set(cfg, key, hidden)
    for key in _FFN_KEYS:
        v = d.get(key)
        if _is_int(v) and v > TINY["ffn"]:
            _set(cfg, key, TINY["ffn"])
    for key in ("ssm_state_size", "state_size", "mamba_d_state", "d_state"):
        if _is_int(d.get(key)) and d[key] > 16:
            _set(cfg, key, 16)
    for key in ("kv_lora_rank", "q_lora_rank"):
        if _is_int(d.get(key)) and d[key] > 32:
            _set(cfg, key, 32)
    for key in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        if _is_int(d.get(key)) and d[key] > hd:
            _set(cfg, key, hd)
    if _is_int(d.get("qk_head_dim")) and _is_int(d.get("qk_nope_head_dim")) and _is_int(d.get("qk_rope_head_dim")):
        _set(cfg, "qk_head_dim", d["qk_nope_head_dim"] + d["qk_rope_head_dim"])
    if _is_int(d.get("mamba_n_heads")) and _is_int(d.get("mamba_d_head")):
        expand = d.get("mamba_expand", 2) if _is_int(d.get("mamba_expand")) else 2
        _set(cfg, "mamba_d_head", 16)
        _set(cfg, "mamba_n_heads", max(1, expand * getattr(cfg, "hidden_size", hidden) // 16))
        if _is_int(d.get("mamba_d_ssm")):
            _set(cfg, "mamba_d_ssm", d["mamba_n_heads"] * d["mamba_d_head"])
    # Mamba-2 style: heads * head_dim = expand * hidden; groups divide heads
    if _is_int(d.get("expand")) and _is_int(d.get("num_heads")) and _is_int(d.get("head_dim")) \
            and _is_int(d.get("hidden_size")) and "n_groups" in d:
        _set(cfg, "num_heads", max(1, d["expand"] * d["hidden_size"] // d["head_dim"]))
    for key in ("n_groups", "mamba_n_groups"):
        nheads = d.get("num_heads") if key == "n_groups" else d.get("mamba_n_heads")
        if _is_int(d.get(key)) and _is_int(nheads) and nheads % d[key]:
            _set(cfg, key, 1)
    if _is_int(d.get("upsample_groups")) and _is_int(d.get("hidden_size")) and d["upsample_groups"] > d["hidden_size"]:
        _set(cfg, "upsample_groups", d["hidden_size"])
    for key in ("num_queries", "num_denoising"):
        if _is_int(d.get(key)) and d[key] > 16:
            _set(cfg, key, 16)
    # multimodal RoPE sections sum to half the head dim: rescale them to the new head dim
    hs_, nh_ = d.get("hidden_size"), d.get("num_attention_heads")
    hd_now = d.get("head_dim") if _is_int(d.get("head_dim")) else (
        hs_ // max(1, nh_) if _is_int(hs_) and _is_int(nh_) else None)
    if _is_int(d.get("rotary_dim")) and hd_now and d["rotary_dim"] > hd_now:
        _set(cfg, "rotary_dim", hd_now)
    if _is_int(d.get("num_mel_bins")) and _is_int(d.get("max_length")) and d["max_length"] > 64:
        _set(cfg, "max_length", 64)  # spectrogram frames (AST-like)
    for key in ("rope_scaling", "rope_parameters"):
        rp = d.get(key)
        if isinstance(rp, dict) and hd_now:
            for rk in ("mrope_section", "mrope_sections"):
                sec = rp.get(rk)
                if sec is None and rk in getattr(type(cfg), "ignore_keys_at_rope_validation", ()):
                    sec = [16, 24, 24]  # the modeling code's default when the config has none
                if isinstance(sec, (list, tuple)) and sec and all(_is_int(x) for x in sec):
                    _set(cfg, key, {**rp, rk: _rescale(sec, hd_now // 2)})
    # vision: a few patches per image (ViT-like configs: int patch size, no stage lists)
    hierarchical = any(isinstance(d.get(k), (list, tuple)) for k in
                       ("depths", "hidden_sizes", "embed_dim_per_stage", "stage_out_channels"))
    ps, img = d.get("patch_size"), d.get("image_size")
    if _is_int(ps) and _is_int(img) and not hierarchical and img > 4 * ps:
        _set(cfg, "image_size", 4 * ps)
    elif _is_int(img) and img > 224 and (hierarchical or not _is_int(ps)):
        _set(cfg, "image_size", 224)  # CNN-like towers at up to 600 px are slow on a CPU
    # audio: short inputs
    if _is_int(d.get("max_source_positions")) and d["max_source_positions"] > TINY["source_positions"]:
        _set(cfg, "max_source_positions", TINY["source_positions"])
    for key in ("conv_dim",):
        v = d.get(key)
        if isinstance(v, (list, tuple)) and v and all(_is_int(x) for x in v):
            _set(cfg, key, type(v)(min(x, 64) for x in v))
    if _is_int(d.get("num_conv_pos_embeddings")) and d["num_conv_pos_embeddings"] > 16:
        _set(cfg, "num_conv_pos_embeddings", 16)
    if _is_int(d.get("num_conv_pos_embedding_groups")) and d["num_conv_pos_embedding_groups"] > 4:
        _set(cfg, "num_conv_pos_embedding_groups", 4)


def _rescale(sec, total: int) -> list[int]:
    """Integers in the proportions of ``sec`` that sum to ``total`` (each at least 1)."""
    s = sum(sec)
    out = [max(1, x * total // s) for x in sec]
    out[-1] += total - sum(out)
    if out[-1] < 1:
        return [total // len(sec)] * (len(sec) - 1) + [total - total // len(sec) * (len(sec) - 1)]
    return out


def _shrink_positions(cfg) -> None:
    d = vars(cfg)
    for key in _POSITION_KEYS:
        v = d.get(key)
        if _is_int(v) and v > TINY["positions"]:
            _set(cfg, key, TINY["positions"])
    for key in ("sliding_window", "attention_window", "local_attention", "sliding_window_size"):
        v = d.get(key)
        if _is_int(v) and v > SEQ // 2:
            _set(cfg, key, SEQ // 2)  # short enough that the window matters at SEQ tokens


def _shrink_vocab(cfg) -> bool:
    shrunk = False
    for key in _VOCAB_KEYS:
        v = vars(cfg).get(key)
        if _is_int(v) and v > TINY["vocab"]:
            _set(cfg, key, TINY["vocab"])
            shrunk = True
    return shrunk


_TOKEN_ID = re.compile(r"(_token_id|_token_ids|_token_index|_token|_id)$")
_NOT_TOKEN = re.compile(r"(layer|expert|head|group|num_|max_|size|dim|seed|stride|type)")


def _token_attrs(cfg):
    for key, v in list(vars(cfg).items()):
        if _TOKEN_ID.search(key) and not _NOT_TOKEN.search(key.replace("_token_id", "")):
            if _is_int(v) or (isinstance(v, (list, tuple)) and v and all(_is_int(x) for x in v)):
                yield key, v


def _remap_token_ids(root, vocab: int) -> None:
    """Move every token id >= vocab to a distinct id in [vocab - 64, vocab), the same old
    id to the same new id in the whole config tree."""
    table: dict[int, int] = {}
    free = list(range(vocab - 1, vocab - 65, -1))

    def new_id(x: int) -> int:
        if x < vocab:
            return x
        if x not in table:
            table[x] = free[len(table) % len(free)]
        return table[x]

    def walk(cfg) -> None:
        for key, v in _token_attrs(cfg):
            _set(cfg, key, new_id(v) if _is_int(v) else type(v)(new_id(x) for x in v))
        vm = vars(cfg).get("vocabulary_map")
        if isinstance(vm, dict):
            _set(cfg, "vocabulary_map", {k: new_id(x) if _is_int(x) else x for k, x in vm.items()})
        for _, sub in _sub_configs(cfg):
            walk(sub)

    walk(root)


def _special_ids(root) -> set[int]:
    out: set[int] = set()

    def walk(cfg) -> None:
        for _, v in _token_attrs(cfg):
            out.update([v] if _is_int(v) else v)
        for _, sub in _sub_configs(cfg):
            walk(sub)

    walk(root)
    return out


def _sync_image_tokens(cfg) -> None:
    """Image-token counts that pool a square patch grid must divide the grid's side."""
    v = _vision_cfg(cfg)
    if v is cfg:
        return
    img, ps = getattr(v, "image_size", None), getattr(v, "patch_size", None)
    if not (_is_int(img) and _is_int(ps) and ps > 0):
        return
    if isinstance(vars(cfg).get("image_grid_pinpoints"), (list, tuple)):
        _set(cfg, "image_grid_pinpoints", [[img, img]])
    side = img // ps
    tok = vars(cfg).get("mm_tokens_per_image")
    if _is_int(tok) and tok > 0:
        tside = int(round(tok ** 0.5))
        if side % max(1, tside) != 0 or tside > side:
            new_side = max(d for d in range(1, side + 1) if side % d == 0 and d <= max(1, tside))
            _set(cfg, "mm_tokens_per_image", new_side * new_side)


def shrink(config, level: str):
    """Shrink ``config`` in place (and every nested sub-config) to ``level``."""
    if level not in SHRINK_LEVELS:
        raise ValueError(level)
    vocab_shrunk = False
    seen: set[int] = set()

    def walk(cfg) -> None:
        nonlocal vocab_shrunk
        if id(cfg) in seen:
            return
        seen.add(id(cfg))
        _shrink_layers(cfg)
        _shrink_experts(cfg)
        if level in ("tiny", "narrow"):
            vocab_shrunk |= _shrink_vocab(cfg)
            _shrink_positions(cfg)
        if level == "tiny":
            _shrink_width(cfg)
        d = vars(cfg)
        if "head_dim" in d and d["head_dim"] is None and _is_int(d.get("hidden_size")) \
                and _is_int(d.get("num_attention_heads")) and d["num_attention_heads"] > 0:
            _set(cfg, "head_dim", d["hidden_size"] // d["num_attention_heads"])  # defaults that leave it unset
        if "vocab_size" in d and d["vocab_size"] is None:
            _set(cfg, "vocab_size", TINY["vocab"] if level != "shallow" else 32000)
        if "prediction_length" in d and d["prediction_length"] is None:  # time series defaults
            _set(cfg, "prediction_length", 8)
            if d.get("context_length") is None:
                _set(cfg, "context_length", 16)
        if d.get("use_timm_backbone"):  # the transformers backbone instead of timm's
            _set(cfg, "use_timm_backbone", False)
            if "backbone" in d:
                _set(cfg, "backbone", None)
        for key in ("use_pretrained_backbone",):
            if vars(cfg).get(key):
                _set(cfg, key, False)
        for _, sub in _sub_configs(cfg):
            walk(sub)

    walk(config)
    _sync_image_tokens(config)
    if vocab_shrunk:
        _remap_token_ids(config, TINY["vocab"])
    return config


def _composite_config(name: str, model_type: str):
    """Configs that need sub-configs at init."""
    import transformers as tf

    if model_type == "encoder-decoder":
        return tf.EncoderDecoderConfig.from_encoder_decoder_configs(
            tf.BertConfig(), tf.BertConfig(is_decoder=True, add_cross_attention=True))
    if model_type == "vision-encoder-decoder":
        return tf.VisionEncoderDecoderConfig.from_encoder_decoder_configs(
            tf.ViTConfig(), tf.GPT2Config(add_cross_attention=True))
    if model_type == "speech-encoder-decoder":
        return tf.SpeechEncoderDecoderConfig.from_encoder_decoder_configs(
            tf.Wav2Vec2Config(), tf.BertConfig(is_decoder=True, add_cross_attention=True))
    if model_type == "vision-text-dual-encoder":
        return tf.VisionTextDualEncoderConfig.from_vision_text_configs(tf.ViTConfig(), tf.BertConfig())
    if model_type == "rag":
        return tf.RagConfig.from_question_encoder_generator_configs(tf.DPRConfig(), tf.BartConfig())
    return None


def make_config(name: str, model_type: str):
    from transformers import AutoConfig

    try:
        cfg = _composite_config(name, model_type)
        if cfg is None:
            cfg = AutoConfig.for_model(model_type)
    except ImportError:
        raise
    except Exception as e:
        raise CreateError("config cannot be built", f"{type(e).__name__}: {_one_line(e)}") from e
    return cfg


# ----------------------------------------------------------------------------- inputs


def _one_line(e: BaseException, n: int = 300) -> str:
    s = " ".join(str(e).split())
    return s[:n]


def _forward_params(model) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return {}


def _vision_cfg(cfg):
    for key in ("vision_config", "image_config", "visual", "vision_tower_config", "encoder"):
        sub = getattr(cfg, key, None)
        if sub is not None and hasattr(sub, "to_dict") and (
                getattr(sub, "image_size", None) is not None or getattr(sub, "patch_size", None) is not None):
            return sub
    return cfg


def _image_hw(vcfg) -> tuple[int, int]:
    size = getattr(vcfg, "image_size", None)
    if size is None:
        size = getattr(vcfg, "input_size", None) or getattr(vcfg, "crop_size", None) or 64
    if isinstance(size, dict):
        size = (size.get("height", 64), size.get("width", 64))
    if isinstance(size, (list, tuple)):
        h, w = (size[0], size[-1]) if size else (64, 64)
    else:
        h = w = int(size)
    return int(h), int(w)


def _channels(vcfg) -> int:
    for key in ("num_channels", "in_channels", "in_chans", "input_channels"):
        v = getattr(vcfg, key, None)
        if _is_int(v) and v > 0:
            return v
    return 3


def _text_vocab(cfg) -> int:
    try:
        t = cfg.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001
        t = cfg
    for c in (t, cfg):
        v = getattr(c, "vocab_size", None)
        if _is_int(v) and v > 4:
            return v
    return TINY["vocab"]


def _ids(torch, vocab: int, shape, specials: set[int], gen) -> Any:
    hi = max(5, min(vocab, 1 << 30))
    x = torch.randint(3 if hi > 8 else 0, hi, shape, generator=gen)
    if specials:
        safe = [i for i in range(3, min(hi, 4096)) if i not in specials]
        if safe:
            bad = torch.zeros_like(x, dtype=torch.bool)
            for s in specials:
                if 0 <= s < hi:
                    bad |= x == s
            if bad.any():
                x[bad] = safe[0]
    return x


def _image_token_id(cfg) -> int | None:
    for key in ("image_token_id", "image_token_index", "img_token_id", "image_token"):
        v = getattr(cfg, key, None)
        if _is_int(v):
            return v
    return None


def _count_features(torch, feats) -> int | None:
    """Number of feature vectors ``get_image_features`` returned (shape conventions vary)."""
    if feats is None:
        return None
    if hasattr(feats, "pooler_output") and not isinstance(feats, torch.Tensor):
        po = getattr(feats, "pooler_output", None)
        feats = po if po is not None else feats[0]
    if isinstance(feats, torch.Tensor):
        return int(feats.numel() // feats.shape[-1]) if feats.dim() >= 2 else None
    if isinstance(feats, (list, tuple)) and feats:
        total = 0
        for f in feats:
            n = _count_features(torch, f)
            if n is None:
                return None
            total += n
        return total
    return None


def _insert_image_tokens(torch, model, c: dict, itok: int, ids, take) -> None:
    """Put exactly as many image tokens in ``input_ids`` as the vision tower yields features."""
    if "pixel_values" not in c or "input_ids" not in c:
        return
    B, T = c["input_ids"].shape[0], SEQ
    try:
        with torch.no_grad():
            extra = {k: c[k] for k in ("image_grid_thw", "image_sizes") if k in c}
            feats = model.get_image_features(pixel_values=c["pixel_values"], **extra)
        n = _count_features(torch, feats)
    except Exception:  # noqa: BLE001 - no such method, or it needs more: no tokens then
        return
    if n is None or n % B:
        return
    per = n // B
    ids_ = ids((B, per + T))
    ids_[:, 1:per + 1] = itok
    c["input_ids"] = ids_
    if "attention_mask" in c:
        c["attention_mask"] = torch.ones(B, per + T, dtype=torch.long)
    for key in ("mm_token_type_ids", "token_type_ids"):
        if take(key):  # image tokens are type 1 (multimodal RoPE, bidirectional image attention)
            c[key] = (ids_ == itok).long()


def synth_candidates(model, cfg, name: str, mode: str) -> list[dict]:
    """Candidate input dicts for ``model`` (first is the best guess)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    params = _forward_params(model)
    main = getattr(model, "main_input_name", None) or "input_ids"
    specials = _special_ids(cfg)
    vocab = _text_vocab(cfg)
    enc_dec = bool(getattr(cfg, "is_encoder_decoder", False))
    vcfg = _vision_cfg(cfg)
    B, T = BATCH, SEQ
    base: dict[str, Any] = {}
    alts: list[dict] = []

    def take(key: str) -> bool:
        return key in params

    def ids(shape):
        return _ids(torch, vocab, shape, specials, gen)

    required = {k for k, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    has_vision = vcfg is not cfg or main == "pixel_values" or "pixel_values" in required
    if main in ("input_ids", "inputs_embeds") or (take("input_ids") and main not in ("pixel_values", "input_values", "input_features")):
        if take("input_ids"):
            base["input_ids"] = ids((B, T))
            if take("attention_mask"):
                base["attention_mask"] = torch.ones(B, T, dtype=torch.long)
    grid_key = "image_grid_thw" if take("image_grid_thw") else ("grid_thw" if take("grid_thw") else None)
    patch_key = "pixel_values" if take("pixel_values") else ("hidden_states" if "hidden_states" in required else None)
    if patch_key and grid_key and (main in ("pixel_values", "hidden_states") or has_vision
                                   or patch_key == "hidden_states"):
        # pre-patchified images (Qwen2-VL family): (patches, C * t * p * p) + a (t, h, w) grid
        ps = getattr(vcfg, "patch_size", 14)
        ps = ps[0] if isinstance(ps, (list, tuple)) else ps
        tps = getattr(vcfg, "temporal_patch_size", 1) or 1
        merge = getattr(vcfg, "spatial_merge_size", 2) or 1
        c = _channels(vcfg)
        g = 2 * merge
        base[patch_key] = torch.randn(B * g * g, c * tps * ps * ps, generator=gen)
        base[grid_key] = torch.tensor([[1, g, g]] * B, dtype=torch.long)
    elif take("pixel_values") and (main == "pixel_values" or has_vision):
        h, w = _image_hw(vcfg)
        c = _channels(vcfg)
        nf = getattr(vcfg, "num_frames", None)
        if main == "pixel_values" and _is_int(nf) and nf > 1:
            base["pixel_values"] = torch.randn(B, nf, c, h, w, generator=gen)
        else:
            base["pixel_values"] = torch.randn(B, c, h, w, generator=gen)
            if main != "pixel_values":  # image-text models that take (B, images, C, H, W)
                alts.append({"pixel_values": base["pixel_values"][:, None]})
    if main == "input_values" or (take("input_values") and not base):
        length = 4000
        fs = getattr(cfg, "feature_size", None)
        hidden = getattr(cfg, "hidden_size", None)
        base["input_values"] = torch.randn(B, length, generator=gen)
        alts.append({"input_values": torch.randn(B, 1, length, generator=gen)})
        if _is_int(hidden):
            alts.append({"input_values": torch.randn(B, 64, hidden, generator=gen)})
        if _is_int(fs) and fs > 1:
            alts.append({"input_values": torch.randn(B, 64, fs, generator=gen)})
        mels = getattr(cfg, "num_mel_bins", None)
        if _is_int(mels):  # spectrogram "values": (B, frames, mel bins)
            frames = getattr(cfg, "max_length", None) or 64
            alts.insert(0, {"input_values": torch.randn(B, frames, mels, generator=gen)})
    has_audio = any(getattr(cfg, k, None) is not None for k in ("audio_config", "audio_encoder_config"))
    if main == "input_features" or (take("input_features") and (not base or has_audio)):
        msp = getattr(cfg, "max_source_positions", None)
        for c in (cfg, getattr(cfg, "encoder_config", None), getattr(cfg, "audio_config", None)):
            if c is not None and _is_int(getattr(c, "max_source_positions", None)):
                msp = c.max_source_positions
                break
        mels = None
        for key in ("num_mel_bins", "feature_size", "input_feat_per_channel",
                    "feature_projection_input_dim", "input_dim", "n_mels"):
            for c in (cfg, getattr(cfg, "audio_config", None), getattr(cfg, "encoder_config", None)):
                v = getattr(c, key, None) if c is not None else None
                if _is_int(v) and v > 1:
                    mels = v
                    break
            if mels:
                break
        mels = mels or 80
        frames = 2 * msp if _is_int(msp) else 64
        spec = getattr(getattr(cfg, "audio_config", None) or cfg, "spec_size", None)
        if _is_int(spec):  # spectrogram-as-image towers (CLAP): (B, 1, frames, mel bins)
            alts.insert(0, {"input_features": torch.randn(B, 1, spec, mels, generator=gen)})
        base["input_features"] = torch.randn(B, mels, frames, generator=gen)
        alts.append({"input_features": torch.randn(B, frames, mels, generator=gen)})
        alts.append({"input_features": torch.randn(B, 1, frames, mels, generator=gen)})
    if main not in ("input_ids", "pixel_values", "input_values", "input_features") and main in params and main not in base:
        # time series and the like: (B, context, channels)
        ctx = getattr(cfg, "context_length", None) or T
        lags = getattr(cfg, "lags_sequence", None)
        if isinstance(lags, (list, tuple)) and lags:
            ctx = ctx + max(lags)
        ch = getattr(cfg, "num_input_channels", None) or getattr(cfg, "input_size", None) or 1
        if main in ("past_values",):
            base[main] = torch.randn(B, ctx, generator=gen) if ch == 1 else torch.randn(B, ctx, ch, generator=gen)
            alts.append({main: torch.randn(B, ctx, ch, generator=gen)})
        elif main == "inputs_embeds":
            base[main] = torch.randn(B, T, getattr(cfg, "hidden_size", 64), generator=gen)
    if "input_ids" not in base and take("input_ids") and (not base or "input_ids" in required):
        base["input_ids"] = ids((B, T))
        if take("attention_mask"):
            base["attention_mask"] = torch.ones(B, T, dtype=torch.long)
    if take("qformer_input_ids") and "pixel_values" in base:  # InstructBLIP's Q-Former prompt
        base["qformer_input_ids"] = ids((B, T // 2))
        if take("qformer_attention_mask"):
            base["qformer_attention_mask"] = torch.ones(B, T // 2, dtype=torch.long)
    pv = base.get("pixel_values")
    if take("image_sizes") and pv is not None and pv.dim() == 4:
        # anyres models: the image's own size, and the (base + one crop) patch stack
        sizes = torch.tensor([[pv.shape[-2], pv.shape[-1]]] * B)
        alts[:0] = [{"image_sizes": sizes}, {"image_sizes": sizes, "pixel_values": torch.stack([pv, pv], dim=1)}]
    pvals = base.get("past_values")
    if pvals is not None:  # time series: observed mask and time features of the same length
        if take("past_observed_mask"):
            base["past_observed_mask"] = torch.ones_like(pvals)
        if take("past_time_features"):
            nt = getattr(cfg, "num_time_features", 1) or 1
            base["past_time_features"] = torch.randn(B, pvals.shape[1], nt, generator=gen)
    # encoder-decoders: decoder side
    if enc_dec and take("decoder_input_ids"):
        base["decoder_input_ids"] = ids((B, T // 2))
    # required parameters nobody synthesized
    for pname, p in params.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or pname == "self":
            continue
        if p.default is inspect.Parameter.empty and pname not in base:
            raise CreateError("cannot synthesize input", pname)
    cands = [base] + [{**base, **a} for a in alts]
    itok = _image_token_id(cfg)
    if itok is not None and itok < vocab:
        for c in cands:
            _insert_image_tokens(torch, model, c, itok, ids, take)
    if mode == "train" and take("labels"):
        for c in cands:
            lab = _labels(torch, model, cfg, c, name, vocab, gen)
            if lab is not None:
                c["labels"] = lab
    return cands


def _labels(torch, model, cfg, inputs: dict, name: str, vocab: int, gen):
    if "decoder_input_ids" in inputs:
        return inputs["decoder_input_ids"].clone()
    if name.endswith(("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")) and "input_ids" in inputs:
        lab = inputs["input_ids"].clone()
        itok = _image_token_id(cfg)
        if itok is not None:
            lab[lab == itok] = -100
        return lab
    return None


# ----------------------------------------------------------------------------- build


def _model_class(name: str):
    import transformers

    try:
        return getattr(transformers, name)
    except AttributeError as e:
        raise CreateError("class not in the installed transformers", name) from e
    except ImportError:
        raise


def _param_count_meta(cls, cfg) -> int | None:
    import torch

    try:
        with torch.device("meta"):
            m = cls(cfg)
        return sum(p.numel() for p in m.parameters())
    except Exception:  # noqa: BLE001 - some models cannot be built on meta: count them for real
        return None


def _estimate_params(root) -> int:
    """A rough parameter count from the config tree (when the meta device cannot build the
    model): embeddings + per layer attention and (expert) MLPs."""
    total = 0
    seen: set[int] = set()

    def first_int(cfg, keys):
        for k in keys:
            v = vars(cfg).get(k)
            if _is_int(v):
                return v
        return None

    def walk(cfg) -> None:
        nonlocal total
        if id(cfg) in seen:
            return
        seen.add(id(cfg))
        h = first_int(cfg, ("hidden_size", "d_model", "n_embd", "embed_dim"))
        if h:
            layers = sum(v for k in _LAYER_KEYS if _is_int(v := vars(cfg).get(k))) or 1
            ffn = first_int(cfg, _FFN_KEYS) or 4 * h
            experts = first_int(cfg, _EXPERT_KEYS) or 1
            vocab = first_int(cfg, _VOCAB_KEYS) or 0
            total += layers * (4 * h * h + 3 * h * ffn * experts) + 2 * vocab * h
        for _, sub in _sub_configs(cfg):
            walk(sub)

    walk(root)
    return total


def _fresh_config(name: str, model_type: str, level: str):
    import copy

    cfg = make_config(name, model_type)
    cfg = copy.deepcopy(cfg)
    shrink(cfg, level)
    return cfg


def _call(model, inputs: dict):
    return model(**inputs)


def build(name: str, mode: str) -> list[tuple]:
    import torch

    from . import seed_all

    cat = catalog()
    if name not in cat:
        raise CreateError("unknown model", name)
    model_type, _mapping = cat[name]
    cls = _model_class(name)
    fwd = getattr(cls, "forward", None)
    if fwd is None or getattr(fwd, "__name__", "") == "_forward_unimplemented":
        raise CreateError("no forward", name)

    first_construct_error: str | None = None
    first_run_error: str | None = None
    errors: list[str] = []  # every level's failure, for debugging a registry entry
    fallback = None
    for level in SHRINK_LEVELS:
        seed_all(0)
        try:
            cfg = _fresh_config(name, model_type, level)
        except CreateError:
            raise
        except Exception as e:  # noqa: BLE001 - a config the shrinker cannot handle: next level
            errors.append(f"{level}: shrink: {type(e).__name__}: {_one_line(e)}")
            first_construct_error = first_construct_error or f"shrink: {type(e).__name__}: {_one_line(e)}"
            continue
        n = _param_count_meta(cls, cfg)
        if n is None:
            n = _estimate_params(cfg)
        if n > MAX_PARAMS:
            first_construct_error = first_construct_error or f"too large at level {level} ({n / 1e6:.0f}M parameters)"
            errors.append(f"{level}: too large ({n / 1e6:.0f}M parameters)")
            continue
        seed_all(0)
        try:
            model = cls(cfg)
        except ImportError:
            raise
        except Exception as e:  # noqa: BLE001
            first_construct_error = first_construct_error or f"{type(e).__name__}: {_one_line(e)}"
            errors.append(f"{level}: construct: {type(e).__name__}: {_one_line(e)}")
            continue
        model.train(mode == "train")
        seed_all(0)
        try:
            cands = synth_candidates(model, cfg, name, mode)
        except CreateError as e:
            first_construct_error = first_construct_error or str(e)
            errors.append(f"{level}: inputs: {e}")
            continue
        for inputs in cands:
            seed_all(0)
            try:
                with torch.no_grad():
                    _call(model, inputs)
            except Exception as e:  # noqa: BLE001
                first_run_error = first_run_error or f"{type(e).__name__}: {_one_line(e)}"
                errors.append(f"{level}: run: {type(e).__name__}: {_one_line(e)}")
                continue
            seed_all(0)
            model.zoo_shrink_level = level  # for the sweep's report
            return [(model, (), inputs)]
        if fallback is None:
            fallback = (model, cands[0], level)
    if fallback is not None:
        model, inputs, level = fallback
        model.zoo_shrink_level = level
        model.zoo_probe_error = first_run_error
        model.zoo_probe_errors = errors
        return [(model, (), inputs)]
    if os.environ.get("GRAPHSTITCH_ZOO_DEBUG"):
        print("\n".join(errors))
    raise CreateError("model cannot be built", first_construct_error or "no shrink level constructed")
