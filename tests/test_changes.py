"""One site identity and one census diff, on real censuses: an edit above a site does not
move it, the same text breaking twice is two sites, and changes are named exactly."""

import textwrap

from graphstitch.changes import diff
from graphstitch.live import census_target
from graphstitch.model import SiteId
from graphstitch.targets import Options

SRC = """
import torch

def f(x):
    x = x + 1
    print("a")  # FIRST
    x = x * 2
    print("a")  # SECOND
    return x

def target():
    return f, (torch.ones(2),), {}
"""


def _census(tmp_path, src, name="m"):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(src))
    return census_target(f"{tmp_path}/{name}.py:target", Options(), project_root=str(tmp_path))


def test_identity_survives_line_shifts_and_numbers_repeated_text(tmp_path):
    before = _census(tmp_path, SRC)
    assert [s.id for s in sorted(before.sites, key=lambda s: s.line)] == [
        SiteId("GB0059", "m.py", "f", 'print("a") # FIRST'), SiteId("GB0059", "m.py", "f", 'print("a") # SECOND')]
    shifted = _census(tmp_path, SRC.replace("import torch\n", "import torch\n\n\n# a comment\n"))
    assert {s.line for s in shifted.sites} == {s.line + 3 for s in before.sites}
    d = diff(before, shifted)
    assert d.same and not d.regressions


def test_same_text_twice_gets_occurrences(tmp_path):
    c = _census(tmp_path, SRC.replace("  # FIRST", "").replace("  # SECOND", ""))
    ids = sorted(s.id for s in c.sites)
    assert [(i.code, i.occurrence) for i in ids] == [('print("a")', 1), ('print("a")', 2)]
    assert len(set(ids)) == 2


def test_new_gone_and_changed_are_named(tmp_path):
    before = _census(tmp_path, SRC)
    after = _census(tmp_path, SRC.replace('    print("a")  # SECOND\n', "    torch._dynamo.graph_break()  # NEW\n"))
    d = diff(before, after)
    assert [s.id.code for s in d.new_sites] == ["torch._dynamo.graph_break() # NEW"]
    assert [s.id.code for s in d.gone_sites] == ['print("a") # SECOND']
    assert d.graphs.before == d.graphs.after == 2 and d.regressions
    # Matched without GB ids (another torch), the renamed break is still new: the text differs.
    assert [s.gb_id for s in diff(before, after, match_gb=False).new_sites] == ["GB0025"]
