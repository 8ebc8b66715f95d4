"""`census --cost`, child side: time each compiled graph and each eager gap of warm calls.

The census runs as usual (same capture, same counting backend), except that every compiled
graph the backend hands back is wrapped by a :class:`Clock` that notes when it starts and
ends. Once the calls ran (compiled: warm now), passes over the calls are timed alternately
with eager passes (``timing.alternate``: drift hits both alike); during each compiled pass
the clock is on, so each call splits into graph, gap, graph, ... The raw timeline goes to
the record stream (``cost_samples``) and ``costs.py`` attributes each gap to its break site
when the census is built. On a GPU every mark is taken after a synchronize.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..targets import Call, Options
from .timing import alternate, device_of

# Enough rounds for a stable median, short enough that `census --cost` stays within ~1.5x
# of a plain census on small targets (benchmarks/cost_overhead.py).
REPEATS, WARMUP, MAX_SECONDS = 15, 2, 3.0


class Clock:
    """Wraps compiled graphs; while ``on``, records (compile id, start, end) per graph run."""

    def __init__(self) -> None:
        self.on = False
        self.events: list[tuple[str, float, float]] = []
        self.sync: Callable[[], None] | None = None

    def wrap(self, cid: str, compiled: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            if not self.on:
                return compiled(*args)
            if self.sync:
                self.sync()
            t0 = time.perf_counter()
            out = compiled(*args)
            if self.sync:
                self.sync()
            self.events.append((cid, t0, time.perf_counter()))
            return out
        return timed

    def now(self) -> float:
        if self.sync:
            self.sync()
        return time.perf_counter()


def segments(start: float, end: float, events: list[tuple[str, float, float]]) -> list[list[Any]]:
    """One call: [["gap", None, s], ["graph", cid, s], ["gap", cid, s], ...]; a gap names the
    graph it follows (None: the call's start)."""
    out: list[list[Any]] = []
    t, prev = start, None
    for cid, t0, t1 in sorted(events, key=lambda e: e[1]):
        out.append(["gap", prev, round(max(t0 - t, 0.0), 9)])
        out.append(["graph", cid, round(t1 - t0, 9)])
        t, prev = t1, cid
    out.append(["gap", prev, round(max(end - t, 0.0), 9)])
    return out


def measure(clock: Clock, calls: list[Call], compiled: dict[int, Callable[..., Any]], opts: Options,
            *, repeats: int = REPEATS, max_seconds: float = MAX_SECONDS) -> dict[str, Any]:
    """Warm passes, compiled (clocked) and eager, alternately: the raw cost samples."""
    import torch
    device = device_of([a for _, a, _ in calls] + [fn for fn, _, _ in calls])
    if device == "cuda":
        clock.sync = torch.cuda.synchronize
    run = [(compiled[id(fn)], fn, a, k) for fn, a, k in calls if id(fn) in compiled]
    passes: list[dict[str, Any]] = []
    eager: list[float] = []

    def compiled_pass() -> float:
        segs: list[list[Any]] = []
        total = 0.0
        for cfn, _, a, k in run:
            clock.events.clear()
            clock.on = True
            t0 = clock.now()
            cfn(*a, **k)
            t1 = clock.now()
            clock.on = False
            segs += segments(t0, t1, clock.events)
            total += t1 - t0
        passes.append({"total": round(total, 9), "segments": segs})
        return total

    def eager_pass() -> float:
        t0 = clock.now()
        for _, fn, a, k in run:
            fn(*a, **k)
        eager.append(round(clock.now() - t0, 9))
        return eager[-1]

    grad = torch.enable_grad() if opts.grad else torch.no_grad()
    with grad:
        _, stable, rounds = alternate([compiled_pass, eager_pass], repeats=repeats, warmup=WARMUP,
                                      max_seconds=max_seconds, tolerance=0.05, self_timed=True)
    return {"device": device, "rounds": rounds, "stable": stable, "passes": passes[WARMUP:],
            "eager": eager[WARMUP:]}


def cost_job(job: Any, ctx: Any) -> tuple[int, Any]:
    """Worker handler: the census of TARGET (as census_job) plus its cost samples."""
    from ..live import Capture
    from ..model import ErrorInfo, ErrorKind
    from ..targets import TargetError, load_factory, make_calls
    from ..worker import note, run_setup
    try:
        calls = make_calls(load_factory(job.spec), job.spec)
    except TargetError as e:
        note(ctx.sink, target=job.spec, error=ErrorInfo(ErrorKind.TARGET, str(e)))
        return 2, None
    with Capture(ctx.sink, target=job.spec, project_root=job.project_root) as cap:
        try:
            cap.note(config=run_setup(job, calls))
        except Exception as e:  # noqa: BLE001 - a hatch that cannot apply is a result
            cap.fail(ErrorInfo(ErrorKind.PATCH, str(e)[:2000], type(e).__name__))
            return 0, None
        cost_calls(cap, calls, job.options, **job.params)
    return 0, None


def cost_calls(cap: Any, calls: list[Call], opts: Options, **kw: Any) -> None:
    """run_calls with clocked graphs, then the cost samples on the capture (not when the
    calls failed: a failed call has no warm timeline)."""
    from ..live import run_calls
    clock = Clock()
    compiled: dict[int, Callable[..., Any]] = {}
    run_calls(cap, calls, opts, wrap=clock.wrap, compiled=compiled)
    if cap.error is not None or not compiled:
        return
    try:
        samples = measure(clock, calls, compiled, opts, **kw)
    except Exception:  # noqa: BLE001 - a target that fails when called again: no cost, the census stands
        return
    cap.note(cost_samples=samples)


def census_with_cost(spec: str, opts: Options, *, project_root: str | None = None) -> Any:
    """`census --cost --in-process`."""
    import linecache

    from ..live import Capture
    from ..targets import load_factory, make_calls
    linecache.checkcache()
    calls = make_calls(load_factory(spec), spec)
    with Capture(target=spec, project_root=project_root) as cap:
        cost_calls(cap, calls, opts)
    return cap.census
