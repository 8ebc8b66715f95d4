"""`graphstitch fix` on recompile causes, on the real torch.compile: one scenario per candidate
family (call-site mark_dynamic, a number passed as a 0-d tensor and refused where it is a
slice bound, the break that hands over an .item() value, a module attribute kept as a
buffer), a cause that must be explained and not fixed, a recompile-limit hit, and --diff /
--apply / --all through the same workspace and writer."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import assert_valid, marked_line
from graphstitch.cli import main

SRC = Path(__file__).parent / "targets_fix" / "recompiles.py"
PATH = "recompiles.py"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    """A project holding a copy of the targets (patches may be written into it)."""
    shutil.copy(SRC, tmp_path / PATH)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fix(proj, factory, *args):
    out = proj / "fix.json"
    r = CliRunner().invoke(main, ["fix", f"{PATH}:{factory}", "-j", "2", "--json", str(out), *args])
    return r, (assert_valid("fix", json.loads(out.read_text())) if out.exists() else None)


def rows(d, candidate_part):
    return [f for f in d["cause_fixes"] if candidate_part in f["candidate"]]


def test_shape_cause_mark_dynamic_at_the_call_site(proj):
    r, d = fix(proj, "make_shapes")
    assert r.exit_code == 0, r.output
    assert "No fix candidates tried" not in r.output
    [cause] = d["recompiles"]
    assert cause["id"] == {"path": PATH, "function": "rowsum", "kind": "shape", "subject": "x dim 0"}
    assert cause["count"] == 1 and cause["calls"] == [1]
    [md] = rows(d, "mark_dynamic(x, 0)")[:1]
    assert md["verified"] and md["strategy"] == "caller" and md["recompiles_before"] == 1
    assert md["recompiles_after"] == 0 and md["repeat_stable"] and md["cause_gone"]
    assert "_graphstitch_dynamic(torch.randn(n, 4), 0)" in md["patch"]
    assert d["cause_fixes"][0]["kind"] == "mark_dynamic"   # the call site ranks before config
    assert "VERIFIED [caller] mark_dynamic(x, 0)" in " ".join(r.output.split())


def test_float_as_tensor_verified_int_slice_bound_refused(proj):
    r, d = fix(proj, "make_float_scale")
    assert r.exit_code == 0, r.output
    [cause] = d["recompiles"]
    assert cause["kind"] == "scalar" and cause["subject"] == "scale"
    assert cause["provenance"]["line"] == marked_line(SRC, "SCALE")
    [t] = rows(d, "as a 0-d tensor")
    assert t["verified"] and t["recompiles_after"] == 0 and "torch.tensor(s)" in t["patch"]

    r, d = fix(proj, "make_int_slice")
    assert r.exit_code == 0, r.output
    [cause] = d["recompiles"]
    # The int is a slice bound that automatic dynamic generalised after one recompile: the
    # advice does not tell to pass a tensor, and the tensor trial is refused by a new break.
    assert "symbolic after one recompile" in cause["advice"][0]
    [t] = rows(d, "as a 0-d tensor")
    assert not t["verified"] and t["new_sites"] == [f"GB0124 {PATH}:{marked_line(SRC, 'SLICE')}"]
    [dyn] = rows(d, "assume_static_by_default=False")
    assert dyn["verified"] and dyn["recompiles_after"] == 0


def test_item_value_links_its_break_and_the_break_fix_removes_it(proj):
    r, d = fix(proj, "make_item")
    assert r.exit_code == 0, r.output
    [cause] = d["recompiles"]
    peak = marked_line(SRC, "PEAK")
    assert cause["subject"] == "___stack" and cause["provenance"]["line"] == peak
    assert cause["site"]["gb_id"] == "GB0124" and cause["site"]["function"] == "normalize"
    assert d["sites"][0]["id"] == cause["site"]           # the link is the site's identity
    assert any("comes from the break" in a for a in cause["advice"])
    keep = [f for f in d["cause_fixes"] if f["rule"] == "item-keep-tensor"]
    assert keep and keep[0]["verified"] and keep[0]["after"]["sites"] == 0
    assert rows(d, "capture_scalar_outputs")[0]["verified"]


def test_counter_attribute_kept_as_buffer_and_limit_hit(proj):
    r, d = fix(proj, "make_counter_limit", "--html", str(proj / "fix.html"))
    assert r.exit_code == 0, r.output
    html = (proj / "fix.html").read_text()
    assert html.index("recompile_limit hit") < html.index("break sites")   # first in the report
    assert "keep self.steps as a buffer" in html and f"recompiles.py:{marked_line(SRC, 'STEPS')}" in html
    [hit] = d["limit_hits"]
    assert hit["function"] == "forward" and hit["call"] == 8 and hit["eager_calls"] == 3
    # Reported first: before the summary line in the terminal.
    out = " ".join(r.output.split())
    assert out.index("recompile_limit hit · forward") < out.index("graphs 8")
    [cause] = d["recompiles"]
    assert cause["kind"] == "attribute" and cause["subject"] == "self.steps"
    assert cause["provenance"]["line"] == marked_line(SRC, "STEPS")
    [buf] = rows(d, "as a buffer")
    assert buf["verified"] and buf["recompiles_before"] == 8 and buf["recompiles_after"] == 0
    assert buf["before"]["limit_hits"] == 1 and buf["after"]["limit_hits"] == 0
    assert 'self.register_buffer("steps", torch.tensor(0), persistent=False)' in buf["patch"]


def test_expected_cause_is_explained_not_fixed(proj):
    r, d = fix(proj, "make_train_eval")
    assert r.exit_code == 0, r.output
    assert d["cause_fixes"] == []
    [ex] = d["explained"]
    assert ex["expected"] and ex["count"] == 1 and ex["cause"]["kind"] == "training"
    assert "train and eval" in ex["reason"]
    [cause] = d["recompiles"]
    assert cause["provenance"]["line"] == marked_line(SRC, "INFER")   # the user's line, not batchnorm's
    assert "Expected recompiles" in r.output
    r, _ = fix(proj, "make_train_eval", "--diff")
    assert r.exit_code == 1 and "no verified candidate" in r.stderr


def test_diff_and_apply_write_the_call_site_fix(proj):
    r, _ = fix(proj, "make_shapes", "--diff")
    assert r.exit_code == 0, r.output
    assert "+def _graphstitch_dynamic(t, dim):" in r.output
    r, _ = fix(proj, "make_shapes", "--apply")
    assert r.exit_code == 0, r.output
    text = (proj / PATH).read_text()
    assert "torch._dynamo.mark_dynamic(t, dim)" in text and (proj / f"{PATH}.graphstitch.bak").exists()
    # The patched project recompiles no more.
    r = CliRunner().invoke(main, ["guards", f"{PATH}:make_shapes", "--json", str(proj / "g.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((proj / "g.json").read_text())["recompiles"] == []


def test_fix_all_reports_recompiles_before_and_after(proj):
    out = proj / "all.json"
    r = CliRunner().invoke(main, ["fix", f"{PATH}:make_counter", "--all", "--json", str(out)])
    assert r.exit_code == 0, r.output
    d = assert_valid("fixall", json.loads(out.read_text()))
    assert d["start"]["recompiles"] == 3 and d["final"]["recompiles"] == 0 and d["verified"]
    assert [s["strategy"] for s in d["steps"]] == ["rewrite"]
    assert "recompiles 3→0" in r.output


def test_census_reports_show_provenance_and_limit_hits(proj):
    """SARIF lands a cause on the line that made its guard and links the break that handed the
    value over; Markdown and JSON carry the same; a limit hit is its own result, first."""
    r = CliRunner().invoke(main, ["census", f"{PATH}:make_item", "--in-process", "--sarif", "i.sarif",
                                  "--markdown", "i.md", "--json", "i.json"])
    assert r.exit_code == 0, r.output
    res = json.loads((proj / "i.sarif").read_text())["runs"][0]["results"]
    [cause] = [x for x in res if x["ruleId"] == "GS-RECOMPILE"]
    peak = marked_line(SRC, "PEAK")
    assert cause["locations"][0]["physicalLocation"]["region"]["startLine"] == peak
    assert cause["properties"]["kind"] == "scalar" and cause["properties"]["site"].startswith("GB0124 recompiles.py")
    assert f"`recompiles.py:{peak}`" in (proj / "i.md").read_text()
    d = assert_valid("census", json.loads((proj / "i.json").read_text()))
    assert d["recompiles"][0]["site"]["gb_id"] == "GB0124"
    r = CliRunner().invoke(main, ["census", f"{PATH}:make_counter_limit", "--in-process", "--no-eager-check",
                                  "--sarif", "l.sarif"])
    assert r.exit_code == 0, r.output
    res = json.loads((proj / "l.sarif").read_text())["runs"][0]["results"]
    assert res[0]["ruleId"] == "GS-RECOMPILE-LIMIT" and "from call 9 on, 3 call(s)" in res[0]["message"]["text"]


def test_marking_one_dimension_that_moves_the_recompile_is_rejected(proj):
    """Height and width change together: the cause is the first failing guard (height);
    mark_dynamic on it leaves the width to recompile next (a new cause): rejected, and what
    dynamic=True sets is verified. The table of (h, w) sizes is not taken for a call."""
    r, d = fix(proj, "make_image_sizes")
    assert r.exit_code == 0, r.output
    [cause] = d["recompiles"]
    assert cause["id"]["subject"] == "img dim 2"
    [md] = [f for f in d["cause_fixes"] if f["kind"] == "mark_dynamic"]
    assert not md["verified"] and md["new_causes"] == [f"shape img dim 3 in pool ({PATH})"]
    assert "_graphstitch_dynamic(torch.randn(1, 3, h, w), 2)" in md["patch"]   # the sizes table untouched
    assert d["cause_fixes"][0]["verified"] and "assume_static_by_default" in d["cause_fixes"][0]["candidate"]


def test_a_shape_cause_in_a_frame_the_factory_does_not_call_marks_nothing_at_the_call_site(proj):
    # crop_sum recompiles as its own frame (its caller's loop breaks, so the caller runs eager):
    # the factory calls per_batch, whose argument at crop_sum's `rows` position is a float.
    # Marking it would raise in the factory; only the process-wide flag is offered.
    r, d = fix(proj, "make_inner_shapes")
    assert r.exit_code == 0, r.output
    [cause] = d["recompiles"]
    assert cause["id"] == {"path": PATH, "function": "crop_sum", "kind": "shape", "subject": "rows dim 0"}
    assert not rows(d, "mark_dynamic(")
    [dyn] = rows(d, "assume_static_by_default=False")
    assert dyn["verified"] and dyn["recompiles_after"] == 0
