"""Trace ingestion: `graphstitch trace` vs `tlparse` on one large multi-rank TORCH_TRACE corpus.

    python benchmarks/trace_ingest.py [--mb 100] [--ranks 2] [--repeats 5] [--keep DIR] [--json FILE]

Builds the corpus in a temp dir (never committed) by running real targets repeatedly under
TORCH_TRACE in RANKS gloo processes (Dynamo reset between rounds, so every round compiles
again) until each rank's log holds --real-mb; compiling all the way to 100 MB takes ~15 min
on 2 busy cores, so each log is then grown to size by appending its own records again (what
more rounds would write: reset() restarts frame ids, and interning repeats harmlessly).
Then it times both tools on the same directory, alternating, in one run:
  graphstitch: `python -m graphstitch trace DIR` (reads all ranks)
  tlparse:     `tlparse DIR --all-ranks-html --no-browser --overwrite -o TMP` (its least output
               for a multi-rank directory; it cannot read a directory otherwise)
Prints the median time ratio and graphstitch's peak RSS on half the corpus and on all of it
(flat memory: the two should be about equal). Without tlparse (`pip install tlparse`) only
graphstitch is timed. `--json FILE` writes the rows `run_all.py` keeps and compares.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGETS = ROOT / "tests" / "targets_traces"


def _rank_main(rank: int, world: int, port: int, real_mb: float) -> None:
    """One rank: compile the test targets again and again until its log is big enough."""
    import torch
    import torch.distributed as dist
    sys.path.insert(0, str(TARGETS))
    import tr_deep
    import tr_loop
    import tr_mixed
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    log = None
    rounds = 0
    while True:
        torch._dynamo.reset()
        for fn, args, kw in tr_mixed.calls() + tr_loop.calls() + tr_deep.calls():
            torch.compile(fn, backend="eager")(*args, **kw)
        rounds += 1
        if log is None:
            logs = [p for p in Path(os.environ["TORCH_TRACE"]).iterdir() if f"rank_{rank}_" in p.name]
            log = logs[0] if logs else None
        if log is not None and log.stat().st_size >= real_mb * 1e6:
            break
    print(f"rank {rank}: {rounds} rounds, {log.stat().st_size / 1e6:.1f} MB", flush=True)
    dist.destroy_process_group()


def _spawn_ranks(out: str, real_mb: float, ranks: int) -> None:
    import torch.multiprocessing as mp
    os.environ["TORCH_TRACE"] = out
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_rank_main, args=(ranks, 29000 + os.getpid() % 1000, real_mb), nprocs=ranks)


def build_corpus(out: Path, mb: float, real_mb: float, ranks: int) -> None:
    # torch runs in a child: this process must not import it, or the peak RSS measured for
    # the tools it forks would include torch's pages.
    subprocess.run([sys.executable, __file__, "--spawn-ranks", str(out), str(real_mb), str(ranks)], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    for f in out.iterdir():
        real = f.read_bytes()
        with open(f, "ab") as w:
            while f.stat().st_size < mb / ranks * 1e6:
                w.write(real)
                w.flush()


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise SystemExit(f"{cmd[:4]} failed ({rc}): {proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return dt, usage.ru_maxrss // 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--real-mb", type=float, default=4, help="MB per rank written by real compiles")
    ap.add_argument("--keep", help="build (or reuse) the corpus here instead of a temp dir")
    ap.add_argument("--json", help="write the measured rows here (for run_all.py)")
    ap.add_argument("--spawn-ranks", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.spawn_ranks:
        return _spawn_ranks(a.spawn_ranks[0], float(a.spawn_ranks[1]), int(a.spawn_ranks[2]))
    tlparse: str | None = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
    if not os.path.exists(str(tlparse)):
        print("tlparse not found (pip install tlparse): timing graphstitch alone")
        tlparse = None
    tmp = Path(tempfile.mkdtemp(prefix="gs-ingest-"))
    try:
        corpus = Path(a.keep) if a.keep else tmp / "corpus"
        if not corpus.exists() or not any(corpus.iterdir()):
            corpus.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            build_corpus(corpus, a.mb, min(a.real_mb, a.mb / a.ranks), a.ranks)
            print(f"built corpus in {time.perf_counter() - t0:.0f} s")
        files = sorted(corpus.iterdir())
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"corpus: {len(files)} files, {size:.1f} MB, ranks {a.ranks}")
        half = tmp / "half"
        half.mkdir()
        os.symlink(files[0], half / files[0].name)

        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        gs = [sys.executable, "-m", "graphstitch", "trace"]
        tl = [str(tlparse), "--all-ranks-html", "--no-browser", "--overwrite", "-o", str(tmp / "tl_out")]
        g_times: list[float] = []
        t_times: list[float] = []
        rss: list[int] = []
        for i in range(a.repeats):  # alternate, so load on the machine hits both alike
            order = [("gs", gs + [str(corpus)])] + ([("tl", tl[:1] + [str(corpus)] + tl[1:])] if tlparse else [])
            for name, cmd in (order if i % 2 == 0 else order[::-1]):
                dt, peak = timed(cmd, env)
                (g_times if name == "gs" else t_times).append(dt)
                if name == "gs":
                    rss.append(peak)
        _, rss_half = timed(gs + [str(half)], env)
        g = statistics.median(g_times)
        print(f"graphstitch trace: median {g:.2f} s  ({', '.join(f'{x:.2f}' for x in g_times)})"
              f"  = {size / g:.0f} MB/s")
        rows = [{"name": f"graphstitch trace throughput ({size:.0f} MB, {a.ranks} ranks)", "value": size / g,
                 "unit": " MB/s", "better": "higher"}]
        if t_times:
            t = statistics.median(t_times)
            print(f"tlparse:           median {t:.2f} s  ({', '.join(f'{x:.2f}' for x in t_times)})")
            print(f"time ratio graphstitch/tlparse: {g / t:.2f}x  (goal <= 1.0)")
            rows.insert(0, {"name": "graphstitch / tlparse time", "value": g / t, "unit": "×", "goal": "<= 1.0",
                            "met": g / t <= 1.0})
        print(f"graphstitch peak RSS: {max(rss)} MB on {size:.0f} MB; {rss_half} MB on one rank "
              f"({files[0].stat().st_size / 1e6:.0f} MB)")
        rows += [{"name": "graphstitch trace peak RSS", "value": float(max(rss)), "unit": " MB", "goal": "<= 40",
                  "met": max(rss) <= 40},
                 {"name": "peak RSS, all ranks / one rank (flat: ~1)", "value": max(rss) / rss_half, "unit": "×",
                  "goal": "<= 1.1", "met": max(rss) / rss_half <= 1.1}]
        if a.json:
            Path(a.json).write_text(json.dumps({"rows": rows, "corpus_mb": size, "ranks": a.ranks,
                                                "graphstitch_s": g_times, "tlparse_s": t_times}, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
