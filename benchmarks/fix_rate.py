"""Fix rate of `graphstitch fix` on the public fix corpus (tests/fix_corpus/).

For every corpus program: run `fix` (rewrites first, then config flags and run-time hatches
for the sites no rewrite fixed), take each site's best verified fix, write its patch, and
re-check that patch from a pristine copy (a fresh census on a copy of the untouched project
with only that patch applied). Prints:

- the share of corpus sites with a verified fix, by strategy;
- the share with a verified *written* patch (a source diff graphstitch can apply);
- the false-verified count: verified in the trial but not when re-checked from pristine (must be 0);
- the wall time of all trials per site relative to one census (with -j);
- each program's outcome against its declared ``EXPECT``.

    python benchmarks/fix_rate.py [-j 2] [--only NAME ...] [--json FILE] [--all-kinds]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from graphstitch.fix import run_fix
from graphstitch.fix.candidates import Candidate
from graphstitch.fix.patches import WRITABLE_KINDS, planned_files
from graphstitch.fix.trials import WRITTEN_KINDS, Fix, FixReport, evaluate
from graphstitch.fix.workspace import Workspace
from graphstitch.targets import Options

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fix_corpus"
FAST_KINDS = WRITTEN_KINDS   # what `graphstitch fix` tries by default
# sets collected by someone who had not read the rules
HELD_OUT = tuple(["unseen"] + [f"unseen{i}" for i in range(2, 22)])   # the held-out sets, oldest first


def expect_of(path: Path) -> str:
    if path.is_dir():
        path = path / "factories.py"
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECT" for t in node.targets):
            return str(ast.literal_eval(node.value))
    return "?"


def written_files(fix: Fix, report: FixReport, ws: Workspace, opts: Options) -> dict[str, str] | str:
    """The patch graphstitch would write for this fix, computed from the pristine files, or
    why there is none."""
    if fix.rule is None and fix.kind not in WRITABLE_KINDS:
        return f"a {fix.kind} candidate is not written as source"
    try:
        return planned_files(fix, report, ws, opts)
    except (LookupError, OSError, SyntaxError) as e:
        return f"{type(e).__name__}: {e}"


def programs(only: list[str] | None, dirs: list[str] = ()) -> list[tuple[Path, str, str, str]]:
    """(path, TARGET, project root, group) of every corpus program: a file with a `target()`
    factory, or a project folder (its `factories.py:target`, the folder as the project).
    Groups "unseen", "unseen2" ... "unseen21": programs in those folders, collected from public
    code by someone who had not read the rules (see their READMEs: which rules came after);
    "corpus": the rest. Each of DIRS (a set kept outside
    the repo) is its own group, named by its folder."""
    out = []
    groups = [("corpus", CORPUS), *((g, CORPUS / g) for g in HELD_OUT)] if not dirs else []
    for group, d in groups + [(Path(x).resolve().name, Path(x).resolve()) for x in dirs]:
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if (only and p.stem not in only) or p.name.startswith(("_", ".")) or p.name in HELD_OUT:
                continue
            if p.suffix == ".py":
                out.append((p, f"{p}:target", str(ROOT) if group in ("corpus", *HELD_OUT) else str(d), group))
            elif (p / "factories.py").is_file():
                out.append((p, f"{p / 'factories.py'}:target", str(p), group))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--dir", action="append", default=[], metavar="DIR",
                    help="measure the programs in DIR instead (a held-out set kept outside the repo; its own group)")
    ap.add_argument("--group", action="append", default=[], metavar="NAME",
                    help="only this group (corpus, unseen, unseen2, ...; repeatable)")
    ap.add_argument("--json")
    ap.add_argument("--all-kinds", action="store_true", help="also try leaf_function/custom_op/allow_in_graph "
                    "(never written as patches; slower)")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--combine", nargs="+", metavar="JSON", help="no run: totals over earlier --json files "
                    "(a program in a later file replaces the earlier row, e.g. a re-run with --only)")
    a = ap.parse_args()
    if a.combine:
        merged: dict[str, dict] = {}
        for f in a.combine:
            for r in json.loads(Path(f).read_text())["rows"]:
                if "site_outcomes" not in r:   # an older file: outcomes joined by commas
                    r["site_outcomes"] = [] if r["outcome"].startswith("none: no break") else r["outcome"].split(",")
                merged[r["program"]] = r
        return summary([merged[k] for k in sorted(merged)], a.json)
    opts = Options(backend="aot_eager")
    rows = []
    t_all = time.perf_counter()
    for path, spec, root, group in programs(a.only, a.dir):
        if a.group and group not in a.group:
            continue
        report = run_fix(spec, opts, jobs=a.j, timeout=a.timeout, project_root=root,
                         kinds=None if a.all_kinds else FAST_KINDS)
        outcomes = []
        refusals: dict[str, list[str]] = {}   # site -> why it has no fix, or why the pristine re-check refused it
        for site in report.sites:
            best = next((f for f in report.fixes_for(site.id) if f.verified), None)
            if best is None:
                # why not: each candidate tried (its reasons), each rule that matched but proposed nothing
                refusals[str(site.id)] = [f"{f.strategy} {f.candidate}: " + "; ".join(f.why_not)
                                          for f in report.fixes_for(site.id)] + \
                    [f"{r.rule}: {r.reason}" for r in report.refused + report.no_candidate if r.site == site.id]
                outcomes.append("none")
                continue
            ws = Workspace(spec, root, root)
            patch = written_files(best, report, ws, opts)
            status = best.strategy
            if not isinstance(patch, str):
                # Re-check from pristine: only this patch on an untouched copy of the project.
                trial = ws.census(opts, patch, a.timeout)
                again = evaluate(site, Candidate(best.kind, best.candidate, best.patches), report, trial)
                if not again.verified:
                    refusals[str(site.id)] = list(again.why_not)
                    print(f"  false-verified {site.id}: {best.strategy}: " + " | ".join(again.why_not), flush=True)
                    outcomes.append(f"false-verified({best.strategy}: {'; '.join(again.why_not)[:120]})")
                    continue
            else:
                status += "(unwritten)"
                refusals[str(site.id)] = [f"verified, not written: {patch}"]
            outcomes.append(status)
        expect = expect_of(path)
        got = ",".join(outcomes) if outcomes else "none: no break"
        match = got.split(",")[0].split("(")[0] == expect.split(":")[0] if outcomes else expect.startswith("none")
        rows.append({"program": path.stem, "group": group, "path": str(path), "sites": len(report.sites),
                     "outcome": got, "site_outcomes": outcomes, "refusals": refusals,
                     "expect": expect,
                     "match": match, "error": report.error.headline if report.error else None,
                     "census_s": report.census_seconds, "trials_s": report.trials_seconds})
        print(f"{path.stem:28s} sites={len(report.sites)} got={got:40s} expect={expect[:50]:50s} "
              f"{'ok' if match else 'DIFF'}  census {report.census_seconds or 0:.1f}s trials {report.trials_seconds or 0:.1f}s",
              flush=True)
        if a.json:   # after each program: a run stopped early still leaves its rows (--combine sums them)
            Path(a.json).write_text(json.dumps({"rows": rows, "partial": True}, indent=1))
    return summary(rows, a.json, wall=time.perf_counter() - t_all, jobs=a.j)


def summary(rows: list[dict], json_path: str | None, *, wall: float | None = None, jobs: int = 2) -> int:
    """Totals over per-program rows (from this run, or combined from several --json files),
    for the corpus and for the unseen programs apart: a number on programs the rules were
    written from says little about code in the wild."""
    out: dict[str, dict] = {"rows": rows}
    false_total = 0
    for group in dict.fromkeys(r.get("group", "corpus") for r in rows):
        mine = [r for r in rows if r.get("group", "corpus") == group]
        if not mine:
            continue
        by_strategy: Counter[str] = Counter()
        sites_total = written = false_verified = 0
        for r in mine:
            outcomes = r["site_outcomes"]
            sites_total += len(outcomes)
            for o in outcomes:
                if o.startswith("false-verified"):
                    false_verified += 1
                elif o != "none":
                    by_strategy[o.removesuffix("(unwritten)")] += 1
                    written += not o.endswith("(unwritten)")
            # a row from an earlier --json keeps its EXPECT: its path may be a worktree since removed
            path = Path(r["path"]) if "path" in r else CORPUS / f"{r['program']}.py"
            expect = expect_of(path) if path.is_file() else r.get("expect", "?")
            r["expect"] = expect
            r["match"] = None if expect == "?" else \
                (outcomes[0] == expect.split(":")[0]) if outcomes else expect.startswith("none")
        n = max(sites_total, 1)
        verified = sum(by_strategy.values())
        census_s = sum(r["census_s"] or 0 for r in mine)
        trials_s = sum(r["trials_s"] or 0 for r in mine)
        per_site = trials_s / n
        mean_census = census_s / max(len(mine), 1)
        print()
        print(f"[{group}] programs: {len(mine)}   break sites: {sites_total}"
              + (f"   wall: {wall:.0f}s (-j {jobs})" if wall is not None else ""))
        print(f"[{group}] sites with a verified fix: {verified}/{sites_total} = {verified / n:.0%}   by strategy: "
              + ", ".join(f"{k} {v} ({v / n:.0%})" for k, v in by_strategy.most_common()))
        print(f"[{group}] sites with a verified, written patch (re-checked from pristine): "
              f"{written}/{sites_total} = {written / n:.0%}")
        print(f"[{group}] false-verified (verified in trial, refused from pristine): {false_verified}")
        # Per program too: one program with many sites must not decide the share.
        breaking = [r for r in mine if r["site_outcomes"]]
        whole = sum(all(o != "none" and not o.startswith("false-verified") for o in r["site_outcomes"]) for r in breaking)
        print(f"[{group}] programs with every site verified: {whole}/{len(breaking)}")
        print(f"[{group}] trials per site: {per_site:.1f}s = {per_site / max(mean_census, 1e-9):.2f}x one census "
              f"({mean_census:.1f}s)")
        checked = [r for r in mine if r["match"] is not None]
        if checked:
            print(f"[{group}] outcome as expected: {sum(bool(r['match']) for r in checked)}/{len(checked)} programs")
            for r in checked:
                if not r["match"]:
                    print(f"  differs: {r['program']}: got {','.join(r['site_outcomes']) or 'no site'}, "
                          f"expected {r['expect']}")
        out[group] = {"programs": len(mine), "sites": sites_total, "verified": verified, "written": written,
                      "programs_all_verified": whole, "breaking_programs": len(breaking),
                      "false_verified": false_verified, "by_strategy": dict(by_strategy),
                      "trials_per_site_s": per_site, "census_s": mean_census}
        false_total += false_verified
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=1))
    return 1 if false_total else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
