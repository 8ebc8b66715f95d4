"""One process module (psutil): whole trees are killed, timeouts count from "ready", deaths
are named; and the one worker protocol (job folder in; ready, records, result out)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from graphstitch import procs, worker
from graphstitch.model import ErrorKind
from graphstitch.targets import Options

PY = sys.executable


def _start(code: str, **kw) -> procs.Child:
    return procs.start([PY, "-c", textwrap.dedent(code)], env=procs.child_env(), **kw)


def test_timeout_kills_the_whole_tree_even_a_grandchild_in_its_own_session(tmp_path):
    pidfile = tmp_path / "pids"
    child = _start(f"""
        import subprocess, sys, time
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        open({str(pidfile)!r}, "w").write(str(g.pid))
        time.sleep(60)
    """)
    t0 = time.monotonic()
    rc, died = child.wait(1.5)
    assert time.monotonic() - t0 < 15
    assert died is not None and died.kind is ErrorKind.TIMEOUT and "within 1.5 s" in died.message
    grandchild = int(pidfile.read_text())
    assert not psutil.pid_exists(child.pid)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_timeout_counts_from_ready(tmp_path):
    ready = tmp_path / "ready"
    code = f"""
        import time
        time.sleep(2.0)                      # start-up (imports) is not the target's time
        open({str(ready)!r}, "w").close()
        time.sleep(0.5)
    """
    rc, died = _start(code).wait(1.5, ready=ready.exists)
    assert rc == 0 and died is None
    ready.unlink()
    rc, died = _start(code.replace("0.5)", "5)")).wait(1.5, ready=ready.exists)
    assert died is not None and died.kind is ErrorKind.TIMEOUT


def test_a_signal_death_and_an_unexpected_exit_code_are_named():
    rc, died = _start("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)").wait(30)
    assert rc == -signal.SIGSEGV and died.kind is ErrorKind.CRASH and "SIGSEGV" in died.message
    rc, died = _start("raise SystemExit(7)").wait(30)
    assert rc == 7 and died.kind is ErrorKind.CRASH and "exited with code 7" in died.message
    rc, died = _start("raise SystemExit(7)").wait(30, ok_codes=None)
    assert rc == 7 and died is None


def test_child_env_puts_this_graphstitch_first_and_keeps_a_users_cache():
    env = procs.child_env(pythonpath=["/x"], inductor_cache="/tmp/ours")
    src = os.path.dirname(os.path.dirname(os.path.abspath(worker.__file__)))
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == ["/x", src]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/tmp/users"
    try:
        assert procs.child_env(inductor_cache="/tmp/ours")["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/users"
        assert procs.child_env(inductor_cache="/tmp/ours", own_cache=True)["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/ours"
    finally:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]


def test_worker_protocol_ready_records_result(tmp_path):
    (tmp_path / "t.py").write_text(textwrap.dedent("""
        import torch

        def f(x):
            print("break")  # BREAK
            return x + 1

        def target():
            return f, (torch.ones(2),), {}
    """))
    job = worker.Job(spec=f"{tmp_path}/t.py:target", options=Options(), project_root=str(tmp_path))
    d = tmp_path / "job"
    d.mkdir()
    files = worker.write_job(job, str(d))
    child = procs.start(procs.python_cmd("graphstitch.worker", str(d)), env=procs.child_env())
    rc, died = child.wait(300, ready=lambda: os.path.exists(files.ready))
    assert rc == 0 and died is None
    assert os.path.exists(files.ready) and os.path.exists(files.records)
    out = worker.read_outcome(files, rc, died, target=job.spec, project_root=job.project_root)
    assert out.finished and out.census.error is None
    (s,) = out.census.sites
    assert (s.gb_id, s.id.path, s.line) == ("GB0059", "t.py", 5)


HANGING = """
import os, time
import torch

def factory():
    open(os.environ["GS_TEST_MARK"], "w").close()
    time.sleep(100000)
    return (lambda x: x + 1), (torch.ones(2),), {}
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_graphstitch_and_every_worker_and_temp_folder(tmp_path, sig, code):
    """A CI cancel (SIGTERM) or Ctrl-C (SIGINT) of a census on a target that hangs: the worker
    (its own session) dies with us, the job folder goes, one line and 128+N, no traceback."""
    (tmp_path / "hang.py").write_text(HANGING)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    mark = tmp_path / "mark"
    env = dict(os.environ, TMPDIR=str(tmp), GS_TEST_MARK=str(mark))
    p = subprocess.Popen([PY, "-m", "graphstitch", "census", f"{tmp_path}/hang.py:factory"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not mark.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert mark.exists(), "the target's factory is running"
        tree = psutil.Process(p.pid).children(recursive=True)
        assert tree and any(t.name.startswith("graphstitch-job-") for t in tmp.iterdir())
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:   # a failed assertion above must not leave the hanging run behind
        if p.poll() is None:
            p.terminate()
            p.wait(60)
    assert p.returncode == code, err
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, f"workers left running: {alive}"
    assert not list(tmp.iterdir()), "temp folders left behind"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "stopped by" in lines[0] and signal.Signals(sig).name in lines[0], err
    assert "Traceback" not in out + err
