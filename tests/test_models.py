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


def test_library_rooted_site_names_the_owner_frame_in_the_model_file():
    """GPT-2 asked for attentions breaks inside transformers' output capturing; the owner
    frame is the user's line in the model file that called it, with the library chain."""
    import os

    from conftest import marked_line
    from graphstitch.owners import chain_text
    c = census_target(f"{SCENARIOS}/models_hf.py:captioner", Options(check_eager=False),
                      project_root=str(SCENARIOS.parent.parent))
    assert c.error is None, c.error
    lib = [s for s in c.sites if "transformers" in s.file and "site-packages" in s.file]
    assert lib, [s.id for s in c.sites]
    owned = [s for s in lib if s.owner is not None and s.owner.in_project]
    assert owned, [(s.id, s.routes) for s in lib]
    for s in owned:
        r = s.owner
        assert r.owner.file == str(SCENARIOS / "models_hf.py")
        assert r.owner.line == marked_line(SCENARIOS / "models_hf.py", "OWNER_GPT2")
        assert (r.chain[-1].file, r.chain[-1].line) == (s.file, s.line)   # the chain ends at the root cause
        assert all("site-packages" in fr.file for fr in r.chain)
        text = chain_text(r)
        assert text.startswith(f"models_hf.py:{r.owner.line} -> transformers/") and os.path.basename(s.file) in text
