"""graphstitch ranks: 2 gloo ranks on CPU, launched with torch.distributed.run."""

import glob
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, assert_valid, marked_line
from graphstitch.jsonio import to_json
from graphstitch.ranks import censuses_from_rank_files, compare_ranks

TARGETS = Path(__file__).resolve().parent / "targets_ranks"
sys.path.insert(0, str(TARGETS))  # Dynamo re-imports in-process targets by module name


def run_ranks_cli(target, tmp_path, *extra, env=None):
    """`graphstitch ranks TARGET --nproc 2` in a subprocess: (exit code, JSON, wall seconds)."""
    out = tmp_path / "ranks.json"
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "graphstitch", "ranks", f"{TARGETS / target}.py:make",
                        "--nproc", "2", "--json", str(out), "--trace-dir", str(tmp_path / "ranks"), *extra],
                       env=e, capture_output=True, text=True, timeout=240)
    wall = time.monotonic() - t0
    assert out.exists(), p.stdout + p.stderr
    return p.returncode, assert_valid("ranks", json.loads(out.read_text())), wall, p


def left_behind(tmp_path) -> list[str]:
    """Processes whose command line names this test's trace dir (every rank's does)."""
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if str(tmp_path) in ln and "ps -eo" not in ln]


def site_of(result, kind):
    return [d for d in result["divergences"] if d["kind"] == kind]


@pytest.mark.slow
def test_symmetric_ranks_pass_even_with_the_default_port_busy(tmp_path):
    path = TARGETS / "symmetric.py"
    # Occupy torchrun's default port: --standalone must rendezvous on a free one.
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 29500))
        busy.listen()
    except OSError:
        pass  # already busy: the same situation
    try:
        rc, doc, _, p = run_ranks_cli("symmetric", tmp_path, env={"MASTER_PORT": "29500"})
    finally:
        busy.close()
    assert rc == 0, p.stderr
    assert doc["symmetric"] is True and doc["divergences"] == [] and doc["failed"] == []
    assert doc["ranks"] == [0, 1]
    ar = ["_c10d_functional.all_reduce", "_c10d_functional.wait_tensor"]
    # dist.all_reduce traces into step's graph as a functional collective on both ranks;
    # sync_step's two graphs hold none: its collectives broke the graph.
    for r in ("0", "1"):
        assert doc["collectives"][r] == [ar, [], []]
        assert doc["censuses"][r]["break_site_count"] == 2
    assert "symmetric" in p.stdout
    # Symmetric, but flagged with advice.
    flags = {(f["kind"], f["line"], f["gb_id"], tuple(f["ranks"])) for f in doc["flags"]}
    assert flags == {("disabled_collective", marked_line(path, "DISABLED_SYNC"), "GB0098", (0, 1)),
                     ("collective_break", marked_line(path, "BROADCAST"), "GB0007", (0, 1))}
    assert all("functional collectives" in f["advice"] for f in doc["flags"])
    assert left_behind(tmp_path) == []


@pytest.mark.slow
def test_print_on_rank_1_only_is_the_first_divergence_at_that_line(tmp_path):
    path = TARGETS / "rank_print.py"
    trace = tmp_path / "torch_trace"
    rc, doc, _, p = run_ranks_cli("rank_print", tmp_path, env={"TORCH_TRACE": str(trace)})
    assert rc == 1, p.stderr
    assert doc["symmetric"] is False
    first = doc["divergences"][0]
    assert first["kind"] == "break_site"
    assert first["ranks"] == [1] and first["other_ranks"] == [0]
    assert (first["file"], first["line"], first["gb_id"]) == (str(path), marked_line(path, "RANK1_PRINT"), "GB0059")
    assert first["compile_id"] == "0/0"
    # The collective order on each side of the divergence: rank 1's first graph ends at the print.
    assert first["collectives"] == {"0": ["_c10d_functional.all_reduce", "_c10d_functional.wait_tensor"], "1": []}
    assert [d["kind"] for d in doc["divergences"]] == ["break_site", "graphs"]
    flag = doc["flags"][0]
    assert flag["kind"] == "rank_dependent_code" and flag["line"] == marked_line(path, "RANK1_PRINT")
    assert f"rank_print.py:{marked_line(path, 'RANK1_PRINT')}" in p.stdout.replace("\n", "")

    # Offline: the same comparison from the ranks' own files agrees with the live one, both
    # from graphstitch's per-rank record files and from torch's TORCH_TRACE files.
    live = _projection(doc)
    mine = censuses_from_rank_files({int(r): f for r, f in doc["run"]["rank_files"].items()})
    assert _projection(to_json(compare_ranks(mine))) == live
    torch_files = {r: glob.glob(str(trace / f"*rank_{r}_*.log")) for r in (0, 1)}
    assert all(len(f) == 1 for f in torch_files.values()), torch_files
    theirs = censuses_from_rank_files({r: f[0] for r, f in torch_files.items()})
    assert _projection(to_json(compare_ranks(theirs))) == live


def _projection(doc):
    return (doc["symmetric"], doc["collectives"],
            [(d["kind"], d["ranks"], d["compile_id"], d["file"], d["line"], d.get("gb_id"))
             for d in doc["divergences"]],
            [(f["kind"], f["ranks"], f["line"]) for f in doc["flags"]])


@pytest.mark.slow
def test_ranks_that_recompile_differently(tmp_path):
    path = TARGETS / "recompile.py"
    rc, doc, _, p = run_ranks_cli("recompile", tmp_path)
    assert rc == 1, p.stderr
    first = doc["divergences"][0]
    assert first["kind"] == "recompile" and first["ranks"] == [1]
    assert first["compile_id"] == "0/1"
    assert (first["file"], first["line"]) == (str(path), marked_line(path, "STEP_DEF"))
    assert first["reason"] == "tensor 'x' size mismatch at index 0"
    assert first["counts"] == {"0": 0, "1": 1}
    # Rank 1's extra graph holds one more all_reduce than rank 0 compiled.
    assert doc["collectives"]["1"][1] == ["_c10d_functional.all_reduce", "_c10d_functional.wait_tensor"]
    assert len(doc["collectives"]["0"]) == 1


@pytest.mark.slow
def test_a_rank_that_raises_is_reported_and_nothing_is_left_behind(tmp_path):
    path = TARGETS / "raises.py"
    rc, doc, _, p = run_ranks_cli("raises", tmp_path, "--timeout", "120")
    assert rc == 3, p.stderr
    assert doc["failed"], doc["censuses"]
    first = doc["failed"][0]
    print(doc["failed"], p.stderr)  # shown when an assertion below fails
    assert first["rank"] == 1 and first["kind"] == "eager"
    assert first["where"] == f"{path}:{marked_line(path, 'RANK1_RAISE')}"
    assert "rank 1 cannot go on" in first["message"]
    # Rank 0 was waiting in all_reduce for rank 1: its census is still there, its error a consequence.
    assert doc["censuses"]["0"]["error"]["kind"] in ("eager", "stopped")
    assert "rank 1 failed (eager): rank 1 cannot go on" in p.stderr.replace("\n", "")
    assert left_behind(tmp_path) == []


@pytest.mark.slow
def test_a_rank_that_segfaults_is_named_from_the_launcher_summary(tmp_path):
    rc, doc, _, p = run_ranks_cli("segfaults", tmp_path, "--timeout", "120")
    assert rc == 3, p.stderr
    assert [(f["rank"], f["kind"]) for f in doc["failed"]][0] == (1, "crash")
    assert "SIGSEGV" in doc["failed"][0]["message"]
    assert doc["censuses"]["0"]["error"] is None or doc["censuses"]["0"]["error"]["kind"] == "stopped"
    assert left_behind(tmp_path) == []


@pytest.mark.slow
def test_a_hung_rank_is_bounded_by_timeout_and_the_other_census_is_kept(tmp_path):
    path = TARGETS / "hangs.py"
    # 40 s: rank 0 must finish first even on a loaded 2-core machine.
    rc, doc, wall, p = run_ranks_cli("hangs", tmp_path, "--timeout", "40", "--no-eager-check")
    assert rc == 3, p.stderr
    # Bounded by --timeout, not by the 240 s the subprocess is given: the rest is torchrun's start,
    # two imports of torch and the teardown, which took 21 s on a loaded 2-core machine.
    assert wall < 40 + 60
    assert [f["rank"] for f in doc["failed"]] == [1] and doc["failed"][0]["kind"] == "timeout"
    assert doc["censuses"]["0"]["error"] is None and doc["censuses"]["0"]["graph_count"] == 2
    # What rank 1 compiled before it hung was streamed to disk and survives the kill.
    c1 = doc["censuses"]["1"]
    assert c1["graphs"][0]["function"] == "step"
    assert [(s["line"], s["gb_id"]) for s in c1["sites"]] == [(marked_line(path, "RANK1_HANG"), "GB0007")]
    assert left_behind(tmp_path) == []


@pytest.mark.slow
def test_script_mode_passes_arguments_and_names_the_divergent_line(tmp_path):
    path = TARGETS / "train.py"
    out = tmp_path / "ranks.json"
    e = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    p = subprocess.run([sys.executable, "-m", "graphstitch", "ranks", "--script", str(path), "--json", str(out),
                        "--", "--steps", "2", "--log-rank", "1"], env=e, capture_output=True, text=True, timeout=240)
    assert p.returncode == 1, p.stderr
    doc = assert_valid("ranks", json.loads(out.read_text()))
    first = doc["divergences"][0]
    assert (first["kind"], first["ranks"], first["file"], first["line"]) == \
        ("break_site", [1], str(path), marked_line(path, "SCRIPT_PRINT"))
    # The script compiles with its own backend: collectives are read from Dynamo's graph code.
    assert first["collectives"] == {"0": ["_c10d_functional.all_reduce", "_c10d_functional.wait_tensor"], "1": []}


def test_bad_usage_is_one_line_exit_2(tmp_path):
    e = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    p = subprocess.run([sys.executable, "-m", "graphstitch", "ranks"], env=e, capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "TARGET" in p.stderr
    p = subprocess.run([sys.executable, "-m", "graphstitch", "ranks", f"{TARGETS / 'nope.py'}:make"],
                       env=e, capture_output=True, text=True, timeout=200)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "not found" in p.stderr


def test_three_ranks_in_process_name_the_odd_rank_and_order_cause_first():
    # Real compiles in this process stand in for three ranks: rank 1 takes another path.
    import torch
    from ranks_variants import step

    import graphstitch
    path = TARGETS / "ranks_variants.py"
    x = torch.ones(4)
    quiet = graphstitch.census_calls(step, [((x, True, False), {})])
    c = {0: quiet, 1: graphstitch.census_calls(step, [((x, True, True), {})]), 2: quiet}
    result = to_json(compare_ranks(c))
    assert result["symmetric"] is False
    kinds = [(d["kind"], d["ranks"], d["other_ranks"], d["line"]) for d in result["divergences"][:2]]
    assert kinds == [("break_site", [1], [0, 2], marked_line(path, "LOOP_PRINT")),
                     ("skipped_frame", [1], [0, 2], c[1].skipped_frames[0].line)]
    assert c[1].sites[0].gb_chain[-1] == "GB7000" and result["divergences"][0]["gb_id"] == c[1].sites[0].gb_id

    # Same site on every rank, but rank 2 recompiles (another shape) and meets it again.
    again = graphstitch.census_calls(step, [((x, True, False), {}), ((torch.ones(8), True, False), {})])
    result = to_json(compare_ranks({0: quiet, 1: quiet, 2: again}))
    got = {d["kind"]: d for d in result["divergences"]}
    assert set(got) >= {"recompile", "break_events"}
    assert got["recompile"]["ranks"] == [2] and got["recompile"]["reason"] == "tensor 'x' size mismatch at index 0"
    assert got["break_events"]["line"] == marked_line(path, "LOUD_PRINT")
    assert got["break_events"]["events"] == {"0": 1, "1": 1, "2": 2}
    assert result["divergences"][0]["kind"] == "recompile"
