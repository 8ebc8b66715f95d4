"""pytest plugin (entry point ``pytest11``): fail a test whose torch.compile activity breaks
graphs, recompiles, or makes more graphs than allowed.

    @pytest.mark.graphstitch(max_breaks=0, max_recompiles=0, max_graphs=None)
    def test_model(): ...

    def test_other(graphstitch): ...      # the fixture: same check with the default limits

Nothing heavy is imported here: torch and the capture code load only for a test that uses
the marker or the fixture, so other tests pay for one marker lookup.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

DEFAULT_LIMITS = {"max_breaks": 0, "max_recompiles": 0, "max_graphs": None}
_RESULT = pytest.StashKey["Result"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "graphstitch(max_breaks=0, max_recompiles=0, max_graphs=None): fail the test when "
                   "torch.compile inside it makes more break sites, recompiles or graphs than allowed")


def _limits(item: pytest.Item) -> dict | None:
    marker = item.get_closest_marker("graphstitch")
    if marker is None and "graphstitch" not in getattr(item, "fixturenames", ()):
        return None
    limits = dict(DEFAULT_LIMITS)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.graphstitch takes keyword arguments only")
        unknown = set(marker.kwargs) - set(DEFAULT_LIMITS)
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.graphstitch: unknown argument(s) {', '.join(sorted(unknown))}")
        limits.update(marker.kwargs)
    return limits


class Result:
    """What the ``graphstitch`` fixture gives the test: ``.census`` once the test body ended."""
    census: Any = None


@pytest.fixture
def graphstitch(request: pytest.FixtureRequest) -> Result:
    """Check this test's torch.compile activity; limits come from the graphstitch marker,
    else max_breaks=0, max_recompiles=0."""
    res = request.node.stash[_RESULT] = Result()
    return res


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    limits = _limits(item)
    if limits is None:
        return (yield)
    import sys

    from . import dynamo
    from .gate import violations
    from .live import Capture
    # Made here, not in the fixture: the capture starts from the strings torch has interned
    # by now, including any interned while other fixtures were set up.
    cap = Capture(target=item.nodeid)
    cap.__enter__()          # resets Dynamo: nothing compiled by an earlier test is reused
    try:
        result = yield
    except BaseException:
        cap.__exit__(*sys.exc_info())
        raise
    else:
        cap.__exit__(None, None, None)
    finally:
        dynamo.reset()       # and nothing compiled here leaks into the next test
    if _RESULT in item.stash:
        item.stash[_RESULT].census = cap.census
    assert cap.census is not None
    msg = violations(cap.census, limits)
    if msg:
        pytest.fail(msg, pytrace=False)
    return result
