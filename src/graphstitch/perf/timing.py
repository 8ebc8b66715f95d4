"""Timing that can be trusted: passes measured alternately in one run, median and spread.

Drift (thermal, other processes) hits every side of an alternating run alike, so ratios of
medians from one run are what graphstitch reports. On a GPU each pass is timed with CUDA
events after a synchronize; on CPU with the wall clock: the same code path.

``timed_job`` is the child side of a timed pass in its own process (`fix --measure`: a
run-time wrapper cannot coexist with the unwrapped code in one process).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class LatencyStats:
    median_s: float
    q1_s: float
    q3_s: float
    iqr_s: float
    min_s: float
    max_s: float
    samples: int


def stats(samples: Sequence[float]) -> LatencyStats:
    """Median and spread (IQR) of timing samples, in seconds."""
    s = sorted(samples)
    q1, _, q3 = statistics.quantiles(s, n=4) if len(s) > 1 else (s[0], s[0], s[0])
    return LatencyStats(statistics.median(s), q1, q3, q3 - q1, s[0], s[-1], len(s))


def device_of(objs: Sequence[Any]) -> str:
    """'cuda' when any tensor or module parameter among objs lives on a GPU, else 'cpu'."""
    import torch
    stack = list(objs)
    while stack:
        o = stack.pop()
        if isinstance(o, torch.Tensor):
            if o.is_cuda:
                return "cuda"
        elif isinstance(o, torch.nn.Module):
            if any(p.is_cuda for p in o.parameters()):
                return "cuda"
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
    return "cpu"


def timer(device: str) -> Callable[[Callable[[], Any]], float]:
    """Seconds one call of fn takes: CUDA events around it on a GPU, wall clock on CPU."""
    if device == "cuda":
        import torch

        def cuda_time(fn: Callable[[], Any]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()  # nothing queued before may leak into this sample
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1000.0
        return cuda_time

    def cpu_time(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return cpu_time


def alternate(passes: Sequence[Callable[[], Any]], *, repeats: int = 20, warmup: int = 3,
              max_seconds: float = 30.0, tolerance: float = 0.02, device: str = "cpu",
              self_timed: bool = False) -> tuple[list[LatencyStats], bool, int]:
    """Time several zero-argument passes in rotation (abc, bca, cab, ...) in one run.

    ``self_timed``: each pass returns its own duration in seconds (a pass run in another
    process, which times itself so the pipe round-trip is not counted).

    After ``warmup`` untimed rounds, rounds continue until at least ``repeats`` samples each and
    every median moved less than ``tolerance`` since the previous check (stable), or
    ``max_seconds`` / 20 x repeats ran out. Returns (stats per pass, stable, rounds).
    """
    timed = (lambda f: float(f())) if self_timed else timer(device)
    for _ in range(max(warmup, 0)):
        for f in passes:
            f()
    samples: list[list[float]] = [[] for _ in passes]
    repeats = max(repeats, 3)
    check_every = max(repeats // 4, 2)
    prev: list[float] | None = None
    stable = False
    t_end = time.perf_counter() + max_seconds
    n = 0
    while True:
        for k in range(len(passes)):  # rotate so that no pass always runs right after another
            i = (n + k) % len(passes)
            samples[i].append(timed(passes[i]))
        n += 1
        if n >= repeats and (n - repeats) % check_every == 0:
            cur = [statistics.median(x) for x in samples]
            if prev and all(abs(c - q) <= tolerance * q for c, q in zip(cur, prev)):
                stable = True
                break
            prev = cur
        if n >= 20 * repeats or (n >= 3 and time.perf_counter() > t_end):
            break
    return [stats(x) for x in samples], stable, n


@dataclass
class Comparison:
    a: LatencyStats
    b: LatencyStats
    ratio: float | None      # median a / median b: > 1 means b is faster
    stable: bool
    rounds: int
    device: str


def _norm_call(c: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], (tuple, list)) and isinstance(c[1], dict):
        return tuple(c[0]), dict(c[1])
    return (tuple(c) if isinstance(c, (tuple, list)) else (c,)), {}


def compare_alternating(fn_a: Callable[..., Any], fn_b: Callable[..., Any], calls: Sequence[Any], *,
                        repeats: int = 20, warmup: int = 3, max_seconds: float = 30.0,
                        tolerance: float = 0.02, device: str | None = None) -> Comparison:
    """Steady-state latency of fn_a and fn_b, measured alternately in one run. One sample of
    a side is one pass over ``calls`` (``(args, kwargs)`` pairs or args tuples)."""
    norm = [_norm_call(c) for c in calls]
    dev = device or device_of([a for a, _ in norm] + [fn_a, fn_b])

    def side(fn: Callable[..., Any]) -> Callable[[], None]:
        def one_pass() -> None:
            for args, kwargs in norm:
                fn(*args, **kwargs)
        return one_pass

    (sa, sb), stable, rounds = alternate([side(fn_a), side(fn_b)], repeats=repeats, warmup=warmup,
                                         max_seconds=max_seconds, tolerance=tolerance, device=dev)
    return Comparison(sa, sb, sa.median_s / sb.median_s if sb.median_s > 0 else None, stable, rounds, dev)


# ----------------------------------------------------------------------------- timed worker

def timed_job(job: Any, ctx: Any) -> tuple[int, Any]:
    """Child side of a timed pass (interactive job): compile the target (with the job's
    patches), run one pass to compile it, then answer each request line with the seconds
    one pass over the factory's calls took."""
    import torch

    from .. import dynamo
    from ..targets import TargetError, load_factory, make_calls
    from ..worker import run_setup
    opts = job.options
    try:
        calls = make_calls(load_factory(job.spec), job.spec)
        run_setup(job, calls)
        stack = contextlib.ExitStack()
        stack.enter_context(torch.no_grad() if not opts.grad else contextlib.nullcontext())
        stack.enter_context(dynamo.config(**dynamo.resolve_config(opts.patches.config if opts.patches else {})))
        compiled: dict[int, Any] = {}
        for fn, _, _ in calls:
            compiled.setdefault(id(fn), torch.compile(fn, backend=opts.backend))
        run = [(compiled[id(fn)], a, k) for fn, a, k in calls]

        def one_pass() -> None:
            for f, a, k in run:
                f(*a, **k)
        one_pass()  # compiles
        timed = timer(device_of([a for _, a, _ in run] + [fn for fn, _, _ in calls]))
    except (TargetError, Exception) as e:  # noqa: BLE001 - reported to the parent as one line
        ctx.reply(f"error {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        return 1, None
    with stack:
        for cmd in ctx.requests():
            ctx.reply("ok" if cmd == "ready" else repr(timed(one_pass)))
    return 0, None
