"""Making a verified fix permanent: the source patch (`fix --diff`), re-verified on a patched
copy and written without losing anything the user owns (`fix --apply`). No torch import."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import os
import re
import shutil
import tempfile

from .. import worker
from ..files import WriteRefused, atomic_write, check_writable, file_hash
from ..model import Site, SkippedFrame
from ..paths import in_project, short_path
from ..targets import Options, target_file, target_root
from .candidates import Candidate
from .trials import Fix, FixReport, census_job, evaluate

WRITABLE_KINDS = ("config", "nonstrict_trace", "disable")


def best(report: FixReport) -> Fix | None:
    """The first verified fix graphstitch can write as plain source: config lines and
    decorators that need no generated fake."""
    return next((f for f in report.fixes if f.verified and f.kind in WRITABLE_KINDS), None)


def _after_imports(tree: ast.Module) -> int:
    """0-based line index after the module docstring and the leading imports."""
    idx = 0
    for node in tree.body:
        value = getattr(node, "value", None)
        is_doc = isinstance(node, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (is_doc and idx == 0):
            idx = node.end_lineno or node.lineno
        else:
            break
    return idx


def _config_lines(fix: Fix) -> list[str]:
    out = []
    for k, v in fix.patches.config.items():
        v_src = "{" + ", ".join(n.replace("builtins.", "") for n in v) + "}" if isinstance(v, list) else repr(v)
        out.append(f"torch._dynamo.config.{k} = {v_src}  # graphstitch fix")
    return out


def plan_patch(fix: Fix, tfile: str, root: str | None) -> tuple[str, str, str]:
    """(file to edit, old text, new text) that makes ``fix`` permanent. Config lines go at
    the top of the target file; a decorator goes on the user's function; a function outside
    the project (a library) is wrapped from the target file instead."""
    wrap = fix.patches.wrap
    path = wrap.file if wrap and in_project(wrap.file, root) else tfile
    with open(path, encoding="utf-8") as f:
        old = f.read()
    lines = old.splitlines(keepends=True)
    tree = ast.parse(old)
    needs_torch = not re.search(r"^import torch\b", old, re.M)
    top = _after_imports(tree)
    torch_line = ["import torch\n"] if needs_torch else []
    if wrap is None:
        return path, old, "".join(lines[:top] + torch_line + [ln + "\n" for ln in _config_lines(fix)] + lines[top:])
    hatch = {"nonstrict_trace": "torch._dynamo.nonstrict_trace", "disable": "torch.compiler.disable"}[wrap.how]
    if path == wrap.file:
        node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == wrap.function and n.lineno <= wrap.line <= (n.end_lineno or n.lineno)), None)
        if node is None:
            raise LookupError(f"cannot find {wrap.function}() in {path}")
        first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        m = re.match(r"\s*", lines[node.lineno - 1])
        indent = m.group(0) if m else ""
        new_lines = lines[:first] + [f"{indent}@{hatch}  # graphstitch fix\n"] + lines[first:]
        return path, old, "".join(new_lines[:top] + torch_line + new_lines[top:])
    mod, _, qual = (fix.wrapped or "").partition(":")
    if not mod:
        raise LookupError("the trial did not say which function it wrapped")
    obj = f"{mod}.{qual}"
    add = torch_line + [f"import {mod}  # graphstitch fix: wrap a library function from your code\n",
                        f"{obj} = {hatch}({obj})  # graphstitch fix\n"]
    return path, old, "".join(lines[:top] + add + lines[top:])


def unified_diff(path: str, old: str, new: str) -> str:
    rel = short_path(path)
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{rel}", tofile=f"b/{rel}"))


def _free_backup_name(path: str) -> str:
    """FILE.graphstitch.bak, or .bak.2, .bak.3...: an earlier backup is never overwritten."""
    backup, n = path + ".graphstitch.bak", 1
    while os.path.lexists(backup):
        n += 1
        backup = f"{path}.graphstitch.bak.{n}"
    return backup


def refuse_reason(path: str, expected_hash: str | None, root: str | None) -> str | None:
    if not in_project(path, root):
        return f"{path} is not inside the project ({root}) or is an installed package; not editing it"
    if expected_hash is None or file_hash(path) != expected_hash:
        return f"{path} changed since the census; run `graphstitch fix` again"
    try:
        check_writable(path)
    except WriteRefused as e:
        return str(e)
    return None


def reverify(fix: Fix, report: FixReport, spec: str, opts: Options, path: str, new: str, root: str,
             timeout: float | None) -> Fix:
    """Census a copy of the project's target and patched files, laid out as in the project
    (so site identities match), and evaluate it like a trial."""
    tfile = target_file(spec)
    if tfile is None:
        raise LookupError(f"cannot find the source file of {spec}")
    site = next((s for s in report.sites if s.id == fix.site), None)
    if site is None:
        raise LookupError(f"the census has no site {fix.label}")
    with tempfile.TemporaryDirectory(prefix="graphstitch-fix-") as tmp:
        def copy_of(p: str) -> str:
            rel = os.path.relpath(os.path.realpath(p), root)
            if rel.startswith(".."):
                raise LookupError(f"{p} is outside the project {root}; cannot re-verify it on a copy")
            dst = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            return dst
        t_copy = copy_of(tfile)
        shutil.copy2(tfile, t_copy)
        with open(copy_of(path), "w", encoding="utf-8") as f:
            f.write(new)
        p_copy = copy_of(path)
        t_spec = t_copy + ":" + spec.rpartition(":")[2]
        trial_opts = dataclasses.replace(opts, fresh=True, patches=None)
        trial = worker.run(census_job(t_spec, trial_opts, tmp), timeout=timeout,
                           pythonpath=[os.path.dirname(t_copy), os.path.dirname(tfile)]).census
    # Identities already match (same project layout); lines are shown as in the user's file.
    lines = _line_map(old_text(path), new)
    items: list[Site | SkippedFrame] = [*trial.sites, *trial.skipped_frames]
    for item in items:
        if os.path.realpath(item.file) == os.path.realpath(p_copy):
            item.file, item.line = path, lines.get(item.line, item.line)
        elif os.path.realpath(item.file) == os.path.realpath(t_copy):
            item.file = tfile
    return evaluate(site, Candidate(fix.kind, fix.candidate, fix.patches), report, trial)


def old_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _line_map(old: str, new: str) -> dict[int, int]:
    """New line number -> old line number for lines the patch did not touch."""
    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    out: dict[int, int] = {}
    for tag, i1, i2, j1, _ in sm.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                out[j1 + k + 1] = i1 + k + 1
    return out


def apply_best(report: FixReport, spec: str, opts: Options, *, write: bool,
               timeout: float | None = None, project_root: str | None = None) -> tuple[str, bool]:
    """The diff for the best verified candidate (and, with ``write``, apply it). Returns
    (message, ok); never raises for a refusal."""
    fix = best(report)
    if fix is None:
        return "no verified candidate that graphstitch can write as a source patch", False
    tfile = target_file(spec)
    if tfile is None:
        return f"cannot find the source file of {spec}", False
    root = project_root or target_root(spec)
    try:
        path, old, new = plan_patch(fix, tfile, root)
    except (LookupError, OSError, SyntaxError) as e:
        return f"cannot write a patch for {fix.candidate}: {e}", False
    diff = unified_diff(path, old, new)
    if not write:
        return diff, True
    expected = report.source_sha256.get(os.path.realpath(path))
    why = refuse_reason(path, expected, root)
    if why:
        return why, False
    try:
        check = reverify(fix, report, spec, opts, path, new, root, timeout)
    except LookupError as e:
        return str(e), False
    if not check.verified:
        return "the patched copy did not verify: " + "; ".join(check.why_not), False
    why = refuse_reason(path, expected, root)  # the file may have changed meanwhile
    if why:
        return why, False
    backup = _free_backup_name(path)
    try:
        atomic_write(backup, old)
        os.chmod(backup, os.stat(path).st_mode & 0o7777)
        atomic_write(path, new)
    except (WriteRefused, OSError) as e:
        with contextlib.suppress(OSError):
            os.unlink(backup)  # ours: the name was free before this write
        return f"not applied: {e}", False
    return f"{diff}\napplied {fix.candidate} to {short_path(path)} (backup: {short_path(backup)})", True
