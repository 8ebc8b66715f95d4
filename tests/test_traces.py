"""`graphstitch trace`: TORCH_TRACE logs -> the same census as live capture, without torch."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT, assert_valid, census_subprocess, marked_line
from graphstitch.records import Decoder, iter_trace_records
from graphstitch.targets import Options
from graphstitch.traces import TraceError, census_from_files, census_from_trace, censuses_from_path, trace_files

TARGETS = Path(__file__).resolve().parent / "targets_traces"
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _summary(c):
    return {"sites": [(s.gb_id, s.file, s.line, s.function, s.events, s.nesting_depth, s.frame_skipped,
                       s.compile_ids, s.gb_chain) for s in c.sites],
            "graphs": [(g.compile_id, g.function) for g in c.graphs],
            "recompiles": [(r.reason, r.count, r.frames) for r in c.recompiles],
            "skipped": [(f.compile_id, f.function, f.fail_type) for f in c.skipped_frames],
            "frames": [(f.compile_id, f.function, f.graph) for f in c.frames]}


def _site_keys(c):
    return [(s.gb_id, Path(s.file).name, s.line) for s in c.sites]


def _line(name, tag):
    return marked_line(TARGETS / name, tag)


# Each scenario: target, expected (GB id, file, tagged line) per site, in rank order.
SCENARIOS = {
    "mixed": ("tr_mixed.py:calls", [("GB0059", "tr_mixed.py", "TR_NESTED"), ("GB0059", "tr_mixed.py", "TR_PRINT"),
                                    ("GB0170", "tr_mixed.py", "TR_DATADEP")]),
    "loop_item": ("tr_loop.py:calls", [("GB0025", "tr_loop.py", "TR_LOOP"), ("GB0124", "tr_loop.py", "TR_ITEM")]),
    "deep_clean": ("tr_deep.py:calls", [("GB0025", "tr_deep.py", "TR_DEEP")]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_trace_census_equals_live_census(name, tmp_path, monkeypatch):
    spec, expected = SCENARIOS[name]
    monkeypatch.setenv("TORCH_TRACE", str(tmp_path))
    live, rc = census_subprocess(str(TARGETS / spec.split(":")[0]) + ":" + spec.split(":")[1],
                                 Options(check_eager=False), timeout=300)
    assert rc == 0 and live.error is None
    traced = censuses_from_path(tmp_path)
    assert list(traced) == [None]  # one process, not distributed
    t = traced[None]
    assert _site_keys(live) == [(gb, f, _line(f, tag)) for gb, f, tag in expected]
    assert _summary(t) == _summary(live)
    assert t.graph_count == live.graph_count and t.break_events == live.break_events
    assert t.torch_version == live.torch_version
    assert t.trace_stats.malformed == 0 and t.trace_stats.records > 0
    if name == "mixed":
        assert [(r.reason, r.count) for r in t.recompiles] == [("tensor 'x' size mismatch at index 0", 5)]
    if name == "loop_item":
        assert [f.function for f in t.skipped_frames] == ["looped"]


@pytest.fixture(scope="module")
def mixed_trace(tmp_path_factory):
    """A real TORCH_TRACE dir from running tr_mixed.py as a script (its own eager backend)."""
    d = tmp_path_factory.mktemp("mixed_trace")
    subprocess.run([PY, str(TARGETS / "tr_mixed.py")], env={**ENV, "TORCH_TRACE": str(d)},
                   check=True, capture_output=True, timeout=300)
    return d


def _expect_mixed(c):
    assert _site_keys(c) == [("GB0059", "tr_mixed.py", _line("tr_mixed.py", "TR_NESTED")),
                             ("GB0059", "tr_mixed.py", _line("tr_mixed.py", "TR_PRINT")),
                             ("GB0170", "tr_mixed.py", _line("tr_mixed.py", "TR_DATADEP"))]
    assert c.graph_count == 8 and c.break_events == 7


def test_reading_a_trace_needs_no_torch(mixed_trace, tmp_path):
    # A `torch` that explodes on import, first on the path: reading must never touch it.
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch must not be imported to read a trace')\n")
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    code = ("import sys; from graphstitch.cli import main\n"
            "try:\n    main(['trace', sys.argv[1], '--html', sys.argv[2], '--json', sys.argv[3]])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{ENV['PYTHONPATH']}"}
    r = subprocess.run([PY, "-c", code, str(mixed_trace), str(html), str(js)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "break sites 3" in r.stdout and "TR_DATADEP" in r.stdout
    d = assert_valid("census", json.loads(js.read_text()))
    assert d["graph_count"] == 8 and d["break_site_count"] == 3 and d["break_events"] == 7
    assert "Data-dependent branching" in html.read_text()


def test_trace_of_a_file_and_of_its_directory_agree(mixed_trace):
    [f] = trace_files(mixed_trace)
    a, b = census_from_trace(f), census_from_trace(mixed_trace)
    _expect_mixed(a)
    assert _summary(a) == _summary(b)


def test_malformed_truncated_and_unknown_lines_are_skipped_and_counted(mixed_trace, tmp_path):
    [f] = trace_files(mixed_trace)
    lines = f.read_text().splitlines(keepends=True)
    junk = ["this is not a trace line\n",
            'V1122 00:00:00.000000 1 x.py:1] {"dynamo_start": \n',           # truncated JSON
            'V1122 00:00:00.000000 1 x.py:1] ["a list, not a record"]\n',
            'V1122 00:00:00.000000 1 x.py:1] {"some_future_kind": {"x": 1}}\n',  # unknown: ignored, not malformed
            "\x00\x01binary\xff\n",
            # a wanted kind nested far too deep (json's own recursion, then our depth bound)
            'V1122 00:00:00.000000 1 x.py:1] {"dynamo_start": ' + "[" * 5000 + "]" * 5000 + "}\n",
            'V1122 00:00:00.000000 1 x.py:1] {"dynamo_start": ' + "[" * 40 + "]" * 40 + "}\n"]
    mid = len(lines) // 2
    while lines[mid].startswith("\t"):
        mid += 1
    bad = lines[:mid] + junk + lines[mid:]
    # A truncated tail: a header whose payload was cut off mid-way.
    bad += ['V1122 00:00:00.000000 1 x.py:1] {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, '
            '"frame_id": 99, "frame_compile_id": 0, "has_payload": "x"}\n', "\tGraph Break Reason: cut of"]
    out = tmp_path / "dedicated_log_torch_trace_bad.log"
    out.write_text("".join(bad))
    c = census_from_trace(out)
    assert c.trace_stats.malformed == 7
    clean = census_from_trace(f)
    assert _summary(c)["graphs"] == _summary(clean)["graphs"]
    assert _site_keys(c) == _site_keys(clean)  # the cut report invents no site
    r = subprocess.run([PY, "-m", "graphstitch", "trace", str(out)], env=ENV, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "7 malformed line(s) skipped" in r.stdout


def test_source_not_available_when_the_files_are_elsewhere(mixed_trace, tmp_path):
    [f] = trace_files(mixed_trace)
    moved = tmp_path / "moved.log"
    moved.write_text(f.read_text().replace(str(TARGETS), "/nonexistent/laptop/code"))
    r = subprocess.run([PY, "-m", "graphstitch", "trace", str(moved), "--html", str(tmp_path / "r.html")],
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "source not available on this machine for: /nonexistent/laptop/code/tr_mixed.py" in r.stdout
    html = (tmp_path / "r.html").read_text()
    assert html.count("source not available") == 3
    assert "print(&#34;step&#34;)  # TR_PRINT" in html  # the line as the trace carried it


def test_bad_paths_fail_with_one_line(tmp_path):
    for args, msg in [([str(tmp_path / "nope")], "no such file or directory"),
                      ([str(tmp_path)], "holds no TORCH_TRACE logs")]:
        r = subprocess.run([PY, "-m", "graphstitch", "trace", *args], env=ENV, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "junk.log").write_text("garbage\n")
    r = subprocess.run([PY, "-m", "graphstitch", "trace", str(tmp_path / "junk.log")], env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no TORCH_TRACE records" in r.stderr
    with pytest.raises(TraceError):
        trace_files(tmp_path / "missing")


@pytest.mark.slow
def test_multi_rank_directory_is_grouped_by_rank(tmp_path):
    d = tmp_path / "trace"
    r = subprocess.run([PY, str(TARGETS / "tr_ranks.py"), str(29600 + os.getpid() % 300)],
                       env={**ENV, "TORCH_TRACE": str(d)}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name.split("_")[5] for p in d.iterdir()) == ["0", "1"]  # ..._rank_N_xxx.log
    cs = censuses_from_path(d)
    assert list(cs) == [0, 1]
    all_line, one_line = _line("tr_ranks.py", "TR_RANK_ALL"), _line("tr_ranks.py", "TR_RANK_ONE")
    assert _site_keys(cs[0]) == [("GB0059", "tr_ranks.py", all_line)]
    assert _site_keys(cs[1]) == [("GB0059", "tr_ranks.py", all_line), ("GB0025", "tr_ranks.py", one_line)]
    r = subprocess.run([PY, "-m", "graphstitch", "trace", str(d), "--rank", "1", "--json", str(tmp_path / "r.json")],
                       env=ENV, capture_output=True, text=True, timeout=120)
    # The ranks diverge (rank 1 breaks once more): trace runs the same comparison as `ranks`.
    assert r.returncode == 1 and "2 ranks" in r.stdout and "showing rank 1" in r.stdout
    doc = assert_valid("trace", json.loads((tmp_path / "r.json").read_text()))
    assert [doc["ranks"][k]["break_site_count"] for k in ("0", "1")] == [1, 2]
    sym = doc["symmetry"]
    assert sym["symmetric"] is False
    first = sym["divergences"][0]
    assert first["kind"] == "break_site" and first["ranks"] == [1] and first["line"] == one_line


def test_several_processes_of_one_rank_keep_their_frames_apart(mixed_trace, tmp_path):
    [f] = trace_files(mixed_trace)
    for i in range(2):
        shutil.copy(f, tmp_path / f"dedicated_log_torch_trace_rank_3_{i}.log")
    cs = censuses_from_path(tmp_path)
    assert list(cs) == [3]
    c = cs[3]
    one = census_from_trace(f)
    assert c.graph_count == 2 * one.graph_count and c.trace_stats.files == 2
    assert [s.events for s in c.sites] == [2 * s.events for s in one.sites]
    assert {g.compile_id.split(":")[0] for g in c.graphs} == {"p0", "p1"}


# ----------------------------------------------------------------------------- fuzz

_META_KEYS = st.sampled_from(["str", "dynamo_start", "artifact", "compilation_metrics", "dynamo_output_graph",
                              "dynamo_cpp_guards_str", "frame_id", "frame_compile_id", "rank", "has_payload",
                              "graphstitch_graph", "graphstitch_run", "stack", "name"])
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_META_KEYS | st.text(max_size=5),
                                                                                 inner, max_size=4),
                     max_leaves=12)
_LINE = st.one_of(
    st.text(max_size=60),
    st.builds(lambda m: "V1122 00:00:00.000000 1 f.py:1] " + json.dumps(m),
              st.dictionaries(_META_KEYS, _JSON, max_size=5)),
    st.builds(lambda t: "\t" + t, st.text(max_size=60)),
    st.sampled_from(["\tGraph break in user code at /x.py:3", "\tExplanation: e", "\tHint: h",
                     "\tUser code traceback:", '\t  File "/x.py", line 3, in f', "\t[\"0/0: guard\"]",
                     '\t{"pytorch_version": 1}', "\thttps://meta-pytorch.github.io/compile-graph-break-site/gb/gb0001.html"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, max_size=30))
def test_fuzz_reader_never_crashes(lines):
    dec = Decoder()
    events = []
    for rec in iter_trace_records((ln + "\n" for ln in lines), dec):
        events.extend(dec.decode(rec))
    from graphstitch.analysis import build_census
    build_census(events).to_dict()


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_files_never_crash_or_execute(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzz")
    canary = d / "executed"
    # Payloads that would run code if anything evaluated or unpickled them.
    evil = (f'V1 0 1 f.py:1] {{"artifact": {{"name": "recompile_reasons", "encoding": "json"}}, "has_payload": "1"}}\n'
            f'\t__import__("pathlib").Path("{canary}").touch()\n'
            f'V1 0 1 f.py:1] {{"artifact": {{"name": "dynamo_graph_break_reason", "encoding": "string"}}, "has_payload": "1"}}\n'
            f"\tcos\nsystem\n(S'touch {canary}'\ntR.\n").encode()
    p = d / "dedicated_log_torch_trace_x.log"
    p.write_bytes(data + b"\n" + evil + data)
    census_from_files([p]).to_dict()
    assert not canary.exists()
