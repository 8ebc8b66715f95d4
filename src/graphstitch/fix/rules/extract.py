"""Extract + hatch: the break's statement moved into a module-level helper that Dynamo does
not trace (``torch._dynamo.nonstrict_trace``: AOT traces it; ``leaf_function``: it runs
eagerly, with a fake for its output shapes).

What the helper needs is found by scope, not by name: the locals of the function around it
that the statement reads (its parameters, assignments, loop variables, the module itself as
``self``: both hatches take an ``nn.Module`` argument), never a comprehension's or generator
expression's own loop variables (they are not the function's locals); what it returns is
what it binds and the function reads later. A statement that sets state (``self.n += 1``) is
refused: an opaque op must not change its module.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .collectives import touches_collective
from .syntax import add_import, binding_points, bound, locals_read, reads, small, tidy_blank_lines, walk

IO_CALLS = re.compile(r"\b(torch\.save|open|np\.save|pickle\.dump|json\.dump)\s*\(")
# Calls that read or change the host's state (clock, random streams, processes, the
# console): a hatch traced once would freeze their value, or run them at trace time only.
HOST_CALLS = re.compile(r"\b(time|random|datetime|uuid|os|sys|socket|subprocess|secrets)\.\w+\s*\(|"
                        r"\b(np|numpy)\.random\.|\b(print|input)\s*\(|\btorch\.(get|set)_rng_state\b")


def helper_name(ctx: Ctx, stem: str) -> str:
    """A module-level name the module does not use yet (one leading underscore: a name with
    two would be mangled where a method calls it)."""
    taken = {n.value for n in walk(ctx.module) if isinstance(n, cst.Name)}
    name = "_" + re.sub(r"_+", "_", stem).strip("_")
    while name in taken:
        name += "_"
    return name


def helper_def(name: str, params: Sequence[str], stmts: Sequence[cst.BaseStatement], returns: Sequence[str],
               decorator: str | None, comment: str | None = None) -> cst.FunctionDef:
    """``def NAME(PARAMS): STMTS; return RETURNS`` as a node: the statements keep their own
    formatting and take the file's indentation (tabs stay tabs)."""
    fn = cst.parse_statement(f"def {name}({', '.join(params)}):\n    pass\n")
    assert isinstance(fn, cst.FunctionDef)
    body = [stmts[0].with_changes(leading_lines=[]), *stmts[1:]] if stmts else []
    if returns:
        body.append(cst.parse_statement(f"return {', '.join(returns)}\n"))
    decorators = []
    if decorator:
        ws = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(f"# {comment}")) \
            if comment else cst.TrailingWhitespace()
        decorators.append(cst.Decorator(cst.parse_expression(decorator), trailing_whitespace=ws))
    return fn.with_changes(body=cst.IndentedBlock(body=body or [cst.parse_statement("pass\n")]),
                           decorators=decorators)


def place_helper(ctx: Ctx, helpers: Sequence[cst.BaseStatement], swaps: dict[cst.CSTNode, object],
                 *, extra: str | None = None) -> str:
    """The module with SWAPS applied and HELPERS placed before the top-level definition that
    holds the site (module level: Dynamo treats a nested def as a closure of the frame), and
    ``extra`` (a line) after the imports."""
    assert ctx.func is not None
    top: cst.CSTNode = ctx.func
    while ctx.parents.get(top) is not None and not isinstance(ctx.parents.get(top), cst.Module):
        top = ctx.parents[top]
    placed = [h.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2) for h in helpers]
    old = swaps.get(top)
    swaps = {**swaps, top: lambda upd: cst.FlattenSentinel([*placed, old(upd) if callable(old) else upd])}
    code = add_import(tidy_blank_lines(ctx.swap(swaps), ctx.module.code), "import torch")
    return add_import(code, extra) if extra else code


def replace_stmt(ctx: Ctx, stmt: cst.BaseStatement, code: str) -> cst.BaseStatement:
    """A statement written as CODE in the place of STMT (its comments and blank lines kept)."""
    new = cst.parse_statement(code + "\n")
    if isinstance(stmt, cst.SimpleStatementLine) and isinstance(new, cst.SimpleStatementLine):
        return new.with_changes(trailing_whitespace=stmt.trailing_whitespace, leading_lines=stmt.leading_lines)
    body = getattr(stmt, "body", None)
    if isinstance(new, cst.SimpleStatementLine) and isinstance(body, cst.IndentedBlock):
        # a compound statement's header comment stays on the line that replaces it
        return new.with_changes(trailing_whitespace=body.header, leading_lines=getattr(stmt, "leading_lines", ()))
    return new.with_changes(leading_lines=getattr(stmt, "leading_lines", ()))


def state_set(ctx: Ctx, stmts: Sequence[cst.CSTNode]) -> str | None:
    """The first assignment to an attribute or item (``self.n += 1``, ``cache[k] = v``) in STMTS."""
    for st in stmts:
        for n in walk(st):
            if isinstance(n, (cst.AugAssign, cst.Assign, cst.AnnAssign)):
                tgts = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                if any(isinstance(t, (cst.Attribute, cst.Subscript)) for t in tgts):
                    return ctx.code(n).strip()
    return None


def helper_io(ctx: Ctx, stmts: Sequence[cst.BaseStatement]) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of STMTS moved out of the function: the locals they read, and the
    names they bind that the rest of the function reads."""
    assert ctx.func is not None
    found = locals_read(ctx.idx, stmts, ctx.func)
    fp = ctx.func.params
    params = [p.name.value for p in [*fp.posonly_params, *fp.params, *fp.kwonly_params]]
    # the function's parameters in signature order, then its other locals as first read
    inputs = sorted(found, key=lambda n: params.index(n) if n in params else len(params) + found.index(n))
    inside = {n for st in stmts for n in walk(st)}
    end = max(ctx.idx.end[st] for st in stmts)
    later: list[cst.CSTNode] = [n for n in walk(ctx.func.body) if isinstance(n, cst.BaseStatement)
                                and n not in inside and ctx.pos.get(n, 0) > end]
    # A loop around the statements runs them again: what they bind is read on the next turn too.
    loop = ctx.idx.enclosing(stmts[0], (cst.For, cst.While))
    if loop is not None and ctx.idx.contains(ctx.func, ctx.pos[loop]):
        later.append(loop)
    used = reads(later, ctx.parents)
    outputs = [n for n in dict.fromkeys(_bound_in_order(stmts)) if n in used]
    return inputs, outputs


def bound_only_after(ctx: Ctx, stmts: Sequence[cst.BaseStatement], names: Sequence[str]) -> str | None:
    """A name of NAMES (what STMTS read) that the function binds only after them, with no loop
    around them to bind it on an earlier turn: the original reads it only on a path that
    does not run, but a helper call would have to pass it before it exists."""
    assert ctx.func is not None
    loop = ctx.idx.enclosing(stmts[0], (cst.For, cst.While))
    if loop is not None and ctx.idx.contains(ctx.func, ctx.pos[loop]):
        return None
    fp = ctx.func.params
    params = {p.name.value for p in [*fp.posonly_params, *fp.params, *fp.kwonly_params]}
    for extra in (fp.star_arg, fp.star_kwarg):
        if isinstance(extra, cst.Param):
            params.add(extra.name.value)
    start = ctx.idx.span[stmts[0]][0]
    points = binding_points(ctx.idx, [ctx.func.body])
    for n in names:
        if n not in params and points.get(n) and all(p > start for p in points[n]):
            return n
    return None


def _bound_in_order(stmts: Sequence[cst.BaseStatement]) -> list[str]:
    names = bound(stmts)
    seen = [n.value for st in stmts for n in walk(st) if isinstance(n, cst.Name) and n.value in names]
    return list(dict.fromkeys(seen))


@rule("extract-hatch")
def _extract_hatch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """Move the break's statement into a module-level helper under nonstrict_trace (or
    leaf_function + a fake when it loops on data or writes files)."""
    st = ctx.stmt
    if ctx.func is None:
        return
    if isinstance(st, cst.If):
        return  # a data-dependent `if` in a hatch only moves the break (GB0251)
    if any(isinstance(s, (cst.Return, cst.Import, cst.ImportFrom, cst.Raise, cst.Global, cst.Nonlocal))
           for s in small(st)) or any(isinstance(n, (cst.Return, cst.Yield, cst.Await)) for n in walk(st)):
        return
    eff = state_set(ctx, [st])
    if eff:
        yield Refusal("extract-hatch", f"the statement changes state (`{eff}`): inside an opaque op the change "
                      "would not be seen by the compiled code (or not happen at run time)")
        return
    host = HOST_CALLS.search(ctx.code(st))
    if host:
        yield Refusal("extract-hatch", f"the statement calls `{host.group(0).strip()}`: a hatch traced once would "
                      "freeze what it reads from the host (a clock, a random stream) or run it at trace time only")
        return
    inputs, outputs = helper_io(ctx, [st])
    late = bound_only_after(ctx, [st], inputs)
    if late:
        yield Refusal("extract-hatch", f"the statement reads `{late}`, which the function binds only later: "
                      "the helper call would pass a name that does not exist yet")
        return
    io = IO_CALLS.search(ctx.code(st)) is not None
    loops = isinstance(st, (cst.While, cst.For))
    name = helper_name(ctx, f"_{ctx.func.name.value}_{ctx.site.line}")
    call = (f"{', '.join(outputs)} = " if outputs else "") + f"{name}({', '.join(inputs)})"
    swaps: dict[cst.CSTNode, object] = {st: replace_stmt(ctx, st, call)}
    if loops or io:
        # Runs eagerly at run time; its fake gives the output shapes. An output the statement
        # updated from an input has that input's shape.
        if not outputs or any(o not in inputs for o in outputs):
            return  # I/O with no tensor result: io-defer or a region split, never a hatch
        helper = helper_def(name, inputs, [st], outputs, "torch._dynamo.decorators.leaf_function",
                            "graphstitch fix: runs eagerly, opaque to the compiler")
        fake = helper_def(f"_{name}_fake", inputs, [], [], f"{name}.register_fake")
        fake = fake.with_changes(body=cst.IndentedBlock(body=[cst.parse_statement(
            "return " + ", ".join(f"torch.empty_like({o})" for o in outputs) + "\n")]))
        yield Rewrite("extract-hatch", "extract", f"statements moved into {name}() under leaf_function",
                      "runs eagerly once per call, opaque to the compiler (not supported by inductor in torch 2.13); "
                      "the fake says each output is shaped like the input it updates",
                      {ctx.path: place_helper(ctx, [helper, fake], swaps)})
        return
    if not outputs:
        return  # nothing flows out: the statement's effects would happen at trace time only
    helper = helper_def(name, inputs, [st], outputs, "torch._dynamo.nonstrict_trace", "graphstitch fix")
    yield Rewrite("extract-hatch", "extract", f"statement moved into {name}() under nonstrict_trace",
                  "not traced by Dynamo (traced by AOT); inputs/outputs must be tensors, modules and constants",
                  {ctx.path: place_helper(ctx, [helper], swaps)}, ranks=2 if touches_collective(ctx, [st]) else 0)
