"""Trust in the everyday run: report paths checked before anything runs, default time
limits, progress and captured target output, words on the screen at any width."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

# A target whose import leaves a mark: a refusal "before anything runs" must not leave it.
MARKED = """
import os
import torch
open(os.environ["GS_TEST_MARK"], "a").close()

def f(x):
    print("the model speaks")
    return x.sin() + 1

def factory():
    return f, (torch.ones(3),), {}
"""


def gs(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "graphstitch", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


@pytest.fixture
def marked(tmp_path):
    (tmp_path / "model.py").write_text(MARKED)
    mark = tmp_path / "mark"
    return f"{tmp_path}/model.py:factory", mark, {"GS_TEST_MARK": str(mark)}


def refused(p, needle, mark):
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("graphstitch: error:") and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert not mark.exists(), "the target ran before the refusal"


def test_a_missing_report_folder_is_refused_unless_asked_to_create_it(marked, tmp_path):
    spec, mark, env = marked
    out = tmp_path / "no" / "such" / "out.json"
    refused(gs("census", spec, "--json", out, env=env), "does not exist (--create-dirs makes it)", mark)
    assert not (tmp_path / "no").exists(), "the folder was made anyway"
    p = gs("census", spec, "--json", out, "--create-dirs", env=env)
    assert p.returncode == 0, p.stderr
    assert out.is_file() and mark.exists()


def test_two_reports_to_one_path_are_refused(marked, tmp_path):
    spec, mark, env = marked
    refused(gs("census", spec, "--json", tmp_path / "r", "--html", tmp_path / "r", env=env),
            "--json and --html are both", mark)
    os.symlink(tmp_path / "r.json", tmp_path / "link.json")   # one file under two names too
    refused(gs("census", spec, "--json", tmp_path / "r.json", "--sarif", tmp_path / "link.json", env=env),
            "give each report its own file", mark)


def test_an_unwritable_report_folder_is_refused_at_once(marked, tmp_path):
    spec, mark, env = marked
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        refused(gs("census", spec, "--html", ro / "r.html", env=env), "is not writable", mark)
        refused(gs("fix", spec, "--json", ro / "f.json", env=env), "is not writable", mark)
    finally:
        ro.chmod(0o755)
    assert not list(ro.iterdir())


def test_apply_refuses_a_read_only_source_before_any_trial(marked, tmp_path):
    spec, mark, env = marked
    src = tmp_path / "model.py"
    src.chmod(0o444)
    try:
        refused(gs("fix", spec, "--apply", env=env), "read-only", mark)
        refused(gs("fix", spec, "--all", "--apply", env=env), "read-only", mark)
    finally:
        src.chmod(0o644)
    assert src.read_text() == MARKED and not list(tmp_path.glob("*.bak*"))


SLOW_CHATTY = """
import time, warnings
import torch

def f(x):
    print("the model speaks")
    warnings.warn("a model warning")
    time.sleep(1.5)        # long enough for the progress line to be drawn
    return x.sin() + 1

def factory():
    return f, (torch.ones(3),), {}

def failing():
    def g(x):
        print("last words before the error")
        raise ValueError("boom")
    return g, (torch.ones(3),), {}
"""


def on_a_terminal(args, cwd):
    """Run graphstitch with stdout and stderr on a pseudo-terminal; everything it drew."""
    import pty
    import select
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "graphstitch", *map(str, args)], stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL, cwd=cwd, env=dict(os.environ, COLUMNS="100", TERM="xterm"))
    os.close(slave)
    chunks = []
    while True:
        r, _, _ = select.select([master], [], [], 300)
        if not r:
            break
        try:
            data = os.read(master, 65536)
        except OSError:   # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    p.wait(60)
    os.close(master)
    return p.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_the_targets_output_is_captured_shown_when_it_matters_and_progress_only_on_a_tty(tmp_path):
    (tmp_path / "chatty.py").write_text(SLOW_CHATTY)
    spec = f"{tmp_path}/chatty.py:factory"
    piped = gs("census", spec)
    assert piped.returncode == 0, piped.stderr
    shown = (piped.stdout + piped.stderr).splitlines()
    assert "UserWarning: a model warning" not in piped.stdout + piped.stderr   # captured, not interleaved
    assert "the model speaks" not in shown                                     # (the site's source line is)
    assert "call 1 of 1" not in piped.stderr and not piped.stderr.strip()   # piped: no progress
    loud = gs("census", spec, "--verbose")
    assert "the target's own output" in loud.stderr and "UserWarning: a model warning" in loud.stderr
    failed = gs("census", f"{tmp_path}/chatty.py:failing")
    assert failed.returncode == 3
    assert "the target's own output" in failed.stdout and "last words before the error" in failed.stdout
    rc, drawn = on_a_terminal(["census", spec], tmp_path)
    assert rc == 0 and "call 1 of 1" in drawn, drawn[-2000:]
    assert "UserWarning: a model warning" not in drawn


def test_every_command_that_runs_a_target_has_a_default_time_limit():
    for cmd in ("census", "check", "fix", "perf"):
        p = gs(cmd, "--help")
        assert "default: 600" in " ".join(p.stdout.split()), (cmd, p.stdout)


# ----------------------------------------------------------------------------- words on the screen

@pytest.fixture(scope="module")
def demo():
    from graphstitch.advice import advise
    from graphstitch.live import census_target
    from graphstitch.targets import Options
    return advise(census_target("graphstitch.demo:demo", Options(), project_root=str(ROOT)))


def render(fn, width, *args, **kw):
    from rich.console import Console
    con = Console(record=True, width=width, highlight=False, color_system=None, force_terminal=False)
    fn(*args, console=con, **kw)
    return con.export_text()


def one_line(out, phrase):
    """PHRASE appears, whole, on one line of OUT (not broken over two)."""
    return any(phrase in line for line in out.splitlines())


@pytest.mark.parametrize("width", [60, 80, 120])
def test_no_phrase_is_broken_at_any_width(demo, width):
    from graphstitch.render import terminal
    out = render(terminal.census, width, demo)
    c = demo
    assert c.sites and c.recompiles, "the demo breaks and recompiles (else this tests nothing)"
    phrases = [f"graphs {c.graph_count}", f"break sites {len(c.sites)}", f"break events {c.break_events}",
               f"recompile causes {len(c.recompiles)} ({c.recompile_count} recompiles)",
               f"skipped frames {len(c.skipped_frames)}", "outputs match eager yes",
               "default torch.compile semantics (fullgraph=False)", "--fullgraph-semantics for fullgraph=True"]
    for s in c.sites:
        phrases += [f"{s.events} events", f"depth {s.nesting_depth}", f"in {s.name}"]
    for r in c.recompiles:
        phrases.append(f"{r.count} recompiles")
    for p in phrases:
        assert one_line(out, p), f"{p!r} broken at {width} columns:\n{out}"
    assert all(len(x) <= width for x in out.splitlines() if not x.lstrip().startswith("$ "))


@pytest.fixture(scope="module")
def trials(demo, tmp_path_factory):
    """Real trial verdicts on the demo's first site: one whose trial census errored (a target
    that raises), one that changed nothing (the baseline itself), judged by fix's evaluate()."""
    from graphstitch.fix.candidates import candidates
    from graphstitch.fix.trials import FixReport, evaluate
    from graphstitch.live import census_target
    from graphstitch.targets import Options
    d = tmp_path_factory.mktemp("err")
    (d / "err.py").write_text(SLOW_CHATTY)
    failed = census_target(f"{d}/err.py:failing", Options())
    assert failed.error is not None
    site = demo.sites[0]
    cand = candidates(site, str(ROOT))[0]
    report = FixReport.of(demo)
    report.fixes = [evaluate(site, cand, demo, failed), evaluate(site, cand, demo, demo)]
    return report


@pytest.mark.parametrize("width", [60, 80, 120])
def test_an_errored_trial_reads_as_an_error_and_counts_stay_whole(trials, width):
    from graphstitch.render import terminal
    out = render(terminal.fixes, width, trials)
    errored, unchanged = trials.fixes
    assert errored.error is not None and not errored.verified
    err_line = next(x for x in out.splitlines() if errored.candidate in x and "ERROR" in x)
    assert "→" not in err_line, "an errored trial shows no before→after counts (they read as a win)"
    assert "boom" in out
    b, a = unchanged.before, unchanged.after
    assert one_line(out, f"graphs {b.graphs}→{a.graphs}") and one_line(out, f"sites {b.sites}→{a.sites}")


def test_no_gb_question_marks_in_any_report(tmp_path):
    """A torch 2.6 log has break reports without GB ids: every report says so in words."""
    trace = ROOT / "tests" / "traces" / "torch2.6_gs_old.log.gz"
    outs = {x: tmp_path / f"r.{x}" for x in ("json", "html")}
    p = gs("trace", trace, "--json", outs["json"], "--html", outs["html"])
    assert p.returncode == 0, p.stderr
    assert "no GB id" in p.stdout and "GB????" not in p.stdout + p.stderr
    assert "GB????" not in outs["html"].read_text()
    from graphstitch.model import UNKNOWN_GB
    from graphstitch.render.markdown import markdown
    from graphstitch.render.sarif import sarif
    from graphstitch.traces import census_from_trace
    c = census_from_trace(trace)
    assert any(s.gb_id == UNKNOWN_GB for s in c.sites), "the log has sites without a GB id"
    assert "GB????" not in markdown([c])
    assert all("GB????" not in r["message"]["text"] for r in sarif([c])["runs"][0]["results"])


BREAKING_SCRIPT = """
import torch

def f(x):
    s = x.sum().item()
    return x * s

torch.compile(f, backend="eager")(torch.ones(3))
"""


def test_run_gives_advice_and_next_steps_and_suggests_no_flag_it_lacks(tmp_path):
    (tmp_path / "train.py").write_text(BREAKING_SCRIPT)
    p = gs("run", tmp_path / "train.py", "--epochs", "1")
    assert p.returncode == 0, p.stderr
    assert "graphstitch run" in p.stdout and "GB0124" in p.stdout
    assert "Advice:" in p.stdout and "Next:" in p.stdout
    assert f"$ graphstitch run {tmp_path / 'train.py'} --epochs 1" in p.stdout   # the command that proves it
    assert "--fullgraph-semantics" not in p.stdout
    assert "--fullgraph-semantics" not in gs("trace", ROOT / "tests" / "traces" / "torch2.6_gs_old.log.gz").stdout


def test_check_writes_json(marked, tmp_path):
    import json

    from conftest import assert_valid
    spec, _, env = marked
    out = tmp_path / "check.json"
    p = gs("check", spec, "--max-breaks", "0", "--json", out, env=env)
    assert p.returncode == 1, p.stderr          # the print breaks: over the budget
    d = assert_valid("check", json.loads(out.read_text()))
    assert d["schema"] == "graphstitch.check/1" and d["ok"] is False
    (v,) = d["verdicts"]
    assert v["ok"] is False and v["regressions"]
    assert d["censuses"][spec]["sites"][0]["gb_id"] == "GB0059"


def test_fix_help_lists_what_fix_tries_in_order_and_exit_codes_in_order():
    import re
    out = gs("fix", "--help").stdout
    steps = [m.group(1) for m in re.finditer(r"^\s+\d\. (\w+)", out, re.M)]
    assert steps == ["rewrite", "caller", "extract", "split", "config", "hatch", "upstream"]
    codes = [int(m.group(1)) for m in re.finditer(r"^\s+(\d)  \S", out.split("Exit codes:")[1], re.M)]
    assert codes == sorted(codes) == [0, 1, 2, 3]


def test_applied_patches_are_counted_by_kind():
    from graphstitch.fix.patches import count_kinds
    assert count_kinds(["config", "rewrite"]) == "1 rewrite and 1 config line"
    assert count_kinds(["rewrite", "rewrite"]) == "2 rewrites"
    assert count_kinds(["hatch", "config", "rewrite"]) == "1 rewrite, 1 config line and 1 hatch decorator"


def test_fix_says_fix_in_its_header(marked, tmp_path):
    spec, _, env = marked
    p = gs("fix", spec, "--candidate", "config", "-j", "1", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("graphstitch fix ") and "graphstitch census" not in p.stdout
    assert "the model speaks\n" not in p.stdout.replace('print("the model speaks")', "")   # trials' prints captured


def test_a_site_on_line_100_in_a_with_block_reads_as_its_line_not_an_emoji_or_a_loop():
    # rich turns ":100:" into an emoji unless told not to; a frame skipped at a break inside a
    # `with` block (no loop, no GB7000) must not be called "in a loop".
    target = ROOT / "tests" / "targets_reports" / "with_block_100.py"
    p = gs("census", f"{target}:target")
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    assert "GB0170" in out and "with_block_100.py:100 in step" in out
    assert "step() at with_block_100.py:100: Dynamo skipped its frame here" in out
    assert "💯" not in p.stdout and "in a loop" not in out


def test_gb0059_that_is_not_a_print_gets_no_print_advice():
    target = ROOT / "tests" / "targets_reports" / "builtin_range.py"
    p = gs("census", f"{target}:target")
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())
    assert "GB0059" in out and "builtin_range.py:8 in spans" in out
    assert "print" not in out.replace("builtin_range", "")


STATEFUL = """
import torch


class Stepper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps += 1
        return x * self.steps


def seeded():
    torch.manual_seed(0)
    m = Stepper()
    return [(m, (torch.randn(3),), {}), (m, (torch.randn(3),), {})]


def unseeded():
    m = Stepper()
    return [(m, (torch.randn(3),), {}), (m, (torch.randn(3),), {})]
"""


def test_calls_that_change_their_module_state_match_eager_replayed_on_a_new_build(tmp_path):
    # The eager reference runs after the compiled calls: on the same module its counter is
    # already at 2. Replayed in order on a new build (the factory again) the outputs match;
    # where a new build cannot reproduce the calls (unseeded inputs), the mismatch stands.
    (tmp_path / "stepper.py").write_text(STATEFUL)
    for factory, want in (("seeded", True), ("unseeded", False)):
        out = tmp_path / f"{factory}.json"
        p = gs("census", f"{tmp_path}/stepper.py:{factory}", "--json", out)
        assert p.returncode == 0, p.stderr
        census = __import__("json").loads(out.read_text())
        assert census["outputs_match_eager"] is want, census.get("output_mismatch")


OPTIMIZER_ARG = """
import torch


class ClippedSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, clip=0.5):
        super().__init__(params, dict(lr=lr))
        self.clip = clip   # the subclass's own attribute, not in defaults

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad.clamp(-self.clip, self.clip), alpha=-group["lr"])


def apply_step(opt, snapshot):
    with torch.no_grad():
        for p, p0 in zip(opt.param_groups[0]["params"], snapshot):
            p.copy_(p0)
    opt.step()
    return [p.detach().clone() for p in opt.param_groups[0]["params"]]


def target():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    lin(torch.randn(4, 3)).sum().backward()
    snapshot = [p.detach().clone() for p in lin.parameters()]
    return [(apply_step, (ClippedSGD(lin.parameters()), snapshot), {})]
"""


def test_an_optimizer_passed_as_an_argument_is_copied_whole_for_the_eager_reference(tmp_path):
    # Optimizer.__getstate__ keeps defaults, state and param_groups only, and a Parameter's
    # deepcopy drops its .grad: the eager reference on a deepcopy once failed with
    # "'ClippedSGD' object has no attribute 'clip'" (exit 1) where the code is fine.
    (tmp_path / "opt.py").write_text(OPTIMIZER_ARG)
    out = tmp_path / "opt.json"
    p = gs("census", f"{tmp_path}/opt.py:target", "--json", out)
    assert p.returncode == 0, p.stderr
    census = __import__("json").loads(out.read_text())
    assert census["error"] is None and census["outputs_match_eager"] is True, census.get("output_mismatch")
