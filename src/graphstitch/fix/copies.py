"""THE patched-copy census of `graphstitch fix`: the project's target and patched files
copied into a temp folder with the project's layout (so site identities match), censused in
a worker with the original target as the eager reference, mapped back to the user's files.
Used by source-rewrite trials, `--apply`'s re-verification and `--all`. No torch import."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

from .. import procs, worker
from ..model import Census, Site, SkippedFrame
from ..targets import Options, target_file


def census_job(spec: str, opts: Options, root: str | None) -> worker.Job:
    setup = "graphstitch.fix.hatches:install" if opts.patches and opts.patches.wrap else None
    return worker.Job(spec=spec, options=opts, project_root=root, setup=setup)


def census_on_copy(spec: str, opts: Options, root: str, files: dict[str, str], timeout: float | None, *,
                   warm: procs.Child | None = None, map_lines: bool = True) -> Census:
    """THE patched-copy census: the target file and the patched ``files`` (path -> new text)
    copied into a temp folder with the project's layout, censused in a worker with the
    original target as the eager reference (outputs and printed/logged output), and the
    census mapped back to the user's paths (and lines, unless ``map_lines`` is false: `--all`
    keeps the lines of the patched text it goes on rewriting)."""
    with _patched_copy(spec, opts, root, files) as (job, pythonpath, back):
        trial = worker.run(job, timeout=timeout, pythonpath=pythonpath, warm=warm).census
    back(trial, map_lines)
    return trial


def ranks_on_copy(spec: str, opts: Options, root: str, files: dict[str, str], nproc: int,
                  timeout: float | None) -> dict[int, Census]:
    """The same patched copy, run on NPROC gloo ranks by `graphstitch ranks`' launcher: each
    rank's census against the original's eager run on that rank (a collective rewrite must
    hold on every rank, not only on a world of one)."""
    from ..ranks import run_ranks
    with _patched_copy(spec, opts, root, files) as (job, pythonpath, back):
        assert job.spec is not None
        censuses, _ = run_ranks(job.spec, nproc, job.options, timeout=timeout, project_root=job.project_root,
                                pythonpath=pythonpath)
    for c in censuses.values():
        back(c, True)
    return censuses


@contextlib.contextmanager
def _patched_copy(spec: str, opts: Options, root: str, files: dict[str, str]
                  ) -> Iterator[tuple[worker.Job, list[str], Callable[[Census, bool], None]]]:
    """(the census job on the copy, its PYTHONPATH, what maps a census of it back to the
    user's files) while the copy exists."""
    tfile = target_file(spec)
    if tfile is None:
        raise LookupError(f"cannot find the source file of {spec}")
    with tempfile.TemporaryDirectory(prefix="graphstitch-fix-") as tmp:
        def copy_of(p: str) -> str:
            rel = os.path.relpath(os.path.realpath(p), root)
            if rel.startswith(".."):
                raise LookupError(f"{p} is outside the project {root}; cannot re-verify it on a copy")
            dst = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            return dst
        copies = {os.path.realpath(p): copy_of(p) for p in files}
        t_copy = copy_of(tfile)
        if os.path.realpath(tfile) not in copies:
            shutil.copy2(tfile, t_copy)
        for p, text in files.items():
            with open(copies[os.path.realpath(p)], "w", encoding="utf-8") as f:
                f.write(text)
        t_spec = t_copy + ":" + spec.rpartition(":")[2]
        trial_opts = dataclasses.replace(opts, fresh=True, patches=None, reference=tfile + ":" + spec.rpartition(":")[2])
        # Identities already match (same project layout); lines are shown as in the user's file.
        back = {c: p for p, c in copies.items()}
        maps = {c: _line_map(old_text(p), files[next(k for k in files if os.path.realpath(k) == p)])
                for c, p in back.items()}

        def map_back(trial: Census, map_lines: bool) -> None:
            items: list[Site | SkippedFrame] = [*trial.sites, *trial.skipped_frames]
            for item in items:
                real = os.path.realpath(item.file)
                hit = next((c for c in back if os.path.realpath(c) == real), None)
                if hit is not None:
                    item.file = back[hit]
                    if map_lines:
                        item.line = maps[hit].get(item.line, item.line)
                elif real == os.path.realpath(t_copy):
                    item.file = tfile
            trial.target = spec
        yield census_job(t_spec, trial_opts, tmp), [os.path.dirname(t_copy), os.path.dirname(tfile)], map_back


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


