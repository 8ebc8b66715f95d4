"""Real transformers models built from configs: one compiles clean, one breaks in library code."""

import linecache

import pytest

from conftest import SCENARIOS
from graphstitch.live import census_target
from graphstitch.targets import Options

pytest.importorskip("transformers")
pytestmark = pytest.mark.slow


def test_bert_compiles_in_one_graph():
    c = census_target(f"{SCENARIOS}/models_hf.py:bert", Options())
    assert c.error is None, c.error
    assert c.sites == [] and c.graph_count == 1 and c.recompiles == []
    assert c.outputs_match_eager is True
    assert c.graphs[0].op_count > 20


def test_longformer_breaks_on_item_in_library_code():
    import transformers.models.longformer.modeling_longformer as ml
    c = census_target(f"{SCENARIOS}/models_hf.py:longformer", Options())
    assert c.error is None, c.error
    (site,) = c.sites
    # Attributed to transformers' own line (the innermost frame outside torch), exactly.
    assert site.gb_id == "GB0124" and site.file == ml.__file__
    assert ".item()" in linecache.getline(ml.__file__, site.line)
    assert site.function == "forward" and site.events >= 1
    assert c.graph_count >= 2 and c.outputs_match_eager is True
