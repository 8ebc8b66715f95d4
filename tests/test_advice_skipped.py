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


def test_host_side_calls_are_advised_to_the_caller_and_a_c_extension_call_is_not():
    # Seeding, a clock and Python's random are host work: the caller does them and passes the
    # value in (fix's caller moves), never a custom op; zlib's C function keeps custom_op.
    path = SCENARIOS / "sc_host_calls.py"
    c = advise(census_target(f"{path}:target", Options(check_eager=False)))
    host = {(s.gb_id, s.line) for s in c.sites if s.line in {marked_line(path, t) for t in ("SEED", "CLOCK", "DRAW")}}
    assert host == {("GB0007", marked_line(path, t)) for t in ("SEED", "CLOCK", "DRAW")}
    for s in c.sites:
        if (s.gb_id, s.line) in host:
            assert s.advice[0].strategy == "move_out" and "in the caller" in s.advice[0].after
            assert s.next_step.command.split()[:2] == ["graphstitch", "fix"] and "--site" in s.next_step.command
            assert "custom_op" not in s.next_step.action
    ext = SCENARIOS / "sc_c_extension.py"
    [s] = advise(census_target(f"{ext}:target", Options(check_eager=False))).sites
    assert (s.gb_id, s.line) == ("GB0007", marked_line(ext, "BREAK"))
    assert s.advice[0].strategy == "custom_op" and "custom_op" in s.next_step.action
