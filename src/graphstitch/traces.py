"""TORCH_TRACE logs -> Census, without torch.

Reads what ``TORCH_TRACE=dir`` wrote (one file, a directory of them, or a multi-rank
directory) with the same record parsers and the same analysis as live capture, so a trace
of a run and a live census of it agree. Files are streamed: payloads no parser wants are
never joined, and events go straight into ``build_census`` (memory does not grow with the
log size). Nothing read is ever executed or unpickled.

This module must not import torch: traces are read on laptops that have none.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from . import paths
from .analysis import build_census
from .model import Census, ErrorInfo, ErrorKind, TraceStats
from .records import Decoder, iter_trace_records

LOG_PREFIX = "dedicated_log_torch_trace_"  # torch/_logging/_internal.py
# "rank_N" anywhere in the name: TORCH_TRACE's "…_rank_0_<random>.log", "…_rank_1.log", "x.rank_3.log".
_RANK_NAME_RE = re.compile(r"(?<![A-Za-z0-9])rank_(\d+)(?!\d)")
_RANK_KEY_RE = re.compile(rb'"rank": (\d+)')


LOG_SUFFIXES = (".log", ".log.gz")  # a gzipped log is read as it is


NO_DYNAMO_COMPILE = ("no Dynamo compile in this trace (no frame compile, graph or graph break: an export or "
                     "AOTInductor-only log, or torch.compile never ran)")


class TraceError(Exception):
    """The path holds no readable trace (exit 2)."""


def trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """The trace files at PATH: the file itself, or a directory's TORCH_TRACE logs (any
    ``*.log`` when none carries TORCH_TRACE's prefix), oldest first."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise TraceError(f"no such file or directory: {path}")
    files = [f for f in p.iterdir() if f.is_file() and f.name.startswith(LOG_PREFIX)]
    if not files:
        files = [f for f in p.iterdir() if f.is_file() and f.name.endswith(LOG_SUFFIXES)]
    if not files:
        raise TraceError(f"{path} holds no TORCH_TRACE logs ({LOG_PREFIX}*.log)")
    return sorted(files, key=lambda f: (f.stat().st_mtime, f.name))


def file_rank(path: Path) -> int | None:
    """The rank a log belongs to: ``rank_N`` anywhere in its file name decides; only a name
    without one is placed by the first record that carries ``rank`` (the process group was
    set up after the log was opened)."""
    named = _RANK_NAME_RE.search(path.name)
    if named:
        return int(named.group(1))
    try:
        with _open(path, binary=True) as f:
            head = f.read(1 << 20)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    m = _RANK_KEY_RE.search(head)
    return int(m.group(1)) if m else None


def _open(path: Path, *, binary: bool = False) -> IO[Any]:
    """The log opened for reading (the caller closes it); a ``.gz`` one is decompressed as it is read."""
    if path.name.endswith(".gz"):
        if binary:
            return cast(IO[Any], gzip.open(path, "rb"))
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="\n")
    if binary:
        return open(path, "rb")
    return open(path, encoding="utf-8", errors="replace", newline="\n")


def _events(path: Path, dec: Decoder, prefix: str, stats: TraceStats) -> Iterator[object]:
    # Interning is per process, and one file is one process: each file gets its own Decoder.
    try:
        f = _open(path)
    except OSError as e:
        stats.unreadable.append(f"{path}: {e.strerror}")
        return
    try:
        with f:
            for rec in iter_trace_records(f, dec):
                for ev in dec.decode(rec):
                    if prefix and hasattr(ev, "compile_id"):
                        ev.compile_id = prefix + ev.compile_id
                    yield ev
    except (OSError, EOFError, gzip.BadGzipFile) as e:  # a cut or corrupt .gz: what was read counts
        stats.unreadable.append(f"{path}: {e}")
    stats.records += dec.records
    stats.malformed += dec.malformed
    stats.runs = (stats.runs or 0) + dec.run + 1
    stats.bytes = (stats.bytes or 0) + path.stat().st_size


def census_from_files(files: list[Path], *, target: str | None = None,
                      project_root: str | None = None) -> Census:
    """One census from the logs of one rank. Several processes' logs (e.g. a restarted job)
    get their compile ids prefixed ``pN:`` so their frames stay apart."""
    stats = TraceStats(files=len(files), bytes=0)

    def events() -> Iterator[object]:
        for i, f in enumerate(files):
            yield from _events(f, Decoder(split_runs=True), f"p{i}:" if len(files) > 1 else "", stats)

    c = build_census(events(), target=target, project_root=project_root)
    c.trace_stats = stats
    return c


def censuses_from_path(path: str | os.PathLike[str], *, project_root: str | None = None) -> dict[int | None, Census]:
    """A census per rank (key None for logs of a single, non-distributed process).
    PROJECT_ROOT (default: the working directory's project) names files in site identities."""
    root = project_root or paths.project_root()
    by_rank: dict[int | None, list[Path]] = {}
    for f in trace_files(path):
        by_rank.setdefault(file_rank(f), []).append(f)
    out: dict[int | None, Census] = {}
    for rank in sorted(by_rank, key=lambda r: -1 if r is None else r):
        files = by_rank[rank]
        out[rank] = c = census_from_files(files, target=str(path), project_root=root)
        if c.trace_stats.records and not (c.frames or c.graphs or c.sites) and c.error is None:
            # An export / AOTInductor-only log: records, but none from a Dynamo frame compile.
            # Not a clean census: there is nothing here a census could be clean of.
            c.error = ErrorInfo(ErrorKind.CAPTURE, NO_DYNAMO_COMPILE)
    return out


def census_from_trace(path: str | os.PathLike[str]) -> Census:
    """The census of a single-process trace, or of the lowest rank of a multi-rank one."""
    censuses = censuses_from_path(path)
    return censuses[next(iter(censuses))]


# ----------------------------------------------------------------------------- source

@functools.lru_cache(maxsize=256)
def _source_lines(file: str) -> tuple[str, ...] | None:
    try:
        with open(file, encoding="utf-8", errors="replace") as f:
            return tuple(f.read().splitlines())
    except (OSError, ValueError):
        return None


def source_context(file: str, line: int, radius: int = 4) -> list[tuple[int, str]] | None:
    """The lines around FILE:LINE from this machine, or None when the file is not here
    (a trace from another machine): the report then says the source is not available."""
    lines = _source_lines(file)
    if lines is None or not 1 <= line <= len(lines):
        return None
    lo, hi = max(1, line - radius), min(len(lines), line + radius)
    return [(n, lines[n - 1]) for n in range(lo, hi + 1)]
