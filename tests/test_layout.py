"""The architecture holds: one-way layers (import-linter contracts in pyproject.toml), no
import cycle anywhere in the package, and torch stays out of what reads traces and renders."""

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_are_kept():
    exe = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "Contracts: 2 kept, 0 broken." in r.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_no_import_cycles():
    graph = grimp.build_graph("graphstitch", exclude_type_checking_imports=True)
    assert len(graph.modules) > 40
    assert _cycles(graph) == []
    graph.add_import(importer="graphstitch.model", imported="graphstitch.analysis")  # the check can fail
    (cycle,) = _cycles(graph)   # analysis -> (owners, costs ->) model -> analysis
    assert {"graphstitch.analysis", "graphstitch.model"} <= set(cycle)


@pytest.mark.parametrize("module", ["graphstitch.traces", "graphstitch.cli", "graphstitch.render.html",
                                    "graphstitch.render.terminal", "graphstitch.gate", "graphstitch.changes",
                                    "graphstitch.schemas", "graphstitch.sweep", "graphstitch.render.sweep"])
def test_reading_and_rendering_never_import_torch(module):
    code = f"import sys, {module}; assert 'torch' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)[:5]"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
