"""Fix breaking models of the transformers zoo in a library checkout, as a maintainer would.

    python benchmarks/zoo_fix.py [--models A,B,...] [--checkout DIR] [--budget-s S] [--json OUT] [--patches DIR]
    python benchmarks/zoo_fix.py --combine A.json B.json [--json OUT]

The checkout is the transformers source (a copy of the installed package as ``src/transformers``
with a ``pyproject.toml``, unless ``--checkout`` names a real clone) on ``PYTHONPATH``; each model
is built from its config as ``sweep`` builds it (``graphstitch.zoo.transformers.build``), by a
factory file outside the checkout, and ``graphstitch fix --all --apply --project CHECKOUT`` runs
on a private copy of the checkout (hard links: graphstitch's writes are atomic renames, so the
shared files are never changed). Then an independent census of the patched copy, in a fresh
process, checks what ``fix`` claimed: a model counts as **false-verified** if the combined patch
was reported verified but the patched census still has a site ``fix`` said it removed, has more
sites, or its outputs differ from eager.

Per model: sites, sites with a verified patch to the library, by strategy, wall time; in all:
the share of sites, false-verified (must be 0), and the library lines patched for more than one
model (one root cause, one patch upstream).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

# Breaking base models (eval, built from configs) found by `graphstitch sweep transformers` on
# transformers 5.24 / torch 2.13: MoE routing, data-dependent masks and asserts, audio feature
# masks, multimodal token checks (transformers/utils/import_utils.py), hashing attention.
DEFAULT_MODELS = [
    "LlavaModel", "FlaubertModel", "ReformerModel", "JetMoeModel", "SwitchTransformersModel", "LongformerModel",
    "SeamlessM4TModel", "MimiModel", "VitsModel", "GroundingDinoModel", "DFineModel", "Glm4vVisionModel",
    "LlavaOnevisionModel", "Gemma3Model", "XLMModel", "Florence2Model", "FastSpeech2ConformerModel",
    "Mistral3Model", "InternVLModel", "AyaVisionModel", "EncodecModel", "Idefics2Model", "Cohere2VisionModel",
    "Idefics3Model", "LlavaNextModel",
]


def make_checkout(dest: Path) -> Path:
    """A checkout-shaped copy of the installed transformers: src/transformers + pyproject.toml."""
    import transformers

    src = Path(transformers.__file__).resolve().parent
    shutil.copytree(src, dest / "src" / "transformers", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "pyproject.toml").write_text(f'[project]\nname = "transformers"\nversion = "{transformers.__version__}"\n')
    return dest


def private_copy(checkout: Path, dest: Path) -> Path:
    """Hard-linked copy: cheap, and safe because every graphstitch write replaces the link."""
    subprocess.run(["cp", "-al", str(checkout), str(dest)], check=True)
    return dest


def factory_file(folder: Path, models: list[str]) -> Path:
    path = folder / "zoo_factories.py"
    lines = ["from graphstitch.zoo.transformers import build", ""]
    for m in models:
        lines += ["", f"def {m}():", f"    return build({m!r}, 'eval')", ""]
    path.write_text("\n".join(lines))
    return path


def gs(args: list[str], pythonpath: Path, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath / "src"))
    return subprocess.run([sys.executable, "-m", "graphstitch", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _in_checkout(text: str) -> str:
    """Paths of the private copy as paths of the checkout (src/transformers/...)."""
    return re.sub(r"co-[A-Za-z0-9_]+/", "", text)


def one_model(name: str, checkout: Path, work: Path, factories: Path, timeout: float,
              patches: Path | None) -> dict:
    copy = private_copy(checkout, work / f"co-{name}")
    out = work / f"{name}.fixall.json"
    row: dict = {"model": name}
    t0 = time.perf_counter()
    try:
        r = gs(["fix", f"{factories}:{name}", "--all", "--apply", "--project", str(copy), "--json", str(out),
                "--timeout", str(timeout)], copy, work, timeout * 4)
    except subprocess.TimeoutExpired:
        row.update(status="timeout", wall_s=round(time.perf_counter() - t0, 1))
        return row
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    if not out.exists():
        row.update(status=f"exit {r.returncode}", reason=(r.stderr.strip().splitlines() or ["?"])[-1][:200])
        return row
    res = json.loads(out.read_text())
    verified = bool(res["verified"])
    steps = res["steps"] if verified else []
    row.update(status="ok", sites=res["start"]["sites"], final_sites=res["final"]["sites"],
               fixed=len(steps), verified=verified, strategies=dict(Counter(s["strategy"] for s in steps)),
               given_inputs_only=res.get("given_inputs_only"), remaining=res["remaining"],
               patched=sorted({_in_checkout(ln[6:].split("\t")[0]) for ln in res["patch"].splitlines()
                               if ln.startswith("+++ b/")}),
               steps=[{"label": _in_checkout(s["label"]), "rule": s.get("rule"), "strategy": s["strategy"]}
                      for s in steps])
    if patches is not None and verified and res["patch"]:
        patches.mkdir(parents=True, exist_ok=True)
        (patches / f"{name}.diff").write_text(_in_checkout(res["patch"]))
    if verified and steps:
        # The independent check: a census of the patched copy in a fresh process.
        cj = work / f"{name}.after.json"
        gs(["census", f"{factories}:{name}", "--project", str(copy), "--json", str(cj), "--timeout", str(timeout)],
           copy, work, timeout * 2)
        after = json.loads(cj.read_text()) if cj.exists() else None
        fixed_labels = {_in_checkout(s["label"]) for s in steps}
        left = {_in_checkout(f"{s['id']['gb_id']} {s['id']['path']}:{s['line']}") for s in after["sites"]} if after else set()
        row["false_verified"] = (after is None or not after.get("outputs_match_eager")
                                 or len(after["sites"]) > res["final"]["sites"] or bool(fixed_labels & left))
    else:
        row["false_verified"] = False
    shutil.rmtree(copy, ignore_errors=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated zoo names (default: the breaking models listed in the script)")
    ap.add_argument("--checkout", type=Path, help="a transformers checkout (src/transformers); default: a copy of "
                                                  "the installed package")
    ap.add_argument("--timeout", type=float, default=600, help="per census, seconds")
    ap.add_argument("--budget-s", type=float, default=0, help="stop starting models after this many seconds (0: none)")
    ap.add_argument("--json", type=Path, help="write the rows and the summary here")
    ap.add_argument("--combine", nargs="+", type=Path, metavar="JSON",
                    help="no run: the summary over the rows of earlier --json files (a later file's row "
                         "for the same model wins: a re-run)")
    ap.add_argument("--patches", type=Path, help="write each model's verified combined patch to DIR/<model>.diff")
    args = ap.parse_args()
    if args.combine:
        # a model run again in a later file replaces its earlier row
        rows = list({r["model"]: r for f in args.combine for r in json.loads(f.read_text())["rows"]}.values())
        summary = summarise(rows)
        print(json.dumps(summary, indent=1))
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return 1 if summary["false_verified"] else 0
    models = args.models.split(",") if args.models else DEFAULT_MODELS
    work = Path(tempfile.mkdtemp(prefix="gs-zoo-fix-"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(work / "inductor"))
    try:
        checkout = args.checkout.resolve() if args.checkout else make_checkout(work / "transformers")
        factories = factory_file(work, models)
        rows: list[dict] = []
        start = time.perf_counter()
        for i, m in enumerate(models, 1):
            if args.budget_s and time.perf_counter() - start > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: {len(models) - i + 1} model(s) not run", flush=True)
                break
            row = one_model(m, checkout, work, factories, args.timeout, args.patches)
            rows.append(row)
            print(f"[{i}/{len(models)}] {m}: {row['status']} · sites {row.get('sites', '?')} · fixed "
                  f"{row.get('fixed', 0)} {row.get('strategies', {})} · {row['wall_s']} s"
                  + (" · FALSE-VERIFIED" if row.get("false_verified") else ""), flush=True)
            if args.json:   # after every model: a stopped run keeps what it measured
                args.json.write_text(json.dumps({"rows": rows, "summary": summarise(rows)}, indent=1))
        summary = summarise(rows)
        print(json.dumps(summary, indent=1))
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return 1 if summary["false_verified"] else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarise(rows: list[dict]) -> dict:
    ok = [r for r in rows if r["status"] == "ok"]
    breaking = [r for r in ok if r["sites"]]
    sites = sum(r["sites"] for r in breaking)
    fixed = sum(r["fixed"] for r in breaking)
    by_line: dict[str, set[str]] = defaultdict(set)
    for r in breaking:
        for s in r["steps"]:
            by_line[s["label"].split(" ", 1)[1]].add(r["model"])
    walls = sorted(r["wall_s"] for r in rows)
    return {
        "models_run": len(rows), "breaking_models": len(breaking), "not_ok": {r["model"]: r["status"] for r in rows
                                                                             if r["status"] != "ok"},
        "sites": sites, "sites_fixed_verified": fixed, "share": round(fixed / sites, 3) if sites else None,
        "by_strategy": dict(sum((Counter(r["strategies"]) for r in breaking), Counter())),
        "false_verified": sum(bool(r.get("false_verified")) for r in rows),
        "given_inputs_only": sum(bool(r.get("given_inputs_only")) for r in breaking),
        "multi_model_lines": {line: sorted(ms) for line, ms in by_line.items() if len(ms) > 1},
        "wall_s_median": round(statistics.median(walls), 1) if walls else None, "wall_s_max": walls[-1] if walls else None,
    }


if __name__ == "__main__":
    sys.exit(main())
