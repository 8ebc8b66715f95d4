"""The scenario corpus: each case asserts the exact sites (file, line, GB id), events and graphs
that a real torch.compile run produces, through graphstitch's census."""

import os

import pytest

from conftest import SCENARIOS, marked_line
from graphstitch.live import census_target
from graphstitch.targets import Options

# scenario -> (sites as (line tag, GB id, events, frame skipped), graph count)
CORPUS = {
    "sc_print": ([("BREAK", "GB0059", 1, False)], 2),
    "sc_logging": ([("BREAK", "GB0291", 1, False)], 2),
    # The logger is enabled: Dynamo breaks inside logging/__init__.py (stdlib), reported by
    # f's frame and report's frame; the site is the user's call.
    "sc_logging_enabled": ([("BREAK", "GB0291", 2, False)], 3),
    "sc_item": ([("BREAK", "GB0124", 1, False)], 2),
    "sc_tolist": ([("BREAK", "GB0033", 1, False)], 1),
    "sc_datadep_if": ([("BREAK", "GB0170", 1, False)], 2),
    "sc_nonzero": ([("BREAK", "GB0036", 1, False)], 2),
    "sc_numpy": ([("BREAK", "GB0033", 1, False)], 2),
    "sc_c_extension": ([("BREAK", "GB0007", 1, False)], 2),
    "sc_torch_save": ([("BREAK", "GB0007", 1, False)], 2),
    # next() on an iterator argument breaks; the resume function's loop over it then fails
    # its whole frame.
    "sc_iterator": ([("LOOP", "GB0811", 1, True), ("BREAK", "GB4347", 1, False)], 0),
    "sc_generator": ([("BREAK", "GB0811", 1, False)], 0),
    # A break inside `with` cannot resume mid-block: the whole frame runs eager.
    "sc_context_manager": ([("BREAK", "GB0142", 1, True)], 0),
    # A break in a loop: GB7000 follows the root cause and the frame is skipped (0 graphs).
    "sc_loop": ([("BREAK", "GB0059", 1, True)], 0),
    # The child's forward is reported by the Sequential frame and by its own frame.
    "sc_sequential": ([("BREAK", "GB0059", 2, False)], 1),
    # Nested three deep: reported once per nesting level.
    "sc_nested3": ([("BREAK", "GB0025", 3, False)], 6),
    "sc_batch_recompile": ([], 2),
    "sc_clean_fn": ([], 1),
    "sc_clean_module": ([], 1),
}


def run(name, **opts):
    return census_target(f"{SCENARIOS / name}.py:target", Options(**opts))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_scenario_sites(name):
    expected_sites, graphs = CORPUS[name]
    path = str(SCENARIOS / f"{name}.py")
    c = run(name)
    assert c.error is None, c.error
    got = [(s.file, s.line, s.gb_id, s.events, s.frame_skipped) for s in c.sites]
    want = [(path, marked_line(path, tag), gb, ev, skipped) for tag, gb, ev, skipped in expected_sites]
    assert got == want
    assert c.graph_count == graphs
    assert c.break_events == sum(e[2] for e in expected_sites)
    # Every site carries its registry text and the full user stack ending at the site.
    for s in c.sites:
        assert s.gb_type and s.explanation
        user = [fr for fr in s.stack if "site-packages/torch/" not in fr.file and "/logging/" not in fr.file]
        assert user[-1].file == path and user[-1].line == s.line
        assert s.code.strip() == open(path).read().splitlines()[s.line - 1].strip()
    if name != "sc_generator":  # a generator argument cannot be copied for an eager reference
        assert c.outputs_match_eager is True, c.output_mismatch
    # Frames skipped by the census are the frames whose compile failed.
    assert len(c.skipped_frames) == sum(1 for e in expected_sites if e[3])


def test_polyfill_frame_is_never_the_site():
    # sum() over a generator is traced through torch/_dynamo/polyfills: the innermost frame is
    # torch's, the site is the user's line that called it.
    c = run("sc_generator")
    (s,) = c.sites
    assert "polyfills" in s.stack[-1].file
    assert s.file.endswith("sc_generator.py") and s.function == "f"


def test_loop_break_chain_names_gb7000_but_keys_on_root():
    c = run("sc_loop")
    (site,) = c.sites
    assert site.gb_chain[0] == "GB0059" and "GB7000" in site.gb_chain
    (skipped,) = c.skipped_frames
    assert skipped.function == "f" and skipped.fail_type


def test_nested_depth_and_nested_graph_breaks_flag():
    path = str(SCENARIOS / "sc_nested3.py")
    default = run("sc_nested3")
    nested = run("sc_nested3", nested_graph_breaks=True)
    for c, events, graphs in ((default, 3, 6), (nested, 1, 2)):
        (s,) = c.sites
        assert (s.file, s.line, s.gb_id) == (path, marked_line(path, "BREAK"), "GB0025")
        assert s.events == events and c.graph_count == graphs
        assert s.nesting_depth == 3  # f -> inner2 -> inner1, whatever the reporting mode
        assert s.function == "inner1"
    assert nested.config["nested_graph_breaks"] is True


def test_sequential_child_site_is_user_forward_not_torch():
    c = run("sc_sequential")
    (s,) = c.sites
    assert s.function == "forward" and s.nesting_depth == 1
    # The stack keeps torch's frames (nn.Module dispatch), the site never is one.
    assert any("torch" in fr.file for fr in s.stack)
    assert "torch" not in os.path.relpath(s.file, SCENARIOS)


def test_batch_size_change_is_one_cause_then_dynamic():
    c = run("sc_batch_recompile")
    (cause,) = c.recompiles
    assert cause.reason == "tensor 'x' size mismatch at index 0"
    assert cause.count == 1 and cause.frames == ["f"]
    assert "expected 2, actual 3" in cause.examples[0]  # raw text kept, values stripped from the key
    assert [g.compile_id for g in c.graphs] == ["0/0", "0/1"]
    assert c.calls == 5


def test_demo_has_breaks_of_several_kinds_and_a_recompile():
    c = census_target("graphstitch.demo:demo", Options())
    import graphstitch.demo as demo
    path = demo.__file__
    lines = open(path).read().splitlines()
    sites = {(s.gb_id, s.line) for s in c.sites}
    assert sites == {
        ("GB0124", next(i for i, l in enumerate(lines, 1) if ".item()" in l and "scale" in l)),
        ("GB0170", next(i for i, l in enumerate(lines, 1) if "if h.sum() > 0" in l)),
        ("GB0291", next(i for i, l in enumerate(lines, 1) if "log.debug(" in l)),
    }
    assert all(s.file == path for s in c.sites)
    assert len(c.recompiles) == 1 and c.recompiles[0].count >= 2  # fans out to resume functions
    assert c.outputs_match_eager is True


@pytest.mark.parametrize("name", ["sc_print", "sc_item", "sc_nested3", "sc_sequential", "sc_logging"])
def test_break_events_agree_with_dynamo_counters_where_counters_are_complete(name):
    """An independent witness: for breaks that are not data-dependent and not in loops (where
    `counters` is known to be incomplete), Dynamo's own counters count the same events."""
    import torch
    from torch._dynamo.utils import counters

    from graphstitch.targets import load_factory, make_calls
    c = run(name)
    (fn, args, kwargs), = make_calls(load_factory(f"{SCENARIOS / name}.py:target"), name)
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        torch.compile(fn, backend="eager")(*args, **kwargs)
    assert sum(counters["graph_break"].values()) == c.break_events
    assert len(counters["graph_break"]) == len(c.sites)
