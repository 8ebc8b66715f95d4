"""Run graphstitch's benchmarks; write benchmarks/results.json and benchmarks/results.md.

    python benchmarks/run_all.py [--only census_overhead,regional]

Runs the known scripts (SCRIPTS, in that order) and any other benchmarks/*.py, each in its own
process. A script that takes `--json FILE` writes `"rows": [{"name", "value", "unit", "goal"?,
"met"?}, ...]` (ratios measured side by side in one run), which become the Markdown table, and
anything else it writes is kept in results.json; for a script without `--json`, the last lines
it prints are kept instead. A known script that is not there yet is skipped with a note; one
that fails is reported with its exit code and last line of output, and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

SCRIPTS = ["census_overhead", "trace_ingest", "fix_trials", "regional"]


def run_one(name: str) -> dict:
    script = HERE / f"{name}.py"
    if not script.exists():
        return {"benchmark": name, "status": "skipped", "note": f"benchmarks/{name}.py does not exist yet"}
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")
    takes_json = '"--json"' in script.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(script)] + (["--json", str(out)] if takes_json else []),
                              env=env, cwd=ROOT, capture_output=True, text=True)
        seconds = round(time.perf_counter() - t0, 1)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
            return {"benchmark": name, "status": "failed", "seconds": seconds,
                    "note": f"exit {proc.returncode}: {tail[0][:300]}"}
        printed = [ln for ln in proc.stdout.splitlines() if ln.strip()][-6:]
        data = json.loads(out.read_text()) if out.exists() else {"printed": printed}
    return dict(data, benchmark=name, status="ok", seconds=seconds)


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return "—" if v is None else str(v)


def markdown(results: list[dict], meta: dict) -> str:
    lines = [f"Measured {meta['date']} on {meta['machine']} (torch {meta['torch']}); "
             "ratios measured side by side in one run.", "",
             "| benchmark | measurement | value | goal | met |", "|---|---|---|---|---|"]
    for r in results:
        if r["status"] != "ok":
            lines.append(f"| {r['benchmark']} | {r['status']}: {r.get('note', '')} | | | |")
            continue
        if "rows" not in r:
            lines += [f"| {r['benchmark']} | `{ln.strip().replace('|', '/')}` | | | |" for ln in r.get("printed", [])]
            continue
        for row in r["rows"]:
            met = {True: "yes", False: "**no**"}.get(row.get("met"), "")
            lines.append(f"| {r['benchmark']} | {row['name']} | {_cell(row.get('value'))}{row.get('unit', '')} | "
                         f"{row.get('goal', '')} | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(SCRIPTS) + " and other benchmarks/*.py")
    args = ap.parse_args()
    found = sorted(p.stem for p in HERE.glob("*.py") if p.stem != "run_all" and not p.stem.startswith("_"))
    known = SCRIPTS + [n for n in found if n not in SCRIPTS]
    names = args.only.split(",") if args.only else known
    unknown = set(names) - set(known)
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    import platform

    from graphstitch.report import atomic_write
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "?"
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "torch": torch_version,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}"}
    results = []
    old = HERE / "results.json"
    if args.only and old.exists():  # keep the other benchmarks' last results
        results = [r for r in json.loads(old.read_text())["results"] if r["benchmark"] not in names]
    for n in names:
        print(f"== {n}", flush=True)
        results.append(run_one(n))
        print(f"   {results[-1]['status']}" + (f": {results[-1]['note']}" if results[-1].get("note") else ""), flush=True)
    order = {n: i for i, n in enumerate(known)}
    results.sort(key=lambda r: order.get(r["benchmark"], len(order)))
    atomic_write(HERE / "results.json", json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    atomic_write(HERE / "results.md", markdown(results, meta))
    print((HERE / "results.md").read_text())


if __name__ == "__main__":
    main()
