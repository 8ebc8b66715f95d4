"""Coverage: the code Dynamo never traced is named, counted in the summary, and guarded by
the gate. Real torch.compile on tests/targets_coverage/cov_model.py, whose TinyClassifier
breaks first at an .item(), then (in the resumed frame) inside a loop through Block.forward:
Dynamo skips the rest of the resumed frame, so a later .item() runs untraced."""
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from conftest import assert_valid, census_subprocess, marked_line
from graphstitch.advice import advice_for
from graphstitch.cli import main
from graphstitch.render.html import render_html
from graphstitch.render.markdown import markdown
from graphstitch.render.sarif import UNTRACED_RULE, sarif

MODEL = Path(__file__).parent / "targets_coverage" / "cov_model.py"


def line(tag):
    return marked_line(MODEL, tag)


@pytest.fixture(scope="module")
def tiny():
    c, code = census_subprocess(f"{MODEL}:target")
    assert code == 0, c.error
    return c


def test_census_names_the_untraced_rest_of_the_skipped_frame(tiny):
    c = tiny
    # Two of the model's three breaks are seen; the later .item() ran untraced.
    assert [(s.gb_id, s.file, s.line) for s in c.sites] == [
        ("GB0059", str(MODEL), line("PRINT")), ("GB0124", str(MODEL), line("FIRST"))]
    assert all(s.line != line("LATER") for s in c.sites)
    [u] = c.coverage.untraced
    assert (u.file, u.function, u.start, u.end, u.lines, u.why) == (
        str(MODEL), "TinyClassifier.forward", line("LATER"), line("END"), 2, "skipped")
    assert f"after line {line('FIRST')}" in u.reason and f"at line {line('LOOP')}" in u.reason
    assert c.summary == ("2 break sites (3 break events) found; 2 lines in 1 function were never traced "
                         "(breaks there are not counted).")
    assert not c.clean and (c.untraced_lines, c.untraced_functions) == (2, 1)
    fc = {f.function: f for f in c.coverage.functions}
    t = fc["TinyClassifier.forward"]
    assert [(x.start, x.end) for x in t.untraced] == [(line("LATER"), line("END"))]
    assert t.traced[-1].end == line("LOOP")
    assert fc["Block.forward"].untraced == [] and fc["Head.forward"].untraced == []


def test_skipped_frame_is_the_outer_resumed_forward_not_the_inner_block(tiny):
    [f] = tiny.skipped_frames
    assert (f.file, f.qualname, f.resumed_at, f.line, f.start, f.end) == (
        str(MODEL), "TinyClassifier.forward", line("FIRST"), line("LOOP"), line("FIRST"), line("END"))


def test_stack_has_the_calling_line_and_qualified_names_tell_forwards_apart(tiny):
    by_gb = {s.gb_id: s for s in tiny.sites}
    printed = by_gb["GB0059"]
    assert printed.qualname == "Block.forward" and printed.nesting_depth == 2
    mine = [(e.line, e.qualname, e.code.split("#")[0].strip()) for e in printed.stack if e.file == str(MODEL)]
    assert mine == [(line("LOOP"), "TinyClassifier.forward", "h = blk(h)"),
                    (line("PRINT"), "Block.forward", 'print("block")')]
    assert by_gb["GB0124"].qualname == "TinyClassifier.forward"
    # "it is in a loop" points at the loop: the calling line in the frame Dynamo skipped
    assert "the loop is in TinyClassifier.forward() at cov_model.py:" + str(line("LOOP")) in \
        advice_for(printed)[0].summary
    graphs = {g.qualname for g in tiny.graphs}
    assert {"TinyClassifier.forward", "Block.forward", "Head.forward"} <= graphs


def test_every_report_carries_coverage(tiny):
    data = assert_valid("census", tiny.to_dict())
    assert data["untraced_lines"] == 2 and data["coverage"]["untraced"][0]["start"] == line("LATER")
    doc = sarif([tiny])
    sarif_schema = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(sarif_schema).validate(doc)
    [res] = [r for r in doc["runs"][0]["results"] if r["ruleId"] == UNTRACED_RULE]
    region = res["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["endLine"]) == (line("LATER"), line("END"))
    assert "TinyClassifier.forward" in res["message"]["text"]
    md = markdown([tiny])
    assert tiny.summary in md and f"cov_model.py:{line('LATER')}-{line('END')}" in md
    page = render_html(tiny)
    assert "Code Dynamo never traced" in page and "resumed after line " + str(line("FIRST")) in page


def test_disabled_function_counts_as_untraced():
    c, code = census_subprocess(f"{MODEL}:disabled_target")
    assert code == 0, c.error
    assert [(s.gb_id, s.line) for s in c.sites] == [("GB0098", line("CALLS_DISABLED"))]
    [u] = c.coverage.untraced
    assert (u.file, u.function, u.start, u.end, u.lines, u.why) == (
        str(MODEL), "eager_helper", line("DISABLED_FIRST"), line("DISABLED_LAST"), 2, "disabled")
    assert "1 function" in c.summary and not c.clean


@pytest.fixture
def proj(tmp_path, monkeypatch):
    shutil.copy(MODEL, tmp_path / "cov_model.py")
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def check(*args):
    return CliRunner().invoke(main, ["check", "cov_model.py:target", "--baseline", "base.json", "--in-process", *args])


def test_gate_says_unknown_for_a_print_added_in_untraced_code(proj):
    r = check("--update")
    assert r.exit_code == 0, r.output
    base = assert_valid("baseline", json.loads((proj / "base.json").read_text()))
    [u] = base["targets"]["cov_model.py:target"]["untraced"]
    assert (u["function"], u["start"], u["why"]) == ("TinyClassifier.forward", line("LATER"), "skipped")
    r = check()
    assert r.exit_code == 0 and "ok cov_model.py:target" in r.output, r.output

    # A new print in the code Dynamo never traced: no break is reported for it, so the
    # census is the same; the gate must not call that "ok".
    src = (proj / "cov_model.py").read_text().splitlines(keepends=True)
    at = line("LATER")
    src.insert(at, '        print("new")\n')
    (proj / "cov_model.py").write_text("".join(src))
    r = check()
    assert r.exit_code == 0, r.output
    assert "ok cov_model.py:target" not in r.output and "UNKNOWN cov_model.py:target" in r.output
    assert "code that Dynamo never traced changed" in r.output
    assert f"cov_model.py:{at}-{line('END') + 1} in" in r.output
    r = check("--strict")
    assert r.exit_code == 1 and "UNKNOWN" in r.output, r.output


def test_fix_reads_untraced_code_from_the_census_across_files():
    # Block (layers.py) breaks inside TinyClassifier.forward's loop (model.py): the skipped
    # frame is the outer forward, and `fix` takes its untraced lines (where a later fix
    # uncovers breaks: progress, not a moved break) from the census's coverage.
    from graphstitch.fix.trials import untraced_code
    pkg = Path(__file__).parent / "targets_fix" / "pkgproj"
    model = pkg / "mypkg" / "model.py"
    c, code = census_subprocess(f"{pkg}/factories.py:target")
    assert code == 0, c.error
    [f] = c.skipped_frames
    assert (f.file, f.qualname, f.line) == (str(model), "TinyClassifier.forward", marked_line(model, "LOOP"))
    [u] = c.coverage.untraced
    assert (u.file, u.function, u.start, u.why) == (str(model), "TinyClassifier.forward",
                                                    marked_line(model, "ITEM"), "skipped")
    hidden = untraced_code(c)[str(model)]
    assert "scale = h.abs().mean().item()  # ITEM" in hidden and "h = blk(h)  # LOOP" not in hidden


def test_a_torch_trace_of_the_same_run_gives_the_same_coverage(tiny, tmp_path):
    # Coverage comes from the structured trace (metrics, break reports, dynamo_error) and the
    # source: `graphstitch trace` on a TORCH_TRACE log of the model sees what the live census saw.
    import os
    import subprocess
    import sys

    from graphstitch.traces import census_from_trace
    script = tmp_path / "run.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(MODEL.parent)!r})\nimport torch, cov_model\n"
                      "m, args, kw = cov_model.target()\nwith torch.no_grad():\n"
                      "    torch.compile(m, backend='eager')(*args)\n")
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "trace")}
    subprocess.run([sys.executable, str(script)], env=env, check=True, capture_output=True, timeout=600)
    t = census_from_trace(str(tmp_path / "trace"))
    key = lambda c: ([(u.file, u.function, u.start, u.end, u.lines, u.why) for u in c.coverage.untraced],
                     [(f.qualname, f.resumed_at, f.line, f.start, f.end) for f in c.skipped_frames])
    assert key(t) == key(tiny) and t.summary == tiny.summary


def test_terminal_names_the_skipped_frame_and_the_untraced_code(tiny):
    from rich.console import Console

    from graphstitch.render import terminal
    con = Console(record=True, width=120, highlight=False, color_system=None, force_terminal=False)
    terminal.census(tiny, con)
    out = con.export_text()
    assert (f"TinyClassifier.forward (resumed after line {line('FIRST')}) "
            f"tests/targets_coverage/cov_model.py:{line('FIRST')}-{line('END')} · tracing stopped at line "
            f"{line('LOOP')}") in out.replace(str(MODEL.parent.parent.parent) + "/", "")
    assert "Never traced (ran eagerly; breaks there are not counted)" in out
    assert f"cov_model.py:{line('LATER')}-{line('END')} · 2 lines · skipped" in out
    assert f"cov_model.py:{line('PRINT')} in Block.forward" in out and tiny.summary in " ".join(out.split())
