"""Performance lab: what compiling buys, what a break costs, regional vs whole-model compile.

Every measurement runs in a fresh worker process (``python -m graphstitch.perf``) so that no
in-process cache (Dynamo's, Inductor's FX graph cache, AOTAutograd's) makes a "cold" compile
look warm: a cold compile gets an empty ``TORCHINDUCTOR_CACHE_DIR``, a warm compile is a second
process on the same directory. Steady-state latency is measured by ``compare_alternating``:
eager and compiled passes alternate in one process, so drift (thermal, other processes) hits
both sides alike. Graph/break/recompile counts come from a census, never counted here.
"""

from __future__ import annotations

import copy
import html
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any, Callable, Sequence

from .target import TargetError, load_factory, make_calls, run_isolated

SCHEMA = "graphstitch.perf/1"
CENSUS_FIELDS = ("graph_count", "break_site_count", "break_events", "recompile_count", "outputs_match_eager", "error")
SITE_FIELDS = ("gb_id", "gb_type", "file", "line", "events", "frame_skipped")


def census_summary(census: Any) -> dict:
    """The census numbers a perf result carries (counts and sites as analysis.py made them)."""
    d = census.to_dict()
    out = {k: d[k] for k in CENSUS_FIELDS}
    out["sites"] = [{k: s[k] for k in SITE_FIELDS} for s in d["sites"]]
    return out


# ----------------------------------------------------------------------------- timing

def _device_of(objs: Sequence[Any]) -> str:
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


def _timer(device: str) -> Callable[[Callable[[], Any]], float]:
    """Seconds one call of fn takes: CUDA events around it on a GPU, wall clock on CPU."""
    import torch
    if device == "cuda":
        def cuda_time(fn: Callable[[], Any]) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()  # nothing queued before may leak into this sample
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        return cuda_time

    def cpu_time(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return cpu_time


def stats(samples: Sequence[float]) -> dict:
    """Median and spread (IQR) of timing samples, in seconds."""
    s = sorted(samples)
    q1, _, q3 = statistics.quantiles(s, n=4) if len(s) > 1 else (s[0], s[0], s[0])
    return {"median_s": statistics.median(s), "q1_s": q1, "q3_s": q3, "iqr_s": q3 - q1,
            "min_s": s[0], "max_s": s[-1], "samples": len(s)}


def _norm_call(c: Any) -> tuple[tuple, dict]:
    if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], (tuple, list)) and isinstance(c[1], dict):
        return tuple(c[0]), dict(c[1])
    return (tuple(c) if isinstance(c, (tuple, list)) else (c,)), {}


def alternate(passes: Sequence[Callable[[], Any]], *, repeats: int = 20, warmup: int = 3,
              max_seconds: float = 30.0, tolerance: float = 0.02, device: str = "cpu",
              self_timed: bool = False) -> tuple[list[dict], bool, int]:
    """Time several zero-argument passes in rotation (abc, bca, cab, ...) in one run.

    ``self_timed``: each pass returns its own duration in seconds (a pass run in another
    process, which times itself so the pipe round-trip is not counted).

    After ``warmup`` untimed rounds, rounds continue until at least ``repeats`` samples each and
    every median moved less than ``tolerance`` since the previous check (stable), or
    ``max_seconds`` / 20 x repeats ran out. Returns (stats per pass, stable, rounds).
    """
    timed = (lambda f: float(f())) if self_timed else _timer(device)
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


def compare_alternating(fn_a: Callable, fn_b: Callable, calls: Sequence, *, repeats: int = 20,
                        warmup: int = 3, max_seconds: float = 30.0, tolerance: float = 0.02,
                        device: str | None = None) -> dict:
    """Steady-state latency of fn_a and fn_b, measured alternately in one run.

    One sample of a side is one pass over ``calls`` (``(args, kwargs)`` pairs or args tuples);
    the sides alternate a-b, b-a, ... (see ``alternate``). Returns ``{"a": stats, "b": stats,
    "ratio": median_a / median_b, "stable", "rounds", "device"}``: ratio > 1 means b is faster
    (for before/after: the speedup of the fix).
    """
    norm = [_norm_call(c) for c in calls]
    dev = device or _device_of([a for a, _ in norm] + [fn_a, fn_b])

    def side(fn: Callable) -> Callable[[], None]:
        def one_pass() -> None:
            for args, kwargs in norm:
                fn(*args, **kwargs)
        return one_pass

    (sa, sb), stable, rounds = alternate([side(fn_a), side(fn_b)], repeats=repeats, warmup=warmup,
                                         max_seconds=max_seconds, tolerance=tolerance, device=dev)
    return {"a": sa, "b": sb, "ratio": sa["median_s"] / sb["median_s"] if sb["median_s"] > 0 else None,
            "stable": stable, "rounds": rounds, "device": dev}


# ----------------------------------------------------------------------------- regional blocks

def find_blocks(root: Any, name: str | None = None) -> tuple[str, list]:
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

    def groups(container: nn.Module) -> list[list]:
        by_cls: dict[type, list] = defaultdict(list)
        for child in container.children():
            by_cls[type(child)].append(child)
        return list(by_cls.values())

    def weight(ms: list) -> tuple[int, int]:
        return sum(p.numel() for m in ms for p in m.parameters()), len(ms)

    if name:
        try:
            mod = root.get_submodule(name)
        except AttributeError:
            raise TargetError(f"--block {name}: {type(root).__name__} has no submodule {name!r}") from None
        if isinstance(mod, (nn.ModuleList, nn.Sequential)) and len(mod):
            return name, max(groups(mod), key=len)
        return name, [mod]
    best: tuple[tuple[int, int], str, list] | None = None
    for path, m in root.named_modules():
        if isinstance(m, (nn.ModuleList, nn.Sequential)):
            for g in groups(m):
                if len(g) >= 2 and (best is None or weight(g) > best[0]):
                    best = (weight(g), path, g)
    if best is None:
        raise TargetError(f"no repeated blocks found in {type(root).__name__} (no nn.ModuleList/"
                          "nn.Sequential with 2+ children of one class); name one with --block")
    return best[1], best[2]


# ----------------------------------------------------------------------------- worker

def _peak_memory_mb(device: str) -> float:
    if device == "cuda":
        import torch
        return torch.cuda.max_memory_allocated() / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _compile_regional(fn: Any, block: str | None, backend: Any) -> dict:
    """Compile each repeated block of fn in place (``Module.compile``); fn itself runs eagerly.

    All instances share one forward code object, so Dynamo compiles it once and later blocks
    reuse that code (the census checks that recompiles stay 0).
    """
    path, blocks = find_blocks(fn, block)
    for b in blocks:
        b.compile(backend=backend)
    return {"path": path, "class": type(blocks[0]).__name__, "count": len(blocks)}


def _regional_census(spec: str, block: str | None, backend_name: str) -> dict:
    """Census of the regional compile: fresh calls, graphstitch's counting backend."""
    import torch
    from .live import Capture, counting_backend
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
    c = cap.census
    assert c is not None
    return census_summary(c)


def _measure(p: dict) -> dict:
    """One worker's job. p: spec, mode (eager|whole|regional), backend, block, latency, repeats,
    warmup, max_seconds, census, regional (eager mode: check the blocks exist).

    Compile time and peak memory cover the first compiled pass (compile + one run). With
    ``latency``, whole mode alternates eager and whole; regional mode alternates eager, whole
    and regional (three copies of the model in one process), so every latency ratio of a
    ``--regional`` run comes from one run.
    """
    import torch
    from . import dynamo
    from .live import clone_output, error_info, outputs_equal
    dynamo.quiet_dynamo_warnings()
    # torch.compiler.nested_compile_region (mark a block inside a whole-model compile) is noted,
    # not used: a break inside it is a hard error, and per-module compile needs no code change.
    out: dict[str, Any] = {"mode": p["mode"], "error": None,
                           "nested_compile_region_available": hasattr(torch.compiler, "nested_compile_region")}
    calls = make_calls(load_factory(p["spec"]), p["spec"])
    device = out["device"] = _device_of([c[0] for c in calls] + [c[1] for c in calls])
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def run_all(fns: dict) -> list:
        res = []
        for fn, args, kwargs in calls:
            torch.manual_seed(0)
            res.append(fns[id(fn)](*args, **kwargs))
        sync()
        return res

    def first_pass(fns: dict, kind: str) -> tuple[list | None, float]:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            res = run_all(fns)
        except Exception as e:  # noqa: BLE001
            out["error"] = error_info(kind, e)
            return None, 0.0
        return res, time.perf_counter() - t0

    def matches(got: list, key: str = "") -> bool:
        for i, (g, w) in enumerate(zip(got, expected)):
            ok, why = outputs_equal(g, w)
            if not ok:
                out[key + "output_mismatch"] = f"call {i}: {why}"
                return False
        return True

    with torch.no_grad():
        eager = {id(fn): fn for fn, _, _ in calls}
        got, out["first_call_s"] = first_pass(eager, "eager")
        if got is None:
            return out
        expected = [clone_output(x) for x in got]
        if p["mode"] == "eager":
            out["peak_memory_mb"] = _peak_memory_mb(device)
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
                out["block"] = _compile_regional(fn, p.get("block"), backend)
                compiled[id(fn)] = fn
            else:
                compiled[id(fn)] = torch.compile(fn, backend=backend)
        got, out["compile_s"] = first_pass(compiled, "compiled")
        if got is None:
            return out
        out["peak_memory_mb"] = _peak_memory_mb(device)
        out["outputs_match_eager"] = matches(got)
        if p.get("latency"):
            sides = [eager, compiled]
            if whole:
                got, _ = first_pass(whole, "compiled")
                if got is None:
                    return out
                out["whole_outputs_match_eager"] = matches(got, "whole_")
                sides.insert(1, whole)
            st, out["latency_stable"], _ = alternate([lambda f=f: run_all(f) for f in sides], repeats=p["repeats"],
                                                     warmup=p["warmup"], max_seconds=p["max_seconds"], device=device)
            out["eager_latency"], out["latency"] = st[0], st[-1]
            out["speedup_vs_eager"] = st[0]["median_s"] / st[-1]["median_s"]
            if whole:
                out["whole_latency"] = st[1]
                out["whole_speedup_vs_eager"] = st[0]["median_s"] / st[1]["median_s"]
    if p.get("census"):
        out["census"] = _regional_census(p["spec"], p.get("block"), str(backend))
    return out


def _worker(params_path: str, out_path: str) -> int:
    with open(params_path, encoding="utf-8") as f:
        p = json.load(f)
    try:
        out = _measure(p)
    except TargetError as e:
        out = {"mode": p["mode"], "error": {"kind": "target", "message": str(e)}}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 2 if (out.get("error") or {}).get("kind") == "target" else 0


def _run_worker(params: dict, cache_dir: str, timeout: float | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="graphstitch-perf-") as tmp:
        pin, pout = os.path.join(tmp, "params.json"), os.path.join(tmp, "out.json")
        with open(pin, "w", encoding="utf-8") as f:
            json.dump(params, f)
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"))
        # The target's own prints would repeat once per timed pass: not on our stdout.
        _, died = run_isolated([sys.executable, "-m", "graphstitch.perf", pin, pout], env, timeout,
                               stdout=subprocess.DEVNULL)
        if os.path.exists(pout):
            with open(pout, encoding="utf-8") as f:
                out = json.load(f)
        else:
            out = {"mode": params["mode"], "error": None}
        if died is not None and not out.get("error"):
            out["error"] = died
        return out


# ----------------------------------------------------------------------------- orchestration

def _variant(cold: dict, warm: dict | None, census: dict) -> dict:
    keys = ("compile_s", "latency", "eager_latency", "speedup_vs_eager", "latency_stable", "peak_memory_mb",
            "outputs_match_eager", "output_mismatch", "block", "error")
    v = {k: cold.get(k) for k in keys}
    v["compile_cold_s"] = v.pop("compile_s")
    v["compile_warm_s"] = (warm or {}).get("compile_s")
    if warm and warm.get("error") and not v["error"]:
        v["error"] = warm["error"]
    v["census"] = census
    return v


def _winner(whole: dict, regional: dict) -> dict:
    def pick(w: float | None, r: float | None, noise: float = 0.0) -> str | None:
        if w is None or r is None:
            return None
        if abs(w - r) <= noise:
            return "tie"
        return "regional" if r < w else "whole"
    wl, rl = whole.get("latency") or {}, regional.get("latency") or {}
    lat = pick(wl.get("median_s"), rl.get("median_s"), max(wl.get("iqr_s", 0), rl.get("iqr_s", 0)))
    cold = pick(whole.get("compile_cold_s"), regional.get("compile_cold_s"))
    warm = pick(whole.get("compile_warm_s"), regional.get("compile_warm_s"))
    if lat in ("regional", "tie") and cold == "regional":
        summary = "regional: compiles faster" + (" and runs as fast (within noise)" if lat == "tie" else " and runs faster")
    elif lat == "whole" and cold == "whole":
        summary = "whole: compiles and runs faster"
    elif lat is None or cold is None:
        summary = "undecided: a side failed"
    else:
        summary = f"trade-off: {cold} compiles faster, {lat} runs faster" if lat != "tie" else f"{cold}: compiles faster, same latency"
    return {"latency": lat, "compile_cold": cold, "compile_warm": warm, "summary": summary}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def run_perf(spec: str, *, backend: str = "inductor", regional: bool = False, block: str | None = None,
             repeats: int = 20, warmup: int = 3, max_seconds: float = 30.0, timeout: float | None = None,
             progress: Callable[[str], None] | None = None) -> dict:
    """Measure a target: census, eager, whole compile (cold + warm), regional (cold + warm).

    Raises TargetError when the target cannot be loaded. ``progress(step)`` is called before
    each step.
    """
    from .target import Options
    from .target import census_subprocess
    step = progress or (lambda _s: None)
    base = {"spec": spec, "backend": backend, "block": block, "repeats": repeats, "warmup": warmup,
            "max_seconds": max_seconds}
    with tempfile.TemporaryDirectory(prefix="graphstitch-perf-cache-") as tmp:
        # Eager first: it also checks the target and the blocks, so a bad one fails in seconds.
        step("eager")
        eager = _run_worker(dict(base, mode="eager", regional=regional), os.path.join(tmp, "eager"), timeout)
        if (eager.get("error") or {}).get("kind") == "target":
            raise TargetError(eager["error"]["message"])
        step("census")
        c, _ = census_subprocess(spec, Options(backend="counting"), timeout=timeout)
        if c.error and c.error.get("kind") == "target":
            raise TargetError(c.error["message"])
        census = census_summary(c)
        whole: dict = {}
        reg = None
        if not eager.get("error"):  # a target that fails eagerly has nothing to compare with
            step("whole: cold compile" + ("" if regional else " + latency"))
            whole_cold = _run_worker(dict(base, mode="whole", latency=not regional), os.path.join(tmp, "whole"), timeout)
            step("whole: warm compile")
            whole_warm = _run_worker(dict(base, mode="whole"), os.path.join(tmp, "whole"), timeout)
            whole = _variant(whole_cold, whole_warm, census)
            if regional:
                step("regional: cold compile + latency (eager, whole, regional alternating)")
                reg_cold = _run_worker(dict(base, mode="regional", latency=True, census=True),
                                       os.path.join(tmp, "regional"), timeout)
                if (reg_cold.get("error") or {}).get("kind") == "target":
                    raise TargetError(reg_cold["error"]["message"])
                step("regional: warm compile")
                reg_warm = _run_worker(dict(base, mode="regional"), os.path.join(tmp, "regional"), timeout)
                reg = _variant(reg_cold, reg_warm, reg_cold.get("census"))
                # The latency run of a --regional perf: eager, whole and regional in one process.
                whole.update(latency=reg_cold.get("whole_latency"), eager_latency=reg_cold.get("eager_latency"),
                             speedup_vs_eager=reg_cold.get("whole_speedup_vs_eager"),
                             latency_stable=reg_cold.get("latency_stable"))
                if reg_cold.get("whole_outputs_match_eager") is False and not whole.get("output_mismatch"):
                    whole.update(outputs_match_eager=False, output_mismatch=reg_cold.get("whole_output_mismatch"))
    # Eager latency: the eager side of the one latency run (same process as the compiled sides).
    eager_latency = whole.get("eager_latency")
    result: dict[str, Any] = {
        "schema": SCHEMA, "target": spec, "backend": backend, "device": eager.get("device"),
        "torch_version": c.torch_version, "repeats": repeats, "warmup": warmup,
        "memory_kind": "cuda_max_memory_allocated" if eager.get("device") == "cuda" else "cpu_peak_rss",
        "latency_run": "eager, whole, regional alternating in one process" if regional
                       else "eager, whole alternating in one process",
        "census": census, "census_backend": "counting",
        "eager": {"first_call_s": eager.get("first_call_s"), "latency": eager_latency,
                  "peak_memory_mb": eager.get("peak_memory_mb"), "error": eager.get("error")},
        "whole": whole or None, "regional": reg,
        "ratios": {"whole_speedup_vs_eager": whole.get("speedup_vs_eager"),
                   "regional_speedup_vs_eager": (reg or {}).get("speedup_vs_eager"),
                   "regional_vs_whole_latency": _ratio((whole.get("latency") or {}).get("median_s"),
                                                       ((reg or {}).get("latency") or {}).get("median_s")),
                   "regional_vs_whole_compile_cold": _ratio(whole.get("compile_cold_s"), (reg or {}).get("compile_cold_s")),
                   "regional_vs_whole_compile_warm": _ratio(whole.get("compile_warm_s"), (reg or {}).get("compile_warm_s"))},
        "winner": _winner(whole, reg) if reg else None,
        "nested_compile_region_available": eager.get("nested_compile_region_available"),
    }
    return result


def failed(result: dict) -> dict | None:
    """The first error of a perf result (eager, whole, regional), or None."""
    for side in ("eager", "whole", "regional"):
        err = (result.get(side) or {}).get("error")
        if err:
            return dict(err, side=side)
    return None


# ----------------------------------------------------------------------------- rendering

def _fmt(x: float | None, unit: str = "", digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}{unit}"


def render_terminal(result: dict, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table
    con = console or Console(highlight=False)
    c = result["census"]
    con.print(f"[bold]graphstitch perf[/] {result['target']}  backend={result['backend']}  device={result['device']}  "
              f"(census: {c.get('graph_count')} graphs, {c.get('break_events')} break events at "
              f"{c.get('break_site_count')} sites, {c.get('recompile_count')} recompiles)")
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 1), pad_edge=False)
    for col in ("variant", "ms", "±IQR/2", "speedup", "cold s", "warm s", "MB", "graphs", "recomp", "ok"):  # fits 80 columns
        t.add_column(col, justify="left" if col == "variant" else "right", no_wrap=True, min_width=len(col))

    def lat(st: dict | None) -> tuple[str, str]:
        return ("—", "—") if not st else (f"{st['median_s'] * 1e3:.4g}", f"{st['iqr_s'] * 1e3 / 2:.2g}")
    e = result["eager"]
    t.add_row("eager", *lat(e.get("latency")), "1.00×", "—", "—", _fmt(e.get("peak_memory_mb"), digits=0), "—", "—", "—")
    for side in ("whole", "regional"):
        v = result.get(side)
        if not v:
            continue
        vc = v.get("census") or {}
        t.add_row(side, *lat(v.get("latency")), _fmt(v.get("speedup_vs_eager"), "×"),
                  _fmt(v.get("compile_cold_s")), _fmt(v.get("compile_warm_s")),
                  _fmt(v.get("peak_memory_mb"), digits=0), str(vc.get("graph_count", "—")),
                  str(vc.get("recompile_count", "—")), {True: "yes", False: "NO"}.get(v.get("outputs_match_eager"), "—"))
    con.print(t)
    r, w = result["ratios"], result.get("winner")
    blk = (result.get("regional") or {}).get("block")
    if blk:
        con.print(f"regional = each of the {blk['count']} {blk['class']} blocks at `{blk['path']}` compiled on its own")
    if w:
        con.print(f"regional vs whole: latency {_fmt(r['regional_vs_whole_latency'], '×')}, cold compile "
                  f"{_fmt(r['regional_vs_whole_compile_cold'], '×')}, warm compile "
                  f"{_fmt(r['regional_vs_whole_compile_warm'], '×')} (>1: regional better) — [bold]{w['summary']}[/]")
    err = failed(result)
    if err:
        con.print(f"[red]{err['side']} failed ({err.get('kind')}): {str(err.get('message', '')).splitlines()[0:1]}[/]")


def perf_svg(result: dict) -> str:
    """A self-contained SVG bar chart: steady-state latency and compile times (no dependency)."""
    e, w, r = result["eager"], result.get("whole") or {}, result.get("regional")
    lat = [("eager", (e.get("latency") or {}).get("median_s"), e.get("latency")),
           ("whole", (w.get("latency") or {}).get("median_s"), w.get("latency"))]
    comp = [("whole cold", w.get("compile_cold_s")), ("whole warm", w.get("compile_warm_s"))]
    if r:
        lat.append(("regional", (r.get("latency") or {}).get("median_s"), r.get("latency")))
        comp += [("regional cold", r.get("compile_cold_s")), ("regional warm", r.get("compile_warm_s"))]
    width, bar_h, gap, label_w, plot_w = 640, 22, 8, 120, 380
    parts: list[str] = []
    y = 40

    def panel(title: str, rows: list[tuple[str, float | None, dict | None]], unit: str, scale: float) -> None:
        nonlocal y
        parts.append(f'<text x="10" y="{y}" font-weight="bold">{html.escape(title)}</text>')
        y += 12
        vals = [v for _, v, _ in rows if v]
        top = max(vals + [((s or {}).get("q3_s") or 0) for _, _, s in rows]) if vals else 1.0
        for label, v, st in rows:
            parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{html.escape(label)}</text>')
            if v is None:
                parts.append(f'<text x="{label_w + 4}" y="{y + 15}" fill="#a00">failed</text>')
            else:
                bw = max(plot_w * v / top, 1)
                parts.append(f'<rect x="{label_w}" y="{y}" width="{bw:.1f}" height="{bar_h}" fill="#4a78b5"/>')
                if st:  # IQR whisker
                    x1, x2 = label_w + plot_w * st["q1_s"] / top, label_w + plot_w * st["q3_s"] / top
                    parts.append(f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y + bar_h / 2}" y2="{y + bar_h / 2}" '
                                 'stroke="#222" stroke-width="2"/>')
                parts.append(f'<text x="{label_w + max(bw, plot_w * ((st or {}).get("q3_s") or 0) / top) + 6:.1f}" '
                             f'y="{y + 15}">{v * scale:.3g} {html.escape(unit)}</text>')
            y += bar_h + gap
        y += 20

    title = f"graphstitch perf — {result['target']} ({result['backend']}, {result['device']})"
    panel("steady-state latency (median, IQR whisker)", lat, "ms", 1e3)
    panel("compile time (first call)", [(n, v, None) for n, v in comp], "s", 1.0)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}" '
            'font-family="sans-serif" font-size="12">'
            f'<rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="14">{html.escape(title)}</text>')
    return head + "".join(parts) + "</svg>\n"


if __name__ == "__main__":  # the worker entry point
    sys.exit(_worker(sys.argv[1], sys.argv[2]))


def perf_html(result: dict) -> str:
    """A self-contained HTML page: the chart (perf_svg) and the terminal table (rich's own
    HTML export, inline styles, escaped). No network, opens from disk."""
    import io
    from rich.console import Console
    con = Console(record=True, width=110, file=io.StringIO(), highlight=False)
    render_terminal(result, con)
    table = con.export_html(inline_styles=True, code_format="{code}")
    title = html.escape(f"graphstitch perf — {result.get('target')}")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">'
            f"<title>{title}</title></head>\n<body style=\"font-family:system-ui,sans-serif;margin:2em\">"
            f"<h1 style=\"font-size:1.3em\">{title}</h1>\n{perf_svg(result)}\n"
            f"<pre style=\"font-family:ui-monospace,monospace;font-size:13px\">{table}</pre>\n</body></html>\n")
