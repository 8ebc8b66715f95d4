"""The command line: the demo, JSON output, and every kind of bad input -> one line + exit code."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, assert_valid, marked_line

BAD = ROOT / "tests" / "targets_bad" / "bad_targets.py"


def gs(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "graphstitch", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc, code, needle):
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [l for l in proc.stderr.splitlines() if l.startswith("graphstitch: error:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr[-2000:]


def test_demo_json(tmp_path):
    out = tmp_path / "census.json"
    p = gs("census", "--demo", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "Break sites, ranked by impact" in p.stdout and "GB0124" in p.stdout
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["schema"] == "graphstitch.census/2" and d["error"] is None
    assert d["torch_version"].startswith("2.13")
    assert {s["gb_id"] for s in d["sites"]} == {"GB0124", "GB0170", "GB0291"}
    assert d["break_events"] == sum(s["events"] for s in d["sites"])
    assert d["graph_count"] == len(d["graphs"]) and d["recompiles"][0]["count"] >= 2
    assert d["outputs_match_eager"] is True
    for key in ("gb_id", "gb_type", "file", "line", "function", "events", "frame_skipped",
                "nesting_depth", "stack"):
        assert key in d["sites"][0]


def test_help_documents_exit_codes():
    p = gs("census", "--help")
    assert p.returncode == 0
    for text in ("Exit codes", "0  ran", "2  usage", "3  the target itself failed", "--nested-graph-breaks"):
        assert text in p.stdout


@pytest.mark.parametrize("spec, needle", [
    ("tests/targets_bad/missing.py:target", "target file not found"),
    (f"{BAD}:no_such_factory", "has no 'no_such_factory'"),
    (f"{BAD}:not_a_factory", "is not callable"),
    ("tests/targets_bad/import_error.py:target", "ModuleNotFoundError"),
    (f"{BAD}:wrong_shape", "must be (fn, args, kwargs)"),
    (f"{BAD}:not_callable_fn", "fn is not callable"),
    ("no_colon_here", "must be PATH.py:FACTORY"),
])
def test_bad_target_is_one_line_exit_2(spec, needle):
    assert_one_line_error(gs("census", spec), 2, needle)


def test_usage_errors_exit_2():
    assert_one_line_error(gs("census"), 2, "exactly one of TARGET or --demo")
    assert gs("census", "--demo", "--dynamic", "sometimes").returncode == 2


def test_target_raising_in_eager_exit_3_with_json(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{BAD}:raises_in_eager", "--json", out)
    assert_one_line_error(p, 3, "the model is broken")
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["error"]["kind"] == "eager" and d["error"]["type"] == "ValueError"


def test_segfault_keeps_partial_census(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{BAD}:segfault", "--no-eager-check", "--json", out)
    assert_one_line_error(p, 3, "signal SIGABRT")
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["error"]["kind"] == "crash"
    # What was traced before the crash is still there: the print break in f, and the call to
    # os.abort (a skipped C function: a break, then run eagerly, then the crash).
    assert sorted((s["gb_id"], s["line"]) for s in d["sites"]) == \
        [("GB0007", marked_line(BAD, "ABORT")), ("GB0059", marked_line(BAD, "BREAK"))]


def test_hang_is_bounded_by_timeout(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{BAD}:hang", "--no-eager-check", "--timeout", "20", "--json", out)
    assert_one_line_error(p, 3, "did not finish within 20 s")
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["error"]["kind"] == "timeout"
    assert sorted((s["gb_id"], s["line"]) for s in d["sites"]) == \
        [("GB0007", marked_line(BAD, "SLEEP")), ("GB0059", marked_line(BAD, "BREAK"))]


def test_in_process_matches_subprocess(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    target = f"{ROOT}/tests/scenarios/sc_nested3.py:target"
    assert gs("census", target, "--json", a).returncode == 0
    assert gs("census", target, "--in-process", "--json", b).returncode == 0
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    for key in ("graph_count", "break_events", "break_site_count", "recompile_count"):
        assert da[key] == db[key]
    assert [(s["gb_id"], s["file"], s["line"], s["events"]) for s in da["sites"]] == \
        [(s["gb_id"], s["file"], s["line"], s["events"]) for s in db["sites"]]
