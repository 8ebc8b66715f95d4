"""The HTML report (escaping, content, a real headless browser) and `graphstitch run`."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, assert_valid, census_subprocess, marked_line
from graphstitch.render.html import highlight, render_html, write_html
from graphstitch.targets import Options
from graphstitch.traces import censuses_from_path, trace_files

TARGETS = Path(__file__).resolve().parent / "targets_traces"
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
HOSTILE = "</script><img src=x onerror=alert(1)>"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A live census of tr_hostile (a function named HOSTILE, an error message with it) and
    the TORCH_TRACE of the same run."""
    d = tmp_path_factory.mktemp("hostile_trace")
    old = os.environ.get("TORCH_TRACE")
    os.environ["TORCH_TRACE"] = str(d)
    try:
        c, rc = census_subprocess(f"{TARGETS / 'tr_hostile.py'}:calls", Options(check_eager=False), timeout=300)
    finally:
        os.environ.pop("TORCH_TRACE") if old is None else os.environ.__setitem__("TORCH_TRACE", old)
    assert rc == 0
    return c, d


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    c, rc = census_subprocess(f"{TARGETS / 'tr_mixed.py'}:calls", Options(check_eager=False), timeout=300)
    assert rc == 0
    return c


def _hostile_checks(c):
    line = marked_line(TARGETS / "tr_hostile.py", "TR_HOSTILE")
    site = next(s for s in c.sites if s.line == line)
    assert site.gb_id == "GB0059" and site.function == HOSTILE  # the name really reached the census
    return site


def test_hostile_strings_are_escaped(hostile):
    from graphstitch.advice import advise
    from graphstitch.ranks import compare_ranks
    c, _ = hostile
    _hostile_checks(c)
    assert HOSTILE in c.error.message
    advise(c)
    assert any(HOSTILE in a.summary for s in c.sites for a in s.advice)  # advice names the function
    # The symmetry box of two "ranks": the same census, one without the hostile site.
    other = copy.deepcopy(c)
    other.sites = [s for s in other.sites if s.function != HOSTILE]
    symmetry = compare_ranks({0: c, 1: other})
    assert any(HOSTILE in d.message for d in symmetry.divergences)
    html = render_html({0: c, 1: other}, symmetry=symmetry)
    assert HOSTILE not in html and "<img" not in html and "<b>bold" not in html
    assert html.count("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") >= 5
    assert len(re.findall(r"<script>", html)) == 1  # only our own inline script
    assert not re.search(r"<(link|img|iframe)\b|src=\"http", html)


def test_highlight_escapes_and_marks_tokens():
    h = str(highlight('if x < 1: print("<b>")  # <i>'))  # pygments' token classes, prefixed
    assert '<span class="tok-k">if</span>' in h and '<span class="tok-nb">print</span>' in h
    assert "&lt;b&gt;" in h and "<b>" not in h and '<span class="tok-c1"># &lt;i&gt;</span>' in h


def test_report_content_advice_and_source(mixed, tmp_path):
    from graphstitch.advice import advise
    c = advise(mixed)
    nested = marked_line(TARGETS / "tr_mixed.py", "TR_NESTED")
    out = tmp_path / "r.html"
    write_html(c, out)
    html = out.read_text()
    for k in ("graphs", "break sites", "break events", "skipped frames", "recompile causes", "compile seconds"):
        assert f'<div class="k">{k}' in html
    assert html.count('<tr class="site"') == len(c.sites) == 3
    assert f'<span class="ln hit"><span class="n">{nested}</span>' in html  # highlighted source from disk
    assert all(f"{s.advice[0].strategy}" in html for s in c.sites) and "verified fix" not in html
    assert "tensor &#39;x&#39; size mismatch at index 0" in html
    assert html.count("<svg") == 2 and 'class="chart"' in html and 'class="timeline"' in html


@pytest.mark.slow
def test_fix_html_shows_each_verified_fix_under_its_site(tmp_path, monkeypatch):
    """`fix --html` end to end: the trials `fix` ran, rendered under the sites they fix
    (also for a target under the working directory, given by a relative path)."""
    monkeypatch.chdir(ROOT)
    out, js = tmp_path / "fix.html", tmp_path / "fix.json"
    r = subprocess.run([PY, "-m", "graphstitch", "fix", "tests/targets_fix/item_helper.py:factory", "-j", "2",
                        "--candidate", "config", "--candidate", "disable", "--html", str(out), "--json", str(js)],
                       env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    fixes = assert_valid("fix", json.loads(js.read_text()))["fixes"]
    assert {(f["candidate"], f["verified"]) for f in fixes} == {("config capture_scalar_outputs=True", True),
                                                                 ("disable on normalize()", False)}
    html = out.read_text()
    row = html.index('<tr class="site"')
    detail = html[row:html.index("</tr>", html.index('<tr class="detail"', row))]
    assert '<span class="tag ok">verified fix</span> <code>config capture_scalar_outputs=True</code>' in detail
    assert "disable on normalize()</code> · moved, not removed: new site GB0098" in detail


@pytest.mark.slow
def test_cli_census_html(tmp_path):
    out = tmp_path / "c.html"
    r = subprocess.run([PY, "-m", "graphstitch", "census", f"{TARGETS / 'tr_loop.py'}:calls", "--html", str(out)],
                       env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert html.count('<tr class="site"') == 2 and "frame skipped" in html


# ----------------------------------------------------------------------------- browser

def _browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the test extra has it)")
    pw = sync_api.sync_playwright().start()
    b = pw.chromium.launch(executable_path=CHROMIUM, args=[
        "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])
    return pw, b


def _open(b, path):
    page = b.new_page(viewport={"width": 1250, "height": 900})
    problems, requests = [], []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    page.goto(Path(path).as_uri())
    page.wait_for_load_state("load")
    return page, problems, requests


@pytest.mark.slow
def test_report_in_a_real_browser(hostile, mixed, tmp_path):
    c, trace_dir = hostile
    pw, b = _browser()
    try:
        out = tmp_path / "hostile.html"
        write_html(c, out)
        page, problems, requests = _open(b, out)
        rows = page.locator("section.view:not([hidden]) tr.site")
        assert rows.count() == len(c.sites) == 2
        texts = [rows.nth(i).inner_text() for i in range(rows.count())]
        line = marked_line(TARGETS / "tr_hostile.py", "TR_HOSTILE")
        assert any(f"tr_hostile.py:{line}" in t and HOSTILE in t and "GB0059" in t for t in texts)
        assert page.locator("img").count() == 0 and page.evaluate("document.scripts.length") == 1
        assert problems == [] and requests == []
        # Clicking a row opens its details (the first is open already).
        detail = page.locator(f"#{rows.nth(1).get_attribute('data-target')}")
        assert detail.is_hidden()
        rows.nth(1).click()
        assert detail.is_visible()
        shot = tmp_path / "hostile.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000

        # Multi-rank: two ranks (real traces renamed into a rank layout), selector + symmetry.
        ranks_dir = tmp_path / "ranks"
        ranks_dir.mkdir()
        [f] = trace_files(trace_dir)
        shutil.copy(f, ranks_dir / "dedicated_log_torch_trace_rank_0_a.log")
        mixed_dir = tmp_path / "mixed_trace"
        subprocess.run([PY, str(TARGETS / "tr_mixed.py")], env={**ENV, "TORCH_TRACE": str(mixed_dir)},
                       check=True, capture_output=True, timeout=300)
        [g] = trace_files(mixed_dir)
        shutil.copy(g, ranks_dir / "dedicated_log_torch_trace_rank_1_b.log")
        cs = censuses_from_path(ranks_dir)
        assert list(cs) == [0, 1]
        out2 = tmp_path / "ranks.html"
        write_html(cs, out2, symmetry={"symmetric": False, "divergences": [
            {"message": "rank 1 has 3 break sites that rank 0 lacks"}, {"message": HOSTILE}]})
        page, problems, requests = _open(b, out2)
        assert "Ranks diverge" in page.locator("#symmetry").inner_text()
        assert HOSTILE in page.locator("#symmetry").inner_text()
        visible = page.locator("section.view:not([hidden]) tr.site")
        assert visible.count() == len(cs[0].sites) == 2
        page.select_option("#rank-select", "rank1")
        visible = page.locator("section.view:not([hidden]) tr.site")
        assert visible.count() == len(cs[1].sites) == 3
        assert "tr_mixed.py:%d" % marked_line(TARGETS / "tr_mixed.py", "TR_DATADEP") in visible.nth(2).inner_text()
        assert problems == [] and requests == [] and page.locator("img").count() == 0
        page.screenshot(path=str(tmp_path / "ranks.png"), full_page=True)
        assert (tmp_path / "ranks.png").stat().st_size > 10_000
        if os.environ.get("GRAPHSTITCH_SCREENSHOTS"):  # to look at them by hand
            shutil.copy(shot, os.environ["GRAPHSTITCH_SCREENSHOTS"] + "/hostile.png")
            shutil.copy(tmp_path / "ranks.png", os.environ["GRAPHSTITCH_SCREENSHOTS"] + "/ranks.png")
    finally:
        b.close()
        pw.stop()


# ----------------------------------------------------------------------------- graphstitch run

def _run(tmp_path, *args):
    return subprocess.run([PY, "-m", "graphstitch", "run", "--json", str(tmp_path / "r.json"),
                           "--html", str(tmp_path / "r.html"), *args],
                          env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_run_keeps_argv_exit_code_and_output(tmp_path):
    r = _run(tmp_path, str(TARGETS / "tr_mixed.py"), "7", "--not-ours")
    assert r.returncode == 7, r.stderr[-2000:]
    assert "script done argv=['7', '--not-ours']" in r.stdout  # its own argv, its stdout passed through
    assert r.stdout.index("script done") < r.stdout.index("graphstitch run")
    d = assert_valid("census", json.loads((tmp_path / "r.json").read_text()))
    assert [(s["gb_id"], s["line"]) for s in d["sites"]] == [
        ("GB0059", marked_line(TARGETS / "tr_mixed.py", "TR_NESTED")),
        ("GB0059", marked_line(TARGETS / "tr_mixed.py", "TR_PRINT")),
        ("GB0170", marked_line(TARGETS / "tr_mixed.py", "TR_DATADEP"))]
    assert d["graph_count"] == 8 and d["recompile_count"] == 5  # the script's own eager backend
    assert d["error"]["kind"] == "exit" and d["error"]["code"] == 7
    assert (tmp_path / "r.html").read_text().count('<tr class="site"') == 3


@pytest.mark.slow
def test_run_crash_still_gives_the_census(tmp_path):
    r = _run(tmp_path, str(TARGETS / "tr_mixed.py"), "99")
    assert r.returncode == 1
    assert "RuntimeError: boom" in r.stderr and "Traceback" in r.stderr  # like python would print it
    d = assert_valid("census", json.loads((tmp_path / "r.json").read_text()))
    assert d["break_site_count"] == 3 and d["error"]["kind"] == "script" and d["error"]["message"] == "boom"
    assert d["error"]["where"].endswith(f"tr_mixed.py:{marked_line(TARGETS / 'tr_mixed.py', 'TR_CRASH')}")


@pytest.mark.slow
def test_run_segfault_still_gives_the_census(tmp_path):
    r = _run(tmp_path, str(TARGETS / "tr_segv.py"))
    assert r.returncode == 128 + 11
    assert "before the crash" in r.stdout and "break sites 1" in r.stdout
    d = assert_valid("census", json.loads((tmp_path / "r.json").read_text()))
    assert [(s["gb_id"], s["line"]) for s in d["sites"]] == [("GB0059", marked_line(TARGETS / "tr_segv.py", "TR_SEGV"))]
    assert d["error"]["kind"] == "crash" and "SIGSEGV" in d["error"]["message"]


def test_run_missing_script(tmp_path):
    r = _run(tmp_path, str(tmp_path / "nope.py"))
    assert r.returncode == 2 and "script not found" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_cost_report_in_a_real_browser(tmp_path):
    """`census --cost --html`: the start-here card names the costliest site (the slow gap),
    with its next step; cost bars and the measured timeline with gap durations render."""
    from conftest import SCENARIOS
    out = tmp_path / "cost.html"
    r = subprocess.run([PY, "-m", "graphstitch", "census", f"{SCENARIOS / 'sc_cost.py'}:target", "--cost",
                        "--no-eager-check", "--html", str(out)], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    slow = marked_line(SCENARIOS / "sc_cost.py", "SLOW_BREAK")
    pw, b = _browser()
    try:
        page, problems, requests = _open(b, out)
        card = page.locator("#start-here").inner_text()
        assert f"sc_cost.py:{slow}" in card and "GB0007" in card and "ms per call" in card
        # A break directly in the compiled function: `fix` has nothing to wrap; the edit is
        # proved by a census.
        assert "graphstitch census" in card and "site gone" in card
        assert "default torch.compile" in page.locator("#semantics").inner_text()
        assert page.locator("span.bar").count() == 2
        gaps = page.locator("svg.measured title")
        assert any("gap GB0007" in gaps.nth(i).text_content() for i in range(gaps.count()))
        assert problems == [] and requests == []
        shot = tmp_path / "cost.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        if os.environ.get("GRAPHSTITCH_SCREENSHOTS"):
            shutil.copy(shot, os.environ["GRAPHSTITCH_SCREENSHOTS"] + "/cost.png")
    finally:
        b.close()
        pw.stop()
