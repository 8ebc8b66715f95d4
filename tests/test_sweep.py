"""`graphstitch sweep`: a user module with one factory of each kind, swept for real (each
target a census of the real torch.compile in its own worker), then resumed, sharded and
merged, compared against a planted regression, run through a local Ray head, and reported."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from conftest import assert_valid
from graphstitch import sweep as sw
from graphstitch.cli import main
from graphstitch.model import SiteId
from graphstitch.targets import Options

HERE = Path(__file__).resolve().parent
MOD = HERE / "targets_sweep" / "zoo_mod.py"
SRC = MOD.read_text()
REL = "tests/targets_sweep/zoo_mod.py"   # identity path: relative to the project root (this checkout)


def _line(tag: str) -> int:
    return next(i for i, text in enumerate(SRC.splitlines(), 1) if f"# {tag}" in text)


def _ids(*names: str) -> list[str]:
    return [f"{REL}:{n}@eval" for n in names]


def _sweep(*args: str, env: dict | None = None):
    r = CliRunner().invoke(main, ["sweep", *args], env=env)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    return r


def _key(r: sw.Row) -> tuple:
    """What must agree between two runs of the same target (not timings or hosts)."""
    sites = [(s.id, s.file.endswith("zoo_mod.py"), s.line, s.events) for s in r.census.sites] if r.census else None
    return (r.id, r.status, r.reason, r.graphs, r.break_sites, r.break_events, r.skipped_frames, r.recompiles,
            r.outputs_match_eager, sites)


def _rows(path) -> dict[str, sw.Row]:
    rows, bad = sw.read_rows(str(path))
    assert bad == 0
    return {r.id: r for r in rows}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The whole module swept once, 2 workers, with every report."""
    d = tmp_path_factory.mktemp("sweep")
    out = d / "rows.jsonl"
    r = _sweep(str(MOD), "-j", "2", "--timeout", "300", "--out", str(out), "--json", str(d / "r.json"),
               "--markdown", str(d / "r.md"), "--html", str(d / "r.html"))
    assert r.exit_code == 0, r.output
    return d, out, r.output


def test_rows_are_exact(whole):
    d, out, output = whole
    rows = _rows(out)
    clean, breaking, cannot, bug = (rows[i] for i in _ids("clean", "breaking", "cannot_build", "eager_bug"))
    assert sorted(rows) == sorted(_ids("clean", "breaking", "cannot_build", "eager_bug"))  # not `helper` (takes x)
    assert clean.status is sw.Status.OK and clean.full_graph
    assert (clean.graphs, clean.break_sites, clean.skipped_frames, clean.recompiles) == (1, 0, 0, 0)
    assert clean.outputs_match_eager is True
    assert breaking.status is sw.Status.OK and not breaking.full_graph
    assert (breaking.graphs, breaking.break_sites, breaking.break_events) == (2, 1, 1)
    (site,) = breaking.census.sites
    assert (site.gb_id, site.file, site.line, site.function) == ("GB0124", str(MOD), _line("ITEM"), "_breaking_body")
    assert site.id == SiteId("GB0124", REL, "_breaking_body", "s = y.sum().item() # ITEM")
    assert cannot.status is sw.Status.CREATE_ERROR and cannot.census is None and cannot.graphs is None
    assert cannot.reason.endswith(f"the factory raised RuntimeError at {MOD}:{_line('NO_CHECKPOINT')}: "
                                  "needs a checkpoint we do not have")
    assert bug.status is sw.Status.EAGER_ERROR
    assert bug.reason == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x5)"
    assert all(r.attempts == 1 and r.wall_seconds > 0 and r.peak_rss_mb and r.semantics == "fullgraph=False"
               for r in rows.values())
    # the terminal: headline, the root cause that "unblocks" a model, the failures with their reasons
    assert "4 targets" in output and "2 ok, 1 create_error, 1 eager_error" in output
    assert f"fixing GB0124 {REL}:{_line('ITEM')}" in " ".join(output.split())
    assert "fullgraph=False" in output


def test_reports_validate_and_agree(whole):
    d, out, _ = whole
    data = assert_valid("sweep", json.loads((d / "r.json").read_text()))
    for line in out.read_text().splitlines():
        assert_valid("sweep_row", json.loads(line))
    assert data["schema"] == "graphstitch.sweep/1"
    assert (data["total"], data["ran"], data["full_graph"], data["full_graph_share"]) == (4, 2, 1, 0.5)
    assert data["status_counts"] == {"ok": 2, "create_error": 1, "eager_error": 1, "compile_error": 0,
                                     "timeout": 0, "crash": 0}
    (cause,) = data["root_causes"]
    assert cause["id"]["gb_id"] == "GB0124" and cause["models"] == _ids("breaking") and cause["model_count"] == 1
    assert cause["where"] == "project"
    md = (d / "r.md").read_text()
    assert f"| 1 | 1 | GB0124 | `{REL}:{_line('ITEM')}`" in md and "fullgraph=False" in md
    html = (d / "r.html").read_text()
    assert 'class="sortable"' in html and "GB0124" in html and "needs a checkpoint" in html
    assert "<script src" not in html and "default-src 'none'" in html


def test_resume_after_a_killed_sweep(whole, tmp_path):
    _, out, _ = whole
    lines = out.read_text().splitlines(keepends=True)
    by_id = {json.loads(x)["id"]: x for x in lines}
    keep = [by_id[i] for i in _ids("clean", "cannot_build", "eager_bug")]
    part = tmp_path / "part.jsonl"
    part.write_text("".join(keep) + by_id[_ids("breaking")[0]][:57])   # killed while writing the 4th row
    r = _sweep(str(MOD), "--out", str(part), "--quiet")
    assert r.exit_code == 2 and "pass --resume" in r.output and part.read_text().endswith(by_id[_ids("breaking")[0]][:57])
    r = _sweep(str(MOD), "--out", str(part), "--resume", "--quiet", "--json", str(tmp_path / "r.json"))
    assert r.exit_code == 0, r.output
    rows, bad = sw.read_rows(str(part))
    assert bad == 1                         # the cut line stays, alone on its line, and is skipped
    again = {r.id: r for r in rows}
    whole_rows = _rows(out)
    assert sorted(again) == sorted(whole_rows)
    for i in _ids("clean", "cannot_build", "eager_bug"):   # not run again: the very same rows
        assert again[i].wall_seconds == whole_rows[i].wall_seconds
    assert _key(again[_ids("breaking")[0]]) == _key(whole_rows[_ids("breaking")[0]])
    assert json.loads((tmp_path / "r.json").read_text())["total"] == 4


def test_a_sweep_killed_halfway_resumes(whole, tmp_path):
    """SIGTERM (a cancelled CI job) while workers run: finished rows stay, running workers
    are killed with the sweep, and --resume completes the same rows."""
    _, out, _ = whole
    part = tmp_path / "part.jsonl"
    cmd = [sys.executable, "-m", "graphstitch", "sweep", str(MOD), "-j", "1", "--out", str(part), "--quiet"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not (part.exists() and part.read_text().count("\n") >= 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert p.poll() is None, "the sweep ended before it could be killed"
    kids = psutil.Process(p.pid).children(recursive=True)
    assert kids, "a worker is running"
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) != 0
    gone, alive = psutil.wait_procs(kids, timeout=30)
    assert not alive, "the running worker was killed with the sweep"
    first = _rows(part)
    assert 1 <= len(first) < 4
    r = _sweep(str(MOD), "--out", str(part), "--resume", "-j", "2", "--quiet")
    assert r.exit_code == 0, r.output
    again, whole_rows = _rows(part), _rows(out)
    assert sorted(again) == sorted(whole_rows)
    assert all(again[i].wall_seconds == first[i].wall_seconds for i in first)   # not run again
    assert [_key(again[i]) for i in sorted(again)] == [_key(whole_rows[i]) for i in sorted(whole_rows)]


def test_shards_merge_to_the_whole(whole, tmp_path):
    _, out, _ = whole
    targets = sw.resolve([str(MOD)])
    parts = [sw.resolve([str(MOD)], shard=(k, 2)) for k in (1, 2)]
    assert sorted(t.id for p in parts for t in p) == sorted(t.id for t in targets)
    assert all(parts), "both shards have targets (the test would not test anything otherwise)"
    for k in (1, 2):
        r = _sweep(str(MOD), "--shard", f"{k}/2", "-j", "2", "--out", str(tmp_path / f"s{k}.jsonl"), "--quiet")
        assert r.exit_code == 0, r.output
    merged = tmp_path / "all.jsonl"
    r = _sweep("--merge", str(tmp_path / "s1.jsonl"), str(tmp_path / "s2.jsonl"), "--out", str(merged), "--quiet")
    assert r.exit_code == 0, r.output
    got, want = _rows(merged), _rows(out)
    assert [_key(got[i]) for i in sorted(got)] == [_key(want[i]) for i in sorted(want)]
    for bad in ("0/2", "3/2", "x", "1/0"):
        r = _sweep(str(MOD), "--shard", bad)
        assert r.exit_code == 2 and "--shard" in r.output


def test_compare_finds_a_planted_regression(whole, tmp_path):
    _, out, _ = whole
    new = tmp_path / "new.jsonl"
    r = _sweep(f"{MOD}:clean", f"{MOD}:breaking", "-j", "2", "--out", str(new), "--quiet",
               env={"GS_SWEEP_EXTRA": "1"})
    assert r.exit_code == 0, r.output
    r = _sweep("--merge", str(new), "--compare", str(out), "--gate", "--quiet", "--json", str(tmp_path / "c.json"))
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert f"regression {_ids('clean')[0]}: new site GB0059 {REL}:{_line('EXTRA')}" in text
    assert f"regression {_ids('clean')[0]}: graphs 1 -> 2" in text
    cmp = json.loads((tmp_path / "c.json").read_text())["compare"]
    assert [m["id"] for m in cmp["regressions"]] == _ids("clean")
    assert [(c["id"]["gb_id"], c["before"], c["after"], c["models_added"]) for c in cmp["causes_worse"]] == \
        [("GB0059", 0, 1, _ids("clean"))]
    assert sorted(cmp["only_old"]) == sorted(_ids("cannot_build", "eager_bug"))
    # the other way round it is an improvement: passes, unless improvements must be recorded
    r = _sweep("--merge", str(out), "--compare", str(new), "--gate", "--quiet")
    assert r.exit_code == 0 and f"improvement {_ids('clean')[0]}: site gone GB0059" in " ".join(r.output.split())
    r = _sweep("--merge", str(out), "--compare", str(new), "--gate", "--fail-on-improvement", "--quiet")
    assert r.exit_code == 1
    r = _sweep("--merge", str(out), "--compare", str(out), "--gate", "--fail-on-improvement", "--quiet")
    assert r.exit_code == 0 and "0 regressed, 0 improved" in " ".join(r.output.split())


def test_a_crash_or_a_hang_costs_one_row_after_a_retry(tmp_path):
    flaky = HERE / "targets_sweep" / "flaky.py"
    out = tmp_path / "rows.jsonl"
    r = _sweep(str(flaky), "-j", "2", "--timeout", "4", "--out", str(out), "--quiet",
               "--logs", str(tmp_path / "logs"))
    assert r.exit_code == 0, r.output
    rows = _rows(out)
    crash, hang = rows["tests/targets_sweep/flaky.py:crashes@eval"], rows["tests/targets_sweep/flaky.py:hangs@eval"]
    assert crash.status is sw.Status.CRASH and crash.attempts == 2 and "SIGABRT" in crash.reason
    assert hang.status is sw.Status.TIMEOUT and hang.attempts == 2 and "within 4 s" in hang.reason
    assert hang.wall_seconds >= 8
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "tests_targets_sweep_flaky.py_crashes@eval.log", "tests_targets_sweep_flaky.py_hangs@eval.log"]


def test_sources_and_usage_errors(tmp_path):
    d = tmp_path / "targets"
    d.mkdir()
    shutil.copy(MOD, d / "a.py")
    (d / "_private.py").write_text("def f():\n    pass\n")
    (d / "b.py").write_text("def one():\n    pass\n\ndef _no():\n    pass\n\ndef two(x=1, *, y=2):\n    pass\n")
    ids = [t.name for t in sw.resolve([str(d)])]
    assert ids == ["clean", "breaking", "cannot_build", "eager_bug", "one", "two"]
    toml = tmp_path / "list.toml"
    toml.write_text('targets = ["targets/b.py:one", "transformers/BertModel"]\n'
                    '[[target]]\nsource = "targets/b.py"\nmodes = ["train"]\n')
    got = [(t.id.split("/")[-1], t.mode) for t in sw.resolve([str(toml)], only=["*one*", "Bert*"])]
    assert got == [("b.py:one@eval", "eval"), ("BertModel@eval", "eval"), ("b.py:one@train", "train")]
    assert [t.id for t in sw.resolve(["transformers"], only=["BertModel"], modes=("eval", "train"))] == \
        ["transformers/BertModel@eval", "transformers/BertModel@train"]
    assert [t.id for t in sw.resolve(["transformers/BertModel@train"])] == ["transformers/BertModel@train"]
    assert sw.resolve(["transformers"], only=["*Bert*"], exclude=["*Bert*"]) == []
    for args, msg in ((["nosuch"], "unknown source"), (["transformers/NoSuchModel"], "no model 'NoSuchModel'"),
                      ([str(MOD), "--mode", "predict"], "unknown mode"), ([str(MOD), "--only", "zzz"], "no targets"),
                      (["nope.py"], "not found"), ([str(MOD), "--gate"], "--gate needs --compare"),
                      ([str(MOD), "--resume"], "--resume needs --out")):
        r = _sweep(*args)
        assert r.exit_code == 2 and msg in r.output, (args, r.output)
    assert "Traceback" not in r.output
    assert sw.shard_of("transformers/BertModel@eval", 4) == sw.shard_of("transformers/BertModel@eval", 4)


def test_ray_gives_the_same_rows_as_the_local_pool(whole, tmp_path):
    ray = pytest.importorskip("ray")
    _, out, _ = whole
    targets = [t for t in sw.resolve([str(MOD)]) if t.name in ("clean", "breaking", "cannot_build")]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows, _ = sw.execute(targets, sw.RunConfig(Options(), timeout=300), ray="auto",
                             out=str(tmp_path / "ray.jsonl"), progress=False)
    finally:
        ray.shutdown()
    local = _rows(out)
    assert sorted(_key(r) for r in rows) == sorted(_key(local[t.id]) for t in targets)
    assert sorted(_rows(tmp_path / "ray.jsonl")) == sorted(t.id for t in targets)


def test_sources_parse_beside_another_thread_that_parses():
    """A sweep's threads parse sources (site qualnames, registries) at once. On CPython before
    3.12.4 a thread switch inside ast.parse's object conversion (here forced by a finalizer
    that waits for the other thread) raised "AST constructor recursion depth mismatch" in a
    `sweep -j 2` on CI; graphstitch's parses take turns."""
    import gc
    import threading

    from graphstitch.files import parse_python
    big = "x = [" + ", ".join(f"f({i})" for i in range(2000)) + "]\n"
    inside, other_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    trees: list[object] = []

    class Pause:
        def __del__(self):
            if threading.current_thread().name == "first" and not inside.is_set():
                inside.set()                 # the first parse is converting its tree ...
                other_done.wait(1.0)         # ... the second parses now, if it can

    def first():
        gc.disable()
        for _ in range(5):
            p = Pause()
            p.me = p                         # a cycle: collected by the GC run inside the parse
        del p
        old = gc.get_threshold()
        gc.set_threshold(1)
        gc.enable()
        try:
            trees.append(parse_python(big))
        except SystemError as e:
            errors.append(e)
        finally:
            gc.set_threshold(*old)

    def second():
        inside.wait(5)
        def deeper(n):                       # another stack depth than the first thread's
            return deeper(n - 1) if n else parse_python("y = 1")
        try:
            trees.append(deeper(20))
        except SystemError as e:
            errors.append(e)
        other_done.set()

    threads = [threading.Thread(target=second, name="second"), threading.Thread(target=first, name="first")]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert inside.is_set()                   # the switch happened inside the first parse
    assert errors == [] and len(trees) == 2


@pytest.mark.slow
def test_real_registry_sweep(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "bert.jsonl"
    r = _sweep("transformers", "--only", "BertModel", "--mode", "eval,train", "-j", "2", "--out", str(out),
               "--json", str(tmp_path / "r.json"))
    assert r.exit_code == 0, r.output
    rows = _rows(out)
    assert sorted(rows) == ["transformers/BertModel@eval", "transformers/BertModel@train"]
    for row in rows.values():
        assert row.status is sw.Status.OK, row.reason
        assert row.graphs >= 1 and row.outputs_match_eager is True
        assert all(s.id.path.startswith("transformers/") for s in row.census.sites), row.census.sites
    assert_valid("sweep", json.loads((tmp_path / "r.json").read_text()))
    assert os.environ.get("HF_HUB_OFFLINE") is None   # the parent never set it: only workers build models
