"""Child processes: start, wait with a timeout, kill the whole tree; one environment.

Every process graphstitch starts (census workers, fix trials, timed measurements, perf
runs, torchrun and its ranks, scripts) goes through here. Trees are tracked with psutil while
they run, so a grandchild that outlives its parent (torchrun's ranks run in their own
sessions) is still known and killed; nothing is left behind when a command returns.

Every live child and every temp folder of a job is registered here, so a signal that ends
graphstitch (SIGTERM from a CI cancel or `timeout`, Ctrl-C, SIGHUP) ends them too
(:func:`own_signals`): workers run in their own sessions and would otherwise outlive us.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import psutil

from .model import ErrorInfo, ErrorKind

_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(*, pythonpath: Sequence[str] = (), inductor_cache: str | None = None,
              own_cache: bool = False, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every child: this very graphstitch first on the path (a source
    checkout must not fall back to an installed copy), then PYTHONPATH entries; the inductor
    cache in our temp dir INDUCTOR_CACHE unless the user set one (OWN_CACHE: always ours,
    for perf's cold/warm compiles)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, _SRC, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    if inductor_cache is not None:
        if own_cache:
            env["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache
            env["TRITON_CACHE_DIR"] = os.path.join(inductor_cache, "triton")
        else:
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", inductor_cache)
    # torch warns on every import when NumPy is missing; that is not about the user's code.
    quiet = "ignore:Failed to initialize NumPy"
    env["PYTHONWARNINGS"] = ",".join(w for w in (env.get("PYTHONWARNINGS"), quiet) if w)
    env.update(extra or {})
    return env


def python_cmd(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


class Child:
    """A started process and every descendant seen while it ran."""

    def __init__(self, popen: subprocess.Popen[Any], *, own_session: bool):
        self.popen = popen
        self.own_session = own_session
        self._tree: dict[int, psutil.Process] = {}
        self._seen_at = 0.0
        with contextlib.suppress(psutil.Error):
            self._tree[popen.pid] = psutil.Process(popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def track(self) -> None:
        """Remember the current descendants (cheap enough to call every half second)."""
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(self.pid).children(recursive=True):
                self._tree.setdefault(p.pid, p)
        self._seen_at = time.monotonic()

    def wait(self, timeout: float | None = None, *, ready: Callable[[], bool] | None = None,
             ok_codes: tuple[int, ...] | None = (0, 2), what: str = "target",
             reap: bool = True, tick: Callable[[], None] | None = None) -> tuple[int, ErrorInfo | None]:
        """Wait for the process; after TIMEOUT seconds kill its whole tree. With READY, the
        clock starts when ready() first says so (imports done; start-up is not the target's
        time). Returns (exit code, None) or (exit code, an ErrorInfo of kind timeout or
        crash) when it timed out, died from a signal, or exited outside OK_CODES. REAP: kill
        what it left running when it ended (not for user scripts, as `python` would not).
        TICK is called about every 0.2 s while waiting (progress)."""
        started: float | None = None if ready is not None else time.monotonic()
        died: ErrorInfo | None = None
        ticked = 0.0
        try:
            while self.popen.poll() is None:
                now = time.monotonic()
                if started is None and ready is not None and ready():
                    started = now
                if timeout is not None and started is not None and now - started > timeout:
                    died = ErrorInfo(ErrorKind.TIMEOUT, f"{what} did not finish within {timeout:g} s (killed)")
                    break
                if now - self._seen_at > 0.5:
                    self.track()
                if tick is not None and now - ticked > 0.2:
                    ticked = now
                    tick()
                time.sleep(0.02)
        except KeyboardInterrupt:
            # Killed, not interrupted: a forwarded SIGINT makes the worker print a traceback.
            self.kill_tree()
            raise
        finally:
            if died is not None:
                self.kill_tree()
        rc = self.popen.wait()
        if reap:
            self.kill_tree()  # anything it left behind
        else:
            with _lock:   # what a user script left running is its own, as with `python`
                _live.pop(id(self), None)
        if died is None and rc < 0:
            died = ErrorInfo(ErrorKind.CRASH, f"{what} process died with signal {_signame(-rc)}", code=rc)
        elif died is None and ok_codes is not None and rc not in ok_codes:
            died = ErrorInfo(ErrorKind.CRASH, f"{what} process exited with code {rc}", code=rc)
        return rc, died

    def kill_tree(self) -> None:
        """Kill the process and every descendant seen, then wait until they are gone."""
        self.track()
        if self.own_session and self.popen.poll() is None:
            # Its process group too: what it started since the last look is in it.
            with contextlib.suppress(OSError):
                os.killpg(self.pid, signal.SIGKILL)
        procs = [p for p in self._tree.values() if p.pid != os.getpid()]
        for p in procs:
            with contextlib.suppress(psutil.Error):
                if p.is_running():   # compares create time too: a reused pid is not killed
                    p.kill()
        with contextlib.suppress(psutil.Error):
            psutil.wait_procs(procs, timeout=10)
        if self.popen.poll() is None:
            self.popen.wait()
        with _lock:
            _live.pop(id(self), None)


def start(cmd: Sequence[str], *, env: dict[str, str], own_session: bool = True, cwd: str | None = None,
          stdin: int | IO[Any] | None = None, stdout: int | IO[Any] | None = None,
          stderr: int | IO[Any] | None = None, text: bool = False) -> Child:
    """Start CMD. OWN_SESSION (default): in its own session, so a timeout kill never reaches
    us and the terminal's Ctrl-C is forwarded on purpose; False for scripts the user runs
    through graphstitch, which keep the terminal's process group."""
    with _lock:  # a start racing a signal's clean-up must not leave a child behind it
        if _stopping:
            raise Stopped("graphstitch is stopping")
        popen = subprocess.Popen(list(cmd), env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                 start_new_session=own_session, text=text)
        child = Child(popen, own_session=own_session)
        _live[id(child)] = child
    return child


# ----------------------------------------------------------------------------- ownership

class Stopped(RuntimeError):
    """A child was asked for while graphstitch is ending on a signal."""


_lock = threading.Lock()
_live: dict[int, Child] = {}       # children not yet known to be gone (kill_tree forgets them)
_temps: set[str] = set()           # job folders to remove if we are stopped
_stopping = False

# What each signal that ends graphstitch exits with (the shell's 128 + N).
SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[str]:
    """A temp folder removed on exit, and also when a signal ends graphstitch."""
    d = own_temp(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        release_temp(d)


def own_temp(path: str) -> str:
    with _lock:
        _temps.add(path)
    return path


def release_temp(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        _temps.discard(path)


def stop_all() -> int:
    """Kill every live child's tree and remove every registered temp folder; no child starts
    after this. Returns how many children were still running."""
    global _stopping
    with _lock:
        _stopping = True
        kids = list(_live.values())
    running = sum(k.popen.poll() is None for k in kids)
    for k in kids:   # look at every tree before killing any: a dead parent hides its children
        k.track()
    for k in kids:
        with contextlib.suppress(Exception):
            k.kill_tree()
    with _lock:
        temps = list(_temps)
    for d in temps:
        shutil.rmtree(d, ignore_errors=True)
    return running


@contextlib.contextmanager
def own_signals(say: Callable[[str], None] | None = None) -> Iterator[None]:
    """While inside: SIGINT, SIGTERM and SIGHUP kill every child tree, remove the temp
    folders, print one line (SAY) and exit 128 + N at once (no traceback, no waiting on
    worker threads). Only the main thread can own signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        for s in SIGNALS:   # a second Ctrl-C must not interrupt the clean-up
            signal.signal(s, signal.SIG_IGN)
        n = stop_all()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        line = (f"graphstitch: stopped by {_signame(signum)}"
                + (f"; {n} worker process{'es' if n != 1 else ''} killed" if n else "") + "; temp files removed")
        with contextlib.suppress(Exception):
            (say or (lambda m: sys.stderr.write(m + "\n")))(line)
            sys.stderr.flush()
        os._exit(SIGNALS.get(signal.Signals(signum), 128 + signum))

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def kill_children() -> None:
    """Kill every process this one started, with their trees: when threads are waiting on
    workers (a `sweep -j N`) and the main thread is interrupted, nobody else will."""
    with contextlib.suppress(psutil.Error):
        kids = psutil.Process().children()
        for k in kids:
            with contextlib.suppress(psutil.Error):
                for p in k.children(recursive=True):
                    p.kill()
                k.kill()
        psutil.wait_procs(kids, timeout=10)


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)


# ----------------------------------------------------------------------------- a job's phase

PROGRESS_WIDTH = 160
progress_fd: int | None = None   # a worker's progress file, opened before the target runs (graphstitch.worker)


def progress(text: str) -> None:
    """Say what the job is doing now (one short line the parent may show). Written in place
    on a descriptor opened before the target runs: an open() now would be one of the
    target's recorded file writes."""
    if progress_fd is None:
        return
    data = text.encode("utf-8")[:PROGRESS_WIDTH].ljust(PROGRESS_WIDTH)
    try:
        os.pwrite(progress_fd, data, 0)
    except OSError:
        pass
