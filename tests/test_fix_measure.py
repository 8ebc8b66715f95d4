"""`graphstitch fix --measure`: before/after latency of each verified fix, timed alternately."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, assert_valid

pytestmark = pytest.mark.slow


def test_measure_reports_before_after_and_speedup_for_verified_fixes(tmp_path):
    out = tmp_path / "fix.json"
    p = subprocess.run([sys.executable, "-m", "graphstitch", "fix", f"{ROOT}/tests/targets_fix/item_helper.py:factory",
                        "--candidate", "config", "--measure", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    fixes = assert_valid("fix", json.loads(out.read_text()))["fixes"]
    verified = [f for f in fixes if f["verified"]]
    assert verified and all(f["measure"] for f in verified)
    assert not any(f["measure"] for f in fixes if not f["verified"])
    m = verified[0]["measure"]
    assert m["backend"] == "aot_eager" and m["error"] is None
    for side in ("before", "after"):
        assert m[side]["median_s"] > 0 and m[side]["samples"] >= 3 and m[side]["q1_s"] <= m[side]["q3_s"]
    assert m["speedup"] == pytest.approx(m["before"]["median_s"] / m["after"]["median_s"])
    assert "What the verified fixes buy" in p.stdout
