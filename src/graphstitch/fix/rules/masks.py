"""Boolean-mask selections reduced to one number: ``x[m].mean()``, ``F.mse_loss(p[m], t[m])``,
``(p[m] == t[m]).float().mean()``.
The selection has a data-dependent length (GB0036); its reduction does not. Computed on the
whole tensors with the unselected elements weighed out by ``torch.where``, the same sum and
the same mean come from static shapes."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .syntax import add_import, walk

# Element-wise losses: with reduction="none" each element's loss, in the shape of its inputs.
# (cross_entropy / nll_loss are not: their default mean divides by the non-ignored count.)
_ELEMENTWISE_LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits", "soft_margin_loss")
# Element-wise tensor methods and torch functions the selection may pass through.
_ELEMENTWISE = frozenset({"abs", "square", "sqrt", "exp", "log", "log1p", "neg", "float", "double", "half",
                          "pow", "clamp", "clip", "sigmoid", "tanh", "relu"})
_BINARY = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)


def _selection(ctx: Ctx, node: cst.BaseExpression) -> tuple[str, str] | None:
    """``Y[M]`` with one index -> (Y's source, M's source)."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return None
    el = node.slice[0].slice
    if not isinstance(el, cst.Index) or el.star is not None:
        return None
    return ctx.code(node.value), ctx.code(el.value)


class _Unmasked(Exception):
    """The expression holds something other than selections by one mask, numbers and
    element-wise operations on them."""


def _whole(ctx: Ctx, node: cst.BaseExpression, masks: dict[str, str]) -> str:
    """NODE's source with every ``Y[M]`` replaced by ``Y`` (MASKS: M -> the first Y it
    selects from): the same element-wise computation on the whole tensors. Raises _Unmasked
    otherwise."""
    sel = _selection(ctx, node)
    if sel is not None and isinstance(node, cst.Subscript):
        masks.setdefault(sel[1], sel[0])
        return sel[0] if isinstance(node.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) else f"({sel[0]})"
    if isinstance(node, (cst.Integer, cst.Float)):
        return ctx.code(node)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _BINARY):
        op = ctx.code(node.operator).strip()
        return f"({_whole(ctx, node.left, masks)} {op} {_whole(ctx, node.right, masks)})"
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and \
            isinstance(node.comparisons[0].operator, (cst.Equal, cst.NotEqual, cst.LessThan, cst.GreaterThan,
                                                     cst.LessThanEqual, cst.GreaterThanEqual)):
        c = node.comparisons[0]
        op = ctx.code(c.operator).strip()
        return f"({_whole(ctx, node.left, masks)} {op} {_whole(ctx, c.comparator, masks)})"
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return f"-{_whole(ctx, node.expression, masks)}"
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _ELEMENTWISE \
            and all(isinstance(a.value, (cst.Integer, cst.Float, cst.UnaryOperation)) or a.keyword for a in node.args):
        args = ", ".join(ctx.code(a).strip().rstrip(",") for a in node.args)
        return f"{_whole(ctx, node.func.value, masks)}.{node.func.attr.value}({args})"
    raise _Unmasked


def _reduced(ctx: Ctx, call: cst.Call) -> tuple[str, str, str, str] | None:
    """A full reduction of selections by one mask: (how, the element-wise source on whole
    tensors, the mask, a tensor it selects from), how being "sum" or "mean"; None when CALL
    is not one."""
    masks: dict[str, str] = {}
    f = call.func
    try:
        if isinstance(f, cst.Attribute) and f.attr.value in ("sum", "mean") and not call.args:
            inner, how = _whole(ctx, f.value, masks), f.attr.value
        elif isinstance(f, (cst.Attribute, cst.Name)) and ctx.code(f) in ("torch.sum", "torch.mean") \
                and len(call.args) == 1 and not call.args[0].keyword:
            inner, how = _whole(ctx, call.args[0].value, masks), ctx.code(f).split(".")[1]
        elif (f.attr.value if isinstance(f, cst.Attribute) else getattr(f, "value", None)) in _ELEMENTWISE_LOSSES:
            pos = [a for a in call.args if a.keyword is None]
            kw = {a.keyword.value: ctx.code(a.value) for a in call.args if a.keyword is not None}
            if len(pos) != 2 or set(kw) - {"reduction", "beta", "delta"} or any(a.star for a in call.args):
                return None
            how = kw.pop("reduction", '"mean"').strip("'\"")
            if how not in ("mean", "sum"):
                return None
            a, b = (_whole(ctx, p.value, masks) for p in pos)
            extra = "".join(f", {k}={v}" for k, v in kw.items())
            inner = f"{ctx.code(f)}({a}, {b}{extra}, reduction=\"none\")"
        else:
            return None
    except _Unmasked:
        return None
    if len(masks) != 1:
        return None
    (mask, tensor), = masks.items()
    return how, inner, mask, tensor


@rule("masked-reduction")
def _masked_reduction(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``x[m].sum()`` / ``.mean()`` / an element-wise loss of selections by one mask ->
    ``torch.where(m, …, 0).sum()`` on the whole tensors (divided by ``m.sum()`` for a mean:
    the same value, NaN for an empty mask as before). Offered as is (a mask shaped like the
    tensors) and with the mask's trailing dimensions added (a mask over leading dims)."""
    if "GB0036" not in ctx.site.gb_id and "dynamic shape" not in ctx.site.gb_type.lower():
        return
    found = [(n, r) for n in walk(ctx.stmt) if isinstance(n, cst.Call) and ctx.idx.contains(n, ctx.site.line)
             and (r := _reduced(ctx, n)) is not None]
    outer = [(n, r) for n, r in found if not any(n is not o and n in set(walk(o)) for o, _ in found)]
    if not outer:
        return
    for shaped in (False, True):
        swaps: dict[cst.CSTNode, object] = {}
        for n, (how, inner, mask, tensor) in outer:
            m = mask if isinstance(cst.parse_expression(mask), (cst.Name, cst.Attribute)) else f"({mask})"
            if shaped:
                # A mask over the leading dims of the tensors it selects from: broadcast as the selection is.
                m = f"{m}.reshape({m}.shape + (1,) * ({tensor}.dim() - {m}.dim()))"
            total = f"torch.where({m}, {inner}, 0).sum()"
            count = f"{m}.expand_as({tensor}).sum()" if shaped else f"{m}.sum()"
            swaps[n] = cst.parse_expression(total if how == "sum" else f"({total} / {count})")
        yield Rewrite("masked-reduction", "rewrite",
                      "a reduction of a boolean-mask selection -> torch.where on the whole tensors"
                      + (", the mask broadcast over trailing dims" if shaped else ""),
                      "the element-wise part is computed for unselected elements too (then weighed out); "
                      "a mean is sum / count", {ctx.path: add_import(ctx.swap(swaps), "import torch")})
