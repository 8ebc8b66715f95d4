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
    """``Y[M]`` with one index (also ``Y[torch.where(M)]``, ``Y[M.nonzero(as_tuple=True)]``)
    and ``Y.masked_select(M)`` -> (Y's source, M's source)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value == "masked_select" and len(node.args) == 1 and not node.args[0].keyword:
        return ctx.code(node.func.value), ctx.code(node.args[0].value)
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return None
    el = node.slice[0].slice
    if not isinstance(el, cst.Index) or el.star is not None:
        return None
    idx = el.value
    if isinstance(idx, cst.Call):
        pos = [a for a in idx.args if a.keyword is None]
        tuple_kw = [a for a in idx.args if a.keyword and a.keyword.value == "as_tuple" and ctx.code(a.value) == "True"]
        f = ctx.code(idx.func)
        if len(pos) == 1 and ((f == "torch.where" and len(idx.args) == 1) or (tuple_kw and f == "torch.nonzero")):
            idx = pos[0].value
        elif tuple_kw and isinstance(idx.func, cst.Attribute) and idx.func.attr.value == "nonzero" and not pos:
            idx = idx.func.value
    return ctx.code(node.value), ctx.code(idx)


class _Unmasked(Exception):
    """The expression holds something other than selections by one mask, numbers and
    element-wise operations on them."""


def _whole(ctx: Ctx, node: cst.BaseExpression, masks: dict[str, str]) -> str:
    """NODE's source with every ``Y[M]`` replaced by ``Y`` (MASKS: M -> the first Y it
    selects from): the same element-wise computation on the whole tensors. Raises _Unmasked
    otherwise."""
    sel = _selection(ctx, node)
    if sel is not None:
        masks.setdefault(sel[1], sel[0])
        y = node.value if isinstance(node, cst.Subscript) else node.func.value if isinstance(node, cst.Call) and \
            isinstance(node.func, cst.Attribute) else node
        return sel[0] if isinstance(y, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) else f"({sel[0]})"
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
    # A mask over leading dims is only how indexing reads a mask (masked_select broadcasts).
    indexed = any(isinstance(x, cst.Subscript) and _selection(ctx, x) for n, _ in outer for x in walk(n))
    for shaped in (False, True) if indexed else (False,):
        swaps: dict[cst.CSTNode, object] = {}
        for n, (how, inner, mask, tensor) in outer:
            m = mask if isinstance(cst.parse_expression(mask), (cst.Name, cst.Attribute)) else f"({mask})"
            if shaped:
                # A mask over the leading dims of the tensors it selects from: broadcast as the selection is.
                m = f"{m}.reshape({m}.shape + (1,) * ({tensor}.dim() - {m}.dim()))"
            total = f"torch.where({m}, {inner}, 0).sum()"
            # (masked_select broadcasts its mask as any operator does: the count of the broadcast mask)
            count = f"{m}.expand_as({tensor}).sum()" if shaped or "masked_select" in ctx.code(n) else f"{m}.sum()"
            swaps[n] = cst.parse_expression(total if how == "sum" else f"({total} / {count})")
        yield Rewrite("masked-reduction", "rewrite",
                      "a reduction of a boolean-mask selection -> torch.where on the whole tensors"
                      + (", the mask broadcast over trailing dims" if shaped else ""),
                      "the element-wise part is computed for unselected elements too (then weighed out); "
                      "a mean is sum / count", {ctx.path: add_import(ctx.swap(swaps), "import torch")})


def _nonzero_of(ctx: Ctx, node: cst.BaseExpression) -> str | None:
    """``M.nonzero()`` / ``torch.nonzero(M)`` (rows of indices, not ``as_tuple``) -> M's source."""
    if not isinstance(node, cst.Call) or any(a.keyword and a.keyword.value == "as_tuple" and
                                              ctx.code(a.value) != "False" for a in node.args):
        return None
    pos = [a for a in node.args if a.keyword is None]
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "nonzero" and not pos \
            and ctx.code(node.func) != "torch.nonzero":
        return ctx.code(node.func.value)
    if ctx.code(node.func) == "torch.nonzero" and len(pos) == 1:
        return ctx.code(pos[0].value)
    return None


def _count(ctx: Ctx, node: cst.CSTNode) -> tuple[cst.BaseExpression, str] | None:
    """A count of a selection's rows or elements -> (what holds it, the same count as a 0-d
    tensor): ``len(M.nonzero())``, ``M.nonzero().size(0)``/``.shape[0]``/``.numel()``,
    ``len(X[M])``, ``X[M].size(0)``/``.shape[0]``/``.numel()``."""
    def inner(e: cst.BaseExpression, rows: bool) -> str | None:
        m = _nonzero_of(ctx, e)
        if m is not None:
            m = m if isinstance(cst.parse_expression(m), (cst.Name, cst.Attribute, cst.Call)) else f"({m})"
            return f"{m}.count_nonzero()" if rows else f"({m}.count_nonzero() * {m}.dim())"
        sel = _selection(ctx, e)
        if sel is not None:
            m = sel[1] if isinstance(cst.parse_expression(sel[1]), (cst.Name, cst.Attribute)) else f"({sel[1]})"
            # X[M] has M.sum() rows of X's trailing dims (M covers X's leading dims)
            x = sel[0] if isinstance(cst.parse_expression(sel[0]), (cst.Name, cst.Attribute)) else f"({sel[0]})"
            return f"{m}.sum()" if rows else f"({m}.sum() * ({x}.numel() // {m}.numel()))"
        return None

    if isinstance(node, cst.Call) and ctx.code(node.func) == "len" and len(node.args) == 1:
        got = inner(node.args[0].value, True)
        return (node, got) if got else None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
            node.func.attr.value in ("size", "numel") and len(node.args) == (node.func.attr.value == "size"):
        if node.args and ctx.code(node.args[0].value) != "0":
            return None
        got = inner(node.func.value, node.func.attr.value == "size")
        return (node, got) if got else None
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" \
            and len(node.slice) == 1 and ctx.code(node.slice[0].slice).strip() == "0":
        got = inner(node.value.value, True)
        return (node, got) if got else None
    return None


@rule("count-selected")
def _count_selected(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """The number of rows a ``nonzero()`` or a boolean-mask selection has (GB0036: a
    data-dependent length, only to be counted) -> ``M.count_nonzero()`` / ``M.sum()``, as
    ``int(...)``: composed with item-keep-tensor, the count stays a 0-d tensor."""
    if "GB0036" not in ctx.site.gb_id and "dynamic shape" not in ctx.site.gb_type.lower():
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if n in swaps or not ctx.idx.contains(n, ctx.site.line) or any(n in set(walk(o)) for o in swaps):
            continue
        got = _count(ctx, n)
        if got is not None:
            swaps[got[0]] = cst.parse_expression(f"int({got[1]})")
    if swaps:
        yield Rewrite("count-selected", "rewrite", "the length of a nonzero() / mask selection -> the mask's count",
                      "the same count without materialising the selection", {ctx.path: ctx.swap(swaps)})


class _SameMask(cst.CSTTransformer):
    """``Y[M]`` -> ``Y`` for the one mask M (by its source); anything else as it is."""

    def __init__(self, ctx: Ctx, mask: str):
        self.ctx, self.mask, self.found = ctx, mask, 0

    def leave_Subscript(self, original_node: cst.Subscript, updated_node: cst.Subscript) -> cst.BaseExpression:
        sel = _selection(self.ctx, original_node)
        if sel is not None and sel[1] == self.mask:
            self.found += 1
            return updated_node.value
        return updated_node


# An augmented update through a mask as an in-place op on the whole tensor, and the value
# that leaves an element unchanged.
_IN_PLACE = {cst.AddAssign: ("add_", "0"), cst.SubtractAssign: ("sub_", "0"),
             cst.MultiplyAssign: ("mul_", "1"), cst.DivideAssign: ("div_", "1")}


@rule("masked-update-in-place")
def _masked_update_in_place(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``X[M] += V`` (``-=``, ``*=``, ``/=``) and ``X[M] = Y[M]`` (GB0036: the selection is
    read, so its length is data-dependent) -> the same update on the whole tensor, in place:
    ``X.add_(torch.where(M, V, 0))``, ``X.copy_(torch.where(M, Y, X))`` (a selection by M in
    the value reads the whole tensor). As is, and with M reshaped over X's trailing dims."""
    if "GB0036" not in ctx.site.gb_id and "dynamic shape" not in ctx.site.gb_type.lower():
        return
    if not isinstance(ctx.stmt, cst.SimpleStatementLine) or len(ctx.stmt.body) != 1:
        return
    st = ctx.stmt.body[0]
    if isinstance(st, cst.AugAssign) and type(st.operator) in _IN_PLACE:
        target, value = st.target, st.value
    elif isinstance(st, cst.Assign) and len(st.targets) == 1:
        target, value = st.targets[0].target, st.value
    else:
        return
    sel = _selection(ctx, target) if isinstance(target, cst.Subscript) else None
    if sel is None:
        return
    x, mask = sel
    same = _SameMask(ctx, mask)
    visited = value.visit(same)
    if not isinstance(visited, cst.BaseExpression):
        return
    whole = ctx.code(visited)
    if isinstance(st, cst.Assign) and not same.found:
        return   # X[M] = v with a value of its own shape: nothing here reads the selection
    m = mask if isinstance(cst.parse_expression(mask), (cst.Name, cst.Attribute)) else f"({mask})"
    for shaped in (False, True):
        mb = f"{m}.reshape({m}.shape + (1,) * ({x}.dim() - {m}.dim()))" if shaped else m
        if isinstance(st, cst.AugAssign):
            op, keep = _IN_PLACE[type(st.operator)]
            new = f"{x}.{op}(torch.where({mb}, {whole}, {keep}))"
        else:
            new = f"{x}.copy_(torch.where({mb}, {whole}, {x}))"
        line = ctx.stmt.with_changes(body=[cst.Expr(cst.parse_expression(new))])
        yield Rewrite("masked-update-in-place", "rewrite",
                      "an update through a boolean mask -> the same update on the whole tensor, in place"
                      + (", the mask broadcast over trailing dims" if shaped else ""),
                      "the value is computed for every element (unselected ones keep theirs)",
                      {ctx.path: add_import(ctx.swap({ctx.stmt: line}), "import torch")})
