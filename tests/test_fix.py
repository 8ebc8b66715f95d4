"""Advice for every GB id, and `graphstitch fix` trials on real torch.compile runs.

Each trial is a real census in a fresh process: which candidates verify and which are
rejected, and why, is asserted exactly.
"""

import os
import shutil
from pathlib import Path

import pytest

from conftest import census_subprocess, marked_line
from graphstitch.advice import PLAYBOOKS, STRATEGIES, advise, strategy_for
from graphstitch.analysis import gb_registry
from graphstitch.files import file_hash
from graphstitch.fix import apply_best, run_fix
from graphstitch.fix.workspace import Workspace
from graphstitch.live import census_target
from graphstitch.targets import Options

TARGETS = Path(__file__).resolve().parent / "targets_fix"
ROOT = Path(__file__).resolve().parent.parent
OPTS = Options(backend="aot_eager")


def rel(name: str) -> str:
    return f"tests/targets_fix/{name}.py"


def site(gb: str, name: str, tag: str) -> str:
    return f"{gb} {rel(name)}:{marked_line(TARGETS / f'{name}.py', tag)}"


def table(census) -> dict[str, tuple[bool, list[str]]]:
    return {f.candidate: (f.verified, f.why_not) for f in census.fixes}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # site names are shown relative to the working directory


# ----------------------------------------------------------------------------- advice

def test_every_registry_id_has_a_strategy():
    reg = gb_registry()
    assert len(reg) > 400
    for gid, entry in reg.items():
        assert strategy_for(gid, entry) in STRATEGIES, gid
    # the curated ids exist in this torch and each has a cause and a before/after example
    assert len(PLAYBOOKS) >= 30
    for gid, book in PLAYBOOKS.items():
        assert gid in reg, gid
        assert book["cause"] and book["before"] and book["after"]
    assert strategy_for("GB0124") == "config"
    assert strategy_for("GB0036") == "config"


def test_advice_names_the_users_function_and_line():
    c = advise(census_target(f"{TARGETS}/item_helper.py:factory", Options()))
    line = marked_line(TARGETS / "item_helper.py", "ITEM")
    assert [(s.gb_id, s.line) for s in c.sites] == [("GB0124", line)]
    first = c.sites[0].advice[0]
    assert first.strategy == "config" and first.before and first.after
    assert f"normalize() at item_helper.py:{line}" in first.summary
    assert c.to_dict()["sites"][0]["advice"][0]["summary"] == first.summary


# ----------------------------------------------------------------------------- trials

@pytest.mark.slow
def test_item_config_and_opaque_ops_verify_nonstrict_moves_disable_moves():
    # The run-time candidates only (the source rewrites are tests/test_rewrites.py's).
    c = run_fix(f"{TARGETS}/item_helper.py:factory", OPTS, jobs=2,
                kinds={"config", "leaf_function", "custom_op", "disable", "nonstrict_trace"})
    call = f"{rel('item_helper')}:{marked_line(TARGETS / 'item_helper.py', 'CALL')}"
    assert table(c) == {
        "config capture_scalar_outputs=True": (True, []),
        "leaf_function on normalize()": (True, []),
        "custom_op on normalize()": (True, []),
        "disable on normalize()": (False, [f"moved, not removed: new site GB0098 {call}"]),
        "nonstrict_trace on normalize()": (False, ["site still present", f"moved, not removed: new site GB0251 {call}"]),
    }
    assert {f.label for f in c.fixes} == {site("GB0124", "item_helper", "ITEM")}
    # ranked (fix engine v2): rewrite > extract + hatch > region split > config, then fewest graphs
    assert [f.candidate for f in c.fixes[:2]] == ["leaf_function on normalize()", "custom_op on normalize()"]
    from graphstitch.fix import best as best_written
    best = best_written(c)  # the best one graphstitch can write as source (no generated fake)
    assert best is not None and best.candidate == "config capture_scalar_outputs=True"
    assert best.before.graphs > best.after.graphs == 1 and best.outputs_match
    # --diff: the config line goes after the target file's imports
    diff, ok = apply_best(c, Workspace.of(f"{TARGETS}/item_helper.py:factory"), OPTS, write=False)
    assert ok and "+torch._dynamo.config.capture_scalar_outputs = True  # graphstitch fix\n" in diff
    lines = diff.splitlines()
    assert lines[lines.index(" import torch") + 1] == "+torch._dynamo.config.capture_scalar_outputs = True  # graphstitch fix"


@pytest.mark.slow
def test_nonstrict_trace_around_data_dependent_if_moves_the_break():
    c = run_fix(f"{TARGETS}/branch_helper.py:factory", OPTS, kinds={"nonstrict_trace"})
    (f,) = c.fixes
    call = f"{rel('branch_helper')}:{marked_line(TARGETS / 'branch_helper.py', 'CALL')}"
    assert f.label == site("GB0170", "branch_helper", "BRANCH")
    assert not f.verified and not f.site_gone
    assert f.new_sites == [f"GB0251 {call}"]
    assert f.why_not == ["site still present", f"moved, not removed: new site GB0251 {call}"]


@pytest.mark.slow
def test_lost_print_is_never_verified():
    c = run_fix(f"{TARGETS}/print_helper.py:factory", OPTS,
                kinds={"config", "allow_in_graph", "leaf_function"})
    lost = ["side effect lost at run time (call 0: eager 1 print/log, compiled 0)"]
    assert table(c) == {
        "leaf_function on show()": (True, []),
        # the break goes away, but the print inside the inlined helper never runs
        "config reorderable_logging_functions={print}": (False, lost),
        # allow_in_graph runs the body at trace time only under an AOT backend
        "allow_in_graph on show()": (False, lost),
    }
    for f in c.fixes:
        assert f.site_gone and f.outputs_match and f.new_sites == []


@pytest.mark.slow
def test_hatch_that_changes_outputs_is_rejected():
    # leaf_function runs `scaled` before Dynamo replays the caller's STATE store
    c = run_fix(f"{TARGETS}/print_state.py:factory", OPTS, kinds={"leaf_function"})
    (f,) = c.fixes
    assert f.label == site("GB0059", "print_state", "PRINT")
    assert f.site_gone and not f.verified and not f.outputs_match
    assert f.why_not == ["outputs differ from eager: call 0: out: Tensor-likes are not close!"]


# ----------------------------------------------------------------------------- patches

@pytest.fixture(scope="module")
def skipped_copy(tmp_path_factory):
    """A project with skipped_helper.py and its `fix` census (nonstrict_trace only)."""
    proj = tmp_path_factory.mktemp("proj")
    shutil.copy(TARGETS / "skipped_helper.py", proj / "skipped_helper.py")
    here = os.getcwd()
    os.chdir(proj)
    try:
        c = run_fix("skipped_helper.py:factory", OPTS, kinds={"nonstrict_trace"})
    finally:
        os.chdir(here)
    return proj, c


@pytest.mark.slow
def test_diff_then_refusals(skipped_copy, monkeypatch):
    proj, c = skipped_copy
    path = proj / "skipped_helper.py"
    (f,) = c.fixes
    assert f.verified and f.candidate == "nonstrict_trace on salted()"
    monkeypatch.chdir(proj)
    diff, ok = apply_best(c, Workspace.of("skipped_helper.py:factory"), OPTS, write=False)
    assert ok and "+@torch._dynamo.nonstrict_trace  # graphstitch fix\n def salted(h):" in diff
    # outside the target's project (another project's file, an installed package): refused
    from graphstitch.fix.patches import refuse_reason
    assert "is outside the project" in refuse_reason(str(path), file_hash(str(path)), str(ROOT))
    # changed since the census: refused, nothing written
    monkeypatch.chdir(proj)
    original = path.read_text()
    path.write_text(original + "\n# edited\n")
    try:
        msg, ok = apply_best(c, Workspace.of("skipped_helper.py:factory"), OPTS, write=True)
        assert not ok and "changed since the census" in msg
        assert not (proj / "skipped_helper.py.graphstitch.bak").exists()
    finally:
        path.write_text(original)


@pytest.mark.slow
def test_apply_refuses_when_the_patched_copy_does_not_verify(skipped_copy, monkeypatch):
    # A stale census: its best candidate claims verified, the patched copy proves otherwise
    # (disable on salted() moves the break to GB0098 at the call).
    import copy
    proj, c = skipped_copy
    stale = copy.deepcopy(c)
    stale.fixes[0].patches.wrap.how = "disable"
    stale.fixes[0].kind = "disable"
    path = proj / "skipped_helper.py"
    before = path.read_text()
    monkeypatch.chdir(proj)
    msg, ok = apply_best(stale, Workspace.of("skipped_helper.py:factory"), OPTS, write=True)
    call = marked_line(TARGETS / "skipped_helper.py", "CALL")
    assert not ok and msg.startswith("the patched copy did not verify: ")
    assert f"moved, not removed: new site GB0098 skipped_helper.py:{call}" in msg
    assert path.read_text() == before and not (proj / "skipped_helper.py.graphstitch.bak").exists()


@pytest.mark.slow
def test_apply_keeps_read_only_sources_and_earlier_backups(skipped_copy, monkeypatch):
    proj, c = skipped_copy
    path = proj / "skipped_helper.py"
    original = path.read_bytes()
    monkeypatch.chdir(proj)
    path.chmod(0o444)
    try:
        msg, ok = apply_best(c, Workspace.of("skipped_helper.py:factory"), OPTS, write=True)
        assert not ok and "is read-only (mode 444); not writing it" in msg
        assert path.read_bytes() == original and not list(proj.glob("*.graphstitch.bak*"))
    finally:
        path.chmod(0o644)
    earlier = proj / "skipped_helper.py.graphstitch.bak"
    earlier.write_text("an earlier backup the user keeps")
    try:
        msg, ok = apply_best(c, Workspace.of("skipped_helper.py:factory"), OPTS, write=True)
        assert ok, msg
        assert earlier.read_text() == "an earlier backup the user keeps"
        assert (proj / "skipped_helper.py.graphstitch.bak.2").read_bytes() == original
        assert os.stat(path).st_mode & 0o777 == 0o644
    finally:  # the module's fixture is shared: leave the project as it was
        path.write_bytes(original)
        for b in proj.glob("*.graphstitch.bak*"):
            b.unlink()


@pytest.mark.slow
def test_apply_reverifies_writes_and_keeps_a_backup(skipped_copy, monkeypatch):
    proj, c = skipped_copy
    path = proj / "skipped_helper.py"
    original = path.read_text()
    assert file_hash(str(path)) == c.source_sha256[os.path.realpath(path)]
    monkeypatch.chdir(proj)
    msg, ok = apply_best(c, Workspace.of("skipped_helper.py:factory"), OPTS, write=True)
    assert ok, msg
    assert (proj / "skipped_helper.py.graphstitch.bak").read_text() == original
    assert "@torch._dynamo.nonstrict_trace" in path.read_text()
    after, _ = census_subprocess(f"{path}:factory", Options(backend="aot_eager"))
    assert after.sites == [] and after.graph_count == 1 and after.outputs_match_eager


def test_fix_cli_help_and_bad_target(tmp_path):
    from click.testing import CliRunner

    from graphstitch.cli import main
    r = CliRunner().invoke(main, ["fix", "--help"])
    assert r.exit_code == 0 and "VERIFIED only if its site is gone" in r.output and "Exit codes" in r.output
    r = CliRunner().invoke(main, ["fix", f"{tmp_path}/missing.py:factory", "-j", "1"])
    assert r.exit_code == 2 and "target file not found" in r.output and "Traceback" not in r.output

