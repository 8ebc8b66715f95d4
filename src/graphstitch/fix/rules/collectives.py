"""Collectives in compiled code: an in-place ``dist.all_reduce``/``broadcast`` becomes its
functional twin, and a ``torch.compiler.disable`` / ``torch._dynamo.disable`` the user put
around a helper whose body now traces (the classic: a collective hidden from Dynamo, one
break per layer) is dropped. A patch that touches a collective is verified on 2 gloo ranks
too (``Rewrite.ranks``): a world of one cannot tell a broadcast from a SUM all_reduce."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import libcst as cst

from .base import Ctx, Refusal, Rewrite, rule
from .syntax import Index, add_import, small, small_stmt, swap_code, walk

_FUNCOL = "import torch.distributed._functional_collectives as funcol"


@rule("functional-collectives")
def _functional_collectives(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """In-place dist.all_reduce/broadcast -> functional collectives (traced, no break)."""
    for s in small(ctx.stmt):
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
        new = small_stmt(f"{t} = {expr}")
        yield Rewrite("functional-collectives", "rewrite", f"dist.{m.group(1)} -> functional {m.group(1)} (returns the result)",
                      "a new tensor instead of an in-place update (the old buffer keeps its value); "
                      "verified on 2 gloo ranks", {ctx.path: add_import(ctx.swap({s: new}), _FUNCOL)}, ranks=2)


_DISABLE = re.compile(r"^(torch\._dynamo\.|torch\.compiler\.|_dynamo\.|compiler\.)?disable\b")
_COLLECTIVE = re.compile(r"\b(dist|distributed|funcol)\.\w+\(|\b(all_reduce|all_gather|reduce_scatter|broadcast)\w*\(")
# The function Dynamo would not call: "Skip calling function `<function NAME at 0x…>`".
_SKIPPED_FN = re.compile(r"<function ([\w.<>]+) at 0x")


def _disabled_callee(ctx: Ctx) -> str | None:
    """The name of the disabled function the site calls, from Dynamo's explanation."""
    if "disable" not in (ctx.site.gb_type + ctx.site.explanation):
        return None
    m = _SKIPPED_FN.search(ctx.site.explanation)
    return m.group(1).rpartition(".")[2] if m else None


def _definition(ctx: Ctx, name: str) -> tuple[str, cst.Module, Index, cst.CSTNode] | None:
    """Where NAME, called at the site, is made disabled: its decorated ``def`` (a method of
    the class around the site, a function of this module or of the project module it is
    imported from) or a module-level ``NAME = disable(fn)``. (path, module, index, node)."""
    files = [ctx.path]
    for n in walk(ctx.module):  # `from .comm import reduce_` / `from pkg.comm import reduce_`
        if isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar) and \
                any(isinstance(a.name, cst.Name) and (a.evaluated_alias or a.evaluated_name) == name for a in n.names):
            found = _module_file(ctx, n)
            if found:
                files.append(found)
    for path in [*files, *_project_files(ctx, name, set(files))]:
        try:
            idx = ctx.idx if path == ctx.path else Index(cst.MetadataWrapper(cst.parse_module(ctx.read(path))))
        except (OSError, SyntaxError, cst.ParserSyntaxError):
            continue
        for node in walk(idx.module):
            if isinstance(node, cst.FunctionDef) and node.name.value == name and \
                    any(_DISABLE.match(idx.module.code_for_node(d.decorator)) for d in node.decorators):
                return path, idx.module, idx, node
            if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                    for t in node.targets) and \
                    isinstance(node.value, cst.Call) and _DISABLE.match(idx.module.code_for_node(node.value.func)):
                return path, idx.module, idx, node
    return None


_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox", "site-packages"}


def _project_files(ctx: Ctx, name: str, seen: set[str], limit: int = 5000) -> Iterator[str]:
    """The project's other Python files that define NAME (a text search first; a helper
    defined anywhere in the project, reached through an attribute or a re-export)."""
    if not ctx.root:
        return
    pattern = re.compile(rf"^\s*(def\s+{re.escape(name)}\b|{re.escape(name)}\s*=)", re.M)
    n = 0
    for d, dirs, files in os.walk(ctx.root):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.startswith("."))
        for f in sorted(files):
            path = os.path.join(d, f)
            if not f.endswith(".py") or path in seen:
                continue
            n += 1
            if n > limit:
                return
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    if pattern.search(fh.read()):
                        yield path
            except OSError:
                continue


def _module_file(ctx: Ctx, imp: cst.ImportFrom) -> str | None:
    """The project file an ``from X import ...`` of the site's file reads (relative or absolute)."""
    dots = len(imp.relative)
    mod = ctx.module.code_for_node(imp.module) if imp.module else ""
    if dots:
        base = os.path.dirname(ctx.path)
        for _ in range(dots - 1):
            base = os.path.dirname(base)
    else:
        base = ctx.root or os.path.dirname(ctx.path)
    for root in ([base] if dots else [base, os.path.join(base, "src"), os.path.dirname(ctx.path)]):
        stem = os.path.join(root, *mod.split(".")) if mod else root
        for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(cand):
                return cand
    return None


def touches_collective(ctx: Ctx, stmts: list[cst.BaseStatement]) -> bool:
    """Do STMTS run a collective, themselves or in a function of this module they call by
    name? A patch that moves such code must be verified on several ranks too."""
    codes = [ctx.code(st) for st in stmts]
    called = {n.func.value for st in stmts for n in walk(st) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name)}
    called |= {n.func.attr.value for st in stmts for n in walk(st) if isinstance(n, cst.Call)
               and isinstance(n.func, cst.Attribute)}
    codes += [ctx.code(n) for n in walk(ctx.module) if isinstance(n, cst.FunctionDef) and n.name.value in called]
    return any(_COLLECTIVE.search(c) for c in codes)


@rule("drop-disable")
def _drop_disable(ctx: Ctx) -> Iterator[Rewrite | Refusal]:
    """The site calls a function the user disabled for Dynamo; if its body traces now (a
    collective does in torch 2.13: ``dist.all_reduce`` becomes a functional collective in the
    graph), the hatch only costs a break per call: drop it."""
    name = _disabled_callee(ctx)
    if name is None:
        return
    found = _definition(ctx, name)
    if found is None:
        yield Refusal("drop-disable", f"the disabled function {name}() is not defined in the project's files the "
                      "site's module imports; nothing to drop")
        return
    path, module, idx, node = found
    if isinstance(node, cst.FunctionDef):
        new: object = node.with_changes(decorators=[d for d in node.decorators
                                                    if not _DISABLE.match(module.code_for_node(d.decorator))])
        body = module.code_for_node(node)
    else:  # NAME = disable(fn): NAME = fn
        assert isinstance(node, cst.Assign) and isinstance(node.value, cst.Call)
        if not node.value.args:
            return
        arg = node.value.args[0].value
        new = node.with_changes(value=arg)
        fn = next((n for n in walk(module) if isinstance(n, cst.FunctionDef) and n.name.value == module.code_for_node(arg)),
                  None)
        body = module.code_for_node(fn if fn is not None else arg)
    text = swap_code(module, {node: new})
    ranks = 2 if _COLLECTIVE.search(body) else 0
    yield Rewrite("drop-disable", "rewrite", f"drop the disable on {name}(): its body traces",
                  "Dynamo now traces the function (a collective becomes a functional collective in the graph)"
                  + ("; verified on 2 gloo ranks" if ranks else ""), {path: text}, ranks=ranks)
