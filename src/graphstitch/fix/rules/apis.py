"""One-line API swaps: a legacy or host-side call with an exact traceable twin (the
supported ``sdpa_kernel``, ``clone`` for ``deepcopy``, ``torch.argsort`` for numpy's,
``torch.special`` for scipy's), a lazy import hoisted, an explicit ``graph_break()`` dropped."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .syntax import add_import, names, small, walk


@rule("sdpa-kernel")
def _sdpa_kernel(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """Legacy torch.backends.cuda.sdp_kernel(...) context -> torch.nn.attention.sdpa_kernel([...])."""
    if not isinstance(ctx.stmt, cst.With):
        return
    backends = {"enable_flash": "FLASH_ATTENTION", "enable_math": "MATH",
                "enable_mem_efficient": "EFFICIENT_ATTENTION", "enable_cudnn": "CUDNN_ATTENTION"}
    swaps: dict[cst.CSTNode, object] = {}
    for item in ctx.stmt.items:
        c = item.item
        if isinstance(c, cst.Call) and ctx.code(c.func).endswith("sdp_kernel"):
            on = dict.fromkeys(backends, True)
            for a in c.args:
                if a.keyword and a.keyword.value in on:
                    on[a.keyword.value] = ctx.code(a.value) != "False"
            names = ", ".join(f"torch.nn.attention.SDPBackend.{backends[k]}" for k, v in on.items() if v)
            swaps[c] = cst.parse_expression(f"torch.nn.attention.sdpa_kernel([{names}])")
    if swaps:
        yield Rewrite("sdpa-kernel", "rewrite", "sdp_kernel(...) -> torch.nn.attention.sdpa_kernel([...])",
                      "none: the supported spelling of the same backend choice",
                      {ctx.path: add_import(ctx.swap(swaps), "import torch.nn.attention")})


@rule("hoist-import")
def _hoist_import(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """An import inside the compiled function (at the site, or of a name the site uses) -> at module level."""
    if ctx.func is None:
        return
    used = names(ctx.stmt)
    for line in walk(ctx.func.body):
        imps = [s for s in small(line) if isinstance(s, (cst.Import, cst.ImportFrom))]
        if not imps or not (line is ctx.stmt or used & names(line)):
            continue
        text = ctx.code(line).strip().split("#")[0].strip()
        body = list(getattr(ctx.parents.get(line), "body", None) or [])
        repl: object = cst.RemovalSentinel.REMOVE if len(body) > 1 else cst.parse_statement("pass\n")
        yield Rewrite("hoist-import", "rewrite", f"`{text}` moved to module level",
                      "the module is imported when your file is (an optional dependency becomes required)",
                      {ctx.path: add_import(ctx.swap({line: repl}), text)})
        return


@rule("deepcopy-clone")
def _deepcopy_clone(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if isinstance(n, cst.Call) and ctx.code(n.func) in ("copy.deepcopy", "deepcopy") and len(n.args) == 1:
            swaps[n] = cst.parse_expression(f"{ctx.code(n.args[0].value)}.clone()")
    if swaps:
        yield Rewrite("deepcopy-clone", "rewrite", "copy.deepcopy(tensor) -> tensor.clone()",
                      "clone() stays on the autograd graph (deepcopy of a leaf does not)",
                      {ctx.path: ctx.swap(swaps)})


def _legacy_variable_names(ctx: Ctx) -> set[str]:
    """How this module spells ``torch.autograd.Variable``: its imported names (``from
    torch.autograd import Variable as V``) and the dotted forms its imports allow."""
    out = {"torch.autograd.Variable", "torch.autograd.variable.Variable"}
    for n in walk(ctx.module):
        if not isinstance(n, cst.ImportFrom) or n.module is None or isinstance(n.names, cst.ImportStar):
            continue
        mod = ctx.code(n.module)
        for a in n.names:
            name = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else ctx.code(a.name)
            if mod in ("torch.autograd", "torch.autograd.variable") and ctx.code(a.name) == "Variable":
                out.add(name)
            elif mod == "torch" and ctx.code(a.name) == "autograd":
                out.add(f"{name}.Variable")
    return out


@rule("drop-variable")
def _drop_variable(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``Variable(t)`` (the pre-0.4 autograd wrapper: Dynamo cannot trace its ``__new__``,
    GB0007) -> ``t.detach()``, which is what it returns today (the same storage, no grad);
    ``Variable(t, requires_grad=b)`` -> ``t.detach().requires_grad_(b)``. Every such call in
    the file: they are the same break."""
    if "Variable" not in f"{ctx.site.gb_type} {ctx.site.explanation}":
        return
    spelled = _legacy_variable_names(ctx)
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.module):
        if not isinstance(n, cst.Call) or ctx.code(n.func) not in spelled:
            continue
        pos = [a for a in n.args if a.keyword is None]
        kws = {a.keyword.value: a.value for a in n.args if a.keyword is not None}
        if len(pos) != 1 or pos[0].star or set(kws) - {"requires_grad"}:
            if ctx.idx.contains(n, ctx.site.line):
                yield Refusal("drop-variable", f"`{ctx.code(n)[:60]}` has other arguments than a tensor and "
                              "requires_grad")
                return
            continue   # another line's call: left as it is
        v = pos[0].value
        src = ctx.code(v) if isinstance(v, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({ctx.code(v)})"
        grad = f".requires_grad_({ctx.code(kws['requires_grad'])})" if "requires_grad" in kws else ""
        swaps[n] = cst.parse_expression(f"{src}.detach(){grad}")
    if swaps:
        yield Rewrite("drop-variable", "rewrite", f"Variable(t) -> t.detach() ({len(swaps)} in the file)",
                      "none: it is what Variable(t) returns since torch 0.4 (the same storage, no grad)",
                      {ctx.path: ctx.swap(swaps)})


@rule("drop-graph-break")
def _drop_graph_break(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    for s in small(ctx.stmt):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and \
                ctx.code(s.value.func) in ("torch._dynamo.graph_break", "graph_break"):
            yield Rewrite("drop-graph-break", "rewrite", "remove the explicit torch._dynamo.graph_break()",
                          "the break was asked for; removing it merges the two graphs",
                          {ctx.path: ctx.swap({ctx.stmt: cst.parse_statement("pass\n")})})


# numpy functions of arrays with a torch twin that gives the same values on the same dtype:
# np name -> (torch call, extra keyword arguments).
_NUMPY_TWINS = {
    "abs": ("torch.abs", ""), "absolute": ("torch.abs", ""), "max": ("torch.amax", ""), "amax": ("torch.amax", ""),
    "min": ("torch.amin", ""), "amin": ("torch.amin", ""), "sum": ("torch.sum", ""), "mean": ("torch.mean", ""),
    "sqrt": ("torch.sqrt", ""), "exp": ("torch.exp", ""), "log": ("torch.log", ""), "log1p": ("torch.log1p", ""),
    "expm1": ("torch.expm1", ""), "square": ("torch.square", ""), "sign": ("torch.sign", ""),
    "floor": ("torch.floor", ""), "ceil": ("torch.ceil", ""), "tanh": ("torch.tanh", ""), "sin": ("torch.sin", ""),
    "cos": ("torch.cos", ""), "maximum": ("torch.maximum", ""), "minimum": ("torch.minimum", ""),
    "clip": ("torch.clamp", ""), "argmax": ("torch.argmax", ""), "argmin": ("torch.argmin", ""),
    "std": ("torch.std", "correction=0"), "var": ("torch.var", "correction=0"),
    "argsort": ("torch.argsort", "stable=True"), "isfinite": ("torch.isfinite", ""),
    "isnan": ("torch.isnan", ""), "any": ("torch.any", ""), "all": ("torch.all", ""),
}
_TO_NUMPY = re.compile(r"(\.detach\(\))?(\.cpu\(\))?\.numpy\(\)$")


@rule("numpy-torch")
def _numpy_torch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """numpy calls on a tensor's values (``np.max(np.abs(t.numpy()))``) -> their torch twins
    on the tensor: the values stay in the graph. An argument is a tensor's values when it is
    ``t.numpy()`` or a call this rule converts; numbers pass as they are."""
    swaps: dict[cst.CSTNode, object] = {}
    converted: dict[cst.CSTNode, str] = {}      # a call -> its torch source

    def tensor_src(arg: cst.BaseExpression) -> str | None:
        if arg in converted:
            return converted[arg]
        code = ctx.code(arg)
        if isinstance(arg, cst.Call) and _TO_NUMPY.search(code):
            return _TO_NUMPY.sub("", code)
        return None

    for n in _postorder(ctx.stmt):
        if not isinstance(n, cst.Call):
            continue
        f = ctx.code(n.func)
        if f.startswith(("np.random.", "numpy.random.")):
            yield Refusal("numpy-torch", "numpy's random stream differs from torch's: a torch rewrite cannot be "
                          "verified against eager outputs")
            return
        m = re.fullmatch(r"(?:np|numpy)\.(\w+)", f)
        if not m or m.group(1) not in _NUMPY_TWINS or not n.args or any(a.star for a in n.args):
            continue
        first = tensor_src(n.args[0].value)
        if first is None:
            continue
        rest = []
        for a in n.args[1:]:
            src = tensor_src(a.value) or ctx.code(a.value)
            rest.append(f"{ctx.code(a.keyword)}={src}" if a.keyword else src)
        fn, extra = _NUMPY_TWINS[m.group(1)]
        args = ", ".join([first, *rest, *([extra] if extra else [])]).replace("axis=", "dim=")
        converted[n] = f"{fn}({args})"
    # Only the outermost converted calls are swapped (the inner ones are in their text).
    for n, src in converted.items():
        if not any(n is not o and n in set(walk(o)) for o in converted):
            swaps[n] = cst.parse_expression(src)
    if swaps:
        yield Rewrite("numpy-torch", "rewrite", "numpy on a tensor's values -> the torch twins on the tensor",
                      "the values stay a tensor (in the graph); numpy's and torch's reductions may round in "
                      "another order", {ctx.path: add_import(ctx.swap(swaps), "import torch")})


def _postorder(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for c in node.children:
        yield from _postorder(c)
    yield node


# scipy.special functions with a torch.special twin of the same name and arguments.
_SCIPY_SPECIAL = ("expit", "logit", "erf", "erfc", "erfinv", "ndtr", "ndtri", "log_ndtr", "gammaln", "i0", "i0e",
                  "i1", "i1e", "xlogy", "xlog1py", "entr", "sinc")


@rule("scipy-special-torch")
def _scipy_special_torch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`scipy.special.f(v)` (a C ufunc Dynamo cannot trace) -> `torch.special.f` on float64
    0-d tensors: the same double-precision value, kept as a tensor in the graph."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Call):
            continue
        m = re.fullmatch(r"(?:scipy\.)?special\.(\w+)", ctx.code(n.func))
        if not m or m.group(1) not in _SCIPY_SPECIAL or not n.args or \
                any(a.keyword is not None or a.star for a in n.args):
            continue
        args = ", ".join(f"torch.as_tensor({ctx.code(a.value)}, dtype=torch.float64)" for a in n.args)
        swaps[n] = cst.parse_expression(f"torch.special.{m.group(1)}({args})")
    if swaps:
        yield Rewrite("scipy-special-torch", "rewrite", "scipy.special.f(v) -> torch.special.f on float64 tensors",
                      "the value is a 0-d float64 tensor, not a numpy float (the last bit may differ: verified "
                      "against eager outputs)", {ctx.path: add_import(ctx.swap(swaps), "import torch")})


def torch_call_args(ctx: Ctx, n: cst.Call, name: str, params: tuple[str, ...]
                    ) -> list[cst.BaseExpression | None] | None:
    """The arguments of ``torch.NAME(...)`` or ``x.NAME(...)`` (x the first) bound to PARAMS
    by position or keyword (None where not given), or None when N is another call."""
    f = ctx.code(n.func)
    method = isinstance(n.func, cst.Attribute) and n.func.attr.value == name and f != f"torch.{name}"
    if (f != f"torch.{name}" and not method) or any(a.star for a in n.args):
        return None
    pos = ([n.func.value] if method and isinstance(n.func, cst.Attribute) else []) + \
        [a.value for a in n.args if a.keyword is None]
    kw = {a.keyword.value: a.value for a in n.args if a.keyword}
    return [pos[i] if i < len(pos) else kw.get(p) for i, p in enumerate(params)]


@rule("bincount-fixed-length")
def _bincount_fixed_length(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``torch.bincount(x, weights, minlength=m)`` (a data-dependent output length) -> counts
    into a fixed ``m``-long tensor with ``index_add``: the same counts wherever every value is
    below ``m``, a static shape Dynamo can trace."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Call) or not ctx.idx.contains(n, ctx.site.line):
            continue
        bound = torch_call_args(ctx, n, "bincount", ("input", "weights", "minlength"))
        if bound is None:
            continue
        x, weights, length = bound
        if x is None or length is None:
            yield Refusal("bincount-fixed-length", "bincount without minlength: its length is the data's maximum")
            return
        xs, m = ctx.code(x), ctx.code(length)
        if weights is not None and ctx.code(weights).strip() != "None":
            w = ctx.code(weights)
            new = f"torch.zeros({m}, dtype={w}.dtype, device={xs}.device).index_add(0, {xs}, {w})"
        else:
            new = f"torch.zeros({m}, dtype=torch.long, device={xs}.device).index_add(0, {xs}, torch.ones_like({xs}))"
        swaps[n] = cst.parse_expression(new)
    if swaps:
        yield Rewrite("bincount-fixed-length", "rewrite", "bincount -> index_add into a minlength-long tensor",
                      "assumes every value is below minlength (bincount would grow its output past it; here it "
                      "raises)", {ctx.path: add_import(ctx.swap(swaps), "import torch")})


@rule("generator-to-list")
def _generator_to_list(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A generator expression passed to a call Dynamo cannot resume (GB8335, "generator
    reconstruction with mutations": the consumer iterates it with next() or stops midway)
    -> a list comprehension: the items are made first, then consumed."""
    text = (ctx.site.gb_id + " " + ctx.site.gb_type).lower()
    if "gb8335" not in text and "generator" not in text:
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if isinstance(n, cst.Call) and ctx.idx.contains(n, ctx.site.line):
            for a in n.args:
                if isinstance(a.value, cst.GeneratorExp) and a.value not in swaps:
                    g = a.value
                    # `f(x for x in xs)` has no parentheses of its own: the list's brackets are them
                    swaps[g] = cst.ListComp(elt=g.elt, for_in=g.for_in)
    if swaps:
        yield Rewrite("generator-to-list", "rewrite", "a generator expression argument -> a list comprehension",
                      "the items are all made before the call consumes them (memory for all at once; a "
                      "consumer that stops early no longer saves the rest)", {ctx.path: ctx.swap(swaps)})


@rule("new-tensor-without-grad-flag")
def _new_tensor_without_grad_flag(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A tensor made inside the compiled code with ``requires_grad=...`` (GB0225: Dynamo
    cannot create a leaf that requires grad), typically a loss accumulator that later terms
    add to -> the same tensor without the flag: what is added to it carries the gradient."""
    if "GB0225" not in ctx.site.gb_id and "requires_grad" not in ctx.site.gb_type:
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if isinstance(n, cst.Call) and ctx.idx.contains(n, ctx.site.line) and \
                any(a.keyword is not None and a.keyword.value == "requires_grad" for a in n.args):
            args = [a for a in n.args if not (a.keyword is not None and a.keyword.value == "requires_grad")]
            if args:
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            swaps[n] = n.with_changes(args=args)
    if swaps:
        yield Rewrite("new-tensor-without-grad-flag", "rewrite", "a new tensor without requires_grad=",
                      "the new tensor is not a leaf that requires grad: an output only it made require grad no "
                      "longer does (terms added to it still carry theirs)", {ctx.path: ctx.swap(swaps)})


@rule("check-tensor-all-async")
def _check_tensor_all_async(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``torch._check_tensor_all(cond)`` (it reads the result on the host: ``.item()``,
    GB0124) -> ``torch._assert_async(torch.all(cond))``: the same check, kept in the graph."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if isinstance(n, cst.Call) and ctx.code(n.func) == "torch._check_tensor_all" and n.args and \
                n.args[0].keyword is None and not n.args[0].star and ctx.idx.contains(n, ctx.site.line):
            swaps[n] = cst.parse_expression(f"torch._assert_async(torch.all({ctx.code(n.args[0].value)}))")
    if swaps:
        yield Rewrite("check-tensor-all-async", "rewrite",
                      "torch._check_tensor_all(cond) -> torch._assert_async(torch.all(cond))",
                      "the check's message is not shown when it fails (an assertion error from the graph)",
                      {ctx.path: ctx.swap(swaps)})


# A host read of a tensor value, as Dynamo reports it (GB0124 `.item()`, GB0033 the
# `_local_scalar_dense` a 0-d index or an int() call is lowered to).
_HOST_READ = re.compile(r"GB0124|GB0033|item\(\)|data.dependent", re.I)


def _host_read(ctx: Ctx) -> bool:
    return bool(_HOST_READ.search(f"{ctx.site.gb_id} {ctx.site.gb_type} {ctx.site.explanation}"))


def _as_tensor(ctx: Ctx, e: cst.BaseExpression) -> str | None:
    """The source of E with its host reads undone (``int(t)`` -> ``t.long()``, ``t.item()``
    -> ``t``), or None when E reads nothing from a tensor this way."""
    class Undo(cst.CSTTransformer):
        found = 0

        def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
            f = updated_node.func
            if isinstance(f, cst.Attribute) and f.attr.value == "item" and not updated_node.args:
                Undo.found += 1
                return f.value
            if isinstance(f, cst.Name) and f.value == "int" and len(updated_node.args) == 1 and \
                    updated_node.args[0].keyword is None and not updated_node.args[0].star:
                Undo.found += 1
                inner = updated_node.args[0].value
                return cst.parse_expression(f"({cst.Module([]).code_for_node(inner)}).long()")
            return updated_node

    out = e.visit(Undo())
    return ctx.module.code_for_node(out) if Undo.found and isinstance(out, cst.BaseExpression) else None


@rule("roll-gather")
def _roll_gather(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``torch.roll(x, int(t), d)`` with a shift read from a tensor (a host read per call)
    -> the same permutation as a gather: ``x.index_select(d, (arange(n) - t) % n)``, the
    shift kept a tensor."""
    if not _host_read(ctx):
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Call) or not ctx.idx.contains(n, ctx.site.line):
            continue
        bound = torch_call_args(ctx, n, "roll", ("input", "shifts", "dims"))
        if bound is None:
            continue
        x, shift, dim = bound
        if x is None or shift is None or dim is None or not isinstance(x, (cst.Name, cst.Attribute)):
            continue
        s, d, xs = _as_tensor(ctx, shift), ctx.code(dim), ctx.code(x)
        if s is None or not re.fullmatch(r"-?\d+", d.strip()):
            continue   # a tuple of shifts or dims has no one gather
        swaps[n] = cst.parse_expression(
            f"{xs}.index_select({d}, (torch.arange({xs}.size({d}), device={xs}.device) - ({s})) % {xs}.size({d}))")
    if swaps:
        yield Rewrite("roll-gather", "rewrite", "torch.roll by a tensor's value -> index_select with a rolled arange",
                      "a gather instead of a roll (one index tensor per call); the shift stays a tensor",
                      {ctx.path: add_import(ctx.swap(swaps), "import torch")})


@rule("index-select-tensor")
def _index_select_tensor(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``x[:, t]`` with a 0-d integer tensor ``t`` (torch reads it back as a Python int:
    ``_local_scalar_dense``, GB0033) -> ``x.index_select(1, t.reshape(1)).squeeze(1)``: the
    same slice, the index kept a tensor. Only where every element before it is ``:`` or a
    plain index (a name, a number: ``x[b, t[c]]`` -> ``x[b].index_select(0, ...)``; were
    ``b`` a tensor of several indices, the outputs would differ and the trial says so)."""
    if "GB0033" not in ctx.site.gb_id and "local_scalar_dense" not in ctx.site.explanation:
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Subscript) or not ctx.idx.contains(n, ctx.site.line) or n in swaps:
            continue
        elems = list(n.slice)
        k = next((i for i, e in enumerate(elems) if isinstance(e.slice, cst.Index)
                  and isinstance(e.slice.value, (cst.Subscript, cst.Call))), None)
        if k is None or any(not (_full(ctx, e.slice) or _plain_index(e.slice)) for e in elems[:k]) or \
                any(not (_full(ctx, e.slice) or ctx.code(e.slice).strip() == "...") for e in elems[k + 1:]):
            continue
        idx = elems[k].slice
        assert isinstance(idx, cst.Index)
        if idx.star is not None or (k == 0 and len(elems) == 1):
            continue   # x[t] alone is as often a list's or dict's item: only x[:, t[i]] / x[:, int(t)]
        t = _as_tensor(ctx, idx.value) or ctx.code(idx.value)
        base = ctx.code(n.value)
        base = base if isinstance(n.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) else f"({base})"
        dim = sum(_full(ctx, e.slice) for e in elems[:k])
        if dim < k:   # plain indices first: select them, then gather along what is left
            base = f"{base}[{', '.join(ctx.code(e.slice).strip() for e in elems[:k])}]"
        swaps[n] = cst.parse_expression(f"{base}.index_select({dim}, ({t}).reshape(1)).squeeze({dim})")
    if swaps:
        yield Rewrite("index-select-tensor", "rewrite", "x[:, t] with a 0-d tensor t -> x.index_select(dim, t)",
                      "a gather instead of a view (the slice is a copy: writes through it no longer reach x)",
                      {ctx.path: ctx.swap(swaps)})


@rule("index-write-tensor")
def _index_write_tensor(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``x[t] = v`` / ``x[:, t] = v`` with a 0-d integer tensor ``t`` (``t = idx[j]``: torch
    reads it back as a Python int, GB0033) -> ``x.index_fill_(dim, t.reshape(1), v)`` for a
    number (or 0-d) ``v``, ``x.index_copy_(dim, t.reshape(1), v.unsqueeze(dim))`` for a slice:
    the same in-place write, the index kept a tensor. The trial tells which one ``v`` is."""
    if "GB0033" not in ctx.site.gb_id and "local_scalar_dense" not in ctx.site.explanation:
        return
    if (found := _subscript_write(ctx)) is None:
        return
    st, assign, n = found
    elems = list(n.slice)
    k = next((i for i, e in enumerate(elems) if isinstance(e.slice, cst.Index)), None)
    if k is None or k != len(elems) - 1 or any(not _full(ctx, e.slice) for e in elems[:k]):
        return
    idx = elems[k].slice
    assert isinstance(idx, cst.Index)
    if idx.star is not None or not isinstance(idx.value, (cst.Subscript, cst.Call)):
        return   # a name may be a dict key as often as a tensor: only t[j] / int(t)
    t = _as_tensor(ctx, idx.value) or ctx.code(idx.value)
    base = ctx.code(n.value)
    if not isinstance(n.value, (cst.Name, cst.Attribute, cst.Subscript)):
        return
    v = ctx.code(assign.value)
    v = v if isinstance(assign.value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.Integer, cst.Float)) \
        else f"({v})"
    for how, code in (("index_fill_", f"{base}.index_fill_({k}, ({t}).reshape(1), {v})"),
                      ("index_copy_", f"{base}.index_copy_({k}, ({t}).reshape(1), {v}.unsqueeze({k}))")):
        new = st.with_changes(body=[cst.Expr(cst.parse_expression(code))])
        yield Rewrite("index-write-tensor", "rewrite", f"x[t] = v with a 0-d tensor t -> x.{how}(dim, t, v)",
                      "the same in-place write; the index stays a tensor", {ctx.path: ctx.swap({st: new})})


@rule("slice-bound-mask-fill")
def _slice_bound_mask_fill(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``x[i, :, t:] = v`` whose slice bound is read from a tensor (``t = lengths[i]``: torch
    reads it back as a Python int) -> the same write as ``masked_fill_`` of the positions
    compared with ``t`` (by Python's slice rules: a negative bound counts from the end), the
    bound kept a tensor. Elements before the slice: ``:`` or plain indices; ``v`` a number or
    a name (a 0-d tensor: the trial tells)."""
    if not _host_read(ctx):
        return
    if (found := _subscript_write(ctx)) is None:
        return
    st, assign, n = found
    elems = list(n.slice)
    sl = elems[-1].slice
    if not isinstance(sl, cst.Slice) or sl.step is not None or not isinstance(n.value, (cst.Name, cst.Attribute)):
        return
    bounds = [b for b in (sl.lower, sl.upper) if b is not None]
    if not any(isinstance(b, (cst.Subscript, cst.Call)) for b in bounds) or \
            not all(isinstance(b, (cst.Subscript, cst.Call, cst.Name, cst.Integer)) for b in bounds) or \
            any(not (_full(ctx, e.slice) or _plain_index(e.slice)) for e in elems[:-1]):
        return
    v = assign.value
    if not isinstance(v, (cst.Integer, cst.Float, cst.Name, cst.Attribute)) and not (
            isinstance(v, cst.UnaryOperation) and isinstance(v.expression, (cst.Integer, cst.Float))):
        return
    base, d = ctx.code(n.value), sum(_full(ctx, e.slice) for e in elems[:-1])
    taken = {x.value for x in walk(ctx.module) if isinstance(x, cst.Name)}
    view, at = (next(f"{stem}{'_' * i}" for i in range(9) if f"{stem}{'_' * i}" not in taken) for stem in ("_view", "_at"))
    size = f"{view}.size({d})"
    keep = [f"({at} {op} ({b}) + {size} * (({b}) < 0))"
            for op, bound in ((">=", sl.lower), ("<", sl.upper)) if bound is not None
            for b in [_as_tensor(ctx, bound) or ctx.code(bound)]]
    held = keep[0] if len(keep) == 1 else f"({' & '.join(keep)})"
    prefix = ", ".join(ctx.code(e.slice).strip() for e in elems[:-1])
    code = (f"{view} = {base}[{prefix}]\n" if prefix else f"{view} = {base}\n") + \
        f"{at} = torch.arange({size}, device={view}.device)\n" + \
        f"{view}.masked_fill_({held}.reshape((-1,) + (1,) * ({view}.dim() - {d + 1})), {ctx.code(v)})\n"
    new = list(cst.parse_module(code).body)
    new[0] = new[0].with_changes(leading_lines=st.leading_lines)
    yield Rewrite("slice-bound-mask-fill", "rewrite", "x[..., t:] = v with a tensor bound t -> masked_fill_ of x[...]",
                  "compares every position with the bound instead of slicing; the bound stays a tensor",
                  {ctx.path: add_import(ctx.swap({st: cst.FlattenSentinel(new)}), "import torch")})


def _subscript_write(ctx: Ctx) -> tuple[cst.SimpleStatementLine, cst.Assign, cst.Subscript] | None:
    """The site's statement when it is one ``x[...] = v``: (statement, assignment, target)."""
    st = ctx.stmt
    if not isinstance(st, cst.SimpleStatementLine) or len(st.body) != 1 or not isinstance(st.body[0], cst.Assign):
        return None
    assign = st.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Subscript):
        return None
    return st, assign, assign.targets[0].target


def _plain_index(s: cst.BaseSlice) -> bool:
    return isinstance(s, cst.Index) and s.star is None and isinstance(s.value, (cst.Name, cst.Integer))


def _full(ctx: Ctx, s: cst.BaseSlice) -> bool:
    return isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None


@rule("full-tensor-fill")
def _full_tensor_fill(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``torch.full_like(x, v)`` / ``x.new_full(size, v)`` whose fill value is computed from a
    tensor (read back as a number: GB0033) -> zeros of the same kind plus ``v`` in place:
    the value stays a tensor and the result keeps the dtype ``full`` gave it."""
    if not _host_read(ctx):
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Call) or not ctx.idx.contains(n, ctx.site.line) or any(a.star for a in n.args):
            continue
        f = ctx.code(n.func)
        pos = [a for a in n.args if a.keyword is None]
        if f == "torch.full_like" and len(pos) == 2:
            rest = [ctx.code(a) for a in n.args if a.keyword is not None]
            head = f"torch.zeros_like({', '.join([ctx.code(pos[0].value)] + [r.rstrip(', ') for r in rest])})"
        elif isinstance(n.func, cst.Attribute) and n.func.attr.value == "new_full" and len(pos) == 2:
            rest = [ctx.code(a) for a in n.args if a.keyword is not None]
            head = f"{ctx.code(n.func.value)}.new_zeros({', '.join([ctx.code(pos[0].value)] + [r.rstrip(', ') for r in rest])})"
        else:
            continue
        v = pos[1].value
        if isinstance(v, (cst.Integer, cst.Float)) or (isinstance(v, cst.UnaryOperation) and
                                                        isinstance(v.expression, (cst.Integer, cst.Float))):
            continue
        swaps[n] = cst.parse_expression(f"{head}.add_({_as_tensor(ctx, v) or ctx.code(v)})")
    if swaps:
        yield Rewrite("full-tensor-fill", "rewrite", "full_like(x, v) with a tensor-made v -> zeros_like(x).add_(v)",
                      "none: the same values and dtype, the fill value kept a tensor",
                      {ctx.path: add_import(ctx.swap(swaps), "import torch")})


# numpy functions of one Python number with a `math` twin (Dynamo runs numpy on scalars as
# 0-d tensors: `.astype(...).item()` is then a host read, or an op returning a non-tensor).
_MATH_TWINS = {"log": "math.log", "log2": "math.log2", "log10": "math.log10", "log1p": "math.log1p",
               "exp": "math.exp", "expm1": "math.expm1", "sqrt": "math.sqrt", "ceil": "math.ceil",
               "floor": "math.floor", "trunc": "math.trunc", "sin": "math.sin", "cos": "math.cos",
               "tan": "math.tan", "tanh": "math.tanh", "abs": "abs", "fabs": "math.fabs"}
_NP_INT = re.compile(r"""['"]?(?:np\.|numpy\.)?u?int(?:8|16|32|64)?['"]?$""")


@rule("numpy-scalar-math")
def _numpy_scalar_math(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """numpy on Python numbers (``np.ceil(np.log(n)).astype('int').item()``: sizes computed
    from shapes) -> the same in ``math`` (``int(math.ceil(math.log(n)))``): plain Python
    numbers Dynamo folds while tracing. A tensor's values (``t.numpy()``) are numpy-torch's."""
    if "numpy" in ctx.code(ctx.stmt) and ".numpy()" in ctx.code(ctx.stmt):
        return

    def conv(e: cst.BaseExpression) -> str | None:
        """E's math form, when E is a numpy scalar expression this rule knows."""
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
            base, attr = e.func.value, e.func.attr.value
            if attr == "item" and not e.args:
                return conv(base)
            if attr == "astype" and len(e.args) == 1 and _NP_INT.match(ctx.code(e.args[0].value)):
                inner = conv(base)
                return f"int({inner})" if inner is not None else None
            m = re.fullmatch(r"(?:np|numpy)\.(\w+)", ctx.code(e.func))
            if m and m.group(1) in _MATH_TWINS and len(e.args) == 1 and not e.args[0].keyword and not e.args[0].star:
                arg = conv(e.args[0].value) or ctx.code(e.args[0].value)
                if any(isinstance(n, cst.Call) and ctx.code(n.func).startswith(("np.", "numpy."))
                       for n in walk(cst.parse_expression(arg))):
                    return None   # an argument left in numpy: not all scalars here
                return f"{_MATH_TWINS[m.group(1)]}({arg})"
        return None

    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if n in swaps or any(n in set(walk(o)) for o in swaps) or not isinstance(n, cst.Call) or \
                not ctx.idx.contains(n, ctx.site.line):
            continue
        got = conv(n)
        if got is not None and ctx.code(n).startswith(("np.", "numpy.")) or (got is not None and ".item()" in ctx.code(n)):
            swaps[n] = cst.parse_expression(got)
    if swaps:
        yield Rewrite("numpy-scalar-math", "rewrite", "numpy on Python numbers -> math",
                      "none: the same value as a Python number (math's float rounding equals numpy's for "
                      "these functions)", {ctx.path: add_import(ctx.swap(swaps), "import math")})
