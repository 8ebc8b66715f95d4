"""Run graphstitch's benchmarks; write benchmarks/results.json and benchmarks/results.md.

    python benchmarks/run_all.py [--only census_overhead,regional]

Runs the known scripts (SCRIPTS, in that order) and any other benchmarks/*.py, each in its own
process. A script that takes `--json FILE` writes `"rows": [{"name", "value", "unit", "goal"?,
"met"?}, ...]` (ratios measured side by side in one run), which become the Markdown table, and
anything else it writes is kept in results.json; for a script without `--json`, the last lines
it prints are kept instead. A known script that is not there yet is skipped with a note; one
that fails is reported with its exit code and last line of output, and the others still run.

Then every measured row is compared with the same row of the README's last numbers (the table
under "### Benchmarks"): the direction comes from the row's goal ("<= X": lower is better,
">= X": higher) or its "better" key, and a row worse by more than --tolerance (default 10 %)
is printed as REGRESSED (also kept in results.json as "vs_readme"). `--compare-only` compares
the last results.json without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


_README_ROW = re.compile(r"^\|\s*([\w-]+)\s*\|\s*(.+?)\s*\|\s*\**(-?[\d.]+)\**[^|]*\|\s*([^|]*?)\s*\|")


def readme_numbers(path: Path = ROOT / "README.md") -> dict[tuple[str, str], tuple[float, str]]:
    """(benchmark, measurement) -> (value, goal) from the README's benchmark table."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("### Benchmarks"):
            inside = True
        elif inside and line.startswith("#"):
            break
        elif inside and (m := _README_ROW.match(line)):
            out[(m.group(1), m.group(2))] = (float(m.group(3)), m.group(4))
    return out


def _better(row: dict, goal: str) -> str | None:
    g = (row.get("goal") or goal or "").strip()
    return row.get("better") or ("lower" if g.startswith("<=") else "higher" if g.startswith(">=") else None)


def compare_with_readme(results: list[dict], readme: dict[tuple[str, str], tuple[float, str]],
                        tolerance: float) -> list[dict]:
    """Each measured row beside the README's number for it; ``regressed`` when it moved the
    wrong way by more than TOLERANCE (a share)."""
    out = []
    for r in results:
        for row in r.get("rows", []) if r.get("status") == "ok" else []:
            key = (r["benchmark"], row["name"])
            if key not in readme or not isinstance(row.get("value"), (int, float)):
                continue
            old, goal = readme[key]
            new, better = float(row["value"]), _better(row, goal)
            change = (new - old) / old if old else 0.0
            worse = better is not None and (change > tolerance if better == "lower" else change < -tolerance)
            out.append({"benchmark": key[0], "name": key[1], "readme": old, "now": new, "change": change,
                        "better": better, "regressed": worse})
    return out


def print_comparison(rows: list[dict]) -> None:
    if not rows:
        print("no row to compare with the README's benchmark table")
        return
    print("vs the README's last numbers (now / README):")
    for c in rows:
        mark = "REGRESSED" if c["regressed"] else "ok" if c["better"] else "(no direction)"
        print(f"  {mark:<14} {c['benchmark']}: {c['name']}: {c['readme']:.3g} -> {c['now']:.3g} "
              f"({c['change']:+.0%}, {c['better'] or '?'} is better)")
    bad = [c for c in rows if c["regressed"]]
    print(f"{len(bad)} regressed of {len(rows)} compared" + (": " + "; ".join(f"{c['benchmark']}: {c['name']}"
                                                                         for c in bad) if bad else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(SCRIPTS) + " and other benchmarks/*.py")
    ap.add_argument("--tolerance", type=float, default=0.10, help="a row worse than the README's by more than this "
                    "share is a regression (default 0.10)")
    ap.add_argument("--compare-only", action="store_true", help="compare the last results.json with the README; run nothing")
    args = ap.parse_args()
    if args.compare_only:
        last = json.loads((HERE / "results.json").read_text())
        print_comparison(compare_with_readme(last["results"], readme_numbers(), args.tolerance))
        return
    found = sorted(p.stem for p in HERE.glob("*.py") if p.stem != "run_all" and not p.stem.startswith("_"))
    known = SCRIPTS + [n for n in found if n not in SCRIPTS]
    names = args.only.split(",") if args.only else known
    unknown = set(names) - set(known)
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    import platform

    from graphstitch.files import atomic_write
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
    # Only what ran now: rows kept from an earlier results.json are not new measurements.
    vs = compare_with_readme([r for r in results if r["benchmark"] in names], readme_numbers(), args.tolerance)
    atomic_write(HERE / "results.json", json.dumps({"meta": meta, "results": results, "vs_readme": vs}, indent=2) + "\n")
    atomic_write(HERE / "results.md", markdown(results, meta))
    print((HERE / "results.md").read_text())
    print_comparison(vs)


if __name__ == "__main__":
    main()
