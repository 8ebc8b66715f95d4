"""THE workspace of `graphstitch fix`: the user's project with some files patched.

Every trial, `--diff`, `--apply`'s re-verification and `--all` run their census here, so a
patch verified in a trial is verified the same way when it is written. The patched texts
are written into a temp folder and imported *in place of* the originals (the overlay of
``targets.use_overlay``): the whole project is the user's own tree, however it is laid out
(a package beside the factory, a src layout, namespace packages, relative imports, a
library checkout on ``PYTHONPATH``, an installed library module), and the worker proves no
original of a patched file was imported. The census is checked against the original code's
eager run (``Options.reference``) and mapped back to the user's files. No torch import.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import procs, worker
from ..files import encode_source, line_map, parse_python, read_source, source_text
from ..model import Census, ErrorInfo, ErrorKind, FrameCompile, Graph, LimitHit, Site, SkippedFrame, StackEntry
from ..paths import identity_path, in_project
from ..targets import Options, Patches, target_root
from .rules import user_frames

_FILE_LINE_RE = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass
class Workspace:
    spec: str        # the user's target
    project: str     # the project: what fix may edit (--project, [tool.graphstitch] project, the target's root)
    id_root: str     # names files in site identities, as the baseline census does (the target's root)

    @classmethod
    def of(cls, spec: str, project: str | None = None) -> Workspace:
        """The workspace of SPEC; PROJECT defaults to the target's project root."""
        root = target_root(spec)
        return cls(spec, os.path.realpath(project) if project else root, root)

    def job(self, opts: Options) -> worker.Job:
        """The census job of the unpatched target (the baseline, a config or hatch trial)."""
        setup = "graphstitch.fix.hatches:install" if opts.patches and opts.patches.wrap else None
        return worker.Job(spec=self.spec, options=opts, project_root=self.id_root, setup=setup)

    def census(self, opts: Options, files: dict[str, str], timeout: float | None, *,
               warm: procs.Child | None = None, map_lines: bool = True, patches: Patches | None = None) -> Census:
        """The census of the project with ``files`` (path -> new text) patched, mapped back to
        the user's paths (and lines, unless ``map_lines`` is false: `--all` keeps the lines
        of the patched text it goes on rewriting); PATCHES, a flag or hatch candidate's, on top."""
        with self._patched(opts, files, patches) as (job, back):
            trial = worker.run(job, timeout=timeout, warm=warm).census
        back(trial, map_lines)
        return trial

    def ranks(self, opts: Options, files: dict[str, str], nproc: int, timeout: float | None) -> dict[int, Census]:
        """The same patched project on NPROC gloo ranks (`graphstitch ranks`' launcher): each
        rank's census against the original's eager run on that rank."""
        from ..ranks import run_ranks
        with self._patched(opts, files) as (job, back):
            assert job.spec is not None
            censuses, _ = run_ranks(job.spec, nproc, job.options, timeout=timeout, project_root=job.project_root)
        for c in censuses.values():
            back(c, True)
        return censuses

    @contextlib.contextmanager
    def _patched(self, opts: Options, files: dict[str, str], patches: Patches | None = None
                 ) -> Iterator[tuple[worker.Job, Callable[[Census, bool], None]]]:
        """(the census job on the patched project, what maps its census back) while the
        patched copies exist."""
        with procs.temp_dir("graphstitch-fix-") as tmp:
            copies: dict[str, str] = {}    # realpath of the original -> its patched copy
            for path, text in files.items():
                real = os.path.realpath(path)
                # The project's layout under the temp folder (readable paths in tracebacks);
                # a file outside the project under its identity path (transformers/…).
                rel = os.path.relpath(real, self.project) if in_project(real, self.project) else \
                    os.path.join("_outside", identity_path(real, self.id_root).lstrip("/"))
                copy = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(copy), exist_ok=True)
                _, fmt = read_source(real)
                with open(copy, "wb") as f:
                    f.write(encode_source(text, fmt))
                copies[real] = copy
            trial_opts = dataclasses.replace(opts, fresh=True, patches=patches, reference=self.spec, overlay=copies)
            back = {os.path.realpath(c): p for p, c in copies.items()}       # patched copy -> original
            maps = {p: line_map(source_text(p), text) for p, text in
                    ((os.path.realpath(k), t) for k, t in files.items())}   # original -> its line map

            def map_back(trial: Census, map_lines: bool) -> None:
                ran = {os.path.realpath(x) for x in [*(g.file for g in trial.graphs), *(s.file for s in trial.sites)]}
                leaked = sorted(ran & set(copies))
                if leaked and trial.error is None:  # overlay_leaks' proof, from what was compiled
                    trial.error = ErrorInfo(ErrorKind.PATCH, "the original code of a patched file was compiled: "
                                            + ", ".join(leaked[:3]))
                items: list[Site | SkippedFrame | Graph | StackEntry | FrameCompile | LimitHit] = [
                    *trial.sites, *trial.skipped_frames, *trial.graphs, *(fr for s in trial.sites for fr in s.stack),
                    *trial.frames, *trial.limit_hits, *(r.provenance for r in trial.recompiles if r.provenance)]
                for item in items:
                    orig = back.get(os.path.realpath(item.file))
                    if orig is None:
                        continue
                    item.file = orig
                    if map_lines:
                        item.line = maps[orig].get(item.line, item.line)
                    if isinstance(item, (Site, SkippedFrame)):
                        item.id = dataclasses.replace(item.id, path=identity_path(orig, self.id_root))
                # Coverage (what ran untraced) too: the base census of a fix with a base hatch shows it.
                def line(orig: str, n: int) -> int:
                    return maps[orig].get(n, n) if map_lines else n
                for u in trial.coverage.untraced:
                    if (orig := back.get(os.path.realpath(u.file))) is not None:
                        u.file, u.path = orig, identity_path(orig, self.id_root)
                        u.start, u.end = line(orig, u.start), None if u.end is None else line(orig, u.end)
                for fc in trial.coverage.functions:
                    if (orig := back.get(os.path.realpath(fc.file))) is not None:
                        fc.file, fc.first_line = orig, line(orig, fc.first_line)
                        fc.last_line = None if fc.last_line is None else line(orig, fc.last_line)
                        for span in [*fc.traced, *fc.untraced]:
                            span.start, span.end = line(orig, span.start), line(orig, span.end)
                # A failed run's error names the user's files too (a trial's part Dynamo failed in:
                # trials.moved_code grows the split by it), like the sites' frames.
                if (e := trial.error) is not None:
                    def at(m: re.Match[str]) -> str:
                        orig = back.get(os.path.realpath(m.group(1)))
                        return m.group(0) if orig is None else f'File "{orig}", line {line(orig, int(m.group(2)))}'
                    e.message = _FILE_LINE_RE.sub(at, e.message)
                    path, _, n = (e.where or "").rpartition(":")
                    if n.isdigit() and (orig := back.get(os.path.realpath(path))) is not None:
                        e.where = f"{orig}:{line(orig, int(n))}"
                # Recompile causes name their frame's file by identity path, and link the site.
                paths = {identity_path(c, self.id_root): identity_path(o, self.id_root) for o, c in copies.items()}
                for r in trial.recompiles:
                    if r.id is not None and r.id.path in paths:
                        r.id = dataclasses.replace(r.id, path=paths[r.id.path])
                    if r.site is not None and r.site.path in paths:
                        r.site = dataclasses.replace(r.site, path=paths[r.site.path])
                trial.target = self.spec

            yield worker.Job(spec=self.spec, options=trial_opts, project_root=self.id_root,
                             setup=self.job(trial_opts).setup), map_back


def unified_diff(path: str, old: str, new: str, *, label: str | None = None, root: str | None = None) -> str:
    """One file's patch; LABEL names it (default: its path inside ROOT, the project, so that
    `git apply` in a checkout takes it; else its path as shown to the user)."""
    from ..paths import in_project, short_path
    rel = label or (Path(os.path.relpath(os.path.realpath(path), root)).as_posix() if root and in_project(path, root)
                    else short_path(path))
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{rel}", tofile=f"b/{rel}"))


# ----------------------------------------------------------------------------- config lines
# How every config fix, for a break or a recompile cause, is written (patches and causes).

def after_imports(tree: ast.Module) -> int:
    """0-based line index after the module docstring and the imports before the first def or
    class: statements between imports (``import sys; sys.setrecursionlimit(...)`` before
    ``import torch``) do not end the import section, or a line added there would use
    ``torch`` before it is imported."""
    idx = 0
    for i, node in enumerate(tree.body):
        value = getattr(node, "value", None)
        is_doc = isinstance(node, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if (is_doc and i == 0) or isinstance(node, (ast.Import, ast.ImportFrom)) or _guarded_import(node):
            idx = node.end_lineno or node.lineno
    return idx


def _guarded_import(node: ast.stmt) -> bool:
    """``try: import x / except ImportError: x = None`` (or an ``if``): imports and fallbacks only."""
    if not isinstance(node, (ast.Try, ast.If)):
        return False
    inner = [n for n in ast.walk(node) if isinstance(n, ast.stmt) and n is not node and not isinstance(n, ast.Try)]
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in inner) and \
        all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Pass, ast.Assign)) for n in inner)


def _config_lines(patches: Patches) -> tuple[list[str], list[str]]:
    """(config lines, modules they need imported)."""
    out, needs = [], []
    for k, v in patches.config.items():
        if isinstance(v, list):  # a set of functions: added to, never replaced (other modules add theirs)
            names = [n.replace("builtins.", "") for n in v]
            needs += [n.split(".")[0] for n in names if "." in n]
            out.append(f"torch._dynamo.config.{k}.update({{{', '.join(names)}}})  # graphstitch fix")
        else:
            out.append(f"torch._dynamo.config.{k} = {v!r}  # graphstitch fix")
    return out, list(dict.fromkeys(needs))


def config_text(patches: Patches, old: str) -> str:
    """OLD (a module's text) with the config lines of PATCHES after its imports (and the
    imports they need): how every config fix, for a break or a recompile cause, is written."""
    lines = old.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    tree = parse_python(old)
    top = after_imports(tree)
    cfg, needs = _config_lines(patches)
    add = [f"import {m}\n" for m in ["torch", *needs] if not binds(tree, m)]
    return keep_end(old, "".join(lines[:top] + add + [ln + "\n" for ln in cfg] + lines[top:]))


def home_file(site: Site, tfile: str, root: str | None) -> str:
    """Where a config line for SITE goes: the project module that holds it, else the
    innermost project module on its stack (the user's code calling into a library), else the
    target file. The user's own script imports that module before it compiles anything."""
    for f in [site.file, *(fr.file for fr in reversed(user_frames(site)))]:
        if in_project(f, root) and os.path.isfile(f):
            return f
    return tfile


def with_config(files: dict[str, str], config: dict[str, Any], home: str) -> dict[str, str]:
    """FILES with CONFIG's lines after the imports of HOME too: the base config every trial
    and patch of a fix carries (``trials.NUMPY_STREAM``). A line already there is not added again."""
    if not config:
        return files
    key = next((k for k in files if os.path.realpath(k) == os.path.realpath(home)), home)
    old = files[key] if key in files else source_text(home)
    if all(ln in old for ln in _config_lines(Patches(config=config))[0]):
        return files
    return {**files, key: config_text(Patches(config=config), old)}


def binds(tree: ast.Module, name: str) -> bool:
    """Whether a module-level import binds NAME itself (``import torch``, ``import torch.nn``;
    not ``import torch as th``, which binds ``th``)."""
    return any(isinstance(n, ast.Import) and any(a.asname is None and (a.name == name or a.name.startswith(name + "."))
                                                 for a in n.names) for n in tree.body)


def keep_end(old: str, new: str) -> str:
    """NEW ends as OLD does (with or without a final newline)."""
    return new if old.endswith("\n") or not new.endswith("\n") else new[:-1]


def decorated(old: str, function: str, line: int, hatch: str, why: str = "") -> str:
    """OLD with ``@HATCH`` on FUNCTION, the def holding LINE (else the one nearest it: a patch
    may have moved it), and ``import torch``; OLD itself when the def already has it."""
    tree = parse_python(old)
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function]
    if not defs:
        raise LookupError(f"cannot find {function}()")
    node = next((n for n in defs if n.lineno <= line <= (n.end_lineno or n.lineno)), None) or \
        min(defs, key=lambda n: abs(n.lineno - line))
    if any(ast.unparse(d) == hatch for d in node.decorator_list):
        return old
    lines = old.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    indent = lines[node.lineno - 1][:len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip(" \t"))]
    new = lines[:first] + [f"{indent}@{hatch}  # graphstitch fix{': ' + why if why else ''}\n"] + lines[first:]
    top = after_imports(tree)
    return keep_end(old, "".join(new[:top] + ([] if binds(tree, "torch") else ["import torch\n"]) + new[top:]))


def with_hatch(files: dict[str, str], hatch: dict[str, Any] | None) -> dict[str, str]:
    """FILES with the base hatch every trial and patch of a fix carries (``trials.crash_hatch``:
    the statements the compiled run failed on, rewritten, or else the function it failed in,
    under ``torch.compiler.disable``)."""
    if not hatch:
        return files
    path = hatch["file"]
    key = next((k for k in files if os.path.realpath(k) == os.path.realpath(path)), path)
    old = files[key] if key in files else source_text(path)
    if hatch.get("rewrites"):
        for before, after, line in hatch["rewrites"]:
            old = replaced_near(old, before, after, line)
        return {**files, key: old}
    return {**files, key: decorated(old, hatch["function"], hatch["line"], "torch.compiler.disable", hatch["why"])}


def replaced_near(text: str, old: str, new: str, line: int) -> str:
    """TEXT with the occurrence of OLD (whole lines) that starts nearest LINE replaced by NEW
    (a patch before it may have moved it); LookupError when OLD is not there."""
    starts = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(old), text)
              if m.start() == 0 or text[m.start() - 1] == "\n"]
    if not starts:
        raise LookupError(f"cannot find the statement of line {line}")
    at = min(starts, key=lambda n: abs(n - line))
    lines = text.splitlines(keepends=True)
    n = old.count("\n")
    return "".join(lines[:at - 1]) + new + "".join(lines[at - 1 + n:])
