"""`graphstitch ranks`: launch N ranks with PyTorch's own launcher, each under capture.

The ranks are worker jobs (``worker.py``'s protocol, one set of files per rank) started by
``python -m torch.distributed.run --standalone``; every rank streams its records to its own
file, so a rank that crashes or hangs still leaves its census. The whole process tree
(launcher, ranks, their children) is killed before ``run_ranks`` returns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import procs, worker
from ..model import Census, ErrorInfo, ErrorKind
from ..records import Record
from ..targets import Options
from .compare import fmt_ranks

LAUNCHER_LOG = "launcher.txt"   # not *.log: `graphstitch trace DIR` reads the rank files only
_ROOT_CAUSE_RE = re.compile(r"rank\s*:\s*(?P<rank>\d+).*?exitcode\s*:\s*(?P<code>-?\d+)[^\n]*?(?:\((?P<sig>SIG\w+)\))?\s*\n",
                            re.S)
# Rendezvous should take seconds; past this the --timeout clock starts anyway.
RENDEZVOUS_LIMIT = 120.0


@dataclass
class RunInfo:
    nproc: int
    timed_out: bool
    wall_seconds: float
    launcher_exit_code: int | None
    trace_dir: str | None                   # --trace-dir, when kept
    rank_files: dict[int, str] = field(default_factory=dict)
    launcher_log_tail: str = ""


def run_ranks(spec: str | None, nproc: int, options: Options | None = None, *, script: str | None = None,
              script_args: Iterable[str] = (), timeout: float | None = None, trace_dir: str | None = None,
              project_root: str | None = None, pythonpath: Iterable[str] = ()) -> tuple[dict[int, Census], RunInfo]:
    """Launch ``nproc`` ranks, each running the target (or script) under capture. Returns
    (census per rank, run info). Never leaves a process behind."""
    owned = trace_dir is None
    outdir = procs.own_temp(tempfile.mkdtemp(prefix="graphstitch-ranks-")) if owned else str(trace_dir)
    os.makedirs(outdir, exist_ok=True)
    rank_files = [worker.Files(outdir, r) for r in range(nproc)]
    for f in rank_files:  # stale files from an earlier run in the same --trace-dir
        for p in (f.ready, f.records, f.result):
            if os.path.exists(p):
                os.unlink(p)
    job = worker.Job(handler="graphstitch.ranks.launch:rank_job", spec=spec, options=options or Options(),
                     project_root=project_root, script=os.path.abspath(script) if script else None,
                     argv=list(script_args), per_rank=True)
    worker.write_job(job, outdir)
    extra = {} if "OMP_NUM_THREADS" in os.environ else {"OMP_NUM_THREADS": "1"}
    env = procs.child_env(pythonpath=list(pythonpath), inductor_cache=os.path.join(outdir, "inductor"), extra=extra)
    # --standalone: c10d rendezvous on a free port (a busy 29500 is not an error).
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
           f"--nproc_per_node={nproc}", "--max-restarts=0", "--monitor-interval=0.2",
           "-m", "graphstitch.worker", outdir]
    log_path = os.path.join(outdir, LAUNCHER_LOG)
    started = time.monotonic()

    def ready() -> bool:
        return all(os.path.exists(f.ready) for f in rank_files) or time.monotonic() - started > RENDEZVOUS_LIMIT
    with open(log_path, "w", encoding="utf-8") as log:
        child = procs.start(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        rc, died = child.wait(timeout, ready=ready, ok_codes=None, what="ranks")
    timed_out = died is not None and died.kind is ErrorKind.TIMEOUT
    wall = time.monotonic() - started
    with open(log_path, encoding="utf-8", errors="replace") as lf:
        log_tail = lf.read()[-4000:]
    outcomes = {r: worker.read_outcome(f, rc, None, target=spec or script, project_root=project_root,
                                       own_exit=False)
                for r, f in enumerate(rank_files)}
    censuses = {r: o.census for r, o in outcomes.items()}
    _attribute_failures(censuses, {r for r, o in outcomes.items() if o.finished}, log_tail, rc, timed_out, timeout)
    info = RunInfo(nproc, timed_out, round(wall, 3), rc, None if owned else outdir,
                   {} if owned else {r: f.records for r, f in enumerate(rank_files)}, log_tail)
    if owned:
        procs.release_temp(outdir)
    return censuses, info


def _attribute_failures(censuses: dict[int, Census], done: set[int], log_tail: str, rc: int,
                        timed_out: bool, timeout: float | None) -> None:
    """Name what happened to every rank that did not finish."""
    failed_first = [r for r in censuses if censuses[r].error]
    # torchrun's failure summary names the rank that died first (a segfault leaves no record).
    root = _ROOT_CAUSE_RE.search(log_tail.split("Root Cause", 1)[-1]) if "Root Cause" in log_tail else None
    if root and int(root["rank"]) in censuses and not failed_first and int(root["rank"]) not in done:
        r = int(root["rank"])
        how = f"signal {root['sig']}" if root["sig"] else f"exit code {root['code']}"
        censuses[r].error = ErrorInfo(ErrorKind.CRASH, f"rank {r} died with {how}")
        failed_first = [r]
    for r, c in censuses.items():
        if r in done or c.error:
            continue
        if timed_out:
            c.error = ErrorInfo(ErrorKind.TIMEOUT, f"rank {r} did not finish within {timeout:g} s (killed)")
        elif failed_first:
            c.error = ErrorInfo(ErrorKind.STOPPED, f"rank {r} was stopped by the launcher after "
                                                   f"{fmt_ranks(failed_first)} failed")
        else:
            last = [ln for ln in log_tail.splitlines() if ln.strip()][-1:] or [""]
            c.error = ErrorInfo(ErrorKind.CRASH, f"rank {r} exited before finishing (launcher exit code "
                                                 f"{rc}): {last[0][:300]}")


# ----------------------------------------------------------------------------- rank side

def rank_job(job: worker.Job, ctx: worker.Context) -> tuple[int, Any]:
    """One rank (started by torch.distributed.run): start the process group (targets; a
    script starts its own), mark ready, then run the target or script under capture."""
    import torch
    import torch.distributed as dist

    from ..live import Capture, run_script
    from ..targets import TargetError
    write = ctx.sink

    def sink(rec: Record) -> None:
        err = (rec.meta.get("graphstitch_run") or {}).get("error")
        if isinstance(err, dict) and err.get("at") is None:
            err["at"] = time.time()  # orders the ranks' failures
        write(rec)
    ctx.sink = sink
    if job.script is not None:
        ctx.mark_ready()
        with Capture(sink, target=job.script, project_root=job.project_root) as cap:
            code = run_script(cap, job.script, job.argv)
        return (3 if code else 0), None
    assert job.spec is not None
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    # The factory may call dist.get_rank(): the group exists before it runs.
    dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo")
    ctx.mark_ready()
    try:
        calls, ref = worker.job_calls(job)   # with a reference: a `fix` trial on a patched copy
    except TargetError as e:
        worker.note(sink, target=job.spec, error=ErrorInfo(ErrorKind.TARGET, str(e)))
        return 2, None
    code, _ = worker.census_of_calls(job, ctx, calls, job.spec, reference=ref, failed_code=3)
    if not code:
        dist.destroy_process_group()
    return code, None
