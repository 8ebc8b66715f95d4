"""Trust in the everyday run: report paths checked before anything runs, default time
limits, progress and captured target output, words on the screen at any width."""

import os
import subprocess
import sys

import pytest

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
