import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = Path(__file__).resolve().parent / "scenarios"

# Inductor's cache and the target subprocesses' temp files stay inside the test's temp dirs.
_tmp = tempfile.mkdtemp(prefix="graphstitch-tests-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_tmp, "inductor"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

if str(SCENARIOS) not in sys.path:
    sys.path.insert(0, str(SCENARIOS))


def marked_line(path: Path, tag: str) -> int:
    """Line number of the line carrying ``# <tag>`` in a scenario file (no hard-coded lines)."""
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# {tag}"):
            return i
    raise AssertionError(f"no line tagged '# {tag}' in {path}")


@pytest.fixture
def scenario_path():
    return lambda name: SCENARIOS / f"{name}.py"


def census_subprocess(spec, opts=None, *, timeout=None, pythonpath=()):
    """A target's census in a fresh worker (graphstitch's own isolated runner): (census, exit code)."""
    from graphstitch.worker import run_target
    out = run_target(str(spec), opts, timeout=timeout, pythonpath=pythonpath)
    return out.census, out.exit_code


def assert_valid(document: str, data):
    """DATA (a JSON output) validates against graphstitch's shipped schema for DOCUMENT."""
    import jsonschema

    from graphstitch.schemas import shipped
    errors = sorted(jsonschema.Draft202012Validator(shipped(document)).iter_errors(data), key=str)
    assert not errors, f"{document} JSON does not match its schema: " + "; ".join(
        f"{e.json_path}: {e.message[:200]}" for e in errors[:5])
    return data
