"""Reports people act on (#13): owner frames, cost per break, next steps, terminal layout,
fullgraph semantics. Real torch.compile runs; no mocks."""

import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from conftest import ROOT, SCENARIOS, marked_line
from graphstitch import owners
from graphstitch.advice import advise
from graphstitch.live import census_target
from graphstitch.perf.gaps import census_with_cost
from graphstitch.render import terminal
from graphstitch.render.markdown import markdown
from graphstitch.render.sarif import sarif
from graphstitch.targets import Options

HERE = Path(__file__).resolve().parent / "targets_reports"

FAKELIB = '''import torch


def helper(x):
    y = x.cos()
    torch._dynamo.graph_break()  # LIB_BREAK
    return y
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A real installed package (site-packages/fakelib on sys.path) and a project using it."""
    pkgs = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (pkgs / "fakelib").mkdir(parents=True)
    (pkgs / "fakelib" / "__init__.py").write_text(FAKELIB)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    shutil.copy(HERE / "proj_model.py", proj / "proj_model.py")
    monkeypatch.syspath_prepend(str(pkgs))
    return proj, pkgs / "fakelib" / "__init__.py"


def test_owner_frame_is_the_project_line_not_the_library_line(project):
    proj, lib = project
    c = advise(census_target(f"{proj / 'proj_model.py'}:target", Options(), project_root=str(proj)))
    assert c.error is None, c.error
    (site,) = c.sites
    assert (site.gb_id, site.file, site.line) == ("GB0025", str(lib), marked_line(lib, "LIB_BREAK"))
    assert site.id.path == "fakelib/__init__.py"          # the identity stays on the root cause
    model = proj / "proj_model.py"
    mine = [r for r in site.routes if r.in_project]
    assert sorted(r.owner.line for r in mine) == [marked_line(model, "OWNER_A"), marked_line(model, "OWNER_B")]
    for r in mine:
        assert r.owner.file == str(model) and [(fr.file, fr.line) for fr in r.chain] == [(str(lib), site.line)]
        assert owners.chain_text(r) == f"proj_model.py:{r.owner.line} -> fakelib/__init__.py:{site.line}"
    assert owners.group_line(site) == "1 library line, reached from 2 places in your code"
    # The owner lands in SARIF (the root cause is a related location; fingerprint on SiteId).
    res = sarif([c], root=proj)["runs"][0]["results"][0]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "proj_model.py"
    assert res["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == site.line
    assert "proj_model.py:" in markdown([c])
    # The next step's command selects exactly this site with `fix --site` (cli.fix's filter).
    import shlex
    args = shlex.split(site.next_step.command)
    assert args[:3] == ["graphstitch", "fix", f"{proj / 'proj_model.py'}:target"] and args[3] == "--site"
    assert [s for s in c.sites if args[4] in f"{s.gb_id} {s.id.path}:{s.line}"] == [site]
    assert "proj_model.py" in site.next_step.action            # the action names your line
    # --project pointing into the package (its author's view): the library line is theirs.
    owners.attach(c, str(lib.parent))
    (r,) = [r for r in site.routes if r.in_project]
    assert (r.owner.file, r.owner.line, r.chain) == (str(lib), site.line, [])


def test_project_option_and_pyproject_setting(project, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from graphstitch.cli import main, resolve_project
    proj, lib = project
    (proj / "pyproject.toml").write_text("[project]\nname = 'p'\n[tool.graphstitch]\nproject = 'src'\n")
    (proj / "src").mkdir()
    assert resolve_project(None, str(proj)) == str((proj / "src").resolve())
    assert resolve_project(str(tmp_path), str(proj)) == str(tmp_path.resolve())
    r = CliRunner().invoke(main, ["census", "x.py:f", "--project", str(tmp_path / "missing")])
    assert r.exit_code == 2


def test_slow_gap_ranks_first_by_cost():
    c = advise(census_with_cost(f"{SCENARIOS}/sc_cost.py:target", Options(check_eager=False)))
    assert c.error is None and c.cost is not None
    slow, fast = marked_line(SCENARIOS / "sc_cost.py", "SLOW_BREAK"), marked_line(SCENARIOS / "sc_cost.py", "FAST_BREAK")
    by_id = {s.id: s for s in c.sites}
    top = by_id[c.cost.sites[0].site]
    assert (top.gb_id, top.line) == ("GB0007", slow)
    assert by_id[c.cost.sites[1].site].line == fast
    assert c.cost.sites[0].seconds.median_s >= 0.009          # the 10 ms sleep
    assert c.cost.sites[0].share > 0.5 and c.cost.rounds >= 3 and c.cost.sites[0].seconds.samples >= 3
    assert [r.kind for r in c.cost.regions] == ["gap", "graph", "gap", "graph", "gap", "graph", "gap"]
    # JSON round trip keeps the cost; the terminal ranks by it.
    from graphstitch.model import Census
    assert Census.from_dict(json.loads(json.dumps(c.to_dict()))).cost == c.cost
    con = Console(record=True, width=80, highlight=False, color_system=None)
    terminal.census(c, con)
    out = con.export_text()
    assert "ranked by measured cost" in out and re.search(r"1\. GB0007 .*sc_cost\.py:%d" % slow, out)


def _normalize(text: str) -> str:
    text = text.replace(str(ROOT) + "/", "")
    text = re.sub(r"\d+(\.\d+)? (ms|s)\b", "N \\2", text)
    text = re.sub(r"compile \d+\.\d+ s", "compile N s", text)
    text = re.sub(r"torch [\w.+]+", "torch V", text)
    return text


@pytest.fixture(scope="module")
def demo_census():
    return advise(census_target("graphstitch.demo:demo", Options(), project_root=str(ROOT)))


@pytest.mark.parametrize("width", [80, 120])
def test_terminal_snapshot(demo_census, width):
    """A real census rendered as a CI log (no TTY, no colour) at 80 and 120 columns."""
    con = Console(record=True, width=width, highlight=False, color_system=None, force_terminal=False)
    terminal.census(demo_census, con)
    out = _normalize(con.export_text())
    snap = HERE / f"demo_{width}.txt"
    if not snap.exists():   # first run writes it; review and commit
        snap.write_text(out)
    assert out == snap.read_text()
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= width or any(x.lstrip().startswith("$ graphstitch fix") for x in lines)
    # Source lines are never wrapped mid-word: each appears whole or cut with an ellipsis.
    for x in lines:
        if re.match(r"^\s+\d+ \| ", x):
            assert len(x) <= width
    assert "_wrapped_call_impl" not in out                          # torch frames collapsed
    assert "leaf_function" in out and "ignore_logging_functions" in out   # says why it differs from Dynamo
    assert "forward(x)" in out and "normalize(h)" in out            # each frame's own argument name
    assert "resume" in out                                          # the fan-out explained
    assert "graphstitch fix graphstitch.demo:demo --site 'GB0291 " in out


def test_full_stack_shows_torch_frames(demo_census):
    con = Console(record=True, width=120, highlight=False, color_system=None)
    terminal.census(demo_census, con, full_stack=True)
    assert "_wrapped_call_impl" in con.export_text() or all(
        "module.py" not in fr.file for s in demo_census.sites for fr in s.stack)


def test_fullgraph_semantics():
    """`.item()` and `nonzero` do not fail a fullgraph=True compile (it implies
    capture_scalar_outputs / capture_dynamic_output_shape_ops); a data-dependent `if` does."""
    plain = census_target(f"{SCENARIOS}/sc_item.py:target", Options())
    full = census_target(f"{SCENARIOS}/sc_item.py:target", Options(fullgraph_semantics=True))
    assert plain.semantics == "default" and full.semantics == "fullgraph"
    assert [s.gb_id for s in plain.sites] == ["GB0124"] and full.sites == []
    still = census_target(f"{SCENARIOS}/sc_datadep_if.py:target", Options(fullgraph_semantics=True))
    assert [s.gb_id for s in still.sites] == ["GB0170"] and still.semantics == "fullgraph"
    con = Console(record=True, width=100, color_system=None)
    terminal.census(still, con)
    assert "fullgraph=True semantics" in con.export_text()
    assert "fullgraph=True" in markdown([still])
