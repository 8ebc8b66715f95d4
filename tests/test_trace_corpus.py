"""Traces from any torch since 2.3: real logs written by older torch wheels (tests/traces/README.md),
and torch 2.13 logs written here. Each asserts the exact sites (file, line, GB id or approximate)."""

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, marked_line
from graphstitch.analysis import UNKNOWN_RECOMPILE, build_census
from graphstitch.records import Decoder, iter_trace_records
from graphstitch.traces import NO_DYNAMO_COMPILE, census_from_files, censuses_from_path

CORPUS = Path(__file__).resolve().parent / "traces"
PROGRAMS = CORPUS / "programs"
TARGETS = Path(__file__).resolve().parent / "targets_traces"
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _one(name):
    [c] = censuses_from_path(CORPUS / name).values()
    assert c.trace_stats.malformed == 0 and c.error is None
    return c


def _sites(c):
    return [(s.gb_id, Path(s.file).name, s.line, s.function, "approximate" if s.approximate else s.gb_type)
            for s in c.sites]


def _old(tag):
    return marked_line(PROGRAMS / "gs_old.py", tag)


# gs_old.py: a print in f, a print two calls deep (helper via middle), a data-dependent `if`, 3 batch sizes.
# Without break reports every place Dynamo resumed is a site: the nested print also shows where
# it stopped each caller (middle's call of helper at 12, f's call of middle at 19).
INFERRED_OLD = [("GB????", "gs_old.py", _old("OLD_NESTED"), "helper", "approximate"),
                ("GB????", "gs_old.py", 12, "middle", "approximate"),
                ("GB????", "gs_old.py", _old("OLD_PRINT"), "f", "approximate"),
                ("GB????", "gs_old.py", 19, "f", "approximate"),
                ("GB????", "gs_old.py", _old("OLD_DATADEP"), "f", "approximate")]


def test_torch_2_3_breaks_inferred_from_resume_functions():
    c = _one("torch2.3_gs_old.log.gz")
    assert _sites(c) == INFERRED_OLD
    assert c.graph_count == 10 and c.compile_seconds == 0.0  # 2.3 logs no compile times
    # No metrics: the frame is named by its graph's first "# File:" line, not by the caller.
    assert [(g.compile_id, g.function) for g in c.graphs][:2] == [("0/0", "f"), ("4/0", "helper")]
    # No recompile reasons in 2.3, but the 0/1 compiles are still recompiles.
    assert [(r.reason, r.count) for r in c.recompiles] == [(UNKNOWN_RECOMPILE, 7)]
    print_site = c.sites[2]
    assert "torch_dynamo_resume_in_f_at_18" in print_site.explanation


@pytest.mark.parametrize("version", ["2.4", "2.5"])
def test_torch_2_4_and_2_5_restart_reasons_name_the_break(version):
    c = _one(f"torch{version}_gs_old.log.gz")
    assert _sites(c) == INFERRED_OLD
    by_line = {s.line: s for s in c.sites}
    assert by_line[_old("OLD_PRINT")].gb_type.startswith("builtin: print")
    assert "restart reason" in by_line[_old("OLD_PRINT")].explanation
    # A data-dependent jump restarts nothing: no reason in the metrics.
    assert by_line[_old("OLD_DATADEP")].gb_type == "graph break (inferred)"
    assert c.compile_seconds > 1.0  # entire_frame_compile_time_s
    # 2.4 wrote no recompile_reasons artifact yet; 2.5 does.
    reason = UNKNOWN_RECOMPILE if version == "2.4" else "tensor 'L['x']' size mismatch at index 0"
    assert [(r.reason, r.count) for r in c.recompiles] == [(reason, 7)]


def test_torch_2_6_old_break_layout_is_read_exactly():
    c = _one("torch2.6_gs_old.log.gz")
    assert [(gb, f, ln, fn) for gb, f, ln, fn, _ in _sites(c)] == [
        ("GB????", "gs_old.py", _old("OLD_NESTED"), "helper"),
        ("GB????", "gs_old.py", _old("OLD_PRINT"), "f"),
        ("GB????", "gs_old.py", _old("OLD_DATADEP"), "f")]
    assert not any(s.approximate for s in c.sites)
    assert [s.gb_type for s in c.sites][1:] == [
        "builtin: print [<class 'torch._dynamo.variables.constant.ConstantVariable'>] False", "Data-dependent jump"]
    assert [s.events for s in c.sites] == [5, 2, 2] and c.graph_count == 10
    assert c.recompile_count == 7 and c.compile_seconds > 1.0


@pytest.mark.parametrize("name,approximate,recompiles", [("torch2.3_gs_runs.log.gz", True, 2),
                                                         ("torch2.4_gs_runs.log.gz", True, 2),
                                                         ("torch2.6_gs_runs.log.gz", False, 2)])
def test_two_runs_in_one_file_are_kept_apart(name, approximate, recompiles):
    c = _one(name)
    line = marked_line(PROGRAMS / "gs_runs.py", "RUNS_PRINT")
    [s] = c.sites
    assert (Path(s.file).name, s.line, s.function, s.approximate) == ("gs_runs.py", line, "g", approximate)
    assert c.trace_stats.runs == 2
    # Each run compiles g at 0/0 and 0/1 (+ its resume function): 4 graphs per run, no merging.
    assert c.graph_count == 8 and s.events == 4
    assert sorted({g.compile_id.split(":")[0] for g in c.graphs if ":" in g.compile_id}) == ["r1"]
    assert c.recompile_count == 2 * recompiles


def test_export_only_log_is_no_dynamo_compile(tmp_path):
    [c] = censuses_from_path(CORPUS / "torch2.13_gs_export.log.gz").values()
    assert c.error is not None and c.error.kind.value == "capture" and c.error.message == NO_DYNAMO_COMPILE
    assert c.trace_stats.records > 0 and not c.sites
    r = subprocess.run([PY, "-m", "graphstitch", "trace", str(CORPUS / "torch2.13_gs_export.log.gz")], env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no Dynamo compile in this trace" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "No graph breaks" not in r.stdout


def test_corpus_is_small():
    assert sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file()) < 300_000


# ----------------------------------------------------------------------------- metrics records

def _records(name):
    with gzip.open(CORPUS / name, "rt", encoding="utf-8") as f:
        return f.read().splitlines(keepends=True)


def _census(lines):
    dec = Decoder(split_runs=True)
    events = [e for rec in iter_trace_records(lines, dec) for e in dec.decode(rec)]
    return build_census(events), dec


def _edit_metrics(line, fn):
    head, body = line.split("] ", 1)
    meta = json.loads(body)
    fn(meta)
    return f"{head}] {json.dumps(meta)}\n"


def test_compile_time_from_whichever_field_exists():
    lines = _records("torch2.6_gs_old.log.gz")
    want, _ = _census(lines)

    def only_cumulative(meta):  # as torch writes a field it did not fill: null
        meta["compilation_metrics"]["entire_frame_compile_time_s"] = None
    edited = [_edit_metrics(ln, only_cumulative) if '{"compilation_metrics"' in ln else ln for ln in lines]
    got, dec = _census(edited)
    assert dec.malformed == 0
    assert got.compile_seconds == pytest.approx(want.compile_seconds, abs=1e-3) and got.compile_seconds > 1.0


def test_metrics_without_ids_make_no_phantom_frame_and_records_merge():
    lines = _records("torch2.6_gs_old.log.gz")
    first = next(i for i, ln in enumerate(lines) if '{"compilation_metrics"' in ln)

    def no_ids(meta):  # a run-time / non-Dynamo metrics record: no frame ids at all
        for k in ("frame_id", "frame_compile_id", "attempt"):
            meta.pop(k, None)
        meta["compilation_metrics"].update(compile_id=None, frame_key=None)

    def partial(meta):  # a second record for the same compile, carrying less
        meta["compilation_metrics"].update(co_name=None, co_filename=None, entire_frame_compile_time_s=None,
                                           dynamo_cumulative_compile_time_us=None, restart_reasons=[])
    extra = [_edit_metrics(lines[first], no_ids), _edit_metrics(lines[first], partial)]
    base, _ = _census(lines)
    got, dec = _census(lines[:first + 1] + extra + lines[first + 1:])
    assert dec.malformed == 0
    assert "?/?" not in [f.compile_id for f in got.frames]
    assert [(f.compile_id, f.function, f.compile_seconds) for f in got.frames] == \
        [(f.compile_id, f.function, f.compile_seconds) for f in base.frames]


def test_a_log_cut_inside_a_payload_is_checked_against_torch_md5():
    lines = _records("torch2.6_gs_old.log.gz")
    i = max(i for i, ln in enumerate(lines) if "dynamo_graph_break_reason" in ln)
    j = i + 1
    while j < len(lines) and lines[j].startswith("\t"):
        j += 1
    payload = "\n".join(ln[1:].rstrip("\n") for ln in lines[i + 1:j])
    assert hashlib.md5(payload.encode()).hexdigest() in lines[i]  # what torch wrote
    base, _ = _census(lines[:i])
    # Cut inside the last break report, after its location and part of its reason: the
    # payload fails torch's md5, so the report is malformed, not a site from half a report.
    for cut in (i + 2, i + 3):
        got, dec = _census(lines[:cut] + [lines[cut][:12]])
        assert dec.malformed == 1
        assert [(s.id, s.events, s.gb_type) for s in got.sites] == [(s.id, s.events, s.gb_type) for s in base.sites]
    # An edited (not cut) log keeps its reports: paths rewritten, as for a trace from elsewhere.
    moved = [ln.replace("/tmp/prog/", "/elsewhere/") for ln in lines]
    got, dec = _census(moved)
    assert dec.malformed == 0 and {s.file for s in got.sites} == {"/elsewhere/gs_old.py"}


# ----------------------------------------------------------------------------- torch 2.13 HOP

@pytest.mark.slow
def test_break_inside_checkpoint_keeps_its_gb_type(tmp_path):
    r = subprocess.run([PY, str(TARGETS / "tr_hop.py")], env={**ENV, "TORCH_TRACE": str(tmp_path)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    [c] = censuses_from_path(tmp_path).values()
    assert c.trace_stats.malformed == 0
    [s] = c.sites
    assert (s.gb_id, Path(s.file).name, s.line, s.function) == ("GB0059", "tr_hop.py",
                                                                marked_line(TARGETS / "tr_hop.py", "TR_HOP"), "inner")
    assert s.gb_type == "Failed to trace builtin operator" and not s.approximate
    assert s.explanation.startswith("Dynamo does not know how to trace builtin operator `print`")


def test_census_from_files_reads_gz_and_plain_alike(tmp_path):
    plain = tmp_path / "x.log"
    plain.write_text("".join(_records("torch2.6_gs_runs.log.gz")))
    a = census_from_files([plain])
    b = census_from_files([CORPUS / "torch2.6_gs_runs.log.gz"])
    assert [s.id for s in a.sites] == [s.id for s in b.sites] and a.graph_count == b.graph_count


# ----------------------------------------------------------------------------- fuzz: never crash, never invent

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_REAL = {n: _records(n) for n in ("torch2.6_gs_old.log.gz", "torch2.5_gs_old.log.gz", "torch2.4_gs_old.log.gz",
                                   "torch2.3_gs_old.log.gz")}
_KINDS = ["dynamo_start", "compilation_metrics", "dynamo_output_graph", "str", "graphstitch_run",
          '{"artifact": {"name": "dynamo_graph_break_reason"', '{"artifact": {"name": "recompile_reasons"',
          '{"artifact": {"name": "inductor_collective_schedule"']


def _nested(kind, depth, close):
    head = kind if kind.startswith("{") else '{"' + kind + '"'
    body = "[" * depth + ("]" * depth if close else "")
    return f"V1 0 1 f.py:1] {head}: {body}, \"frame_id\": 0, \"frame_compile_id\": 0, \"has_payload\": \"x\"}}\n"


_MUTATION = st.one_of(
    st.tuples(st.just("cut"), st.integers(0, 10**7)),                      # truncate the file there
    st.tuples(st.just("nest"), st.sampled_from(_KINDS), st.integers(1, 3000), st.booleans()),
    st.tuples(st.just("junk"), st.integers(0, 10**7), st.text(max_size=40)),
    st.tuples(st.just("drop"), st.integers(0, 10**7)),                     # lose one line (a payload line, a header)
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(_REAL)), st.lists(_MUTATION, max_size=6))
# found by this test: a blank line inside a payload ended the record, and the traceback's
# frames after it were lost (the resume frame's line became the site)
@example(name="torch2.6_gs_old.log.gz", mutations=[("junk", 0, ""), ("junk", 46298, "")])
def test_fuzz_real_logs_mutated(name, mutations):
    lines = list(_REAL[name])
    for m in mutations:
        if m[0] == "cut":
            text = "".join(lines)
            lines = text[:m[1] % (len(text) + 1)].splitlines(keepends=True)
        elif m[0] == "nest":
            lines.insert(len(lines) // 2, _nested(m[1], m[2], m[3]))
        elif m[0] == "junk" and lines:
            lines.insert(m[1] % len(lines), m[2] + "\n")
        elif m[0] == "drop" and lines:
            del lines[m[1] % len(lines)]
    c, _ = _census(lines)
    c.to_dict()
    # Never invent: every exact site is at a place the real log names, and no GB id appears from
    # nowhere. A mutation that destroys a break report may leave a site inferred from a resume
    # function instead: it must say it is approximate, and be in a file the real log names.
    clean, _ = _census(_REAL[name])
    exact = [s for s in c.sites if not s.approximate]
    assert {(s.file, s.line) for s in exact} <= {(s.file, s.line) for s in clean.sites}
    assert {s.file for s in c.sites} <= {s.file for s in clean.sites}
    assert {s.gb_id for s in c.sites} <= {s.gb_id for s in clean.sites}


# ----------------------------------------------------------------------------- ranks

def test_rank_comes_from_the_file_name_anywhere(tmp_path):
    from graphstitch.ranks import censuses_from_rank_files, compare_ranks
    from graphstitch.traces import file_rank
    assert [file_rank(Path(n)) for n in ("dedicated_log_torch_trace_rank_0_abc.log", "x_rank_1.log",
                                         "records.rank_3.log", "rank_12.log.gz", "frank_2.log")] == [0, 1, 3, 12, None]
    old, runs = _records("torch2.6_gs_old.log.gz"), _records("torch2.6_gs_runs.log.gz")
    # No random suffix: still two ranks, not one process.
    (tmp_path / "dedicated_log_torch_trace_rank_0.log").write_text("".join(old))
    (tmp_path / "dedicated_log_torch_trace_rank_1.log").write_text("".join(runs))
    cs = censuses_from_path(tmp_path)
    assert list(cs) == [0, 1] and cs[0].graph_count == 10 and cs[1].graph_count == 8
    assert not compare_ranks(cs).symmetric
    # A list of rank files: N files, N censuses, ranks from the names.
    files = [str(tmp_path / "dedicated_log_torch_trace_rank_1.log"), str(tmp_path / "dedicated_log_torch_trace_rank_0.log")]
    by = censuses_from_rank_files(files)
    assert list(by) == [0, 1] and by[1].graph_count == 8
    with pytest.raises(ValueError, match="same rank"):
        censuses_from_rank_files([files[0], files[0]])


def test_file_name_rank_wins_over_the_records_rank(tmp_path):
    # The records of a real rank log carry "rank": 0; the name says 5.
    lines = [ln.replace('"frame_id"', '"rank": 0, "frame_id"', 1) if ln.startswith("V") else ln
             for ln in _records("torch2.6_gs_runs.log.gz")]
    (tmp_path / "job.rank_5.log").write_text("".join(lines))
    (tmp_path / "other.log").write_text("".join(lines))  # no rank in the name: the records decide
    assert sorted(censuses_from_path(tmp_path)) == [0, 5]


@pytest.mark.slow
def test_inductor_collective_schedule_divergence(tmp_path):
    d = tmp_path / "trace"
    r = subprocess.run([PY, str(TARGETS / "tr_schedule.py"), str(29300 + os.getpid() % 300)],
                       env={**ENV, "TORCH_TRACE": str(d), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")},
                       capture_output=True, text=True, timeout=400)
    # The ranks' collectives mismatch at run time (that is the point): the job may fail, the logs stay.
    cs = censuses_from_path(d)
    assert list(cs) == [0, 1], r.stderr[-2000:]
    line = marked_line(TARGETS / "tr_schedule.py", "TR_SCHEDULE") - 3  # the frame: def step
    for c in cs.values():
        [g] = c.graphs
        assert (Path(g.file).name, g.line, g.function) == ("tr_schedule.py", line, "step")
        assert [op.split(".")[-1] for op in g.collectives] == ["all_reduce", "wait_tensor"] * 2
    assert [len(cs[r].graphs[0].schedule or []) for r in (0, 1)] == [4, 2]
    from graphstitch.ranks import compare_ranks
    cmp = compare_ranks(cs)
    [div] = cmp.divergences
    assert div.kind == "collective_schedule" and div.ranks == [1] and div.collective_index == 1
    assert "while Dynamo's graphs hold the same collectives" in div.message
    out = subprocess.run([PY, "-m", "graphstitch", "trace", str(d)], env=ENV, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and "Inductor's executed schedule differs" in out.stdout
