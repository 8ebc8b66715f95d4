"""Source rewrites for break sites (fix engine v2): libcst rules keyed by GB id and code
pattern. Each rule proposes a patch to the user's source (formatting and comments kept);
nothing here decides whether a patch is right: every proposal is censused on a patched copy
(``patches.census_on_copy``) and judged like any other trial. No torch import.

Strategies, best first: ``rewrite`` (the break is gone from the code), ``extract`` (the
break's statements moved into a helper under an escape hatch), ``split`` (the unsupported
part runs outside the compiled region).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..model import Site, StackEntry
from ..paths import in_project, is_library, is_torch_file_path

STRATEGY_RANK = {"rewrite": 0, "extract": 1, "hatch": 1, "split": 2, "config": 3}


@dataclass
class Rewrite:
    """One proposed source patch for one site."""
    rule: str                 # the rule's id, e.g. "item-keep-tensor"
    strategy: str             # "rewrite" | "extract" | "split"
    label: str                # what it does, for people
    tradeoff: str             # one line: what it costs
    files: dict[str, str] = field(default_factory=dict)   # path -> new text (kept out of JSON)
    ranks: int = 0            # also verified on this many gloo ranks (a collective rewrite)


@dataclass
class Refusal:
    """A rule that matched the site but will not propose a patch, and why."""
    rule: str
    reason: str


@dataclass
class Ctx:
    site: Site
    path: str
    source: str
    module: cst.Module
    pos: dict[cst.CSTNode, int]              # node -> start line
    parents: dict[cst.CSTNode, cst.CSTNode]
    stmt: cst.CSTNode                        # the statement at the site's line
    func: cst.FunctionDef | None
    target_file: str | None = None
    factory: str | None = None
    overlay: dict[str, str] = field(default_factory=dict)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def later_in_func(self) -> list[cst.CSTNode]:
        """Statements of the enclosing function after the site's (any depth)."""
        if self.func is None:
            return []
        line = self.pos[self.stmt]
        return [n for n in _walk(self.func.body) if isinstance(n, cst.BaseStatement) and self.pos.get(n, 0) > line]


Rule = Callable[[Ctx], Iterator["Rewrite | Refusal"]]
_RULES: list[tuple[str, Rule]] = []


def rule(name: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        _RULES.append((name, fn))
        return fn
    return deco


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for c in node.children:
        yield from _walk(c)


class _Index(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.pos: dict[cst.CSTNode, int] = {}
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        try:
            self.pos[node] = self.get_metadata(PositionProvider, node).start.line
        except KeyError:
            pass
        if self.stack:
            self.parents[node] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


class _Swap(cst.CSTTransformer):
    """Replace given original nodes (by identity) with new nodes or several statements."""

    def __init__(self, swaps: dict[cst.CSTNode, object]):
        self.swaps = swaps

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:  # type: ignore[override]
        new = self.swaps.get(original_node, updated_node)
        return new(updated_node) if callable(new) else new  # a function of the already-rewritten node


def swap(ctx: Ctx, swaps: dict[cst.CSTNode, object], module: cst.Module | None = None) -> str:
    return (module or ctx.module).visit(_Swap(swaps)).code


def site_path(site: Site, root: str | None) -> tuple[str | None, str | None]:
    """(file, why not): the site's own file when it is the user's, else the reason."""
    if is_library(site.file) or not in_project(site.file, root):
        return None, (f"{site.file} is installed library code, not part of the project; "
                      "graphstitch never edits it (a wrapper from your file or an upstream fix is the way)")
    if not os.path.isfile(site.file):
        return None, f"{site.file} is not on this machine"
    return site.file, None


def proposals(site: Site, root: str | None, *, target_file: str | None = None, factory: str | None = None,
              overlay: dict[str, str] | None = None, sites: Sequence[Site] = ()) -> tuple[list[Rewrite], list[Refusal]]:
    """Every rewrite the rules propose for this site, and the rules that refused (why).
    ``overlay`` (path -> text) stands for files already patched (`fix --all`); ``sites`` are
    the census's other sites (a region split keeps those of the same entry in its gap)."""
    path, why = site_path(site, root)
    if path is None:
        return [], [Refusal("any", why or "no file")]
    source = _read(path, overlay)
    try:
        wrapper = MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError as e:
        return [], [Refusal("any", f"{path} does not parse: {str(e).splitlines()[0]}")]
    idx = _Index()
    wrapper.visit(idx)
    stmts = [n for n, ln in idx.pos.items() if ln == site.line and isinstance(n, cst.BaseStatement)]
    if not stmts:
        return [], [Refusal("any", f"no statement starts at {path}:{site.line} (the file changed since the census?)")]
    # The outermost statement starting on the line (an `if`/`with`/`while` header, or the simple line).
    stmt = min(stmts, key=lambda n: _depth(n, idx.parents))
    func = _enclosing(stmt, idx.parents, cst.FunctionDef)
    ctx = Ctx(site, path, source, wrapper.module, idx.pos, idx.parents, stmt,
              func if isinstance(func, cst.FunctionDef) else None, target_file, factory, overlay or {})
    out: list[Rewrite] = []
    refused: list[Refusal] = []
    for name, fn in [*_RULES, ("region-split", lambda _: _region_split(site, sites, root, overlay))]:
        for r in fn(ctx):
            if isinstance(r, Refusal):
                refused.append(r)
                continue
            bad = next((p for p, text in r.files.items() if not _parses(text)), None)
            if bad:
                refused.append(Refusal(name, f"the rewrite of {os.path.basename(bad)} does not parse; not offered"))
            elif any(text == _read(p, overlay) for p, text in r.files.items()):
                continue
            else:
                out.append(r)
    return out, refused


def _read(p: str, overlay: dict[str, str] | None) -> str:
    if overlay and p in overlay:
        return overlay[p]
    with open(p, encoding="utf-8") as f:
        return f.read()


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _depth(n: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> int:
    d = 0
    while n in parents:
        n = parents[n]
        d += 1
    return d


def _enclosing(n: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode], kind: type) -> cst.CSTNode | None:
    while n in parents:
        n = parents[n]
        if isinstance(n, kind):
            return n
    return None


def _names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in _walk(node) if isinstance(n, cst.Name)}


def _small_stmt(code: str) -> cst.BaseSmallStatement:
    line = cst.parse_statement(code + "\n")
    assert isinstance(line, cst.SimpleStatementLine)
    return line.body[0]


def _small(stmt: cst.CSTNode) -> list[cst.BaseSmallStatement]:
    return list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else []


def _add_import(module_code: str, line: str) -> str:
    """``line`` after the module's leading docstring and imports (unless already there)."""
    if re.search(rf"^{re.escape(line)}\s*$", module_code, re.M):
        return module_code
    tree = ast.parse(module_code)
    idx = 0
    for i, node in enumerate(tree.body):
        is_doc = i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if isinstance(node, (ast.Import, ast.ImportFrom)) or is_doc:
            idx = node.end_lineno or node.lineno
        else:
            break
    lines = module_code.splitlines(keepends=True)
    return "".join(lines[:idx] + [line + "\n"] + lines[idx:])


def _stmt_text(ctx: Ctx, stmt: cst.CSTNode) -> str:
    return ctx.code(stmt)


# ------------------------------------------------------------------------------- rules

_SCALAR_CASTS = ("float", "int")


def _unwrap_scalar(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``t.item()`` / ``float(t)`` / ``int(t)`` -> ``t`` (None when it is none of these)."""
    if isinstance(node, cst.Call):
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value == "item" and not node.args:
            return f.value
        if isinstance(f, cst.Name) and f.value in _SCALAR_CASTS and len(node.args) == 1 \
                and not isinstance(node.args[0].value, (cst.SimpleString, cst.Integer, cst.Float)):
            return node.args[0].value
    return None


def _assigned(stmt: cst.CSTNode) -> list[str]:
    out = []
    for s in _small(stmt):
        if isinstance(s, cst.Assign):
            for t in s.targets:
                out += [n.value for n in _walk(t.target) if isinstance(n, cst.Name)]
    return out


@rule("item-keep-tensor")
def _item_keep_tensor(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`.item()` / float(t) / int(t) whose value only feeds tensor math: keep the 0-d tensor."""
    if not isinstance(ctx.stmt, cst.SimpleStatementLine):
        return
    scalars = {n: u for n in _walk(ctx.stmt) if isinstance(n, cst.Call) and (u := _unwrap_scalar(n)) is not None}
    if not scalars:
        return
    names = set(_assigned(ctx.stmt))
    swaps: dict[cst.CSTNode, object] = {k: v for k, v in scalars.items()}  # noqa: C416 - widen the type
    for st in ctx.later_in_func():
        test = getattr(st, "test", None)
        if test is not None and names & _names(test) and isinstance(st, (cst.If, cst.While)):
            where = _where_return(ctx, st) if isinstance(st, cst.If) else None
            if where is not None:  # the `if` it decides returns in both branches: torch.where too
                swaps.update(where)
                continue
            yield Refusal("item-keep-tensor", f"the value of {', '.join(sorted(names))} decides a Python "
                          f"`{'if' if isinstance(st, cst.If) else 'while'}` at line {ctx.pos[st]}: keeping the "
                          "tensor would move the break there")
            return
    # Python-number helpers on the value, rewritten to their tensor forms.
    for st in ctx.later_in_func():
        for n in _walk(st):
            if not isinstance(n, cst.Call) or not (names & _names(n)) or n in swaps:
                continue
            f = n.func
            fname = ctx.code(f)
            if fname in ("math.sqrt", "math.exp", "math.log") and len(n.args) == 1:
                swaps[n] = n.with_changes(func=cst.parse_expression("torch." + fname.split(".")[1]))
            elif fname in ("max", "min") and len(n.args) == 2:
                a, b = n.args[0].value, n.args[1].value
                var, lim = (a, b) if names & _names(a) else (b, a)
                kw = "min" if fname == "max" else "max"
                swaps[n] = cst.parse_expression(f"torch.clamp({ctx.code(var)}, {kw}={ctx.code(lim)})")
    what = sorted({ctx.code(c.func).split(".")[-1] for c in scalars})
    yield Rewrite("item-keep-tensor", "rewrite", f"keep the 0-d tensor instead of {'/'.join(what)}()",
                  "the value stays a tensor: same math, but its dtype now takes part in type promotion",
                  {ctx.path: _add_import(swap(ctx, swaps), "import torch")})
    # int(t) truncates a float value: keep that too (on an integer tensor the plain form is the one).
    ints = [c for c in scalars if ctx.code(c.func) == "int"]
    if ints:
        trunc: dict[cst.CSTNode, object] = dict(swaps)
        trunc.update({c: cst.parse_expression(f"torch.trunc({ctx.code(scalars[c])})") for c in ints})
        yield Rewrite("item-keep-tensor", "rewrite", "keep the 0-d tensor, truncated like int()",
                      "the value stays a (truncated) tensor: same math, but its dtype now takes part in type promotion",
                      {ctx.path: _add_import(swap(ctx, trunc), "import torch")})


def _plain_assigns(block: cst.BaseSuite) -> list[tuple[str, cst.BaseExpression]] | None:
    """[(name, value)] when the block only assigns plain names (one target each)."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    out = []
    for st in block.body:
        for s in _small(st) if isinstance(st, cst.SimpleStatementLine) else [None]:
            if not isinstance(s, cst.Assign) or len(s.targets) != 1 or not isinstance(s.targets[0].target, cst.Name):
                return None
            out.append((s.targets[0].target.value, s.value))
    return out


def _effects_in(block: cst.CSTNode, ctx: Ctx) -> str | None:
    for n in _walk(block):
        if isinstance(n, (cst.AugAssign, cst.Assign)):
            tgts = [n.target] if isinstance(n, cst.AugAssign) else [t.target for t in n.targets]
            for t in tgts:
                if isinstance(t, (cst.Attribute, cst.Subscript)):
                    return ctx.code(n).strip()
    return None


@rule("if-where")
def _if_where(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A data-dependent `if`: same names assigned -> torch.where; returns -> torch.where;
    calls with matching outputs -> torch.cond; `if cond: raise` -> torch._assert_async."""
    st = ctx.stmt
    if not isinstance(st, cst.If):
        return
    test = ctx.code(st.test)
    eff = _effects_in(st, ctx)
    if eff:
        yield Refusal("if-where", f"a branch changes state (`{eff}`): torch.where/cond would always or never "
                      "apply it, so no rewrite is offered")
        return
    body = list(st.body.body) if isinstance(st.body, cst.IndentedBlock) else []
    orelse = st.orelse.body if isinstance(st.orelse, cst.Else) else None
    # if cond: raise ...
    if len(body) == 1 and orelse is None and any(isinstance(s, cst.Raise) for s in _small(body[0])):
        r = next(s for s in _small(body[0]) if isinstance(s, cst.Raise))
        msg = "check failed"
        if isinstance(r.exc, cst.Call) and r.exc.args and isinstance(r.exc.args[0].value, cst.SimpleString):
            msg = ast.literal_eval(r.exc.args[0].value.value)
        new = cst.parse_statement(f"torch._assert_async(torch.logical_not({test}), {msg!r})\n")
        yield Rewrite("if-raise-check", "rewrite", "`if cond: raise` -> torch._assert_async (checked in the graph)",
                      "raises RuntimeError instead of the original exception type",
                      {ctx.path: _add_import(swap(ctx, {st: new.with_changes(leading_lines=st.leading_lines)}),
                                             "import torch")})
        return
    # if cond: return a / (else:) return b
    if _only_return(body) is not None:
        swaps = _where_return(ctx, st)
        if swaps is not None:
            yield Rewrite("if-where-return", "rewrite", "returns in both branches -> return torch.where(...)",
                          "computes both branches; they must have the same shape and dtype",
                          {ctx.path: _add_import(swap(ctx, swaps), "import torch")})
        return
    a = _plain_assigns(st.body)
    b = _plain_assigns(orelse) if orelse is not None else []
    if a is None or b is None or not a:
        return
    da, db = dict(a), dict(b)
    names = list(dict.fromkeys([n for n, _ in a] + [n for n, _ in b]))
    if len(da) != len(a) or len(db) != len(b):
        return
    if len(names) > 1 and any(set(names) & _names(v) for v in [*da.values(), *db.values()]):
        yield Refusal("if-where", "the branches read names they assign; no single torch.where per name")
        return
    lines = [f"{n} = torch.where({test}, {ctx.code(da[n]) if n in da else n}, {ctx.code(db[n]) if n in db else n})"
             for n in names]
    new_stmts = [cst.parse_statement(ln + "\n") for ln in lines]
    new_stmts[0] = new_stmts[0].with_changes(leading_lines=st.leading_lines)
    yield Rewrite("if-where", "rewrite", f"`if` assigning {', '.join(names)} -> torch.where",
                  "computes both branches; they must have the same shape and dtype",
                  {ctx.path: _add_import(swap(ctx, {st: cst.FlattenSentinel(new_stmts)}), "import torch")})
    # Calls with the same arguments in both branches: torch.cond runs one branch.
    if len(names) == 1 and names[0] in da and names[0] in db:
        ca, cb = da[names[0]], db[names[0]]
        if isinstance(ca, cst.Call) and isinstance(cb, cst.Call) and \
                [ctx.code(x) for x in ca.args] == [ctx.code(x) for x in cb.args] and \
                all(not x.keyword and not x.star for x in ca.args):
            args = ", ".join(ctx.code(x.value) for x in ca.args)
            new = cst.parse_statement(f"{names[0]} = torch.cond({test}, {ctx.code(ca.func)}, {ctx.code(cb.func)}, ({args},))\n")
            yield Rewrite("if-cond", "rewrite", "branches calling with the same arguments -> torch.cond",
                          "torch.cond traces both branches (one runs); their outputs must match in shape and dtype",
                          {ctx.path: _add_import(swap(ctx, {st: new.with_changes(leading_lines=st.leading_lines)}),
                                                 "import torch")})


def _where_return(ctx: Ctx, st: cst.If) -> dict[cst.CSTNode, object] | None:
    """`if c: return a` + `else: return b` (or a following `return b`) -> one
    `return torch.where(c, a, b)`, as swaps; None when the `if` is not of that form."""
    ret_a = _only_return(list(st.body.body) if isinstance(st.body, cst.IndentedBlock) else [])
    orelse = st.orelse.body if isinstance(st.orelse, cst.Else) else None
    if ret_a is None or isinstance(st.orelse, cst.If):
        return None
    drop = None
    if orelse is not None:
        ret_b = _only_return(list(orelse.body) if isinstance(orelse, cst.IndentedBlock) else [])
    else:
        drop = _next_stmt(ctx, st)
        ret_b = _only_return([drop]) if drop is not None else None
    if ret_b is None:
        return None
    new = cst.parse_statement(f"return torch.where({ctx.code(st.test)}, {ctx.code(ret_a)}, {ctx.code(ret_b)})\n")
    swaps: dict[cst.CSTNode, object] = {st: new.with_changes(leading_lines=st.leading_lines)}
    if drop is not None:
        swaps[drop] = cst.RemovalSentinel.REMOVE
    return swaps


def _only_return(stmts: Sequence[cst.CSTNode]) -> cst.BaseExpression | None:
    if len(stmts) == 1:
        sm = _small(stmts[0])
        if len(sm) == 1 and isinstance(sm[0], cst.Return) and sm[0].value is not None:
            return sm[0].value
    return None


def _next_stmt(ctx: Ctx, st: cst.CSTNode) -> cst.CSTNode | None:
    parent = ctx.parents.get(st)
    body = list(getattr(parent, "body", []) or [])
    if st in body and body.index(st) + 1 < len(body):
        return body[body.index(st) + 1]
    return None


def _print_format(ctx: Ctx, call: cst.Call) -> tuple[str, list[str]] | None:
    """print(...) -> (format string, argument sources) for torch._higher_order_ops.print."""
    if any(a.keyword for a in call.args) or any(a.star for a in call.args):
        return None
    parts: list[str] = []
    args: list[str] = []
    for a in call.args:
        v = a.value
        if isinstance(v, cst.SimpleString):
            parts.append(str(ast.literal_eval(v.value)).replace("{", "{{").replace("}", "}}"))
        elif isinstance(v, cst.FormattedString):
            s = ""
            for p in v.parts:
                if isinstance(p, cst.FormattedStringText):
                    s += p.value.replace("{{", "\0").replace("}}", "\1").replace("\0", "{{").replace("\1", "}}")
                else:
                    assert isinstance(p, cst.FormattedStringExpression)
                    if p.conversion:
                        return None
                    spec = "".join(ctx.code(x) for x in p.format_spec) if p.format_spec else ""
                    s += "{" + (":" + spec if spec else "") + "}"
                    args.append(ctx.code(p.expression))
            parts.append(s)
        else:
            parts.append("{}")
            args.append(ctx.code(v))
    return " ".join(parts), args


@rule("print-hop")
def _print_hop(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """print(...) -> torch._higher_order_ops.print(fmt, ...): the output survives at run time."""
    for s in _small(ctx.stmt):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and ctx.code(s.value.func) == "print":
            fmt = _print_format(ctx, s.value)
            if fmt is None:
                yield Refusal("print-hop", "print with sep=/end=/file= or !r conversions has no print-op form")
                return
            args = "".join(", " + a for a in fmt[1])
            new = s.with_changes(value=cst.parse_expression(f"torch._higher_order_ops.print({fmt[0]!r}{args})"))
            yield Rewrite("print-hop", "rewrite", "print -> torch._higher_order_ops.print (printed at run time, in the graph)",
                          "the text is formatted at run time by the print op; verified identical to eager",
                          {ctx.path: _add_import(swap(ctx, {s: new}), "import torch")})


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_NOT_TENSOR = re.compile(r"^(tuple|list|len|repr|str|dict|set)\(|\.(shape|dtype|device|size\(\))$")


@rule("log-reorder")
def _log_reorder(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``logger.debug(fmt, ...)`` on a module-level logger -> a module-level function that
    Dynamo may defer past the graph (torch 2.13 reorders only plain functions registered in
    ``reorderable_logging_functions``, with tensor, constant or string arguments). The record
    is still emitted on every call; arguments that are neither (``tuple(t.shape)``) are
    formatted by ``str()`` first where the format says ``%s`` (the same text)."""
    calls = [s for s in _small(ctx.stmt) if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)
             and isinstance(s.value.func, cst.Attribute) and isinstance(s.value.func.value, cst.Name)
             and s.value.func.attr.value in _LOG_LEVELS]
    if not calls:
        return
    expr = calls[0]
    call = expr.value
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
    logger, level = call.func.value.value, call.func.attr.value
    made = next((st for st in ctx.module.body if isinstance(st, cst.SimpleStatementLine)
                 and any(isinstance(a, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == logger
                                                           for t in a.targets)
                         and "getLogger(" in ctx.code(a.value) for a in st.body)), None)
    if made is None:
        yield Refusal("log-reorder", f"`{logger}` is not a module-level logging.getLogger(...) in this file")
        return
    if any(a.keyword or a.star for a in call.args) or not call.args:
        yield Refusal("log-reorder", "a log call with keywords (exc_info=, stacklevel=, extra=) or *args is not "
                      "reorderable; not rewritten")
        return
    fmt = call.args[0].value
    specs = re.findall(r"%[-#0 +]*\d*(?:\.\d+)?([a-zA-Z%])", ast.literal_eval(fmt.value)) \
        if isinstance(fmt, cst.SimpleString) else []
    specs = [c for c in specs if c != "%"]
    args = [ctx.code(fmt)]
    for i, a in enumerate(call.args[1:]):
        code = ctx.code(a.value)
        args.append(f"str({code})" if i < len(specs) and specs[i] == "s" and _NOT_TENSOR.search(code) else code)
    taken = {n.value for n in _walk(ctx.module) if isinstance(n, cst.Name)}
    name = f"_{logger}_{level}"
    while name in taken:
        name += "_"
    helper = (f"\n\ndef {name}(*args):  # graphstitch fix: a plain function Dynamo defers past the graph\n"
              f"    {logger}.{level}(*args, stacklevel=2)\n\n\n"
              f"torch._dynamo.config.reorderable_logging_functions.add({name})\n")
    helper_stmts = list(cst.parse_module(helper).body)
    helper_stmts[0] = helper_stmts[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2)
    new_call = expr.with_changes(value=cst.parse_expression(f"{name}({', '.join(args)})"))
    code = swap(ctx, {expr: new_call, made: lambda upd: cst.FlattenSentinel([upd, *helper_stmts])})
    yield Rewrite("log-reorder", "rewrite", f"{logger}.{level}(...) -> {name}(...), deferred by Dynamo past the graph",
                  "the record is emitted after the graph runs, not between its ops; the module registers "
                  f"{name} in torch._dynamo.config.reorderable_logging_functions",
                  {ctx.path: _add_import(re.sub(r"\n{4,}", "\n\n\n", code), "import torch")})


_FUNCOL = "import torch.distributed._functional_collectives as funcol"


@rule("functional-collectives")
def _functional_collectives(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """In-place dist.all_reduce/broadcast -> functional collectives (traced, no break)."""
    for s in _small(ctx.stmt):
        if not (isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)):
            continue
        call = s.value
        f = ctx.code(call.func)
        m = re.fullmatch(r"(?:torch\.)?(?:dist|distributed)\.(all_reduce|broadcast)", f)
        if not m or not call.args or not isinstance(call.args[0].value, cst.Name):
            continue
        t = call.args[0].value.value
        kw = {a.keyword.value: ctx.code(a.value) for a in call.args if a.keyword}
        pos = [ctx.code(a.value) for a in call.args[1:] if not a.keyword]
        group = kw.get("group", "dist.group.WORLD")
        if m.group(1) == "all_reduce":
            op = kw.get("op", pos[0] if pos else "dist.ReduceOp.SUM")
            reduce = {"dist.ReduceOp.SUM": '"sum"', "dist.ReduceOp.MAX": '"max"', "dist.ReduceOp.MIN": '"min"',
                      "dist.ReduceOp.AVG": '"avg"'}.get(op)
            if reduce is None:
                yield Refusal("functional-collectives", f"reduce op {op} has no functional form here")
                return
            expr = f"funcol.all_reduce({t}, {reduce}, {group})"
        else:
            src = kw.get("src", pos[0] if pos else "0")
            expr = f"funcol.broadcast({t}, {src}, {group})"
        new = _small_stmt(f"{t} = {expr}")
        yield Rewrite("functional-collectives", "rewrite", f"dist.{m.group(1)} -> functional {m.group(1)} (returns the result)",
                      "a new tensor instead of an in-place update (the old buffer keeps its value); "
                      "verified on 2 gloo ranks", {ctx.path: _add_import(swap(ctx, {s: new}), _FUNCOL)}, ranks=2)


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
                      {ctx.path: _add_import(swap(ctx, swaps), "import torch.nn.attention")})


@rule("hoist-import")
def _hoist_import(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """An import inside the compiled function (at the site, or of a name the site uses) -> at module level."""
    if ctx.func is None:
        return
    used = _names(ctx.stmt)
    for line in _walk(ctx.func.body):
        imps = [s for s in _small(line) if isinstance(s, (cst.Import, cst.ImportFrom))]
        if not imps or not (line is ctx.stmt or used & _names(line)):
            continue
        text = ctx.code(line).strip().split("#")[0].strip()
        body = list(getattr(ctx.parents.get(line), "body", None) or [])
        repl: object = cst.RemovalSentinel.REMOVE if len(body) > 1 else cst.parse_statement("pass\n")
        yield Rewrite("hoist-import", "rewrite", f"`{text}` moved to module level",
                      "the module is imported when your file is (an optional dependency becomes required)",
                      {ctx.path: _add_import(swap(ctx, {line: repl}), text)})
        return


@rule("deepcopy-clone")
def _deepcopy_clone(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    swaps: dict[cst.CSTNode, object] = {}
    for n in _walk(ctx.stmt):
        if isinstance(n, cst.Call) and ctx.code(n.func) in ("copy.deepcopy", "deepcopy") and len(n.args) == 1:
            swaps[n] = cst.parse_expression(f"{ctx.code(n.args[0].value)}.clone()")
    if swaps:
        yield Rewrite("deepcopy-clone", "rewrite", "copy.deepcopy(tensor) -> tensor.clone()",
                      "clone() stays on the autograd graph (deepcopy of a leaf does not)",
                      {ctx.path: swap(ctx, swaps)})


@rule("drop-graph-break")
def _drop_graph_break(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    for s in _small(ctx.stmt):
        if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and \
                ctx.code(s.value.func) in ("torch._dynamo.graph_break", "graph_break"):
            yield Rewrite("drop-graph-break", "rewrite", "remove the explicit torch._dynamo.graph_break()",
                          "the break was asked for; removing it merges the two graphs",
                          {ctx.path: swap(ctx, {ctx.stmt: cst.parse_statement("pass\n")})})


@rule("tolist-keep-tensor")
def _tolist(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`t.tolist()` used as an index -> index with the tensor."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in _walk(ctx.stmt):
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "tolist" \
                and not n.args:
            parent = ctx.parents.get(n)
            if isinstance(parent, cst.Arg):  # x.split(t.tolist()): a list of sizes is needed; no tensor form here
                continue
            swaps[n] = n.func.value
    if swaps:
        yield Rewrite("tolist-keep-tensor", "rewrite", "index with the tensor instead of .tolist()",
                      "the index stays a tensor: same gather, no Python list",
                      {ctx.path: swap(ctx, swaps)})


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
    uses = [n for n in _walk(ctx.func.body) if isinstance(n, cst.Name) and n.value == chunks
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
                  {ctx.path: _add_import(swap(ctx, swaps), "import torch")})


@rule("tensor-slice")
def _tensor_slice(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`a[:, s:e] = b` / `a[:, s:s + K]` with tensor bounds -> index_copy_ / index_select."""
    for n in _walk(ctx.stmt):
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
        assign = next((s for s in _small(ctx.stmt) if isinstance(s, cst.Assign)
                       and any(t.target is n for t in s.targets)), None)
        if assign is not None:
            val = ctx.code(assign.value)
            new = _small_stmt(
                f"{base}.index_copy_({dim}, {lo} + torch.arange({val}.shape[{dim}], device={base}.device), {val})")
            yield Rewrite("tensor-slice", "rewrite", "slice assignment with tensor bounds -> index_copy_",
                          "an out-of-range window raises instead of being clipped",
                          {ctx.path: _add_import(swap(ctx, {assign: new}), "import torch")})
            return
        m = re.fullmatch(rf"{re.escape(lo)}\s*\+\s*(\d+)", hi)
        if m and parent is not None:
            new_e = cst.parse_expression(
                f"{base}.index_select({dim}, {lo} + torch.arange({m.group(1)}, device={base}.device))")
            yield Rewrite("tensor-slice", "rewrite", "window with a tensor start -> index_select",
                          "an out-of-range window raises instead of being clipped",
                          {ctx.path: _add_import(swap(ctx, {n: new_e}), "import torch")})
            return


@rule("numpy-torch")
def _numpy_torch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """numpy calls on a tensor's values with exact torch equivalents."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in _walk(ctx.stmt):
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
                      {ctx.path: _add_import(swap(ctx, swaps), "import torch")})


# scipy.special functions with a torch.special twin of the same name and arguments.
_SCIPY_SPECIAL = ("expit", "logit", "erf", "erfc", "erfinv", "ndtr", "ndtri", "log_ndtr", "gammaln", "i0", "i0e",
                  "i1", "i1e", "xlogy", "xlog1py", "entr", "sinc")


@rule("scipy-special-torch")
def _scipy_special_torch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """`scipy.special.f(v)` (a C ufunc Dynamo cannot trace) -> `torch.special.f` on float64
    0-d tensors: the same double-precision value, kept as a tensor in the graph."""
    swaps: dict[cst.CSTNode, object] = {}
    for n in _walk(ctx.stmt):
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
                      "against eager outputs)", {ctx.path: _add_import(swap(ctx, swaps), "import torch")})


@rule("pass-sequence")
def _pass_sequence(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """A generator or iterator argument -> the caller passes the sequence; iterate inside."""
    if ctx.func is None or ctx.target_file is None or ctx.factory is None:
        return
    text = (ctx.site.gb_type + " " + ctx.site.explanation).lower()
    if not (ctx.site.gb_id in ("GB0811", "GB4347") or "iterator" in text or "generator" in text):
        return
    params = [p.name.value for p in ctx.func.params.params]
    used = _names(ctx.stmt) & set(params)
    if not used:
        return
    p = sorted(used)[0]
    tsrc = _read(ctx.target_file, ctx.overlay) if ctx.target_file != ctx.path else ctx.source
    tmod = cst.parse_module(tsrc) if ctx.target_file != ctx.path else ctx.module
    fac = next((n for n in tmod.body if isinstance(n, cst.FunctionDef) and n.name.value == ctx.factory), None)
    if fac is None:
        return
    swaps: dict[cst.CSTNode, object] = {}
    for n in _walk(fac):
        if isinstance(n, cst.GeneratorExp):
            swaps[n] = cst.ListComp(elt=n.elt, for_in=n.for_in)
        elif isinstance(n, cst.Call) and tmod.code_for_node(n.func) == "iter" and len(n.args) == 1:
            swaps[n] = n.args[0].value
    if not swaps:
        yield Refusal("pass-sequence", f"no generator or iter() found in {ctx.factory}() to change at the call site")
        return
    nexts = any(isinstance(n, cst.Call) and ctx.code(n.func) == "next" for n in _walk(ctx.func))
    files: dict[str, str] = {}
    if ctx.target_file == ctx.path:
        if nexts:
            first = ctx.func.body.body[0]
            swaps[first] = lambda upd: cst.FlattenSentinel(
                [cst.parse_statement(f"{p} = iter({p})  # graphstitch: iterate inside\n"), upd])
        files[ctx.path] = swap(ctx, swaps)
    else:
        files[ctx.target_file] = tmod.visit(_Swap(swaps)).code
        if nexts:
            first = ctx.func.body.body[0]
            files[ctx.path] = swap(ctx, {first: cst.FlattenSentinel(
                [cst.parse_statement(f"{p} = iter({p})  # graphstitch: iterate inside\n"), first])})
    yield Rewrite("pass-sequence", "rewrite", "the caller passes a list; iteration happens inside the compiled function",
                  "the sequence is built eagerly by the caller (memory for all items at once)", files)


# -------------------------------------------------------------------- extract + hatch

_IO_CALLS = re.compile(r"\b(torch\.save|open|np\.save|pickle\.dump|json\.dump)\s*\(")


def _free_inputs(ctx: Ctx, stmts: list[cst.CSTNode]) -> list[str] | None:
    """Names the statements read that are locals of the enclosing function (its parameters
    or assigned before); None when the function is unknown."""
    if ctx.func is None:
        return None
    params = [p.name.value for p in ctx.func.params.params]
    local = set(params)
    line = ctx.pos[ctx.stmt]
    for n in _walk(ctx.func.body):
        if isinstance(n, cst.AssignTarget) and ctx.pos.get(n, line) < line:
            local |= _names(n)
        if isinstance(n, (cst.For, cst.CompFor)) and ctx.pos.get(n, line) <= line:
            local |= _names(n.target)
    read: list[str] = []
    for s in stmts:
        for n in _walk(s):
            if isinstance(n, cst.Name) and n.value in local and n.value not in read:
                read.append(n.value)
    return read


@rule("extract-hatch")
def _extract_hatch(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """Move the break's statement into a module-level helper of tensors and constants,
    under torch._dynamo.nonstrict_trace (or leaf_function + a fake when it loops on data)."""
    st = ctx.stmt
    if ctx.func is None or _enclosing(ctx.func, ctx.parents, cst.FunctionDef) is not None:
        return
    if isinstance(st, cst.If):
        return  # a data-dependent `if` in a hatch only moves the break (GB0251)
    if any(isinstance(s, (cst.Return, cst.Import, cst.ImportFrom, cst.Raise)) for s in _small(st)):
        return
    inputs = _free_inputs(ctx, [st])
    if inputs is None:
        return
    outputs = _assigned(st) if isinstance(st, cst.SimpleStatementLine) else \
        [n.value for n in _walk(st) if isinstance(n, cst.Name) and isinstance(ctx.parents.get(n), cst.AssignTarget)]
    outputs = list(dict.fromkeys(outputs))
    body_code = ctx.code(st)
    uses_self = "self" in inputs
    if uses_self:
        yield Refusal("extract-hatch", "the statement reads `self`: a module cannot cross an opaque boundary; "
                      "lift the attributes it reads into arguments by hand")
        return
    io = _IO_CALLS.search(body_code) is not None
    loops = isinstance(st, cst.While)
    name = f"_gs_{ctx.func.name.value}_{ctx.site.line}"
    args = ", ".join(inputs)
    ret = ", ".join(outputs)
    indent = "    "
    body = "".join(indent + ln.strip("\n") + "\n" if ln.strip() else "\n"
                   for ln in _dedent(body_code).splitlines())
    if loops or io:
        if not outputs or any(o not in inputs for o in outputs):
            return  # I/O with no tensor result: a region split (rule below), never a hatch
        fake_of = outputs[0]
        helper = (f"@torch._dynamo.decorators.leaf_function  # graphstitch fix: runs eagerly, opaque to the compiler\n"
                  f"def {name}({args}):\n{body}{indent}return {ret}\n\n\n"
                  f"@{name}.register_fake\ndef _{name}_fake({args}):\n{indent}return torch.empty_like({fake_of})\n")
        call = f"{ret} = {name}({args})\n"
        yield _extract(ctx, name, helper, call, f"statements moved into {name}() under leaf_function",
                       "runs eagerly once per call; the fake says the output is shaped like the input")
        return
    if not outputs:
        return
    helper = f"@torch._dynamo.nonstrict_trace  # graphstitch fix\ndef {name}({args}):\n{body}{indent}return {ret}\n"
    call = f"{ret} = {name}({args})\n"
    yield _extract(ctx, name, helper, call, f"statement moved into {name}() under nonstrict_trace",
                   "not traced by Dynamo (traced by AOT); inputs/outputs must be tensors and constants")


@rule("io-defer")
def _io_defer(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """File I/O that reads no local (a debug line to a log file) -> a module-level function
    registered in ``reorderable_logging_functions``: Dynamo calls it after the graph instead
    of breaking. It still runs on every call, with the same (trace-time constant) arguments;
    the side-effect check compares the files written."""
    st = ctx.stmt
    if ctx.func is None or _enclosing(ctx.func, ctx.parents, cst.FunctionDef) is not None:
        return
    code = ctx.code(st)
    if not _IO_CALLS.search(code) or any(isinstance(s, (cst.Return, cst.Import, cst.ImportFrom, cst.Raise))
                                         for s in _small(st)) or _returns(st):
        return
    inputs = _free_inputs(ctx, [st])
    inside = set(_walk(st))
    later = _reads([n for n in ctx.later_in_func() if n not in inside], ctx.parents)
    if inputs is None or inputs or _bound([st]) & later:
        yield Refusal("io-defer", "the I/O reads or sets local values (" + ", ".join(sorted(set(inputs or [])
                      | (_bound([st]) & later))) + "): deferring it past the graph would see other values; "
                      "a region split keeps it in place")
        return
    name = f"_{ctx.func.name.value}_io"
    while name in {n.value for n in _walk(ctx.module) if isinstance(n, cst.Name)}:
        name += "_"
    body = "".join("    " + ln + "\n" if ln.strip() else "\n" for ln in _dedent(code).splitlines())
    helper = (f"def {name}():  # graphstitch fix: I/O Dynamo defers past the graph\n{body}\n\n"
              f"torch._dynamo.config.reorderable_logging_functions.add({name})\n")
    yield _extract(ctx, name, helper, f"{name}()\n", f"I/O moved into {name}(), called after the graph",
                   "the I/O runs after the compiled graph instead of between its ops (same files, same "
                   "content: it reads no tensor)", rule="io-defer", strategy="split")


@rule("unique-segment-reduce")
def _unique_segment_reduce(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """``torch.stack([X[L == c].mean(0) for c in L.unique()])`` (or ``.sum(0)``) -> one
    ``index_add_`` over ``L.unique(return_inverse=True)``: the per-class reduction without a
    Python loop over data-dependent values (the class count is an unbacked size, so the patch
    turns on ``capture_dynamic_output_shape_ops``)."""
    if not isinstance(ctx.stmt, cst.SimpleStatementLine):
        return
    for call in (n for n in _walk(ctx.stmt) if isinstance(n, cst.Call) and ctx.code(n.func) == "torch.stack"):
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
        stem = (_assigned(ctx.stmt) or ["groups"])[0]
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
        code = _add_import(swap(ctx, swaps), "import torch")
        code = _add_import(code, "torch._dynamo.config.capture_dynamic_output_shape_ops = True  "
                                 "# graphstitch fix: unique() has a data-dependent size")
        yield Rewrite("unique-segment-reduce", "rewrite",
                      f"per-class {how}(0) over {labels}.unique() -> index_add_ over the inverse indices",
                      "one scatter-add, no Python loop; turns on capture_dynamic_output_shape_ops for the process "
                      "(float sums may round in another order)", {ctx.path: code})
        return


def _dedent(code: str) -> str:
    lines = code.splitlines()
    lead = [ln for ln in lines if ln.strip()]
    cut = min(len(ln) - len(ln.lstrip()) for ln in lead) if lead else 0
    return "\n".join(ln[cut:] for ln in lines)


def _extract(ctx: Ctx, name: str, helper: str, call: str, label: str, tradeoff: str, *,
             rule: str = "extract-hatch", strategy: str = "extract", extra: str | None = None) -> Rewrite:
    """The statement at the site replaced by ``call``, ``helper`` placed before the enclosing
    top-level definition, ``extra`` (a line) after the module's imports."""
    assert ctx.func is not None
    new_call = cst.parse_statement(call)
    if isinstance(ctx.stmt, cst.SimpleStatementLine) and isinstance(new_call, cst.SimpleStatementLine):
        new_call = new_call.with_changes(trailing_whitespace=ctx.stmt.trailing_whitespace,
                                         leading_lines=ctx.stmt.leading_lines)
    top = _enclosing(ctx.func, ctx.parents, cst.ClassDef) or ctx.func
    helper_mod = cst.parse_module(helper)
    helper_stmts = [s.with_changes(leading_lines=[cst.EmptyLine()] * 2) if i == 0 else s
                    for i, s in enumerate(helper_mod.body)]
    code = swap(ctx, {ctx.stmt: new_call, top: lambda upd: cst.FlattenSentinel([*helper_stmts, upd])})
    code = re.sub(r"\n{4,}", "\n\n\n", code)
    code = _add_import(code, "import torch")
    return Rewrite(rule, strategy, label, tradeoff, {ctx.path: _add_import(code, extra) if extra else code})


# ------------------------------------------------------------------------- region split

def user_frames(site: Site) -> list[StackEntry]:
    """The site's stack without torch's own frames, outermost first: the compiled entry is
    ``[len - nesting_depth]``, the site's own frame the last."""
    return [fr for fr in site.stack if not is_torch_file_path(fr.file)
            and fr.function not in ("_call_impl", "_wrapped_call_impl")]


def entry_frame(site: Site) -> StackEntry | None:
    """The frame of the compiled entry (the function torch.compile was given) in the site's stack."""
    frames = user_frames(site)
    i = len(frames) - site.nesting_depth
    return frames[i] if 0 <= i < len(frames) else None


def _region_split(site: Site, sites: Sequence[Site], root: str | None,
                  overlay: dict[str, str] | None) -> Iterator[Rewrite | Refusal]:
    """Strategy 3, the docs' g/h restructure: the compiled entry (a module's ``forward``)
    becomes eager glue under ``torch.compiler.disable(recursive=False)``; the statements
    before the break and after it move into methods Dynamo compiles as their own frames, and
    the break's statements into a ``torch.compiler.disable`` method between them. The eager
    gap stays, now explicit, with no break event. Neighbouring top-level statements that hold
    other sites of the same entry join the gap (they would break in a compiled part)."""
    entry = entry_frame(site)
    if entry is None:
        return
    if not in_project(entry.file, root) or is_library(entry.file) or not os.path.isfile(entry.file):
        return
    source = _read(entry.file, overlay)
    try:
        wrapper = MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError:
        return
    idx = _Index()
    wrapper.visit(idx)
    func = next((n for n, ln in idx.pos.items() if isinstance(n, cst.FunctionDef) and n.name.value == entry.function
                 and ln <= entry.line and isinstance(n.body, cst.IndentedBlock) and _contains_line(n, entry.line, idx.pos)), None)
    if func is None or not isinstance(func.body, cst.IndentedBlock):
        return
    cls = idx.parents.get(idx.parents.get(func, func), None)
    if entry.function != "forward" or not isinstance(cls, cst.ClassDef):
        if _IO_CALLS.search(site.code or ""):
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
    holds = [any(_contains_line(st, ln, idx.pos) for ln in lines) for st in body]
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
        bound_before = _bound(before)
        reads_gap, reads_after = _reads(gap, idx.parents), _reads(after, idx.parents)
        taken = {n.name.value for n in cls.body.body if isinstance(n, cst.FunctionDef)}

        def method(stem: str) -> str:
            name, n = f"_forward_{stem}", 2
            while name in taken:
                name, n = f"_forward_{stem}{n}", n + 1
            return name

        def order(names: set[str], stmts: list[cst.BaseStatement]) -> list[str]:
            """forward's parameters in signature order, then locals as they first appear."""
            seen = [n.value for st in stmts for n in _walk(st) if isinstance(n, cst.Name)]
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
        outs = order(_bound(gap) & reads_after, gap)
        new_methods.append(helper(name, ins, gap, outs,
                                  "torch.compiler.disable  # graphstitch fix: runs eagerly, between the compiled parts"))
        call(name, ins, outs)
        if after:
            if _computes(after):
                name = method("after")
                ins = order(set(params) | bound_before | _bound(gap), after)
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
        code = wrapper.module.visit(_Swap({func: cst.FlattenSentinel([new_func, *new_methods])})).code
        gap_lines = f"{idx.pos[gap[0]]}" + (f"–{idx.pos[gap[-1]]}" if len(gap) > 1 else "")
        return Rewrite("region-split", "split",
                       f"region split: {cls.name.value}.forward runs line {gap_lines} eagerly, the rest compiles "
                       "in separate methods",
                       "the eager gap stays, explicit: no break event, one graph per compiled part",
                       {entry.file: _add_import(code, "import torch")})

    first = build(j)
    yield first
    # The statement after the gap reads what the gap made (a PackedSequence, numpy arrays):
    # it may break in a compiled part too, so the gap one statement longer is tried as well.
    if isinstance(first, Rewrite) and j + 2 < len(body) \
            and _bound(body[k:j + 1]) & _reads([body[j + 1]], idx.parents):
        longer = build(j + 1)
        if isinstance(longer, Rewrite):
            yield longer


def _contains_line(node: cst.CSTNode, line: int, pos: dict[cst.CSTNode, int]) -> bool:
    lines = [ln for n in _walk(node) if (ln := pos.get(n)) is not None]
    return bool(lines) and min(lines) <= line <= max(lines)


def _returns(st: cst.CSTNode) -> bool:
    return any(isinstance(n, (cst.Return, cst.Yield)) for n in _walk_no_defs(st))


def _walk_no_defs(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for c in node.children:
        if not isinstance(c, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            yield from _walk_no_defs(c)


def _computes(stmts: Sequence[cst.BaseStatement]) -> bool:
    """Anything beyond returning names: a call, arithmetic, indexing."""
    return any(isinstance(n, (cst.Call, cst.BinaryOperation, cst.Subscript, cst.UnaryOperation, cst.Comparison))
               for st in stmts for n in _walk(st))


def _bound(stmts: Sequence[cst.CSTNode]) -> set[str]:
    """Names the statements bind in the function's scope (not in nested defs or comprehensions)."""
    out: set[str] = set()

    def targets(t: cst.CSTNode) -> None:
        if isinstance(t, cst.Name):
            out.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                targets(el.value)
        elif isinstance(t, cst.StarredElement):
            targets(t.value)

    for st in stmts:
        for n in _walk_no_defs(st):
            if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For)):
                targets(n.target)
            elif isinstance(n, cst.AsName):
                targets(n.name)
    return out


def _reads(stmts: Sequence[cst.CSTNode], parents: dict[cst.CSTNode, cst.CSTNode]) -> set[str]:
    """Names the statements mention as values (not attribute names or keyword names)."""
    out = set()
    for st in stmts:
        for n in _walk(st):
            if not isinstance(n, cst.Name):
                continue
            p = parents.get(n)
            if isinstance(p, cst.Attribute) and p.attr is n or isinstance(p, cst.Arg) and p.keyword is n:
                continue
            out.add(n.value)
    return out
