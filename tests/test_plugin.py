"""The pytest plugin, run through pytester: passing and failing tests, the failure text,
the fixture, the assert helper, xdist, and no torch import for tests that don't use it."""
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent


def _plugin_args() -> list[str]:
    # Once the package is installed with its pytest11 entry point the plugin loads itself;
    # before that (a source checkout on PYTHONPATH) load it by name.
    autoloaded = any(ep.name == "graphstitch" for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if autoloaded else ["-p", "graphstitch.plugin"]


TESTS = '''
import pytest
import torch


def clean(x):
    return x.sin() + 1


def breaks(x):
    y = x * 2
    print("side effect")  # PRINT
    return y + 1


@pytest.mark.graphstitch(max_breaks=0, max_recompiles=0)
def test_clean():
    torch.compile(clean, backend="eager")(torch.randn(3))


@pytest.mark.graphstitch(max_breaks=0)
def test_breaks():
    torch.compile(breaks, backend="eager")(torch.randn(3))


@pytest.mark.graphstitch(max_breaks=1)
def test_breaks_within_budget():
    torch.compile(breaks, backend="eager")(torch.randn(3))


def test_fixture_recompiles(graphstitch):
    f = torch.compile(clean, backend="eager", dynamic=False)
    f(torch.randn(3))
    f(torch.randn(5))


@pytest.mark.graphstitch(max_graphs=1, max_breaks=5)
def test_too_many_graphs():
    torch.compile(breaks, backend="eager")(torch.randn(3))


def test_unmarked_not_checked():
    torch.compile(breaks, backend="eager")(torch.randn(3))
'''


def run(pytester, *args):
    # A subprocess each: pytester's in-process runs drop the modules they imported, and
    # torch cannot be imported twice in one process.
    return pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "-ra", *args)


def _line(src: str, tag: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if line.rstrip().endswith(f"# {tag}"))


def test_marker_and_fixture_pass_and_fail(pytester):
    pytester.makepyfile(test_compiled=TESTS)
    res = run(pytester)
    res.assert_outcomes(passed=3, failed=3)
    out = res.stdout.str()
    assert "torch.__trace" not in out      # trace records never reach pytest's log capture
    line = _line((pytester.path / "test_compiled.py").read_text(), "PRINT")
    # The failing test names the site: file:line, GB id, first hint.
    assert "limits exceeded: break sites: 1 over budget 0" in out
    assert f"test_compiled.py:{line} GB0059" in out
    assert "hint:" in out
    assert "recompiles: 1 over budget 0" in out
    assert "recompile (1x in clean): tensor 'x' size mismatch at index 0" in out
    assert "graphs: 2 over budget 1" in out
    failed = set(re.findall(r"^FAILED test_compiled.py::(\w+)", out, re.M))
    assert failed == {"test_breaks", "test_fixture_recompiles", "test_too_many_graphs"}


def test_no_state_leaks_between_tests(pytester):
    # The same function compiled in two tests: the second test sees its own compile (reset
    # on entry) and the first leaves nothing behind (reset on exit).
    pytester.makepyfile(test_leak='''
import pytest, torch, torch._dynamo

def f(x):
    return x.cos() * 2

@pytest.mark.graphstitch(max_graphs=1)
def test_a(graphstitch):
    torch.compile(f, backend="eager")(torch.randn(3))

def test_between():
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    assert _debug_get_cache_entry_list(f) == []

@pytest.mark.graphstitch(max_graphs=1)
def test_b():
    torch.compile(f, backend="eager")(torch.randn(4))
''')
    res = run(pytester)
    res.assert_outcomes(passed=3)


def test_marker_bad_arguments_are_usage_errors(pytester):
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.graphstitch(max_brakes=0)
def test_x():
    pass
''')
    res = run(pytester)
    assert "unknown argument(s) max_brakes" in res.stdout.str() + res.stderr.str()
    assert res.ret != 0


@pytest.mark.slow
def test_xdist(pytester):
    pytester.makepyfile(test_compiled=TESTS)
    res = run(pytester, "-n", "2")
    res.assert_outcomes(passed=3, failed=3)
    line = _line((pytester.path / "test_compiled.py").read_text(), "PRINT")
    assert f"test_compiled.py:{line} GB0059" in res.stdout.str()


def test_no_torch_import_when_unused(pytester):
    pytester.makepyfile(test_plain='''
import sys

def test_plain():
    assert 1 + 1 == 2

def test_last():
    # the plugin is loaded (its marker is registered) but imported nothing heavy
    assert "torch" not in sys.modules and "graphstitch.live" not in sys.modules
    assert "graphstitch.plugin" in sys.modules
''')
    res = run(pytester, "-p", "no:randomly")
    res.assert_outcomes(passed=2)


def test_assert_no_graph_breaks():
    import torch

    import graphstitch

    def clean(x):
        return x.sin()

    def breaks(x):
        x = x + 1
        torch._dynamo.graph_break()  # GRAPH_BREAK
        return x * 2

    assert graphstitch.assert_no_graph_breaks(clean, torch.randn(3)).graph_count == 1
    with pytest.raises(AssertionError) as e:
        graphstitch.assert_no_graph_breaks(breaks, torch.randn(3))
    line = _line(Path(__file__).read_text(), "GRAPH_BREAK")
    assert f"tests/test_plugin.py:{line} GB0025" in str(e.value).replace("\\", "/") or \
        f"test_plugin.py:{line} GB0025" in str(e.value)


def test_entry_point_declared():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["entry-points"]["pytest11"] == {"graphstitch": "graphstitch.plugin"}
