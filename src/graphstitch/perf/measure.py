"""The child side of `graphstitch perf`: one measurement in one fresh process.

A cold compile needs an empty ``TORCHINDUCTOR_CACHE_DIR`` and no in-process cache, so every
measurement is its own worker job (handler ``measure_job``). Compile time and peak memory
cover the first compiled pass (compile + one run). With ``latency``, whole mode alternates
eager and whole; regional mode alternates eager, whole and regional (three copies of the
model in one process), so every latency ratio of a ``--regional`` run comes from one run.
"""

from __future__ import annotations

import copy
import functools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..model import Census, ErrorInfo, ErrorKind
from ..targets import TargetError, load_factory, make_calls
from .timing import LatencyStats, alternate, device_of


@dataclass
class SiteSummary:
    gb_id: str
    gb_type: str
    file: str
    line: int
    events: int
    frame_skipped: bool


@dataclass
class CensusSummary:
    """The census numbers a perf result carries (as analysis made them)."""
    graph_count: int
    break_site_count: int
    break_events: int
    recompile_count: int
    outputs_match_eager: bool | None
    error: ErrorInfo | None
    sites: list[SiteSummary] = field(default_factory=list)

    @classmethod
    def of(cls, c: Census) -> CensusSummary:
        return cls(c.graph_count, c.break_site_count, c.break_events, c.recompile_count, c.outputs_match_eager,
                   c.error, [SiteSummary(s.gb_id, s.gb_type, s.file, s.line, s.events, s.frame_skipped)
                             for s in c.sites])


@dataclass
class Block:
    path: str            # attribute path of the container (e.g. transformer.h)
    class_name: str
    count: int


@dataclass
class Measurement:
    """What one perf worker measured (mode eager, whole or regional)."""
    mode: str
    device: str = "cpu"
    error: ErrorInfo | None = None
    first_call_s: float | None = None         # eager mode
    compile_s: float | None = None            # first compiled pass: compile + one run
    peak_memory_mb: float | None = None
    outputs_match_eager: bool | None = None
    output_mismatch: str | None = None
    latency: LatencyStats | None = None
    eager_latency: LatencyStats | None = None
    speedup_vs_eager: float | None = None
    latency_stable: bool | None = None
    whole_latency: LatencyStats | None = None          # regional latency runs carry whole too
    whole_speedup_vs_eager: float | None = None
    whole_outputs_match_eager: bool | None = None
    whole_output_mismatch: str | None = None
    block: Block | None = None
    census: CensusSummary | None = None
    nested_compile_region_available: bool | None = None


# ----------------------------------------------------------------------------- regional blocks

def find_blocks(root: Any, name: str | None = None) -> tuple[str, list[Any]]:
    """The repeated blocks of a model: (path, instances).

    With ``name`` (an attribute path such as ``transformer.h``): that module's children of its
    most common class if it is an ``nn.ModuleList``/``nn.Sequential``, else the module itself.
    Without: among all ``nn.ModuleList``/``nn.Sequential`` children of one class (2 or more),
    the group holding the most parameters (then the most instances): the outermost repeated
    blocks, not the Linear layers inside them.
    """
    from torch import nn
    if not isinstance(root, nn.Module):
        raise TargetError("--regional needs the target's fn to be an nn.Module "
                          f"(got {type(root).__name__})")

    def groups(container: nn.Module) -> list[list[nn.Module]]:
        by_cls: dict[type, list[nn.Module]] = defaultdict(list)
        for child in container.children():
            by_cls[type(child)].append(child)
        return list(by_cls.values())

    def weight(ms: list[nn.Module]) -> tuple[int, int]:
        return sum(p.numel() for m in ms for p in m.parameters()), len(ms)

    if name:
        try:
            mod = root.get_submodule(name)
        except AttributeError:
            raise TargetError(f"--block {name}: {type(root).__name__} has no submodule {name!r}") from None
        if isinstance(mod, (nn.ModuleList, nn.Sequential)) and len(mod):
            return name, max(groups(mod), key=len)
        return name, [mod]
    best: tuple[tuple[int, int], str, list[nn.Module]] | None = None
    for path, m in root.named_modules():
        if isinstance(m, (nn.ModuleList, nn.Sequential)):
            for g in groups(m):
                if len(g) >= 2 and (best is None or weight(g) > best[0]):
                    best = (weight(g), path, g)
    if best is None:
        raise TargetError(f"no repeated blocks found in {type(root).__name__} (no nn.ModuleList/"
                          "nn.Sequential with 2+ children of one class); name one with --block")
    return best[1], best[2]


def _compile_regional(fn: Any, block: str | None, backend: Any) -> Block:
    """Compile each repeated block of fn in place (``Module.compile``); fn itself runs eagerly.

    All instances share one forward code object, so Dynamo compiles it once and later blocks
    reuse that code (the census checks that recompiles stay 0).
    """
    path, blocks = find_blocks(fn, block)
    for b in blocks:
        b.compile(backend=backend)
    return Block(path, type(blocks[0]).__name__, len(blocks))


def _peak_memory_mb(device: str) -> float:
    if device == "cuda":
        import torch
        return float(torch.cuda.max_memory_allocated()) / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _regional_census(spec: str, block: str | None, backend_name: str) -> CensusSummary:
    """Census of the regional compile: fresh calls, graphstitch's counting backend."""
    import torch

    from ..live import Capture, counting_backend
    calls = make_calls(load_factory(spec), spec)
    with Capture(target=spec) as cap:
        cap.note(config={"backend": "counting", "regional": True, "block": block, "perf_backend": backend_name},
                 calls=len(calls))
        backend = counting_backend(cap.sink)
        done: set[int] = set()
        with torch.no_grad():
            for fn, args, kwargs in calls:
                if id(fn) not in done:
                    done.add(id(fn))
                    _compile_regional(fn, block, backend)
                fn(*args, **kwargs)
    assert cap.census is not None
    return CensusSummary.of(cap.census)


# ----------------------------------------------------------------------------- the job

def measure_job(job: Any, ctx: Any) -> tuple[int, Any]:
    """Worker handler; job.params: mode (eager|whole|regional), backend, block, latency,
    repeats, warmup, max_seconds, census, regional (eager mode: check the blocks exist)."""
    p = job.params
    try:
        return 0, measure(job.spec, p)
    except TargetError as e:
        return 2, Measurement(p["mode"], error=ErrorInfo(ErrorKind.TARGET, str(e)))


def measure(spec: str, p: dict[str, Any]) -> Measurement:
    import torch

    from ..live import clone_output, error_info, outputs_equal
    # torch.compiler.nested_compile_region (mark a block inside a whole-model compile) is noted,
    # not used: a break inside it is a hard error, and per-module compile needs no code change.
    calls = make_calls(load_factory(spec), spec)
    device = device_of([c[0] for c in calls] + [c[1] for c in calls])
    out = Measurement(p["mode"], device,
                      nested_compile_region_available=hasattr(torch.compiler, "nested_compile_region"))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def run_all(fns: dict[int, Any]) -> list[Any]:
        res = []
        for fn, args, kwargs in calls:
            torch.manual_seed(0)
            res.append(fns[id(fn)](*args, **kwargs))
        sync()
        return res

    def first_pass(fns: dict[int, Any], kind: ErrorKind) -> tuple[list[Any] | None, float]:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            res = run_all(fns)
        except Exception as e:  # noqa: BLE001
            out.error = error_info(kind, e)
            return None, 0.0
        return res, time.perf_counter() - t0

    def mismatch(got: list[Any]) -> str | None:
        for i, (g, w) in enumerate(zip(got, expected)):
            ok, why = outputs_equal(g, w)
            if not ok:
                return f"call {i}: {why}"
        return None

    with torch.no_grad():
        eager = {id(fn): fn for fn, _, _ in calls}
        got, out.first_call_s = first_pass(eager, ErrorKind.EAGER)
        if got is None:
            return out
        expected = [clone_output(x) for x in got]
        if p["mode"] == "eager":
            out.peak_memory_mb = _peak_memory_mb(device)
            if p.get("regional"):  # fail fast, before any compile, when there are no blocks
                for fn, _, _ in calls:
                    find_blocks(fn, p.get("block"))
            return out
        backend = p["backend"]
        compiled: dict[int, Any] = {}
        whole: dict[int, Any] = {}
        for fn, _, _ in calls:
            if id(fn) in compiled:
                continue
            if p["mode"] == "regional":
                # Block.compile() mutates the model: copies first, for the eager and whole sides.
                eager[id(fn)] = copy.deepcopy(fn)
                if p.get("latency"):
                    whole[id(fn)] = torch.compile(copy.deepcopy(fn), backend=backend)
                out.block = _compile_regional(fn, p.get("block"), backend)
                compiled[id(fn)] = fn
            else:
                compiled[id(fn)] = torch.compile(fn, backend=backend)
        got, out.compile_s = first_pass(compiled, ErrorKind.COMPILED)
        if got is None:
            return out
        out.peak_memory_mb = _peak_memory_mb(device)
        out.output_mismatch = mismatch(got)
        out.outputs_match_eager = out.output_mismatch is None
        if p.get("latency"):
            sides = [eager, compiled]
            if whole:
                got, _ = first_pass(whole, ErrorKind.COMPILED)
                if got is None:
                    return out
                out.whole_output_mismatch = mismatch(got)
                out.whole_outputs_match_eager = out.whole_output_mismatch is None
                sides.insert(1, whole)
            st, out.latency_stable, _ = alternate([functools.partial(run_all, f) for f in sides], repeats=p["repeats"],
                                                  warmup=p["warmup"], max_seconds=p["max_seconds"], device=device)
            out.eager_latency, out.latency = st[0], st[-1]
            out.speedup_vs_eager = st[0].median_s / st[-1].median_s
            if whole:
                out.whole_latency = st[1]
                out.whole_speedup_vs_eager = st[0].median_s / st[1].median_s
    if p.get("census"):
        out.census = _regional_census(spec, p.get("block"), str(backend))
    return out
