"""graphstitch guards: repeat-stable, recompiles every call, --vary that generalizes,
recompile_limit hit, guard normalization across processes."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import assert_valid, marked_line
from graphstitch.cli import main
from graphstitch.guards import cache_entries, normalize_guards

TARGETS = Path(__file__).parent / "targets_guards" / "gd_targets.py"


def guards(tmp_path, factory, *args):
    out = tmp_path / "g.json"
    r = CliRunner().invoke(main, ["guards", f"{TARGETS}:{factory}", "--json", str(out), *args])
    return r, (assert_valid("guards", json.loads(out.read_text())) if out.exists() else None)


def test_repeat_stable(tmp_path):
    r, d = guards(tmp_path, "make_stable", "--repeat", "3")
    assert r.exit_code == 0, r.output
    assert d["ok"] and d["recompiles"] == [] and d["recompile_limit_hit"] == [] and d["run"]["recompile_limit"] == 8
    [frame] = d["cache_entries"]
    assert frame["function"] == "stable" and frame["compile_ids"] == ["0/0"]


def test_recompiles_every_call(tmp_path):
    r, d = guards(tmp_path, "make_counter", "--repeat", "4", "--no-eager-check")
    assert r.exit_code == 1, r.output
    [cause] = d["recompiles"]
    assert cause["reason"] == "self.calls == <value>" and cause["count"] == 3
    line = marked_line(TARGETS, "CALLS")
    assert f"gd_targets.py:{line} in forward" in cause["examples"][0]
    assert any("allow_unspec_int_on_nn_module" in a for a in cause["advice"])
    # One call per pass: every recompile after the first pass is a repeat's.
    assert cause["repeats"] == 3 and d["first_pass_recompiles"] == 0 and d["repeat_recompiles"] == 3
    assert "recompiled 3x on repeated identical calls (repeat passes): self.calls == <value>" in " ".join(r.output.split())
    # The diff between cache entries is the guarded value only, not ids or globals renaming.
    [frame] = d["cache_entries"]
    assert frame["diffs"]["0/1"] == ["-| | | | +- EQUALS_MATCH: L['self'].calls == 0",
                                     "+| | | | +- EQUALS_MATCH: L['self'].calls == 1"]


def test_recompile_limit_hit(tmp_path):
    r, d = guards(tmp_path, "make_counter", "--repeat", "5", "--no-eager-check", "--recompile-limit", "2")
    assert r.exit_code == 1, r.output
    assert d["run"]["recompile_limit"] == 2
    assert d["recompile_limit_hit"] == ["forward (0/2)"]
    assert "recompile_limit (2) hit: forward (0/2) silently runs eagerly" in r.output
    import torch._dynamo
    assert torch._dynamo.config.recompile_limit == 8   # the patch did not leak


def test_vary_generalizes_after_one_recompile(tmp_path):
    r, d = guards(tmp_path, "make_reduce", "--vary", "x:0")
    assert r.exit_code == 0, r.output
    assert d["run"]["sizes"] == [4, 5, 6, 7] and d["generalized"] is True
    [cause] = d["recompiles"]
    assert cause["reason"] == "tensor 'x' size mismatch at index 0" and cause["count"] == 1
    assert any("mark_dynamic(x, 0)" in a for a in cause["advice"])
    assert "generalized after one recompile: yes" in r.output
    [frame] = d["cache_entries"]
    assert any("size=[None, 3]" in line and line.startswith("+") for line in frame["diffs"]["0/1"])


def test_vary_without_dynamic_does_not_generalize(tmp_path):
    r, d = guards(tmp_path, "make_reduce", "--vary", "0", "--sizes", "3,5,6", "--dynamic", "false")
    assert r.exit_code == 1, r.output
    assert d["generalized"] is False and d["run"]["vary"] == "x:0"
    assert d["recompiles"][0]["count"] == 2
    assert "did not generalize: a frame compiled 3 times over sizes [3, 5, 6]" in r.output


@pytest.mark.parametrize("args,msg", [
    (["--vary", "y:0"], "no tensor argument named 'y'"),
    (["--vary", "x:7"], "no dimension 7"),
    (["--vary", "x:a"], "expected DIM or NAME:DIM"),
    (["--repeat", "2", "--vary", "0"], "not both"),
    (["--vary", "0", "--sizes", "3,x"], "comma-separated"),
])
def test_usage_errors(tmp_path, args, msg):
    r, _ = guards(tmp_path, "make_reduce", *args)
    assert r.exit_code == 2 and msg in r.stderr and "Traceback" not in r.output


@pytest.mark.slow
def test_guard_text_normalized_across_processes():
    from conftest import census_subprocess
    from graphstitch.targets import Options
    a, _ = census_subprocess(f"{TARGETS}:make_counter", Options(check_eager=False))
    b, _ = census_subprocess(f"{TARGETS}:make_counter", Options(check_eager=False))
    raw_a, raw_b = a.guards["0/0"], b.guards["0/0"]
    assert "ID_MATCH" in raw_a and "GLOBAL_STATE" in raw_a
    assert normalize_guards(raw_a) == normalize_guards(raw_b)
    assert not any("0x" in line or "# " in line for line in normalize_guards(raw_a))
    assert [fe.compile_ids for fe in cache_entries(a)] == [["0/0"]]


def test_factory_of_closures_gets_isolate_recompiles_advice(tmp_path):
    r, d = guards(tmp_path, "make_closures", "--repeat", "2")
    # The two closures recompile once in the first pass; repeating them adds nothing: stable.
    assert r.exit_code == 0, r.output
    assert d["first_pass_recompiles"] == 1 and d["repeat_recompiles"] == 0
    assert d["run"]["shared_code"] == ["scaled"]
    assert "isolate_recompiles=True" in d["shared_code_advice"]
    [cause] = d["recompiles"]
    assert cause["reason"] == "scale == <value>"
    assert f"gd_targets.py:{marked_line(TARGETS, 'SCALED')} in scaled" in cause["examples"][0]


def test_first_pass_recompiles_are_not_instability(tmp_path):
    """The factory's own calls differ (three batch sizes): the first pass recompiles once and
    automatic dynamic generalises; the identical repeat passes add nothing: stable."""
    r, d = guards(tmp_path, "make_batches", "--repeat", "3")
    assert r.exit_code == 0, r.output
    [cause] = d["recompiles"]
    assert cause["count"] == 1 and cause["repeats"] == 0 and cause["calls"] == [1]
    assert cause["kind"] == "shape" and cause["id"]["subject"] == "x dim 0"
    assert d["first_pass_recompiles"] == 1 and d["repeat_recompiles"] == 0 and d["problems"] == []
    assert "repeat passes (the same calls again): 0 recompiles" in " ".join(r.output.split())


def test_guards_target_alone_is_first_pass_plus_one_repeat(tmp_path):
    """`graphstitch guards TARGET` as the README's command table writes it."""
    r, d = guards(tmp_path, "make_counter", "--no-eager-check")
    assert r.exit_code == 1, r.output
    assert d["run"]["mode"] == "repeat" and d["run"]["repeat"] == 2
    [cause] = d["recompiles"]
    assert cause["count"] == 1 and cause["repeats"] == 1
    assert cause["provenance"]["line"] == marked_line(TARGETS, "CALLS") and cause["kind"] == "attribute"
