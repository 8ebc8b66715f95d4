"""`graphstitch fix` cost: all trials' wall time / one census's wall time, side by side.

trials s = (whole `fix` run) - (one census), since the trial workers start importing torch
while the baseline census runs.

Goal: <= 3 on 2 cores (trials run in parallel, -j = cores). Each trial is a full census in
a fresh process, so the ratio is about (trials / jobs) when the machine is otherwise idle.

    PYTHONPATH=src python benchmarks/fix_trials.py [-j N]
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
# the worker processes must import this checkout too
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("OMP_NUM_THREADS", "1")

from graphstitch.target import census_subprocess  # noqa: E402

from graphstitch.fix import run_fix  # noqa: E402
from graphstitch.live import Options  # noqa: E402

SCENARIOS = ["item_helper", "skipped_helper", "print_helper"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    args = ap.parse_args()
    opts = Options(backend="aot_eager", fresh=True)
    print(f"cores {os.cpu_count()} · jobs {args.jobs} · load {os.getloadavg()[0]:.1f}")
    print(f"{'scenario':16} {'census s':>9} {'trials':>6} {'fix s':>7} {'trials s':>9} {'ratio':>6}")
    ratios = []
    for name in SCENARIOS:
        spec = f"{ROOT}/tests/targets_fix/{name}.py:factory"
        t0 = time.perf_counter()
        base, _ = census_subprocess(spec, opts)
        one = time.perf_counter() - t0
        assert base.error is None, base.error
        # the whole command: baseline census (trial workers import torch meanwhile) + trials
        t1 = time.perf_counter()
        c = run_fix(spec, opts, jobs=args.jobs)
        total = time.perf_counter() - t1
        trials = total - one
        ratios.append(trials / one)
        n = len({str(f["patches"]) for f in c.fixes})
        print(f"{name:16} {one:9.2f} {n:6d} {total:7.2f} {trials:9.2f} {trials / one:6.2f}")
    print(f"max ratio (all trials / one census) {max(ratios):.2f} (goal <= 3 on 2 cores)")


if __name__ == "__main__":
    main()
