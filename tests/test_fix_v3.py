"""Fix engine v3 on real torch.compile: the workspace is the whole project, patches land
where the user's code runs, `--all` carries on through uncovered sites, rules work from the
structure of the code (scopes, decorators, callers), the user's file stays theirs.

Sites are asserted by file, line (``marked_line``) and GB id from real censuses.
"""

import dataclasses
import difflib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import census_subprocess, marked_line
from graphstitch.fix import apply_best, run_fix
from graphstitch.fix.candidates import Candidate
from graphstitch.fix.rules import proposals
from graphstitch.fix.trials import evaluate
from graphstitch.fix.workspace import Workspace
from graphstitch.live import census_target
from graphstitch.targets import Options, Patches

TARGETS = Path(__file__).resolve().parent / "targets_fix"
OPTS = Options(backend="aot_eager")


def gs(*args, cwd, timeout=900):
    return subprocess.run([sys.executable, "-m", "graphstitch", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def pkgproj(tmp_path):
    """tests/targets_fix/pkgproj as an ordinary project: a package with the model, a factory
    beside it that imports it, and the user's own train.py."""
    root = tmp_path / "proj"
    shutil.copytree(TARGETS / "pkgproj", root)
    (root / "pyproject.toml").write_text('[project]\nname = "mypkg"\nversion = "0"\n')
    return root


# ----------------------------------------------------------------------------- the workspace

@pytest.mark.slow
def test_package_project_fix_all_apply_lands_in_the_package_and_the_users_script_compiles(pkgproj):
    # The print in Block.forward is in a loop of TinyClassifier.forward: Dynamo skips that
    # frame, so the .item() after the loop is never traced and not in the first census. The
    # print's fix uncovers it (progress, not a moved break), and --all fixes it in turn.
    layers, model = pkgproj / "mypkg" / "layers.py", pkgproj / "mypkg" / "model.py"
    item_line = marked_line(model, "ITEM")
    before = {p: p.read_text() for p in (pkgproj / "factories.py", pkgproj / "train.py")}
    first, _ = census_subprocess(f"{pkgproj}/factories.py:target", OPTS)
    assert [(s.gb_id, s.file, s.line) for s in first.sites] == [
        ("GB0059", str(layers), marked_line(layers, "PRINT"))]
    assert [(f.file, f.function) for f in first.skipped_frames] == [(str(model), "forward")]

    r = gs("fix", "factories.py:target", "--all", "--apply", "--json", "all.json", "-j", "2", cwd=pkgproj)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads((pkgproj / "all.json").read_text())
    assert [(st["strategy"], st["rule"]) for st in result["steps"]] == [("rewrite", "print-hop"),
                                                                        ("rewrite", "item-keep-tensor")]
    assert result["uncovered"] == [f"GB0124 mypkg/model.py:{item_line}"]
    assert result["verified"] and result["remaining"] == []
    assert "applied 2 rewrites, verified together, to mypkg/layers.py, mypkg/model.py" in r.stdout
    # the patches are in the package the user's code imports; the factory and script untouched
    assert "torch._higher_order_ops.print(" in layers.read_text() and ".item()" not in model.read_text()
    assert all(p.read_text() == text for p, text in before.items())
    after, _ = census_subprocess(f"{pkgproj}/factories.py:target", OPTS)
    assert after.sites == [] and after.skipped_frames == [] and after.outputs_match_eager
    run = gs("run", "--json", "run.json", "train.py", cwd=pkgproj)
    assert run.returncode == 0, run.stderr[-2000:]
    ran = json.loads((pkgproj / "run.json").read_text())
    assert ran["sites"] == [] and ran["skipped_frames"] == [] and ran["graph_count"] >= 1


def test_a_patch_verified_in_the_workspace_imports_the_patched_package_not_the_original(pkgproj):
    # One patch to a module of the package the factory imports: the workspace census sees
    # the patched module (the site is gone), the original file is untouched, and its
    # identity path and line map back to the user's file.
    layers = pkgproj / "mypkg" / "layers.py"
    ws = Workspace.of(f"{pkgproj}/factories.py:target")
    base = census_target(ws.spec, OPTS, project_root=ws.id_root)
    (site,) = base.sites
    props, _ = proposals(site, ws.project, target_file=str(pkgproj / "factories.py"), factory="target",
                         sites=base.sites)
    rw = next(p for p in props if p.rule == "print-hop")
    assert list(rw.files) == [str(layers)] and not rw.upstream
    trial = ws.census(OPTS, rw.files, 300)
    assert trial.error is None and trial.outputs_match_eager, trial.error
    assert [s.id.path for s in trial.sites] == ["mypkg/model.py"]      # the uncovered .item()
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base, trial)
    assert f.verified and f.uncovered == [f"GB0124 mypkg/model.py:{marked_line(pkgproj / 'mypkg' / 'model.py', 'ITEM')}"]
    assert "print(" in layers.read_text().split("def forward")[1]    # nothing written


def test_rules_read_the_project_from_the_same_place_and_say_outside_the_project(pkgproj, tmp_path):
    # A factory outside the project, --project pointing at it: the package's sites get
    # rewrites; with the factory's own folder as the project, the package is outside it and
    # the refusal says so (not "installed library code").
    elsewhere = tmp_path / "runner"
    elsewhere.mkdir()
    shutil.move(str(pkgproj / "factories.py"), elsewhere / "factories.py")
    (elsewhere / "pyproject.toml").write_text("[project]\nname = 'runner'\n")
    base, _ = census_subprocess(f"{elsewhere}/factories.py:target", OPTS, pythonpath=[str(pkgproj)])
    (site,) = base.sites
    props, _ = proposals(site, str(pkgproj), target_file=str(elsewhere / "factories.py"), factory="target")
    assert any(p.rule == "print-hop" and not p.upstream for p in props)
    props, _ = proposals(site, str(elsewhere), target_file=str(elsewhere / "factories.py"), factory="target")
    assert props and all(p.upstream for p in props)   # outside the project: offered upstream only
    from graphstitch.fix.patches import refuse_reason
    why = refuse_reason(site.file, None, str(elsewhere))
    assert why is not None and f"is outside the project {elsewhere}" in why


# ----------------------------------------------------------------------------- structure

def test_disabled_collective_gets_its_hatch_dropped_verified_on_two_gloo_ranks():
    path = TARGETS / "disabled_collective.py"
    report = run_fix(f"{path}:target", OPTS, jobs=2, kinds={"rewrite"})
    (site,) = report.sites
    assert (site.gb_id, site.file, site.line) == ("GB0098", str(path), marked_line(path, "CALL"))
    fix = next(f for f in report.fixes if f.rule == "drop-disable")
    assert fix.verified and fix.ranks == 2 and fix.after.sites == 0, fix.why_not
    assert "-@torch._dynamo.disable\n" in (fix.patch or "")


def test_dropping_a_disable_whose_body_does_not_trace_is_refused():
    path = TARGETS / "disabled_numpy.py"
    report = run_fix(f"{path}:target", OPTS, jobs=2, kinds={"rewrite"})
    (site,) = report.sites
    assert (site.gb_id, site.line) == ("GB0098", marked_line(path, "CALL"))
    fix = next(f for f in report.fixes if f.rule == "drop-disable")
    assert not fix.verified and fix.why_not


def _site_of(spec: str, tag: str, path: Path, opts: Options = OPTS):
    base = census_target(spec, opts, project_root=str(path.parent))
    return base, next(s for s in base.sites if s.line == marked_line(path, tag))


def test_an_extract_never_passes_a_name_the_function_binds_only_later():
    # `causal` is read in the branch not taken and assigned after the statement: a helper
    # call `_h(x, mask, causal)` would raise; the extract is refused with that reason.
    path = TARGETS / "extract_order.py"
    base, _ = census_subprocess(f"{path}:target", OPTS)
    (site,) = base.sites
    assert (site.gb_id, site.file, site.line) == ("GB0036", str(path), marked_line(path, "LATE"))
    props, refused = proposals(site, str(path.parent), target_file=str(path), factory="target", sites=base.sites)
    assert not any(p.rule == "extract-hatch" for p in props)
    assert any(r.rule == "extract-hatch" and "`causal`, which the function binds only later" in r.reason
               for r in refused), refused


def test_comprehension_site_maps_to_its_statement_and_the_helper_takes_no_loop_variable(tmp_path):
    # Python 3.11 reports the .item() in its <listcomp> frame; the statement holding the
    # comprehension is the site's: an extracted helper reads self and x, never the loop
    # variable `r`; keeping the tensors verifies (torch.tensor of the list -> torch.stack).
    prog = tmp_path / "comp.py"
    prog.write_text(
        "import torch\n\n\nclass RowMax(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scale = 2.0\n\n    def forward(self, x):\n"
        "        peaks = [r.max().item() * self.scale for r in x]  # COMP\n"
        "        return x * torch.tensor(peaks).unsqueeze(1)\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    return [(RowMax(), (torch.randn(3, 4),), {})]\n")
    base, site = _site_of(f"{prog}:target", "COMP", prog)
    assert (site.gb_id, site.function) == ("GB0124", "<listcomp>")
    props, _ = proposals(site, str(tmp_path), target_file=str(prog), factory="target")
    ex = next(p for p in props if p.rule == "extract-hatch")
    assert "peaks = _forward_10(self, x)" in ex.files[str(prog)]
    keep = next(p for p in props if p.rule == "item-keep-tensor")
    assert "return x * torch.stack(peaks).unsqueeze(1)" in keep.files[str(prog)]
    f = evaluate(site, Candidate(keep.strategy, keep.label, Patches(), keep), base,
                 Workspace(f"{prog}:target", str(tmp_path), str(tmp_path)).census(OPTS, keep.files, 300))
    assert f.verified, f.why_not


def test_identical_lines_in_two_classes_are_two_sites_and_each_rewrite_removes_one(tmp_path):
    src = TARGETS / "twin_flips.py"
    root = str(TARGETS.parent.parent)
    base = census_target(f"{src}:target", OPTS, project_root=root)
    assert sorted(s.line for s in base.sites) == sorted([marked_line(src, "H"), marked_line(src, "V")])
    for site in base.sites:
        props, _ = proposals(site, root, target_file=str(src), factory="target")
        rw = next(p for p in props if p.rule == "if-where-return")
        f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                     Workspace(f"{src}:target", root, root).census(OPTS, rw.files, 300))
        assert f.verified and f.after.sites == 1, f.why_not


def test_a_hatch_that_freezes_the_clock_is_refused_and_a_timing_print_is_compared_masked(tmp_path):
    prog = tmp_path / "timed.py"
    prog.write_text(
        "import time\n\nimport torch\n\n\ndef step(x):\n    t0 = time.perf_counter()  # CLOCK\n    y = x.sin() * 2\n"
        "    print(f'step took {time.perf_counter() - t0:.6f} s')  # PRINT\n    return y\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    return [(step, (torch.randn(4),), {})]\n")
    base, clock = _site_of(f"{prog}:target", "CLOCK", prog)
    props, refused = proposals(clock, str(tmp_path), target_file=str(prog), factory="target")
    assert not any(p.rule == "extract-hatch" for p in props)
    assert any(r.rule == "extract-hatch" and "time.perf_counter" in r.reason for r in refused)


# ----------------------------------------------------------------------------- what the verifier proves

def _keep_tensor_fix(prog: Path, tag: str, tmp_path: Path):
    base, site = _site_of(f"{prog}:target", tag, prog)
    props, _ = proposals(site, str(tmp_path), target_file=str(prog), factory="target")
    keep = next(p for p in props if p.rule == "item-keep-tensor")
    trial = Workspace(f"{prog}:target", str(tmp_path), str(tmp_path)).census(OPTS, keep.files, 300)
    return evaluate(site, Candidate(keep.strategy, keep.label, Patches(), keep), base, trial), trial


# The original raises on the first fresh set; the second keeps what held the invariant.
KEPT_ON_FRESH = {
    # Shuffled bounds [4, 1] give split sizes [4, -3]: the integers are kept, floats drawn anew.
    "split_bounds": (
        "import torch\n\n\ndef seg(x, bounds):\n    lo, hi = bounds.tolist()\n"
        "    a, b = torch.split(x, [lo, hi - lo])\n    w = x.abs().max().item()  # ITEM\n"
        "    return (a.sum() + b.sum() * 2) * w\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    return [(seg, (torch.randn(4), torch.tensor([1, 4])), {})]\n"),
    # A segmentation loader's labels are whole-number floats (255 = ignore): random floats are
    # no class and cross_entropy raises; they are kept, the logits drawn anew.
    "float_labels": (
        "import torch\nimport torch.nn.functional as F\n\n\ndef loss(logits, label):\n"
        "    out = F.cross_entropy(logits, label.long(), ignore_index=255)\n"
        "    w = logits.abs().max().item()  # ITEM\n    return out * w\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    label = torch.randint(0, 4, (2, 5)).float()\n"
        "    label[0, 0] = 255\n    return [(loss, (torch.randn(2, 4, 5), label), {})]\n"),
    # A DataLoader stand-in: a list subclass whose constructor takes other arguments and whose
    # `.dataset` the code reads. The fresh set keeps the type and attributes, new batches.
    "list_subclass": (
        "import torch\n\n\nclass Batches(list):\n    def __init__(self, items, n):\n"
        "        super().__init__(items)\n        self.dataset = range(n)\n\n\n"
        "def mean_loss(loader):\n    total = torch.zeros(())\n    for x in loader:\n"
        "        total = total + x.pow(2).sum()\n    w = total.item()  # ITEM\n"
        "    return total / len(loader.dataset) * w\n\n\n"
        "def target():\n    torch.manual_seed(0)\n"
        "    return [(mean_loss, (Batches([torch.randn(3), torch.randn(3)], 6),), {})]\n"),
}


@pytest.mark.parametrize("case", sorted(KEPT_ON_FRESH))
def test_what_holds_an_invariant_stays_as_the_factory_made_it_on_fresh_inputs(case, tmp_path):
    prog = tmp_path / f"{case}.py"
    prog.write_text(KEPT_ON_FRESH[case])
    fix, trial = _keep_tensor_fix(prog, "ITEM", tmp_path)
    assert trial.checks.fresh_outputs_match is True and trial.checks.fresh_unusable is None
    assert fix.verified and fix.given_inputs_only is None, fix.why_not


def test_when_the_original_raises_on_every_fresh_set_the_fix_is_verified_on_the_given_inputs_only(tmp_path):
    # A factory-made positive-definite matrix: random floats are not, and Cholesky raises in
    # the original code itself. Nothing fresh can be compared, and the fix says so.
    prog = tmp_path / "chol.py"
    prog.write_text(
        "import torch\n\n\ndef solve(a):\n    s = a.diagonal().sum().item()  # ITEM\n"
        "    return torch.linalg.cholesky(a) * s\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    m = torch.randn(3, 3)\n"
        "    return [(solve, (m @ m.T + 3 * torch.eye(3),), {})]\n")
    fix, trial = _keep_tensor_fix(prog, "ITEM", tmp_path)
    assert trial.checks.fresh_outputs_match is None
    assert "the original code raises on fresh inputs" in (trial.checks.fresh_unusable or "")
    assert fix.verified and "cholesky" in (fix.given_inputs_only or "").lower(), fix.why_not


def test_a_generator_argument_gets_its_own_fresh_stream_in_each_run():
    # diffusers' DDPM step draws its noise from a torch.Generator passed in (an unseen-set
    # program): eager and compiled each draw from their own fresh stream of the same seed,
    # so the region split that keeps the draw eager verifies (one shared stream made the
    # second run draw other values: "outputs differ", a false refusal).
    path = Path(__file__).resolve().parent / "fix_corpus" / "unseen" / "diffusers_ddpm_variance_noise.py"
    report = run_fix(f"{path}:target", OPTS, kinds={"split"}, timeout=300)
    (site,) = report.sites
    assert (site.gb_id, site.file, site.line) == ("GB0055", str(path), marked_line(path, "BREAK"))
    (split,) = [f for f in report.fixes if f.strategy == "split"]
    assert split.verified and split.outputs_match, split.why_not


def test_outputs_compare_dicts_by_key_not_by_insertion_order():
    # A transformers ModelOutput is a dict; the compiled code of a vision-language model
    # filled `pooler_output` before `hidden_states` on fresh inputs: same values, so equal.
    import torch

    from graphstitch.live import outputs_equal
    t = torch.arange(3.0)
    assert outputs_equal({"a": t, "b": [t, t + 1]}, {"b": [t, t + 1], "a": t}) == (True, None)
    assert outputs_equal({"a": t, "b": t}, {"a": t, "c": t})[1] == "outputs differ in structure"
    assert not outputs_equal({"a": t, "b": t + 1}, {"b": t, "a": t + 1})[0]


def test_a_nan_read_with_item_equals_a_nan_and_nothing_else():
    # A training loop that diverges returns its loss as `.item()`: NaN on both sides is the
    # same output (as equal_nan for tensors); a NaN against a number still differs.
    import torch

    from graphstitch.live import outputs_equal

    def step(x):
        return (x.log().sum().item(), x * 2)

    x = torch.tensor([-1.0, 2.0])
    compiled = torch.compile(step, backend="eager")(x)
    assert math.isnan(compiled[0])
    assert outputs_equal(compiled, step(x)) == (True, None)
    assert not outputs_equal(compiled, (1.0, x * 2))[0]


def test_a_site_only_some_baseline_censuses_have_is_never_verified(tmp_path, monkeypatch):
    # Code that reads a clock gets two more baseline censuses. Here the branch holding the
    # .item() runs only in the first process (the baseline), so every trial lacks the site:
    # without the repeats a flag that changes nothing would be "verified" for it.
    prog = TARGETS / "clock_branch.py"
    line = marked_line(prog, "FIRST_RUN_ONLY")
    monkeypatch.setenv("GS_FIRST_PID_FILE", str(tmp_path / "first.pid"))
    report = run_fix(f"{prog}:target", OPTS, jobs=2, kinds={"config"})
    site = next(s for s in report.sites if s.line == line)
    assert (site.gb_id, site.file) == ("GB0124", str(prog))
    assert [(u.site, u.seen, u.runs) for u in report.unreproduced] == [(site.id, 1, 3)]
    mine = report.fixes_for(site.id)
    assert mine and not any(f.verified for f in mine)
    # the repeats are the only reason: a lone trial would have verified each of these
    assert all(f.site_gone and [w[:45] for w in f.why_not] == ["not reproducible: 1 of 3 baseline censuses of"]
               for f in mine)
    # --all likewise: no step is a fix of that site (its own rewrites come first, and would be)
    from graphstitch.fix.fixall import fix_all
    monkeypatch.setenv("GS_FIRST_PID_FILE", str(tmp_path / "first_all.pid"))
    # (round 1 is where its own rewrites are tried)
    result, _ = fix_all(f"{prog}:target", OPTS, jobs=2, timeout=300, max_rounds=1)
    assert result.steps and not any(st.label.endswith(f"clock_branch.py:{line}") for st in result.steps)


# ----------------------------------------------------------------------------- the user's file

def test_apply_keeps_encoding_crlf_tabs_and_no_final_newline(tmp_path, monkeypatch):
    # A latin-1 source with a PEP 263 line, CRLF endings, tab indentation and no final
    # newline: fix reads it (no UnicodeDecodeError), and the written patch keeps all four.
    src = ("# -*- coding: latin-1 -*-\n# café\nimport torch\n\n\ndef fn(x):\n\ty = x.sum()\n"
           "\tif y > 0:  # BREAK\n\t\tz = x * 2\n\telse:\n\t\tz = -x\n\treturn z\n\n\n"
           "def target():\n\ttorch.manual_seed(0)\n\treturn [(fn, (torch.randn(4),), {})]")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    prog = tmp_path / "prog.py"
    prog.write_bytes(src.replace("\n", "\r\n").encode("latin-1"))
    os.chmod(prog, 0o640)
    monkeypatch.chdir(tmp_path)
    report = run_fix("prog.py:target", OPTS, jobs=2, kinds={"rewrite"})
    assert report.error is None and any(f.verified and f.rule == "if-where" for f in report.fixes)
    msg, ok = apply_best(report, Workspace.of("prog.py:target"), OPTS, write=True)
    assert ok, msg
    data = prog.read_bytes()
    text = data.decode("latin-1")
    assert "café" in text and "\tz = torch.where(y > 0, x * 2, -x)\r\n" in text
    assert "\n" not in text.replace("\r\n", "") and not text.endswith("\n")
    assert (prog.stat().st_mode & 0o777) == 0o640
    assert (tmp_path / "prog.py.graphstitch.bak").read_bytes() == src.replace("\n", "\r\n").encode("latin-1")
    after, _ = census_subprocess(f"{prog}:target", OPTS)
    assert after.sites == [] and after.outputs_match_eager


# ----------------------------------------------------------------------------- structural rules

RULES_SRC = TARGETS / "structure_rules.py"


def _trial_of(factory: str, tag: str, rule: str, label: str = "", opts: Options = OPTS):
    """(site, the RULE's proposal (whose label holds LABEL), its trial's verdict) for the site tagged TAG."""
    base, site = _site_of(f"{RULES_SRC}:{factory}", tag, RULES_SRC, opts)
    root = str(RULES_SRC.parent)
    props, refused = proposals(site, root, target_file=str(RULES_SRC), factory=factory, sites=base.sites)
    rw = next((p for p in props if p.rule == rule and label in p.label), None)
    assert rw is not None, (props, refused)
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                 Workspace(f"{RULES_SRC}:{factory}", root, root).census(opts, rw.files, 300))
    return site, rw, f


def test_a_gate_kept_as_a_tensor_selects_with_where_and_leaves_branch_only_names_alone():
    # `res` exists only inside the branch: no torch.where for it (it may not exist when the
    # gate is shut), only for `h`, which the loop reads again.
    site, rw, f = _trial_of("gated", "GATE", "item-keep-tensor")
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "GATE"))
    text = rw.files[str(RULES_SRC)]
    assert "h = torch.where(" in text and "res = torch.where(" not in text
    assert f.verified, f.why_not




# (factory, tag, rule, GB id, a line of the patch): each proposal verified on real torch.compile.
STRUCTURE_CASES = [
    # a test choosing between a tensor and its copy: always the copy
    ("copied", "COPY", "same-value-arms", "GB0088", "    out = t.contiguous()  # COPY"),
    ("copied_if", "COPY_IF", "same-value-arms", "GB0088", "    t = t.clone()"),
    # code that keeps tracers off a shortcut keeps the compiler off it too
    ("tracer", "TRACER", "compiling-is-tracing", "GB0170",
     "(torch.jit.is_tracing() or torch.compiler.is_compiling()) and keep.all():"),
    # a mask or None chosen by the mask's own any(): the mask
    ("masked", "MASK", "mask-not-none", "GB0170", "key_padding_mask=blank, need_weights=False)  # MASK"),
    # an update through a mask needs no test that the mask has a True
    ("guarded", "GUARDED", "masked-update-unguarded", "GB0170", "    out[big] = limit\n    out.masked_fill_(big, limit)"),
    ("binned", "BINCOUNT", "bincount-fixed-length", "GB0036", ".index_add(0, labels, torch.ones_like(labels))"),
    # a reduction of a boolean-mask selection: on the whole tensors, unselected weighed out
    ("masked_loss", "MASKED_LOSS", "masked-reduction", "GB0036",
     'torch.where(valid, torch.nn.functional.smooth_l1_loss(pred, target, reduction="none"), 0).sum() / valid.sum()'),
    # a count of a selection's rows: the mask's own count, kept a tensor (max -> clamp)
    ("counted_rows", "COUNTED", "count-selected+item-keep-tensor", "GB0036",
     "    n_hits = hits.count_nonzero()  # COUNTED"),
    # an early return: the choice made at the final return (what runs between only binds locals)
    ("early_return", "EARLY", "if-where-return", "GB0170",
     "    # nothing active: no loss\n    gap = torch.relu(1.0 - margin)\n    return torch.where(torch.logical_not("),
    # an update through a mask's selection that reads it: in place on the whole tensor
    ("swapped", "SWAPPED", "masked-update-in-place", "GB0036", "    tokens.copy_(torch.where(pick, pool, tokens))"),
    # an assert on a tensor's Python truth: on the tensor (a run-time check in the graph)
    ("asserted", "ASSERTED", "assert-tensor", "GB0170", "assert torch.logical_not("),
    # legacy no-op wrapper
    ("legacy", "LEGACY", "drop-variable", "GB0007", "    return x @ w.detach()  # LEGACY"),
    # a generator argument whose items break: a list, made before the consumer iterates it
    ("gen_arg", "GEN_ARG", "generator-to-list", "GB8335", "_running_mean([_row_norm(r) for r in x])"),
    # a cache hit decided on the host: skipped when compiling (the miss path computes the value)
    ("memo", "MEMO", "cache-hit-not-compiled", "GB0124", "if not torch.compiler.is_compiling() and n <= self.filled.item():"),
    # a new leaf that requires grad (an accumulator): made without the flag
    ("penalised", "GRAD_FLAG", "new-tensor-without-grad-flag", "GB0225",
     "penalty = torch.tensor([0.0], device=x.device)  # GRAD_FLAG"),
    # a host-read check -> the same check in the graph
    ("checked_all", "CHECKED_ALL", "check-tensor-all-async", "GB0124", "torch._assert_async(torch.all(x.abs() < 100))"),
    # torch.equal read on the host in a check: the same test on tensors, raised in the graph
    ("binary", "EQUAL", "if-raise-check", "GB0033", "torch._assert_async(torch.all(y == y ** 2), "),
    # a roll by a tensor's value: the same permutation as a gather, the shift kept a tensor
    ("rolled", "ROLL", "roll-gather", "GB0124", "signal.index_select(-1, (torch.arange(signal.size(-1), "),
    # a column picked by a 0-d index tensor (torch reads it as an int): index_select
    ("columns", "COLUMN", "index-select-tensor", "GB0033", "table.index_select(1, (order[j]).reshape(1)).squeeze(1)"),
    # a slice whose start is read from a tensor, written: a masked fill of the positions past it
    ("padded", "PAD_FILL", "slice-bound-mask-fill", "GB0124",
     "    _view.masked_fill_((_at >= (lengths[i]) + _view.size(1) * ((lengths[i]) < 0))"
     ".reshape((-1,) + (1,) * (_view.dim() - 2)), 0)\n"),
    # ... after a plain index: that row first, then the gather
    ("ranked", "RANK_PICK", "index-select-tensor", "GB0033",
     "out[g, r] = table[g].index_select(0, (ranks[g][r]).reshape(1)).squeeze(0)  # RANK_PICK"),
    # a fill value computed from a buffer: zeros plus the 0-d tensor
    ("mid_riser", "FILL", "full-tensor-fill", "GB0033", "zero = torch.zeros_like(scale).add_((self.levels + 1) / 2)"),
    # a Python flag tested after a tensor: tested first (the tensor is not read when it is off)
    ("flagged", "FLAG", "flag-first", "GB0170", "if VERBOSE and torch.isnan(y).any():"),
    # the element count of a selection: the mask's count times the trailing size
    ("counted_numel", "NUMEL", "count-selected+item-keep-tensor", "GB0036",
     "n = ((labels >= 0).sum() * (labels.numel() // (labels >= 0).numel()))"),
    # a factory that runs backward() itself: the trial's reference build runs with autograd on
    ("grad_factory", "GRAD_FACTORY", "if-where", "GB0170", "ratio = torch.where("),
    # a warnings-filter context (a subclass of catch_warnings) not entered while compiling
    ("hushed", "HUSH_ENTER", "warnings-context-when-compiling", "GB0007",
     "with (contextlib.nullcontext() if torch.compiler.is_compiling() else hush()):"),
    # numpy on a Python number (a size from a shape): math
    ("np_scalar", "NP_SCALAR", "numpy-scalar-math", "GB0208", "n = int(math.ceil(math.log2(x.shape[-1])))"),
    # a factory that reads a clock: the two builds print other numbers, compared masked
    ("paced_factory", "PACED", "if-where", "GB0170", "y = torch.where("),
    # a method that only reports returns at once when compiling (it reports nothing on these calls)
    ("reported", "REPORT", "skip-report-when-compiling", "GB0170",
     "        if torch.compiler.is_compiling():  # graphstitch fix: a report, not traced\n            return\n"
     "        if (x.abs() > 100).any():  # REPORT"),
]


@pytest.mark.parametrize("factory,tag,rule,gb,patched", STRUCTURE_CASES, ids=[c[0] for c in STRUCTURE_CASES])
def test_a_structural_rule_removes_the_break_with_equal_outputs(factory, tag, rule, gb, patched):
    site, rw, f = _trial_of(factory, tag, rule)
    assert (site.gb_id, site.file, site.line) == (gb, str(RULES_SRC), marked_line(RULES_SRC, tag))
    text = rw.files[str(RULES_SRC)]
    assert patched in text, text
    if factory == "copied_if":
        assert "data_ptr" not in text.split("def aligned_rows")[1].split("def copied_if")[0]
    if factory == "guarded":
        assert "if big.any():" not in text
    left = 1 if factory in ("gen_arg", "paced_factory") else 0   # its graph_break() / print stays
    assert f.verified and f.after.sites == left, f.why_not


def test_the_original_pickles_its_own_classes_beside_the_patched_copy():
    # torch.save(model) finds the model's class through sys.modules by its module's name; the
    # original's eager run must see its own module there, not the patched copy's.
    site, rw, f = _trial_of("pickled", "COPY_PICKLED", "same-value-arms")
    assert (site.gb_id, site.line) == ("GB0088", marked_line(RULES_SRC, "COPY_PICKLED"))
    assert f.error is None and f.verified, (f.error, f.why_not)


def test_a_flag_that_is_on_leaves_the_tensor_test_and_is_not_verified():
    # The reordered test still reads the tensor when the flag is on: the break stays on that line.
    site, _, f = _trial_of("flagged_on", "FLAG_ON", "flag-first")
    line = marked_line(RULES_SRC, "FLAG_ON")
    assert (site.gb_id, site.line) == ("GB0170", line)
    assert not f.verified and any(w.startswith("moved, not removed: new site GB0170") and w.endswith(f":{line}")
                                  for w in f.why_not), f.why_not


def test_a_warnings_context_that_silences_the_body_is_not_verified():
    # Under compile the context is not entered: the warning it silenced eagerly is shown.
    site, _, f = _trial_of("muted", "MUTE_ENTER", "warnings-context-when-compiling")
    assert (site.gb_id, site.line) == ("GB0007", marked_line(RULES_SRC, "MUTE_ENTER"))
    assert not f.verified and any(w.startswith("side effect added") for w in f.why_not), f.why_not


def test_a_report_the_compiled_code_would_drop_is_refused():
    # The same method on inputs that make eager warn: the warning lost under compile is a
    # side effect lost, so the rewrite is not verified.
    site, _, f = _trial_of("reported_loud", "REPORT", "skip-report-when-compiling")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "REPORT"))
    assert not f.verified and any("side effect lost" in w for w in f.why_not), f.why_not


def test_an_early_return_before_code_run_for_its_effect_is_not_offered(tmp_path):
    # Moving the test to the end would run the print on the early path too.
    prog = tmp_path / "early_print.py"
    prog.write_text(RULES_SRC.read_text().replace("    gap = torch.relu(1.0 - margin)\n",
                                                  "    gap = torch.relu(1.0 - margin)\n    print(gap.shape)\n"))
    base = census_target(f"{prog}:early_return", OPTS, project_root=str(tmp_path))
    site = next(s for s in base.sites if s.line == marked_line(prog, "EARLY"))
    props, _ = proposals(site, str(tmp_path), target_file=str(prog), factory="early_return", sites=base.sites)
    assert not any(p.rule == "if-where-return" for p in props)


def test_a_call_that_writes_into_its_inputs_gets_the_same_fresh_set_as_the_original():
    # The compiled calls zero some tokens in place; the fresh set must still be made from the
    # tokens as the factory made them, as the original's is (it once compared a shuffle of the
    # written tokens with a shuffle of the pristine ones: "outputs differ" for unchanged code).
    root = str(RULES_SRC.parent)
    trial = Workspace(f"{RULES_SRC}:scrubbed", root, root).census(OPTS, {}, 300)
    assert trial.outputs_match_eager and trial.checks.fresh_outputs_match is True, trial.checks


# A mask over leading dims: as is, it broadcasts against the wrong dims (outputs differ, or
# the trial fails); reshaped over the trailing dims it selects what indexing selects.
BROADCAST_CASES = [
    ("row_masked", "ROW_MASK", "masked-reduction", "keep.reshape(keep.shape + (1,) * (x.dim() - keep.dim()))"),
    ("tagged", "TAGGED", "masked-update-in-place", "feats.add_(torch.where((kinds == 1).reshape("),
]


@pytest.mark.parametrize("factory,tag,rule,patched", BROADCAST_CASES, ids=[c[0] for c in BROADCAST_CASES])
def test_a_mask_over_leading_dims_is_refused_as_is_and_verified_broadcast(factory, tag, rule, patched):
    site, _, plain = _trial_of(factory, tag, rule)
    assert (site.gb_id, site.file, site.line) == ("GB0036", str(RULES_SRC), marked_line(RULES_SRC, tag))
    assert not plain.verified, plain.why_not
    _, rw, shaped = _trial_of(factory, tag, rule, "broadcast over trailing dims")
    assert patched in rw.files[str(RULES_SRC)]
    assert shaped.verified and shaped.after.sites == 0, shaped.why_not


# Proposals whose outputs differ from eager: refused by the trial, never by the rule.
REFUSED_CASES = [
    # under a tracer this code skips the clamp
    ("tracer_refused", "TRACER_SKIPS", "compiling-is-tracing", "GB0170"),
    # the early value is 0-d, the late one a row vector
    ("early_shape", "EARLY_SHAPE", "if-where-return", "GB0170"),
    # a cache holding other values than a miss computes
    ("stale_memo", "MEMO", "cache-hit-not-compiled", "GB0124"),
]


@pytest.mark.parametrize("factory,tag,rule,gb", REFUSED_CASES, ids=[c[0] for c in REFUSED_CASES])
def test_a_proposal_whose_outputs_differ_from_eager_is_refused(factory, tag, rule, gb):
    site, _, f = _trial_of(factory, tag, rule)
    assert (site.gb_id, site.line) == (gb, marked_line(RULES_SRC, tag))
    assert not f.verified and any("outputs differ from eager" in w for w in f.why_not), f.why_not



def test_a_mask_or_none_chosen_by_an_and_chain_is_not_offered(tmp_path):
    # `a and m.any()` false does not make m all-False: no rewrite is proposed.
    prog = tmp_path / "andmask.py"
    src = RULES_SRC.read_text().replace("any_blank = blank.any()", "any_blank = bool(x.numel()) and blank.any()")
    prog.write_text(src)
    base = census_target(f"{prog}:masked", OPTS, project_root=str(tmp_path))
    site = next(s for s in base.sites if s.line == marked_line(prog, "MASK"))
    props, _ = proposals(site, str(tmp_path), target_file=str(prog), factory="masked", sites=base.sites)
    assert not any(p.rule == "mask-not-none" for p in props)



def test_item_of_a_one_element_tensor_is_kept_0d():
    # `.item()` of a [1]-shaped value: kept as it is, the output broadcasts to [1] and
    # differs from eager in shape (refused); reshaped to the 0-d value it read, it verifies.
    site, rw, f = _trial_of("one_element", "ITEM_1ELT", "item-keep-tensor", "0-d as .item() read it")
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "ITEM_1ELT"))
    assert "denom = torch.clamp(count * 2, min=1).reshape(())" in rw.files[str(RULES_SRC)]
    assert f.verified, f.why_not
    _, plain, g = _trial_of("one_element", "ITEM_1ELT", "item-keep-tensor", "instead of item()")
    assert "reshape" not in plain.files[str(RULES_SRC)]
    assert not g.verified and any("shape" in w for w in g.why_not), g.why_not




def test_a_method_that_reports_and_counts_is_not_skipped():
    base, site = _site_of(f"{RULES_SRC}:counted", "STATEFUL", RULES_SRC)
    props, refused = proposals(site, str(RULES_SRC.parent), target_file=str(RULES_SRC), factory="counted",
                               sites=base.sites)
    assert not any(p.rule == "skip-report-when-compiling" for p in props)
    assert any(r.rule == "skip-report-when-compiling" and "self.seen += 1" in r.reason for r in refused), refused



def test_a_patch_proposed_for_one_site_that_removes_another_is_that_sites_fix_too():
    # The region split proposed for the np.random site keeps the whole helper call eager: the
    # .item() site in the helper's loop (a frame Dynamo compiled on its own) is gone too. Fix
    # proposes the same split for it (at the function the user compiled); a patch tried only
    # for the first site is recorded for the second as well, saying whose patch it is.
    from graphstitch.fix.trials import also_removed
    spec = f"{RULES_SRC}:spans"
    root = str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=2, kinds={"split"}, project_root=root)   # (the splits alone: the test is theirs)
    a = next(s for s in report.sites if s.line == marked_line(RULES_SRC, "HOST_A"))
    b = next(s for s in report.sites if s.line == marked_line(RULES_SRC, "HOST_B"))
    assert (a.gb_id, b.gb_id) == ("GB0033", "GB0124")
    best_a, best_b = (next(f for f in report.fixes_for(s.id) if f.verified) for s in (a, b))
    assert best_a.strategy == best_b.strategy == "split" and best_b.candidate == best_a.candidate
    assert best_b.after.sites == 0
    from graphstitch.fix.patches import planned_files
    files = planned_files(best_b, report, Workspace(spec, root, root))
    assert "def _forward_eager(self" in files[str(RULES_SRC)]
    # the same patch tried for A only: B's fix comes from A's trial
    props, _ = proposals(a, root, target_file=str(RULES_SRC), factory="spans", sites=report.sites)
    rw = next(p for p in props if p.label == best_a.candidate)
    cand = Candidate(rw.strategy, rw.label, Patches(), rw)
    trial = Workspace(spec, root, root).census(OPTS, rw.files, 300)
    fix_a = evaluate(a, cand, report, trial)
    (via_b,) = also_removed([a, b], [(a, cand)], [fix_a], report, {cand.key: trial})
    assert via_b.site == b.id and via_b.via == a.id and via_b.verified, via_b.why_not


def test_a_config_flag_named_by_dynamos_own_hint_is_tried():
    # GB0014 (an RNN) names no flag graphstitch knows; Dynamo's hint says allow_rnn=True.
    report = run_fix(f"{RULES_SRC}:recurrent", OPTS, jobs=2, kinds={"config"}, timeout=300)
    site = report.sites[0]
    assert (site.gb_id, site.file, site.line) == ("GB0014", str(RULES_SRC), marked_line(RULES_SRC, "RNN"))
    best = report.fixes_for(site.id)[0]
    assert best.verified and best.patches.config == {"allow_rnn": True}, best.why_not


def test_numpy_draws_in_compiled_code_keep_numpys_stream_so_fixes_can_be_judged():
    # Compiled, `np.random.normal` draws from torch's generator (Dynamo's default), so the
    # outputs differ from eager and no fix could verify. fix keeps NumPy's stream: the draw
    # becomes a break of its own, and every trial and written patch carries the config line.
    report = run_fix(f"{RULES_SRC}:numpy_mixed", OPTS, jobs=2, timeout=300)
    assert report.config["base_config"] == {"use_numpy_random_stream": True} and report.outputs_match_eager
    draw = next(s for s in report.sites if s.gb_id == "GB0298")
    assert (draw.file, draw.line) == (str(RULES_SRC), marked_line(RULES_SRC, "NP_DRAW"))
    site = next(s for s in report.sites if s.gb_id == "GB0170")
    assert (site.file, site.line) == (str(RULES_SRC), marked_line(RULES_SRC, "NP_MIXED"))
    where = next(f for f in report.fixes_for(site.id) if f.rule == "if-where")
    assert where.verified, where.why_not
    line = "+torch._dynamo.config.use_numpy_random_stream = True  # graphstitch fix"
    assert where.patch is not None and line in where.patch
    root = str(RULES_SRC.parent)
    diff, ok = apply_best(report, Workspace(f"{RULES_SRC}:numpy_mixed", root, root), OPTS, write=False)
    assert ok and line in diff, diff


def test_fix_all_writes_the_numpy_stream_line_first_and_fixes_on_top_of_it():
    from graphstitch.fix.fixall import fix_all
    result, files = fix_all(f"{RULES_SRC}:numpy_mixed", OPTS, jobs=2, timeout=300, project_root=str(RULES_SRC.parent))
    steps = [(st.strategy, st.candidate) for st in result.steps]
    assert steps[:2] == [("config", "config use_numpy_random_stream=True"), ("rewrite", "`if` assigning h -> torch.where")]
    assert result.verified, result.why_not
    assert "+torch._dynamo.config.use_numpy_random_stream = True  # graphstitch fix" in result.patch
    # the draw itself stays a break (on NumPy's stream, as eager draws it): said, not hidden
    assert len(result.remaining) == 1 and result.remaining[0].startswith("GB0298 "), result.remaining


def test_a_trial_in_which_nothing_compiles_is_not_verified():
    # A patch after which nothing compiles (an entry split whose parts are all eager gaps at
    # run time, a training epoch's) has no break and outputs equal eager, like a fix. The
    # judge sees it as it is: two real censuses, the second of a function with no tensor op,
    # which compiles no graph.
    base, site = _site_of(f"{RULES_SRC}:paced_factory", "PACED", RULES_SRC)
    off = census_target(f"{RULES_SRC}:passed_through", dataclasses.replace(OPTS, fresh=True),
                        project_root=str(RULES_SRC.parent))
    assert base.graph_count and off.graph_count == 0 and not off.sites and off.outputs_match_eager
    f = evaluate(site, Candidate("split", "nothing compiled", Patches()), base, off)
    assert not f.verified and f.why_not == [
        "nothing is compiled any more: the patch turns compilation off instead of removing the break"]


def test_an_extracted_running_total_is_passed_in_and_returned_and_no_other_line_changes():
    # `total += ...` reads `total` before it binds it: the helper takes it and returns it
    # (its trial raised UnboundLocalError before). This file has runs of three blank lines
    # elsewhere: they are the user's, and the patch leaves them alone.
    base, site = _site_of(f"{RULES_SRC}:running_total", "RUNNING_TOTAL", RULES_SRC)
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "RUNNING_TOTAL"))
    props, _ = proposals(site, str(RULES_SRC.parent), target_file=str(RULES_SRC), factory="running_total",
                         sites=base.sites)
    text = next(p for p in props if p.rule == "extract-hatch").files[str(RULES_SRC)]
    helper = re.search(r"def (_forward_\d+)\(self, total, x\):\n.*\n    return total\n", text)
    assert helper is not None, text
    assert f"            total = {helper.group(1)}(self, total, x)  # RUNNING_TOTAL\n" in text
    old = RULES_SRC.read_text()
    removed = [ln for ln in difflib.ndiff(old.splitlines(), text.splitlines()) if ln.startswith("- ")]
    assert removed == ["-             total += self.lin(x).sum().item()  # RUNNING_TOTAL"], removed


# ----------------------------------------------------------------------------- region splits on real code shapes

def test_a_split_whose_gap_is_the_returning_tail_verifies():
    # The break is two calls deep in a host-side tally; the compiled forward's statement that
    # reaches it is its `return`: the gap is the tail, the glue returns what it returns.
    site, rw, f = _trial_of("tail_split", "TALLY", "region-split")
    assert (site.gb_id, site.file, site.line) == ("GB0036", str(RULES_SRC), marked_line(RULES_SRC, "TALLY"))
    ret = marked_line(RULES_SRC, "TAIL")
    assert f"ScoredHead.forward runs line {ret} eagerly" in rw.label
    assert "        return self._forward_eager(labels, scores)\n" in rw.files[str(RULES_SRC)]
    assert f.verified and f.after.sites == 0 and f.after.graphs == 1, f.why_not


def test_a_split_with_two_gaps_compiles_what_lies_between():
    # Two checks that print, with a layer between them: two eager gaps, three compiled parts.
    site, rw, f = _trial_of("two_gaps", "CHECK_A", "region-split")
    a, b = marked_line(RULES_SRC, "CHECK_A"), marked_line(RULES_SRC, "CHECK_B")
    assert (site.gb_id, site.line) == ("GB0170", a)
    assert f"TwoChecks.forward runs lines {a}–{a + 1}, {b}–{b + 1} eagerly" in rw.label, rw.label
    text = rw.files[str(RULES_SRC)]
    assert "h = self._forward_between(h)" in text and "self._forward_eager2(h)" in text
    assert f.verified and f.after.sites == 0 and f.side_effects_kept, f.why_not


def test_a_split_that_keeps_the_loops_calls_compiled_ranks_before_the_all_eager_loop():
    # Two splits verify for the report in the loop over cells: the whole loop as the gap (its
    # graphs: the stem and the head, a few ops) and the loop kept in Python with each cell
    # compiled (more graphs, most of the ops). Fewer graphs must not win: the first compiles
    # less than half of what the second does.
    from graphstitch.fix.trials import rank

    base, site = _site_of(f"{RULES_SRC}:tower", "TOWER_REPORT", RULES_SRC)
    assert (site.gb_id, site.file) == ("GB0124", str(RULES_SRC))
    root = str(RULES_SRC.parent)
    props, _ = proposals(site, root, target_file=str(RULES_SRC), factory="tower", sites=base.sites)
    splits = [p for p in props if p.rule == "region-split"]
    whole = next(p for p in splits if "in place" not in p.label)
    kept = next(p for p in splits if "in place (its loop stays in Python" in p.label)
    ws = Workspace(f"{RULES_SRC}:tower", root, root)
    f_whole, f_kept = (evaluate(site, Candidate(p.strategy, p.label, Patches(), p), base, ws.census(OPTS, p.files, 300))
                       for p in (whole, kept))
    assert f_whole.verified and f_kept.verified, (f_whole.why_not, f_kept.why_not)
    assert f_whole.after.graphs < f_kept.after.graphs and 2 * f_whole.after.ops < f_kept.after.ops
    assert rank([f_whole, f_kept]) == [f_kept, f_whole]
    # The comparison is within a strategy: a rewrite of the site that compiles far more does not
    # demote both splits to where the graph count decides between them again.
    bigger = dataclasses.replace(f_kept, strategy="rewrite", candidate="rewrite",
                                 after=dataclasses.replace(f_kept.after, ops=4 * f_kept.after.ops))
    assert rank([f_whole, f_kept, bigger]) == [bigger, f_kept, f_whole]


def test_a_callee_compiled_alone_is_split_at_the_function_the_user_compiled():
    # After the print breaks, the callee runs as its own compiled frame and the host read
    # there is a break of *that* entry, which no factory compiles: the split goes to the
    # function the factory compiles, whose returning call becomes the gap.
    site, rw, f = _trial_of("outer_split", "PAIRS", "entry-split")
    assert (site.gb_id, site.line, site.nesting_depth) == ("GB0109", marked_line(RULES_SRC, "PAIRS"), 1)
    assert rw.label.startswith(f"region split: mine_pairs() runs line {marked_line(RULES_SRC, 'TOP')}")
    assert rw.strategy == "caller"   # the factory compiles the module of the parts: a caller-side move
    assert f.verified and f.after.sites == 0 and f.side_effects_kept, f.why_not


def test_an_entry_calling_the_function_whose_loop_breaks_makes_both_glue_and_the_model_still_compiles():
    # The break is in `_epoch_steps`, which the compiled entry calls: splitting the entry
    # alone would run the whole loop, model included, eagerly. Both become glue instead
    # (the entry as the module the factory compiles), and the model compiles per call.
    site, rw, f = _trial_of("epoch", "EPOCH_READ", "entry-split", label="as eager glue")
    assert (site.gb_id, site.file, site.line) == ("GB0124", str(RULES_SRC), marked_line(RULES_SRC, "EPOCH_READ"))
    assert rw.strategy == "caller" and "_epoch_steps() as eager glue" in rw.label, rw.label
    text = rw.files[str(RULES_SRC)]
    assert ("@torch.compiler.disable(recursive=False)  # graphstitch fix: eager glue, what it calls compiles\n"
            "def _epoch_steps(model, batches):") in text
    assert f.verified and f.after.sites == 0 and f.after.graphs == f.before.graphs > 0, f.why_not


# The site is reported once, with the stack of its first call (fit). fit_score: the entry
# calls the looping function again (score); runner_fit_score: another method of this file,
# score(), runs the same loop. A gap of the first call alone leaves the site in the compiled
# part after it: both calls are the gap, what is around them compiles.
@pytest.mark.parametrize("factory, read, entry, first, second", [
    ("fit_score", "EPOCH_READ", "fit_then_score", "FIT_CALL", "SCORE_CALL"),
    ("runner_fit_score", "RUNNER_READ", "run_fit_score", "RUNNER_FIT", "RUNNER_SCORE"),
])
def test_every_call_reaching_the_site_joins_the_entry_split_gap(factory, read, entry, first, second):
    site, rw, f = _trial_of(factory, read, "entry-split", label="eagerly;")
    assert (site.gb_id, site.file, site.line) == ("GB0124", str(RULES_SRC), marked_line(RULES_SRC, read))
    a, b = marked_line(RULES_SRC, first), marked_line(RULES_SRC, second)
    assert f"{entry}() runs line {a}–{b} eagerly;" in rw.label, rw.label
    assert f.verified and f.after.sites == 0 and f.side_effects_kept, f.why_not


def test_a_nested_def_is_handed_to_the_part_that_calls_it():
    # `def reinit(m)` binds a name like an assignment does: the part that defines it returns
    # it, the part that calls it takes it (CRNN's `weights_init`: a NameError before); the
    # `return` in its body is its own, not an early return of the function split (Cutout's
    # nested `test(loader)`: the split was refused before).
    site, rw, f = _trial_of("nested_def", "REINIT_SEED", "entry-split")
    assert (site.gb_id, site.file, site.line) == ("GB0007", str(RULES_SRC), marked_line(RULES_SRC, "REINIT_SEED"))
    text = rw.files[str(RULES_SRC)]
    assert "        return scale, reinit\n" in text and "probe.apply(reinit)" in text
    assert f.verified and f.after.sites < f.before.sites, f.why_not


def test_a_part_that_assigns_a_declared_global_declares_it_too():
    # `global RUN_SCALE` in the function: the part that assigns it must say so too, or it
    # binds a local and scaled() reads the module's None (pytorch-cifar100's loaders).
    site, rw, f = _trial_of("global_set", "GLOBAL_SEED", "entry-split")
    assert (site.gb_id, site.file, site.line) == ("GB0007", str(RULES_SRC), marked_line(RULES_SRC, "GLOBAL_SEED"))
    text = rw.files[str(RULES_SRC)]
    assert "    def _forward_after(self, x):\n        global RUN_SCALE\n" in text, text[-1500:]
    assert f.verified and f.after.sites == 0, f.why_not


def test_a_glued_staticmethod_keeps_staticmethod_outermost():
    # The loop is a staticmethod called on an instance: glue above `@staticmethod` would be
    # bound like a method (one argument too many); it goes below it.
    site, rw, f = _trial_of("meter_epoch", "METER_READ", "entry-split", label="as eager glue")
    assert (site.gb_id, site.file, site.line) == ("GB0124", str(RULES_SRC), marked_line(RULES_SRC, "METER_READ"))
    text = rw.files[str(RULES_SRC)]
    assert ("    @staticmethod\n    @torch.compiler.disable(recursive=False)  # graphstitch fix: eager glue, what it "
            "calls compiles\n    def summed(model, batches):") in text
    assert f.verified and f.after.sites == 0, f.why_not


def test_a_glued_function_in_the_factory_file_keeps_the_factory_pointed_at_the_split(tmp_path):
    # The entry lives in its own module and calls back into a function of the factory's
    # file (a training step passed in): that file gets both the glue decorator and the
    # factory's redirect to the module of the parts; neither may replace the other.
    (tmp_path / "loop.py").write_text(
        "import torch\n\n\n"
        "def epoch_entry(model, batches, seed, steps):\n"
        "    torch.manual_seed(seed)\n"
        "    return steps(model, batches)\n")
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\n\nfrom loop import epoch_entry\n\n\n"
        "class Scorer(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(3, 2)\n\n"
        "    def forward(self, x):\n"
        "        return self.lin(x).tanh()\n\n\n"
        "def steps(model, batches):\n"
        "    total = 0.0\n"
        "    for x in batches:\n"
        "        total += float(model(x).relu().sum())  # READ\n"
        "    return total\n\n\n"
        "def epoch():\n"
        "    torch.manual_seed(0)\n"
        "    model = Scorer()\n"
        "    return [(epoch_entry, (model, [torch.randn(2, 3), torch.randn(4, 3)], 0, steps), {}),\n"
        "            (epoch_entry, (model, [torch.randn(5, 3)], 1, steps), {})]\n")
    base, site = _site_of(f"{prog}:epoch", "READ", prog)
    assert (site.gb_id, site.file) == ("GB0124", str(prog)) and base.graph_count > 0
    props, refused = proposals(site, str(tmp_path), target_file=str(prog), factory="epoch", sites=base.sites)
    rw = next((p for p in props if p.rule == "entry-split" and "as eager glue" in p.label), None)
    assert rw is not None, (props, refused)
    text = rw.files[str(prog)]
    assert "# graphstitch fix: eager glue, what it calls compiles\ndef steps(model, batches):" in text
    assert "from loop import epoch_entry, " in text, text
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                 Workspace(f"{prog}:epoch", str(tmp_path), str(tmp_path)).census(OPTS, rw.files, 300))
    assert f.verified and f.after.sites == 0 and f.after.graphs > 0, f.why_not


def test_a_split_is_refused_when_a_part_before_the_last_returns(tmp_path):
    # A return inside an eager gap: run in the gap's own helper, the glue could not tell it
    # from falling through. (An early return in a compiled part stays in the glue instead.)
    prog = tmp_path / "early_split.py"
    prog.write_text(RULES_SRC.read_text().replace(
        '            print("large activations after a")\n', "            return h.sum(-1)\n"))
    base = census_target(f"{prog}:two_gaps", OPTS, project_root=str(tmp_path))
    site = next(s for s in base.sites if s.line == marked_line(prog, "CHECK_A"))
    props, refused = proposals(site, str(tmp_path), target_file=str(prog), factory="two_gaps", sites=base.sites)
    assert not any(p.rule == "region-split" for p in props)
    assert any(r.rule == "region-split" and "before the last part returns" in r.reason for r in refused), refused


def test_a_break_in_a_called_method_splits_that_method_and_its_callers_become_glue():
    # The check sits in a submodule's forward. The chain split keeps the submodule's layers
    # compiled on both sides of the gap; the compiled entry above it becomes eager glue.
    site, rw, f = _trial_of("chained", "CLIP", "region-split", "its callers forward")
    assert (site.gb_id, site.line, site.nesting_depth) == ("GB0170", marked_line(RULES_SRC, "CLIP"), 2)
    assert [fr.function for fr in site.stack if fr.file == str(RULES_SRC)] == ["forward", "forward"]
    text = rw.files[str(RULES_SRC)]
    clipper = text.split("class Clipper")[1].split("class ClippedNet")[0]
    assert "return self._forward_after(h)" in clipper and "def _forward_eager(self, h)" in clipper
    assert "@torch.compiler.disable(recursive=False)  # graphstitch fix: eager glue" in \
        text.split("class ClippedNet")[1].split("def chained")[0]
    assert f.verified and f.after.sites == 0 and f.side_effects_kept, f.why_not


def test_a_chain_split_of_a_method_also_called_from_compiled_code_is_refused():
    # `again` calls the split method too, and is compiled as its own frame: the call to the
    # glue breaks there, a new site, so the patch is not verified.
    site, _, f = _trial_of("chained_twice", "CLIP", "region-split", "its callers forward")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "CLIP"))
    assert not f.verified and any(w.startswith("moved, not removed") for w in f.why_not), f.why_not


def test_a_decode_loop_stays_in_python_and_each_step_compiles():
    # `torch.compile(model.generate)`: a method entry whose loop ends on a host test. The split
    # keeps the loop in the glue (each step's calls compile as their own frames); a name the
    # first part binds on some paths only (`scores`) starts as None there, not unbound.
    site, rw, f = _trial_of("stepped", "STOP", "region-split", "eagerly in place")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "STOP"))
    assert rw.label.startswith("region split: Stepper.generate runs line")
    text = rw.files[str(RULES_SRC)].split("class Stepper")[1].split("def stepped")[0]
    assert "scores = None  # graphstitch fix: bound on some paths only" in text
    assert "        for _ in range(max_steps):\n            h = self.cell(h, h)\n" in text
    assert f.verified and f.after.sites == 0 and f.after.graphs >= 2, f.why_not


def test_a_method_compiled_unbound_is_split_below_a_module_the_factory_compiles():
    # `torch.compile(Learner.step)` traces the method's own frame even under
    # disable(recursive=False) (a bound method's is honoured): the split's glue stays the
    # method, and the factory compiles a module whose eager forward calls it.
    site, rw, f = _trial_of("unbound_step", "UNBOUND_STEP", "entry-split", "in place (its loop",
                            opts=dataclasses.replace(OPTS, grad=True))
    assert (site.gb_id, site.line) == ("GB0025", marked_line(RULES_SRC, "UNBOUND_STEP"))
    assert rw.strategy == "caller"
    text = rw.files[str(RULES_SRC)]
    assert "    return [(_LearnerStepEntry(), (a, [torch.randn(3, 4)" in text
    assert "        return Learner.step(*args, **kwargs)\n" in text
    assert f.verified and f.after.sites == 0 and f.after.graphs >= 1, f.why_not


def test_a_function_entry_under_a_grad_mode_decorator_keeps_that_mode_around_its_glue():
    # `@torch.no_grad()` on the function the factory passes: its split module's glue runs in
    # `with torch.no_grad():`, so the parts it calls compile under that mode as before.
    site, rw, f = _trial_of("no_grad_tally", "NO_GRAD_TALLY", "entry-split", "in place (its loop")
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "NO_GRAD_TALLY"))
    text = rw.files[str(RULES_SRC)].split("class _TallyScoresSplit")[1]
    assert "    @torch.compiler.disable(recursive=False)" in text
    assert "        with torch.no_grad():\n            totals = self._forward_before(net)\n" in text
    assert f.verified and f.after.sites == 0 and f.after.graphs >= 1, f.why_not


def test_a_rewrite_that_moves_its_break_into_code_it_feeds_goes_on_with_that_breaks_rule():
    # count-selected keeps the count as int(...): the break moves to that int(); the chain
    # joins the rule for the moved break (the count kept as a tensor) into one patch.
    line = marked_line(RULES_SRC, "NZ_COUNT")
    report = run_fix(f"{RULES_SRC}:mean_counted", OPTS, jobs=2, kinds={"rewrite"}, only=lambda s: s.line == line)
    site = next(s for s in report.sites if s.line == line)
    assert site.gb_id == "GB0036"
    alone = next(f for f in report.fixes if f.rule == "count-selected")
    assert alone.site_gone and alone.new_sites and not alone.verified
    best = report.fixes_for(site.id)[0]
    assert best.verified and best.rule == "count-selected+item-keep-tensor", [f.why_not for f in report.fixes]
    assert "count_nonzero()" in (best.patch or "") and best.after.graphs == 1
    # --diff/--apply write it: the first step proposed again, censused, the second found again
    from graphstitch.fix.patches import planned_files
    from graphstitch.fix.rules import Rewrite
    from graphstitch.fix.trials import rewrite_diff
    root = str(RULES_SRC.parent)
    files = planned_files(best, report, Workspace(f"{RULES_SRC}:mean_counted", root, root), OPTS)
    assert rewrite_diff(Rewrite(best.rule, best.strategy, best.candidate, "", files)) == best.patch


def test_a_chain_that_changes_what_the_function_returns_is_refused():
    # The count is returned: kept as a tensor it would reach the caller as one, not an int.
    line = marked_line(RULES_SRC, "NZ_RETURNED")
    report = run_fix(f"{RULES_SRC}:count_returned", OPTS, jobs=2, kinds={"rewrite"}, only=lambda s: s.line == line)
    site = next(s for s in report.sites if s.line == line)
    assert site.gb_id == "GB0036"
    chains = [f for f in report.fixes if f.rule and f.rule.startswith("count-selected+")]
    assert chains and not any(f.verified for f in chains)
    assert any("outputs differ" in w for f in chains for w in f.why_not), [f.why_not for f in chains]


def _board_rows(text: str, factory: str) -> tuple[list, list]:
    """The board's rows after the factory's calls run eagerly and compiled, from TEXT (a
    patched structure_rules.py) loaded as its own module."""
    import importlib.util
    import tempfile

    import torch
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "patched_rules.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location("patched_rules", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["patched_rules"] = mod
        try:
            spec.loader.exec_module(mod)
            rows = []
            for compiled in (False, True):
                mod.BOARD.rows.clear()
                torch._dynamo.reset()
                for fn, args, kw in getattr(mod, factory)():
                    (torch.compile(fn, backend="aot_eager") if compiled else fn)(*args, **kw)
                rows.append(list(mod.BOARD.rows))
        finally:
            del sys.modules["patched_rules"]
    return rows[0], rows[1]


def test_a_report_call_in_the_compiled_frame_is_deferred_past_the_graph_and_still_made():
    site, rw, f = _trial_of("boarded", "BOARD", "report-defer")
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "BOARD"))
    text = rw.files[str(RULES_SRC)]
    assert "reorderable_logging_functions.add(_train_step_report)" in text
    assert "    _train_step_report(loss, epoch)  # BOARD" in text
    assert f.verified and f.after.graphs == 1, f.why_not
    eager, compiled = _board_rows(text, "boarded")
    assert compiled == eager and len(eager) == 2   # the judge cannot see the board: checked here


def test_a_report_under_a_data_dependent_test_is_deferred_with_its_test_and_self_reads_as_arguments():
    # `if z.abs().max() > self.bound: print(...)` (GB0170, and the print's .item() after the
    # resume): the whole if/elif goes after the graph; self.bound and self.label cross as
    # constants, since `self` itself cannot.
    site, rw, f = _trial_of("saturating", "SATURATE", "report-defer")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "SATURATE"))
    text = rw.files[str(RULES_SRC)]
    assert "def _forward_report(z, self_bound, self_label):\n    if z.abs().max() > self_bound:  # SATURATE\n" in text
    assert "        _forward_report(z, self.bound, self.label)  # SATURATE\n" in text
    assert f.verified and f.after.sites == 0 and f.after.graphs == 1, f.why_not


def _refused_only(factory: str, tag: str, gb_id: str, rule: str, reason: str) -> None:
    """The site tagged TAG (a GB_ID) gets no proposal from RULE, and RULE's refusal says REASON."""
    base, site = _site_of(f"{RULES_SRC}:{factory}", tag, RULES_SRC)
    assert site.gb_id == gb_id
    props, refused = proposals(site, str(RULES_SRC.parent), target_file=str(RULES_SRC), factory=factory,
                               sites=base.sites)
    assert not any(p.rule == rule for p in props)
    assert any(r.rule == rule and reason in r.reason for r in refused), refused


def test_a_report_under_a_data_dependent_test_through_a_method_of_self_is_not_deferred():
    _refused_only("saturating_noted", "SATURATE_NOTE", "GB0170", "report-defer", "`self` is a local object")


def test_a_tensor_test_that_reports_and_assigns_defers_the_report_and_selects_the_names_with_where():
    site, rw, f = _trial_of("normalised", "NORM_WARN", "if-where-report")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "NORM_WARN"))
    text = rw.files[str(RULES_SRC)]
    assert "def _normalised_report(total):\n    if total <= 0:  # NORM_WARN\n        warnings.warn(" in text
    assert "    _normalised_report(total)  # NORM_WARN\n    weights = torch.where(total <= 0, " in text
    assert f.verified and f.after.sites == 0 and f.side_effects_kept, f.why_not


def test_a_report_that_reads_what_its_branch_assigns_is_not_deferred():
    _refused_only("normalised_told", "NORM_TOLD", "GB0170", "if-where-report", "reads a name its branch assigns")


def test_a_legacy_variable_wrapper_becomes_the_detach_it_means():
    # `Variable(t)` (imported under another name): Dynamo cannot trace its __new__ (GB0007);
    # since torch 0.4 it returns t.detach().
    site, rw, f = _trial_of("smoothed_nll", "LEGACY_VAR", "drop-variable")
    assert (site.gb_id, site.line) == ("GB0007", marked_line(RULES_SRC, "LEGACY_VAR"))
    assert "    soft = torch.full_like(logits, eps / (n - 1)).detach()  # LEGACY_VAR\n" in rw.files[str(RULES_SRC)]
    assert f.verified and f.after.sites == 0, f.why_not


def test_a_legacy_variable_with_other_arguments_is_not_rewritten():
    _refused_only("volatile_scale", "LEGACY_VOLATILE", "GB0007", "drop-variable", "other arguments")


@pytest.mark.parametrize("tag", ["GAIN_CHAIN", "GAIN_ELIF"])
def test_an_elif_chain_assigning_one_name_becomes_nested_wheres(tag):
    # The `elif` test breaks too (in the resume function of the first test's false path):
    # its site is rewritten as the whole chain (the `elif` alone cannot be replaced).
    site, rw, f = _trial_of("bounded_gain", tag, "if-where")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, tag))
    assert ("    g = torch.where(g < lo, x.new_tensor(lo), torch.where(g > hi, x.new_tensor(hi), g))\n"
            in rw.files[str(RULES_SRC)])
    assert f.verified and f.after.sites == 0, f.why_not


def test_a_function_that_is_one_loop_calling_a_model_keeps_the_loop_eager_and_compiles_the_model():
    # The whole body is the loop holding the stop test: no statement around it computes, but
    # the loop calls the model it was given, a frame Dynamo compiles from the eager glue.
    site, rw, f = _trial_of("greedy", "STOP_TOKEN", "entry-split", "in place")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "STOP_TOKEN"))
    assert rw.strategy == "caller"
    assert f.verified and f.after.sites == 0 and f.after.graphs >= 1, f.why_not


def test_a_function_that_is_one_loop_of_tensor_ops_is_not_split_into_all_eager():
    # Nothing around the loop computes and the loop calls nothing Dynamo would compile apart.
    _refused_only("halving", "HALVE", "GB0170", "region-split", "nothing before, between or after")


def test_a_report_call_in_an_inlined_function_is_not_deferred():
    # torch 2.13 drops a call deferred from a frame it inlines: refused, with that reason.
    _refused_only("boarded_inner", "BOARD_INNER", "GB0124", "report-defer", "inlined")


@pytest.mark.parametrize(("factory", "tag"), [("amp_step", "AMP_ITEM"), ("implicit_dim", "IMPLICIT_ITEM"),
                                              ("copied_offsets", "COPIED_ITEM")])
def test_a_warning_torch_gives_about_the_users_call_is_not_a_side_effect_to_keep(factory, tag):
    # Both name the user's line on every eager call; compiled, Dynamo emits them while tracing
    # only. amp_step: torch.cuda.amp.autocast()'s FutureWarning (a deprecation notice);
    # implicit_dim: F.log_softmax(x) without dim, a UserWarning torch emits (the frame that
    # called warn is torch's); copied_offsets: `t.new_tensor(t2)`, a C op's own UserWarning
    # (the user's frame calls the op, not warn). A fix for the .item() must not be refused as
    # "side effect lost" for them (a user's own UserWarning still counts: warnings_warn).
    import dataclasses

    base, site = _site_of(f"{RULES_SRC}:{factory}", tag, RULES_SRC)
    assert site.gb_id == "GB0124"
    cand = Candidate("config", "capture", Patches(config={"capture_scalar_outputs": True}))
    opts = dataclasses.replace(OPTS, fresh=True, patches=cand.patches)
    f = evaluate(site, cand, base, census_target(f"{RULES_SRC}:{factory}", opts, project_root=str(RULES_SRC.parent)))
    assert f.verified and f.side_effects_kept, f.why_not


def test_a_users_own_warning_is_recorded_and_a_c_ops_notice_is_not():
    # The emitter of both is the user's frame; what it calls decides: warnings.warn (also as a
    # bare name) is the user's, a torch op's C notice is torch's.
    import warnings
    from warnings import warn

    import torch

    from graphstitch.live import _effects

    def body(x):
        warnings.warn("the user's own", stacklevel=1)
        warn("the user's, imported bare", stacklevel=1)
        return x.new_tensor(x)

    out: list[str] = []
    with _effects(out):
        body(torch.ones(2))
    assert out == ["warning UserWarning the user's own", "warning UserWarning the user's, imported bare"], out


def test_a_write_at_a_0d_tensor_index_becomes_an_index_fill_and_the_slice_form_is_refused():
    # owner[best[r]] = r: torch reads best[r] back as an int (GB0033). index_fill_ keeps it a
    # tensor and verifies; index_copy_ (for a slice value) fails on the int and is refused.
    base, site = _site_of(f"{RULES_SRC}:owners", "OWNER", RULES_SRC)
    assert site.gb_id == "GB0033"
    root = str(RULES_SRC.parent)
    props, _ = proposals(site, root, target_file=str(RULES_SRC), factory="owners", sites=base.sites)
    verdicts = {}
    for rw in [p for p in props if p.rule == "index-write-tensor"]:
        f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                     Workspace(f"{RULES_SRC}:owners", root, root).census(OPTS, rw.files, 300))
        verdicts["index_fill_" if "index_fill_" in rw.label else "index_copy_"] = f
    assert verdicts["index_fill_"].verified and verdicts["index_fill_"].after.sites == 0, verdicts["index_fill_"].why_not
    assert "owner.index_fill_(0, (best[r]).reshape(1), r)" in (verdicts["index_fill_"].patch or "")
    assert not verdicts["index_copy_"].verified and verdicts["index_copy_"].error is not None


def test_state_set_under_a_tensor_test_is_selected_with_where_and_updated_in_place():
    site, rw, f = _trial_of("running_mean", "FIRST_BATCH", "if-where-state")
    assert (site.gb_id, site.line) == ("GB0170", marked_line(RULES_SRC, "FIRST_BATCH"))
    text = rw.files[str(RULES_SRC)]
    # only ever += : in place; rebound on another path: rebound; the elif keeps its host test
    assert "self.seen.copy_(torch.where(_cond, _seen_then, self.seen))" in text
    assert "        _mean_then = self.mean + batch\n" in text
    assert "        if self.clip is not None:\n" in text and "self.mean = torch.where(_cond, _mean_then, _mean_else)" in text
    assert f.verified and f.after.sites == 0, f.why_not


def test_state_set_under_a_tensor_test_with_a_data_dependent_elif_is_refused():
    # The elif tests a tensor too: kept in Python, it breaks there instead.
    site, rw, f = _trial_of("running_mean_outlier", "FIRST_OUTLIER", "if-where-state")
    assert site.gb_id == "GB0170"
    assert not f.verified and f.new_sites, f.why_not


def test_a_report_of_a_counter_that_changes_per_call_is_deferred_with_numbers_as_tensors():
    # The step differs per call: after a recompile it is symbolic, which Dynamo does not defer
    # (GB0296, refused); passed as a float64 tensor with its type's name, it is.
    base, site = _site_of(f"{RULES_SRC}:boarded_steps", "BOARD", RULES_SRC)
    root = str(RULES_SRC.parent)
    props, _ = proposals(site, root, target_file=str(RULES_SRC), factory="boarded_steps", sites=base.sites)
    plain, packed = [p for p in props if p.rule == "report-defer"]
    ws = Workspace(f"{RULES_SRC}:boarded_steps", root, root)
    f_plain, f_packed = (evaluate(site, Candidate(p.strategy, p.label, Patches(), p), base,
                                  ws.census(OPTS, p.files, 300)) for p in (plain, packed))
    assert not f_plain.verified and any("GB0296" in n for n in f_plain.new_sites), f_plain.why_not
    text = packed.files[str(RULES_SRC)]
    assert "_train_step_report(*_deferred_arg(loss), *_deferred_arg(epoch))  # BOARD" in text
    assert f_packed.verified and f_packed.after.sites == 0, f_packed.why_not
    eager, compiled = _board_rows(text, "boarded_steps")
    assert compiled == eager and [r[2] for r in eager] == [1, 2, 3] and all(type(r[2]) is int for r in compiled)


def test_a_seed_at_the_entry_goes_eager_alone_while_a_helper_it_calls_breaks_where_it_did():
    # The entry's `return` reaches another site (in the helper it calls), so the gap of all
    # the entry's sites is the whole function ("nothing computes"). The seed's own gap is
    # tried too: the seed runs eagerly before the compiled rest, the helper's break stays.
    site, rw, f = _trial_of("seeded", "SEEDED", "entry-split", "runs line")
    assert (site.gb_id, site.line) == ("GB0007", marked_line(RULES_SRC, "SEEDED"))
    assert rw.strategy == "caller" and f"line {marked_line(RULES_SRC, 'SEEDED')} eagerly" in rw.label
    assert f.verified and f.new_sites == [], f.why_not
    assert (f.before.sites, f.after.sites) == (2, 1)   # the helper's int() (WINDOW_START) still breaks


def test_where_the_unpatched_compiled_code_already_differs_on_fresh_inputs_the_factorys_calls_decide():
    # Compiled, a NumPy draw comes from torch's stream; only the fresh set takes its branch,
    # so the original compiled code already differs from eager there. No patch could make
    # the fresh set match: a rewrite is proved on the factory's calls, and says so.
    opts = dataclasses.replace(OPTS, fresh=True)
    root = str(RULES_SRC.parent)
    base = census_target(f"{RULES_SRC}:drifting_calls", opts, project_root=root)
    assert base.outputs_match_eager and base.checks.fresh_outputs_match is False
    site = next(s for s in base.sites if s.line == marked_line(RULES_SRC, "DRIFT_SCALE"))
    assert site.gb_id == "GB0124"
    props, refused = proposals(site, root, target_file=str(RULES_SRC), factory="drifting_calls", sites=base.sites)
    rw = next(p for p in props if p.rule == "item-keep-tensor")
    ws = Workspace(f"{RULES_SRC}:drifting_calls", root, root)
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base, ws.census(opts, rw.files, 300))
    assert f.verified and f.given_inputs_only and "already differs from eager on fresh inputs" in \
        f.given_inputs_only, f.why_not
    # ...but the factory's calls still decide: a patch that changes what they return is refused
    wrong = {str(RULES_SRC): rw.files[str(RULES_SRC)].replace("    return y * 2\n", "    return y * 3\n")}
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base, ws.census(opts, wrong, 300))
    assert not f.verified and any(w.startswith("outputs differ from eager") for w in f.why_not), f.why_not
    # a branch that draws random numbers is never made a torch.where: it would draw on every call
    branch = next(s for s in base.sites if s.line == marked_line(RULES_SRC, "DRIFT_IF"))
    props, refused = proposals(branch, root, target_file=str(RULES_SRC), factory="drifting_calls",
                               sites=base.sites)
    assert not any(p.rule == "if-where" for p in props)
    assert any(r.rule == "if-where" and "np.random.rand" in r.reason for r in refused), refused


def test_a_split_whose_part_breaks_anew_grows_its_gap_and_is_written_again():
    # The part between the two gaps builds an object Dynamo cannot return (a new chain whose
    # list holds a new step): that split moves a break to the part's `return` (GB0092). Its
    # part joins the gap, the split is proposed again, and that one verifies; `--diff` and
    # `--apply` find it again from the lines recorded (Cutout's loaders, SimSiam's params).
    from graphstitch.fix.patches import planned_files
    spec, root = f"{RULES_SRC}:built_chain", str(RULES_SRC.parent)
    seed, show = marked_line(RULES_SRC, "CHAIN_SEED"), marked_line(RULES_SRC, "CHAIN_PRINT")
    report = run_fix(spec, OPTS, jobs=1, kinds={"caller"}, project_root=root,
                     only=lambda s: s.line == seed)
    assert [(s.gb_id, s.line) for s in report.sites if s.line == seed] == [("GB0007", seed)]
    moved = [f for f in report.fixes if not f.gap_code]
    assert moved and not any(f.verified for f in moved)
    assert any(w.startswith("moved, not removed: new site GB0092") for f in moved for w in f.why_not), \
        [f.why_not for f in moved]
    best = next(f for f in report.fixes if f.verified)
    assert f"runs line {seed}–{show} eagerly" in best.candidate, best.candidate
    assert "chain.steps.append(Scale(2.0))   # built in the part between the gaps: Dynamo cannot return it" \
        in best.gap_code and best.after.sites == 0
    files = planned_files(best, report, Workspace(spec, root, root))
    assert "        chain = Chain([])\n" in files[str(RULES_SRC)]


def test_a_call_in_eager_glue_that_breaks_inside_torch_runs_under_disable():
    # What glue calls still compiles: the optimizer's step, called from the glued epoch
    # loop, would break again in its own wrapper (torch's `graph_break()`, GB0025). The glue
    # calls it under torch.compiler.disable, so the split leaves no break; the model compiles.
    site, rw, f = _trial_of("epoch_driver", "EPOCH_STEP", "entry-split", label="as eager glue",
                            opts=dataclasses.replace(OPTS, grad=True))
    assert (site.gb_id, site.file, site.line) == ("GB0025", str(RULES_SRC), marked_line(RULES_SRC, "EPOCH_STEP"))
    text = rw.files[str(RULES_SRC)]
    assert "        torch.compiler.disable(opt.step)()  # EPOCH_STEP\n" in text
    assert "        opt.zero_grad()  # EPOCH_ZERO\n" in text      # a skipped function is not compiled from glue
    assert f.verified and f.after.sites == 0 and f.after.graphs >= 1, f.why_not


def test_a_function_the_compiled_run_fails_in_is_disabled_in_the_baseline_and_every_patch():
    # Compiled, rows_tensor() fails (a fake tensor call eager does not make), so no trial of
    # the original could complete. fix censuses again with that function under
    # torch.compiler.disable; the call to it is then the site, and its fix, written, carries
    # the decorator too.
    from graphstitch.fix.patches import planned_files
    spec, root = f"{RULES_SRC}:crashing_rows", str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=1, kinds={"caller"}, project_root=root)
    assert report.error is None and report.config["base_hatch"]["function"] == "rows_tensor"
    assert [(s.gb_id, s.file, s.line) for s in report.sites] == \
        [(report.sites[0].gb_id, str(RULES_SRC), marked_line(RULES_SRC, "CRASH_CALL"))]
    assert any(u.why == "disabled" and u.function == "rows_tensor" and u.file == str(RULES_SRC)
               for u in report.coverage.untraced)
    best = next(f for f in report.fixes if f.verified)
    text = planned_files(best, report, Workspace(spec, root, root))[str(RULES_SRC)]
    assert re.search(r"\n@torch\.compiler\.disable  # graphstitch fix: the compiled run failed in it "
                     r"\(TorchRuntimeError[^\n]*\ndef rows_tensor\(rows\):", text), text[-2500:]


def test_a_legacy_constructor_the_compiled_run_fails_on_is_rewritten_in_the_baseline_and_every_patch():
    # Compiled, torch.FloatTensor of a NumPy grid (a tensor once Dynamo traces NumPy) fails in
    # its fake tensor call, one line at a time: the baseline is censused again with each such
    # call rewritten as torch.as_tensor (two rounds), and the .item() fix carries both rewrites.
    from graphstitch.fix.patches import planned_files
    spec, root = f"{RULES_SRC}:legacy_grid", str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=2, kinds={"config"}, project_root=root)
    hatch = report.config["base_hatch"]
    assert report.error is None and hatch["function"] == "grid_offsets"
    assert [r[2] for r in hatch["rewrites"]] == [marked_line(RULES_SRC, "LEGACY_A"), marked_line(RULES_SRC, "LEGACY_B")]
    assert [(s.gb_id, s.file, s.line) for s in report.sites] == \
        [("GB0124", str(RULES_SRC), marked_line(RULES_SRC, "GRID_ITEM"))]
    best = next(f for f in report.fixes if f.verified)
    assert best.kind == "config" and best.outputs_match, best.why_not
    text = planned_files(best, report, Workspace(spec, root, root))[str(RULES_SRC)]
    assert "    xs = torch.as_tensor(a, dtype=torch.float32).view(-1, 1)  # LEGACY_A\n" in text
    assert "    ys = torch.as_tensor(b, dtype=torch.float32).view(-1, 1)  # LEGACY_B\n" in text
    import io

    from rich.console import Console

    from graphstitch.render.terminal import fixes
    out = io.StringIO()
    fixes(report, Console(file=out, width=400))
    a, b = (marked_line(RULES_SRC, m) for m in ("LEGACY_A", "LEGACY_B"))
    assert f"lines {a}, {b}): " in out.getvalue() and "runs with those calls rewritten" in out.getvalue()


def test_a_compiled_run_failing_in_library_numpy_code_gets_a_baseline_with_numpy_left_to_python():
    # Compiled, SciPy's sparse sum fails inside SciPy (Dynamo traces NumPy as tensor ops; an
    # np.matrix view is a fake tensor call eager does not make): no hatch of the user's reaches
    # it. fix censuses again with trace_numpy off; the run completes, the NumPy call is a
    # site at the user's line, and its verified patch carries the config line.
    from graphstitch.fix.patches import planned_files
    spec, root = f"{RULES_SRC}:sparse_degrees", str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=2, kinds={"extract"}, project_root=root)
    assert report.error is None and report.config["base_config"] == {"trace_numpy": False}
    line = marked_line(RULES_SRC, "SPARSE_SUM")
    assert ("GB0290", str(RULES_SRC), line) in [(s.gb_id, s.file, s.line) for s in report.sites]
    best = next(f for f in report.fixes if f.verified and f.site.gb_id == "GB0290")
    # (a joined rewrite: its first step is censused again, on the baseline's config, to be written)
    text = planned_files(best, report, Workspace(spec, root, root), OPTS, 300)[str(RULES_SRC)]
    assert "\ntorch._dynamo.config.trace_numpy = False  # graphstitch fix\n" in text


def test_fix_all_starts_with_the_function_the_compiled_run_fails_in_disabled():
    from graphstitch.fix.fixall import fix_all
    spec, root = f"{RULES_SRC}:crashing_rows", str(RULES_SRC.parent)
    result, files = fix_all(spec, OPTS, jobs=2, timeout=300, project_root=root, max_rounds=2)
    assert result.steps[0].candidate == "rows_tensor() under torch.compiler.disable", result.steps
    assert result.verified and result.final.sites == 0, (result.why_not, result.remaining)
    assert re.search(r"\n@torch\.compiler\.disable  # graphstitch fix: the compiled run failed in it [^\n]*\n"
                     r"def rows_tensor\(rows\):", files[str(RULES_SRC)])


def test_fix_all_starts_with_numpy_left_to_python_when_the_compiled_run_fails_in_numpy_code():
    from graphstitch.fix.fixall import fix_all
    spec, root = f"{RULES_SRC}:sparse_degrees", str(RULES_SRC.parent)
    # no round: the baseline steps alone are the subject (round 1's trials cost ~20 s)
    result, files = fix_all(spec, OPTS, jobs=2, timeout=300, project_root=root, max_rounds=0)
    assert [s.candidate for s in result.steps] == ["config trace_numpy=False"], result.steps
    assert result.verified and result.final.graphs > 0, result.why_not   # the patched run completes and compiles
    assert "\ntorch._dynamo.config.trace_numpy = False  # graphstitch fix\n" in files[str(RULES_SRC)]


def test_fix_all_joins_a_rewrite_that_moved_its_break_to_the_rewrite_of_that_break():
    # Keeping hot_mix's .item() as a tensor moves the break into boost_if_hot's `if`; as in
    # `fix`, the rewrite joined to that `if`'s rewrite is tried next (before config flags).
    from graphstitch.fix.fixall import fix_all
    spec, root = f"{RULES_SRC}:hot_levels", str(RULES_SRC.parent)
    result, files = fix_all(spec, OPTS, jobs=2, timeout=300, project_root=root, max_rounds=3)
    assert [s.candidate for s in result.steps] == \
        ["keep the tensor instead of item(), then returns on both paths -> return torch.where(...)"], result.steps
    assert result.verified and result.final.sites == 0, (result.why_not, result.remaining)
    assert "level = x.abs().mean()  # HOT_ITEM" in files[str(RULES_SRC)], files[str(RULES_SRC)][-1500:]


def test_fix_all_grows_a_split_whose_part_breaks_anew():
    from graphstitch.fix.fixall import fix_all
    spec, root = f"{RULES_SRC}:built_chain", str(RULES_SRC.parent)
    result, _ = fix_all(spec, OPTS, jobs=2, timeout=300, project_root=root, max_rounds=2)
    seed, show = marked_line(RULES_SRC, "CHAIN_SEED"), marked_line(RULES_SRC, "CHAIN_PRINT")
    assert any(f"runs line {seed}–{show - 1} eagerly" in s.candidate for s in result.steps), result.steps
    assert result.verified and result.final.sites == 0, (result.why_not, result.remaining)


def test_repeat_baseline_censuses_that_fail_are_reported_not_dropped(tmp_path, monkeypatch):
    # timed_report reads a clock, so fix censuses the unchanged code again (CLOCK_REPEATS);
    # once_only cannot be loaded in a second process, so those repeats fail. Their sites were
    # not compared: the report says so instead of "reproduced".
    import io

    from rich.console import Console

    from graphstitch.fix.trials import CLOCK_REPEATS
    from graphstitch.render.terminal import fixes
    monkeypatch.setenv("GRAPHSTITCH_TEST_MARK_DIR", str(tmp_path))
    spec, root = f"{RULES_SRC}:once_only", str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=1, kinds={"config"}, project_root=root)
    show = marked_line(RULES_SRC, "TIMED_PRINT")   # the clock reads (GB0007) and the print (GB0059)
    assert sorted((s.gb_id, s.file, s.line) for s in report.sites) == \
        [("GB0007", str(RULES_SRC), show - 2), ("GB0007", str(RULES_SRC), show), ("GB0059", str(RULES_SRC), show)]
    assert report.repeats_failed == CLOCK_REPEATS
    out = io.StringIO()
    fixes(report, Console(file=out, width=120))
    assert "Reproducibility not fully checked" in out.getvalue()


def test_a_split_whose_compiled_part_dynamo_now_skips_is_grown_by_the_loop_that_stopped_it():
    # Before the split nothing after the training loop was traced (its print breaks in a loop:
    # the frame is skipped). Split, the last part is traced and skipped at the lookup loop's
    # int(k): the statement where its tracing stopped joins the gap, and that split verifies.
    spec, root = f"{RULES_SRC}:named_epochs", str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=2, kinds={"caller"}, project_root=root)
    seed, show, look = (marked_line(RULES_SRC, m) for m in ("NAMES_SEED", "NAMES_PRINT", "NAMES_LOOKUP"))
    assert sorted((s.gb_id, s.line) for s in report.sites) == [("GB0007", seed), ("GB0124", show)]
    plain = [f for f in report.fixes if f"runs line {seed}–{show} eagerly" in f.candidate]
    assert plain and not any(f.verified for f in plain)
    assert any("new skipped frame" in w for f in plain for w in f.why_not), [f.why_not for f in plain]
    grown = [f for f in report.fixes if f.verified and f"runs lines {seed}–{show}, {look - 1}" in f.candidate]
    assert {f.site.gb_id for f in grown} == {"GB0007", "GB0124"} and all(f.gap_code for f in grown)



def test_a_split_whose_compiled_part_dynamo_fails_on_is_grown_by_the_failing_statement():
    # The split's part between the optimizer and the print returns an object built from a
    # parameter generator: Dynamo fails compiling it (an internal error, not a break). That
    # statement joins the gap, and the grown split verifies; the trial's error names the user's file.
    spec, root = f"{RULES_SRC}:shadowing", str(RULES_SRC.parent)
    seed, opt, built, show = (marked_line(RULES_SRC, m) for m in ("SHADOW_SEED", "SHADOW_OPT", "SHADOW_BUILT",
                                                                  "SHADOW_PRINT"))
    report = run_fix(spec, OPTS, jobs=2, kinds={"caller"}, project_root=root, only=lambda s: s.line == seed)
    site = next(s for s in report.sites if s.line == seed)
    assert (site.gb_id, site.file) == ("GB0007", str(RULES_SRC))
    failed = [f for f in report.fixes if f"runs lines {seed}–{opt}, {show} eagerly" in f.candidate]
    assert failed and all(f.error is not None and f.error.type == "InternalTorchDynamoError" for f in failed)
    assert all(f.error.message.count(f'File "{RULES_SRC}"') for f in failed), failed[0].error.message
    grown = [f for f in report.fixes if f.verified and f"runs line {seed}–{show} eagerly" in f.candidate]
    assert built == show - 1 and site.id in {f.site for f in grown}, report.fixes


def test_a_run_time_hatch_on_a_baseline_with_its_own_hatch_wraps_the_function_in_the_patched_copy():
    # The baseline disables rows_tensor() (the compiled run fails in it) in a patched copy of the
    # file, which the trial's module is loaded from, with the lines below it moved: a run-time
    # hatch on scale_down() must find the function there (it failed with "no loaded module").
    spec, root = f"{RULES_SRC}:crashing_then_scaling", str(RULES_SRC.parent)
    report = run_fix(spec, OPTS, jobs=1, kinds={"leaf_function"}, project_root=root)
    assert report.error is None and report.config["base_hatch"]["function"] == "rows_tensor"
    line = marked_line(RULES_SRC, "HATCHED_ITEM")
    site = next(s for s in report.sites if (s.file, s.line) == (str(RULES_SRC), line))
    mine = report.fixes_for(site.id)
    assert [f.candidate for f in mine] == ["leaf_function on scale_down()"], [(f.candidate, f.why_not) for f in mine]
    assert mine[0].verified, mine[0].why_not


def test_a_number_that_becomes_a_size_is_not_kept_a_tensor():
    # `int(t[0])` feeding `.view(side, side)`: a tensor there is read back as an int
    _refused_only("sized", "SIZE_ARG", "GB0124", "item-keep-tensor",
                  f"the value of side is a size in `.view(...)` at line {marked_line(RULES_SRC, 'SIZE_ARG') + 1}")


def test_a_bound_read_back_from_an_arange_is_computed_on_the_host():
    site, rw, f = _trial_of("chunked", "ARANGE_END", "arange-bound")
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "ARANGE_END"))
    assert "        pos = int(pos + math.ceil(min(x.shape[0], pos + chunk) - pos) - 1) + 1  # ARANGE_END\n" \
        in rw.files[str(RULES_SRC)]
    assert f.verified and f.after.sites == 0, f.why_not


def test_an_early_return_stays_in_the_glue_of_a_region_split():
    # `if len(self.rows) < n: return ...` before the graph work: in a compiled part its return
    # would leave only the part; the split keeps it in the eager glue, the rest compiles.
    site, rw, f = _trial_of("replayed", "EARLY_GUARD", "region-split")
    assert (site.gb_id, site.line) == ("GB0124", marked_line(RULES_SRC, "EARLY_GUARD"))
    text = rw.files[str(RULES_SRC)]
    assert "        if len(self.rows) < n:  # an early return, before the graph work\n" \
        "            return torch.zeros(())\n        h = self._forward_between(x, n)\n" in text
    assert f.verified and f.after.sites == 0, f.why_not


def test_a_bound_whose_names_a_loop_rebinds_is_not_computed_on_the_host():
    # `start` changes each turn of the loop around the read, the arange made before it does not
    _refused_only("stale_bound", "ARANGE_STALE", "GB0124", "arange-bound",
                  f"`start` is bound again between the arange at line {marked_line(RULES_SRC, 'ARANGE_STALE') - 3}")
