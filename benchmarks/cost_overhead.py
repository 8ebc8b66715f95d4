"""`census --cost` next to a plain census, and how stable its ranking is (issue 13's targets).

  overhead   wall time of `graphstitch census T --cost` / `graphstitch census T`, each a fresh
             process, alternating pairs; median ratio, goal <= 1.5
  stability  `census --cost` N times on a model whose two breaks' eager gaps differ 3x
             (benchmarks/targets/cost_model.py): the same top site in >= 9 of 10 runs

    python benchmarks/cost_overhead.py [--pairs N] [--runs N] [--json FILE]
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
os.environ.setdefault("OMP_NUM_THREADS", "1")  # a shared machine: no spinning thread pools
TARGET = f"{ROOT / 'benchmarks' / 'targets' / 'cost_model.py'}:target"
EXE = [str(Path(sys.executable).with_name("graphstitch"))]


def wall(args: list[str]) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "c.json")
        t0 = time.perf_counter()
        r = subprocess.run([*EXE, "census", TARGET, "--json", out, *args], capture_output=True, text=True,
                           env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "ind")})
        t = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"census failed ({r.returncode}): {r.stderr[-500:]}")
        return t, json.load(open(out))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", dest="json_path")
    a = ap.parse_args()
    ratios, plain_t, cost_t = [], [], []
    for _ in range(a.pairs):
        p, _ = wall([])
        c, _ = wall(["--cost"])
        plain_t.append(p)
        cost_t.append(c)
        ratios.append(c / p)
    tops, gaps = [], []
    for _ in range(a.runs):
        _, d = wall(["--cost"])
        sites = d["cost"]["sites"]
        tops.append(sites[0]["site"]["code"] if sites else None)
        if len(sites) >= 2:
            gaps.append(sites[0]["seconds"]["median_s"] / max(sites[1]["seconds"]["median_s"], 1e-9))
    top = max(set(tops), key=tops.count)
    res = {"plain_wall_s": statistics.median(plain_t), "cost_wall_s": statistics.median(cost_t),
           "overhead_ratio": statistics.median(ratios), "overhead_goal": 1.5,
           "top_site": top, "top_site_runs": tops.count(top), "runs": a.runs,
           "gap_ratio_median": statistics.median(gaps) if gaps else None}
    print(f"census        {res['plain_wall_s']:.2f} s (median of {a.pairs}, fresh process)")
    print(f"census --cost {res['cost_wall_s']:.2f} s   ratio {res['overhead_ratio']:.2f}x (goal <= 1.5x)")
    print(f"top site by cost: {top!r} in {res['top_site_runs']}/{a.runs} runs (goal >= 9/10); "
          f"measured gap ratio top/second {res['gap_ratio_median']:.2f}x (built as 3x)")
    if a.json_path:
        Path(a.json_path).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
