"""The syntax the rules share: walking, locating and swapping libcst nodes, adding imports,
and which names a piece of code reads and binds in which scope (libcst's scope analysis:
a comprehension's loop variable is not a local of the function around it).

No torch import; nothing here knows a rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider, Scope, ScopeProvider

from ...files import parse_python


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for c in node.children:
        yield from walk(c)


def walk_no_defs(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``walk`` that does not enter nested functions, lambdas and classes: a statement that is
    a ``def`` is yielded, its body (its own scope: a ``return`` there is not the statement's)
    is not."""
    yield node
    if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
        return
    for c in node.children:
        if not isinstance(c, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            yield from walk_no_defs(c)


class Index:
    """Where each node of a module is (first and last line), its parent, and the scope of
    each name: built once per file a rule looks at."""

    def __init__(self, wrapper: MetadataWrapper):
        self.module = wrapper.module
        ranges: dict[cst.CSTNode, CodeRange] = dict(wrapper.resolve(PositionProvider))
        self.pos = {n: r.start.line for n, r in ranges.items()}
        self.end = {n: r.end.line for n, r in ranges.items()}
        self.span = {n: ((r.start.line, r.start.column), (r.end.line, r.end.column)) for n, r in ranges.items()}
        self.scopes: dict[cst.CSTNode, Scope | None] = dict(wrapper.resolve(ScopeProvider))
        # Names read (loads), as opposed to bound: an assignment's target is not an input.
        self.loads = {a.node for sc in set(self.scopes.values()) if sc is not None for a in sc.accesses}
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            n = stack.pop()
            for c in n.children:
                self.parents[c] = n
                stack.append(c)

    def contains(self, node: cst.CSTNode, line: int) -> bool:
        return node in self.pos and self.pos[node] <= line <= self.end[node]

    def statement_at(self, line: int) -> cst.BaseStatement | None:
        """The innermost statement whose lines hold LINE: a simple line (also one spread over
        several lines), or a compound statement's header (an `if` whose condition spans two
        lines; the statement holding a comprehension, for a site Python 3.11 reports in its
        ``<listcomp>`` frame). A site on an ``elif`` line maps to the chain's first ``if``."""
        best: cst.BaseStatement | None = None
        for n in self.pos:
            if isinstance(n, cst.BaseStatement) and self.contains(n, line) and not _in_body(self, n, line) \
                    and (best is None or self.depth(n) > self.depth(best)):
                best = n
        # An `elif` is part of the `if` that starts the chain: rules rewrite the whole chain.
        while isinstance(best, cst.If) and isinstance(up := self.parents.get(best), cst.If) and up.orelse is best:
            best = up
        return best

    def depth(self, n: cst.CSTNode) -> int:
        d = 0
        while n in self.parents:
            n = self.parents[n]
            d += 1
        return d

    def enclosing(self, n: cst.CSTNode, kind: type | tuple[type, ...]) -> cst.CSTNode | None:
        while n in self.parents:
            n = self.parents[n]
            if isinstance(n, kind):
                return n
        return None

    def function_at(self, line: int, name: str | None = None) -> cst.FunctionDef | None:
        """The innermost ``def`` holding LINE (named NAME when given)."""
        best: cst.FunctionDef | None = None
        for n in self.pos:
            if isinstance(n, cst.FunctionDef) and self.contains(n, line) and (name is None or n.name.value == name) \
                    and (best is None or self.depth(n) > self.depth(best)):
                best = n
        return best


def _in_body(idx: Index, stmt: cst.BaseStatement, line: int) -> bool:
    """LINE is inside one of STMT's nested statements (not its own header)."""
    return any(isinstance(c, cst.BaseStatement) and idx.contains(c, line) for c in walk(stmt) if c is not stmt)


class _Swap(cst.CSTTransformer):
    """Replace given original nodes (by identity) with new nodes or several statements."""

    def __init__(self, swaps: dict[cst.CSTNode, object]):
        self.swaps = swaps

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> object:  # type: ignore[override]
        new = self.swaps.get(original_node, updated_node)
        return new(updated_node) if callable(new) else new  # a function of the already-rewritten node


def swap_code(module: cst.Module, swaps: dict[cst.CSTNode, object]) -> str:
    """The module's code with SWAPS (original node -> new node, sentinel, or a function of
    the rewritten node) applied."""
    return module.visit(_Swap(swaps)).code


def swap_in(node: cst.CSTNode, swaps: dict[cst.CSTNode, object]) -> cst.CSTNode:
    """NODE with SWAPS applied (a statement moved elsewhere, with some of its parts renamed)."""
    out = node.visit(_Swap(swaps))
    assert isinstance(out, cst.CSTNode)
    return out


def names(node: cst.CSTNode) -> set[str]:
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def small_stmt(code: str) -> cst.BaseSmallStatement:
    line = cst.parse_statement(code + "\n")
    assert isinstance(line, cst.SimpleStatementLine)
    return line.body[0]


def small(stmt: cst.CSTNode) -> list[cst.BaseSmallStatement]:
    return list(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else []


def parses(text: str) -> bool:
    try:
        parse_python(text)
    except SyntaxError:
        return False
    return True


def add_import(module_code: str, line: str) -> str:
    """``line`` after the module's leading docstring, ``__future__`` imports and imports
    (unless already there)."""
    if re.search(rf"^{re.escape(line)}\s*$", module_code, re.M):
        return module_code
    tree = parse_python(module_code)
    idx = 0
    for i, node in enumerate(tree.body):
        is_doc = i == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if isinstance(node, (ast.Import, ast.ImportFrom)) or is_doc:
            idx = node.end_lineno or node.lineno
        else:
            break
    lines = module_code.splitlines(keepends=True)
    if idx and lines and not lines[idx - 1].endswith("\n"):
        lines[idx - 1] += "\n"
    return "".join(lines[:idx] + [line + "\n"] + lines[idx:])


def dedent(code: str) -> str:
    lines = code.splitlines()
    lead = [ln for ln in lines if ln.strip()]
    cut = min(len(ln) - len(ln.lstrip()) for ln in lead) if lead else 0
    return "\n".join(ln[cut:] for ln in lines)


def tidy_blank_lines(code: str, old: str) -> str:
    """At most two blank lines in a row (inserted definitions bring their own), unless the
    user's own text OLD has longer runs: then nothing is reformatted (their lines stay theirs)."""
    return code if re.search(r"\n{4,}", old) else re.sub(r"\n{4,}", "\n\n\n", code)


# ----------------------------------------------------------------------------- names and scopes

def assigned(stmt: cst.CSTNode) -> list[str]:
    """Plain names a simple statement line assigns (``a, b = ...``)."""
    out = []
    for s in small(stmt):
        if isinstance(s, cst.Assign):
            for t in s.targets:
                out += [n.value for n in walk(t.target) if isinstance(n, cst.Name)]
        elif isinstance(s, (cst.AnnAssign, cst.AugAssign)):
            out += [n.value for n in walk(s.target) if isinstance(n, cst.Name)] if isinstance(s.target, cst.Name) else []
    return out


def bound(stmts: Sequence[cst.CSTNode]) -> set[str]:
    """Names the statements bind in the function's scope: assignment, loop, `with ... as` and
    walrus targets, a nested `def` or `class` (its name; what its body binds is its own) and
    an import (`import a.b` binds `a`)."""
    out: set[str] = set()

    def targets(t: cst.CSTNode) -> None:
        if isinstance(t, cst.Name):
            out.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                targets(el.value)
        elif isinstance(t, cst.StarredElement):
            targets(t.value)

    def visit(n: cst.CSTNode) -> None:
        if isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            out.add(n.name.value)
            return
        if isinstance(n, cst.Lambda):
            return
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For)):
            targets(n.target)
        elif isinstance(n, cst.AsName):
            targets(n.name)
        elif isinstance(n, cst.ImportAlias) and n.asname is None:
            name: cst.BaseExpression = n.name
            while isinstance(name, cst.Attribute):
                name = name.value
            targets(name)
        for c in n.children:
            visit(c)

    for st in stmts:
        visit(st)
    return out


def reads(stmts: Sequence[cst.CSTNode], parents: dict[cst.CSTNode, cst.CSTNode]) -> set[str]:
    """Names the statements mention as values (not attribute names or keyword names)."""
    out = set()
    for st in stmts:
        for n in walk(st):
            if not isinstance(n, cst.Name):
                continue
            p = parents.get(n)
            if isinstance(p, cst.Attribute) and p.attr is n or isinstance(p, cst.Arg) and p.keyword is n:
                continue
            out.add(n.value)
    return out


def locals_read(idx: Index, stmts: Sequence[cst.CSTNode], func: cst.FunctionDef) -> list[str]:
    """Names the statements read that are locals (parameters, assignments, loop variables) of
    FUNC or of a function around it, in first-read order: what a helper moved to module level
    must be passed. A comprehension's own loop variables, globals and builtins are not, nor is
    a name the statements bind themselves before they read it (``with open(p) as f:
    f.write(...)``)."""
    fscope = idx.scopes.get(func.body)
    binds = binding_points(idx, stmts)
    # `total += x` reads `total` before it binds it (libcst records only the binding)
    updated = {a.target for st in stmts for a in walk(st) if isinstance(a, cst.AugAssign)}
    out: list[str] = []
    for st in stmts:
        for n in walk(st):
            if not isinstance(n, cst.Name) or n.value in out or (n not in idx.loads and n not in updated):
                continue
            at = idx.span[n][0] if n in idx.span else None
            if at is not None and any(b <= at for b in binds.get(n.value, ())):
                continue
            scope = idx.scopes.get(n)
            if scope is not None and _resolves_local(scope, n.value, fscope):
                out.append(n.value)
    return out


def binding_points(idx: Index, stmts: Sequence[cst.CSTNode]) -> dict[str, list[tuple[int, int]]]:
    """Where each name the statements bind becomes bound: after an assignment's value is
    computed (its end), after a ``with`` item, after a ``for`` header's iterable."""
    out: dict[str, list[tuple[int, int]]] = {}

    def add(target: cst.CSTNode, node: cst.CSTNode) -> None:
        if node in idx.span:
            for n in walk(target):
                if isinstance(n, cst.Name):
                    out.setdefault(n.value, []).append(idx.span[node][1])

    for st in stmts:
        for n in walk_no_defs(st):
            if isinstance(n, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
                continue
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    add(t.target, n)
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
                add(n.target, n)
            elif isinstance(n, cst.WithItem) and n.asname is not None:
                add(n.asname.name, n)
            elif isinstance(n, cst.For):
                add(n.target, n.iter)
    return out


def _resolves_local(scope: Scope, name: str, fscope: Scope | None) -> bool:
    """NAME, read in SCOPE, is bound in FSCOPE or in a function scope around it (never in a
    comprehension of its own, a class body or the module)."""
    s: Scope | None = scope
    while s is not None:
        if isinstance(s, cst.metadata.ClassScope) and s is not scope:
            s = s.parent  # a class body's names are not visible in its methods
            continue
        if s.assignments[name]:
            if isinstance(s, cst.metadata.ComprehensionScope):
                return False
            return isinstance(s, cst.metadata.FunctionScope) and _within(fscope, s)
        if isinstance(s, cst.metadata.GlobalScope):
            return False
        s = s.parent
    return False


def _within(inner: Scope | None, outer: Scope) -> bool:
    s = inner
    while s is not None:
        if s is outer:
            return True
        if isinstance(s, cst.metadata.GlobalScope):
            return False
        s = s.parent
    return False

