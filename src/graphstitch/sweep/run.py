"""Running a sweep: each target one isolated census in a worker (``worker.run``: the one
protocol; ``procs``: the one process module), scheduled by a local pool of threads or by Ray.

- :func:`run_one` runs one target and turns the worker's outcome into a :class:`Row`; a
  crash or timeout is retried once. It is also what a Ray task runs on its node.
- :func:`run_local` keeps ``jobs`` workers busy, one thread each; it starts no new worker
  while available memory is below the guard (unless none is running).
- :func:`run_ray` submits one Ray task per target (``num_cpus``/``num_gpus`` each) to a
  cluster and collects rows as they finish.

Both call ``on_row`` as each row finishes (the CLI streams it to the JSONL file and the
progress bar), in completion order. Nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..targets import Options
from .rows import RETRIED, STATUS_OF, Row, Status, Target, row_line, slim

OnRow = Callable[[Row], None]


@dataclass
class RunConfig:
    """How each target is run, the same on every scheduler."""
    options: Options
    timeout: float | None = 600.0
    retries: int = 1               # extra tries for a crash or timeout
    log_dir: str | None = None     # each target's worker output goes to LOG_DIR/<id>.log (else nowhere)


def options_for(base: Options, mode: str) -> Options:
    """A target's options in MODE: train runs the calls with autograd enabled."""
    return replace(base, grad=base.grad or mode == "train")


def _row(t: Target, out: Any, wall: float, attempts: int) -> Row:
    from ..model import ErrorKind
    c = out.census
    c.target = t.zoo or t.spec
    data = out.data if isinstance(out.data, dict) else {}
    err = c.error
    if data.get("create_error"):
        status, reason = Status.CREATE_ERROR, str(data["create_error"])
    elif err is None:
        status, reason = Status.OK, None
    else:
        status = STATUS_OF.get(err.kind, Status.CRASH)
        reason = f"{err.type}: {err.headline}" if err.type else err.headline
        if err.kind is ErrorKind.TARGET:
            reason = err.headline
    rss = data.get("peak_rss_mb")
    return Row(id=t.id, source=t.source, name=t.name, mode=t.mode, target=t.zoo or t.spec or t.id,
               status=status, reason=reason, census=None if status is Status.CREATE_ERROR else slim(c), wall_seconds=round(wall, 3), attempts=attempts,
               peak_rss_mb=float(rss) if isinstance(rss, (int, float)) else None, host=socket.gethostname())


def run_one(t: Target, cfg: RunConfig) -> Row:
    """One target's census in a fresh worker, retried once when the worker crashed or
    timed out (a flaky failure costs a retry, a real one a row)."""
    from .. import worker
    from .child import HANDLER
    job = worker.Job(handler=HANDLER, spec=t.spec, options=options_for(cfg.options, t.mode),
                     project_root=t.project_root, params={"zoo": t.zoo, "mode": t.mode})
    start = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        with _log(cfg, t, attempts) as log:
            out = worker.run(job, timeout=cfg.timeout, stdout=log, stderr=log)
        row = _row(t, out, time.monotonic() - start, attempts)
        if row.status not in RETRIED or attempts > cfg.retries:
            return row


@contextlib.contextmanager
def _log(cfg: RunConfig, t: Target, attempt: int) -> Iterator[Any]:
    # The workers' own output would tear the progress bar: a file per target, or nowhere.
    if not cfg.log_dir:
        yield subprocess.DEVNULL
        return
    os.makedirs(cfg.log_dir, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.@-]+", "_", t.id).strip("_")
    with open(os.path.join(cfg.log_dir, f"{name}.log"), "w" if attempt == 1 else "a", encoding="utf-8") as f:
        yield f


def _available_mb() -> float:
    import psutil
    return psutil.virtual_memory().available / 2**20


def run_local(targets: Sequence[Target], cfg: RunConfig, *, jobs: int = 1, on_row: OnRow | None = None,
              min_free_mb: float = 0.0, runner: Callable[[Target, RunConfig], Row] = run_one) -> list[Row]:
    """``jobs`` threads, each driving one worker at a time; rows in completion order."""
    todo: queue.Queue[Target] = queue.Queue()
    for t in targets:
        todo.put(t)
    rows: list[Row] = []
    lock = threading.Lock()
    running = [0]
    errors: list[BaseException] = []

    def admit() -> None:
        # The memory guard: wait for memory while others run; one worker always may.
        while True:
            with lock:
                if running[0] == 0 or min_free_mb <= 0 or _available_mb() >= min_free_mb:
                    running[0] += 1
                    return
            time.sleep(0.5)

    def loop() -> None:
        while not errors:
            try:
                t = todo.get_nowait()
            except queue.Empty:
                return
            admit()
            try:
                row = runner(t, cfg)
            except BaseException as e:  # noqa: BLE001 - surfaced in the caller's thread
                errors.append(e)
                return
            finally:
                with lock:
                    running[0] -= 1
            with lock:
                rows.append(row)
                if on_row:
                    on_row(row)

    threads = [threading.Thread(target=loop, name=f"sweep-{i}", daemon=True) for i in range(max(1, jobs))]
    for th in threads:
        th.start()
    try:
        for th in threads:
            while th.is_alive():
                th.join(0.2)   # short joins keep Ctrl-C responsive
    except KeyboardInterrupt:
        from ..procs import kill_children
        errors.append(KeyboardInterrupt())   # the threads take no new target
        kill_children()
        raise
    if errors:
        raise errors[0]
    return rows


# ----------------------------------------------------------------------------- Ray

def ray_init(address: str, *, num_cpus: int | None = None) -> None:
    """Connect to a Ray cluster (``auto``, ``ray://host:10001``, ``host:6379``), or start a
    local one (``local``). Already connected (e.g. by the caller): kept as it is."""
    import ray
    if ray.is_initialized():
        return
    kw: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False}
    if address == "local":
        ray.init(num_cpus=num_cpus, **kw)
    else:
        ray.init(address=address, **kw)


def _ray_task(t: Target, cfg: RunConfig) -> str:
    # A row as its JSON line: plain data over Ray, the same encoding as the file.
    return row_line(run_one(t, cfg))


def run_ray(targets: Sequence[Target], cfg: RunConfig, *, num_cpus: float = 1, num_gpus: float = 0,
            on_row: OnRow | None = None) -> list[Row]:
    """One Ray task per target on the connected cluster; each task runs :func:`run_one` on
    its node (a worker subprocess there), so isolation and retries are the same as local."""
    import json

    import ray

    from ..jsonio import from_trusted
    remote = ray.remote(_ray_task).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=1)
    pending = {remote.remote(t, cfg): t for t in targets}
    rows: list[Row] = []
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in done:
                t = pending.pop(ref)
                try:
                    row = from_trusted(Row, json.loads(ray.get(ref)))
                except Exception as e:  # noqa: BLE001 - a lost node or a dead task is a crash row
                    row = Row(id=t.id, source=t.source, name=t.name, mode=t.mode, target=t.zoo or t.spec or t.id,
                              status=Status.CRASH, reason=f"ray task failed: {type(e).__name__}: {str(e)[:200]}")
                rows.append(row)
                if on_row:
                    on_row(row)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    return rows


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class RowFile:
    """The sweep's JSONL file: rows appended (and flushed) as they finish, so a killed sweep
    keeps every finished row; ``resume`` reads what is there and appends after it."""

    def __init__(self, path: str, *, resume: bool):
        from .rows import read_rows
        self.path = path
        self.done: dict[str, Row] = {}
        self.unreadable = 0
        exists = os.path.exists(path)
        if exists and not resume:
            raise FileExistsError(f"{path} exists: pass --resume to continue that sweep, or another --out")
        if exists:
            rows, self.unreadable = read_rows(path)
            self.done = {r.id: r for r in rows}
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the sweep's life
        if exists and os.path.getsize(path) and not _ends_with_newline(path):
            self._f.write("\n")   # a line cut short by a kill stays unreadable, alone
        self._lock = threading.Lock()

    def add(self, row: Row) -> None:
        with self._lock:
            self._f.write(row_line(row))
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
