"""Never a false "clean": runs that stop early, compiles that fail, captures that cannot be
verified, and writes that must not touch what the user owns. Each case asserts the exit
code, the one-line message and that the user's files are unchanged (content and mode)."""

import json
import os
import stat
import subprocess
import sys

from conftest import ROOT, assert_valid, marked_line

FAULTS = ROOT / "tests" / "targets_faults" / "faults.py"


def gs(*args, timeout=300, cwd=None):
    return subprocess.run([sys.executable, "-m", "graphstitch", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_error(proc, code, needle):
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("graphstitch: error:")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr[-2000:]
    assert "No graph breaks" not in proc.stdout


def snapshot(path):
    st = os.lstat(path)
    return path.read_bytes(), stat.S_IMODE(st.st_mode), stat.S_ISLNK(st.st_mode)


# ----------------------------------------------------------------------------- early exits

def test_exit_in_factory_is_exit_3_not_clean(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{FAULTS}:exit_in_factory", "--json", out)
    one_error(p, 3, "target failed (exit): the target called sys.exit(0) in its factory")
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["error"]["kind"] == "exit" and d["error"]["code"] == 0
    assert d["error"]["where"] == f"{FAULTS}:{marked_line(FAULTS, 'FACTORY_EXIT')}"
    assert d["completed"] is False and d["clean"] is False
    assert d["summary"].startswith("Incomplete, no graph compiled")


def test_exit_in_call_keeps_site_and_code(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{FAULTS}:exit_in_call", "--json", out)
    one_error(p, 3, "sys.exit(2) during call 1 of 1")
    d = json.loads(out.read_text())
    assert d["error"]["kind"] == "exit" and d["error"]["code"] == 2
    # What was traced before the exit is kept: sys.exit is a skipped builtin (a break).
    assert [(s["gb_id"], s["line"]) for s in d["sites"]] == [("GB0007", marked_line(FAULTS, "CALL_EXIT"))]
    assert "before the run stopped" in d["summary"]


def test_os_exit_in_call_is_exit_3(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{FAULTS}:hard_exit_in_call", "--json", out)
    one_error(p, 3, "the process exited with code 0 before graphstitch's worker finished")
    d = json.loads(out.read_text())
    assert d["error"]["kind"] == "exit" and d["completed"] is False and not d["clean"]


def test_guards_and_check_refuse_an_incomplete_census(tmp_path):
    one_error(gs("guards", f"{FAULTS}:exit_in_factory", "--repeat", "2"), 3, "sys.exit(0)")
    base = tmp_path / "baseline.json"
    one_error(gs("check", f"{FAULTS}:exit_in_factory", "--baseline", base, "--update"), 3, "sys.exit(0)")
    assert not base.exists()  # never ratcheted on an incomplete run
    # A real baseline stays as it was when the target later exits early.
    assert gs("check", f"{FAULTS}:clean", "--baseline", base, "--update").returncode == 0
    before = snapshot(base)
    p = gs("check", f"{FAULTS}:exit_in_factory", "--baseline", base)
    assert p.returncode in (2, 3) and "Improved" not in p.stdout
    assert snapshot(base) == before


def test_compile_failure_names_the_users_line(tmp_path):
    out = tmp_path / "c.json"
    p = gs("census", f"{FAULTS}:compile_only_failure", "--json", out)
    line = marked_line(FAULTS, "COMPILE_FAIL")
    one_error(p, 3, f"TorchRuntimeError at {FAULTS}:{line}: RuntimeError when making fake tensor call")
    d = json.loads(out.read_text())
    assert d["error"]["kind"] == "compiled" and d["error"]["where"] == f"{FAULTS}:{line}"
    # The megabyte-sized repr is cut, Dynamo's "from user code" section is kept whole.
    assert len(d["error"]["message"]) < 3000 and "from user code:" in d["error"]["message"]
    assert f'line {line}, in step' in d["error"]["message"]
    # The skipped frame points at the failing line, not at the def line.
    assert [(f["function"], f["line"]) for f in d["skipped_frames"]] == [("step", line)]
    assert "compile failed at" in d["summary"]


def test_clean_target_says_so():
    p = gs("census", f"{FAULTS}:clean")
    assert p.returncode == 0, p.stderr
    assert "No graph breaks." in p.stdout


# ----------------------------------------------------------------------------- capture self-check

def test_capture_that_receives_no_records_is_an_error(monkeypatch):
    """A torch that moved its trace logger: graphs are counted, no Dynamo record arrives."""
    import torch

    import graphstitch
    from graphstitch import dynamo

    def step(x):
        print("side effect")
        return x.sin()

    monkeypatch.setattr(dynamo, "TRACE_LOGGER", "torch.__not_the_trace_logger")
    c = graphstitch.census(step, torch.randn(3))
    assert c.graph_count >= 1 and not c.sites
    assert c.error is not None and c.error.kind.value == "capture"
    assert "sent no Dynamo trace records" in c.error.message and torch.__version__ in c.error.message
    assert not c.clean and "No graph breaks" not in c.summary


def test_capture_checks_breaks_against_dynamos_counters(monkeypatch):
    """Records arrive but no break report can be read (a changed layout): Dynamo's own
    counter of graph breaks disagrees, and the census says so."""
    import torch

    import graphstitch
    from graphstitch import records

    monkeypatch.delitem(records.PARSERS, "artifact:dynamo_graph_break_reason")

    def step(x):
        print("side effect")
        return x.sin()

    c = graphstitch.census(step, torch.randn(3))
    assert c.error is not None and c.error.kind.value == "capture"
    assert "Dynamo counted 1 graph break(s)" in c.error.message


# ----------------------------------------------------------------------------- writes

def test_reports_keep_mode_and_symlink_and_refuse_read_only(tmp_path):
    report = tmp_path / "report.json"
    report.write_text("old")
    report.chmod(0o640)
    p = gs("census", f"{FAULTS}:clean", "--json", report)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(report.stat().st_mode) == 0o640 and json.loads(report.read_text())["clean"]

    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    assert gs("census", f"{FAULTS}:clean", "--markdown", link).returncode == 0
    assert link.is_symlink() and "No graph breaks." in real.read_text()

    locked = tmp_path / "locked.json"
    locked.write_text("keep me")
    locked.chmod(0o444)
    before = snapshot(locked)
    one_error(gs("census", f"{FAULTS}:clean", "--json", locked), 2, "is read-only (mode 444); not writing it")
    assert snapshot(locked) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["link.md", "locked.json", "real.md", "report.json"]


def test_new_files_get_the_umask_mode(tmp_path):
    out = tmp_path / "new.json"
    code = ("import os, sys; os.umask(0o027); from graphstitch.cli import main; "
            f"sys.argv = ['graphstitch', 'census', {str(FAULTS) + ':clean'!r}, '--json', {str(out)!r}]; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_missing_target_answers_before_importing_torch():
    code = ("import sys; from graphstitch.cli import main\n"
            "sys.argv = ['graphstitch', 'census', 'no/such/file.py:f']\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    print(e.code, 'torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["2", "False"], p.stderr
    assert "target file not found: no/such/file.py" in p.stderr


def test_import_error_names_type_and_line(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\nx = 1\nraise ValueError('broken at import')\n")
    one_error(gs("census", f"{bad}:f"), 2, f"ValueError at {bad}:4: broken at import")


def test_a_target_failing_only_when_compiled_still_gets_fixes_judged_against_eager(tmp_path):
    # The break hands `n` to a resume function that calls an op whose fake kernel raises: the
    # compiled run fails. Fixes are still tried against eager; one that runs that statement
    # eagerly is VERIFIED (after it the compiled run completes) and --diff shows it.
    prog = tmp_path / "faults.py"
    prog.write_text(FAULTS.read_text())
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    out = tmp_path / "f.json"
    p = gs("fix", f"{prog}:compile_fails_after_break", "-j", "2", "--json", out, cwd=tmp_path)
    one_error(p, 3, "target failed (compiled)")
    d = json.loads(out.read_text())
    assert d["error"]["kind"] == "compiled"
    assert [(s["gb_id"], s["line"]) for s in d["sites"]] == [("GB0124", marked_line(prog, "BREAK_BEFORE_FAIL"))]
    assert any(f["verified"] for f in d["fixes"]) and "The original fails when compiled" in p.stdout
    before = snapshot(prog)
    p = gs("fix", f"{prog}:compile_fails_after_break", "-j", "2", "--diff", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "+++ b/faults.py" in p.stdout and "Traceback" not in p.stderr
    assert snapshot(prog) == before


def test_a_training_step_runs_again_with_autograd_instead_of_failing(tmp_path):
    # backward() under the census's default torch.no_grad() raises in eager too: not the
    # target's bug. It runs again with autograd on (as --grad), and the census says so.
    prog = tmp_path / "train.py"
    prog.write_text(
        "import torch\nimport torch.nn.functional as F\n\n\ndef train_step(model, x, y):\n"
        "    loss = F.mse_loss(model(x), y)\n    loss.backward()  # BACKWARD\n"
        "    print(f'loss {loss.item():.3f}')  # GRAD_BREAK\n    return loss.detach()\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    model = torch.nn.Linear(3, 1)\n"
        "    return [(train_step, (model, torch.randn(4, 3), torch.randn(4, 1)), {})]\n")
    out = tmp_path / "c.json"
    p = gs("census", f"{prog}:target", "--json", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["error"] is None and d["config"]["grad"] is True and d["config"]["grad_auto"] is True
    back, report = marked_line(prog, "BACKWARD"), marked_line(prog, "GRAD_BREAK")
    assert sorted((s["gb_id"], s["line"]) for s in d["sites"]) == [("GB0059", report), ("GB0123", back),
                                                                   ("GB0124", report)]
    assert "the target needs autograd (backward(), a gradient hook)" in " ".join(p.stdout.split())
    # Asked for explicitly, it runs once, and says only that autograd is on.
    p = gs("census", f"{prog}:target", "--grad", "--json", out, cwd=tmp_path)
    d = json.loads(out.read_text())
    assert p.returncode == 0 and d["config"]["grad"] is True and "grad_auto" not in d["config"]


def test_a_gradient_hook_on_an_activation_runs_again_with_autograd(tmp_path):
    # Saliency code registers a hook on an activation before it calls backward(): under the
    # default no_grad the activation does not require grad, and register_hook raises first.
    prog = tmp_path / "saliency.py"
    prog.write_text(
        "import torch\n\n\nclass Saliency:\n    def __init__(self, net):\n        self.net, self.seen = net, []\n\n"
        "    def keep(self, g):\n        self.seen.append(g)\n\n"
        "    def __call__(self, x):\n        act = self.net[0](x)\n        act.register_hook(self.keep)\n"
        "        self.net[1](act).sum().backward()  # SAL_BACKWARD\n        return self.seen[-1].abs().mean(1)\n\n\n"
        "def target():\n    torch.manual_seed(0)\n"
        "    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 1))\n"
        "    return [(Saliency(net), (torch.randn(4, 3),), {})]\n")
    out = tmp_path / "c.json"
    p = gs("census", f"{prog}:target", "--json", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    d = assert_valid("census", json.loads(out.read_text()))
    assert d["error"] is None and d["config"]["grad_auto"] is True
    assert ("GB0123", str(prog), marked_line(prog, "SAL_BACKWARD")) in \
        [(s["gb_id"], s["file"], s["line"]) for s in d["sites"]], d["sites"]


def test_printed_clock_numbers_are_compared_masked_when_the_compiled_side_varies_and_eager_happens_not_to():
    # A timing print read to 3 decimals: a fast eager step prints 0.000 every time, the
    # compiled one varies. Its varying shows the clock is read at run time (not frozen at
    # trace time, which a compiled side that never varies would show): compared masked.
    from itertools import count

    from graphstitch.live import _settle_effects

    ticks = count(1)

    def eager(x):
        print(f"Time {0.0:.3f}")

    def compiled(x):
        print(f"Time {next(ticks) / 1000:.3f}")

    e, c = _settle_effects(eager, compiled, ((1,), {}), ((1,), {}), ["stdout Time 0.000\n"], ["stdout Time 0.009\n"])
    assert e == c == ["stdout Time#\n"]
    frozen = _settle_effects(compiled, eager, ((1,), {}), ((1,), {}), ["stdout Time 0.009\n"], ["stdout Time 0.000\n"])
    assert frozen == (["stdout Time 0.009\n"], ["stdout Time 0.000\n"])   # compiled never varies, eager does
    # ...which freezes a clock only where a hatch traces a body at compile time: without
    # one (a split's eager glue printing a fast step's 0.000), the numbers are masked too.
    unfrozen = _settle_effects(compiled, eager, ((1,), {}), ((1,), {}), ["stdout Time 0.009\n"],
                               ["stdout Time 0.000\n"], can_freeze=False)
    assert unfrozen == (["stdout Time#\n"], ["stdout Time#\n"])


def test_numbers_a_function_that_reads_a_clock_prints_are_compared_masked_on_real_compiled_frames(tmp_path):
    # Each side prints the same every time, yet they differ (a compiled step consistently
    # slower than eager): re-running cannot tell a clock from a fault, the code can. Where
    # the printing function reads a clock and no hatch traces a body, its numbers are masked;
    # elsewhere, or where a hatch could freeze the clock, the difference stands.
    import importlib.util
    import logging

    import torch

    from graphstitch.live import _compare_fresh

    mod = tmp_path / "timed.py"
    mod.write_text(
        "import logging\nimport time\n\nlog = logging.getLogger('timed')\n\n\n"
        "def step(x, took):\n"
        "    end = time.time()\n"
        "    y = (x * 2).sum()\n"
        "    print(f'Time {took:.3f} loss {float(y):.2f}')\n"
        "    log.info('Time %.3f', took)\n"
        "    return y\n\n\n"
        "def padded(x, took):\n"
        "    t0 = time.time()\n"
        "    y = (x * 2).sum()\n"
        "    print('| ms/batch {:5.2f} | loss {:5.2f}'.format(took * 1000, float(y)))\n"
        "    return y\n\n\n"
        "def untimed(x, took):\n"
        "    y = (x * 2).sum()\n"
        "    print(f'Time {took:.3f}')\n"
        "    return y\n")
    spec = importlib.util.spec_from_file_location("timed", mod)
    timed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(timed)
    logging.getLogger("timed").setLevel(logging.INFO)
    x = torch.ones(3)
    for fn, masked in ((timed.step, True), (timed.untimed, False)):
        torch._dynamo.reset()
        comp = torch.compile(fn, backend="eager")
        checks, err = _compare_fresh([(fn, (x, 0.004), {})], [(fn, (x, 0.002), {})], {id(fn): comp},
                                     can_freeze=False)
        assert err is None and checks.fresh_outputs_match
        assert checks.side_effects_kept is masked, (fn.__name__, checks.side_effects)
    # a duration padded to a width: its padding depends on its magnitude too (9.87 and 10.12)
    torch._dynamo.reset()
    checks, _ = _compare_fresh([(timed.padded, (x, 0.01012), {})], [(timed.padded, (x, 0.00987), {})],
                               {id(timed.padded): torch.compile(timed.padded, backend="eager")}, can_freeze=False)
    assert checks.side_effects_kept, checks.side_effects
    # a run with a hatch that traces a body at compile time could freeze the clock: unmasked
    checks, _ = _compare_fresh([(timed.step, (x, 0.004), {})], [(timed.step, (x, 0.002), {})],
                               {id(timed.step): torch.compile(timed.step, backend="eager")}, can_freeze=True)
    assert checks.side_effects_kept is False and "Time 0.004" in " ".join(checks.side_effects.compiled)
    # the loss printed beside the clock keeps its text: a changed format still shows
    checks, _ = _compare_fresh([(timed.untimed, (x, 0.002), {})], [(timed.step, (x, 0.002), {})],
                               {id(timed.untimed): timed.untimed}, can_freeze=False)
    assert checks.side_effects_kept is False


def test_only_a_hatch_that_traces_its_body_can_freeze_a_clock(tmp_path):
    from graphstitch.live import _can_freeze
    from graphstitch.targets import Options, Patches, Wrap

    assert _can_freeze(Options(patches=Patches(wrap=Wrap("m.py", 3, "f", "nonstrict_trace"))))
    assert not _can_freeze(Options(patches=Patches(wrap=Wrap("m.py", 3, "f", "disable"))))
    split = tmp_path / "split.py"
    split.write_text("import torch\n\n@torch.compiler.disable\ndef f():\n    pass\n")
    helper = tmp_path / "helper.py"
    helper.write_text("import torch\n\n@torch._dynamo.nonstrict_trace\ndef f(x):\n    return x\n")
    assert not _can_freeze(Options(overlay={"a.py": str(split)}))
    assert _can_freeze(Options(overlay={"a.py": str(split), "b.py": str(helper)}))


def test_a_config_line_goes_after_an_import_that_follows_other_statements(tmp_path):
    # `import sys; sys.setrecursionlimit(...)` before `import torch`: the import section does
    # not end at the first statement, or the written `torch._dynamo.config` line would run
    # before torch is imported (every trial of such a file failed on a NameError).
    prog = tmp_path / "deep.py"
    prog.write_text(
        "import sys\nsys.setrecursionlimit(15000)\n\nimport torch\n\n\n"
        "def scale(x):\n    s = x.abs().max().item()  # DEEP_ITEM\n    return x / s\n\n\n"
        "def target():\n    torch.manual_seed(0)\n    return [(scale, (torch.randn(5),), {}), (scale, (torch.randn(5),), {})]\n")
    before, line = prog.read_text(), marked_line(prog, "DEEP_ITEM")
    out = tmp_path / "f.json"
    p = gs("fix", f"{prog}:target", "--candidate", "config", "-j", "1", "--apply", "--json", out, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    d = json.loads(out.read_text())
    assert ("GB0124", str(prog), line) in [(s["gb_id"], s["file"], s["line"]) for s in d["sites"]]
    assert any(f["verified"] and f["kind"] == "config" for f in d["fixes"]), [f["why_not"] for f in d["fixes"]]
    text = prog.read_text()
    assert text.startswith("import sys\nsys.setrecursionlimit(15000)\n\nimport torch\n"
                           "torch._dynamo.config.capture_scalar_outputs = True  # graphstitch fix\n"), text[:300]
    assert (tmp_path / "deep.py.graphstitch.bak").read_text() == before


def test_printed_numbers_within_float32_tolerance_are_the_same_report():
    # A loss accumulated from .item() and printed in full: compiled, the same sum rounds in its
    # last digits. A count or a label that differs is still a changed report.
    from graphstitch.live import _numbers_close

    assert _numbers_close(["stdout Epoch 0: loss 0.6931471824645996\n"], ["stdout Epoch 0: loss 0.6931472420692444\n"])
    assert not _numbers_close(["stdout Epoch 0: loss 0.69\n"], ["stdout Epoch 1: loss 0.69\n"])
    assert not _numbers_close(["stdout kept 3 boxes\n"], ["stdout kept 4 boxes\n"])
    assert not _numbers_close(["stdout loss 0.5\n"], ["stdout loss 0.5\n", "stdout loss 0.5\n"])
    assert not _numbers_close(["stdout loss 0.5\n"], ["stdout cost 0.5\n"])
