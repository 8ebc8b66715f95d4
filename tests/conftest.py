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
