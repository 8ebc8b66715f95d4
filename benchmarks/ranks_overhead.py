"""Wall time of `graphstitch ranks --script` vs plain torchrun on the same 2-rank script,
measured side by side (alternating) in one run; prints the ratio.

    PYTHONPATH=src python benchmarks/ranks_overhead.py [--repeat 3] [--nproc 2]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "targets_ranks" / "train.py"


def timed(cmd, env) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nproc", type=int, default=2)
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    args = ["--steps", "3"]
    plain = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={a.nproc}",
             str(SCRIPT), *args]
    ours = [sys.executable, "-m", "graphstitch", "ranks", "--nproc", str(a.nproc), "--script", str(SCRIPT), "--", *args]
    tp, tg = [], []
    for _ in range(a.repeat):
        tp.append(timed(plain, env))
        tg.append(timed(ours, env))
    mp, mg = statistics.median(tp), statistics.median(tg)
    print(f"{a.nproc} ranks, median of {a.repeat}: torchrun {mp:.2f} s, graphstitch ranks {mg:.2f} s, "
          f"ratio {mg / mp:.2f}x")


if __name__ == "__main__":
    main()
