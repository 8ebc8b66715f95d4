"""graphstitch check: ratchet up and down on a real target, line shifts, corrupt baselines,
budgets, another torch version. Runs in-process (CliRunner) except one subprocess run."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import assert_valid, marked_line
from graphstitch.cli import main

TARGET_SRC = Path(__file__).parent / "targets_gate" / "gt_model.py"
SPEC = "gt_model.py:factory"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    shutil.copy(TARGET_SRC, tmp_path / "gt_model.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GS_GATE_EXTRA", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def check(*args):
    return CliRunner().invoke(main, ["check", SPEC, "--baseline", "base.json", "--in-process", *args])


def test_ratchet_up_and_down(proj, monkeypatch):
    # The first baseline goes through the default (subprocess) runner.
    r = CliRunner().invoke(main, ["check", SPEC, "--baseline", "base.json", "--update"])
    assert r.exit_code == 0, r.output
    base = assert_valid("baseline", json.loads((proj / "base.json").read_text()))
    assert base["torch_version"] and base["graphstitch_version"]
    item_line = marked_line(proj / "gt_model.py", "ITEM")
    [site] = base["targets"][SPEC]["sites"]
    assert (site["id"]["gb_id"], site["id"]["path"], site["line"], site["id"]["function"]) == \
        ("GB0124", "gt_model.py", item_line, "body")
    assert site["id"]["code"] == "s = y.sum().item() # ITEM"   # whitespace-normalized source text
    assert base["targets"][SPEC]["graph_count"] == 2
    assert (proj / "base.json").read_text() == json.dumps(base, indent=2, sort_keys=True) + "\n"

    r = check()
    assert r.exit_code == 0, r.output

    # A new break: exit 1, naming file:line and GB id.
    monkeypatch.setenv("GS_GATE_EXTRA", "1")
    r = check()
    assert r.exit_code == 1, r.output
    print_line = marked_line(proj / "gt_model.py", "PRINT")
    assert f"new break site GB0059 at gt_model.py:{print_line} in body" in r.output
    assert "GB0124" not in r.output          # the old site is not a regression
    assert json.loads((proj / "base.json").read_text()) == base   # a failing check never writes

    # Remove the .item() break: fewer passes and says how to ratchet.
    monkeypatch.delenv("GS_GATE_EXTRA")
    src = (proj / "gt_model.py").read_text().replace("s = y.sum().item()  # ITEM", "s = 1.0  # ITEM")
    (proj / "gt_model.py").write_text(src)
    r = check()
    assert r.exit_code == 0, r.output
    assert f"break site gone: GB0124 at gt_model.py:{item_line} in body" in r.output
    assert "--update" in r.output
    r = check("--update")
    assert r.exit_code == 0, r.output
    assert json.loads((proj / "base.json").read_text())["targets"][SPEC]["sites"] == []

    # Ratcheted: putting the break back now fails.
    (proj / "gt_model.py").write_text(TARGET_SRC.read_text())
    r = check()
    assert r.exit_code == 1
    assert f"new break site GB0124 at gt_model.py:{item_line} in body" in r.output


def test_line_shift_above_site_passes(proj):
    assert check("--update").exit_code == 0
    src = (proj / "gt_model.py").read_text()
    (proj / "gt_model.py").write_text(src.replace("import torch\n", "import torch\n\n# unrelated\n# edits\nPAD = 1\n", 1))
    r = check()
    assert r.exit_code == 0, r.output
    assert "new break site" not in r.output and "gone" not in r.output


def test_corrupt_missing_or_foreign_baseline_is_refused_and_untouched(proj):
    for content in ("{not json", json.dumps({"some": "other file"}), json.dumps({"format": 1, "targets": {SPEC: 3}})):
        (proj / "base.json").write_text(content)
        r = check()
        assert r.exit_code == 2
        assert r.stderr.count("\n") == 1 and "graphstitch: error: baseline base.json" in r.stderr
        assert "Traceback" not in r.output
        assert (proj / "base.json").read_text() == content
    (proj / "base.json").unlink()
    r = check()
    assert r.exit_code == 2 and "does not exist" in r.stderr
    assert not (proj / "base.json").exists()
    # --update replaces a corrupt file only after keeping a copy.
    (proj / "base.json").write_text("{not json")
    r = check("--update")
    assert r.exit_code == 0, r.output
    assert (proj / "base.json.bak").read_text() == "{not json"
    assert json.loads((proj / "base.json").read_text())["targets"][SPEC]["sites"]


def test_target_not_in_baseline_is_usage_error(proj):
    (proj / "base.json").write_text(json.dumps({"format": 1, "torch_version": None, "targets": {}}))
    r = check()
    assert r.exit_code == 2 and "not in baseline" in r.stderr


def test_budgets_from_cli_and_pyproject(proj):
    r = CliRunner().invoke(main, ["check", SPEC, "--in-process", "--max-breaks", "0"])
    assert r.exit_code == 1 and "break sites: 1 over budget 0" in r.output
    r = CliRunner().invoke(main, ["check", SPEC, "--in-process", "--max-breaks", "1", "--max-graphs", "2",
                                  "--max-recompiles", "0"])
    assert r.exit_code == 0, r.output
    (proj / "pyproject.toml").write_text("[tool.graphstitch]\nmax-graphs = 1\n")
    r = CliRunner().invoke(main, ["check", SPEC, "--in-process"])
    assert r.exit_code == 1 and "graphs: 2 over budget 1" in r.output
    r = CliRunner().invoke(main, ["check", SPEC, "--in-process", "--max-graphs", "2"])   # the CLI wins
    assert r.exit_code == 0, r.output
    (proj / "pyproject.toml").write_text("[tool.graphstitch]\nmax-graphs = -1\n")
    r = CliRunner().invoke(main, ["check", SPEC, "--in-process"])
    assert r.exit_code == 2 and "non-negative" in r.stderr


def test_other_torch_version_warns_and_still_compares(proj, monkeypatch):
    assert check("--update").exit_code == 0
    base = assert_valid("baseline", json.loads((proj / "base.json").read_text()))
    base["torch_version"] = "2.99.0"
    base["targets"][SPEC]["sites"][0]["id"]["gb_id"] = "GB9999"   # a renumbered break still matches by line text
    (proj / "base.json").write_text(json.dumps(base))
    r = check()
    assert r.exit_code == 0, r.output
    assert "torch 2.99.0" in r.stderr and "warning" in r.stderr
    monkeypatch.setenv("GS_GATE_EXTRA", "1")
    r = check()
    assert r.exit_code == 1 and "new break site GB0059" in r.output


def test_failing_target_exits_3_and_writes_nothing(proj):
    (proj / "boom.py").write_text("import torch\n\ndef f(x):\n    raise ValueError('boom')\n\n"
                                  "def factory():\n    return (f, (torch.ones(2),), {})\n")
    r = CliRunner().invoke(main, ["check", "boom.py:factory", "--baseline", "base.json", "--update", "--in-process"])
    assert r.exit_code == 3 and "boom" in r.stderr
    assert not (proj / "base.json").exists()
    r = CliRunner().invoke(main, ["check", "nope.py:factory", "--max-breaks", "0", "--in-process"])
    assert r.exit_code == 2 and "target file not found" in r.stderr


def test_recompile_cause_ratchet(proj, monkeypatch):
    # Baseline with two batch sizes (one recompile cause), then a single call: the cause is
    # gone (passes); back to two sizes after --update: a new cause fails.
    (proj / "rc.py").write_text(
        "import os\nimport torch\n\ndef f(x):\n    return x * 2\n\n"
        "def factory():\n    sizes = [2, 3] if os.environ.get('GS_RC') else [2]\n"
        "    return [(f, (torch.randn(b, 3),), {}) for b in sizes]\n")
    monkeypatch.setenv("GS_RC", "1")
    run = lambda *a: CliRunner().invoke(main, ["check", "rc.py:factory", "--baseline", "rc.json", "--in-process", *a])
    assert run("--update").exit_code == 0
    assert json.loads((proj / "rc.json").read_text())["targets"]["rc.py:factory"]["recompiles"] == [
        {"reason": "tensor 'x' size mismatch at index 0", "count": 1,
         "id": {"path": "rc.py", "function": "f", "kind": "shape", "subject": "x dim 0"}}]
    monkeypatch.delenv("GS_RC")
    r = run()
    assert r.exit_code == 0 and "recompile cause gone: tensor 'x' size mismatch at index 0" in r.output
    assert run("--update").exit_code == 0
    monkeypatch.setenv("GS_RC", "1")
    r = run()
    assert r.exit_code == 1 and "new recompile cause (1x) at rc.py:4: tensor 'x' size mismatch at index 0" in r.output


def test_new_recompile_limit_hit_fails_first(proj, monkeypatch):
    """A counter attribute recompiles every call; past recompile_limit (8) the frame runs
    eagerly: the gate names that first, with the call it happened at."""
    (proj / "lim.py").write_text(
        "import os\nimport torch\n\nclass C(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.n = 0\n\n    def forward(self, x):\n"
        "        self.n += 1\n        return x * self.n\n\n"
        "def factory():\n    m = C()\n    return [(m, (torch.randn(3),), {}) for _ in range(int(os.environ['GS_N']))]\n")
    monkeypatch.setenv("GS_N", "3")
    run = lambda *a: CliRunner().invoke(main, ["check", "lim.py:factory", "--baseline", "l.json", "--in-process",
                                               "--no-eager-check", *a])
    assert run("--update").exit_code == 0
    assert json.loads((proj / "l.json").read_text())["targets"]["lim.py:factory"]["limit_hits"] == []
    monkeypatch.setenv("GS_N", "11")
    r = run()
    assert r.exit_code == 1, r.output
    lines = [ln.strip() for ln in r.output.splitlines() if ln.strip().startswith("- ")]
    assert lines[0] == "- new recompile_limit hit: forward at lim.py:9 runs eagerly from call 9 on", r.output
    assert run("--update").exit_code == 0
    assert json.loads((proj / "l.json").read_text())["targets"]["lim.py:factory"]["limit_hits"] == [
        {"path": "lim.py", "function": "forward", "limit": "recompile_limit"}]
    assert run().exit_code == 0


def test_new_skipped_frame_fails(tmp_path, monkeypatch):
    shutil.copy(TARGET_SRC.parent / "gt_loop.py", tmp_path / "gt_loop.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GS_LOOP", raising=False)
    run = lambda *a: CliRunner().invoke(main, ["check", "gt_loop.py:factory", "--baseline", "l.json", "--in-process", *a])
    assert run("--update").exit_code == 0
    monkeypatch.setenv("GS_LOOP", "1")
    r = run()
    assert r.exit_code == 1, r.output
    assert "new skipped frame (runs eager): looped at gt_loop.py:" in r.output
    line = marked_line(tmp_path / "gt_loop.py", "LOOP")
    assert f"new break site GB0059 at gt_loop.py:{line} in looped" in r.output


def test_baseline_does_not_depend_on_how_the_target_path_is_spelled(proj, tmp_path_factory, monkeypatch):
    """One target, one baseline entry: relative, ./, absolute spellings, and another
    checkout of the same project (run from another folder) all match it."""
    (proj / "pyproject.toml").write_text("[project]\nname = 'demo'\n")   # the project root
    assert check("--update").exit_code == 0
    assert list(json.loads((proj / "base.json").read_text())["targets"]) == ["gt_model.py:factory"]
    for spelling in ("./gt_model.py:factory", f"{proj}/gt_model.py:factory"):
        r = CliRunner().invoke(main, ["check", spelling, "--baseline", "base.json", "--in-process"])
        assert r.exit_code == 0, r.output
    other = tmp_path_factory.mktemp("elsewhere") / "checkout"
    shutil.copytree(proj, other)
    monkeypatch.chdir(other.parent)
    r = CliRunner().invoke(main, ["check", "checkout/gt_model.py:factory", "--baseline", "checkout/base.json",
                                  "--in-process"])
    assert r.exit_code == 0, r.output
    assert "ok checkout/gt_model.py:factory" in r.output


def test_a_graphstitch_0_1_baseline_still_gates(proj):
    """Baselines written by graphstitch 0.1 (format 1: sites by file name, function and
    source text) are read and compared; --update rewrites them in the current format."""
    item_line = marked_line(proj / "gt_model.py", "ITEM")
    (proj / "base.json").write_text(json.dumps({
        "format": 1, "graphstitch_version": "0.1.0", "torch_version": None,
        "targets": {SPEC: {"graph_count": 2, "break_site_count": 1, "break_events": 1, "recompile_count": 0,
                           "sites": [{"gb_id": "GB0124", "file": "gt_model.py", "line": item_line,
                                      "function": "body", "code": "s = y.sum().item()  # ITEM", "events": 1}],
                           "skipped_frames": [], "recompiles": []}}}))
    r = check()
    assert r.exit_code == 0, r.output
    assert check("--update").exit_code == 0
    assert json.loads((proj / "base.json").read_text())["format"] == 3   # untraced code kept since 3


def test_a_baseline_with_a_wrong_type_is_one_line_exit_2(proj):
    assert check("--update").exit_code == 0
    base = json.loads((proj / "base.json").read_text())
    base["targets"][SPEC]["graph_count"] = "two"
    (proj / "base.json").write_text(json.dumps(base))
    r = check()
    assert r.exit_code == 2, r.output
    assert "is malformed (targets.gt_model.py:factory.graph_count: Input should be a valid integer" in r.stderr
    assert "Traceback" not in r.output and len(r.stderr.strip().splitlines()) == 1
