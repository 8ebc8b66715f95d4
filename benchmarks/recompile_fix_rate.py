"""Recompile fix rate of `graphstitch fix` on the recompile corpus (benchmarks/recompile_corpus/).

For every program: run `fix` (its recompile-cause trials run with a repeat pass), take each
avoidable cause's best verified fix, write its patch into a pristine copy of the corpus and
census that copy in a fresh process (with a repeat pass): a fix verified in its trial whose
cause still recompiles there, or that adds a break site, cause or limit hit, or whose outputs
differ from eager, is **false-verified**. Prints, per program and in total:

- causes, avoidable causes with a verified fix (the goal: >= 80%), expected causes explained;
- recompiles before -> after (the first pass over the factory's calls) and limit hits;
- false-verified (must be 0);
- each program's outcome against its ``EXPECT``.

    python benchmarks/recompile_fix_rate.py [-j 2] [--only NAME ...] [--json benchmarks/recompile_fix_rate.json]
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from graphstitch.fix import WRITTEN_KINDS, run_fix
from graphstitch.fix.patches import cause_files
from graphstitch.fix.workspace import Workspace
from graphstitch.model import AVOIDABLE_KINDS
from graphstitch.targets import Options

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "benchmarks" / "recompile_corpus"


def expect_of(path: Path) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECT" for t in node.targets):
            return str(ast.literal_eval(node.value))
    return "?"


def pristine_check(ws: Workspace, files: dict[str, str], opts: Options) -> tuple[int, int, list[str]]:
    """Census the untouched corpus with only FILES patched, in a fresh process, with a repeat
    pass and fresh inputs, against the original code's eager run: (first-pass recompiles,
    limit hits, why it is not clean)."""
    c = ws.census(dataclasses.replace(opts, repeat=1, fresh=True), files, 600)
    why = []
    if c.error:
        why.append(f"error: {c.error.headline[:120]}")
    if c.sites:
        why.append(f"{len(c.sites)} break site(s)")
    if any(r.repeats for r in c.recompiles):
        why.append("recompiles on the repeat pass")
    if not c.outputs_match_eager:
        why.append(f"outputs differ from eager: {c.output_mismatch}")
    if c.checks.fresh_outputs_match is False:
        why.append(f"fresh outputs differ: {c.checks.fresh_mismatch}")
    return c.first_pass_recompiles, len(c.limit_hits), why


def run_one(path: Path, jobs: int) -> dict[str, object]:
    opts = Options(backend="aot_eager")
    spec = f"{path}:target"
    t0 = time.perf_counter()
    rep = run_fix(spec, opts, jobs=jobs, kinds=WRITTEN_KINDS, project_root=str(CORPUS))
    ws = Workspace.of(spec, str(CORPUS))
    causes = []
    files: dict[str, str] = {}
    for r in rep.recompiles:
        best = next((f for f in rep.cause_fixes if f.cause == r.id and f.verified), None)
        ex = next((e for e in rep.explained if e.cause == r.id), None)
        row = {"cause": f"{r.kind} {r.subject} in {r.id.function if r.id else '?'}", "count": r.count - r.repeats - r.checks,
               "avoidable": r.kind in AVOIDABLE_KINDS, "expected": bool(r.expected),
               "explained": ex.reason if ex else None, "fix": best.candidate if best else None,
               "tried": len([f for f in rep.cause_fixes if f.cause == r.id]),
               "why_not": sorted({w for f in rep.cause_fixes if f.cause == r.id for w in f.why_not})[:4]}
        if best is not None:
            try:
                for p, text in cause_files(best, rep, ws).items():
                    files[p] = text   # one fix per cause; a corpus program has one cause
            except (LookupError, OSError, SyntaxError) as e:
                row["write_error"] = str(e)
        causes.append(row)
    before = rep.first_pass_recompiles
    after, hits_after, why = (before, len(rep.limit_hits), ["nothing written"]) if not files else \
        pristine_check(ws, files, opts)
    fixed = [c for c in causes if c["fix"]]
    false_verified = bool(files) and bool(why or after > sum(int(c["count"]) for c in causes if not c["fix"]))
    if rep.error:
        outcome = f"error: {rep.error.headline[:80]}"
    elif any(c["avoidable"] for c in causes):
        outcome = "fixed" if all(c["fix"] for c in causes if c["avoidable"]) else \
            "none: " + "; ".join(str(c["explained"] or c["why_not"]) for c in causes if c["avoidable"] and not c["fix"])
    else:
        outcome = "expected" if causes and all(c["expected"] for c in causes) else "no recompile"
    return {"program": path.stem, "expect": expect_of(path), "outcome": outcome, "causes": causes,
            "recompiles_before": before, "recompiles_after": after, "limit_hits_before": len(rep.limit_hits),
            "limit_hits_after": hits_after, "pristine_why": why if files else [], "false_verified": false_verified,
            "fixed": len(fixed), "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "recompile_fix_rate.json"))
    ap.add_argument("--merge", action="store_true", help="keep the other programs' rows of --json (re-run the --only ones)")
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    progs = sorted(p for p in CORPUS.glob("*.py") if not a.only or p.stem in a.only)
    kept = json.loads(Path(a.json).read_text()).get("rows", []) if a.merge and Path(a.json).exists() else []
    kept = [r for r in kept if r["program"] not in {p.stem for p in progs}]
    rows: list[dict[str, object]] = []
    for p in progs:
        row = run_one(p, a.jobs)
        rows.append(row)
        print(f"{row['program']:24} {str(row['outcome'])[:60]:60} recompiles {row['recompiles_before']}->"
              f"{row['recompiles_after']} limit {row['limit_hits_before']}->{row['limit_hits_after']}"
              f"{'  FALSE-VERIFIED' if row['false_verified'] else ''}  expect {str(row['expect'])[:30]} "
              f"({row['seconds']} s)", flush=True)
        Path(a.json).write_text(json.dumps({"rows": kept + rows}, indent=1) + "\n")   # after every program
    rows = sorted(kept + rows, key=lambda r: str(r["program"]))
    causes = [c for r in rows for c in r["causes"]]
    avoid = [c for c in causes if c["avoidable"]]
    expected = [c for c in causes if c["expected"]]
    summary = {
        "programs": len(rows), "causes": len(causes), "avoidable": len(avoid),
        "avoidable_fixed": sum(1 for c in avoid if c["fix"]),
        "expected": len(expected), "expected_explained": sum(1 for c in expected if c["explained"]),
        "recompiles_before": sum(r["recompiles_before"] for r in rows),
        "recompiles_after": sum(r["recompiles_after"] for r in rows),
        "limit_hits_before": sum(r["limit_hits_before"] for r in rows),
        "limit_hits_after": sum(r["limit_hits_after"] for r in rows),
        "false_verified": sum(1 for r in rows if r["false_verified"]),
        "outcome_equals_expect": sum(1 for r in rows if r["outcome"].split(":")[0] == r["expect"].split(":")[0]),
        "torch": __import__("torch").__version__, "seconds": round(sum(r["seconds"] for r in rows), 1),
    }
    summary["fix_rate"] = round(summary["avoidable_fixed"] / max(1, summary["avoidable"]), 3)
    Path(a.json).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    sys.exit(0 if summary["false_verified"] == 0 else 1)


if __name__ == "__main__":
    main()
