"""Live capture: structured-trace records and counted graphs from a real torch.compile run.

:class:`Capture` listens to Dynamo's structured trace (the records TORCH_TRACE writes) and
counts graphs with its own backend; :func:`run_calls` compiles a target's calls and runs
them, then the eager reference; :func:`run_script` runs a user script as ``__main__``. The
one module of the runner layer that runs user code under capture; errors in that code are
recorded on the capture (``error``), never raised.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import inspect
import io
import linecache
import logging
import math
import os
import random
import re
import runpy
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from . import dynamo, paths
from .analysis import build_census
from .files import reads_clock
from .jsonio import to_json
from .model import Census, Checks, ErrorInfo, ErrorKind, SideEffects, TraceStats
from .procs import progress
from .records import Decoder, Record
from .targets import Call, Options, TargetError, load_factory, make_calls

Sink = Callable[[Record], None]

# What fullgraph=True implies (torch/_dynamo/output_graph.py: ShapeEnv(allow_scalar_outputs=
# one_graph or ..., allow_dynamic_output_shape_ops=one_graph or ...)): `.item()` and `nonzero`
# do not break a fullgraph compile. `--fullgraph-semantics` runs with them on.
FULLGRAPH_CONFIG = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}


class _TraceHandler(logging.Handler):
    def __init__(self, sink: Sink):
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if isinstance(meta, dict):
            self.sink(Record(meta, getattr(record, "payload", None)))


class Capture:
    """Collects everything torch.compile does inside a ``with graphstitch.capture()`` block.

    ``cap.census`` is built when the block exits (also when it raised).
    """

    def __init__(self, sink: Sink | None = None, *, reset: bool = True, target: str | None = None,
                 project_root: str | None = None):
        self._reset = reset
        self._target = target
        self._root = project_root
        self._decoder = Decoder(intern=dynamo.intern_table())
        self.events: list[object] = []
        self.sink: Sink = sink or self._decode
        self.census: Census | None = None
        self.error: ErrorInfo | None = None   # also known here when records go to a file
        self.completed: bool | None = None

    def _decode(self, rec: Record) -> None:
        self.events.extend(self._decoder.decode(rec))

    def note(self, **data: Any) -> None:
        """Add a graphstitch run record (target, config, outcome) to the stream."""
        self.sink(Record({"graphstitch_run": to_json(data)}))

    def complete(self, done: bool) -> None:
        """Say whether the run reached its end (False first, True once it has)."""
        self.completed = done
        self.note(completed=done)

    def fail(self, error: ErrorInfo) -> None:
        if self.error is None:
            self.error = error
        self.note(error=error)

    @contextlib.contextmanager
    def _active(self) -> Iterator[Capture]:
        if self._reset:
            dynamo.reset()
        self.note(torch_version=dynamo.torch_version(), target=self._target)
        before = dynamo.counts()
        try:
            with dynamo.trace_handler(_TraceHandler(self.sink)):
                yield self
            if self.completed is None:  # a plain `with capture():` block ran to its end
                self.complete(True)
        except BaseException:
            self.complete(False)
            raise
        finally:
            # Dynamo's own tallies, so the census can check the records against them.
            self.note(dynamo_counts={k: v - before.get(k, 0) for k, v in dynamo.counts().items()})
            self.census = build_census(self.events, target=self._target, project_root=self._root)
            self.census.trace_stats = TraceStats(self._decoder.records, self._decoder.malformed)
            if self.census.error is None:
                self.census.error = self.error

    def __enter__(self) -> Capture:
        self._cm = self._active()
        return self._cm.__enter__()

    def __exit__(self, *exc: Any) -> bool:
        return bool(self._cm.__exit__(*exc))


def capture(*, reset: bool = True) -> Capture:
    """``with graphstitch.capture() as cap: ...`` then read ``cap.census``.

    With ``reset=True`` (default) Dynamo's caches are cleared on entry, so functions compiled
    before the block are compiled again inside it and their breaks are seen.
    """
    return Capture(reset=reset)


Wrap = Callable[[str, Callable[..., Any]], Callable[..., Any]]


def counting_backend(sink: Sink, inner: Callable[..., Any] | None = None, wrap: Wrap | None = None) -> Callable[..., Any]:
    """A backend that records each FX graph with its compile id, then runs it (eagerly by
    default, or through ``inner``); ``wrap(compile_id, compiled)`` may wrap what runs
    (`census --cost` times each graph)."""
    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        ops = dynamo.graph_ops(gm)
        cid = dynamo.current_compile_id()
        sink(Record({"graphstitch_graph": {"compile_id": cid, "op_count": len(ops), "ops": ops}}))
        out = inner(gm, example_inputs) if inner is not None else gm.forward
        return wrap(cid or "?", out) if wrap is not None else out
    return backend


# ----------------------------------------------------------------------------- running calls


def _leaves(x: Any, path: str = "out", depth: int = 0, seen: set[int] | None = None) -> Iterator[tuple[str, Any]]:
    """(path, value) for every tensor / plain value in an output, however it is wrapped
    (tuples, dicts, dataclasses, model-output and cache objects)."""
    seen = set() if seen is None else seen
    if isinstance(x, torch.Tensor) or x is None or isinstance(x, (bool, int, float, complex, str, bytes)) \
            or _is_numpy(x):
        yield path, x
        return
    if depth > 8 or id(x) in seen:
        return
    seen.add(id(x))
    if isinstance(x, dict):
        # by key, not insertion order: a model output (transformers' ModelOutput is a dict)
        # that the compiled code fills in another order holds the same values
        for k, v in sorted(x.items(), key=lambda kv: repr(kv[0])):
            yield from _leaves(v, f"{path}[{k!r}]", depth + 1, seen)
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}[{i}]", depth + 1, seen)
    elif hasattr(x, "__dict__"):
        for k, v in sorted(vars(x).items()):
            yield from _leaves(v, f"{path}.{k}", depth + 1, seen)


def _is_numpy(x: Any) -> bool:
    # Only a program that imported NumPy can return its arrays.
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, (np.ndarray, np.generic))


def _numpy_differs(a: Any, b: Any) -> str | None:
    """Why two outputs, one of them NumPy, differ; None when equal. Compared as tensors (shape,
    dtype, torch.testing's tolerances): a scalar and a 0-d array of one dtype are the same
    value (Dynamo's NumPy tracing returns 0-d arrays where NumPy returns scalars); a Python
    number beside a NumPy scalar is compared by value. An array against a tensor differs."""
    np = sys.modules["numpy"]
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return f"{type(a).__name__} != {type(b).__name__}"
    x, y = np.asarray(a), np.asarray(b)
    if {x.dtype.kind, y.dtype.kind} & set("OSUVMm"):   # objects, strings, records, dates
        return None if x.shape == y.shape and bool(np.array_equal(x, y)) else f"{a!r} != {b!r}"
    try:
        torch.testing.assert_close(torch.from_numpy(x.copy()), torch.from_numpy(y.copy()), equal_nan=True,
                                   check_dtype=_is_numpy(a) and _is_numpy(b))
    except Exception as e:  # noqa: BLE001 - any mismatch (value, dtype, shape) is an answer
        return str(e).strip().splitlines()[0][:300]
    return None


def outputs_equal(actual: Any, expected: Any) -> tuple[bool, str | None]:
    """Compiled vs eager: same structure, tensors (and NumPy arrays) within torch.testing's
    dtype-aware tolerances."""
    got, want = list(_leaves(actual)), list(_leaves(expected))
    if [p for p, _ in got] != [p for p, _ in want]:
        return False, "outputs differ in structure"
    for (path, a), (_, b) in zip(got, want):
        if _is_numpy(a) or _is_numpy(b):
            why = _numpy_differs(a, b)
            if why:
                return False, f"{path}: {why}"
            continue
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            try:
                torch.testing.assert_close(a, b, equal_nan=True)
            except Exception as e:  # noqa: BLE001 - any mismatch (value, dtype, shape) is an answer
                return False, f"{path}: " + str(e).strip().splitlines()[0][:300]
        elif a != b and not (isinstance(a, float) and isinstance(b, float)
                             and (abs(a - b) <= 1e-5 * max(1.0, abs(b)) or math.isnan(a) and math.isnan(b))):
            # a NaN is equal to a NaN, as in tensors (equal_nan): a diverging loss read with .item()
            return False, f"{path}: {a!r} != {b!r}"
    return True, None


def clone_output(x: Any) -> Any:
    try:
        return copy.deepcopy(x)
    except Exception:  # noqa: BLE001 - uncopyable outputs are compared as they are
        return x


_USER_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_MESSAGE_LIMIT = 2000


def _compact(message: str) -> str:
    """A long exception text (a FakeTensor repr can run to megabytes) cut to its head, keeping
    Dynamo's "from user code:" section whole: it names the user's line."""
    text = message.strip()
    if len(text) <= _MESSAGE_LIMIT:
        return text
    head, sep, user = text.partition("from user code:")
    user = (sep + user)[:_MESSAGE_LIMIT // 2] if sep else ""
    return head[:_MESSAGE_LIMIT - len(user)].rstrip() + " [...]" + ("\n\n" + user.strip() if user else "")


def error_info(kind: ErrorKind, exc: BaseException) -> ErrorInfo:
    """One error: its type, its text (bounded) and the user's file:line. A compile error names
    the line in Dynamo's "from user code:" frames; otherwise the innermost traceback frame
    outside torch and graphstitch."""
    text = str(exc).strip() or repr(exc)
    where = None
    _, sep, user = text.partition("from user code:")
    frames = [(f, n) for f, n in _USER_FRAME_RE.findall(user) if not paths.is_internal(f)] if sep else []
    if frames:
        where = f"{frames[-1][0]}:{frames[-1][1]}"
    if where is None:
        tb = [fr for fr in traceback.extract_tb(exc.__traceback__) if os.path.abspath(fr.filename) not in _OWN]
        user_tb = [fr for fr in tb if not paths.is_internal(fr.filename)]
        pick = user_tb or tb
        where = f"{pick[-1].filename}:{pick[-1].lineno}" if pick else None
    code = exit_code(exc, quiet=True) if isinstance(exc, SystemExit) else None
    return ErrorInfo(kind, _compact(text), type(exc).__name__, where, code)


_OWN = {os.path.abspath(__file__), os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")}


def exited(exc: SystemExit, when: str) -> ErrorInfo:
    """A target that called sys.exit(): never a clean result, whatever its code."""
    info = error_info(ErrorKind.EXIT, exc)
    info.message = f"the target called sys.exit({info.code}) {when}"
    return info


def _seed() -> None:
    """Every random stream a call may draw from, at the same state before each compiled and
    each eager call: torch's, Python's and numpy's (host randomness in the code compares too)."""
    torch.manual_seed(0)
    random.seed(0)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(0)


def run_calls(cap: Capture, calls: Sequence[Call], opts: Options,
              reference: Callable[[], Sequence[Call]] | None = None, *, wrap: Wrap | None = None,
              compiled: dict[int, Callable[..., Any]] | None = None,
              rebuild: Callable[[], Sequence[Call]] | None = None) -> None:
    """The compiled calls in order under capture, then the eager reference on copies of the
    inputs made beforehand.

    Compiled first: the first run of a model pays one-off costs (allocator, kernels' lazy
    init) that a bare ``torch.compile`` first call pays too; the eager reference after it
    is then cheap. Failures are recorded on the capture (``error``), never raised: a
    partial census is still a census. ``reference`` (a source-rewrite trial) makes the
    calls of the original code, whose eager outputs and effects are the reference.
    ``rebuild`` (the factory again) is for code whose calls change its own state (a step
    counter, a power iteration's vectors): the eager reference runs after the compiled calls
    on the same objects, so on a mismatch all calls are replayed eagerly, in order, on a new
    build; outputs match eager when that replay matches.
    """
    cap.note(config=opts.as_config(), calls=len(calls), repeat_passes=opts.repeat)
    cap.complete(False)
    ref_calls = list(reference()) if reference is not None else None
    if ref_calls is not None and len(ref_calls) != len(calls):
        cap.fail(ErrorInfo(ErrorKind.TARGET, f"the patched target makes {len(calls)} calls, the original {len(ref_calls)}"))
        return
    grad = torch.enable_grad() if opts.grad else torch.no_grad()
    # The fresh set is made from the arguments as the factory made them: a call that writes
    # into its inputs (`inputs[mask] = ...`) must not change what the patched side's fresh
    # set is made of (the original's comes from a new factory call).
    pristine = [(fn, *ak) if (ak := _copy_or_none((a, k))) is not None else (fn, a, k) for fn, a, k in calls] \
        if opts.fresh else list(calls)
    _NOT_CHECKED = object()
    # The eager reference gets its own copy of the inputs: an iterator or a tensor mutated in
    # place by the compiled call must reach it as the factory made it.
    copies: list[Any] = []
    if opts.check_eager and ref_calls is not None:
        copies = [(a, k) for _, a, k in ref_calls]  # made for the reference alone: no copy needed
    elif opts.check_eager:
        for _, args, kwargs in calls:
            try:
                copies.append(copy_inputs((args, kwargs)))
            except Exception:  # noqa: BLE001 - e.g. a generator: cannot check this call
                copies.append(_NOT_CHECKED)

    def eager(i: int) -> Any:
        fn = (ref_calls or calls)[i][0]
        eargs, ekwargs = copies[i]
        _seed()
        return fn(*eargs, **ekwargs)

    with grad:
        inner = None if opts.backend in ("counting", "graphstitch") else dynamo.lookup_backend(opts.backend)
        backend = counting_backend(cap.sink, inner, wrap)
        # COMPILED (given by `census --cost`) keeps the warm compiled functions for timing.
        compiled = {} if compiled is None else compiled
        outputs: list[Any] = []
        extra = dynamo.resolve_config(opts.patches.config if opts.patches else {})
        if opts.fullgraph_semantics:
            extra.update(FULLGRAPH_CONFIG)
        with dynamo.config(nested_graph_breaks=opts.nested_graph_breaks, **extra):
            # The first pass's outputs are checked; repeat passes (the same calls again, as
            # `guards --repeat` always made them) only show whether the compiled code is kept.
            for p, i, (fn, args, kwargs) in ((p, i, c) for p in range(1 + opts.repeat) for i, c in enumerate(calls)):
                progress(f"call {i + 1} of {len(calls)}: compile and run" + (f" (repeat {p})" if p else ""))
                # One compiled wrapper per distinct callable, so calls share its cache.
                cfn = compiled.get(id(fn))
                if cfn is None:
                    cfn = compiled[id(fn)] = torch.compile(fn, backend=backend, dynamic=opts.dynamic)
                if p == 1 and i == 0 and opts.fresh:   # graphstitch's fresh check follows the first pass
                    cap.note(call=-1, pass_index=-1)
                    _fresh_check(cap, pristine, compiled, list(reference()) if reference is not None else None,
                                 can_freeze=_can_freeze(opts))
                cap.note(call=i, pass_index=p)
                _seed()
                try:
                    out = cfn(*args, **kwargs)
                    if p == 0:
                        outputs.append(out)
                except SystemExit as e:
                    cap.fail(exited(e, f"during call {i + 1} of {len(calls)}"))
                    return
                except Exception as e:  # noqa: BLE001
                    # The target's own bug (it fails eagerly too) or a compile-only failure?
                    if copies and copies[i] is not _NOT_CHECKED:
                        try:
                            eager(i)
                        except SystemExit as ee:
                            cap.fail(exited(ee, f"during call {i + 1} of {len(calls)}"))
                            return
                        except Exception as ee:  # noqa: BLE001
                            cap.fail(error_info(ErrorKind.EAGER, ee))
                            return
                    cap.fail(error_info(ErrorKind.COMPILED, e))
                    return
            if opts.fresh and not opts.repeat:
                progress("fresh inputs: compiled vs the original's eager run")
                cap.note(call=-1, pass_index=-1)
                _fresh_check(cap, pristine, compiled, list(reference()) if reference is not None else None,
                             can_freeze=_can_freeze(opts))
        cap.complete(True)
        if not opts.check_eager:
            return
        checked = 0
        for i, got in enumerate(outputs):
            if copies[i] is _NOT_CHECKED:
                continue
            progress(f"call {i + 1} of {len(outputs)}: eager reference run")
            try:
                want = eager(i)
            except SystemExit as e:
                cap.fail(exited(e, f"during the eager reference run of call {i + 1}"))
                return
            except Exception as e:  # noqa: BLE001
                cap.fail(error_info(ErrorKind.EAGER, e))
                return
            ok, why = outputs_equal(got, want)
            if not ok:
                if ref_calls is None and rebuild is not None and _replay_matches(outputs, rebuild):
                    checked = len(outputs)   # the calls change their callable's state: all replayed, all equal
                    break
                cap.note(outputs_match_eager=False, output_mismatch=f"call {i}: {why}")
                return
            checked += 1
    if checked:
        cap.note(outputs_match_eager=True)
    else:
        cap.note(output_mismatch="not checked: the inputs could not be copied for an eager reference run")


def _replay_matches(outputs: Sequence[Any], rebuild: Callable[[], Sequence[Call]]) -> bool:
    """Do the calls of a new build, run eagerly in order, give OUTPUTS?"""
    try:
        calls = list(rebuild())
        if len(calls) != len(outputs):
            return False
        for got, (fn, args, kwargs) in zip(outputs, calls):
            _seed()
            if not outputs_equal(got, fn(*args, **kwargs))[0]:
                return False
    except (Exception, SystemExit):  # noqa: BLE001 - no replay: the first mismatch stands
        return False
    return True


# Files written while `_effects` records (the innermost recording gets them). An audit hook
# cannot be removed, so one is installed once and records only while a list is open here.
_WRITES: list[list[str]] = []
_AUDITING = False
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _WRITES:
        return
    path, mode, flags = args
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
    if writes and isinstance(path, (str, bytes, os.PathLike)):
        name = os.fsdecode(path)
        if not _compiler_file(name):
            _WRITES[-1].append(f"file {os.path.basename(name)} {mode if isinstance(mode, str) else 'os.open'}")


def _compiler_file(name: str) -> bool:
    """Bytecode and compile caches (a recompile on the compiled side writes them): not the code's effects."""
    caches = [os.environ.get(v) for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")]
    full = os.path.abspath(name)
    return name.endswith(".pyc") or "torchinductor" in name \
        or any(c and full.startswith(os.path.abspath(c) + os.sep) for c in caches)


@contextlib.contextmanager
def _file_writes(out: list[str]) -> Iterator[None]:
    """Record the files the code writes (base names, in order): `open`/`os.open` through an
    audit hook, and `torch.save`, whose C++ writer opens its file without one."""
    global _AUDITING
    if not _AUDITING:
        sys.addaudithook(_audit)
        _AUDITING = True
    ser = torch.serialization
    orig = getattr(ser, "_open_zipfile_writer", None)   # torch internal: recorded only where it exists

    def zip_writer(f: Any) -> Any:
        if isinstance(f, (str, bytes, os.PathLike)) and _WRITES:
            _WRITES[-1].append(f"torch.save {os.path.basename(os.fsdecode(f))}")
        assert orig is not None
        return orig(f)
    _WRITES.append(out)
    if orig is not None:
        setattr(ser, "_open_zipfile_writer", zip_writer)  # noqa: B010 - a torch internal, typed differently
    try:
        yield
    finally:
        _WRITES.pop()
        if orig is not None:
            setattr(ser, "_open_zipfile_writer", orig)  # noqa: B010


_DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


@contextlib.contextmanager
def _effects(out: list[str], mask_clocks: bool = False) -> Iterator[None]:
    """Record what the code prints to stdout, logs, warns and writes to files. The user's
    loggers are enabled at every level meanwhile, so a dropped debug call is seen too.
    With MASK_CLOCKS, the numbers a function that reads a clock prints or logs are masked
    (see :func:`graphstitch.files.reads_clock`). Only where no hatch traces a body at compile
    time: elsewhere Dynamo breaks on a clock call rather than freezing it, so the compiled
    side reads the clock at run time."""
    orig, orig_enabled = logging.Logger.handle, logging.Logger.isEnabledFor

    def enabled(self: logging.Logger, level: int) -> bool:
        return True if not self.name.startswith("torch") else orig_enabled(self, level)

    def handle(self: logging.Logger, record: logging.LogRecord) -> None:
        if not record.name.startswith("torch"):  # torch's own warnings differ by design
            msg = record.getMessage()
            if mask_clocks and reads_clock(record.pathname, record.lineno):
                msg = _NUMBER.sub("#", msg)
            out.append(f"log {record.name} {record.levelname} {msg}")
        return orig(self, record)
    buf = _ClockMaskingBuffer() if mask_clocks else io.StringIO()
    logging.Logger.handle, logging.Logger.isEnabledFor = handle, enabled  # type: ignore[method-assign]
    # Warnings count too, every time ("always": the default filter shows one once per line,
    # which would hide a dropped one); torch's and the standard library's own warnings (compile
    # time, deprecations a rewrite removes) differ by design.
    # Category and message only: a deferred warn (reorderable_logging_functions) is attributed
    # to another line of the same file.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # A warning torch (or Python) emits about the user's call names the user's line
        # (stacklevel), yet it is torch's diagnostic (`F.softmax(x)` without `dim`), which
        # Dynamo emits while tracing only: the emitter is the frame that called warn.
        internal: set[int] = set()

        def record(msg: warnings.WarningMessage) -> None:
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename == warnings.__file__:
                f = f.f_back   # type: ignore[assignment]
            if f is not None and (paths.is_internal(f.f_code.co_filename) or _warned_by_c_call(f)):
                internal.add(id(msg))
            caught.append(msg)
        warnings._showwarnmsg_impl = record  # type: ignore[attr-defined]   # catch_warnings restores it
        try:
            with contextlib.redirect_stdout(buf), _file_writes(out):
                yield
        finally:
            logging.Logger.handle, logging.Logger.isEnabledFor = orig, orig_enabled  # type: ignore[method-assign]
            if buf.getvalue():
                out.append("stdout " + buf.getvalue())
            # Deprecation notices are about the code, not what it computes: torch's own (a
            # `torch.cuda.amp.autocast()`) name the user's line, and Dynamo emits them while
            # tracing, not on every call.
            out.extend(f"warning {w.category.__name__} {w.message}" for w in caught
                       if not paths.is_internal(w.filename) and not issubclass(w.category, _DEPRECATIONS)
                       and id(w) not in internal)


_WARN = {warnings.warn, warnings.warn_explicit}
_C_CALLABLE = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
               types.MethodWrapperType, types.ClassMethodDescriptorType)


def _warned_by_c_call(f: types.FrameType) -> bool:
    """Whether the warning F shows as its emitter came from a C function F is calling other than
    ``warnings.warn``: a library op's own diagnostic (torch's ``t.new_tensor(t2)`` copy notice,
    NumPy's divide warnings), which the op emits when it runs eagerly and Dynamo at trace time
    only. Read from the call expression at F's current instruction, resolved without running
    anything (names, then static attributes); unknown: the user's warning."""
    try:
        pos = list(f.f_code.co_positions())[f.f_lasti // 2]
        first, last, col, end = pos
        if first is None or last is None or col is None or end is None:
            return False
        lines = [ln.encode() for ln in linecache.getlines(f.f_code.co_filename)[first - 1:last]]
        if not lines:
            return False
        lines[-1] = lines[-1][:end]
        lines[0] = lines[0][col:]
        node = ast.parse(b"".join(lines).decode(), mode="eval").body
    except (IndexError, ValueError, SyntaxError, UnicodeDecodeError):
        return False
    if not isinstance(node, ast.Call):
        return False
    chain: list[str] = []
    fn: ast.expr = node.func
    while isinstance(fn, ast.Attribute):
        chain.insert(0, fn.attr)
        fn = fn.value
    if not isinstance(fn, ast.Name):
        return False
    missing = object()
    obj = next((ns[fn.id] for ns in (f.f_locals, f.f_globals, vars(builtins)) if fn.id in ns), missing)
    for attr in chain:
        if obj is missing:
            return False
        obj = inspect.getattr_static(obj, attr, missing)
    return obj is not missing and isinstance(obj, _C_CALLABLE) and obj not in _WARN


class _ClockMaskingBuffer(io.StringIO):
    """stdout whose text written by a function that reads a clock has its numbers masked
    (``print`` is C: the frame above ``write`` is the one that called it)."""

    def write(self, s: str) -> int:
        f = sys._getframe(1)
        if reads_clock(f.f_code.co_filename, f.f_lineno or 0):
            s = _NUMBER.sub("#", s)
        return super().write(s)


def _fresh(x: Any, gen: torch.Generator, keep_ints: bool = False) -> Any:
    """Same structure, shapes and dtypes, new random values (ints: the seen values, shuffled;
    with KEEP_INTS, integer and bool tensors stay as the factory made them, and so do floating
    tensors holding only whole numbers: labels or counts stored as floats)."""
    if isinstance(x, torch.Tensor):
        if keep_ints and x.dtype.is_floating_point and x.numel() and bool(torch.equal(x, x.round())):
            return x.clone()
        if x.dtype.is_floating_point or x.dtype.is_complex:
            return torch.randn(x.shape, generator=gen, dtype=x.dtype).to(x.device)
        if keep_ints:
            return x.clone()
        if x.dtype == torch.bool:
            return (torch.rand(x.shape, generator=gen) > 0.5).to(x.device)
        if x.numel() == 0:
            return x.clone()
        # A shuffle of the seen values: lengths still sum to the same total, labels keep their
        # classes, indices stay valid (random ints in the seen range broke such preconditions,
        # so the original code raised and nothing could be proved).
        flat = x.flatten()
        return flat[torch.randperm(flat.numel(), generator=gen).to(x.device)].reshape(x.shape)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return _like(x, [_fresh(v, gen, keep_ints) for v in x])
    if isinstance(x, Iterator):  # a generator/iterator argument: fresh items, same kind of input
        return iter([_fresh(v, gen, keep_ints) for v in x])
    if isinstance(x, dict):
        return {k: _fresh(v, gen, keep_ints) for k, v in x.items()}
    if isinstance(x, torch.Generator):
        # a random stream the call draws from: a fresh one, seeded from GEN, so that the eager
        # and the compiled run (built from the same seed) each draw the same values from their own
        return torch.Generator(device=x.device).manual_seed(int(torch.randint(2**62, (1,), generator=gen)))
    return x


def _like(x: list[Any] | tuple[Any, ...], items: list[Any]) -> Any:
    """ITEMS in X's container type. A list subclass is copied without its constructor, which
    may take other arguments (a DataLoader stand-in `Loader(batches, n)` with a `.dataset`),
    and keeps its attributes; a tuple subclass whose constructor refuses the items stays X."""
    if type(x) in (list, tuple):
        return type(x)(items)
    if isinstance(x, list):
        y = copy.copy(x)
        y[:] = items
        return y
    try:
        return type(x)(items)
    except TypeError:
        return x


def _fresh_pair(x: Any, ref: Any, gen: torch.Generator, keep_ints: bool) -> Any:
    """``_fresh(x)``, except where the original call passed a Python number and this one a 0-d
    tensor: the tensor of that same number (numbers are never made fresh)."""
    if isinstance(x, torch.Tensor) and x.dim() == 0 and isinstance(ref, (int, float)) and not isinstance(ref, bool):
        return torch.tensor(ref, dtype=x.dtype, device=x.device)
    if isinstance(x, (list, tuple)) and isinstance(ref, (list, tuple)) and len(x) == len(ref) \
            and not hasattr(x, "_fields"):
        return _like(x, [_fresh_pair(v, r, gen, keep_ints) for v, r in zip(x, ref)])
    if isinstance(x, dict) and isinstance(ref, dict):
        return {k: _fresh_pair(v, ref.get(k), gen, keep_ints) for k, v in x.items()}
    return _fresh(x, gen, keep_ints)


# A number with the spaces a width pads it with (`{:5.2f}` of 9.87 and of 10.12): masked, a
# duration's padding depends on its magnitude too.
_NUMBER = re.compile(r" *[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _copy_or_none(x: Any) -> Any:
    try:
        return copy_inputs(x)
    except Exception:  # noqa: BLE001 - e.g. a generator: no second eager run for it
        return None


def copy_inputs(x: Any) -> Any:
    """A deep copy of call arguments that keeps each tensor's ``.grad``: a Parameter's
    deepcopy drops it, so a copied optimizer (its params' grads set by the factory) would
    step on nothing, and its eager run differ from the compiled one on the originals."""
    memo: dict[int, Any] = {}
    for opt in _optimizers(x):
        # Optimizer.__getstate__ keeps defaults, state and param_groups only: a subclass's own
        # attributes (set in its __init__) would be missing from a deepcopy. Its whole __dict__.
        new = memo[id(opt)] = object.__new__(type(opt))
        new.__dict__.update(copy.deepcopy(opt.__dict__, memo))
        memo.setdefault(id(memo), []).append(opt)
    out = copy.deepcopy(x, memo)
    for orig in memo.get(id(memo), ()):   # deepcopy keeps every copied original alive here
        if isinstance(orig, torch.Tensor) and orig.grad is not None:
            twin = memo.get(id(orig))
            if isinstance(twin, torch.Tensor) and twin is not orig and twin.grad is None:
                twin.grad = orig.grad.detach().clone()
    return out


def _optimizers(x: Any, depth: int = 0) -> Iterator[torch.optim.Optimizer]:
    """Optimizers among call arguments (in tuples, lists and dicts, a few levels deep)."""
    if isinstance(x, torch.optim.Optimizer):
        yield x
    elif depth < 4 and isinstance(x, (list, tuple)):
        for v in x:
            yield from _optimizers(v, depth + 1)
    elif depth < 4 and isinstance(x, dict):
        for v in x.values():
            yield from _optimizers(v, depth + 1)


def _can_freeze(opts: Options) -> bool:
    """Whether the run has a hatch whose body is traced at compile time (nonstrict_trace,
    allow_in_graph: a clock read there is frozen into the graph). Elsewhere Dynamo breaks on
    a clock instead of tracing it, so compiled code cannot freeze one."""
    wrap = opts.patches.wrap if opts.patches else None
    if wrap is not None and wrap.how in ("nonstrict_trace", "allow_in_graph"):
        return True
    for path in opts.overlay.values():
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                if re.search(r"\b(nonstrict_trace|allow_in_graph)\b", f.read()):
                    return True
        except OSError:
            return True
    return False


def _fresh_check(cap: Capture, calls: Sequence[Call], compiled: dict[int, Callable[..., Any]],
                 ref_calls: Sequence[Call] | None = None, can_freeze: bool = True) -> None:
    """Run a fresh random input set eagerly and through the (warm) compiled functions:
    outputs must match, and each call must print/log the same at run time. Compile-time
    runs on fake tensors (allow_in_graph, nonstrict_trace) are not run-time effects.

    Shuffled integers can break the model's own invariants (split sizes, grid shapes), and
    random floats where the factory gave whole numbers break labels stored as floats: when
    the *original* code raises on them, the integer tensors and the floating tensors of whole
    numbers are kept as the factory made them (only the other floating values fresh); when it raises on that too, nothing fresh can be compared and
    the checks say so (``fresh_unusable``): equality is then proved on the given calls only."""
    unusable = None
    if ref_calls is not None:
        # The compiled side has made the factory's calls already; the original code's new
        # objects replay them eagerly, so state kept between calls (a step counter) matches.
        # On copies of the arguments: the fresh set is made from them next (a generator
        # argument, which cannot be copied, is never consumed here: no replay then).
        replay = [(fn, _copy_or_none((a, k))) for fn, a, k in ref_calls]
        try:
            for fn, ak in replay if all(ak is not None for _, ak in replay) else []:
                _seed()
                fn(*ak[0], **ak[1])
        except Exception:  # noqa: BLE001 - the fresh comparison says what fails
            pass
    # Two builds whose arguments differ in value (a factory that reads a clock: a start
    # time) print different numbers on both sides for no fault of the patch: their printed
    # numbers are compared masked (the text around them must still match).
    masked = ref_calls is not None and any(_values_differ((a, k), (ra, rk))
                                           for (_, a, k), (_, ra, rk) in zip(calls, ref_calls))
    given_kept, given = _given_effects(calls, compiled, ref_calls, masked, can_freeze)
    for keep_ints in (False, True):
        # The original code gets the same fresh values (same structure, same generator seed);
        # a number the patched call passes as a 0-d tensor (a recompile fix) keeps its value.
        gen = torch.Generator().manual_seed(1234)
        fresh = [(fn, _fresh_pair(a, r[1], gen, keep_ints), _fresh_pair(k, r[2], gen, keep_ints))
                 for (fn, a, k), r in zip(calls, ref_calls or calls)]
        gen = torch.Generator().manual_seed(1234)
        ref = [(fn, _fresh(a, gen, keep_ints), _fresh(k, gen, keep_ints))
               for fn, a, k in (ref_calls if ref_calls is not None else calls)]
        checks, eager_error = _compare_fresh(fresh, ref, compiled, masked, can_freeze)
        if eager_error is None:
            if given is not None and checks.side_effects_kept:
                checks.side_effects_kept, checks.side_effects = False, given
            checks.given_effects_kept = given_kept
            cap.note(checks=checks)
            return
        unusable = eager_error
    cap.note(checks=Checks(fresh_unusable=f"the original code raises on fresh inputs ({unusable})",
                           side_effects_kept=False if given is not None else None, side_effects=given,
                           given_effects_kept=given_kept))


def _values_differ(a: Any, b: Any, depth: int = 0) -> bool:
    """Do two builds' arguments hold different numbers, strings or tensor values (other
    objects, a module or a writer, are not compared: two builds never share them)?"""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype or a.layout != torch.strided or b.layout != torch.strided:
            return a.shape != b.shape or a.dtype != b.dtype
        x, y = a.detach().cpu(), b.detach().cpu()
        same = torch.allclose(x, y, rtol=0, atol=0, equal_nan=True) if x.is_floating_point() else torch.equal(x, y)
        return not same
    if isinstance(a, (bool, int, float, str)) and isinstance(b, (bool, int, float, str)):
        return a != b
    if depth < 4 and isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(_values_differ(x, y, depth + 1) for x, y in zip(a, b))
    if depth < 4 and isinstance(a, dict) and isinstance(b, dict):
        return a.keys() != b.keys() or any(_values_differ(a[k], b[k], depth + 1) for k in a)
    return False


def _given_effects(calls: Sequence[Call], compiled: dict[int, Callable[..., Any]],
                   ref_calls: Sequence[Call] | None, masked: bool = False,
                   can_freeze: bool = True) -> tuple[bool | None, SideEffects | None]:
    """The factory's own calls again, now that the compiled functions are warm: what the code
    prints/logs/warns at run time must match the original's eager run on the same inputs
    (the fresh set may never take the path that reports). Whether they matched (None: not
    compared), and the effects that differ. Both sides run on copies, so the fresh set is
    still made from the factory's arguments."""
    ref_src = ref_calls if ref_calls is not None else calls
    mine = [_copy_or_none((a, k)) for _, a, k in calls]
    theirs = [_copy_or_none((a, k)) for _, a, k in ref_src]
    if any(x is None for x in [*mine, *theirs]):
        return None, None   # a generator argument: it cannot be run twice
    checks, error = _compare_fresh([(fn, *ak) for (fn, _, _), ak in zip(calls, mine)],
                                   [(fn, *ak) for (fn, _, _), ak in zip(ref_src, theirs)], compiled, masked,
                                   can_freeze)
    if error is not None:
        return None, None
    return checks.side_effects_kept, checks.side_effects if checks.side_effects_kept is False else None


def _compare_fresh(fresh: Sequence[Call], ref: Sequence[Call], compiled: dict[int, Callable[..., Any]],
                   masked: bool = False, can_freeze: bool = True) -> tuple[Checks, str | None]:
    """The checks of one fresh input set, or the error the original (eager) code raised on it."""
    checks = Checks(fresh_outputs_match=True, side_effects_kept=True)
    for i, (fn, args, kwargs) in enumerate(fresh):
        eff_e: list[str] = []
        eff_c: list[str] = []
        rfn, rargs, rkwargs = ref[i]
        again, again_c = _copy_or_none((rargs, rkwargs)), _copy_or_none((args, kwargs))
        try:
            _seed()
            with _effects(eff_e, not can_freeze):
                want = clone_output(rfn(*rargs, **rkwargs))
        except Exception as e:  # noqa: BLE001 - the input set, not the candidate, is at fault
            return checks, f"call {i}: {type(e).__name__}: {str(e).strip()[:200]}"
        try:
            _seed()
            with _effects(eff_c, not can_freeze):
                got = compiled[id(fn)](*args, **kwargs)
            if masked:
                eff_e, eff_c = [_NUMBER.sub("#", e) for e in eff_e], [_NUMBER.sub("#", e) for e in eff_c]
            if eff_e != eff_c and again is not None and again_c is not None:
                eff_e, eff_c = _settle_effects(rfn, compiled[id(fn)], again, again_c, eff_e, eff_c, can_freeze)
        except Exception as e:  # noqa: BLE001
            checks.fresh_error = f"{type(e).__name__}: {str(e).strip()[:300]}"
            checks.fresh_outputs_match = False
            break
        ok, why = outputs_equal(got, want)
        if not ok and checks.fresh_outputs_match:
            checks.fresh_outputs_match = False
            checks.fresh_mismatch = f"fresh call {i}: {why}"
        if eff_e != eff_c and checks.side_effects_kept and not _numbers_close(eff_e, eff_c):
            checks.side_effects_kept = False
            checks.side_effects = SideEffects(i, eff_e[:5], eff_c[:5])
    return checks, None


def _numbers_close(eager: list[str], compiled: list[str]) -> bool:
    """Reports that differ only in printed numbers, each within float32's tolerance (torch.testing's:
    the outputs' own): the same value computed compiled rounds differently, and a float printed
    in full shows it (``print('loss {}'.format(epoch_loss))``). A count or a label that differs
    is not close."""
    if len(eager) != len(compiled):
        return False
    for e, c in zip(eager, compiled):
        if _NUMBER.sub("#", e) != _NUMBER.sub("#", c):
            return False
        for m, n in zip(_NUMBER.finditer(e), _NUMBER.finditer(c)):
            want, got = float(m.group()), float(n.group())
            if abs(got - want) > 1e-5 + 1.3e-6 * abs(want):
                return False
    return True


def _settle_effects(rfn: Callable[..., Any], cfn: Callable[..., Any], again: Any, again_c: Any,
                    eff_e: list[str], eff_c: list[str], can_freeze: bool = True) -> tuple[list[str], list[str]]:
    """Printed text that differs between eager and compiled: a value both read from a clock
    (``int(steps / (time.time() - t0))``), or a report lost or frozen. Up to three more pairs
    of runs on copies of the inputs: a pair that prints the same shows the clock's doing;
    when the compiled side varies (or eager does, in a run without a hatch that traces a body
    at compile time) the numbers are compared masked; a compiled side that never varies
    while eager does froze a value at trace time (a ``time.time()`` traced once): the
    difference stands. A single re-run decided this once, and a clock read to whole units
    (the same twice by chance) made the verdict flip between runs."""
    seen_e, seen_c = {tuple(eff_e)}, {tuple(eff_c)}
    for _ in range(3):
        a, ac = _copy_or_none(again), _copy_or_none(again_c)
        if a is None or ac is None:
            break
        e2: list[str] = []
        c2: list[str] = []
        _seed()
        with _effects(e2, not can_freeze):
            rfn(*a[0], **a[1])
        _seed()
        with _effects(c2, not can_freeze):
            cfn(*ac[0], **ac[1])
        if e2 == c2:
            return e2, c2
        seen_e.add(tuple(e2))
        seen_c.add(tuple(c2))
    # (either side may print the same by chance: a clock read to 3 decimals in a fast step.
    # The compiled side varying shows it reads the clock at run time; a compiled side that
    # never varies is a frozen clock only where a hatch traces a body at compile time.)
    if len(seen_c) > 1 or (len(seen_e) > 1 and not can_freeze):
        return [_NUMBER.sub("#", e) for e in eff_e], [_NUMBER.sub("#", e) for e in eff_c]
    return eff_e, eff_c


def census_calls(fn: Callable[..., Any] | None, calls: Sequence[Any], *, backend: str = "counting",
                 nested_graph_breaks: bool = False, dynamic: bool | None = None,
                 grad: bool = False, check_eager: bool = True) -> Census:
    """Compile and make several calls in order (so recompiles between them are seen).

    ``calls`` holds ``(args, kwargs)`` pairs when ``fn`` is given, else ``(fn, args, kwargs)``
    triples. Errors are reported on ``census.error``, not raised.
    """
    norm: list[Call] = []
    for c in calls:
        if fn is not None:
            args, kwargs = (c, {}) if not (isinstance(c, tuple) and len(c) == 2 and isinstance(c[1], dict)) else c
            norm.append((fn, tuple(args), dict(kwargs)))
        else:
            f, args, kwargs = c
            norm.append((f, tuple(args), dict(kwargs)))
    opts = Options(backend, nested_graph_breaks, dynamic, grad, check_eager)
    with Capture(target=getattr(fn, "__qualname__", None) if fn is not None else None) as cap:
        run_calls(cap, norm, opts)
    assert cap.census is not None
    return cap.census


def census(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Census:
    """Compile ``fn`` with graphstitch's counting backend, call it once, return the census."""
    return census_calls(fn, [(args, kwargs)])


def load_calls(spec: str) -> list[Call] | ErrorInfo:
    """A target's calls from its factory, or the exit (kind exit) when the factory called
    sys.exit. Raises TargetError for a bad target."""
    try:
        return make_calls(load_factory(spec), spec)
    except SystemExit as e:
        return exited(e, "in its factory, before any call")


def census_target(spec: str, opts: Options, sink: Sink | None = None, *, project_root: str | None = None) -> Census:
    """Load and run a target in this process (``--in-process``). Raises TargetError."""
    linecache.checkcache()  # source lines of a file edited since an earlier run in this process
    calls = load_calls(spec)
    with Capture(sink, target=spec, project_root=project_root) as cap:
        if isinstance(calls, ErrorInfo):
            cap.complete(False)
            cap.fail(calls)
        else:
            run_calls(cap, calls, opts, rebuild=lambda: load_calls_or_raise(spec))
    assert cap.census is not None
    return cap.census


def load_calls_or_raise(spec: str) -> list[Call]:
    """The target's calls again, from a new factory call (its exit raises SystemExit), with
    autograd on as the user's script has it (this runs inside the census's ``no_grad``)."""
    with torch.enable_grad():
        return make_calls(load_factory(spec), spec)


def exit_code(e: SystemExit, *, quiet: bool = False) -> int:
    """What the interpreter does with SystemExit's argument (a message is printed, code 1)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    if not quiet:
        print(e.code, file=sys.stderr)
    return 1


def run_script(cap: Capture, script: str, argv: Sequence[str]) -> int:
    """Run SCRIPT as ``__main__`` with ARGV under CAP, as ``python script.py ARGV`` would
    (sys.argv, sys.path[0]); its compiles use its own backend. Returns its exit code; an
    exit with a non-zero code is error kind ``exit``, an uncaught exception kind ``script``
    (its traceback printed as Python would)."""
    path = os.path.abspath(script)
    cap.complete(False)
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        code = exit_code(e)
        if code:
            cap.fail(ErrorInfo(ErrorKind.EXIT, f"script exited with code {code}", code=code))
        else:
            cap.complete(True)  # sys.exit(0) is how a script may end
        return code
    except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too: report, then exit like Python
        traceback.print_exc()
        cap.fail(error_info(ErrorKind.SCRIPT, e))
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    cap.complete(True)
    return 0


__all__ = ["Capture", "TargetError", "capture", "census", "census_calls", "census_target", "run_calls", "run_script"]
