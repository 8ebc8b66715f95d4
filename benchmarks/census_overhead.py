"""What a census costs, next to a bare torch.compile first call (issue 2's targets).

In one run, for a small MLP and a 6-block transformer (plain torch.nn, d=128):
  time   alternating pairs on the same fresh model: (a) torch.compile(fn, backend="eager") first
         call, (b) graphstitch.census(fn); median ratio b/a of CPU time (this process's; robust on
         a shared machine) and of wall time, goal <= 1.10
  memory peak RSS of a fresh process doing only (a) or only (b); ratio b/a, goal <= 1.10
  vs inductor  first call of torch.compile(fn, backend="inductor") in a fresh process with an empty
         TORCHINDUCTOR_CACHE_DIR (compile threads 1, so the C++ compiler runs as a waited child and
         its CPU time is counted) vs the census in a fresh process; ratio of CPU time (process +
         children) and of wall time, goal >= 10

    python benchmarks/census_overhead.py [--pairs N] [--procs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

D = 128


class Block(nn.Module):
    def __init__(self, d=D, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, depth=6, d=D, vocab=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def build(name: str):
    torch.manual_seed(0)
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).eval(), \
            torch.randn(8, 64)
    return Transformer().eval(), torch.randint(0, 256, (2, 64))


def first_call(side: str, model, x) -> tuple[float, float]:
    """(wall, CPU) seconds for one side's first call, after a clean Dynamo state."""
    import graphstitch
    from graphstitch import dynamo
    dynamo.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    if side == "census":
        c = graphstitch.census(model, x)
        assert c.error is None and c.graph_count >= 1, c.error
    else:
        with torch.no_grad():
            torch.compile(model, backend=side)(x)
    return time.perf_counter() - t0, time.process_time() - c0


def one_process(side: str, model_name: str) -> dict:
    """Fresh process: one first call of `side`; its time and the process's peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"), TORCHINDUCTOR_COMPILE_THREADS="1",
                   PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run([sys.executable, __file__, "--child", side, model_name], env=env,
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(side: str, model_name: str) -> None:
    import resource

    import graphstitch.live  # noqa: F401 - imported on both sides so only the work differs
    model, x = build(model_name)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    s, cpu = first_call(side, model, x)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (after.ru_utime + after.ru_stime) - (kids.ru_utime + kids.ru_stime)  # the C++ compiler
    print(json.dumps({"seconds": s, "cpu_seconds": cpu,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(model_name: str, pairs: int, procs: int) -> dict:
    a, b = [], []
    first_call("eager", *build(model_name))  # warm imports and lazy inits on both paths
    first_call("census", *build(model_name))
    for i in range(pairs):
        model, x = build(model_name)  # a fresh model per pair, shared by both sides
        order = ("eager", "census") if i % 2 == 0 else ("census", "eager")
        for side in order:
            (a if side == "eager" else b).append(first_call(side, model, x))
    wall = [y[0] / z[0] for y, z in zip(b, a)]
    cpu = [y[1] / z[1] for y, z in zip(b, a)]
    rss: dict[str, list] = {"eager": [], "census": [], "inductor": []}
    secs: dict[str, list] = {"eager": [], "census": [], "inductor": []}
    cpus: dict[str, list] = {"eager": [], "census": [], "inductor": []}
    for _ in range(procs):
        for side in rss:
            r = one_process(side, model_name)
            rss[side].append(r["peak_rss_mb"]), secs[side].append(r["seconds"]), cpus[side].append(r["cpu_seconds"])
    med = {k: statistics.median(v) for k, v in rss.items()}
    smed = {k: statistics.median(v) for k, v in secs.items()}
    cmed = {k: statistics.median(v) for k, v in cpus.items()}
    return {
        "model": model_name, "pairs": pairs, "processes_per_side": procs,
        "eager_first_call_s": statistics.median(t[0] for t in a), "census_s": statistics.median(t[0] for t in b),
        "eager_first_call_cpu_s": statistics.median(t[1] for t in a), "census_cpu_s": statistics.median(t[1] for t in b),
        "time_ratio": statistics.median(wall), "cpu_time_ratio": statistics.median(cpu),
        "rss_mb": med, "rss_ratio": med["census"] / med["eager"],
        "fresh_process_first_call_s": smed, "fresh_process_first_call_cpu_s": cmed,
        "inductor_vs_census": smed["inductor"] / smed["census"],
        "inductor_vs_census_cpu": cmed["inductor"] / cmed["census"],
    }


def rows(results: list[dict]) -> list[dict]:
    out = []
    for r in results:
        m = r["model"]
        out += [
            {"name": f"census / eager-compile first call, CPU time ({m})", "value": r["cpu_time_ratio"], "unit": "×",
             "goal": "<= 1.10", "met": r["cpu_time_ratio"] <= 1.10},
            {"name": f"census / eager-compile first call, wall time ({m})", "value": r["time_ratio"], "unit": "×",
             "goal": "<= 1.10", "met": r["time_ratio"] <= 1.10},
            {"name": f"census / eager-compile peak RSS ({m})", "value": r["rss_ratio"], "unit": "×",
             "goal": "<= 1.10", "met": r["rss_ratio"] <= 1.10},
            {"name": f"inductor cold first call / census, CPU time ({m})", "value": r["inductor_vs_census_cpu"],
             "unit": "×", "goal": ">= 10", "met": r["inductor_vs_census_cpu"] >= 10},
            {"name": f"inductor cold first call / census, wall time ({m})", "value": r["inductor_vs_census"],
             "unit": "×", "goal": ">= 10", "met": r["inductor_vs_census"] >= 10},
        ]
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--procs", type=int, default=2, help="fresh processes per side for RSS and inductor")
    ap.add_argument("--models", default="mlp,transformer")
    ap.add_argument("--json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return {}
    from graphstitch.dynamo import quiet_dynamo_warnings
    quiet_dynamo_warnings()
    results = [measure(m, args.pairs, args.procs) for m in args.models.split(",")]
    for r in results:
        print(f"{r['model']:12s} census {r['census_cpu_s']:.3f} s CPU vs eager-compile {r['eager_first_call_cpu_s']:.3f} s: "
              f"ratio {r['cpu_time_ratio']:.3f} (wall {r['time_ratio']:.3f}; median of {r['pairs']} pairs); peak RSS "
              f"{r['rss_mb']['census']:.0f} vs {r['rss_mb']['eager']:.0f} MB: {r['rss_ratio']:.3f}; "
              f"inductor cold {r['fresh_process_first_call_cpu_s']['inductor']:.2f} s CPU vs census "
              f"{r['fresh_process_first_call_cpu_s']['census']:.2f} s: {r['inductor_vs_census_cpu']:.1f}× "
              f"(wall {r['inductor_vs_census']:.1f}×)")
    out = {"benchmark": "census_overhead", "results": results, "rows": rows(results)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
