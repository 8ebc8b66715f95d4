"""Distributed symmetry check: do all ranks compile the same graphs in the same order?

Ranks that take different graph breaks or guard paths enter collectives in different orders
and hang. Each rank's census is compared here (no torch import: offline traces are compared
on machines without it); the live runner launches the ranks with torch.distributed.run, each
one streaming its records to its own TORCH_TRACE-format file so that a crashed or hung rank
still leaves its census behind.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterable

from .analysis import Census, compile_id_key
from .target import census_from_stream

# Source text that calls a collective or the process-group API (not torch.gather,
# broadcast_to & co: bare gather/scatter/reduce/send count only as `dist.` calls).
_COLLECTIVE_TEXT = re.compile(
    r"\b(all_reduce\w*|allreduce\w*|all_gather\w*|reduce_scatter\w*|broadcast|broadcast_object_list|"
    r"barrier|all_to_all\w*|isend|irecv)\s*\(|\b(dist|torch\.distributed)\.(?!get_|is_)\w+\(")
_DISABLED_FN = re.compile(r"function `<function (\w+) at")

FUNCTIONAL_ADVICE = (
    "Use functional collectives (torch.distributed._functional_collectives: all_reduce, "
    "all_gather_tensor, reduce_scatter_tensor, ...), which trace into the graph, instead of "
    "collectives that break it or run inside torch._dynamo.disable; in-place dist.all_reduce also "
    "traces on torch 2.13. A field report saw ~160 breaks per forward fall to 2 after the switch. "
    "A collective outside the graphs is invisible to this check's collective order.")
RANK_ADVICE = (
    "Keep the compiled region identical on every rank: move rank-dependent code (`if rank == 0: "
    "print(...)`, logging, checkpoint I/O) outside the compiled function, or make it traceable "
    "(torch._dynamo.config.reorderable_logging_functions for print/logging). A different break "
    "on one rank changes its graphs, and then the order its collectives run in.")

RANK_FILE = "dedicated_log_torch_trace_rank_{rank}_graphstitch.log"  # TORCH_TRACE's naming
_ROOT_CAUSE_RE = re.compile(r"rank\s*:\s*(?P<rank>\d+).*?exitcode\s*:\s*(?P<code>-?\d+)[^\n]*?(?:\((?P<sig>SIG\w+)\))?\s*\n",
                            re.S)


# ----------------------------------------------------------------------------- comparison

def _groups(values: dict[int, Any]) -> list[list[int]]:
    """Ranks grouped by equal value: the largest group first (ties: the one with the lowest rank)."""
    groups: list[tuple[Any, list[int]]] = []
    for r in sorted(values):
        for v, rs in groups:
            if v == values[r]:
                rs.append(r)
                break
        else:
            groups.append((values[r], [r]))
    return [rs for _, rs in sorted(groups, key=lambda g: (-len(g[1]), g[1][0]))]


def _fmt_ranks(rs: Iterable[int]) -> str:
    rs = list(rs)
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(map(str, rs))


def _frame_at(c: Census, cid: str | None) -> tuple[str | None, int | None, str | None]:
    for f in c.frames:
        if f.compile_id == cid:
            return f.file, f.line, f.function
    for g in c.graphs:
        if g.compile_id == cid:
            return g.file, g.line, g.function
    return None, None, None


def _graph_collectives(c: Census, cid: str | None) -> list[str] | None:
    for g in c.graphs:
        if g.compile_id == cid:
            return list(g.collectives)
    return None


def _divergence(kind: str, ranks: list[int], others: list[int], cid: str | None, file, line,
                message: str, censuses: dict[int, Census], **extra) -> dict:
    d = {"kind": kind, "ranks": ranks, "other_ranks": others, "compile_id": cid, "file": file,
         "line": line, "message": message,
         "collectives": {r: _graph_collectives(c, cid) for r, c in censuses.items()}}
    d.update(extra)
    return d


def _by_key(censuses: dict[int, Census], items, key) -> Iterable[dict[int, Any]]:
    """For each distinct key (first seen first): {rank: that rank's item with the key, or None}."""
    keys: dict[Any, None] = {}
    for r in sorted(censuses):
        for it in items(censuses[r]):
            keys.setdefault(key(it))
    for k in keys:
        yield {r: next((it for it in items(c) if key(it) == k), None) for r, c in censuses.items()}


def _site_divergences(censuses: dict[int, Census]) -> list[dict]:
    out = []
    for present in _by_key(censuses, lambda c: c.sites, lambda s: s.key):
        have = sorted(r for r, s in present.items() if s is not None)
        lack = sorted(r for r, s in present.items() if s is None)
        s = present[have[0]]
        if lack:
            msg = (f"break {s.gb_id} ({s.gb_type}) at {s.file}:{s.line} `{s.code.strip()}` in "
                   f"{s.function} is taken on {_fmt_ranks(have)} only, not on {_fmt_ranks(lack)}: "
                   "a rank-dependent code path inside the compiled region")
            out.append(_divergence("break_site", have, lack, s.compile_ids[0], s.file, s.line, msg,
                                   censuses, gb_id=s.gb_id, code=s.code, function=s.function))
            continue
        events = {r: p.events for r, p in present.items() if p is not None}
        groups = _groups(events)
        if len(groups) > 1:
            odd = sorted(r for g in groups[1:] for r in g)
            sides = "; ".join(f"{_fmt_ranks(g)}: {events[g[0]]}" for g in groups)
            msg = (f"break {s.gb_id} at {s.file}:{s.line} `{s.code.strip()}` is reported a different "
                   f"number of times per rank ({sides}): the ranks compiled that code differently often")
            cid = present[odd[0]].compile_ids[-1]
            out.append(_divergence("break_events", odd, groups[0], cid, s.file, s.line, msg, censuses,
                                   gb_id=s.gb_id, code=s.code, function=s.function,
                                   events={r: events[r] for r in sorted(events)}))
    return out


def _recompile_divergences(censuses: dict[int, Census]) -> list[dict]:
    out = []
    for present in _by_key(censuses, lambda c: c.recompiles, lambda x: x.reason):
        reason = next(x for x in present.values() if x).reason
        counts = {r: x.count if x else 0 for r, x in present.items()}
        groups = _groups(counts)
        if len(groups) == 1:
            continue
        odd = sorted(r for g in groups[1:] for r in g)
        # Point at a rank that did recompile: its compile id and frame name the place.
        at = next(r for r in odd + groups[0] if counts[r])
        cause = present[at]
        cid = cause.compile_ids[0]
        file, line, fn = _frame_at(censuses[at], cid)
        sides = "; ".join(f"{_fmt_ranks(g)}: {counts[g[0]]}x" for g in groups)
        msg = (f"recompile cause `{reason}` in {', '.join(cause.frames)} differs across ranks ({sides}), "
               f"first at {cid} on rank {at}: the ranks' inputs or guards differ")
        out.append(_divergence("recompile", odd, groups[0], cid, file, line, msg, censuses,
                               reason=reason, function=fn, counts={r: counts[r] for r in sorted(counts)},
                               examples=cause.examples))
    return out


def _skipped_divergences(censuses: dict[int, Census]) -> list[dict]:
    out = []
    for present in _by_key(censuses, lambda c: c.skipped_frames,
                           lambda sf: (sf.function, sf.file, sf.line, sf.fail_type)):
        have = sorted(r for r, sf in present.items() if sf)
        lack = sorted(r for r, sf in present.items() if not sf)
        if lack:
            sf = present[have[0]]
            msg = (f"frame {sf.function} ({sf.file}:{sf.line}) is skipped ({sf.fail_type}: {sf.reason}) on "
                   f"{_fmt_ranks(have)} only: it runs eagerly there and compiled on {_fmt_ranks(lack)}")
            out.append(_divergence("skipped_frame", have, lack, sf.compile_id, sf.file, sf.line, msg,
                                   censuses, function=sf.function))
    return out


def _graph_divergence(censuses: dict[int, Census]) -> list[dict]:
    """The first position where the ranks' graph sequences differ (everything after shifts)."""
    n = max(len(c.graphs) for c in censuses.values())
    for i in range(n):
        sig = {r: ((g.compile_id, g.function, g.file, g.line, g.op_count, tuple(g.collectives)) if g else None)
               for r, c in censuses.items() for g in [c.graphs[i] if i < len(c.graphs) else None]}
        groups = _groups(sig)
        if len(groups) == 1:
            continue
        odd = sorted(r for g in groups[1:] for r in g)

        def side(r):
            c = censuses[r]
            if i >= len(c.graphs):
                return f"rank {r}: no graph #{i} ({c.graph_count} graphs)"
            g = c.graphs[i]
            return (f"rank {r}: {g.compile_id} {g.function} ({g.file}:{g.line}, {g.op_count} ops, "
                    f"collectives {[op.split('.')[-1] for op in g.collectives]})")
        ref = next((r for r in odd + groups[0] if i < len(censuses[r].graphs)), odd[0])
        g = censuses[ref].graphs[i] if i < len(censuses[ref].graphs) else None
        msg = (f"graph #{i} differs (graph counts: " +
               ", ".join(f"rank {r}: {censuses[r].graph_count}" for r in sorted(censuses)) + "): " +
               "; ".join(side(r) for r in sorted(censuses)))
        d = _divergence("graphs", odd, groups[0], g.compile_id if g else None,
                        g.file if g else None, g.line if g else None, msg, censuses, graph_index=i)
        d["collectives"] = {r: (list(c.graphs[i].collectives) if i < len(c.graphs) else None)
                            for r, c in censuses.items()}
        return [d]
    return []


def _collective_divergence(censuses: dict[int, Census]) -> list[dict]:
    """The first collective the ranks would enter in a different order: where a job hangs."""
    seqs = {r: [(op, g) for g in c.graphs for op in g.collectives] for r, c in censuses.items()}
    n = max(len(s) for s in seqs.values())
    for k in range(n):
        at = {r: (s[k][0] if k < len(s) else None) for r, s in seqs.items()}
        groups = _groups(at)
        if len(groups) == 1:
            continue
        odd = sorted(r for g in groups[1:] for r in g)

        def side(r):
            if k >= len(seqs[r]):
                return f"rank {r}: none (only {len(seqs[r])} collectives in graphs)"
            op, g = seqs[r][k]
            return f"rank {r}: {op} in graph {g.compile_id} {g.function} ({g.file}:{g.line})"
        ref = next((r for r in odd + groups[0] if k < len(seqs[r])), odd[0])
        g = seqs[ref][k][1] if k < len(seqs[ref]) else None
        msg = (f"collective #{k} in the compiled graphs differs; where these graphs run in step, the ranks "
               "wait on different collectives (a hang): "
               + "; ".join(side(r) for r in sorted(seqs)))
        d = _divergence("collective_order", odd, groups[0], g.compile_id if g else None,
                        g.file if g else None, g.line if g else None, msg, censuses, collective_index=k)
        d["collectives"] = {r: [op for op, _ in s] for r, s in seqs.items()}
        return [d]
    return []


def _disabled_fn_calls_collective(site) -> bool:
    """A torch._dynamo.disable'd function whose source (found next to the site) calls a collective."""
    m = _DISABLED_FN.search(site.explanation or "")
    if not m:
        return False
    try:
        with open(site.file, encoding="utf-8") as f:
            src = f.read()
        tree = ast.parse(src)
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == m.group(1):
            body = ast.get_source_segment(src, node) or ""
            return bool(_COLLECTIVE_TEXT.search(body.split(":", 1)[-1]))
    return False


def _flags(censuses: dict[int, Census], divergences: list[dict]) -> list[dict]:
    flags = []
    for d in divergences:
        if d["kind"] == "break_site":
            flags.append({"kind": "rank_dependent_code", "ranks": d["ranks"], "file": d["file"],
                          "line": d["line"], "gb_id": d["gb_id"], "code": d["code"],
                          "message": f"{d['file']}:{d['line']} `{d['code'].strip()}` breaks the graph on "
                                     f"{_fmt_ranks(d['ranks'])} only", "advice": RANK_ADVICE})
    seen: dict[tuple, dict] = {}
    for r in sorted(censuses):
        for s in censuses[r].sites:
            if s.key in seen:
                seen[s.key]["ranks"].append(r)
                continue
            disabled = _disabled_fn_calls_collective(s)
            if not (disabled or _COLLECTIVE_TEXT.search(s.code or "")):
                continue
            what = ("a torch._dynamo.disable'd function that calls a collective" if disabled
                    else "a collective call")
            seen[s.key] = {"kind": "disabled_collective" if disabled else "collective_break", "ranks": [r],
                           "file": s.file, "line": s.line, "gb_id": s.gb_id, "code": s.code,
                           "message": f"{s.file}:{s.line} `{s.code.strip()}` ({what}) breaks the graph "
                                      f"({s.gb_id}: {s.gb_type})", "advice": FUNCTIONAL_ADVICE}
    return flags + list(seen.values())


_KIND_ORDER = {k: i for i, k in enumerate(
    ["break_site", "skipped_frame", "recompile", "break_events", "collective_order", "graphs"])}


def compare_ranks(censuses: dict[int, Census]) -> dict:
    """Compare the ranks' censuses. ``divergences`` is in program order (by compile id, the
    cause before its consequences): ``divergences[0]`` is the first divergence. JSON-able."""
    ranks = sorted(censuses)
    # The rank that failed first is the cause; the others often fail because it left.
    failed = [{"rank": r, **{k: censuses[r].error.get(k) for k in ("kind", "type", "message", "where")
                             if censuses[r].error.get(k) is not None}}
              for r in sorted((r for r in ranks if censuses[r].error),
                              key=lambda r: (censuses[r].error.get("kind") == "stopped",
                                             censuses[r].error.get("at") or float("inf"), r))]
    divergences: list[dict] = []
    if len(ranks) > 1:
        divergences = (_site_divergences(censuses) + _skipped_divergences(censuses) +
                       _recompile_divergences(censuses) + _collective_divergence(censuses) +
                       _graph_divergence(censuses))
        divergences.sort(key=lambda d: (compile_id_key(d["compile_id"]) if d["compile_id"] else (1 << 31, 0),
                                        _KIND_ORDER[d["kind"]]))
    return {
        "symmetric": not divergences and not failed,
        "ranks": ranks,
        "failed": failed,
        "divergences": divergences,
        "flags": _flags(censuses, divergences),
        "collectives": {r: [list(g.collectives) for g in censuses[r].graphs] for r in ranks},
        "summary": {r: {"graphs": c.graph_count, "break_sites": len(c.sites), "break_events": c.break_events,
                        "recompiles": c.recompile_count, "skipped_frames": len(c.skipped_frames),
                        "error": (c.error or {}).get("kind")} for r, c in censuses.items()},
    }


def censuses_from_rank_files(paths_by_rank: dict[int, str], target: str | None = None) -> dict[int, Census]:
    """Offline: decode per-rank TORCH_TRACE files (or the live runner's record files)."""
    return {r: census_from_stream(p, target) for r, p in sorted(paths_by_rank.items())}


def render_ranks(result: dict, console=None) -> None:
    """Terminal summary of a :func:`compare_ranks` result (reads it, never re-counts)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .report import short_path
    console = console or Console(highlight=False)
    t = Table(title="graphstitch ranks", title_justify="left")
    for col in ("rank", "graphs", "break sites", "break events", "recompiles", "skipped frames",
                "collectives", "status"):
        t.add_column(col, justify="left" if col == "status" else "right")
    for r in result["ranks"]:
        s = result["summary"][r]
        n = sum(len(g) for g in result["collectives"][r])
        t.add_row(str(r), str(s["graphs"]), str(s["break_sites"]), str(s["break_events"]),
                  str(s["recompiles"]), str(s["skipped_frames"]), str(n),
                  f"[red]{s['error']}[/]" if s["error"] else "ok")
    console.print(t)
    for f in result["failed"]:
        where = f" at {short_path(f['where'])}" if f.get("where") else ""
        console.print(f"[bold red]rank {f['rank']} failed[/] ({f.get('kind')}{where}): "
                      f"{escape(str(f.get('message', '')).splitlines()[0] if f.get('message') else '')}")
    if result["symmetric"]:
        console.print("[bold green]symmetric[/]: every rank compiled the same graphs, breaks, recompiles "
                      "and collectives in the same order")
    for i, d in enumerate(result["divergences"]):
        head = "[bold red]first divergence[/]" if i == 0 else "[yellow]divergence[/]"
        at = f" at {short_path(d['file'])}:{d['line']}" if d.get("file") else ""
        console.print(f"{head} \\[{d['kind']}] {_fmt_ranks(d['ranks'])}, compile id {d['compile_id']}{at}")
        console.print("  " + escape(d["message"]))
        if i == 0 and any(v for v in d["collectives"].values()):
            for r, ops in sorted(d["collectives"].items()):
                names = "none in this graph" if ops is None else ", ".join(o.split(".")[-1] for o in ops) or "none"
                console.print(f"  collectives, rank {r}: {names}")
    for f in result["flags"]:
        console.print(f"[bold yellow]{f['kind']}[/] {escape(f['message'])} ({_fmt_ranks(f['ranks'])})")
        console.print(f"  advice: {escape(f['advice'])}")


# ----------------------------------------------------------------------------- live runner

def _proc_children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="utf-8", errors="replace") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _descendants(pid: int) -> dict[int, str | None]:
    kids, out, todo = _proc_children(), {}, [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out[k] = _start_time(k)
            todo.append(k)
    return out


def _alive(pid: int, started: str | None) -> bool:
    """Same process (start time guards against a reused pid) and not yet a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return started is not None and fields[19] == started and fields[0] not in ("Z", "X")


def _kill_all(known: dict[int, str | None]) -> None:
    # Workers run in their own sessions (elastic starts them with start_new_session): kill each
    # group, then each pid; then wait until they are gone, so none outlives the command.
    for pid, started in known.items():
        if _alive(pid, started):
            for kill, target in ((os.killpg, pid), (os.kill, pid)):
                try:
                    kill(target, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in known.items()):
        time.sleep(0.05)


def run_ranks(spec: str | None, nproc: int, options: dict | None = None, *, script: str | None = None,
              script_args: Iterable[str] = (), timeout: float | None = None,
              trace_dir: str | None = None) -> tuple[dict[int, Census], dict]:
    """Launch ``nproc`` ranks with torch.distributed.run, each running the target (or script)
    under capture. ``options`` are :class:`graphstitch.live.Options` fields (a dict, so this
    process never imports torch). Returns (census per rank, run info). Never leaves a process
    behind."""
    owned = trace_dir is None
    script = os.path.abspath(script) if script else None
    outdir = tempfile.mkdtemp(prefix="graphstitch-ranks-") if owned else trace_dir
    os.makedirs(outdir, exist_ok=True)
    for r in range(nproc):  # stale files from an earlier run in the same --trace-dir
        for p in (RANK_FILE.format(rank=r), f"rank_{r}.done"):
            if os.path.exists(os.path.join(outdir, p)):
                os.unlink(os.path.join(outdir, p))
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(outdir, "inductor"))
    # --standalone: c10d rendezvous on a free port (a busy 29500 is not an error).
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
           f"--nproc_per_node={nproc}", "--max-restarts=0", "--monitor-interval=0.2",
           "-m", "graphstitch.ranks", outdir, json.dumps(options or {}),
           spec if script is None else "--script", *([] if script is None else [script, *script_args])]
    log_path = os.path.join(outdir, "launcher.log")
    started = time.monotonic()
    timed_out = False
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        known: dict[int, str | None] = {proc.pid: _start_time(proc.pid)}
        scanned = 0.0
        try:
            while proc.poll() is None:
                if time.monotonic() - scanned > 1.0:  # a /proc scan costs ~10 ms
                    known.update(_descendants(proc.pid))
                    scanned = time.monotonic()
                if timeout is not None and time.monotonic() - started > timeout:
                    timed_out = True
                    break
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                known.update(_descendants(proc.pid))
            _kill_all(known)
            proc.wait()
    wall = time.monotonic() - started

    with open(log_path, encoding="utf-8", errors="replace") as f:
        log_tail = f.read()[-4000:]
    censuses: dict[int, Census] = {}
    done: dict[int, int] = {}
    for r in range(nproc):
        censuses[r] = census_from_stream(os.path.join(outdir, RANK_FILE.format(rank=r)), spec or script)
        try:
            with open(os.path.join(outdir, f"rank_{r}.done"), encoding="utf-8") as f:
                done[r] = int(f.read().strip() or 0)
        except (OSError, ValueError):
            pass
    failed_first = [r for r in censuses if censuses[r].error]
    # torchrun's failure summary names the rank that died first (a segfault leaves no record).
    root = _ROOT_CAUSE_RE.search(log_tail.split("Root Cause", 1)[-1]) if "Root Cause" in log_tail else None
    if root and int(root["rank"]) in censuses and not failed_first and int(root["rank"]) not in done:
        r = int(root["rank"])
        how = f"signal {root['sig']}" if root["sig"] else f"exit code {root['code']}"
        censuses[r].error = {"kind": "crash", "message": f"rank {r} died with {how}"}
        failed_first = [r]
    for r, c in censuses.items():
        if r in done or c.error:
            continue
        if timed_out:
            c.error = {"kind": "timeout", "message": f"rank {r} did not finish within {timeout:g} s (killed)"}
        elif failed_first:
            c.error = {"kind": "stopped", "message": f"rank {r} was stopped by the launcher after "
                                                     f"{_fmt_ranks(failed_first)} failed"}
        else:
            last = [ln for ln in log_tail.splitlines() if ln.strip()][-1:] or [""]
            c.error = {"kind": "crash", "message": f"rank {r} exited before finishing (launcher exit code "
                                                   f"{proc.returncode}): {last[0][:300]}"}
    info = {"nproc": nproc, "timed_out": timed_out, "wall_seconds": round(wall, 3),
            "launcher_exit_code": proc.returncode, "trace_dir": None if owned else outdir,
            "rank_files": {r: os.path.join(outdir, RANK_FILE.format(rank=r)) for r in range(nproc)},
            "launcher_log_tail": log_tail}
    if owned:
        shutil.rmtree(outdir, ignore_errors=True)
        info["rank_files"] = {}
    return censuses, info


# ----------------------------------------------------------------------------- rank worker

def _rank_worker(outdir: str, opts_json: str, spec: str, *script_args: str) -> int:
    import runpy

    import torch
    import torch.distributed as dist

    from .dynamo import quiet_dynamo_warnings
    from .live import Capture, error_info, run_calls
    from .records import Record
    from .target import Options, TargetError, load_factory, make_calls, stream_sink

    rank = int(os.environ.get("RANK", "0"))
    rc = 3
    quiet_dynamo_warnings()
    try:
        with open(os.path.join(outdir, RANK_FILE.format(rank=rank)), "w", encoding="utf-8") as out:
            write = stream_sink(out)

            def sink(rec: Record) -> None:
                err = (rec.meta.get("graphstitch_run") or {}).get("error")
                if isinstance(err, dict):
                    err.setdefault("at", time.time())  # orders the ranks' failures
                write(rec)
            if spec == "--script":
                script, args = script_args[0], list(script_args[1:])
                sys.argv = [script, *args]
                sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
                with Capture(sink, target=script) as cap:
                    try:
                        runpy.run_path(script, run_name="__main__")
                    except SystemExit as e:
                        if e.code not in (0, None):
                            cap.note(error={"kind": "script", "message": f"script exited with {e.code}"})
                    except Exception as e:  # noqa: BLE001 - recorded, reported as a failed rank
                        cap.note(error=error_info("script", e))
            else:
                cuda = torch.cuda.is_available()
                if cuda:
                    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
                # The factory may call dist.get_rank(): the group exists before it runs.
                dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo")
                try:
                    calls = make_calls(load_factory(spec), spec)
                except TargetError as e:
                    sink(Record({"graphstitch_run": {"target": spec, "error": {"kind": "target", "message": str(e)}}}))
                    rc = 2
                    return rc
                with Capture(sink, target=spec) as cap:
                    run_calls(cap, calls, Options(**json.loads(opts_json)))
            assert cap.census is not None
            rc = 3 if cap.census.error else 0
        if rc == 0 and dist.is_initialized():
            dist.destroy_process_group()
        return rc
    finally:
        with open(os.path.join(outdir, f"rank_{rank}.done"), "w", encoding="utf-8") as f:
            f.write(str(rc))


if __name__ == "__main__":  # a rank, started by torch.distributed.run
    sys.exit(_rank_worker(*sys.argv[1:]))
