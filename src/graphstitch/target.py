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

from .analysis import Census, build_census
from .records import Decoder, format_record, iter_trace_records

DEMO = "graphstitch.demo:demo"


@dataclass
class Options:
    backend: str = "counting"
    nested_graph_breaks: bool = False
    dynamic: bool | None = None
    grad: bool = False
    check_eager: bool = True

    def as_config(self) -> dict:
        return {"backend": self.backend, "nested_graph_breaks": self.nested_graph_breaks,
                "dynamic": self.dynamic, "grad": self.grad}


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

def _worker(spec: str, opts_json: str, stream: str) -> int:
    from .live import Capture, run_calls
    from .records import Record
    from .dynamo import quiet_dynamo_warnings
    opts = Options(**json.loads(opts_json))
    quiet_dynamo_warnings()
    with open(stream, "w", encoding="utf-8", buffering=1) as out:
        def sink(rec: Record) -> None:
            out.write(format_record(rec.meta, rec.payload))
            out.flush()
        try:
            calls = make_calls(load_factory(spec), spec)
        except TargetError as e:
            sink(Record({"graphstitch_run": {"error": {"kind": "target", "message": str(e)}}}))
            return 2
        with Capture(sink, target=spec) as cap:
            run_calls(cap, calls, opts)
    return 0


def census_subprocess(spec: str, opts, *, timeout: float | None = None) -> tuple[Census, int]:
    """Run the target in a fresh worker process. Returns (census, worker exit code)."""
    with tempfile.TemporaryDirectory(prefix="graphstitch-") as tmp:
        stream = os.path.join(tmp, "records.log")
        cmd = [sys.executable, "-m", "graphstitch.target", spec, json.dumps(asdict(opts)), stream]
        env = dict(os.environ)
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tmp, "inductor"))
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        died: dict | None = None
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = -signal.SIGKILL
            died = {"kind": "timeout", "message": f"target did not finish within {timeout:g} s (killed)"}
        if rc < 0 and died is None:
            sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            died = {"kind": "crash", "message": f"target process died with signal {sig}"}
        elif rc not in (0, 2) and died is None:
            died = {"kind": "crash", "message": f"target process exited with code {rc}"}
        dec = Decoder()
        events: list = []
        if os.path.exists(stream):
            with open(stream, encoding="utf-8", errors="replace") as f:
                for rec in iter_trace_records(f, dec):
                    events.extend(dec.decode(rec))
        census = build_census(events, target=spec)
        census.trace_stats = {"records": dec.records, "malformed": dec.malformed}
        if died is not None and census.error is None:
            census.error = died
        return census, rc


if __name__ == "__main__":  # the worker entry point
    sys.exit(_worker(*sys.argv[1:4]))
