"""Caller-side moves: what does not belong in the compiled region is done by its caller (the
factory, or the user's own call site) and passed in. A generator argument becomes a list
the caller builds."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .syntax import names, swap_code, walk


@rule("pass-sequence")
def _pass_sequence(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A generator or iterator argument -> the caller passes the sequence; iterate inside."""
    if ctx.func is None or ctx.target_file is None or ctx.factory is None:
        return
    text = (ctx.site.gb_type + " " + ctx.site.explanation).lower()
    if not (ctx.site.gb_id in ("GB0811", "GB4347") or "iterator" in text or "generator" in text):
        return
    params = [p.name.value for p in ctx.func.params.params]
    used = names(ctx.stmt) & set(params)
    if not used:
        return
    p = sorted(used)[0]
    tsrc = ctx.read(ctx.target_file) if ctx.target_file != ctx.path else ctx.source
    tmod = cst.parse_module(tsrc) if ctx.target_file != ctx.path else ctx.module
    fac = next((n for n in tmod.body if isinstance(n, cst.FunctionDef) and n.name.value == ctx.factory), None)
    if fac is None:
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(fac):
        if isinstance(n, cst.GeneratorExp):
            swaps[n] = cst.ListComp(elt=n.elt, for_in=n.for_in)
        elif isinstance(n, cst.Call) and tmod.code_for_node(n.func) == "iter" and len(n.args) == 1:
            swaps[n] = n.args[0].value
    if not swaps:
        yield Refusal("pass-sequence", f"no generator or iter() found in {ctx.factory}() to change at the call site")
        return
    nexts = any(isinstance(n, cst.Call) and ctx.code(n.func) == "next" for n in walk(ctx.func))
    files: dict[str, str] = {}
    if ctx.target_file == ctx.path:
        if nexts:
            first = ctx.func.body.body[0]
            swaps[first] = lambda upd: cst.FlattenSentinel(
                [cst.parse_statement(f"{p} = iter({p})  # graphstitch: iterate inside\n"), upd])
        files[ctx.path] = ctx.swap(swaps)
    else:
        files[ctx.target_file] = swap_code(tmod, swaps)
        if nexts:
            first = ctx.func.body.body[0]
            files[ctx.path] = ctx.swap({first: cst.FlattenSentinel(
                [cst.parse_statement(f"{p} = iter({p})  # graphstitch: iterate inside\n"), first])})
    yield Rewrite("pass-sequence", "caller", "the caller passes a list; iteration happens inside the compiled function",
                  "the sequence is built eagerly by the caller (memory for all items at once)", files)
