"""A maintainer's workflow on real torch.compile: a library checkout on PYTHONPATH is the
project (``--project``), the factory lives outside it, and verified patches land in the
library's own files.

Mechanisms covered: a site on line 2 of a condition spanning lines, inside a ``forward``
behind a ``functools.wraps`` decorator (the `if` becomes ``torch.where`` and the ``.item()``
in the condition stays a tensor); MoE routing over the experts a batch hits (the routing
runs eagerly between compiled parts); and a real transformers model (FlaubertModel, built
from its config as ``sweep`` builds it) fixed in a copy of the transformers source.
Sites are asserted by file, line (``marked_line`` or the library's source) and GB id.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TARGETS = Path(__file__).resolve().parent / "targets_fix"


def gs(*args, cwd: Path, checkout: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    return subprocess.run([sys.executable, "-m", "graphstitch", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def toylib(tmp_path):
    """(checkout, factories folder): a src-layout library checkout and a user folder beside it."""
    shutil.copytree(TARGETS / "toylib", tmp_path / "toylib")
    shutil.copytree(TARGETS / "toylib_user", tmp_path / "user")
    return tmp_path / "toylib", tmp_path / "user"


def marked_line(path: Path, tag: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if ln.rstrip().endswith(f"# {tag}"))


def test_multi_line_condition_in_a_decorated_forward_is_rewritten_in_the_librarys_file(toylib):
    checkout, user = toylib
    layers = checkout / "src" / "toylib" / "layers.py"
    line = marked_line(layers, "ITEM")
    r = gs("fix", "factories.py:gate", "--all", "--apply", "--project", str(checkout), "--json", "all.json",
           cwd=user, checkout=checkout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((user / "all.json").read_text())
    # the library is outside the factory's project root: its identity path is the file as Python names it
    assert [(s["label"], s["strategy"]) for s in res["steps"]] == [(f"GB0124 {os.path.realpath(layers)}:{line}",
                                                                    "rewrite")]
    assert res["verified"] and res["remaining"] == []
    text = layers.read_text()
    assert "torch.where(" in text and ".item()" not in text and "@returns_tuple" in text
    assert (user / "factories.py").read_text() == (TARGETS / "toylib_user" / "factories.py").read_text()
    after = gs("census", "factories.py:gate", "--project", str(checkout), "--json", "after.json", cwd=user,
               checkout=checkout)
    assert after.returncode == 0, after.stderr[-2000:]
    census = json.loads((user / "after.json").read_text())
    assert census["sites"] == [] and census["outputs_match_eager"]


def test_moe_routing_runs_eagerly_between_compiled_parts(toylib):
    checkout, user = toylib
    layers = checkout / "src" / "toylib" / "layers.py"
    hit, where = marked_line(layers, "HIT"), marked_line(layers, "WHERE")
    r = gs("fix", "factories.py:moe", "--project", str(checkout), "--json", "fix.json", cwd=user, checkout=checkout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((user / "fix.json").read_text())
    sites = {f"GB0036 {os.path.realpath(layers)}:{n}" for n in (hit, where)}
    assert {f"{s['gb_id']} {s['id']['path']}:{s['line']}" for s in res["sites"]} == sites
    for label in sites:
        tried = [f for f in res["fixes"] if f["label"] == label]
        assert any(f["verified"] and f["strategy"] == "split" for f in tried), [(f["strategy"], f["verified"])
                                                                              for f in tried]
        # the data-dependence flags (alone and together) only move the break to the loop over the hit experts
        cfg = [f for f in tried if f["strategy"] == "config"]
        assert cfg and not any(f["verified"] for f in cfg)
    assert layers.read_text() == (TARGETS / "toylib" / "src" / "toylib" / "layers.py").read_text()   # --diff only


def test_a_decorated_forward_is_split_with_the_wrapper_running_eagerly_too(toylib):
    # The compiled frame is the decorator's wrapper; the forward under it splits, and the
    # wrapper gets disable(recursive=False) above the library's decorator.
    checkout, user = toylib
    layers = checkout / "src" / "toylib" / "layers.py"
    label = f"GB0036 {os.path.realpath(layers)}:{marked_line(layers, 'KEEP')}"
    r = gs("fix", "factories.py:positives", "--project", str(checkout), "--json", "fix.json", cwd=user,
           checkout=checkout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((user / "fix.json").read_text())
    assert [f"{s['gb_id']} {s['id']['path']}:{s['line']}" for s in res["sites"]] == [label]
    (split,) = [f for f in res["fixes"] if f["strategy"] == "split"]
    assert split["verified"] and split["label"] == label, split["why_not"]
    assert "+    @torch.compiler.disable(recursive=False)\n     @returns_tuple\n+    @torch.compiler.disable(" \
        in split["patch"]


@pytest.mark.slow
def test_a_real_transformers_model_gets_a_verified_patch_to_the_library_source(tmp_path):
    transformers = pytest.importorskip("transformers")
    checkout = tmp_path / "transformers"
    shutil.copytree(Path(transformers.__file__).resolve().parent, checkout / "src" / "transformers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "pyproject.toml").write_text('[project]\nname = "transformers"\nversion = "0"\n')
    src = checkout / "src" / "transformers" / "models" / "flaubert" / "modeling_flaubert.py"
    lines = src.read_text().splitlines()
    # the assert inside FlaubertModel.forward (the module-level helper has the same line)
    fwd = next(i for i, ln in enumerate(lines) if "class FlaubertModel" in ln)
    line = next(i for i, ln in enumerate(lines[fwd:], fwd + 1) if "assert lengths.max().item() <= slen" in ln)
    user = tmp_path / "user"
    user.mkdir()
    (user / "factories.py").write_text("from graphstitch.zoo.transformers import build\n\n\n"
                                       "def flaubert():\n    return build('FlaubertModel', 'eval')\n")
    r = gs("fix", "factories.py:flaubert", "--all", "--diff", "--project", str(checkout), "--json", "all.json",
           cwd=user, checkout=checkout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((user / "all.json").read_text())
    label = f"GB0124 {os.path.realpath(src)}:{line}"
    assert [s["label"] for s in res["steps"]] == [label] and res["verified"] and res["remaining"] == []
    assert "+++ b/src/transformers/models/flaubert/modeling_flaubert.py" in res["patch"]
    assert "+        assert lengths.max() <= slen" in res["patch"]
    assert "assert lengths.max().item() <= slen" in src.read_text()     # --diff writes nothing


@pytest.mark.slow
def test_sweep_fix_gives_a_patch_per_model_and_one_per_shared_root_cause(toylib):
    # Two models break on the same library line: each gets its combined diff, and the line's
    # patch comes out once, naming both models. Nothing in the checkout is written.
    checkout, user = toylib
    layers = checkout / "src" / "toylib" / "layers.py"
    before = layers.read_text()
    r = gs("sweep", "factories.py", "--only", "gate*", "--project", str(checkout), "--fix", "out", "--quiet",
           cwd=user, checkout=checkout)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((user / "out" / "fixes.json").read_text())
    assert res["schema"] == "graphstitch.sweep_fixes/1"
    assert sorted((m["target"], m["sites"], m["fixed"], m["verified"]) for m in res["models"]) == [
        ("factories.py:gate@eval", 1, 1, True), ("factories.py:gate_wide@eval", 1, 1, True)]
    (rc,) = res["root_causes"]
    assert rc["models"] == ["factories.py:gate@eval", "factories.py:gate_wide@eval"]
    assert rc["sites"] == [f"GB0124 {os.path.realpath(layers)}:{marked_line(layers, 'ITEM')}"]
    patch = (user / "out" / "root-cause-1.diff").read_text()
    assert patch.startswith("--- a/src/toylib/layers.py\n+++ b/src/toylib/layers.py\n") and "torch.where(" in patch
    assert "1 shared root-cause patch" in " ".join(r.stdout.split()) and layers.read_text() == before


def test_sweep_fix_refuses_a_folder_it_cannot_make_before_the_sweep(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = subprocess.run([sys.executable, "-m", "graphstitch", "sweep", str(TARGETS / "toylib_user" / "factories.py"),
                        "--fix", str(blocker / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--fix" in r.stderr and "cannot make the folder" in r.stderr, r.stderr
    assert "sweep" not in r.stdout   # nothing ran
