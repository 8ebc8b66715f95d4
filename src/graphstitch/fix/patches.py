"""Making a verified fix permanent: the source patch (`fix --diff`), re-verified on a patched
copy and written without losing anything the user owns (`fix --apply`). No torch import."""

from __future__ import annotations

import ast
import contextlib
import difflib
import os
import re
from collections.abc import Callable, Mapping

from ..files import WriteRefused, atomic_write, check_writable, file_hash
from ..paths import in_project, short_path
from ..targets import Options, Patches, target_file, target_root
from .candidates import Candidate
from .copies import census_on_copy, old_text
from .rewrites import proposals
from .trials import Fix, FixReport, evaluate

WRITABLE_KINDS = ("config", "nonstrict_trace", "disable")


def writable(fix: Fix) -> bool:
    """Source rewrites, config lines and decorators that need no generated fake."""
    return fix.rule is not None or fix.kind in WRITABLE_KINDS


def best(report: FixReport) -> Fix | None:
    """The first (best-ranked) verified fix graphstitch can write as plain source."""
    return next((f for f in report.fixes if f.verified and writable(f)), None)


def planned_files(fix: Fix, report: FixReport, spec: str, root: str) -> dict[str, str]:
    """path -> new text of the patch for this fix, computed from the files as they are now
    (a rewrite is proposed again by its rule; a file changed since the census is refused
    later by its hash)."""
    tfile = target_file(spec)
    if tfile is None:
        raise LookupError(f"cannot find the source file of {spec}")
    if fix.rule is not None:
        site = next((s for s in report.sites if s.id == fix.site), None)
        if site is None:
            raise LookupError(f"the census has no site {fix.label}")
        props, _ = proposals(site, root, target_file=tfile, factory=spec.rpartition(":")[2], sites=report.sites)
        rw = next((p for p in props if p.rule == fix.rule and p.label == fix.candidate), None)
        if rw is None:
            raise LookupError(f"the rewrite {fix.candidate!r} no longer applies to {short_path(site.file)}")
        return rw.files
    path, _, new = plan_patch(fix.patches, fix.wrapped, tfile, root)
    return {path: new}


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


def _config_lines(patches: Patches) -> list[str]:
    out = []
    for k, v in patches.config.items():
        if isinstance(v, list):  # a set of functions: added to, never replaced (other modules add theirs)
            names = ", ".join(n.replace("builtins.", "") for n in v)
            out.append(f"torch._dynamo.config.{k}.update({{{names}}})  # graphstitch fix")
        else:
            out.append(f"torch._dynamo.config.{k} = {v!r}  # graphstitch fix")
    return out


def plan_patch(patches: Patches, wrapped: str | None, tfile: str, root: str | None,
               texts: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """(file to edit, old text, new text) that makes a config/hatch candidate permanent.
    Config lines go at the top of the target file; a decorator goes on the user's function;
    a function outside the project (a library; ``wrapped`` is its module:qualname, as the
    trial found it) is wrapped from the target file instead. ``texts`` (path -> text) stand
    for files already patched (`fix --all`)."""
    wrap = patches.wrap
    path = wrap.file if wrap and in_project(wrap.file, root) else tfile
    if texts and path in texts:
        old = texts[path]
    else:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    lines = old.splitlines(keepends=True)
    tree = ast.parse(old)
    needs_torch = not re.search(r"^import torch\b", old, re.M)
    top = _after_imports(tree)
    torch_line = ["import torch\n"] if needs_torch else []
    if wrap is None:
        return path, old, "".join(lines[:top] + torch_line + [ln + "\n" for ln in _config_lines(patches)] + lines[top:])
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
    mod, _, qual = (wrapped or "").partition(":")
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


def reverify(fix: Fix, report: FixReport, spec: str, opts: Options, files: dict[str, str], root: str,
             timeout: float | None) -> Fix:
    """Census a copy of the project with the patch applied and evaluate it like a trial."""
    site = next((s for s in report.sites if s.id == fix.site), None)
    if site is None:
        raise LookupError(f"the census has no site {fix.label}")
    trial = census_on_copy(spec, opts, root, files, timeout)
    return evaluate(site, Candidate(fix.kind, fix.candidate, fix.patches), report, trial)


def write_files(files: dict[str, str], hashes: dict[str, str], root: str,
                check: Callable[[], list[str]]) -> tuple[str | None, bool]:
    """Write a verified patch (several files): every file refused first if it changed since
    the census (hash), is outside the project or is not writable; ``check`` re-verifies on a
    copy (reasons, empty when verified); then each file is written atomically after its
    ``.graphstitch.bak`` (never over an earlier backup). Returns (refusal, False) or
    ("backup: NAMES", True)."""
    def refusal() -> str | None:
        for path in files:
            why = refuse_reason(path, hashes.get(os.path.realpath(path)), root)
            if why:
                return why
        return None
    why = refusal()
    if why:
        return why, False
    try:
        reasons = check()
    except LookupError as e:
        return str(e), False
    if reasons:
        return "the patched copy did not verify: " + "; ".join(reasons), False
    why = refusal()  # a file may have changed meanwhile
    if why:
        return why, False
    done: list[str] = []
    backups: list[str] = []
    for path, new in files.items():
        backup = _free_backup_name(path)
        old = old_text(path)
        try:
            atomic_write(backup, old)
            os.chmod(backup, os.stat(path).st_mode & 0o7777)
            atomic_write(path, new)
        except (WriteRefused, OSError) as e:
            with contextlib.suppress(OSError):
                os.unlink(backup)  # ours: the name was free before this write
            return f"not applied to {short_path(path)}: {e}" + (f" (already written: {', '.join(done)})" if done else ""), False
        done.append(short_path(path))
        backups.append(short_path(backup))
    return "backup: " + ", ".join(backups), True


def apply_best(report: FixReport, spec: str, opts: Options, *, write: bool,
               timeout: float | None = None, project_root: str | None = None) -> tuple[str, bool]:
    """The diff for the best verified candidate (and, with ``write``, apply it). Returns
    (message, ok); never raises for a refusal."""
    fix = best(report)
    if fix is None:
        return "no verified candidate that graphstitch can write as a source patch", False
    root = project_root or target_root(spec)
    try:
        files = planned_files(fix, report, spec, root)
    except (LookupError, OSError, SyntaxError) as e:
        return f"cannot write a patch for {fix.candidate}: {e}", False
    diff = "".join(unified_diff(p, old_text(p), new) for p, new in files.items())
    if not write:
        return diff, True
    why, ok = write_files(files, report.source_sha256, root,
                          lambda: reverify(fix, report, spec, opts, files, root, timeout).why_not)
    if not ok:
        return why or "not applied", False
    # On success write_files says where the backups went.
    return f"{diff}\napplied {fix.candidate} to {', '.join(short_path(p) for p in files)} ({why})", True
