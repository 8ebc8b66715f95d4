"""Strategy 3 of PyTorch's graph-break docs, the region split: what cannot be compiled runs
eagerly *between* compiled parts, explicitly, instead of as a graph break. A module's
``forward`` becomes eager glue; the statements before and after the break compile as their
own frames. The split that is left is an eager gap with no break event."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from ...paths import in_project
from .base import Ctx, Refusal, Rewrite, entry_frame, rule
from .extract import IO_CALLS
from .syntax import Index, add_import, bound, reads, swap_code, walk, walk_no_defs


@rule("region-split")
def _region_split(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """Strategy 3, the docs' g/h restructure: the compiled entry (a module's ``forward``)
    becomes eager glue under ``torch.compiler.disable(recursive=False)``; the statements
    before the break and after it move into methods Dynamo compiles as their own frames, and
    the break's statements into a ``torch.compiler.disable`` method between them. The eager
    gap stays, now explicit, with no break event. Neighbouring top-level statements that hold
    other sites of the same entry join the gap (they would break in a compiled part)."""
    site, sites = ctx.site, ctx.sites
    entry = entry_frame(site)
    if entry is None or not in_project(entry.file, ctx.root) or not os.path.isfile(entry.file):
        return
    try:
        idx = ctx.idx if entry.file == ctx.path else Index(MetadataWrapper(cst.parse_module(ctx.read(entry.file))))
    except (cst.ParserSyntaxError, SyntaxError, OSError):
        return
    func = next((n for n, ln in idx.pos.items() if isinstance(n, cst.FunctionDef) and n.name.value == entry.function
                 and ln <= entry.line and isinstance(n.body, cst.IndentedBlock) and idx.contains(n, entry.line)), None)
    if func is None or not isinstance(func.body, cst.IndentedBlock):
        return
    cls = idx.parents.get(idx.parents.get(func, func), None)
    if entry.function != "forward" or not isinstance(cls, cst.ClassDef):
        if IO_CALLS.search(site.code or ""):
            yield Refusal("region-split", f"the compiled entry {entry.function}() is a function: torch.compile(fn) "
                          "traces through a disable() on fn itself, so the split belongs where you call "
                          "torch.compile (compile the parts before and after the I/O, not the whole function)")
        return
    if func.decorators:
        yield Refusal("region-split", f"{cls.name.value}.forward already has decorators; not splitting it")
        return
    body = list(func.body.body)
    lines = {fr.line for fr in map(entry_frame, sites)
             if fr is not None and fr.file == entry.file and fr.function == entry.function} | {entry.line}
    holds = [any(idx.contains(st, ln) for ln in lines) for st in body]
    k = holds.index(True) if True in holds else -1
    if k < 0:
        return
    j = k
    while j + 1 < len(body) and holds[j + 1]:
        j += 1
    fp = func.params
    stars = [a for a in (fp.star_arg, fp.star_kwarg) if isinstance(a, cst.Param)]
    # every parameter by name (a *args tuple or **kwargs dict is passed on as one value)
    params = [p.name.value for p in [*fp.posonly_params, *fp.params, *stars, *fp.kwonly_params]]

    def build(j: int) -> Rewrite | Refusal:
        before, gap, after = body[:k], body[k:j + 1], body[j + 1:]
        if any(_returns(st) for st in before + gap):
            return Refusal("region-split", "a statement before or at the break returns; forward cannot be split there")
        if not _computes(before) and not _computes(after):
            return Refusal("region-split", "nothing before or after the break computes: the whole forward would run "
                           "eagerly")
        self_name = params[0]
        bound_before = bound(before)
        reads_gap, reads_after = reads(gap, idx.parents), reads(after, idx.parents)
        taken = {n.name.value for n in cls.body.body if isinstance(n, cst.FunctionDef)}

        def method(stem: str) -> str:
            name, n = f"_forward_{stem}", 2
            while name in taken:
                name, n = f"_forward_{stem}{n}", n + 1
            return name

        def order(names: set[str], stmts: list[cst.BaseStatement]) -> list[str]:
            """forward's parameters in signature order, then locals as they first appear."""
            seen = [n.value for st in stmts for n in walk(st) if isinstance(n, cst.Name)]
            mine = [n for n in dict.fromkeys(seen) if n in names and n != self_name]
            return sorted(mine, key=lambda n: (params.index(n) if n in params else len(params) + mine.index(n)))

        def helper(name: str, ins: list[str], stmts: list[cst.BaseStatement], outs: list[str] | None,
                   deco: str | None) -> cst.FunctionDef:
            ret = [] if outs is None or not outs else [cst.parse_statement(f"return {', '.join(outs)}\n")]
            first = stmts[0].with_changes(leading_lines=[]) if stmts else None
            fn = cst.parse_statement(f"def {name}({', '.join([self_name, *ins])}):\n    pass\n")
            assert isinstance(fn, cst.FunctionDef)
            decorators = [cst.Decorator(cst.parse_expression(deco))] if deco else []
            return fn.with_changes(body=cst.IndentedBlock(body=[first, *stmts[1:], *ret] if first else ret),
                                   decorators=decorators, leading_lines=[cst.EmptyLine(indent=False)])

        glue: list[cst.BaseStatement] = []
        new_methods: list[cst.FunctionDef] = []

        def call(name: str, ins: list[str], outs: list[str], ret: bool = False) -> None:
            head = "return " if ret else (f"{', '.join(outs)} = " if outs else "")
            glue.append(cst.parse_statement(f"{head}{self_name}.{name}({', '.join(ins)})\n"))
            taken.add(name)

        if before:
            name = method("before")
            ins = order(set(params), before)
            outs = order(bound_before & (reads_gap | reads_after), before)
            new_methods.append(helper(name, ins, before, outs, None))
            call(name, ins, outs)
        name = method("eager")
        ins = order(set(params) | bound_before, gap)
        outs = order(bound(gap) & reads_after, gap)
        new_methods.append(helper(name, ins, gap, outs,
                                  "torch.compiler.disable  # graphstitch fix: runs eagerly, between the compiled parts"))
        call(name, ins, outs)
        if after:
            if _computes(after):
                name = method("after")
                ins = order(set(params) | bound_before | bound(gap), after)
                new_methods.append(helper(name, ins, after, None, None))
                call(name, ins, [], ret=True)
            else:
                glue += [st.with_changes(leading_lines=[]) if isinstance(st, cst.SimpleStatementLine) else st
                         for st in after]
        deco = cst.Decorator(cst.parse_expression("torch.compiler.disable(recursive=False)"),
                             trailing_whitespace=cst.TrailingWhitespace(
                                 whitespace=cst.SimpleWhitespace("  "),
                                 comment=cst.Comment("# graphstitch fix: region split, these lines run eagerly")))
        new_func = func.with_changes(decorators=[deco], body=func.body.with_changes(body=glue))
        code = swap_code(idx.module, {func: cst.FlattenSentinel([new_func, *new_methods])})
        gap_lines = f"{idx.pos[gap[0]]}" + (f"–{idx.pos[gap[-1]]}" if len(gap) > 1 else "")
        return Rewrite("region-split", "split",
                       f"region split: {cls.name.value}.forward runs line {gap_lines} eagerly, the rest compiles "
                       "in separate methods",
                       "the eager gap stays, explicit: no break event, one graph per compiled part",
                       {entry.file: add_import(code, "import torch")})

    first = build(j)
    yield first
    # The statement after the gap reads what the gap made (a PackedSequence, numpy arrays):
    # it may break in a compiled part too, so the gap one statement longer is tried as well.
    if isinstance(first, Rewrite) and j + 2 < len(body) \
            and bound(body[k:j + 1]) & reads([body[j + 1]], idx.parents):
        longer = build(j + 1)
        if isinstance(longer, Rewrite):
            yield longer


def _returns(st: cst.CSTNode) -> bool:
    return any(isinstance(n, (cst.Return, cst.Yield)) for n in walk_no_defs(st))


def _computes(stmts: Sequence[cst.BaseStatement]) -> bool:
    """Anything beyond returning names: a call, arithmetic, indexing."""
    return any(isinstance(n, (cst.Call, cst.BinaryOperation, cst.Subscript, cst.UnaryOperation, cst.Comparison))
               for st in stmts for n in walk(st))
