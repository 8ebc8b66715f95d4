"""`graphstitch fix` for recompile causes: candidates keyed by the typed cause kind (what
Dynamo's guard checked and what it reads, ``RecompileCause.kind`` / ``subject``), each a
source patch tried in the fix workspace like a break fix, and the verdict on each.

- shape (``x dim 0``): ``mark_dynamic`` / ``maybe_mark_dynamic`` written where the factory
  makes the call (the user's call site), or what ``dynamic=True`` sets, as a config line;
- scalar (a Python number argument): passed as a 0-d tensor at the call site (verified only
  if no break appears: a slice bound is refused by its trial), or ``dynamic=True``'s config;
  a number handed over by a break (``___stack0`` in a resume function): that break's own
  fixes and ``capture_scalar_outputs``;
- attribute (``self.steps`` changing between calls): kept as a buffer, or for an integer
  ``allow_unspec_int_on_nn_module``;
- object (a new object per call): hoisting it is the fix, and no patch is written (why is said);
- every other kind must recompile (model.EXPECTED_KINDS): explained with its count.

A cause fix is verified only if that cause's recompiles are gone, no break site, skipped
frame, recompile cause or limit hit appeared, outputs equal eager on the factory's calls and
on fresh inputs, side effects are kept, and a repeat pass over the same calls recompiles
nothing (trials run with ``Options.repeat``). No torch import.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from ..changes import diff, site_label
from ..files import parse_python, source_text
from ..model import AVOIDABLE_KINDS, CauseId, Census, RecompileCause, Site
from ..paths import in_project, short_path
from ..targets import Options, Patches
from .candidates import Candidate
from .rules import Rewrite, proposals
from .trials import CauseFix, Counts, Explained, FixReport, proved, rewrite_diff
from .workspace import Workspace, after_imports, config_text

DYNAMIC = {"assume_static_by_default": False}   # what torch.compile(dynamic=True) patches


def label(c: RecompileCause) -> str:
    cid = c.id
    return f"{c.kind} {c.subject} in {cid.function} ({cid.path})" if cid else c.reason


# ----------------------------------------------------------------------------- candidates

def _def_at(tree: ast.AST, line: int, name: str) -> tuple[ast.FunctionDef | None, ast.ClassDef | None]:
    """The function NAME whose definition spans LINE, and the class holding it."""
    best: tuple[ast.FunctionDef | None, ast.ClassDef | None] = (None, None)
    for cls in [None, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
        body = cls.body if cls is not None else getattr(tree, "body", [])
        for n in body:
            if isinstance(n, ast.FunctionDef) and n.name == name and n.lineno <= line <= (n.end_lineno or n.lineno):
                best = (n, cls)
    return best


def _frame(cause: RecompileCause, c: Census) -> tuple[str, int, str] | None:
    """(file, def line, function) of the frame the cause recompiled first."""
    cid = cause.compile_ids[0] if cause.compile_ids else None
    fr = next((f for f in c.frames if f.compile_id == cid), None)
    return (fr.file, fr.line, fr.function) if fr is not None and os.path.isfile(fr.file) else None


def _param(cause: RecompileCause, c: Census, name: str, read: dict[str, str]) -> tuple[int, str, str] | str:
    """(position among the call's arguments, name, the frame's function) of parameter NAME
    of the cause's frame, or why not."""
    fr = _frame(cause, c)
    star = re.fullmatch(r"args\[(\d+)\]", name)   # forward(*args), as nn.Sequential's: the position itself
    if star:
        return int(star.group(1)), name, fr[2] if fr is not None else "forward"
    if fr is None:
        return "the recompiled frame's source is not on this machine"
    text = read.get(fr[0]) or source_text(fr[0])
    fn, cls = _def_at(parse_python(text), fr[1], fr[2])
    if fn is None:
        return f"cannot find {fr[2]}() in {short_path(fr[0])}"
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if cls is not None and params and params[0] == "self":
        params = params[1:]
    if name not in params:
        return f"{name} is not a parameter of {fr[2]}() (a closure or default value): no call site passes it"
    return params.index(name), name, fr[2]


def _wrap_call_args(text: str, factory: str, index: int, name: str, before: str, after: str,
                    callee: str) -> str | None:
    """TEXT with every call of CALLEE the factory makes, ``(fn, (args...), {kwargs})``,
    passing its INDEX-th positional argument (or keyword NAME) as ``BEFORE arg AFTER``; None
    if none. A call whose fn names another function is not one: the recompiled frame is one
    the program calls inside (its arguments are made there). A module (``forward``) is
    passed as an object, whose name says nothing."""
    tree = parse_python(text)
    fac = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == factory), None)
    if fac is None:
        return None
    spans: list[ast.expr] = []
    for n in ast.walk(fac):
        # A call is (fn, (args...)[, {kwargs}]): fn is no literal, kwargs a dict, so a tuple of
        # tuples (a table of sizes) is not taken for one.
        if isinstance(n, ast.Tuple) and len(n.elts) in (2, 3) and isinstance(n.elts[1], ast.Tuple) \
                and not isinstance(n.elts[0], (ast.Tuple, ast.List, ast.Constant)) \
                and (len(n.elts) == 2 or isinstance(n.elts[2], (ast.Dict, ast.Call, ast.Name))):
            fn = n.elts[0]
            named = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if callee not in ("forward", "__call__") and named != callee:
                continue
            args = n.elts[1].elts
            if index < len(args) and not isinstance(args[index], ast.Starred):
                spans.append(args[index])
            elif len(n.elts) == 3 and isinstance(n.elts[2], ast.Dict):
                spans += [v for k, v in zip(n.elts[2].keys, n.elts[2].values)
                          if isinstance(k, ast.Constant) and k.value == name]
    if not spans:
        return None
    lines = text.splitlines(keepends=True)
    raw = [ln.encode() for ln in lines]   # ast offsets are UTF-8 byte offsets
    for e in sorted(spans, key=lambda e: (e.lineno, e.col_offset), reverse=True):
        end_l, end_c = (e.end_lineno or e.lineno) - 1, e.end_col_offset or 0
        raw[end_l] = raw[end_l][:end_c] + after.encode() + raw[end_l][end_c:]
        raw[e.lineno - 1] = raw[e.lineno - 1][:e.col_offset] + before.encode() + raw[e.lineno - 1][e.col_offset:]
    return b"".join(raw).decode()


_HELPERS = {
    "mark_dynamic": ("_graphstitch_dynamic", "torch._dynamo.mark_dynamic",
                     "this dimension's size changes between calls: compile it symbolic from the start"),
    "maybe_mark_dynamic": ("_graphstitch_maybe_dynamic", "torch._dynamo.maybe_mark_dynamic",
                           "this dimension's size changes between calls; it may still be specialized"),
}


def _with_helper(text: str, how: str) -> str:
    """TEXT with the call-site helper for HOW after its imports (once)."""
    name, api, why = _HELPERS[how]
    if re.search(rf"^def {name}\b", text, re.M):
        return text
    lines = text.splitlines(keepends=True)
    top = after_imports(parse_python(text))
    imp = [] if re.search(r"^import torch\b", text, re.M) else ["import torch\n"]
    helper = [f"\n\ndef {name}(t, dim):  # graphstitch fix: {why}\n", f"    {api}(t, dim)\n", "    return t\n\n"]
    return "".join(lines[:top] + imp + helper + lines[top:])


def _config(path: str, cfg: Mapping[str, object], read: dict[str, str]) -> dict[str, str]:
    old = read.get(path) or source_text(path)
    return {path: config_text(Patches(config=dict(cfg)), old)}


def _buffer(cause: RecompileCause, c: Census, root: str | None, read: dict[str, str]) -> Rewrite | str:
    """``self.X = <number>`` in the module's ``__init__`` -> a non-persistent buffer: the value
    lives in a tensor, so a new value is data, not a guard."""
    attr = cause.subject.rpartition(".")[2]
    fr = _frame(cause, c)
    if fr is None or not cause.subject.startswith("self."):
        return f"{cause.subject} is not an attribute of the module whose forward recompiled"
    if not in_project(fr[0], root):
        return f"{short_path(fr[0])} is outside the project"
    text = read.get(fr[0]) or source_text(fr[0])
    _, cls = _def_at(parse_python(text), fr[1], fr[2])
    init = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    assign = next((n for n in ast.walk(init) if isinstance(n, ast.Assign) and len(n.targets) == 1
                   and isinstance(t := n.targets[0], ast.Attribute) and t.attr == attr
                   and isinstance(t.value, ast.Name) and t.value.id == "self"), None) if init else None
    if assign is None:
        return f"no `self.{attr} = ...` in {cls.name if cls else '?'}.__init__ to keep as a buffer"
    value = assign.value
    number = value.operand if isinstance(value, ast.UnaryOp) else value
    if not (isinstance(number, ast.Constant) and type(number.value) in (int, float)):
        return f"self.{attr} starts as {ast.unparse(value)}, not a number: not kept as a buffer"
    lines = text.splitlines(keepends=True)
    first = lines[assign.lineno - 1]
    indent = first[:len(first) - len(first.lstrip())]
    new = (f'{indent}self.register_buffer("{attr}", torch.tensor({ast.unparse(value)}), persistent=False)'
           "  # graphstitch fix: a value that changes every call lives in a tensor, not a guard\n")
    out = "".join(lines[:assign.lineno - 1] + [new] + lines[assign.end_lineno or assign.lineno:])
    if not re.search(r"^import torch\b", out, re.M):
        out = "import torch\n" + out
    return Rewrite("attribute-buffer", "rewrite", f"keep self.{attr} as a buffer (a 0-d tensor)",
                   "the attribute becomes a tensor: reading it as a Python number (range, slicing) breaks the graph",
                   {fr[0]: out})


def cause_candidates(cause: RecompileCause, c: Census, *, root: str | None, target_file: str | None,
                     factory: str | None, sites: list[Site] | None = None,
                     read: dict[str, str] | None = None) -> tuple[list[Candidate], str]:
    """The source patches to try for CAUSE (each a Candidate carrying a Rewrite), and why
    nothing more can be tried (what a cause with none says). READ (path -> text) stands for
    files already patched (`fix --all`)."""
    read = read or {}
    out: list[Rewrite] = []
    why: list[str] = []
    fr = _frame(cause, c)
    home = fr[0] if fr is not None and in_project(fr[0], root) else target_file
    if cause.kind == "shape" and target_file:
        name, _, dim = cause.subject.rpartition(" dim ")
        where = _param(cause, c, name, read)
        if isinstance(where, str):
            why.append(where)
        else:
            tsrc = read.get(target_file) or source_text(target_file)
            for how in ("mark_dynamic", "maybe_mark_dynamic"):
                helper = _HELPERS[how][0]
                new = _wrap_call_args(tsrc, factory or "", where[0], name, f"{helper}(", f", {dim})", where[2])
                if new is None:
                    why.append(f"{factory}() builds no ({where[2]}, (args...), {{kwargs}}) call passing {name}")
                    break
                out.append(Rewrite(how, "caller", f"{how}({name}, {dim}) where {factory}() makes the call",
                                   f"dimension {dim} of {name} is compiled symbolic: shape-specialized code is lost"
                                   + ("" if how == "mark_dynamic" else "; Dynamo may still specialize it"),
                                   {target_file: _with_helper(new, how)}))
    if cause.kind == "scalar" and not cause.subject.startswith("___") and target_file:
        where = _param(cause, c, cause.subject, read)
        if isinstance(where, str):
            why.append(where)
        else:
            tsrc = read.get(target_file) or source_text(target_file)
            new = _wrap_call_args(tsrc, factory or "", where[0], cause.subject, "torch.tensor(", ")", where[2])
            if new is None:
                why.append(f"{factory}() builds no ({where[2]}, (args...), {{kwargs}}) call passing {cause.subject}")
            else:
                out.append(Rewrite("scalar-tensor", "caller", f"pass {cause.subject} as a 0-d tensor where "
                                   f"{factory}() makes the call", "the number takes part in type promotion as a "
                                   "0-d tensor; Python-number uses of it (slicing, range) break the graph", {target_file: new}))
    if cause.kind == "scalar" and cause.site is not None:
        # A number a break handed to the resume function: the break's own fixes remove its guard.
        site = next((s for s in (sites or c.sites) if s.id == cause.site), None)
        if site is not None:
            props, _ = proposals(site, root, target_file=target_file, factory=factory, overlay=read, sites=sites or c.sites)
            out += [p for p in props if not p.upstream and p.strategy in ("rewrite", "caller")]
            if home:
                out.append(Rewrite("config", "config", "config capture_scalar_outputs=True",
                                   "a torch._dynamo.config flag for the whole process: .item() stays in the graph",
                                   _config(site.file if in_project(site.file, root) else home,
                                           {"capture_scalar_outputs": True}, read)))
    if cause.kind == "attribute":
        b = _buffer(cause, c, root, read)
        if isinstance(b, str):
            why.append(b)
        else:
            out.append(b)
        if home and re.search(r"== \d+\b(?!\.)", " ".join(cause.examples)):
            out.append(Rewrite("config", "config", "config allow_unspec_int_on_nn_module=True",
                               "a torch._dynamo.config flag for the whole process: integer module attributes are "
                               "symbolic", _config(home, {"allow_unspec_int_on_nn_module": True}, read)))
    if cause.kind in ("shape", "scalar") and home:
        out.append(Rewrite("config", "config", "config assume_static_by_default=False (what dynamic=True sets)",
                           "a torch._dynamo.config flag for the whole process: every size and number is compiled "
                           "symbolic from the first call", _config(home, DYNAMIC, read)))
    if cause.kind == "object":
        why.append(f"a new object reaches {cause.id.function if cause.id else 'the function'} each call "
                   f"({cause.subject}): create it once outside the loop and reuse it; graphstitch writes no patch "
                   "for this (moving where an object is made changes what the code shares)")
    cands = [Candidate(r.strategy, r.label, Patches(), r) for r in out
             if all(text != (read.get(p) or source_text(p)) for p, text in r.files.items())]
    return cands, "; ".join(dict.fromkeys(why))


def explain(cause: RecompileCause) -> Explained | None:
    """A cause that must recompile, or has no fix graphstitch writes: the explanation."""
    if cause.id is None:
        return None
    if cause.expected:
        return Explained(cause.id, cause.count, True, f"expected: {cause.expected} ({cause.count} recompile"
                         f"{'s' if cause.count != 1 else ''})")
    if cause.kind not in AVOIDABLE_KINDS:
        return Explained(cause.id, cause.count, False, f"no fix is known for this guard: {cause.reason}")
    return None


# ----------------------------------------------------------------------------- verdict

def _match(c: Census, cid: CauseId) -> RecompileCause | None:
    return next((r for r in c.recompiles if r.id == cid), None)


def evaluate_cause(cause: RecompileCause, cand: Candidate, base: Census, trial: Census, patch: str | None) -> CauseFix:
    """What the trial (run with a repeat pass) proved about CAND for CAUSE."""
    assert cause.id is not None
    why: list[str] = []
    if trial.error:
        why.append(f"error ({trial.error.kind.value}): {trial.error.type or ''} {trial.error.headline[:200]}"
                   .replace("  ", " "))
    d = diff(base, trial)
    left = _match(trial, cause.id)
    after = (left.count - left.repeats - left.checks) if left else 0
    gone_sites = {s.id for s in d.gone_sites}
    new_sites = [site_label(s.id, s.line) for s in d.new_sites if s.id not in gone_sites]
    new_skips = [f"{f.function} {f.id.path}:{f.line}" for f in d.new_skipped]
    new_causes = [label(r) for r in d.new_causes if r.id != cause.id]
    grown = [f"{label(ch.cause)}: {ch.before} -> {ch.after}" for ch in d.cause_counts
             if ch.after > ch.before and ch.cause.id != cause.id]
    repeats = [f"{label(r)} ({r.repeats}x)" for r in trial.recompiles if r.repeats]
    outputs, effects, given_only = proved(trial, base)
    if not trial.error:
        if after:
            why.append(f"the cause still recompiles ({cause.count - cause.repeats - cause.checks} -> {after})")
        if new_sites:
            why.append("new break site " + ", ".join(new_sites))
        if new_skips:
            why.append("new skipped frame " + ", ".join(new_skips))
        if new_causes or grown:
            why.append("new or more recompiles: " + ", ".join(new_causes + grown))
        if d.new_limit_hits:
            why.append("recompile limit hit: " + ", ".join(h.function for h in d.new_limit_hits))
        if repeats:
            why.append("recompiles on a repeat pass over the same calls: " + ", ".join(repeats))
        if not outputs:
            why.append("outputs differ from eager: " + str(trial.output_mismatch or trial.checks.fresh_mismatch
                                                           or trial.checks.fresh_error or "not checked"))
        if effects is False:
            why.append("printed/logged output differs from eager at run time")
    rw = cand.rewrite
    return CauseFix(cause.id, label(cause), cand.label, rw.rule if rw else cand.kind, cand.strategy, not why,
                    Counts.of(base), Counts.of(trial), cause.count - cause.repeats - cause.checks, after,
                    not trial.error and after == 0, not repeats and not trial.error, outputs, effects,
                    new_sites, new_skips, new_causes, why, cand.tradeoff, rw.rule if rw else None, patch,
                    given_only)


_RANK = {"caller": 0, "rewrite": 1, "extract": 2, "split": 3, "config": 4}


def rank_causes(fixes: list[CauseFix]) -> list[CauseFix]:
    """Per cause (in census order): verified first, then at the call site > rewrite > config,
    then fewest recompiles left, then fewest graphs."""
    order: dict[CauseId, int] = {}
    for f in fixes:
        order.setdefault(f.cause, len(order))
    return sorted(fixes, key=lambda f: (order[f.cause], not f.verified, _RANK.get(f.strategy, 9),
                                        f.after.recompiles, f.after.graphs, f.candidate))


def avoidable(c: Census) -> list[RecompileCause]:
    """The causes `fix` tries to remove: a known avoidable kind, with an identity."""
    return [r for r in c.recompiles if r.id is not None and r.kind in AVOIDABLE_KINDS]


def cause_trials(base: FixReport, ws: Workspace, opts: Options, tfile: str | None, factory: str,
                  run_all: Callable[[dict[str, Candidate], Options], dict[str, Census]],
                  kinds: AbstractSet[str] | None) -> None:
    """Recompile causes: their candidates, each a source patch censused in the workspace with
    a repeat pass (a fix that only moves the recompile to identical calls is not one)."""
    pairs = []
    for r in base.recompiles:
        ex = explain(r)
        if ex is not None:
            base.explained.append(ex)
            continue
        if r not in avoidable(base):
            continue
        cands, why = cause_candidates(r, base, root=ws.project, target_file=tfile, factory=factory)
        if not cands and r.id is not None:
            base.explained.append(Explained(r.id, r.count, False, why or "no candidate applies"))
        pairs += [(r, c) for c in cands if kinds is None or c.kind in kinds]
    keyed = {"cause:" + c.key: c for _, c in pairs}
    results = run_all(keyed, dataclasses.replace(opts, repeat=1))
    base.cause_fixes = rank_causes([evaluate_cause(r, c, base, results["cause:" + c.key],
                                                   rewrite_diff(c.rewrite) if c.rewrite else None) for r, c in pairs])
