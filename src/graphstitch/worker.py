"""The one protocol between graphstitch and the processes it starts.

A job is a folder. The parent writes ``job.json`` (a :class:`Job`); the child
(``python -m graphstitch.worker DIR``):

- writes ``ready`` once torch and graphstitch are imported, so a ``--timeout`` measures the
  target, not interpreter start-up (a rank: once its process group is up);
- streams trace records to ``records.log`` (TORCH_TRACE's line format) as they happen, so a
  crash, hang or kill still leaves a census;
- writes ``result.json`` (``{"exit_code": N, "data": ...}``) atomically when it ends;
- with ``capture`` (every job but a user script's or a rank's), sends its own stdout and
  stderr (the target's prints, torch's warnings) to ``output.log``, shown by the parent only
  when they matter (a failure, ``--verbose``), never interleaved with graphstitch's output;
- keeps one line in ``progress`` (its phase, "call 2 of 5"), rewritten in place, that the
  parent shows on a terminal.

Under torchrun every rank does the same with a ``.rank_N`` suffix. A job names its handler
(``module:function``): a command package provides its child side (a perf measurement, a
timed pass, a rank) without this module importing it. Interactive jobs (timed passes)
also answer one request line on stdin with one line on stdout; the target's own output
then goes to stderr.

Census jobs (the default handler) run a TARGET under capture; script jobs run a user script
as ``__main__``. Both are here because every command needs them.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import procs
from .jsonio import from_trusted, to_json
from .model import Census, ErrorInfo, ErrorKind
from .records import Record, format_record
from .targets import Options

Sink = Callable[[Record], None]


@dataclass
class Job:
    handler: str = "graphstitch.worker:census_job"   # module:function run in the child
    spec: str | None = None                          # TARGET, for census-like jobs
    options: Options = field(default_factory=Options)
    project_root: str | None = None                  # names files in site identities
    script: str | None = None                        # script jobs
    argv: list[str] = field(default_factory=list)
    setup: str | None = None     # module:function(calls, options) -> config, before compiling (fix hatches)
    params: dict[str, Any] = field(default_factory=dict)   # handler-specific
    per_rank: bool = False       # run by torchrun: files get the RANK suffix
    interactive: bool = False    # answers request lines (stdin -> stdout)
    capture: bool = True         # the child's stdout/stderr go to output.log (not a script's or a rank's)


@dataclass
class Files:
    """The files of one job (one rank of it under torchrun)."""
    dir: str
    rank: int | None = None

    def _name(self, stem: str, ext: str) -> str:
        return os.path.join(self.dir, f"{stem}{'' if self.rank is None else f'.rank_{self.rank}'}{ext}")

    @property
    def job(self) -> str:
        return os.path.join(self.dir, "job.json")

    @property
    def ready(self) -> str:
        return self._name("ready", "")

    @property
    def records(self) -> str:
        return self._name("records", ".log")

    @property
    def result(self) -> str:
        return self._name("result", ".json")

    @property
    def output(self) -> str:
        return self._name("output", ".log")

    @property
    def progress(self) -> str:
        return self._name("progress", "")


# The target's own output kept with a census that failed (a tail: a chatty target is not a log).
OUTPUT_TAIL = 4000


def read_progress(files: Files) -> str | None:
    """The child's current phase, or None (not yet written, or caught mid-rewrite)."""
    try:
        with open(files.progress, "rb") as f:
            text = f.read(procs.PROGRESS_WIDTH).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def read_output(files: Files, limit: int = OUTPUT_TAIL) -> str:
    """The last LIMIT characters the child printed (stdout and stderr, in order)."""
    try:
        with open(files.output, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit * 4))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


@dataclass
class Outcome:
    census: Census
    exit_code: int
    data: Any = None             # what the handler returned (result.json "data")
    error: ErrorInfo | None = None   # how the process ended, when badly (also on census.error)
    finished: bool = False       # the handler returned (result.json was written)
    output: str = ""             # the tail of what the child printed (captured jobs)


# ----------------------------------------------------------------------------- parent side

def write_job(job: Job, dirpath: str) -> Files:
    files = Files(dirpath)
    with open(files.job, "w", encoding="utf-8") as f:
        json.dump(to_json(job), f)
    return files


def read_outcome(files: Files, exit_code: int, died: ErrorInfo | None, *, target: str | None,
                 project_root: str | None, own_exit: bool = True) -> Outcome:
    """What a finished (or killed) child left: the census of its records, its result.
    OWN_EXIT: EXIT_CODE is this child's own (not a launcher's, as for ranks under torchrun,
    whose unfinished ranks the launcher's summary names)."""
    from .traces import census_from_files
    rec = Path(files.records)
    census = census_from_files([rec] if rec.exists() else [], target=target, project_root=project_root)
    data, finished = None, False
    try:
        with open(files.result, encoding="utf-8") as f:
            res = json.load(f)
        data, finished = res.get("data"), True
    except (OSError, ValueError):
        pass
    if died is None and not finished and own_exit:
        # The process ended by itself before its handler returned: os._exit() or an exit
        # from a thread. Whatever its code, the run did not complete.
        died = ErrorInfo(ErrorKind.EXIT, f"the process exited with code {exit_code} before graphstitch's worker "
                         "finished (os._exit() in the target?)", code=exit_code)
    if died is not None:
        if census.completed is not True:
            census.completed = False
        if census.error is None:
            census.error = died
    output = read_output(files)
    if census.error is not None and output.strip():
        census.output = output   # it matters: kept with the failure (JSON, terminal)
    return Outcome(census, exit_code, data, died, finished, output)


# What autograd says when a target needs it under the census's default no_grad: backward()
# (a training step), a gradient hook registered on an activation (Grad-CAM and other saliency
# code registers it before it calls backward), torch.autograd.grad.
_NEEDS_AUTOGRAD = ("does not require grad and does not have a grad_fn",
                   "cannot register a hook on a tensor that doesn't require gradient",
                   "One of the differentiated Tensors does not require grad")


def needs_autograd(census: Census, options: Options) -> bool:
    """Did the target fail eagerly only because its calls ran without autograd (a training
    step calls backward() under the default torch.no_grad())?"""
    e = census.error
    return not options.grad and e is not None and e.kind is ErrorKind.EAGER and \
        any(m in e.message for m in _NEEDS_AUTOGRAD)


def run(job: Job, *, timeout: float | None = None, pythonpath: Sequence[str] = (),
        stdout: int | IO[Any] | None = None, stderr: int | IO[Any] | None = None, warm: procs.Child | None = None,
        inductor_cache: str | None = None, own_cache: bool = False, own_session: bool = True,
        ok_codes: tuple[int, ...] | None = (0, 2), what: str = "target", reap: bool = True,
        progress: Callable[[str], None] | None = None) -> Outcome:
    """Run JOB in a fresh child (or in WARM, a child from :func:`prestart`) and read what it
    left. Never raises for the child's failures: they are ``Outcome.error``. PROGRESS gets
    the child's phase whenever it changes. A target that calls backward() (or registers a
    gradient hook) fails without autograd: it runs again, in a fresh child, with autograd on (as ``--grad``), and its
    census says so (``config.grad_auto``)."""
    once = functools.partial(_run_once, timeout=timeout, pythonpath=pythonpath, stdout=stdout, stderr=stderr,
                             inductor_cache=inductor_cache, own_cache=own_cache, own_session=own_session,
                             ok_codes=ok_codes, what=what, reap=reap, progress=progress)
    out = once(job, warm=warm)
    if job.handler == Job.handler and needs_autograd(out.census, job.options):   # census jobs (not scripts, sweeps)
        if progress is not None:
            progress("the target needs autograd (backward(), a gradient hook): again with autograd on")
        out = once(dataclasses.replace(job, options=dataclasses.replace(job.options, grad=True)))
        out.census.config["grad_auto"] = True
    return out


def _run_once(job: Job, *, timeout: float | None, pythonpath: Sequence[str], stdout: int | IO[Any] | None,
              stderr: int | IO[Any] | None, warm: procs.Child | None = None, inductor_cache: str | None,
              own_cache: bool, own_session: bool, ok_codes: tuple[int, ...] | None, what: str, reap: bool,
              progress: Callable[[str], None] | None) -> Outcome:
    if stdout is not None or stderr is not None:
        job.capture = False   # the caller said where the child's output goes
    with procs.temp_dir("graphstitch-job-") as d:
        files = write_job(job, d)
        env = procs.child_env(pythonpath=pythonpath, inductor_cache=inductor_cache or os.path.join(d, "inductor"),
                              own_cache=own_cache)
        if warm is not None:
            child = warm
            assert child.popen.stdin is not None
            child.popen.stdin.write(json.dumps({"dir": d, "env": {k: env[k] for k in _JOB_ENV if k in env}}) + "\n")
            child.popen.stdin.close()
        else:
            child = procs.start(procs.python_cmd("graphstitch.worker", d), env=env, stdout=stdout, stderr=stderr,
                                own_session=own_session)
        tick = None
        if progress is not None:
            last = [""]

            def tick() -> None:
                now = read_progress(files) or ("starting (importing torch)" if not os.path.exists(files.ready)
                                               else last[0])
                if now != last[0]:
                    last[0] = now
                    progress(now)
        rc, died = child.wait(timeout, ready=lambda: os.path.exists(files.ready), ok_codes=ok_codes,
                              what=what, reap=reap, tick=tick)
        return read_outcome(files, rc, died, target=job.spec or job.script, project_root=job.project_root)


def run_target(spec: str, options: Options | None = None, *, timeout: float | None = None,
               project_root: str | None = None, pythonpath: Sequence[str] = ()) -> Outcome:
    """A census of TARGET in a fresh worker: a segfault, hang or exception in user code
    cannot take the caller down, and what was captured before it still makes a census."""
    from .targets import target_root
    job = Job(spec=spec, options=options or Options(), project_root=project_root or target_root(spec))
    return run(job, timeout=timeout, pythonpath=pythonpath)


# Environment a warm worker takes from its job (it was started before the job existed).
_JOB_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "PYTHONPATH")


def prestart() -> procs.Child:
    """A worker that imports torch now and waits for one job, so a batch of runs (`fix`
    trials) does not pay the import after the batch starts."""
    return procs.start(procs.python_cmd("graphstitch.worker", "--wait"), env=procs.child_env(),
                       stdin=subprocess.PIPE, text=True)


class Session:
    """An interactive job: a worker that answers request lines (timed passes) until closed."""

    def __init__(self, job: Job, *, timeout: float | None = None, pythonpath: Sequence[str] = ()):
        job.interactive = True
        self._dir = procs.own_temp(tempfile.mkdtemp(prefix="graphstitch-job-"))
        self.files = write_job(job, self._dir)
        self.job = job
        self.child = procs.start(procs.python_cmd("graphstitch.worker", self._dir),
                                 env=procs.child_env(pythonpath=pythonpath), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        self.timeout = timeout

    def ask(self, request: str) -> str:
        """Send one request line, return the answer line. Raises RuntimeError (one line)
        when the worker failed or died instead of answering."""
        p = self.child.popen
        assert p.stdin is not None and p.stdout is not None
        try:
            p.stdin.write(request + "\n")
            p.stdin.flush()
        except BrokenPipeError:
            pass
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(self._why_dead())
        return line.rstrip("\n")

    def _why_dead(self) -> str:
        rc = self.child.popen.wait()
        out = read_outcome(self.files, rc, None, target=self.job.spec, project_root=self.job.project_root)
        if out.census.error is not None:
            return f"{out.census.error.kind.value}: {out.census.error.headline}"
        return f"the measuring process exited (code {rc})"

    def close(self) -> None:
        self.child.kill_tree()
        procs.release_temp(self._dir)


# ----------------------------------------------------------------------------- child side

@dataclass
class Context:
    """What a handler gets besides its job."""
    files: Files
    sink: Sink
    replies: IO[str] | None = None

    def mark_ready(self) -> None:
        with open(self.files.ready, "w", encoding="utf-8"):
            pass

    def requests(self) -> Iterator[str]:
        for line in sys.stdin:
            yield line.strip()

    def reply(self, text: str) -> None:
        assert self.replies is not None
        self.replies.write(text + "\n")
        self.replies.flush()


def stream_sink(out: IO[str]) -> Sink:
    """Write each record at once, so whatever was captured before a crash is on disk."""
    def sink(rec: Record) -> None:
        out.write(format_record(rec.meta, rec.payload))
        out.flush()
    return sink


def note(sink: Sink, **data: Any) -> None:
    """A graphstitch run record outside a capture (a bad target, say)."""
    sink(Record({"graphstitch_run": to_json(data)}))


def _handler(name: str) -> Callable[[Job, Context], tuple[int, Any]]:
    mod, _, fn = name.partition(":")
    handler: Callable[[Job, Context], tuple[int, Any]] = getattr(importlib.import_module(mod), fn)
    return handler


def main(argv: list[str]) -> int:
    env_from_job: dict[str, str] = {}
    if argv[:1] == ["--wait"]:
        from . import live  # noqa: F401 - importing torch now is the point of waiting ahead
        line = sys.stdin.readline()
        if not line.strip():
            return 0  # not needed after all
        msg = json.loads(line)
        dirpath, env_from_job = msg["dir"], msg.get("env", {})
        os.environ.update(env_from_job)
        for p in reversed(env_from_job.get("PYTHONPATH", "").split(os.pathsep)):
            if p and p not in sys.path:
                sys.path.insert(0, p)
    else:
        dirpath = argv[0]
    with open(os.path.join(dirpath, "job.json"), encoding="utf-8") as f:
        job = from_trusted(Job, json.load(f))
    files = Files(dirpath, int(os.environ.get("RANK", "0")) if job.per_rank else None)
    replies = None
    if job.interactive:
        # Answers go to the real stdout; the target's own prints must not corrupt them.
        replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
        sys.stdout = sys.stderr
    if job.capture and not job.per_rank:
        _capture_output(files.output)
    procs.progress_fd = os.open(files.progress, os.O_WRONLY | os.O_CREAT, 0o644)
    handler = _handler(job.handler)
    from .dynamo import quiet_dynamo_warnings
    quiet_dynamo_warnings()
    with open(files.records, "w", encoding="utf-8", buffering=1) as out:
        ctx = Context(files, stream_sink(out), replies)
        if not job.per_rank:
            ctx.mark_ready()
        code, data = handler(job, ctx)
    tmp = files.result + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"exit_code": code, "data": to_json(data)}, f)
    os.replace(tmp, files.result)
    return code


def _capture_output(path: str) -> None:
    """Send this process's stdout and stderr (file descriptors: C++ warnings too) to PATH."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


# ----------------------------------------------------------------------------- handlers

def census_job(job: Job, ctx: Context) -> tuple[int, Any]:
    """Run a TARGET's calls under capture. Exit 2: a bad target (error kind target)."""
    from .targets import TargetError
    procs.progress("loading the target (its factory)")
    try:
        calls, ref = job_calls(job)
    except TargetError as e:
        note(ctx.sink, target=job.spec, error=ErrorInfo(ErrorKind.TARGET, str(e)))
        return 2, None
    from .live import load_calls_or_raise
    rebuild = None if ref is not None or job.spec is None else functools.partial(load_calls_or_raise, job.spec)
    return census_of_calls(job, ctx, calls, job.spec, reference=ref, rebuild=rebuild)


def job_calls(job: Job) -> tuple[list[Any] | ErrorInfo, Callable[[], list[Any]] | None]:
    """The TARGET's calls (an ErrorInfo when its factory exited), and with
    ``options.reference`` (a `fix` workspace: the project with ``options.overlay`` patched)
    what makes the original's calls. Raises TargetError for a bad target."""
    from .live import load_calls
    from .targets import TargetError, forget_modules, load_factory, overlay_leaks, use_overlay
    assert job.spec is not None
    if not job.options.reference:
        return load_calls(job.spec), None
    # The original loads first, then its modules are forgotten (it keeps them through its
    # globals) and the overlay makes every import of a patched file load the patched copy.
    before = set(sys.modules)
    ref_factory = load_factory(job.options.reference)
    loaded = {name: sys.modules[name] for name in set(sys.modules) - before}
    forget_modules(set(loaded), job.options.overlay)
    originals = {name: m for name, m in loaded.items() if name not in sys.modules}
    use_overlay(job.options.overlay)
    patched = load_factory(job.spec)
    ref = functools.partial(_original_calls, ref_factory, job.options.reference, originals)
    calls = _seeded_calls(patched, job.spec)
    leaks = overlay_leaks()
    if leaks:
        raise TargetError("the patched copy is not what ran: " + ", ".join(leaks[:5])
                          + " imported from the original files (loaded outside Python's import system?)")
    return calls, ref


def census_of_calls(job: Job, ctx: Context, calls: list[Any] | ErrorInfo, target: str | None, *,
                    reference: Callable[[], list[Any]] | None = None, failed_code: int = 0,
                    rebuild: Callable[[], list[Any]] | None = None) -> tuple[int, Any]:
    """The census part of a census job, for handlers that make the calls another way (a
    `sweep` zoo model is built from its registry, not loaded from a TARGET). CALLS is an
    ErrorInfo when the factory exited before making any; REFERENCE makes the original's
    calls when a patched copy is checked against it (`fix`); REBUILD makes the calls again
    (an eager replay for calls that change their callable's state). Exits FAILED_CODE when the
    census has an error (a rank must tell torchrun; a lone worker's parent reads the census)."""
    from .live import Capture, run_calls
    with Capture(ctx.sink, target=target, project_root=job.project_root) as cap:
        if isinstance(calls, ErrorInfo):  # the factory exited
            cap.complete(False)
            cap.fail(calls)
        else:
            try:
                cap.note(config=run_setup(job, calls))
            except Exception as e:  # noqa: BLE001 - a hatch that cannot apply is a result
                cap.fail(ErrorInfo(ErrorKind.PATCH, str(e)[:2000], type(e).__name__))
            else:
                run_calls(cap, calls, job.options, reference=reference, rebuild=rebuild)
    failed = cap.census is None or cap.census.error is not None
    return (failed_code if failed else 0), None


def _original_calls(factory: Callable[[], Any], spec: str, originals: dict[str, Any]) -> list[Any]:
    """The original's calls, made and run with its own modules in ``sys.modules``."""
    from .targets import modules_in_place

    def in_place(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            with modules_in_place(originals):
                return fn(*args, **kwargs)
        return call

    with modules_in_place(originals):
        calls = _seeded_calls(factory, spec)
    return [(in_place(fn), args, kwargs) for fn, args, kwargs in calls]


def _seeded_calls(factory: Callable[[], Any], spec: str) -> list[Any]:
    """A rewrite trial calls the original's and the patched factory: an unseeded factory
    must make the same random inputs for both. It runs as the user's script runs it, with
    autograd on (the reference is made inside the census's ``no_grad``)."""
    import random

    import torch

    from .targets import make_calls
    random.seed(0)
    torch.manual_seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    with torch.enable_grad():   # called again inside the census's no_grad: a factory may run backward()
        return make_calls(factory, spec)


def run_setup(job: Job, calls: list[Any]) -> dict[str, Any]:
    """The job's setup hook on the calls, before anything is compiled (a `fix` trial's
    escape hatch); returns what it notes in the census config."""
    if not job.setup:
        return {}
    mod, _, fn = job.setup.partition(":")
    out: dict[str, Any] = getattr(importlib.import_module(mod), fn)(calls, job.options)
    return out


def script_job(job: Job, ctx: Context) -> tuple[int, Any]:
    """Run a user script as __main__ under capture; its exit code is the job's."""
    from .live import Capture, run_script
    assert job.script is not None
    with Capture(ctx.sink, reset=False, target=job.script, project_root=job.project_root) as cap:
        code = run_script(cap, job.script, job.argv)
    return code, None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
