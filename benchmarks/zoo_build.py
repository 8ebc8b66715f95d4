"""Build and run eagerly every model of a zoo registry, one isolated process per model.

    python benchmarks/zoo_build.py [--registry transformers] [--only GLOB ...] [--exclude GLOB ...]
                                   [--modes eval,train] [-j 2] [--timeout 300] [--sample N]
                                   [--json results.json]

Each model runs in its own process forked from a forkserver that has torch and the
registry's library imported already (a fresh interpreter per model would pay ~5 s of
imports each). A model over ``--timeout`` seconds or ``--max-rss`` GB is killed and counted
as such. Prints: classes listed, built, ran eagerly, failures grouped by reason, median
build + eager seconds, peak RSS.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "graphstitch-zoo-inductor"))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from graphstitch import zoo

PRELOAD = {"transformers": ["torch", "transformers", "transformers.modeling_utils",
                            "transformers.models.auto.modeling_auto", "graphstitch.zoo.transformers"],
           "diffusers": ["torch", "diffusers", "graphstitch.zoo.diffusers"],
           "torch_geometric": ["torch", "torch_geometric", "graphstitch.zoo.pyg"]}


def _rss_peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _worker(registry: str, name: str, mode: str, conn) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    res = {"registry": registry, "name": name, "mode": mode}
    t0 = time.perf_counter()
    try:
        calls = zoo.build(registry, name, mode)
    except zoo.CreateError as e:
        res.update(status="create_error", reason=e.reason, detail=(e.detail or "")[:500],
                   build_s=time.perf_counter() - t0, rss_mb=_rss_peak_mb())
        conn.send(res)
        return
    except BaseException as e:  # noqa: BLE001 - a registry bug is reported, not raised
        res.update(status="create_error", reason="registry bug", detail=f"{type(e).__name__}: {e}"[:500],
                   tb=traceback.format_exc()[-2000:], build_s=time.perf_counter() - t0, rss_mb=_rss_peak_mb())
        conn.send(res)
        return
    t1 = time.perf_counter()
    res["build_s"] = t1 - t0
    fn0 = calls[0][0]
    res["shrink_level"] = getattr(fn0, "zoo_shrink_level", None)
    if isinstance(fn0, torch.nn.Module):
        res["params"] = sum(p.numel() for p in fn0.parameters())
    try:
        for fn, args, kwargs in calls:
            if mode == "eval":
                with torch.no_grad():
                    fn(*args, **kwargs)
            else:
                fn(*args, **kwargs)
        res["status"] = "ok"
    except BaseException as e:  # noqa: BLE001
        res.update(status="eager_error", reason=f"{type(e).__name__}", detail=" ".join(str(e).split())[:500])
    res["eager_s"] = time.perf_counter() - t1
    res["rss_mb"] = _rss_peak_mb()
    conn.send(res)


def _rss_now_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _group_key(r: dict) -> str:
    msg = r.get("detail") or ""
    msg = re.sub(r"0x[0-9a-f]+", "0x…", msg)
    msg = re.sub(r"\d+", "N", msg)
    msg = re.sub(r"'[^']{20,}'", "'…'", msg)
    return f"{r['status']}: {r.get('reason')}: {msg[:110]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--registry", default="transformers", choices=zoo.REGISTRIES)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--exclude", action="append", default=[])
    ap.add_argument("--modes", default="eval")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--max-rss", type=float, default=8.0, help="GB per model before it is killed")
    ap.add_argument("--sample", type=int, default=0, help="every N-th model only")
    ap.add_argument("--json", help="write every row here (updated as rows arrive)")
    ap.add_argument("--show", type=int, default=40, help="failure groups to print")
    a = ap.parse_args(argv)

    t_list = time.perf_counter()
    entries = zoo.list_models(a.registry, a.only, a.exclude, a.modes.split(","))
    list_s = time.perf_counter() - t_list
    n_classes = len({e.name for e in entries})
    if a.sample > 1:
        entries = entries[:: a.sample]
    print(f"listed {n_classes} {a.registry} model classes in {list_s:.2f}s; running {len(entries)} entries "
          f"with -j {a.jobs}, timeout {a.timeout:.0f}s", flush=True)

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD[a.registry])
    pending = list(entries)
    running: dict = {}
    rows: list[dict] = []
    peak_rss = 0.0
    t_start = time.perf_counter()

    def finish(e, res):
        nonlocal peak_rss
        res.setdefault("wall_s", time.perf_counter() - running[e][2])
        rows.append(res)
        peak_rss = max(peak_rss, res.get("rss_mb") or 0.0)
        st = res["status"]
        extra = f" {res.get('reason')}: {(res.get('detail') or '')[:120]}" if st != "ok" else \
            f" level={res.get('shrink_level')} params={res.get('params', 0) / 1e6:.2f}M"
        print(f"[{len(rows)}/{len(entries)}] {e.id} {st} {res['wall_s']:.1f}s rss={res.get('rss_mb', 0):.0f}MB{extra}",
              flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)

    while pending or running:
        while pending and len(running) < a.jobs:
            e = pending.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, args=(e.registry, e.name, e.mode, child), daemon=True)
            p.start()
            child.close()
            running[e] = (p, parent, time.perf_counter(), 0.0)
        time.sleep(0.05)
        for e, (p, conn, t0, rss_seen) in list(running.items()):
            res = None
            if conn.poll():
                try:
                    res = conn.recv()
                except EOFError:
                    res = None
                if res is not None:
                    p.join(10)
                    if p.is_alive():
                        p.kill()
                    finish(e, res)
                    del running[e]
                    continue
            rss = _rss_now_mb(p.pid) if p.is_alive() else 0.0
            running[e] = (p, conn, t0, max(rss_seen, rss))
            base = {"registry": e.registry, "name": e.name, "mode": e.mode, "rss_mb": max(rss_seen, rss)}
            if not p.is_alive():
                p.join()
                finish(e, {**base, "status": "crash", "reason": f"exit code {p.exitcode}", "detail": ""})
                del running[e]
            elif time.perf_counter() - t0 > a.timeout:
                p.kill()
                p.join()
                finish(e, {**base, "status": "timeout", "reason": f">{a.timeout:.0f}s", "detail": ""})
                del running[e]
            elif rss > a.max_rss * 1024:
                p.kill()
                p.join()
                finish(e, {**base, "status": "oom", "reason": f">{a.max_rss:.0f}GB RSS", "detail": ""})
                del running[e]

    total = time.perf_counter() - t_start
    st = Counter(r["status"] for r in rows)
    built = sum(1 for r in rows if r["status"] in ("ok", "eager_error"))
    print()
    print(f"registry: {a.registry}  classes listed: {n_classes} (listing {list_s:.2f}s)  entries run: {len(rows)}")
    print(f"built: {built}  ran eagerly: {st.get('ok', 0)}  create_error: {st.get('create_error', 0)}  "
          f"eager_error: {st.get('eager_error', 0)}  timeout: {st.get('timeout', 0)}  crash: {st.get('crash', 0)}  "
          f"oom: {st.get('oom', 0)}")
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        be = [r["build_s"] + r["eager_s"] for r in ok]
        print(f"median build+eager: {statistics.median(be):.2f}s (build {statistics.median(r['build_s'] for r in ok):.2f}s, "
              f"eager {statistics.median(r['eager_s'] for r in ok):.3f}s); max {max(be):.1f}s; "
              f"median wall per model {statistics.median(r['wall_s'] for r in ok):.2f}s")
        levels = Counter(r.get("shrink_level") for r in ok)
        print(f"shrink levels of the models that ran: {dict(levels)}")
    print(f"peak RSS of one model process: {peak_rss:.0f} MB; total wall {total:.0f}s")
    groups = defaultdict(list)
    for r in rows:
        if r["status"] != "ok":
            groups[_group_key(r)].append(r["name"])
    if groups:
        print("\nfailures by reason:")
        for k, names in sorted(groups.items(), key=lambda kv: -len(kv[1]))[: a.show]:
            print(f"  {len(names):4d}  {k}\n        e.g. {', '.join(names[:6])}")
    slow = sorted(rows, key=lambda r: -r.get("wall_s", 0))[:8]
    print("\nslowest: " + ", ".join(f"{r['name']}@{r['mode']} {r.get('wall_s', 0):.0f}s ({r['status']})" for r in slow))
    big = sorted(rows, key=lambda r: -(r.get("rss_mb") or 0))[:8]
    print("largest RSS: " + ", ".join(f"{r['name']} {r.get('rss_mb', 0):.0f}MB" for r in big))
    return 0


if __name__ == "__main__":
    sys.exit(main())
