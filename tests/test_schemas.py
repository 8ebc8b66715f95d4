"""The shipped JSON Schemas are the ones the code generates (they cannot drift), and they
are strict enough to catch a wrong output. Real outputs are validated where each command's
tests produce them (conftest.assert_valid)."""

import copy
import json

import jsonschema
import pytest

from conftest import assert_valid
from graphstitch.schemas import documents, generate, shipped


@pytest.mark.parametrize("name", sorted(documents()))
def test_shipped_schema_is_current(name):
    assert shipped(name) == json.loads(json.dumps(generate(name))), \
        f"schemas/{name}.schema.json is stale: run `python -m graphstitch.schemas`"


def test_schemas_reject_what_the_code_never_writes():
    import torch

    import graphstitch

    def f(x):
        print("hi")
        return x + 1
    doc = assert_valid("census", graphstitch.census(f, torch.randn(2)).to_dict())
    for broken in ({**doc, "surprise": 1},                       # unknown field
                   {k: v for k, v in doc.items() if k != "sites"},  # missing field
                   {**doc, "graph_count": "2"}):                  # wrong type
        with pytest.raises(AssertionError, match="does not match its schema"):
            assert_valid("census", broken)
    bad_site = copy.deepcopy(doc)
    bad_site["sites"][0]["id"]["occurrence"] = "first"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_site, shipped("census"), cls=jsonschema.Draft202012Validator)
