"""Skipped-frame advice: "inside a loop" only when the break's chain holds GB7000."""

import pytest

from conftest import SCENARIOS, marked_line
from graphstitch.advice import advise
from graphstitch.live import census_target
from graphstitch.targets import Options


@pytest.mark.parametrize("name,gb,loop", [("sc_loop", "GB0059", True), ("sc_context_manager", "GB0142", False)])
def test_skipped_frame_advice_names_a_loop_only_with_gb7000(name, gb, loop):
    c = advise(census_target(f"{SCENARIOS / name}.py:target", Options(check_eager=False)))
    [s] = c.sites
    assert (s.gb_id, s.line, s.frame_skipped) == (gb, marked_line(SCENARIOS / f"{name}.py", "BREAK"), True)
    assert ("GB7000" in s.gb_chain) is loop
    first = s.advice[0].summary
    assert ("inside a loop" in first) is loop
    if not loop:
        assert "skipped the whole frame" in first
