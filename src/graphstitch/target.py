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
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from .analysis import Census, build_census
from .records import Decoder, format_record, iter_trace_records

DEMO = "graphstitch.demo:demo"


class TargetError(Exception):
    """The target spec or factory is wrong (exit 2)."""


def load_factory(spec: str) -> Callable:
    if ":" not in spec:
        raise TargetError(f"target {spec!r} must be PATH.py:FACTORY or package.module:FACTORY")
    where, _, name = spec.rpartition(":")
    if not name.isidentifier():
        raise TargetError(f"target {spec!r}: {name!r} is not a function name")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise TargetError(f"target file not found: {where}")
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

def _stream_sink(out) -> Callable:
    """A capture sink writing each record to OUT as it happens (flushed: a crash keeps it)."""
    def sink(rec) -> None:
        out.write(format_record(rec.meta, rec.payload))
        out.flush()
    return sink


def _worker(spec: str, opts_json: str, stream: str) -> int:
    from .live import Capture, Options, run_calls
    from .records import Record
    from .dynamo import quiet_dynamo_warnings
    opts = Options(**json.loads(opts_json))
    quiet_dynamo_warnings()
    with open(stream, "w", encoding="utf-8", buffering=1) as out:
        sink = _stream_sink(out)
        try:
            calls = make_calls(load_factory(spec), spec)
        except TargetError as e:
            sink(Record({"graphstitch_run": {"error": {"kind": "target", "message": str(e)}}}))
            return 2
        with Capture(sink, target=spec) as cap:
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


def _script_worker(script: str, stream: str, *argv: str) -> int:
    """Run SCRIPT as __main__ with its own argv under capture; its compiles use its own
    backend, so graphs come from the dynamo_output_graph records. Returns its exit code."""
    import runpy
    import traceback
    from .live import Capture, _error
    path = os.path.abspath(script)
    sys.argv = [script, *argv]
    sys.path[0] = os.path.dirname(path)  # as `python script.py` would have it
    code = 0
    with open(stream, "w", encoding="utf-8", buffering=1) as out:
        with Capture(_stream_sink(out), reset=False, target=script) as cap:
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                code = _exit_code(e)
                if code:
                    cap.note(error={"kind": "exit", "message": f"script exited with code {code}", "code": code})
            except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too: report, then exit like Python
                traceback.print_exc()
                cap.note(error=_error("script", e))
                code = 130 if isinstance(e, KeyboardInterrupt) else 1
    return code


def _census_of_child(args: list[str], target: str, *, timeout: float | None,
                     ok_codes: tuple[int, ...] | None, session: bool = True) -> tuple[Census, int]:
    """Run ``python -m graphstitch.target MODE STREAM ARGS...`` and build the census from the
    records it streamed, whatever happened to it. An exit code outside OK_CODES (None: any)
    is recorded as a crash. SESSION: own process group (killable as a whole on timeout);
    a user script keeps ours, so Ctrl-C and the terminal reach it as usual."""
    with tempfile.TemporaryDirectory(prefix="graphstitch-") as tmp:
        stream = os.path.join(tmp, "records.log")
        cmd = [sys.executable, "-m", "graphstitch.target", *args[:1], stream, *args[1:]]
        env = dict(os.environ)
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp, "inductor"))
        proc = subprocess.Popen(cmd, env=env, start_new_session=session)
        died: dict | None = None
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = -signal.SIGKILL
            died = {"kind": "timeout", "message": f"target did not finish within {timeout:g} s (killed)"}
        except KeyboardInterrupt:
            if session:
                os.killpg(proc.pid, signal.SIGINT)
            rc = proc.wait()
        if rc < 0 and died is None:
            sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            died = {"kind": "crash", "message": f"target process died with signal {sig}"}
        elif ok_codes is not None and rc not in ok_codes and died is None:
            died = {"kind": "crash", "message": f"target process exited with code {rc}"}
        dec = Decoder()
        events: list = []
        if os.path.exists(stream):
            with open(stream, encoding="utf-8", errors="replace") as f:
                for rec in iter_trace_records(f, dec):
                    events.extend(dec.decode(rec))
        census = build_census(events, target=target)
        census.trace_stats = {"records": dec.records, "malformed": dec.malformed}
        if died is not None and census.error is None:
            census.error = died
        return census, rc


def census_subprocess(spec: str, opts, *, timeout: float | None = None) -> tuple[Census, int]:
    """Run the target in a fresh worker process. Returns (census, worker exit code)."""
    return _census_of_child(["--target", spec, json.dumps(asdict(opts))], spec, timeout=timeout, ok_codes=(0, 2))


def census_script(script: str, argv: list[str]) -> tuple[Census, int]:
    """Run a user script as __main__ in a fresh process (stdout/stderr pass through).
    Returns (census, the script's exit code; negative: killed by that signal)."""
    return _census_of_child(["--script", script, *argv], script, timeout=None, ok_codes=None, session=False)


if __name__ == "__main__":  # the worker entry point: MODE STREAM ARGS...
    _mode, _stream, *_rest = sys.argv[1:]
    if _mode == "--script":
        sys.exit(_script_worker(_rest[0], _stream, *_rest[1:]))
    sys.exit(_worker(_rest[0], _rest[1], _stream))
