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


@rule("drop-graph-break")
def _drop_graph_break(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    for s in small(ctx.stmt):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and \
                ctx.code(s.value.func) in ("torch._dynamo.graph_break", "graph_break"):
            yield Rewrite("drop-graph-break", "rewrite", "remove the explicit torch._dynamo.graph_break()",
                          "the break was asked for; removing it merges the two graphs",
                          {ctx.path: ctx.swap({ctx.stmt: cst.parse_statement("pass\n")})})


@rule("numpy-torch")
def _numpy_torch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """numpy calls on a tensor's values with exact torch equivalents."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(ctx.stmt):
        if not isinstance(n, cst.Call):
            continue
        f = ctx.code(n.func)
        if f.startswith(("np.random.", "numpy.random.")):
            yield Refusal("numpy-torch", "numpy's random stream differs from torch's: a torch rewrite cannot be "
                          "verified against eager outputs")
            return
        if f in ("np.argsort", "numpy.argsort") and len(n.args) == 1:
            arg = n.args[0].value
            src = ctx.code(arg)
            src = re.sub(r"(\.detach\(\))?(\.cpu\(\))?\.numpy\(\)$", "", src)
            swaps[n] = cst.parse_expression(f"torch.argsort({src}, stable=True)")
    if swaps:
        yield Rewrite("numpy-torch", "rewrite", "np.argsort(t.numpy()) -> torch.argsort(t, stable=True)",
                      "torch's stable sort orders ties like numpy's default only for distinct values",
                      {ctx.path: add_import(ctx.swap(swaps), "import torch")})


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
