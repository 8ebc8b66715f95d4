"""Targets (``PATH.py:FACTORY`` or ``package.module:FACTORY``) and isolated runs.

By default a target runs in a fresh worker process that streams its trace records to a
file as they happen (TORCH_TRACE's own line format), so a segfault, hang or exception in
user code still leaves a census behind; the parent decodes that file with the same
parsers as ``graphstitch trace``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from .analysis import Census
from .records import Record, format_record

DEMO = "graphstitch.demo:demo"


@dataclass
class Options:
    backend: str = "counting"
    nested_graph_breaks: bool = False
    dynamic: bool | None = None
    grad: bool = False
    check_eager: bool = True
    # `graphstitch fix` trials: also check a fresh random input set and side effects
    # (``fresh``), and run under ``patches`` = {"config": {...}, "wrap": {...}} (see fix.py).
    fresh: bool = False
    patches: dict | None = None

    def as_config(self) -> dict:
        cfg = {"backend": self.backend, "nested_graph_breaks": self.nested_graph_breaks,
               "dynamic": self.dynamic, "grad": self.grad}
        if self.patches:
            cfg["patches"] = self.patches
        return cfg


class TargetError(Exception):
    """The target spec or factory is wrong (exit 2)."""


def check_spec(spec: str) -> tuple[str, str, Path | None]:
    """What can be checked without importing the target: (module or file, factory, path)."""
    if ":" not in spec:
        raise TargetError(f"target {spec!r} must be PATH.py:FACTORY or package.module:FACTORY")
    where, _, name = spec.rpartition(":")
    if not name.isidentifier():
        raise TargetError(f"target {spec!r}: {name!r} is not a function name")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise TargetError(f"target file not found: {where}")
        return where, name, path
    return where, name, None


def load_factory(spec: str) -> Callable:
    where, name, path = check_spec(spec)
    if path is not None:
        modname = path.stem
        # Dynamo re-imports the module while tracing: it must be findable in sys.modules.
        sys.path.insert(0, str(path.parent))
        loader_spec = importlib.util.spec_from_file_location(modname, path)
        if loader_spec is None or loader_spec.loader is None:
            raise TargetError(f"cannot load {where} as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[modname] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001
            raise TargetError(f"importing {where} failed: {type(e).__name__}: {e}") from e
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:  # noqa: BLE001
            raise TargetError(f"importing {where} failed: {type(e).__name__}: {e}") from e
    factory = getattr(module, name, None)
    if factory is None:
        raise TargetError(f"{where} has no {name!r}")
    if not callable(factory):
        raise TargetError(f"{spec}: {name!r} is not callable")
    return factory


def _one_call(item: Any, where: str) -> tuple[Callable, tuple, dict]:
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise TargetError(f"{where} must be (fn, args, kwargs); got {type(item).__name__}")
    fn, args = item[0], item[1]
    kwargs = item[2] if len(item) == 3 else {}
    if not callable(fn):
        raise TargetError(f"{where}: fn is not callable ({type(fn).__name__})")
    if not isinstance(args, (tuple, list)):
        raise TargetError(f"{where}: args must be a tuple, got {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise TargetError(f"{where}: kwargs must be a dict, got {type(kwargs).__name__}")
    return fn, tuple(args), dict(kwargs)


def make_calls(factory: Callable, spec: str) -> list[tuple[Callable, tuple, dict]]:
    try:
        made = factory()
    except Exception as e:  # noqa: BLE001
        raise TargetError(f"{spec}: the factory raised {type(e).__name__}: {e}") from e
    if isinstance(made, list):
        if not made:
            raise TargetError(f"{spec}: the factory returned an empty list of calls")
        return [_one_call(c, f"{spec} call {i}") for i, c in enumerate(made)]
    return [_one_call(made, f"{spec}")]


# ----------------------------------------------------------------------------- in-process

def census_target(spec: str, opts, sink=None) -> Census:
    """Load and run a target in this process. Raises TargetError for a bad target."""
    from .live import Capture, run_calls
    calls = make_calls(load_factory(spec), spec)
    with Capture(sink, target=spec) as cap:
        run_calls(cap, calls, opts)
    assert cap.census is not None
    return cap.census


# ----------------------------------------------------------------------------- worker
#
# `python -m graphstitch.target MODE ...` runs in a fresh process and streams every record
# to STREAM as it happens; the parent decodes the file whatever became of the child.
#   --target STREAM SPEC OPTIONS_JSON   a factory target (`census`, `check`, `fix` trials)
#   --script STREAM SCRIPT ARGS...      a user script as __main__ (`run`)
#   --wait                              import torch now, then read one --target job on stdin

def stream_sink(out) -> Callable:
    """A capture sink writing each record at once (TORCH_TRACE format), so whatever was
    captured before a crash, hang or kill is on disk."""
    def sink(rec) -> None:
        out.write(format_record(rec.meta, rec.payload))
        out.flush()
    return sink


def census_from_stream(path: str, target: str | None = None) -> Census:
    """Decode a record file written through :func:`stream_sink` (or a TORCH_TRACE log) with
    the trace reader; a worker that died before writing anything gives an empty census."""
    from .traces import census_from_files
    return census_from_files([Path(path)] if os.path.exists(path) else [], target=target)


def _worker(stream: str, spec: str, opts_json: str) -> int:
    from .live import Capture, run_calls
    from .dynamo import quiet_dynamo_warnings
    opts = Options(**json.loads(opts_json))
    quiet_dynamo_warnings()
    with open(stream, "w", encoding="utf-8", buffering=1) as out:
        sink = stream_sink(out)
        try:
            calls = make_calls(load_factory(spec), spec)
        except TargetError as e:
            sink(Record({"graphstitch_run": {"error": {"kind": "target", "message": str(e)}}}))
            return 2
        with Capture(sink, target=spec) as cap:
            if opts.patches and opts.patches.get("wrap"):
                # A `graphstitch fix` trial: wrap the user's function before compiling.
                from .fix import install_wrapper
                try:
                    cap.note(config={"wrapped": install_wrapper(opts.patches["wrap"], calls)})
                except Exception as e:  # noqa: BLE001 - a hatch that cannot apply is a result
                    cap.note(error={"kind": "patch", "type": type(e).__name__, "message": str(e)[:2000]})
                    return 0
            run_calls(cap, calls, opts)
    return 0


def _exit_code(e: SystemExit) -> int:
    # What the interpreter does with SystemExit's argument.
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _script_worker(stream: str, script: str, *argv: str) -> int:
    """Run SCRIPT as __main__ with its own argv under capture; its compiles use its own
    backend, so graphs come from the dynamo_output_graph records. Returns its exit code."""
    import runpy
    import traceback
    from .live import Capture, error_info
    path = os.path.abspath(script)
    sys.argv = [script, *argv]
    sys.path[0] = os.path.dirname(path)  # as `python script.py` would have it
    code = 0
    with open(stream, "w", encoding="utf-8", buffering=1) as out:
        with Capture(stream_sink(out), reset=False, target=script) as cap:
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                code = _exit_code(e)
                if code:
                    cap.note(error={"kind": "exit", "message": f"script exited with code {code}", "code": code})
            except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too: report, then exit like Python
                traceback.print_exc()
                cap.note(error=error_info("script", e))
                code = 130 if isinstance(e, KeyboardInterrupt) else 1
    return code


def _wait_for_job() -> int:
    from . import live  # noqa: F401 - the import (torch) is what waiting ahead saves
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # not needed after all
    stream, spec, opts_json, env = json.loads(line)
    os.environ.update(env)
    return _worker(stream, spec, opts_json)


def worker_env(tmp: str | None) -> dict:
    """The child's environment: its inductor cache in our temp dir TMP (unless the user set
    one), and this very graphstitch first on the path (a source checkout must not fall back
    to an installed copy)."""
    env = dict(os.environ)
    if tmp is not None:
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp, "inductor"))
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def spawn_worker() -> subprocess.Popen:
    """A fresh worker that imports torch now and waits for one job on stdin, so a batch of
    runs (`graphstitch fix` trials) does not pay the import after the batch starts."""
    return subprocess.Popen([sys.executable, "-m", "graphstitch.target", "--wait"], stdin=subprocess.PIPE,
                            text=True, start_new_session=True, env=worker_env(None))  # the job brings its cache dir


def run_isolated(cmd: list[str], env: dict, timeout: float | None, stdout: Any = None) -> tuple[int, dict | None]:
    """Run a worker in its own session; kill its whole group on timeout (see wait_isolated)."""
    return wait_isolated(subprocess.Popen(cmd, env=env, start_new_session=True, stdout=stdout), timeout)


def wait_isolated(proc: subprocess.Popen, timeout: float | None, *, ok_codes: tuple[int, ...] | None = (0, 2),
                  session: bool = True) -> tuple[int, dict | None]:
    """Wait for a worker; kill its whole group on timeout (SESSION: it has its own group).

    Returns (exit code, None) or (exit code, {"kind": "timeout"|"crash", "message"}) when it
    timed out, died from a signal or exited with a code outside OK_CODES (None: any is fine).
    """
    died: dict | None = None
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        rc = -signal.SIGKILL
        died = {"kind": "timeout", "message": f"target did not finish within {timeout:g} s (killed)"}
    except KeyboardInterrupt:
        if session:  # otherwise the terminal's Ctrl-C reached the child already
            os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait()
    if rc < 0 and died is None:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        died = {"kind": "crash", "message": f"target process died with signal {sig}"}
    elif ok_codes is not None and rc not in ok_codes and died is None:
        died = {"kind": "crash", "message": f"target process exited with code {rc}"}
    return rc, died


def census_subprocess(spec: str, opts, *, timeout: float | None = None,
                      pythonpath: str | None = None, proc: subprocess.Popen | None = None) -> tuple[Census, int]:
    """Run the target in a fresh worker process. Returns (census, worker exit code).
    ``pythonpath`` is prepended to the worker's PYTHONPATH (a patched copy's siblings);
    ``proc`` is a worker from spawn_worker() to run it in."""
    with tempfile.TemporaryDirectory(prefix="graphstitch-") as tmp:
        stream = os.path.join(tmp, "records.log")
        job = [stream, spec, json.dumps(asdict(opts))]
        env = worker_env(tmp)
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join((pythonpath, env["PYTHONPATH"]))
        if proc is None:
            proc = subprocess.Popen([sys.executable, "-m", "graphstitch.target", "--target", *job], env=env,
                                    start_new_session=True)
        else:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(job + [{"TORCHINDUCTOR_CACHE_DIR": env["TORCHINDUCTOR_CACHE_DIR"]}]) + "\n")
            proc.stdin.close()
        rc, died = wait_isolated(proc, timeout)
        census = census_from_stream(stream, spec)
        if died is not None and census.error is None:
            census.error = died
        return census, rc


def census_script(script: str, argv: list[str]) -> tuple[Census, int]:
    """Run a user script as __main__ in a fresh process (stdout/stderr pass through; it keeps
    our process group, so Ctrl-C and the terminal reach it as usual).
    Returns (census, the script's exit code; negative: killed by that signal)."""
    with tempfile.TemporaryDirectory(prefix="graphstitch-") as tmp:
        stream = os.path.join(tmp, "records.log")
        proc = subprocess.Popen([sys.executable, "-m", "graphstitch.target", "--script", stream, script, *argv],
                                env=worker_env(tmp))
        rc, died = wait_isolated(proc, None, ok_codes=None, session=False)
        census = census_from_stream(stream, script)
        if died is not None and census.error is None:
            census.error = died
        return census, rc


if __name__ == "__main__":
    _mode, *_rest = sys.argv[1:]
    if _mode == "--wait":
        sys.exit(_wait_for_job())
    if _mode == "--script":
        sys.exit(_script_worker(*_rest))
    sys.exit(_worker(*_rest))
