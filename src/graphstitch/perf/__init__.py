"""`graphstitch perf`: what compiling buys, what a break costs, regional vs whole-model compile.

Every measurement runs in a fresh worker (``perf.measure.measure_job``) so that no
in-process cache (Dynamo's, Inductor's FX graph cache, AOTAutograd's) makes a "cold" compile
look warm: a cold compile gets an empty ``TORCHINDUCTOR_CACHE_DIR``, a warm compile is a second
process on the same folder. Steady-state latency is measured alternately (``perf.timing``).
Graph/break/recompile counts come from a census, never counted here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import procs, worker
from ..jsonio import from_trusted
from ..model import ErrorInfo, ErrorKind
from ..targets import Options, TargetError, target_root
from .measure import Block, CensusSummary, Measurement
from .timing import LatencyStats, compare_alternating

__all__ = ["PerfResult", "compare_alternating", "failed", "run_perf"]


@dataclass
class EagerSide:
    first_call_s: float | None
    latency: LatencyStats | None     # the eager side of the one latency run
    peak_memory_mb: float | None
    error: ErrorInfo | None


@dataclass
class Variant:
    """A compiled variant (whole model, or regional: each repeated block on its own)."""
    compile_cold_s: float | None
    compile_warm_s: float | None
    latency: LatencyStats | None
    eager_latency: LatencyStats | None
    speedup_vs_eager: float | None
    latency_stable: bool | None
    peak_memory_mb: float | None
    outputs_match_eager: bool | None
    output_mismatch: str | None
    block: Block | None
    error: ErrorInfo | None
    census: CensusSummary | None


@dataclass
class Ratios:
    """whole / regional for the regional_vs_whole ratios: > 1 means regional is better."""
    whole_speedup_vs_eager: float | None
    regional_speedup_vs_eager: float | None
    regional_vs_whole_latency: float | None
    regional_vs_whole_compile_cold: float | None
    regional_vs_whole_compile_warm: float | None


@dataclass
class Winner:
    latency: str | None          # "whole" | "regional" | "tie" (medians within the IQR)
    compile_cold: str | None
    compile_warm: str | None
    summary: str


@dataclass
class SideError:
    side: str
    error: ErrorInfo


@dataclass
class PerfResult:
    target: str
    backend: str
    device: str
    torch_version: str | None
    repeats: int
    warmup: int
    memory_kind: str             # cuda_max_memory_allocated | cpu_peak_rss
    latency_run: str
    census: CensusSummary
    census_backend: str
    eager: EagerSide
    whole: Variant | None
    regional: Variant | None
    ratios: Ratios
    winner: Winner | None
    nested_compile_region_available: bool | None

    __computed__ = ("schema",)

    @property
    def schema(self) -> str:
        return "graphstitch.perf/2"


def failed(result: PerfResult) -> SideError | None:
    """The first error of a perf result (eager, whole, regional), or None."""
    for side, err in (("eager", result.eager.error), ("whole", result.whole and result.whole.error),
                      ("regional", result.regional and result.regional.error)):
        if err:
            return SideError(side, err)
    return None


def _variant(cold: Measurement, warm: Measurement | None, census: CensusSummary | None) -> Variant:
    err = cold.error or (warm.error if warm else None)
    return Variant(cold.compile_s, warm.compile_s if warm else None, cold.latency, cold.eager_latency,
                   cold.speedup_vs_eager, cold.latency_stable, cold.peak_memory_mb, cold.outputs_match_eager,
                   cold.output_mismatch, cold.block, err, census)


def _pick(w: float | None, r: float | None, noise: float = 0.0) -> str | None:
    if w is None or r is None:
        return None
    if abs(w - r) <= noise:
        return "tie"
    return "regional" if r < w else "whole"


def _winner(whole: Variant, regional: Variant) -> Winner:
    wl, rl = whole.latency, regional.latency
    lat = _pick(wl.median_s if wl else None, rl.median_s if rl else None,
                max(wl.iqr_s if wl else 0.0, rl.iqr_s if rl else 0.0))
    cold = _pick(whole.compile_cold_s, regional.compile_cold_s)
    warm = _pick(whole.compile_warm_s, regional.compile_warm_s)
    if lat in ("regional", "tie") and cold == "regional":
        summary = "regional: compiles faster" + (" and runs as fast (within noise)" if lat == "tie" else " and runs faster")
    elif lat == "whole" and cold == "whole":
        summary = "whole: compiles and runs faster"
    elif lat is None or cold is None:
        summary = "undecided: a side failed"
    else:
        summary = (f"trade-off: {cold} compiles faster, {lat} runs faster" if lat != "tie"
                   else f"{cold}: compiles faster, same latency")
    return Winner(lat, cold, warm, summary)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _measure(spec: str, params: dict[str, Any], cache_dir: str, timeout: float | None) -> Measurement:
    # The target's own prints (once per timed pass) stay in the worker's output.log.
    out = worker.run(worker.Job(handler="graphstitch.perf.measure:measure_job", spec=spec, params=params),
                     timeout=timeout, inductor_cache=cache_dir, own_cache=True)
    m = from_trusted(Measurement, out.data) if out.data else Measurement(params["mode"])
    if out.error is not None and m.error is None:
        m.error = out.error
    return m


def run_perf(spec: str, *, backend: str = "inductor", regional: bool = False, block: str | None = None,
             repeats: int = 20, warmup: int = 3, max_seconds: float = 30.0, timeout: float | None = None,
             progress: Callable[[str], None] | None = None) -> PerfResult:
    """Measure a target: census, eager, whole compile (cold + warm), regional (cold + warm).

    Raises TargetError when the target cannot be loaded. ``progress(step)`` is called before
    each step.
    """
    step = progress or (lambda _s: None)
    base = {"backend": backend, "block": block, "repeats": repeats, "warmup": warmup, "max_seconds": max_seconds}
    with procs.temp_dir("graphstitch-perf-cache-") as tmp:
        # Eager first: it also checks the target and the blocks, so a bad one fails in seconds.
        step("eager")
        eager = _measure(spec, dict(base, mode="eager", regional=regional), os.path.join(tmp, "eager"), timeout)
        if eager.error and eager.error.kind is ErrorKind.TARGET:
            raise TargetError(eager.error.message)
        step("census")
        c = worker.run(worker.Job(spec=spec, options=Options(backend="counting"), project_root=target_root(spec)),
                       timeout=timeout).census
        if c.error and c.error.kind is ErrorKind.TARGET:
            raise TargetError(c.error.message)
        census = CensusSummary.of(c)
        whole: Variant | None = None
        reg: Variant | None = None
        if not eager.error:  # a target that fails eagerly has nothing to compare with
            step("whole: cold compile" + ("" if regional else " + latency"))
            whole_cold = _measure(spec, dict(base, mode="whole", latency=not regional), os.path.join(tmp, "whole"),
                                  timeout)
            step("whole: warm compile")
            whole_warm = _measure(spec, dict(base, mode="whole"), os.path.join(tmp, "whole"), timeout)
            whole = _variant(whole_cold, whole_warm, census)
            if regional:
                step("regional: cold compile + latency (eager, whole, regional alternating)")
                reg_cold = _measure(spec, dict(base, mode="regional", latency=True, census=True),
                                    os.path.join(tmp, "regional"), timeout)
                if reg_cold.error and reg_cold.error.kind is ErrorKind.TARGET:
                    raise TargetError(reg_cold.error.message)
                step("regional: warm compile")
                reg_warm = _measure(spec, dict(base, mode="regional"), os.path.join(tmp, "regional"), timeout)
                reg = _variant(reg_cold, reg_warm, reg_cold.census)
                # The latency run of a --regional perf: eager, whole and regional in one process.
                whole.latency, whole.eager_latency = reg_cold.whole_latency, reg_cold.eager_latency
                whole.speedup_vs_eager, whole.latency_stable = reg_cold.whole_speedup_vs_eager, reg_cold.latency_stable
                if reg_cold.whole_outputs_match_eager is False and not whole.output_mismatch:
                    whole.outputs_match_eager, whole.output_mismatch = False, reg_cold.whole_output_mismatch
    wl, rl = (whole.latency if whole else None), (reg.latency if reg else None)
    return PerfResult(
        target=spec, backend=backend, device=eager.device, torch_version=c.torch_version, repeats=repeats,
        warmup=warmup, memory_kind="cuda_max_memory_allocated" if eager.device == "cuda" else "cpu_peak_rss",
        latency_run=("eager, whole, regional alternating in one process" if regional
                     else "eager, whole alternating in one process"),
        census=census, census_backend="counting",
        eager=EagerSide(eager.first_call_s, whole.eager_latency if whole else None, eager.peak_memory_mb, eager.error),
        whole=whole, regional=reg,
        ratios=Ratios(whole.speedup_vs_eager if whole else None, reg.speedup_vs_eager if reg else None,
                      _ratio(wl.median_s if wl else None, rl.median_s if rl else None),
                      _ratio(whole.compile_cold_s if whole else None, reg.compile_cold_s if reg else None),
                      _ratio(whole.compile_warm_s if whole else None, reg.compile_warm_s if reg else None)),
        winner=_winner(whole, reg) if whole and reg else None,
        nested_compile_region_available=eager.nested_compile_region_available)
