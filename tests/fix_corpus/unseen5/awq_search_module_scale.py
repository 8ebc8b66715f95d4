"""AWQ activation-aware scale search: for each of 20 grid ratios the layers' weights are scaled and pseudo-quantized
in place (`fc.weight.data = w_quantize_func(fc.weight.data) / ...`), the block is re-run,
`loss = (org_out - out).float().pow(2).mean().item()` is compared with the Python best so far, and the block is
restored with `block.load_state_dict(org_sd)` from `org_sd = {k: v.cpu() for k, v in block.state_dict().items()}`
(mit-han-lab/llm-awq awq/quantize/auto_scale.py: auto_scale_block, _search_module_scale, _auto_get_scale,
get_act_scale; awq/quantize/quantizer.py: pseudo_quantize_tensor; awq/utils/module.py: get_op_name). Stand-ins: a
small OPT-like decoder layer (transformers is not installed; the class is named `OPTDecoderLayer` so the original
`isinstance` branch is taken; its attention returns a tuple like OPTAttention), and the input features that
`run_awq` collects with forward hooks are computed directly in `target()`; the lazy
`from .quantizer import pseudo_quantize_tensor` is a module-level function here. Only the OPT branch of
`auto_scale_block` is kept. The search restores the weights after every ratio, so the layer is the same after a call."""
import torch
import torch.nn as nn


def get_op_name(module, op):
    # get the name of the op relative to the module
    for name, m in module.named_modules():
        if m is op:
            return name
    raise ValueError(f"Cannot find op {op} in module {module}")


# core quantization method (simulated quantization)
def pseudo_quantize_tensor(w, n_bit=8,
                           zero_point=True, q_group_size=-1,
                           inplace=False,
                           get_scale_zp=False
                           ):
    org_w_shape = w.shape
    if q_group_size > 0:
        assert org_w_shape[-1] % q_group_size == 0
        w = w.reshape(-1, q_group_size)
    assert w.dim() == 2
    if zero_point:
        max_val = w.amax(dim=1, keepdim=True)
        min_val = w.amin(dim=1, keepdim=True)
        max_int = 2 ** n_bit - 1
        min_int = 0
        scales = (max_val - min_val).clamp(min=1e-5) / max_int
        zeros = (-torch.round(min_val / scales)).clamp_(min_int, max_int)
    else:  # we actually never used this
        assert min_val is None
        max_val = w.abs().amax(dim=1, keepdim=True)
        max_val = max_val.clamp(min=1e-5)
        max_int = 2 ** (n_bit - 1) - 1
        min_int = - 2 ** (n_bit - 1)
        scales = max_val / max_int
        zeros = 0

    assert torch.isnan(scales).sum() == 0
    assert torch.isnan(w).sum() == 0

    if inplace:
        ((w.div_(scales).round_().add_(zeros)).clamp_(
            min_int, max_int).sub_(zeros)).mul_(scales)
    else:
        w = (torch.clamp(torch.round(w / scales) +
                         zeros, min_int, max_int) - zeros) * scales
    assert torch.isnan(w).sum() == 0

    w = w.reshape(org_w_shape)

    if get_scale_zp:
        return w, scales.view(w.shape[0], -1), zeros.view(w.shape[0], -1)
    else:
        return w


@torch.no_grad()
def get_act_scale(x):
    return x.abs().view(-1, x.shape[-1]).mean(0)


@torch.no_grad()
def auto_scale_block(module, module_kwargs,
                     w_bit, q_config,
                     input_feat):
    # firstly, get the weight quantize function
    if w_bit is not None:
        def w_quantize_func(p): return pseudo_quantize_tensor(
            p, n_bit=w_bit, **q_config,
        ).detach()
    else:
        def w_quantize_func(p): return p

    if "use_cache" in module_kwargs:
        module_kwargs.pop("use_cache")

    # find the best scale ratio
    def _search_module_scale(block, linears2scale: list, x, kwargs={}):
        # w: co, ci
        # x: n, ci
        x = x.to(next(block.parameters()).device)
        with torch.no_grad():
            org_out = block(x, **kwargs)
            if isinstance(org_out, tuple):
                org_out = org_out[0]

        x_max = get_act_scale(x)

        best_error = float('inf')
        best_ratio = -1
        best_scales = None

        n_grid = 20
        history = []

        org_sd = {k: v.cpu() for k, v in block.state_dict().items()}
        for ratio in range(n_grid):
            ratio = ratio * 1 / n_grid
            scales = x_max.pow(ratio).clamp(min=1e-4).view(-1)
            scales = scales / (scales.max() * scales.min()).sqrt()
            for fc in linears2scale:
                fc.weight.mul_(scales.view(1, -1).to(fc.weight.device))
                fc.weight.data = w_quantize_func(
                    fc.weight.data) / (scales.view(1, -1))
            out = block(x, **kwargs)
            if isinstance(out, tuple):
                out = out[0]

            loss = (org_out - out).float().pow(2).mean().item()  # float prevents overflow  # BREAK
            history.append(loss)
            is_best = loss < best_error
            if is_best:
                best_error = loss
                best_ratio = ratio
                best_scales = scales
            block.load_state_dict(org_sd)
        if best_ratio == -1:
            print(history)
            raise Exception
        # print(best_ratio)
        best_scales = best_scales.view(-1)

        assert torch.isnan(best_scales).sum() == 0, best_scales
        return best_scales.detach()

    def _auto_get_scale(prev_op, layers, inp, module2inspect=None, kwargs={}):
        # module2inspect: if given, we will check the output diff of this module instead of layers
        if module2inspect is None:
            assert len(layers) == 1
            module2inspect = layers[0]

        scales = _search_module_scale(module2inspect, layers, inp, kwargs)
        scales = scales.detach().cpu()
        # prev_op_name, [layer_name], scale
        return (get_op_name(module, prev_op), tuple([get_op_name(module, m) for m in layers]), scales)

    scales_list = []  # return the searched scales

    if isinstance(module, OPTDecoderLayer):
        # attention input
        scales_list.append(_auto_get_scale(
            prev_op=module.self_attn_layer_norm,
            layers=[module.self_attn.q_proj,
                    module.self_attn.k_proj, module.self_attn.v_proj],
            inp=input_feat['self_attn.q_proj'],
            module2inspect=module.self_attn, kwargs=module_kwargs,
        ))
        # attn out
        scales_list.append(_auto_get_scale(
            prev_op=module.self_attn.v_proj,
            layers=[module.self_attn.out_proj],
            inp=input_feat['self_attn.out_proj'],
        ))
        # fc1
        scales_list.append(_auto_get_scale(
            prev_op=module.final_layer_norm,
            layers=[module.fc1],
            inp=input_feat['fc1'],
        ))
        # fc2
        scales_list.append(_auto_get_scale(
            prev_op=module.fc1,
            layers=[module.fc2],
            inp=input_feat['fc2'],
        ))
    else:
        raise NotImplementedError(f"{type(module)} not supported yet!")

    return scales_list


class OPTAttention(nn.Module):
    """Stand-in for transformers' OPTAttention (causal multi-head attention, returns a tuple)."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_states, attention_mask=None):
        bsz, tgt_len, embed_dim = hidden_states.shape
        q = self.q_proj(hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn = attn.transpose(1, 2).reshape(bsz, tgt_len, embed_dim)
        return self.out_proj(attn), None, None


class OPTDecoderLayer(nn.Module):
    """Stand-in for transformers' OPTDecoderLayer (pre-LayerNorm)."""

    def __init__(self, embed_dim=32, num_heads=4, ffn_dim=64):
        super().__init__()
        self.self_attn = OPTAttention(embed_dim, num_heads)
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.activation_fn = nn.ReLU()
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask=attention_mask)[0]
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.fc2(self.activation_fn(self.fc1(hidden_states)))
        return (residual + hidden_states,)


@torch.no_grad()
def _collect_input_feat(layer, x):
    """What run_awq's forward hooks on the named linears record, for one calibration batch."""
    h = layer.self_attn_layer_norm(x)
    bsz, t, d = h.shape
    attn = layer.self_attn
    q = attn.q_proj(h).view(bsz, t, attn.num_heads, attn.head_dim).transpose(1, 2)
    k = attn.k_proj(h).view(bsz, t, attn.num_heads, attn.head_dim).transpose(1, 2)
    v = attn.v_proj(h).view(bsz, t, attn.num_heads, attn.head_dim).transpose(1, 2)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(bsz, t, d)
    x = x + attn.out_proj(o)
    f = layer.final_layer_norm(x)
    return {'self_attn.q_proj': h, 'self_attn.out_proj': o, 'fc1': f,
            'fc2': layer.activation_fn(layer.fc1(f))}


def target():
    torch.manual_seed(0)
    q_config = {"zero_point": True, "q_group_size": 16}
    calls = []
    for _ in range(2):
        layer = OPTDecoderLayer()
        input_feat = _collect_input_feat(layer, torch.randn(2, 8, 32))
        calls.append((auto_scale_block, (layer, {"use_cache": False}, 4, q_config, input_feat), {}))
    return calls


EXPECT = ("hatch: `torch.compiler.disable` on the nested `_search_module_scale` (a calibration loop that reads the "
          "loss with `.item()` for each ratio, compares it with a Python best and swaps weights through `.data` and "
          "`load_state_dict`); the block forwards are cheap and nothing worth compiling is lost")
