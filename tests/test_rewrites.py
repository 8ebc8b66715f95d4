"""Source rewrites (fix engine v2) on the public fix corpus, on real torch.compile.

Sites come from real censuses of tests/fix_corpus/ programs; each rule family's patch is
asserted exactly, and verification runs the patched copy in a worker against the ORIGINAL
code's eager outputs and printed output. The full corpus is benchmarks/fix_rate.py's job.
"""

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import census_subprocess, marked_line
from graphstitch.fix import apply_best, run_fix
from graphstitch.fix.candidates import Candidate
from graphstitch.fix.rules import Rewrite, proposals
from graphstitch.fix.rules import base as rules_base
from graphstitch.fix.trials import evaluate
from graphstitch.fix.workspace import Workspace
from graphstitch.live import census_target
from graphstitch.targets import Options, Patches

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fix_corpus"
OPTS = Options(backend="aot_eager")


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def spec_of(name: str) -> str:
    return f"{CORPUS / name}.py:target"


def census_of(name: str):
    """The real census of a corpus program (in this process: torch is imported once)."""
    return census_target(spec_of(name), OPTS, project_root=str(ROOT))


def props_of(name: str, census=None):
    c = census or census_of(name)
    # the first site on the marked line (a `with` line can be two: the context manager and its call)
    site = next(s for s in c.sites if s.line == marked_line(CORPUS / f"{name}.py", "BREAK"))
    props, refused = proposals(site, str(ROOT), target_file=str(CORPUS / f"{name}.py"), factory="target",
                               sites=c.sites)
    return site, props, refused


def changed(rw: Rewrite, path: Path) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) of a rewrite against the file on disk."""
    import difflib
    old = path.read_text().splitlines()
    new = rw.files[str(path)].splitlines()
    d = [ln for ln in difflib.unified_diff(old, new, lineterm="", n=0) if not ln.startswith(("---", "+++", "@@"))]
    return [ln[1:].strip() for ln in d if ln.startswith("-")], [ln[1:].strip() for ln in d if ln.startswith("+")]


# The patch each rule family writes at a corpus site: (program, rule, a line removed, a line added).
FAMILIES = [
    ("item_graphnorm", "item-keep-tensor", "var = (out * out).mean().item()  # BREAK",
     "return self.weight * out / torch.sqrt(var + self.eps)"),
    # the value decides an `if` returning in both branches: that `if` becomes torch.where too
    ("item_docs_branch", "item-keep-tensor", "return x / norm", "return torch.where(norm > 1.0, x / norm, x)"),
    ("item_int_count", "item-keep-tensor", "return total / max(n, 1)", "return total / torch.clamp(n, min=1)"),
    ("if_where_assign", "if-where", "if y > 0:  # BREAK", "z = torch.where(y > 0, x * 2, -x)"),
    ("if_where_return", "if-where-return", "return x - 1", "return torch.where(x.sum() > 0, x + 1, x - 1)"),
    ("if_raise_nan", "if-raise-check", 'raise ValueError("NaN in activations")',
     "torch._assert_async(torch.logical_not(torch.isnan(y).any()), 'NaN in activations')"),
    ("if_cond_calls", "if-cond", "out = self.small(x)",
     "out = torch.cond(x.abs().mean() > 0.8, self.large, self.small, (x,))"),
    ("print_fstring", "print-hop", 'print(f"loss={loss:.4f} max={x.max():.3f}")  # BREAK',
     "torch._higher_order_ops.print('loss={:.4f} max={:.3f}', loss, x.max())  # BREAK"),
    ("dist_broadcast", "functional-collectives", "dist.broadcast(z, src=0)  # BREAK",
     "z = funcol.broadcast(z, 0, dist.group.WORLD)  # BREAK"),
    ("sdp_kernel_context", "sdpa-kernel", None,
     "with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH, "
     "torch.nn.attention.SDPBackend.CUDNN_ATTENTION]):  # BREAK"),  # legacy enable_cudnn defaults to True
    ("tolist_index", "tolist-keep-tensor", "idx = ids.tolist()  # BREAK", "idx = ids  # BREAK"),
    ("kv_cache_slice", "tensor-slice", "self.k[:, start:end] = k_new  # BREAK",
     "self.k.index_copy_(1, start + torch.arange(k_new.shape[1], device=self.k.device), k_new)  # BREAK"),
    ("slice_read_tensor_start", "tensor-slice", None,
     "return x.index_select(1, pos + torch.arange(3, device=x.device)) * 2  # BREAK"),
    ("lazy_import", "hoist-import", "import scipy.special", "import scipy.special"),
    ("lazy_import", "scipy-special-torch", "return x * scipy.special.expit(0.0)  # BREAK",
     "return x * torch.special.expit(torch.as_tensor(0.0, dtype=torch.float64))  # BREAK"),
    ("tolist_split_varlen", "split-segment-reduce", "chunks = x.split(lengths.tolist())  # BREAK",
     "chunks_sum = x.new_zeros((lengths.shape[0],) + tuple(x.shape[1:])).index_add_(0, chunks_segment, x)"
     "  # BREAK"),
    ("graph_break_loop", "drop-graph-break", "torch._dynamo.graph_break()  # BREAK", "pass"),
    ("deepcopy_tensor", "deepcopy-clone", "y = copy.deepcopy(x)  # BREAK", "y = x.clone()  # BREAK"),
    ("tensor_bool_loop", "extract-hatch", None,  # (difflib pairs the moved `while` with its copy)
     "@torch._dynamo.decorators.leaf_function  # graphstitch fix: runs eagerly, opaque to the compiler"),
    ("save_in_hook", "region-split", None,
     "@torch.compiler.disable(recursive=False)  # graphstitch fix: region split, these lines run eagerly"),
    ("file_write_forward", "io-defer", None, "torch._dynamo.config.reorderable_logging_functions.add(_fn_io)"),
    ("unique_prototypes", "unique-segment-reduce",
     "protos = torch.stack([x[labels == c].mean(0) for c in labels.unique()])  # BREAK",
     "protos_classes, protos_segment = labels.unique(return_inverse=True)"),
    ("logging_attention", "log-reorder", 'logger.debug("attention scores %s", tuple(scores.shape))  # BREAK',
     '_logger_debug("attention scores %s", str(tuple(scores.shape)))  # BREAK'),
]


@pytest.mark.parametrize(("name", "rule", "removed", "added"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_rule_family_proposes_its_patch(name, rule, removed, added):
    _, props, _ = props_of(name)
    rw = next((p for p in props if p.rule == rule), None)
    assert rw is not None, [p.rule for p in props]
    minus, plus = changed(rw, CORPUS / f"{name}.py")
    if removed:
        assert removed in minus
    assert added in plus
    assert rw.tradeoff and rw.strategy in ("rewrite", "extract", "split")


def test_rules_refuse_where_no_rewrite_is_right():
    _, props, refused = props_of("if_side_effect_branch")
    assert props == [] or all(p.rule != "if-where" for p in props)
    assert any(r.rule == "if-where" and "self.clipped += 1" in r.reason for r in refused)
    _, props, refused = props_of("numpy_mixup")
    assert any("random stream" in r.reason for r in refused)


def test_generator_argument_changes_the_caller_and_verifies():
    base = census_of("generator_arg")
    site, props, _ = props_of("generator_arg", base)
    rw = next(p for p in props if p.rule == "pass-sequence")
    minus, plus = changed(rw, CORPUS / "generator_arg.py")
    assert minus == ["return [(accumulate, ((x * 2 for x in xs),), {})]"]
    assert plus == ["return [(accumulate, ([x * 2 for x in xs],), {})]"]
    trial = Workspace(spec_of("generator_arg"), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300)
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base, trial)
    assert f.verified, f.why_not
    assert trial.sites == [] and trial.graph_count == 1


def test_where_rewrite_verifies_and_dtype_changing_rewrite_is_refused():
    # verified: the patched copy has no break and equals the ORIGINAL code's eager outputs
    base = census_of("if_where_assign")
    site, props, _ = props_of("if_where_assign", base)
    rw = next(p for p in props if p.rule == "if-where")
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                 Workspace(spec_of("if_where_assign"), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300))
    assert f.verified and f.after.graphs == 1 and f.after.sites == 0, f.why_not
    # refused: keeping the float64 statistic promotes int64 * tensor to float64 (a Python
    # float gives float32): the break is gone, the outputs are not the original's
    base = census_of("item_dtype_promotion")
    site, props, _ = props_of("item_dtype_promotion", base)
    rw = next(p for p in props if p.rule == "item-keep-tensor")
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                 Workspace(spec_of("item_dtype_promotion"), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300))
    assert f.site_gone and not f.verified and not f.outputs_match
    assert f.why_not[0].startswith("outputs differ from eager: call 0: out: The values for attribute 'dtype' do not match")


def test_print_rewrite_that_changes_the_printed_text_is_refused():
    # The print op formats a 0-d tensor as a number ("1.2531..."), print as "tensor(1.2531)":
    # the output survives but differs from the original's, so the rewrite is not offered.
    base = census_of("print_debug")
    site, props, _ = props_of("print_debug", base)
    rw = next(p for p in props if p.rule == "print-hop")
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                 Workspace(spec_of("print_debug"), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300))
    assert f.site_gone and f.outputs_match and f.side_effects_kept is False and not f.verified
    assert f.why_not == ["side effect changed at run time (call 0: eager 1 print/log, compiled 1)"]


# ----------------------------------------------------------------------------- bad input

def test_rewrite_that_does_not_parse_is_never_offered(monkeypatch):
    def broken(ctx):
        yield Rewrite("broken", "rewrite", "broken", "none", {ctx.path: ctx.source + "\ndef (:\n"})
    monkeypatch.setattr(rules_base, "RULES", [*rules_base.RULES, ("broken", broken)])
    _, props, refused = props_of("if_where_assign")
    assert "if-where" in [p.rule for p in props] and "broken" not in [p.rule for p in props]
    assert any(r.rule == "broken" and "does not parse; not offered" in r.reason for r in refused)


def test_site_in_library_code_is_never_edited():
    import torch
    c = census_of("if_where_assign")
    lib = dataclasses.replace(c.sites[0], file=os.path.join(os.path.dirname(torch.__file__), "functional.py"))
    props, refused = proposals(lib, str(ROOT))
    assert props == [] and "is torch; not patched" in refused[0].reason


@pytest.fixture
def project(tmp_path):
    """A one-file project holding a copy of if_where_assign.py."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    shutil.copy(CORPUS / "if_where_assign.py", tmp_path / "prog.py")
    return tmp_path


@pytest.mark.slow
def test_apply_refuses_a_changed_file_then_writes_the_verified_rewrite(project, monkeypatch):
    monkeypatch.chdir(project)
    path = project / "prog.py"
    report = run_fix("prog.py:target", OPTS, jobs=2, kinds={"rewrite"})
    (f,) = report.fixes
    assert f.verified and f.rule == "if-where" and f.strategy == "rewrite"
    assert "+    z = torch.where(y > 0, x * 2, -x)\n" in (f.patch or "")
    # HTML: the verified patch side by side (before | after), highlighted, escaped
    from graphstitch.render.html import render_html
    page = render_html(report)
    assert '<table class="patch">' in page and "trade-off: computes both branches" in page
    assert page.count('<tr class="change">') == 4  # the 4-line `if` becomes one torch.where line
    original = path.read_text()
    path.write_text(original + "\n# edited\n")
    msg, ok = apply_best(report, Workspace.of("prog.py:target"), OPTS, write=True)
    assert not ok and "changed since the census" in msg and not (project / "prog.py.graphstitch.bak").exists()
    path.write_text(original)
    msg, ok = apply_best(report, Workspace.of("prog.py:target"), OPTS, write=True)
    assert ok, msg
    assert (project / "prog.py.graphstitch.bak").read_text() == original
    after, _ = census_subprocess(f"{path}:target", OPTS)
    assert after.sites == [] and after.graph_count == 1 and after.outputs_match_eager


@pytest.mark.slow
def test_fix_all_cli_diff_reaches_a_fixed_point(project, monkeypatch):
    monkeypatch.chdir(project)
    r = subprocess.run([sys.executable, "-m", "graphstitch", "fix", "prog.py:target", "--all", "--diff",
                        "-j", "2", "--json", "all.json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    # 3 graphs before: the fresh inputs take the other branch (one more resume function)
    assert "graphs 3→1" in r.stdout and "1. [rewrite] GB0170 prog.py:7" in r.stdout
    assert "combined patch, re-checked from the pristine files: VERIFIED" in r.stdout
    assert "+    z = torch.where(y > 0, x * 2, -x)" in r.stdout
    import json
    data = json.loads((project / "all.json").read_text())
    assert data["schema"] == "graphstitch.fixall/1" and data["verified"] and data["final"]["graphs"] == 1
    assert (project / "prog.py").read_text() == (CORPUS / "if_where_assign.py").read_text()  # --diff writes nothing


MIXED = """import torch


def fn(x, keep):
    y = x.sum()
    if y > 0:  # WHERE
        z = x * 2
    else:
        z = -x
    kept = z[keep]  # MASK
    return kept


def target():
    torch.manual_seed(0)
    x = torch.randn(6)
    return [(fn, (x, x > 0), {})]
"""


def test_fix_all_writes_a_config_flag_where_no_rewrite_applies(tmp_path, monkeypatch):
    # Two sites: the data-dependent `if` gets its torch.where rewrite; the boolean-mask
    # selection it returns has no rewrite rule (nothing reduces it), so `--all` writes its
    # verified config flag as a source line. The combined patch is re-checked from the
    # pristine file.
    from graphstitch.fix.fixall import fix_all
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    prog = tmp_path / "prog.py"
    prog.write_text(MIXED)
    monkeypatch.chdir(tmp_path)
    result, files = fix_all("prog.py:target", OPTS, jobs=2, timeout=300, project_root=str(tmp_path))
    # (a step's line is in the text it was applied to: the rewrite goes first and shortens the file)
    steps = [(st.strategy, st.label) for st in result.steps]
    assert steps == [("rewrite", f"GB0170 prog.py:{marked_line(prog, 'WHERE')}"),
                     ("config", f"GB0036 prog.py:{marked_line(prog, 'MASK') - 3}")], result.remaining
    assert result.verified and result.final.sites == 0 and result.remaining == [], result.why_not
    assert "+torch._dynamo.config.capture_dynamic_output_shape_ops = True  # graphstitch fix" in result.patch
    assert "+    z = torch.where(y > 0, x * 2, -x)" in result.patch
    assert prog.read_text() == MIXED   # nothing written without --apply


ALIASED = """import torch as th


def loss_and_stat(x):
    loss = (x ** 2).mean()
    stat = loss.item()  # ITEM
    return loss, stat


def target():
    th.manual_seed(0)
    return [(loss_and_stat, (th.randn(4),), {})]
"""


def test_a_config_line_in_a_module_that_imports_torch_under_another_name_imports_torch(tmp_path, monkeypatch):
    # `import torch as th` binds `th`, not `torch`: the written `torch._dynamo.config...` line
    # needs its own `import torch` (it once raised NameError on import: verified in the trial,
    # where the flag is set in-process, and refused from the written file).
    from graphstitch.fix.fixall import fix_all
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    prog = tmp_path / "prog.py"
    prog.write_text(ALIASED)
    monkeypatch.chdir(tmp_path)
    result, _ = fix_all("prog.py:target", OPTS, jobs=2, timeout=300, project_root=str(tmp_path))
    assert [(st.strategy, st.label) for st in result.steps] == [("config", f"GB0124 prog.py:{marked_line(prog, 'ITEM')}")]
    assert " import torch as th\n+import torch\n+torch._dynamo.config." in result.patch
    assert "+torch._dynamo.config.capture_scalar_outputs = True  # graphstitch fix" in result.patch
    assert result.verified and result.final.sites == 0, result.why_not


def test_warning_is_a_side_effect_kept_by_reorderable_config_and_lost_by_ignore():
    # warnings.warn in the compiled function: deferring it (reorderable_logging_functions)
    # keeps the warning at run time, verified; ignoring it removes the break too, but the
    # side-effect check now records warnings, so that candidate is refused.
    base = census_of("warnings_warn")
    (site,) = base.sites
    assert (site.gb_id, site.line) == ("GB0007", 8)  # the `# BREAK` line (it also carries a noqa)
    from graphstitch.fix.candidates import candidates
    (cand,) = [c for c in candidates(site, str(ROOT)) if "warnings.warn" in c.label]
    assert cand.patches.config == {"reorderable_logging_functions": ["warnings.warn"]}
    opts = dataclasses.replace(OPTS, fresh=True, patches=cand.patches)
    f = evaluate(site, cand, base, census_target(spec_of("warnings_warn"), opts, project_root=str(ROOT)))
    assert f.verified and f.after.sites == 0 and f.side_effects_kept, f.why_not
    drop = Candidate("config", "ignore", Patches(config={"ignore_logging_functions": ["warnings.warn"]}))
    opts = dataclasses.replace(OPTS, fresh=True, patches=drop.patches)
    f = evaluate(site, drop, base, census_target(spec_of("warnings_warn"), opts, project_root=str(ROOT)))
    assert f.site_gone and f.side_effects_kept is False and not f.verified


def test_scipy_special_rewrite_verifies_and_the_hoisted_import_does_not():
    # The lazy import is traced in torch 2.13; the break is the scipy ufunc call. Its
    # torch.special twin on float64 removes it with outputs equal to eager; hoisting the
    # import alone leaves the site, so it is rejected.
    base = census_of("lazy_import")
    site, props, _ = props_of("lazy_import", base)
    found = {}
    for rule in ("scipy-special-torch", "hoist-import"):
        rw = next(p for p in props if p.rule == rule)
        found[rule] = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base,
                               Workspace(spec_of("lazy_import"), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300))
    f = found["scipy-special-torch"]
    assert f.verified and f.after.sites == 0 and f.outputs_match, f.why_not
    assert not found["hoist-import"].verified and not found["hoist-import"].site_gone


def test_segment_reduce_verifies_on_fresh_lengths_that_keep_their_sum():
    # Fresh integer inputs are a shuffle of the seen values, so fresh lengths still sum to
    # x.shape[0] (random ints in the seen range did not, the ORIGINAL code raised there and
    # nothing could be proved): the index_add_ rewrite is checked on them and verifies.
    base = census_of("tolist_split_varlen")
    site, props, _ = props_of("tolist_split_varlen", base)
    rw = next(p for p in props if p.rule == "split-segment-reduce")
    _, plus = changed(rw, CORPUS / "tolist_split_varlen.py")
    assert "return torch.stack(chunks_sum / lengths.reshape((-1,) + (1,) * (x.dim() - 1)).to(chunks_sum.dtype))" \
        not in plus
    assert "return chunks_sum / lengths.reshape((-1,) + (1,) * (x.dim() - 1)).to(chunks_sum.dtype)" in plus
    trial = Workspace(spec_of("tolist_split_varlen"), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300)
    f = evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base, trial)
    assert trial.outputs_match_eager and trial.sites == [] and trial.graph_count == 1
    assert trial.checks.fresh_outputs_match is True and trial.checks.fresh_error is None
    assert f.verified, f.why_not


def _trial(name: str, rw: Rewrite, base):
    site = next(s for s in base.sites if s.line == marked_line(CORPUS / f"{name}.py", "BREAK"))
    trial = Workspace(spec_of(name), str(ROOT), str(ROOT)).census(OPTS, rw.files, 300)
    return evaluate(site, Candidate(rw.strategy, rw.label, Patches(), rw), base, trial), trial


def test_region_split_verifies_and_one_that_drops_the_file_write_is_refused():
    # save_in_hook: torch.save (GB0007, three levels deep) in the compiled Net.forward. The
    # split makes forward eager glue; the save runs in a disabled method between the two
    # compiled parts. The side-effect check records files written (torch.save's C++ writer
    # included), so the same split without the save call is refused although outputs match.
    base = census_of("save_in_hook")
    (site,) = base.sites
    assert (site.gb_id, site.line, site.nesting_depth) == ("GB0007", marked_line(CORPUS / "save_in_hook.py", "BREAK"), 3)
    _, props, _ = props_of("save_in_hook", base)
    rw = next(p for p in props if p.rule == "region-split")
    assert rw.strategy == "split" and "Net.forward runs line 22 eagerly" in rw.label
    _, plus = changed(rw, CORPUS / "save_in_hook.py")
    assert plus[:4] == ["@torch.compiler.disable(recursive=False)  # graphstitch fix: region split, these lines run "
                        "eagerly", "h = self._forward_before(x)", "self._forward_eager(h)",
                        "return self._forward_after(h)"]
    f, trial = _trial("save_in_hook", rw, base)
    assert f.verified and trial.sites == [] and trial.break_events == 0 and f.side_effects_kept, f.why_not
    path = str(CORPUS / "save_in_hook.py")
    silent = dataclasses.replace(rw, files={path: rw.files[path].replace("        self.dump(h)\n", "        pass\n")})
    f, trial = _trial("save_in_hook", silent, base)
    assert f.site_gone and f.outputs_match and f.side_effects_kept is False and not f.verified
    assert trial.checks.side_effects and trial.checks.side_effects.eager == ["torch.save act.pt"]


def test_region_split_grows_over_the_statement_the_gap_feeds():
    # packed_rnn: both sites (pack_padded_sequence GB0007, the GRU on a PackedSequence GB0014)
    # are in the gap. With only them eager, pad_packed_sequence breaks in the compiled part:
    # a site hidden before because Dynamo skipped the whole frame, so it is *uncovered* (code
    # never traced), progress rather than a moved break. The gap one statement longer verifies
    # with nothing left and ranks first; the reduction compiles.
    base = census_of("packed_rnn")
    assert sorted((s.gb_id, s.line) for s in base.sites) == [("GB0007", 12), ("GB0014", 13)]
    _, props, _ = props_of("packed_rnn", base)
    splits = {p.label.split(" runs line ")[1].split(" ")[0]: p for p in props if p.rule == "region-split"}
    assert sorted(splits) == ["12–13", "12–14"]
    short, _ = _trial("packed_rnn", splits["12–13"], base)
    assert short.verified and short.new_sites == [], short.why_not
    assert short.uncovered == ["GB0007 tests/fix_corpus/packed_rnn.py:14"]
    long, trial = _trial("packed_rnn", splits["12–14"], base)
    assert long.verified and trial.graph_count == 1 and trial.sites == [] and long.uncovered == [], long.why_not
    from graphstitch.fix.trials import rank
    assert rank([short, long])[0] is long


def test_io_defer_verifies_and_one_that_drops_the_write_is_refused():
    # file_write_forward: `with open(LOG, "a")` in the compiled function (GB0142 and GB0059
    # on one line). Moved into a module-level function Dynamo defers past the graph, the
    # file is still appended on every call (the side-effect check records writes through an
    # audit hook); the same patch with an empty function is refused.
    base = census_of("file_write_forward")
    line = marked_line(CORPUS / "file_write_forward.py", "BREAK")
    assert sorted((s.gb_id, s.line) for s in base.sites) == [("GB0059", line), ("GB0142", line)]
    _, props, _ = props_of("file_write_forward", base)
    rw = next(p for p in props if p.rule == "io-defer")
    assert rw.strategy == "split"
    f, trial = _trial("file_write_forward", rw, base)
    assert f.verified and trial.sites == [] and trial.graph_count == 1, f.why_not
    path = str(CORPUS / "file_write_forward.py")
    empty = dataclasses.replace(rw, files={path: rw.files[path].replace(
        '    with open(LOG, "a") as f:  # BREAK\n        f.write("debug\\n")\n', "    pass\n")})
    assert empty.files[path] != rw.files[path]
    f, trial = _trial("file_write_forward", empty, base)
    assert f.site_gone and f.outputs_match and f.side_effects_kept is False and not f.verified
    assert trial.checks.side_effects and trial.checks.side_effects.eager == ["file debug.log a"]


def test_a_function_entry_is_split_by_its_caller_not_from_inside():
    # torch.compile(fn) unwraps a disable() on fn itself, so a function entry cannot be split
    # from inside (no region-split); the entry split puts the parts in a module whose forward
    # is the eager glue and patches the factory, the caller that compiles it.
    _, props, _ = props_of("file_write_forward")
    assert not [p for p in props if p.rule == "region-split"]
    (entry,) = [p for p in props if p.rule == "entry-split"]
    text = entry.files[str(CORPUS / "file_write_forward.py")]
    assert "torch.compiler.disable" in text or "disable(" in text


def test_log_reorder_keeps_the_record():
    # logger.debug in the compiled function: a module-level function in
    # reorderable_logging_functions; the record is still emitted on every call (the
    # side-effect check enables the logger at every level and compares records).
    base = census_of("logging_attention")
    _, props, _ = props_of("logging_attention", base)
    rw = next(p for p in props if p.rule == "log-reorder")
    f, trial = _trial("logging_attention", rw, base)
    assert f.verified and f.side_effects_kept and trial.sites == [], f.why_not


def test_collective_rewrite_is_verified_on_two_gloo_ranks_and_a_wrong_one_is_refused_there():
    # dist.broadcast -> funcol.broadcast: verified in one process, then on 2 gloo ranks with
    # `graphstitch ranks`' launcher. A wrong rewrite (a SUM all_reduce: on a world of one it
    # equals the broadcast) verifies in one process but not on 2 ranks, where it doubles z.
    from graphstitch.fix.trials import on_ranks
    base = census_of("dist_broadcast")
    site, props, _ = props_of("dist_broadcast", base)
    rw = next(p for p in props if p.rule == "functional-collectives")
    assert rw.ranks == 2
    for cand_rw, ok in ((rw, True), (dataclasses.replace(rw, files={k: v.replace(
            "funcol.broadcast(z, 0, dist.group.WORLD)", 'funcol.all_reduce(z, "sum", dist.group.WORLD)')
            for k, v in rw.files.items()}), False)):
        cand = Candidate(cand_rw.strategy, cand_rw.label, Patches(), cand_rw)
        ws = Workspace(spec_of("dist_broadcast"), str(ROOT), str(ROOT))
        f = evaluate(site, cand, base, ws.census(OPTS, cand_rw.files, 300))
        assert f.verified, f.why_not   # a world of one cannot tell them apart
        on_ranks(f, site, cand, base, ws, OPTS, 300)
        assert f.ranks == 2 and f.verified is ok, f.why_not
        if not ok:
            assert any(w.startswith("on 2 gloo ranks: rank 0: outputs differ from eager") for w in f.why_not), f.why_not
