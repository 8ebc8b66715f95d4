"""Python numbers and lists made from tensors (``.item()``, ``float(t)``, ``.tolist()``,
tensor slice bounds, per-segment loops over ``split``/``unique``): keep the values as tensors
so the graph does not need them on the host."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .branches import tensor_bool, where_assign, where_return
from .syntax import add_import, assigned, bound, names, small, small_stmt, walk

_SCALAR_CASTS = ("float", "int", "bool")
_DATA_DEPENDENT = re.compile(r"[Dd]ata[- ]dependent|GB0170")
# Calls whose positional arguments are sizes (a tensor's methods, torch's factories, range):
# a tensor passed there is read back as a Python int, the same break one line later.
_SIZE_METHODS = frozenset({"view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new_full",
                           "unflatten", "narrow", "tile"})
_SIZE_CALLS = frozenset({"range", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand",
                         "torch.randn", "torch.arange", "torch.linspace", "torch.eye"})


def _unwrap_scalar(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``t.item()`` / ``float(t)`` / ``int(t)`` / ``bool(t)`` -> ``t`` (None when it is none of these)."""
    if isinstance(node, cst.Call):
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value == "item" and not node.args:
            return f.value
        if isinstance(f, cst.Name) and f.value in _SCALAR_CASTS and len(node.args) == 1 \
                and not isinstance(node.args[0].value, (cst.SimpleString, cst.Integer, cst.Float)):
            return node.args[0].value
    return None


# Methods that return a 0-d tensor when called without arguments: their result needs no reshape.
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "norm", "any", "all", "std", "var", "amax", "amin",
                         "argmax", "argmin", "median", "count_nonzero", "numel", "logsumexp"})


def _as_0d(ctx: Ctx, node: cst.BaseExpression) -> cst.BaseExpression:
    """NODE as the 0-d tensor ``.item()`` / ``float()`` read from it: ``t.reshape(())`` (one
    element, as those require; a ``[1]``-shaped value would otherwise broadcast as ``[1]``),
    unless NODE is already 0-d (a reduction over everything, ``t.sum()``)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _REDUCTIONS \
            and not node.args:
        return node
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return cst.parse_expression(f"{ctx.code(node)}.reshape(())")
    return cst.parse_expression(f"({ctx.code(node)}).reshape(())")


def _kept(ctx: Ctx, node: cst.Call, zero_d: bool) -> cst.BaseExpression | None:
    """What replaces NODE (``t.item()``, ``float(t)``, ...): its tensor; with ZERO_D, for
    ``.item()`` (a tensor's own method: the receiver is a tensor) as the 0-d value it read."""
    u = _unwrap_scalar(node)
    if u is None:
        return None
    is_item = isinstance(node.func, cst.Attribute) and node.func.attr.value == "item"
    return _as_0d(ctx, u) if is_item and zero_d else u


@rule("item-keep-tensor")
def item_keep_tensor(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """The tensor as it is, and (when that differs) as the 0-d value ``.item()`` read: a
    ``[1]``-shaped value broadcasts as ``[1]`` where the number did not, while a 0-d integer
    index is read back as a Python number (a break of its own). The trial tells which holds."""
    plain = list(_item_keep_tensor(ctx, zero_d=False))
    yield from plain
    texts = [r.files for r in plain if isinstance(r, Rewrite)]
    yield from (dataclasses.replace(r, label=r.label + ", 0-d as .item() read it")
                for r in _item_keep_tensor(ctx, zero_d=True) if isinstance(r, Rewrite) and r.files not in texts)


def _item_keep_tensor(ctx: Ctx, zero_d: bool) -> Iterator[Rewrite | Refusal]:
    """`.item()` / float(t) / int(t) whose value only feeds tensor math: keep the 0-d tensor.
    At a data-dependent branch on a line that makes a Python bool from tensors (``a and b``,
    ``x if c else y``, ``not t``), keep that bool a tensor too. An ``if`` the value decides
    later becomes ``torch.where`` when it returns in both branches or only assigns names."""
    if not isinstance(ctx.stmt, cst.SimpleStatementLine):
        return
    swaps: dict[cst.CSTNode, object] = {
        n: u for n in walk(ctx.stmt) if isinstance(n, cst.Call) and (u := _kept(ctx, n, zero_d)) is not None}
    what = sorted({ctx.code(c.func).split(".")[-1] + "()" for c in swaps if isinstance(c, cst.Call)})
    if _DATA_DEPENDENT.search(ctx.site.gb_type + " " + ctx.site.gb_id):
        for s in small(ctx.stmt):
            value = getattr(s, "value", None)
            if isinstance(s, (cst.Assign, cst.AnnAssign)) and value is not None:
                new, changed = tensor_bool(ctx, value)
                if changed:
                    swaps[value] = new
                    what.append("Python bool")
    if not swaps:
        return
    scalars = {c: u for c in swaps if isinstance(c, cst.Call) and (u := _kept(ctx, c, zero_d)) is not None}
    made = set(assigned(ctx.stmt))
    for st in ctx.later_in_func():
        test = getattr(st, "test", None)
        if test is not None and made & names(test) and isinstance(st, (cst.If, cst.While)):
            # the `if` it decides returns in both branches, or only assigns names: torch.where too
            where = where_return(ctx, st) if isinstance(st, cst.If) else None
            assign = where_assign(ctx, st) if isinstance(st, cst.If) and where is None else None
            if where is not None:
                swaps.update(where)
                continue
            if isinstance(assign, list):
                swaps[st] = cst.FlattenSentinel(assign)
                continue
            yield Refusal("item-keep-tensor", f"the value of {', '.join(sorted(made))} decides a Python "
                          f"`{'if' if isinstance(st, cst.If) else 'while'}` at line {ctx.pos[st]}: keeping the "
                          "tensor would move the break there")
            return
    if scalars and (use := _size_use(ctx, made)):
        yield Refusal("item-keep-tensor", f"the value of {', '.join(sorted(made))} is a size in {use}: a tensor "
                      "there is read back as a Python number, the same break")
        return
    # Python-number helpers on the value, rewritten to their tensor forms. A list made by a
    # comprehension of kept values is a list of 0-d tensors.
    lists = {t for sm in small(ctx.stmt) if isinstance(sm, cst.Assign) and isinstance(sm.value, cst.ListComp)
             for t in assigned(ctx.stmt)}
    def src(e: cst.BaseExpression) -> str:   # an argument's source, a kept scalar as its tensor
        return ctx.code(scalars[e]) if isinstance(e, cst.Call) and e in scalars else ctx.code(e)

    for n in walk(ctx.stmt):   # round(t.item(), 3) on the site's own line
        if isinstance(n, cst.Call) and ctx.code(n.func) == "round" and len(n.args) == 2 and n.args[0].value in scalars:
            swaps[n] = cst.parse_expression(f"torch.round({src(n.args[0].value)}, decimals={ctx.code(n.args[1].value)})")
    for st in ctx.later_in_func():
        for n in walk(st):
            if not isinstance(n, cst.Call) or not (made & names(n)) or n in swaps:
                continue
            f = n.func
            fname = ctx.code(f)
            if fname in ("math.sqrt", "math.exp", "math.log") and len(n.args) == 1:
                swaps[n] = n.with_changes(func=cst.parse_expression("torch." + fname.split(".")[1]))
            elif fname in ("torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor") and lists \
                    and len(n.args) == 1 and ctx.code(n.args[0].value) in lists:
                swaps[n] = cst.parse_expression(f"torch.stack({ctx.code(n.args[0].value)})")   # a list of kept tensors
            elif fname in ("max", "min") and len(n.args) == 1 and ctx.code(n.args[0].value) in lists:
                swaps[n] = cst.parse_expression(f"torch.stack({ctx.code(n.args[0].value)}).{fname}()")
            elif fname == "round" and len(n.args) == 2 and made & names(n.args[0].value):
                swaps[n] = cst.parse_expression(
                    f"torch.round({ctx.code(n.args[0].value)}, decimals={ctx.code(n.args[1].value)})")
            elif fname in ("max", "min") and len(n.args) == 2:
                a, b = n.args[0].value, n.args[1].value
                var, lim = (a, b) if made & names(a) else (b, a)
                kw = "min" if fname == "max" else "max"
                swaps[n] = cst.parse_expression(f"torch.clamp({ctx.code(var)}, {kw}={ctx.code(lim)})")
    yield Rewrite("item-keep-tensor", "rewrite", f"keep the tensor instead of {'/'.join(what)}",
                  "the value stays a tensor: same math, but its dtype now takes part in type promotion",
                  {ctx.path: add_import(ctx.swap(swaps), "import torch")})
    # int(t) truncates a float value: keep that too (on an integer tensor the plain form is the one).
    ints = [c for c in scalars if ctx.code(c.func) == "int"]
    if ints:
        trunc: dict[cst.CSTNode, object] = dict(swaps)
        trunc.update({c: cst.parse_expression(f"torch.trunc({ctx.code(scalars[c])})") for c in ints})
        yield Rewrite("item-keep-tensor", "rewrite", "keep the 0-d tensor, truncated like int()",
                      "the value stays a (truncated) tensor: same math, but its dtype now takes part in type promotion",
                      {ctx.path: add_import(ctx.swap(trunc), "import torch")})


def _size_use(ctx: Ctx, made: set[str]) -> str | None:
    """Where a name of MADE is a size later in the function (an argument of a size-taking
    call, a slice bound), for people; None when it is not."""
    line: dict[cst.CSTNode, int] = {}   # each use, at the line of the innermost statement holding it
    what: dict[cst.CSTNode, str] = {}
    for st in ctx.later_in_func():
        for n in walk(st):
            if isinstance(n, cst.Call):
                fname = ctx.code(n.func)
                method = isinstance(n.func, cst.Attribute) and n.func.attr.value in _SIZE_METHODS
                if (method or fname in _SIZE_CALLS) and any(made & names(a.value) for a in n.args if not a.keyword):
                    what[n] = f"`{'.' + fname.split('.')[-1] if method else fname}(...)`"
            elif isinstance(n, cst.Slice) and any(b is not None and made & names(b) for b in (n.lower, n.upper)):
                what[n] = "a slice"
            if n in what:
                line[n] = ctx.pos.get(st, 0)
    first = min(what, key=lambda n: line[n], default=None)
    return None if first is None else f"{what[first]} at line {line[first]}"


@rule("tolist-keep-tensor")
def _tolist(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`t.tolist()` used as an index -> index with the tensor."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "tolist" \
                and not n.args:
            parent = ctx.parents.get(n)
            if isinstance(parent, cst.Arg):  # x.split(t.tolist()): a list of sizes is needed; no tensor form here
                continue
            swaps[n] = n.func.value
    if swaps:
        yield Rewrite("tolist-keep-tensor", "rewrite", "index with the tensor instead of .tolist()",
                      "the index stays a tensor: same gather, no Python list",
                      {ctx.path: ctx.swap(swaps)})


def _split_by_tolist(ctx: Ctx) -> tuple[str, str, str] | None:
    """`chunks = X.split(L.tolist())` at the site -> (chunks, X, L)."""
    if not isinstance(ctx.stmt, cst.SimpleStatementLine) or len(ctx.stmt.body) != 1:
        return None
    a = ctx.stmt.body[0]
    if not (isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name)):
        return None
    c = a.value
    if not (isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "split"
            and len(c.args) == 1 and c.args[0].keyword is None and not c.args[0].star):
        return None
    t = c.args[0].value
    if not (isinstance(t, cst.Call) and isinstance(t.func, cst.Attribute) and t.func.attr.value == "tolist"
            and not t.args):
        return None
    return a.targets[0].target.value, ctx.code(c.func.value), ctx.code(t.func.value)


@rule("split-segment-reduce")
def _split_segment_reduce(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`chunks = X.split(L.tolist())` whose only use is `torch.stack([c.mean(0) for c in chunks])`
    (or `.sum(0)`) -> one index_add_ over segment ids: the same per-segment reduction with
    no Python list of sizes (the number of segments is L's static length)."""
    found = _split_by_tolist(ctx)
    if found is None or ctx.func is None:
        return
    chunks, x, lengths = found
    uses = [n for n in walk(ctx.func.body) if isinstance(n, cst.Name) and n.value == chunks
            and not isinstance(ctx.parents.get(n), cst.AssignTarget)]
    stack = None
    if len(uses) == 1:
        comp_for = ctx.parents.get(uses[0])
        comp = ctx.parents.get(comp_for) if isinstance(comp_for, cst.CompFor) else None
        arg = ctx.parents.get(comp) if isinstance(comp, (cst.ListComp, cst.GeneratorExp)) else None
        call = ctx.parents.get(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and ctx.code(call.func) == "torch.stack" and len(call.args) == 1 and \
                isinstance(comp_for, cst.CompFor) and isinstance(comp_for.target, cst.Name) and \
                comp_for.inner_for_in is None and not comp_for.ifs and isinstance(comp, (cst.ListComp, cst.GeneratorExp)):
            elt = comp.elt
            if isinstance(elt, cst.Call) and isinstance(elt.func, cst.Attribute) and \
                    isinstance(elt.func.value, cst.Name) and elt.func.value.value == comp_for.target.value and \
                    elt.func.attr.value in ("mean", "sum") and len(elt.args) == 1 and \
                    elt.args[0].keyword is None and ctx.code(elt.args[0].value) == "0":
                stack = (call, elt.func.attr.value)
    if stack is None:
        yield Refusal("split-segment-reduce", f"`{chunks}` is used other than as torch.stack([c.mean(0) / "
                      f"c.sum(0) for c in {chunks}]): no tensor form of the split is known for that use")
        return
    call, how = stack
    seg, total = f"{chunks}_segment", f"{chunks}_sum"
    lines = (f"{seg} = torch.repeat_interleave(torch.arange({lengths}.shape[0], device={x}.device), {lengths}, "
             f"output_size={x}.shape[0])\n"
             f"{total} = {x}.new_zeros(({lengths}.shape[0],) + tuple({x}.shape[1:])).index_add_(0, {seg}, {x})\n")
    st = ctx.stmt
    assert isinstance(st, cst.SimpleStatementLine)  # _split_by_tolist checked it
    new = [cst.parse_statement(ln + "\n") for ln in lines.splitlines()]
    new[0] = new[0].with_changes(leading_lines=st.leading_lines)
    new[-1] = new[-1].with_changes(trailing_whitespace=st.trailing_whitespace)
    expr = total if how == "sum" else \
        f"{total} / {lengths}.reshape((-1,) + (1,) * ({x}.dim() - 1)).to({total}.dtype)"
    swaps: dict[cst.CSTNode, object] = {ctx.stmt: cst.FlattenSentinel(new), call: cst.parse_expression(expr)}
    yield Rewrite("split-segment-reduce", "rewrite",
                  f"split by {lengths}.tolist() + per-chunk {how}(0) -> index_add_ over segment ids",
                  "one scatter-add instead of a Python list of chunks (float sums may round in another order)",
                  {ctx.path: add_import(ctx.swap(swaps), "import torch")})


@rule("tensor-slice")
def _tensor_slice(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`a[:, s:e] = b` / `a[:, s:s + K]` with tensor bounds -> index_copy_ / index_select."""
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Subscript) or len(n.slice) < 1:
            continue
        els = list(n.slice)
        dim = next((i for i, e in enumerate(els) if isinstance(e.slice, cst.Slice)
                    and (e.slice.lower is not None or e.slice.upper is not None)), None)
        if dim is None or any(not (isinstance(e.slice, cst.Slice) and e.slice.lower is None and e.slice.upper is None)
                              for e in els[:dim]) or len(els) != dim + 1:
            continue
        sl = els[dim].slice
        assert isinstance(sl, cst.Slice)
        if sl.step is not None or sl.lower is None or sl.upper is None:
            continue
        lo, hi = ctx.code(sl.lower), ctx.code(sl.upper)
        base = ctx.code(n.value)
        parent = ctx.parents.get(ctx.parents.get(n, n), None)
        assign = next((s for s in small(ctx.stmt) if isinstance(s, cst.Assign)
                       and any(t.target is n for t in s.targets)), None)
        if assign is not None:
            val = ctx.code(assign.value)
            new = small_stmt(
                f"{base}.index_copy_({dim}, {lo} + torch.arange({val}.shape[{dim}], device={base}.device), {val})")
            yield Rewrite("tensor-slice", "rewrite", "slice assignment with tensor bounds -> index_copy_",
                          "an out-of-range window raises instead of being clipped",
                          {ctx.path: add_import(ctx.swap({assign: new}), "import torch")})
            return
        m = re.fullmatch(rf"{re.escape(lo)}\s*\+\s*(\d+)", hi)
        if m and parent is not None:
            new_e = cst.parse_expression(
                f"{base}.index_select({dim}, {lo} + torch.arange({m.group(1)}, device={base}.device))")
            yield Rewrite("tensor-slice", "rewrite", "window with a tensor start -> index_select",
                          "an out-of-range window raises instead of being clipped",
                          {ctx.path: add_import(ctx.swap({n: new_e}), "import torch")})
            return


@rule("unique-segment-reduce")
def _unique_segment_reduce(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``torch.stack([X[L == c].mean(0) for c in L.unique()])`` (or ``.sum(0)``) -> one
    ``index_add_`` over ``L.unique(return_inverse=True)``: the per-class reduction without a
    Python loop over data-dependent values (the class count is an unbacked size, so the patch
    turns on ``capture_dynamic_output_shape_ops``)."""
    if not isinstance(ctx.stmt, cst.SimpleStatementLine):
        return
    for call in (n for n in walk(ctx.stmt) if isinstance(n, cst.Call) and ctx.code(n.func) == "torch.stack"):
        if len(call.args) != 1 or not isinstance(call.args[0].value, (cst.ListComp, cst.GeneratorExp)):
            continue
        comp = call.args[0].value
        cf = comp.for_in
        if not isinstance(cf.target, cst.Name) or cf.inner_for_in is not None or cf.ifs:
            continue
        it = cf.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "unique"
                and not it.args and isinstance(it.func.value, cst.Name)):
            continue
        labels, v = it.func.value.value, cf.target.value
        elt = comp.elt
        if not (isinstance(elt, cst.Call) and isinstance(elt.func, cst.Attribute) and elt.func.attr.value in ("mean", "sum")
                and len(elt.args) == 1 and ctx.code(elt.args[0].value) == "0"
                and isinstance(elt.func.value, cst.Subscript) and isinstance(elt.func.value.value, cst.Name)
                and len(elt.func.value.slice) == 1 and isinstance(elt.func.value.slice[0].slice, cst.Index)):
            yield Refusal("unique-segment-reduce", "the loop over unique() values is not X[L == c].mean(0) / "
                          ".sum(0): no tensor form is known for it")
            return
        cmp = elt.func.value.slice[0].slice.value
        if isinstance(cmp, cst.Comparison) and len(cmp.comparisons) == 1 and \
                isinstance(cmp.comparisons[0].operator, cst.Equal):
            sides = {ctx.code(cmp.left), ctx.code(cmp.comparisons[0].comparator)}
        else:
            sides = set()
        if sides != {labels, v}:
            yield Refusal("unique-segment-reduce", f"the mask is not `{labels} == {v}`: no tensor form is known")
            return
        x, how = elt.func.value.value.value, elt.func.attr.value
        stem = (assigned(ctx.stmt) or ["groups"])[0]
        classes, seg, counts = f"{stem}_classes", f"{stem}_segment", f"{stem}_counts"
        total = f"{x}.new_zeros(({classes}.shape[0],) + tuple({x}.shape[1:])).index_add_(0, {seg}, {x})"
        expr = total if how == "sum" else f"{total} / {counts}.reshape((-1,) + (1,) * ({x}.dim() - 1)).to({x}.dtype)"
        pre = [cst.parse_statement(f"{classes}, {seg} = {labels}.unique(return_inverse=True)\n")]
        if how == "mean":
            pre.append(cst.parse_statement(f"{counts} = torch.bincount({seg}, minlength={classes}.shape[0])\n"))
        pre[0] = pre[0].with_changes(leading_lines=ctx.stmt.leading_lines)
        swaps: dict[cst.CSTNode, object] = {
            call: cst.parse_expression(expr),
            ctx.stmt: lambda upd, pre=pre: cst.FlattenSentinel([*pre, upd.with_changes(leading_lines=[])])}
        code = add_import(ctx.swap(swaps), "import torch")
        code = add_import(code, "torch._dynamo.config.capture_dynamic_output_shape_ops = True  "
                                 "# graphstitch fix: unique() has a data-dependent size")
        yield Rewrite("unique-segment-reduce", "rewrite",
                      f"per-class {how}(0) over {labels}.unique() -> index_add_ over the inverse indices",
                      "one scatter-add, no Python loop; turns on capture_dynamic_output_shape_ops for the process "
                      "(float sums may round in another order)", {ctx.path: code})
        return


@rule("arange-bound")
def _arange_bound(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``int(t[-1])`` / ``t[0].item()`` of ``t = torch.arange(start, end)`` made from Python
    numbers earlier in the function: the number is the range's own bound, computed on the host
    (``start + math.ceil(end - start) - 1``, or ``start``) instead of read back from the tensor.
    Every such read in the function is rewritten: a chunk loop reads it in each of its loops."""
    if ctx.func is None or not isinstance(ctx.stmt, cst.SimpleStatementLine):
        return
    stmts = [ctx.stmt, *(st for st in ctx.later_in_func() if isinstance(st, cst.SimpleStatementLine))]
    swaps: dict[cst.CSTNode, object] = {}
    why: list[str] = []
    for st in stmts:
        for n in walk(st):
            if isinstance(n, cst.Call) and (new := _bound_of(ctx, st, n)) is not None:
                if isinstance(new, str):
                    why += [new] if st is ctx.stmt else []
                else:
                    swaps[n] = new
    if not set(walk(ctx.stmt)) & swaps.keys():
        yield from (Refusal("arange-bound", w) for w in why[:1])
        return
    yield Rewrite("arange-bound", "rewrite", "compute the arange's bound on the host instead of reading it back",
                  "an empty range raised IndexError at the read; now the number is computed from its bounds",
                  {ctx.path: add_import(ctx.swap(swaps), "import math")})


def _bound_of(ctx: Ctx, st: cst.BaseStatement, call: cst.Call) -> cst.BaseExpression | str | None:
    """CALL (``int(t[-1])``, ``t[0].item()``, ``float(t[0])``) in statement ST as the host
    expression of the bound it reads, when ``t`` is the arange of the last statement before
    ST in an enclosing block that binds it, and nothing between rebinds what the bounds read
    (then why not, for people)."""
    inner = _unwrap_scalar(call)
    if not (isinstance(inner, cst.Subscript) and isinstance(inner.value, cst.Name) and len(inner.slice) == 1
            and isinstance(el := inner.slice[0].slice, cst.Index)):
        return None
    which = ctx.code(el.value).replace(" ", "")
    if which not in ("0", "-1"):
        return None
    name, line = inner.value.value, ctx.pos.get(st, 0)
    before = [s for s in _func_stmts(ctx) if ctx.pos.get(s, 0) < line and name in bound([s])]
    if not before or not isinstance(made := before[-1], cst.SimpleStatementLine) or len(made.body) != 1:
        return None
    a = made.body[0]
    if not (isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name)
            and isinstance(a.value, cst.Call) and ctx.code(a.value.func) == "torch.arange"):
        return None
    args = a.value.args
    if any(x.keyword is not None and x.keyword.value != "device" for x in args) or any(x.star for x in args):
        return None
    pos = [ctx.code(x.value) for x in args if x.keyword is None]
    if len(pos) not in (1, 2) or not isinstance(block := ctx.parents.get(made), cst.IndentedBlock) \
            or not any(ctx.idx.contains(s, line) for s in block.body):
        return None
    # nothing between the arange and the read rebinds a name its bounds read, nor does a loop
    # around the read alone (its next turn would read the old tensor with the new names)
    between: list[cst.CSTNode] = [s for s in _func_stmts(ctx) if ctx.pos.get(made, 0) < ctx.pos.get(s, 0) < line]
    outer = set(_loops(ctx, made))
    between += [loop for loop in _loops(ctx, st) if loop not in outer]
    if again := bound(between) & ({n for x in args for n in names(x.value)} | {name}):
        return f"`{', '.join(sorted(again))}` is bound again between the arange at line {ctx.pos.get(made)} and " \
            f"the read at line {line} (or by a loop around the read): its bounds are not what they were"
    start, end = (pos if len(pos) == 2 else ["0", pos[0]])
    plain = start if re.fullmatch(r"[\w.]+", start) else f"({start})"
    text = plain if which == "0" else \
        (f"math.ceil({end}) - 1" if len(pos) == 1 else f"{plain} + math.ceil({end} - {plain}) - 1")
    cast = call.func.value if isinstance(call.func, cst.Name) else None
    return cst.parse_expression(f"{cast}({text})" if cast else f"({text})")


def _func_stmts(ctx: Ctx) -> list[cst.BaseStatement]:
    assert ctx.func is not None
    return [n for n in walk(ctx.func.body) if isinstance(n, cst.BaseStatement)]


def _loops(ctx: Ctx, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The loops around NODE, innermost first."""
    out = []
    loop = ctx.idx.enclosing(node, (cst.For, cst.While))
    while loop is not None:
        out.append(loop)
        loop = ctx.idx.enclosing(loop, (cst.For, cst.While))
    return out
