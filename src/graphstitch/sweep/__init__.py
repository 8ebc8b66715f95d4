"""``graphstitch sweep``: a census of every model of a zoo, locally or on a Ray cluster.

- :mod:`.sources`: SOURCE arguments (registries, user files/modules/directories, TOML lists)
  -> :class:`Target` s, with ``--only``/``--exclude``, ``--mode`` and ``--shard``;
- :mod:`.child`: the worker job handler that builds a target and runs its census;
- :mod:`.run`: one target per worker (:func:`run_one`), a local pool, Ray, the JSONL file;
- :mod:`.report`: the aggregated report (root causes by models affected) and comparisons;
- :mod:`.rows`: the typed rows and report (JSON schemas ``sweep_row`` and ``sweep``).

:func:`execute` ties them together for the command line (and the benchmark). No torch
import in the parent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .report import build_report, compare, gate_failed, root_causes
from .rows import (
    SEMANTICS,
    Row,
    Status,
    SweepComparison,
    SweepReport,
    Target,
    merge,
    read_rows,
)
from .run import RowFile, RunConfig, run_local, run_one, run_ray
from .sources import SourceError, parse_shard, resolve, shard_of


def execute(targets: Sequence[Target], cfg: RunConfig, *, jobs: int = 1, ray: str | None = None,
            num_cpus: float = 1, num_gpus: float = 0, out: str | None = None, resume: bool = False,
            min_free_mb: float = 0.0, progress: bool = True,
            on_row: Callable[[Row], None] | None = None) -> tuple[list[Row], float]:
    """Run TARGETS (those not already in OUT with RESUME), streaming rows to OUT and a
    progress bar; returns every row (earlier ones from OUT included) and the wall time."""
    sink = RowFile(out, resume=resume) if out else None
    done = dict(sink.done) if sink else {}
    todo = [t for t in targets if t.id not in done]
    wanted = {t.id for t in targets}
    rows: list[Row] = [r for r in done.values() if r.id in wanted]
    start = time.monotonic()
    bar = _Bar(len(todo), enabled=progress)

    def got(row: Row) -> None:
        if sink:
            sink.add(row)
        bar.advance(row)
        if on_row:
            on_row(row)

    restore = _term_as_interrupt()
    try:
        with bar:
            if ray:
                from .run import ray_init
                ray_init(ray, num_cpus=jobs if ray == "local" else None)
                rows += run_ray(todo, cfg, num_cpus=num_cpus, num_gpus=num_gpus, on_row=got)
            else:
                rows += run_local(todo, cfg, jobs=jobs, on_row=got, min_free_mb=min_free_mb)
    finally:
        restore()
        if sink:
            sink.close()
    return rows, time.monotonic() - start


def _term_as_interrupt() -> Callable[[], None]:
    """SIGTERM (a CI job cancelled, `kill`) stops the sweep like Ctrl-C: running workers are
    killed and the rows so far stay in the file, ready for --resume. Returns the undo."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None   # the command line owns signals already (procs.own_signals)

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        signal.signal(signal.SIGTERM, old)
    return restore


class _Bar:
    """rich progress: done/total, elapsed, ETA, and the failures so far."""

    def __init__(self, total: int, *, enabled: bool):
        self.total, self.enabled, self.failed = total, enabled and total > 0, 0
        self._p: Any = None

    def __enter__(self) -> _Bar:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            self._p = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                               TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                               console=Console(stderr=True, emoji=False), transient=False)
            self._p.start()
            self._task = self._p.add_task("sweep", total=self.total, status="")
        return self

    def advance(self, row: Row) -> None:
        if row.status is not Status.OK:
            self.failed += 1
        if self._p is not None:
            last = f"{row.id}: {row.status.value}" if row.status is not Status.OK else ""
            status = f"[red]{self.failed} failed[/] {last}" if self.failed else ""
            self._p.update(self._task, advance=1, status=status[:90])

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()


__all__ = ["SEMANTICS", "Row", "RowFile", "RunConfig", "SourceError", "Status", "SweepComparison", "SweepReport",
           "Target", "build_report", "compare", "execute", "gate_failed", "merge", "parse_shard", "read_rows",
           "resolve", "root_causes", "run_local", "run_one", "run_ray", "shard_of"]
