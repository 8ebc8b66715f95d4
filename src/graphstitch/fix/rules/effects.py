"""Printing, logging and file I/O in compiled code, kept at run time: ``print`` becomes
the print op (formatted in the graph), a log call becomes a plain function Dynamo defers
past the graph (``reorderable_logging_functions``), file I/O that reads no local is
deferred the same way; a function that only checks and reports returns at once when
compiling. The side-effect check proves the text, records and files are the same as eager's."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from typing import cast

import libcst as cst

from .base import Ctx, Refusal, Rewrite, entry_frame, rule, user_frames
from .branches import where_assign
from .extract import IO_CALLS, helper_def, helper_name, place_helper, replace_stmt
from .syntax import add_import, bound, locals_read, reads, small, swap_in, tidy_blank_lines, walk, walk_no_defs


def _print_format(ctx: Ctx, call: cst.Call) -> tuple[str, list[str]] | None:
    """print(...) -> (the format argument's source, the tensor arguments' sources) for
    ``torch._higher_order_ops.print``, which formats tensors at run time. What is not a tensor
    (a shape, a dtype, a length: a trace-time constant) goes into the format itself as an
    f-string part, so Dynamo evaluates it while tracing; each tensor is a ``{}`` placeholder.
    None when the call has no such form (``file=``, ``end=``, a ``sep`` that is not a string)."""
    sep = " "
    for a in call.args:
        if a.star:
            return None
        if a.keyword is not None:
            if a.keyword.value != "sep" or not isinstance(a.value, cst.SimpleString):
                return None
            sep = str(ast.literal_eval(a.value.value))
    pieces: list[str] = []       # parts of one f-string's source (braces escaped where literal)
    tensors: list[str] = []

    def text(t: str) -> str:
        return t.replace("\\", "\\\\").replace("{", "{{{{").replace("}", "}}}}").replace('"', '\\"').replace("\n", "\\n")

    def expr(code: str, spec: str = "", conv: str = "") -> str:
        if spec and spec[-1] in _NUMERIC and code.endswith(".item()"):
            code = code[:-len(".item()")]   # a 0-d tensor formats as its number under a numeric spec
        if _NOT_TENSOR.search(code) or code.isdigit():   # a constant at trace time: formatted now
            return "{" + code + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
        if conv:
            return ""
        tensors.append(code)
        return "{{" + (f":{spec}" if spec else "") + "}}"

    for i, a in enumerate(arg for arg in call.args if arg.keyword is None):
        if i:
            pieces.append(text(sep))
        v = a.value
        if isinstance(v, cst.SimpleString):
            pieces.append(text(str(ast.literal_eval(v.value))))
        elif isinstance(v, cst.FormattedString):
            for p in v.parts:
                if isinstance(p, cst.FormattedStringText):
                    pieces.append(text(ast.literal_eval(re.sub("[fF]", "", v.start) + p.value + v.end)))
                    continue
                assert isinstance(p, cst.FormattedStringExpression)
                spec = "".join(ctx.code(x) for x in p.format_spec) if p.format_spec else ""
                if "{" in spec:
                    return None
                part = expr(ctx.code(p.expression), spec, p.conversion or "")
                if not part:
                    return None
                pieces.append(part)
        else:
            pieces.append(expr(ctx.code(v)))
    return 'f"' + "".join(pieces) + '"', tensors


@rule("print-hop")
def _print_hop(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """print(...) -> torch._higher_order_ops.print(fmt, ...): the output survives at run time."""
    for s in small(ctx.stmt):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and ctx.code(s.value.func) == "print":
            fmt = _print_format(ctx, s.value)
            if fmt is None:
                yield Refusal("print-hop", "print with file=, end=, *args or a !r of a tensor has no print-op form")
                return
            plain = "{" not in fmt[0].replace("{{", "")     # no trace-time part: a plain string
            # the f-string's value: its text with doubled braces made single
            fmt_src = repr(ast.literal_eval(fmt[0][1:]).replace("{{", "{").replace("}}", "}")) if plain else fmt[0]
            args = "".join(", " + a for a in fmt[1])
            new = s.with_changes(value=cst.parse_expression(f"torch._higher_order_ops.print({fmt_src}{args})"))
            yield Rewrite("print-hop", "rewrite", "print -> torch._higher_order_ops.print (printed at run time, in the graph)",
                          "tensors are formatted at run time by the print op, shapes and other constants while "
                          "tracing; verified identical to eager", {ctx.path: add_import(ctx.swap({s: new}), "import torch")})


_NUMERIC = "eEfFgGdi%"
_LOG_LEVELS = ("debug", "info", "warning", "error", "critical", "exception")
_NOT_TENSOR = re.compile(r"^(tuple|list|len|repr|str|dict|set)\(|\.(shape|dtype|device|size\(\)|ndim|__name__)$")


def _percent_format(ctx: Ctx, fs: cst.FormattedString) -> tuple[str, list[str]] | None:
    """An f-string as a %-format and its arguments (``f"{x.shape} {v:.3f}"`` ->
    ``("%s %.3f", ["x.shape", "v"])``), the same text when formatted; None when a part has no
    %-form (a nested format spec)."""
    fmt, args = "", []
    for p in fs.parts:
        if isinstance(p, cst.FormattedStringText):
            text = ast.literal_eval(re.sub("[fF]", "", fs.start) + p.value + fs.end)  # its escapes, evaluated
            fmt += text.replace("{{", "{").replace("}}", "}").replace("%", "%%")
            continue
        assert isinstance(p, cst.FormattedStringExpression)
        spec = "".join(ctx.code(x) for x in p.format_spec) if p.format_spec else ""
        m = re.fullmatch(r"([-+ #0]*\d*)(\.\d+)?([diouxXeEfFgGc%]?)", spec)
        # A precision with no type (`{v:.3}`) formats floats unlike any %-form.
        if m is None or (m.group(2) and not m.group(3)) or (p.conversion and spec):
            return None
        fmt += "%" + (p.conversion or spec + ("" if m.group(3) else "s"))
        args.append(ctx.code(p.expression))
    return fmt, args


def _logger_call(ctx: Ctx) -> tuple[cst.Expr, cst.Call, str, str] | None:
    """The statement's ``X.level(...)`` log call: (statement, call, X's source, level)."""
    for s in small(ctx.stmt):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and isinstance(s.value.func, cst.Attribute) \
                and s.value.func.attr.value in _LOG_LEVELS:
            return s, s.value, ctx.code(s.value.func.value), s.value.func.attr.value
    return None


@rule("log-reorder")
def _log_reorder(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``X.debug(fmt, ...)`` where X is a module-level name (a logger, ``logging``) -> a
    module-level function that Dynamo may defer past the graph (torch 2.13 reorders only
    plain functions registered in ``reorderable_logging_functions``, with tensor, constant
    or string arguments). The record is still emitted on every call; an f-string message
    becomes its %-format and arguments (the same text, formatted when the record is), and
    arguments that are neither tensors nor constants (``tuple(t.shape)``) are formatted by
    ``str()`` first where the format says ``%s`` (the same text)."""
    found = _logger_call(ctx)
    if found is None:
        return
    expr, call, logger, level = found
    if ctx.func is None:
        return
    if "." in logger or "(" in logger or logger in locals_read(ctx.idx, [ctx.stmt], ctx.func):
        yield Refusal("log-reorder", f"`{logger}` is not a module-level name: a function deferred past the graph "
                      "cannot reach it (pass a module-level logger)")
        return
    if any(a.keyword and a.keyword.value != "stacklevel" or a.star for a in call.args) or not call.args:
        yield Refusal("log-reorder", "a log call with keywords (exc_info=, extra=) or *args is not reorderable; "
                      "not rewritten")
        return
    first = call.args[0].value
    pos = [a for a in call.args if not a.keyword]
    if isinstance(first, cst.FormattedString) and len(pos) == 1:
        conv = _percent_format(ctx, first)
        if conv is None:
            yield Refusal("log-reorder", "the f-string message has a part with no %-format form")
            return
        fmt_text, arg_codes = repr(conv[0]), conv[1]
        specs = re.findall(r"%[-#0 +]*\d*(?:\.\d+)?([a-zA-Z%])", conv[0])
    else:
        fmt_text, arg_codes = ctx.code(first), [ctx.code(a.value) for a in pos[1:]]
        specs = re.findall(r"%[-#0 +]*\d*(?:\.\d+)?([a-zA-Z%])", ast.literal_eval(first.value)) \
            if isinstance(first, cst.SimpleString) else []
    specs = [c for c in specs if c != "%"]

    def arg(i: int, code: str, unwrap: bool) -> str:
        if i < len(specs) and specs[i] in _NUMERIC and code.endswith(".item()"):
            return code[:-len(".item()")]   # "%.3f" % a 0-d tensor is its number's text
        if i >= len(specs) or specs[i] != "s":
            return code
        if code.startswith("str(") and code.endswith(")") and unwrap:
            return code[4:-1]          # %s formats it with str() when the record is emitted
        return f"str({code})" if _NOT_TENSOR.search(code) and not code.startswith("str(") else code

    name = helper_name(ctx, f"_{logger}_{level}")
    helper = (f"def {name}(*args):  # graphstitch fix: a plain function Dynamo defers past the graph\n"
              f"    {logger}.{level}(*args, stacklevel=2)\n\n\n"
              f"torch._dynamo.config.reorderable_logging_functions.add({name})\n")
    variants = [False, True] if any(c.startswith("str(") for c in arg_codes) else [False]
    for unwrap in variants:
        args = [fmt_text] + [arg(i, code, unwrap) for i, code in enumerate(arg_codes)]
        new_call = expr.with_changes(value=cst.parse_expression(f"{name}({', '.join(args)})"))
        code = place_helper(ctx, list(cst.parse_module(helper).body), {expr: new_call})
        yield Rewrite("log-reorder", "rewrite", f"{logger}.{level}(...) -> {name}(...), deferred by Dynamo past the graph"
                      + (" (objects passed unformatted)" if unwrap else ""),
                      "the record is emitted after the graph runs, not between its ops; the module registers "
                      f"{name} in torch._dynamo.config.reorderable_logging_functions", {ctx.path: code})


@rule("io-defer")
def _io_defer(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """File I/O that reads no local (a debug line to a log file) -> a module-level function
    registered in ``reorderable_logging_functions``: Dynamo calls it after the graph instead
    of breaking. It still runs on every call, with the same (trace-time constant) arguments;
    the side-effect check compares the files written."""
    st = ctx.stmt
    if ctx.func is None:
        return
    code = ctx.code(st)
    if not IO_CALLS.search(code) or any(isinstance(s, (cst.Return, cst.Import, cst.ImportFrom, cst.Raise))
                                        for s in small(st)) or any(isinstance(n, cst.Return) for n in walk_no_defs(st)):
        return
    inputs = locals_read(ctx.idx, [st], ctx.func)
    inside = set(walk(st))
    later = reads([n for n in ctx.later_in_func() if n not in inside], ctx.parents)
    if inputs or bound([st]) & later:
        yield Refusal("io-defer", "the I/O reads or sets local values (" + ", ".join(sorted(set(inputs)
                      | (bound([st]) & later))) + "): deferring it past the graph would see other values; "
                      "a region split keeps it in place")
        return
    name = helper_name(ctx, f"_{ctx.func.name.value}_io")
    helper = helper_def(name, [], [st], [], None)
    helper = helper.with_changes(leading_lines=[], lines_after_decorators=[])
    register = cst.parse_statement(f"torch._dynamo.config.reorderable_logging_functions.add({name})\n")
    text = place_helper(ctx, [helper, register], {st: replace_stmt(ctx, st, f"{name}()")})
    yield Rewrite("io-defer", "split", f"I/O moved into {name}(), called after the graph",
                  "the I/O runs after the compiled graph instead of between its ops (same files, same "
                  "content: it reads no tensor)", {ctx.path: tidy_blank_lines(text, ctx.module.code)})


def _root(e: cst.BaseExpression) -> str | None:
    """The name an attribute chain starts from (``writer`` in ``writer.add_scalar``)."""
    while isinstance(e, cst.Attribute):
        e = e.value
    return e.value if isinstance(e, cst.Name) else None


_TENSOR_LIBS = ("torch", "np", "numpy", "F", "nn", "dist")
_LEAVES = ("exit", "quit", "abort", "_exit", "kill", "breakpoint", "set_trace")


def _report_calls(st: cst.CSTNode) -> list[cst.Call] | None:
    """The calls of ST when it only reports: calls whose value is dropped (not a tensor
    library's op, not an in-place update), ``pass``, and ``if``s whose every branch only
    reports (``if not torch.isfinite(loss): print(...)``). None when it does anything else."""
    if isinstance(st, cst.SimpleStatementLine):
        calls = []
        for s in st.body:
            if isinstance(s, cst.Pass):
                continue
            if not (isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)):
                return None
            receiver, f = _root(s.value.func), s.value.func
            attr = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else ""
            if receiver is None or receiver in _TENSOR_LIBS or attr.endswith("_") or attr in _LEAVES:
                return None   # a tensor op, an in-place update, or control flow (an exit is not a report)
            calls.append(s.value)
        return calls
    if isinstance(st, (cst.If, cst.Else)):
        blocks: list[cst.CSTNode] = list(st.body.body)
        if isinstance(st, cst.If) and st.orelse is not None:
            blocks.append(st.orelse)
        found: list[cst.Call] = []
        for b in blocks:
            sub = _report_calls(b)
            if sub is None:
                return None
            found += sub
        return found
    return None


def _report_unit(ctx: Ctx) -> tuple[cst.BaseStatement, list[cst.Call]] | None:
    """What to defer: the site's statement when it only reports, widened to each ``if``
    around it (in the same function, no loop between) whose branches all only report: the
    test is data-dependent (GB0170) or guards a report that breaks, and both go with it."""
    assert ctx.func is not None
    unit: cst.BaseStatement = ctx.stmt
    calls = _report_calls(unit)
    if calls is None:
        return None
    while True:
        up = ctx.idx.enclosing(unit, (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.FunctionDef, cst.ClassDef))
        if not isinstance(up, cst.If) or not ctx.idx.contains(ctx.func, ctx.pos[up]):
            break
        wider = _report_calls(up)
        if wider is None:
            break
        unit, calls = up, wider
    return (unit, calls) if calls else None


def _lift_self(ctx: Ctx, parts: list[cst.CSTNode], inputs: list[str]) -> tuple[dict[cst.CSTNode, object], list[str],
                                                                          list[str]] | str:
    """A method's ``self`` cannot cross a deferred call (only tensors and constants do): each
    attribute chain the unit reads from it (``self.name``, ``self.cfg.eps``) becomes an
    argument of its own, read at the call. The swaps, the new parameters, the values passed;
    or why not (``self`` used bare, or a method of it called)."""
    assert ctx.func is not None
    fp = ctx.func.params.params
    me = fp[0].name.value if fp and ctx.idx.enclosing(ctx.func, cst.ClassDef) is not None else None
    if me is None or me not in inputs:
        return {}, inputs, inputs
    swaps: dict[cst.CSTNode, object] = {}
    lifted: dict[str, str] = {}
    for n in (n for part in parts for n in walk(part)):
        if not (isinstance(n, cst.Name) and n.value == me):
            continue
        chain: cst.CSTNode = n
        while isinstance(up := ctx.parents.get(chain), cst.Attribute) and up.value is chain:
            chain = up
        parent = ctx.parents.get(chain)
        if chain is n or isinstance(parent, cst.Call) and parent.func is chain:
            return f"it uses `{ctx.code(chain if chain is not n else parent or n)}`"
        code = ctx.code(chain)
        lifted.setdefault(code, re.sub(r"\W+", "_", code))
        swaps[chain] = cst.Name(lifted[code])
    params = [p for a in inputs for p in ([*lifted.values()] if a == me else [a])]
    values = [v for a in inputs for v in ([*lifted] if a == me else [a])]
    return swaps, params, values


@rule("report-defer")
def _report_defer(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A call made only for its effect, whose value is dropped and whose receiver is a
    module-level name (``writer.add_scalar("loss", loss.item(), step)``, ``meter.update(v)``,
    ``print(f"{acc.item():.2f}")``), or an ``if`` whose branches only make such calls
    (``if torch.isnan(loss): warnings.warn(...)``: GB0170) -> a module-level function taking
    the locals it reads, registered in ``reorderable_logging_functions``: Dynamo calls it
    after the graph with the values the tensors had at the call, and its test, ``.item()``,
    formatting and clock reads run there, eagerly. A method's ``self.x`` reads cross as
    arguments of their own. Only in the frame Dynamo compiles (torch 2.13 drops a deferred
    call made from a function it inlines), and only when the function reads nothing the call
    may change after it."""
    if ctx.func is None:
        return
    found = _report_unit(ctx)
    if found is None:
        return
    st, calls = found
    what = f"if {ctx.code(st.test)}: ..." if isinstance(st, cst.If) else f"{ctx.code(calls[0].func)}(...)"
    yield from _deferred(ctx, "report-defer", st, st, [st], calls, [], f"`{what}` moved into {{name}}(), which "
                         "Dynamo calls after the graph")


@rule("if-where-report")
def _if_where_report(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A data-dependent ``if`` whose branches report and assign names (``if fps[-1] <= 0:
    warnings.warn(...); fpr = torch.zeros_like(t)`` / ``else: fpr = fps / fps[-1]``) -> the
    reports, under the same test, in a function Dynamo calls after the graph (as
    ``report-defer``), and the names selected with ``torch.where`` (as ``if-where``)."""
    if ctx.func is None:
        return
    st: cst.CSTNode | None = ctx.stmt
    if not isinstance(st, cst.If):   # a report inside the branch broke: its `if`
        st = ctx.idx.enclosing(ctx.stmt, (cst.If, cst.For, cst.While, cst.With, cst.Try, cst.FunctionDef))
    if not isinstance(st, cst.If) or isinstance(st.orelse, cst.If) or not ctx.idx.contains(ctx.func, ctx.pos[st]):
        return
    branches = [st.body] + ([st.orelse.body] if isinstance(st.orelse, cst.Else) else [])
    reports: list[list[cst.BaseStatement]] = [[] for _ in branches]
    assigns: list[list[cst.BaseStatement]] = [[] for _ in branches]
    calls: list[cst.Call] = []
    for k, block in enumerate(branches):
        for line in cast(Sequence[cst.BaseStatement], block.body):
            found = _report_calls(line)
            if found:
                reports[k].append(line)
                calls += found
            else:
                assigns[k].append(line)
    if not calls or not any(assigns):
        return
    made = {n for part in assigns for line in part for n in bound([line])}
    if any(made & reads([line], ctx.parents) for part in reports for line in part):
        yield Refusal("if-where-report", "a report reads a name its branch assigns: deferred, it would see the "
                      "value from before the branch")
        return
    def suite(lines: list[cst.BaseStatement], like: cst.BaseSuite) -> cst.IndentedBlock:
        header = like.header if isinstance(like, cst.IndentedBlock) else cst.TrailingWhitespace()
        return cst.IndentedBlock(body=lines or [cst.SimpleStatementLine([cst.Pass()])], header=header)

    orelse = cst.Else(body=suite(reports[1], branches[1])) if len(reports) > 1 and reports[1] else None
    report_if = st.with_changes(body=suite(reports[0], st.body), orelse=orelse)
    assign_if = st.with_changes(body=suite(assigns[0], st.body),
                                orelse=cst.Else(body=suite(assigns[1], branches[1])) if len(assigns) > 1 else None)
    where = where_assign(ctx, assign_if)
    if not isinstance(where, list):
        yield Refusal("if-where-report", "the branches do more than report and assign names")
        return
    parts: list[cst.CSTNode] = [st.test, *(line for part in reports for line in part)]
    yield from _deferred(ctx, "if-where-report", st, report_if, parts, calls, where,
                         f"`if {ctx.code(st.test)}`: its reports moved into {{name}}() (called after the graph), "
                         "its names selected with torch.where")


def _deferred(ctx: Ctx, rule_name: str, st: cst.BaseStatement, unit: cst.BaseStatement, parts: list[cst.CSTNode],
              calls: list[cst.Call], rest: list[cst.BaseStatement], label: str) -> Iterator[Rewrite | Refusal]:
    """The rewrites that move UNIT (ST itself, or ST with only its reports kept; PARTS: the
    original nodes it is made of) into a module-level function registered in
    ``reorderable_logging_functions`` and called in ST's place, followed by REST."""
    assert ctx.func is not None
    if ctx.site.nesting_depth > 1 or len(user_frames(ctx.site)) > 1 or ctx.func.name.value != ctx.site.function:
        yield Refusal(rule_name, f"{ctx.site.function} is inlined into the compiled frame: torch 2.13 drops a "
                      "call deferred from an inlined function")
        return
    receivers = sorted({r for c in calls if (r := _root(c.func)) is not None})
    inputs = locals_read(ctx.idx, parts, ctx.func)
    local = [r for r in receivers if r in inputs]
    if local:
        yield Refusal(rule_name, f"`{local[0]}` is a local object: a call deferred past the graph takes only "
                      "tensors and constants (make it module-level, or a region split keeps the call in place)")
        return
    outer = ctx.idx.enclosing(st, (cst.For, cst.While, cst.FunctionDef))
    loops = [outer] if isinstance(outer, (cst.For, cst.While)) else []
    inside = set(walk(st))
    later = reads([n for n in [*ctx.later_in_func(), *loops] if n not in inside], ctx.parents)
    read_later = [r for r in receivers if r in later]   # a loop runs its earlier lines again
    if read_later:
        yield Refusal(rule_name, f"the function reads `{read_later[0]}` after the call: deferring the call "
                      "past the graph would change what it reads")
        return
    lifted = _lift_self(ctx, parts, inputs)
    if isinstance(lifted, str):
        yield Refusal(rule_name, f"the report reads the object itself ({lifted}): a call deferred past the "
                      "graph takes only tensors and constants")
        return
    swaps, params, values = lifted
    body = cast(cst.BaseStatement, swap_in(unit, swaps)) if swaps else unit
    name = helper_name(ctx, f"_{ctx.func.name.value}_report")
    label = label.format(name=name)
    register = cst.parse_statement(f"torch._dynamo.config.reorderable_logging_functions.add({name})\n")
    tradeoff = (f"the call runs after the compiled graph, on the values its tensors had at the call; the module "
                f"registers {name} in torch._dynamo.config.reorderable_logging_functions")

    def placed(helpers: list[cst.BaseStatement], call: str) -> str:
        new = [replace_stmt(ctx, st, call), *rest]
        return tidy_blank_lines(place_helper(ctx, [*helpers, register], {st: cst.FlattenSentinel(new)}), ctx.module.code)

    # disable: the deferred call runs inside the compiled frame's code, where Dynamo would
    # otherwise compile the helper as a frame of its own (and break at its .item()).
    helper = helper_def(name, params, [body], [], "torch.compiler.disable", "runs eagerly, after the graph")
    yield Rewrite(rule_name, "rewrite", label, tradeoff, {ctx.path: placed([helper], f"{name}({', '.join(values)})")})
    if not values:
        return
    # A number that changes per call (a step counter) turns symbolic after a recompile, and
    # Dynamo defers only tensors and constants (GB0296): it crosses as a float64 tensor with
    # its type's name, and the helper turns it back into that type.
    kinds = [f"{a}_kind" for a in params]
    back = [cst.parse_statement(f"{a} = _undeferred_arg({a}, {k})\n") for a, k in zip(params, kinds)]
    helper = helper_def(name, [x for pair in zip(params, kinds) for x in pair], [*back, body], [],
                        "torch.compiler.disable", "runs eagerly, after the graph")
    have = {n.name.value for n in ctx.module.body if isinstance(n, cst.FunctionDef)}
    shared = [] if "_deferred_arg" in have else list(cst.parse_module(_DEFERRED_ARGS).body)
    call_args = ", ".join(f"*_deferred_arg({a})" for a in values)
    yield Rewrite(rule_name, "rewrite", label + " (numbers passed as tensors)", tradeoff + "; numbers cross "
                  "as float64 tensors (exact for ints below 2**53)",
                  {ctx.path: placed([*shared, helper], f"{name}({call_args})")})


_DEFERRED_ARGS = """\
def _deferred_arg(v):  # graphstitch fix: a number crosses a deferred call as a tensor (it may be symbolic)
    if isinstance(v, (bool, int, float)):
        return torch.as_tensor(v, dtype=torch.float64), type(v).__name__
    return v, ""


def _undeferred_arg(v, kind):
    return {"bool": bool, "int": int, "float": float}[kind](v.item()) if kind else v
"""


# Calls that only report: a logger's methods, warnings.warn, print.
_REPORT_CALL = re.compile(r"^(\w+\.)*(debug|info|warning|warning_once|warn|warn_once|error|exception|critical|log)$|"
                          r"^warnings\.warn$|^print$")


def _only_reports(ctx: Ctx, fn: cst.FunctionDef) -> str | None:
    """Why FN does more than report (None when it only checks and logs/warns): a returned
    value, state set, or a call whose result is dropped that is not a report."""
    for n in walk_no_defs(fn.body):
        if isinstance(n, cst.Return) and n.value is not None:
            return f"it returns a value (`{ctx.code(n).strip()}`)"
        if isinstance(n, (cst.Yield, cst.Await, cst.Global, cst.Nonlocal, cst.Del)):
            return f"`{ctx.code(n).strip()[:40]}`"
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [n.target] if not isinstance(n, cst.Assign) else [t.target for t in n.targets]
            if not all(isinstance(t, (cst.Name, cst.Tuple)) for t in targets):
                return f"it sets state (`{ctx.code(n).strip()[:60]}`)"
        if isinstance(n, cst.Expr) and isinstance(n.value, cst.Call) \
                and not _REPORT_CALL.match(ctx.code(n.value.func)):
            return f"it calls `{ctx.code(n.value.func)}` for its effect"
    return None


@rule("skip-report-when-compiling")
def _skip_report_when_compiling(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A function that only checks its inputs and reports (logs, warns, prints) and returns
    nothing -> it returns at once under ``torch.compiler.is_compiling()``: compiled code never
    traces the check (transformers' own fix for its padding warning). The side-effect check
    refuses it wherever eager would have reported on your calls."""
    fn = ctx.func
    if fn is None or not any(isinstance(n, cst.Expr) and isinstance(n.value, cst.Call)
                             and _REPORT_CALL.match(ctx.code(n.value.func)) for n in walk_no_defs(fn.body)):
        return
    frames = user_frames(ctx.site)
    entry = entry_frame(ctx.site)
    if entry is not None and frames and entry is frames[-1]:
        return   # the compiled entry itself: returning at once would skip its work
    why = _only_reports(ctx, fn)
    if why is not None:
        yield Refusal("skip-report-when-compiling", f"{fn.name.value}() does more than report: {why}")
        return
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    head = small(body[0])[0] if body and isinstance(body[0], cst.SimpleStatementLine) else None
    doc = 1 if isinstance(head, cst.Expr) and isinstance(head.value, (cst.SimpleString, cst.ConcatenatedString)) else 0
    if len(body) <= doc:
        return
    first = body[doc]
    guard = cst.parse_statement("if torch.compiler.is_compiling():  # graphstitch fix: a report, not traced\n"
                                "    return\n")
    yield Rewrite("skip-report-when-compiling", "rewrite",
                  f"{fn.name.value}() only reports: it returns at once under torch.compiler.is_compiling()",
                  "compiled calls do not report (eager calls still do)",
                  {ctx.path: add_import(ctx.swap({first: lambda upd: cst.FlattenSentinel([guard, upd])}),
                                        "import torch")})


@rule("warnings-context-when-compiling")
def _warnings_context_when_compiling(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``with catch_warnings():`` (or a class of this module that subclasses it: a filter
    that silences tracer warnings around a shape read) -> not entered while compiling:
    ``with contextlib.nullcontext() if torch.compiler.is_compiling() else C():``. Dynamo
    cannot trace the filter change (``_warnings._filters_mutated``); a warning the body emits
    unsilenced under compile is a side effect the trial sees. Every such ``with`` of the
    module at once: a break inside ``__enter__`` is reported for each of them."""
    mod = ctx.module
    classes = {n.name.value for n in mod.body if isinstance(n, cst.ClassDef)
               and any(ctx.code(b.value).endswith("catch_warnings") for b in n.bases)}
    wanted = {"warnings.catch_warnings", "catch_warnings", *classes}
    site_items = [it for it in getattr(ctx.stmt, "items", ()) if isinstance(it.item, cst.Call)]
    in_enter = ctx.func is not None and ctx.func.name.value in ("__enter__", "__exit__") and \
        (cls := ctx.idx.enclosing(ctx.func, cst.ClassDef)) is not None and \
        isinstance(cls, cst.ClassDef) and cls.name.value in classes
    on_with = any(ctx.code(it.item.func) in wanted for it in site_items if isinstance(it.item, cst.Call))
    if not (in_enter or on_with or ("warnings" in ctx.site.explanation and site_items)):
        return
    if not on_with and not in_enter:   # Dynamo names the warnings machinery: this with's own contexts
        wanted |= {ctx.code(it.item.func) for it in site_items if isinstance(it.item, cst.Call)}
    swaps: dict[cst.CSTNode, object] = {}
    for n in walk(mod):
        if isinstance(n, cst.With):
            for it in n.items:
                # (`as w` binds the recorded warnings, which a null context would not give)
                if isinstance(it.item, cst.Call) and ctx.code(it.item.func) in wanted and it.asname is None:
                    swaps[it.item] = cst.parse_expression(
                        f"(contextlib.nullcontext() if torch.compiler.is_compiling() else {ctx.code(it.item)})")
    if swaps:
        yield Rewrite("warnings-context-when-compiling", "rewrite",
                      "a warnings-filter context not entered while compiling",
                      "compiled code does not change the warning filters (a warning the body emits is shown)",
                      {ctx.path: add_import(add_import(ctx.swap(swaps), "import contextlib"), "import torch")})
