"""graphstitch perf: regional block detection, the alternating timer, and the perf JSON/SVG.

Timings are asserted only for presence and sanity (these machines are noisy); the speedups
themselves are measured by benchmarks/.
"""

import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import ROOT, assert_valid, marked_line
from graphstitch.demo import Block
from graphstitch.jsonio import to_json
from graphstitch.perf import compare_alternating
from graphstitch.perf.measure import find_blocks
from graphstitch.targets import TargetError

TARGETS = Path(__file__).resolve().parent / "targets_perf"
MODELS = TARGETS / "perf_models.py"
sys.path.insert(0, str(TARGETS))
import perf_models  # noqa: E402

STAT_KEYS = {"median_s", "q1_s", "q3_s", "iqr_s", "min_s", "max_s", "samples"}
VARIANT_KEYS = {"compile_cold_s", "compile_warm_s", "latency", "eager_latency", "speedup_vs_eager",
                "latency_stable", "peak_memory_mb", "outputs_match_eager", "output_mismatch", "block",
                "error", "census"}
CENSUS_KEYS = {"graph_count", "break_site_count", "break_events", "recompile_count", "outputs_match_eager",
               "error", "sites"}


def run_cli(*args, timeout=400):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "graphstitch", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


# ----------------------------------------------------------------------------- block detection

def test_detects_the_repeated_blocks_of_a_modulelist():
    model = perf_models.Stack(depth=4)
    path, blocks = find_blocks(model)
    assert path == "blocks"
    assert blocks == list(model.blocks) and all(type(b) is Block for b in blocks)


def test_prefers_the_outer_blocks_over_the_layers_inside_them():
    # Each Block holds a Sequential with two Linears: those repeat too, but hold fewer parameters.
    model = nn.Sequential(nn.Linear(8, 8), *[Block(8) for _ in range(3)])
    path, blocks = find_blocks(model)
    assert path == "" and len(blocks) == 3 and all(type(b) is Block for b in blocks)


def test_block_by_name():
    model = perf_models.Stack(depth=4)
    assert find_blocks(model, "blocks")[1] == list(model.blocks)
    assert find_blocks(model, "blocks.2")[1] == [model.blocks[2]]
    with pytest.raises(TargetError, match="no submodule 'nope'"):
        find_blocks(model, "nope")


def test_no_repeated_blocks_is_a_clear_error():
    with pytest.raises(TargetError, match="no repeated blocks"):
        find_blocks(nn.Linear(3, 3))
    with pytest.raises(TargetError, match="needs the target's fn to be an nn.Module"):
        find_blocks(lambda x: x)


def test_regional_compile_matches_eager_without_recompiles():
    torch.manual_seed(0)
    model, (x,), _ = perf_models.stack()
    want = model(x)
    _, blocks = find_blocks(model)
    torch._dynamo.reset()
    frames = []

    def backend(gm, example_inputs):
        frames.append(gm)
        return gm.forward
    for b in blocks:
        b.compile(backend=backend)  # one backend object: a different one per block would recompile
    with torch.no_grad():
        got = model(x)
    torch.testing.assert_close(got, want)
    # Four instances, one shared forward: compiled once, reused by the other three.
    assert len(frames) == 1


# ----------------------------------------------------------------------------- timing API

def test_compare_alternating_reports_medians_spreads_and_ratio():
    big, small = torch.randn(192, 192), torch.randn(4, 4)
    res = to_json(compare_alternating(lambda m: m @ m @ m, lambda m: m + 1, [((big,), {}), (small,)],
                                      repeats=6, warmup=1, max_seconds=10))
    assert res["device"] == "cpu" and res["rounds"] >= 6
    for side in ("a", "b"):
        s = res[side]
        assert set(s) == STAT_KEYS and s["samples"] == res["rounds"]
        assert 0 < s["min_s"] <= s["q1_s"] <= s["median_s"] <= s["q3_s"] <= s["max_s"]
    assert res["ratio"] == pytest.approx(res["a"]["median_s"] / res["b"]["median_s"])
    assert res["ratio"] > 1  # three 192x192 matmuls vs an add on 4x4 + the same matmuls


# ----------------------------------------------------------------------------- the command

def check_stats(s):
    assert set(s) == STAT_KEYS
    assert all(math.isfinite(s[k]) for k in STAT_KEYS)
    assert 0 < s["median_s"] < 5 and s["q1_s"] <= s["median_s"] <= s["q3_s"] and s["samples"] >= 3


def check_variant(v):
    assert set(v) == VARIANT_KEYS, set(v) ^ VARIANT_KEYS
    assert v["error"] is None and v["outputs_match_eager"] is True
    check_stats(v["latency"]), check_stats(v["eager_latency"])
    assert 0 < v["compile_cold_s"] < 300 and 0 < v["compile_warm_s"] < 300
    assert v["speedup_vs_eager"] == pytest.approx(v["eager_latency"]["median_s"] / v["latency"]["median_s"])
    assert v["peak_memory_mb"] > 10
    assert set(v["census"]) == CENSUS_KEYS


def test_perf_regional_json_has_every_field(tmp_path):
    # The break is in the top-level forward: the whole compile meets it, the blocks do not.
    out, svg = tmp_path / "perf.json", tmp_path / "perf.svg"
    r = run_cli("perf", f"{MODELS}:breaky_stack", "--backend", "aot_eager", "--regional", "--repeats", "5",
                "--max-seconds", "3", "--json", str(out), "--svg", str(svg), "--html", str(tmp_path / "perf.html"))
    assert r.returncode == 0, r.stderr
    d = assert_valid("perf", json.loads(out.read_text()))
    assert set(d) == {"schema", "target", "backend", "device", "torch_version", "repeats", "warmup", "latency_run",
                      "memory_kind", "census", "census_backend", "eager", "whole", "regional", "ratios",
                      "winner", "nested_compile_region_available"}
    assert d["backend"] == "aot_eager" and d["device"] == "cpu" and d["memory_kind"] == "cpu_peak_rss"
    assert set(d["eager"]) == {"first_call_s", "latency", "peak_memory_mb", "error"}
    check_stats(d["eager"]["latency"])
    check_variant(d["whole"]), check_variant(d["regional"])
    # whole: the census of the target, with its one break site
    assert d["census"] == d["whole"]["census"]
    assert d["census"]["graph_count"] == 2 and d["census"]["break_events"] == 1
    [site] = d["census"]["sites"]
    assert (site["file"], site["line"]) == (str(MODELS), marked_line(MODELS, "PERF_BREAK"))
    assert site["gb_id"] == "GB0059"  # print()
    # regional: 4 blocks, one graph they share, no recompile, no break
    assert d["regional"]["block"] == {"path": "blocks", "class_name": "Block", "count": 4}
    assert d["regional"]["census"]["graph_count"] == 1
    assert d["regional"]["census"]["recompile_count"] == 0 and d["regional"]["census"]["sites"] == []
    r_ = d["ratios"]
    assert r_["regional_vs_whole_latency"] == pytest.approx(
        d["whole"]["latency"]["median_s"] / d["regional"]["latency"]["median_s"])
    assert r_["regional_vs_whole_compile_cold"] == pytest.approx(
        d["whole"]["compile_cold_s"] / d["regional"]["compile_cold_s"])
    assert d["winner"]["latency"] in ("whole", "regional", "tie")
    assert d["winner"]["compile_cold"] in ("whole", "regional", "tie") and d["winner"]["summary"]
    root = ET.fromstring(svg.read_text())  # well-formed
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "regional cold" in texts and "eager" in texts
    assert "4 Block blocks at `blocks`" in r.stdout
    page = (tmp_path / "perf.html").read_text()
    assert page.count("<svg") == 1 and "regional cold" in page and "speedup" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in page


def test_perf_bad_targets_exit_2_with_one_line():
    r = run_cli("perf", f"{MODELS}:nope", "--backend", "eager")
    assert r.returncode == 2 and "has no 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("perf", f"{MODELS}:plain_function", "--backend", "eager", "--regional", "--repeats", "3",
                "--max-seconds", "1")
    assert r.returncode == 2 and "nn.Module" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_perf_inductor_regional(tmp_path):
    out = tmp_path / "perf.json"
    r = run_cli("perf", f"{MODELS}:stack", "--regional", "--repeats", "5", "--max-seconds", "5",
                "--json", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    d = assert_valid("perf", json.loads(out.read_text()))
    assert d["backend"] == "inductor"
    check_variant(d["whole"]), check_variant(d["regional"])
    assert d["regional"]["census"]["recompile_count"] == 0
    # A cold inductor compile writes its cache; the warm process reads it back.
    assert d["whole"]["compile_warm_s"] < d["whole"]["compile_cold_s"]


def test_perf_target_that_fails_eagerly_exits_3_and_keeps_the_json(tmp_path):
    out = tmp_path / "perf.json"
    r = run_cli("perf", f"{MODELS}:fails_eagerly", "--backend", "eager", "--json", str(out))
    assert r.returncode == 3 and "eager run failed (eager): boom" in r.stderr and "Traceback" not in r.stderr
    d = assert_valid("perf", json.loads(out.read_text()))
    assert d["eager"]["error"]["type"] == "ValueError" and d["whole"] is None and d["regional"] is None
    assert d["eager"]["error"]["where"] == f"{MODELS}:{marked_line(MODELS, 'PERF_FAIL')}"
    assert d["census"]["error"]["kind"] == "eager"
