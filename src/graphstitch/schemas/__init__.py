"""The JSON Schema of every JSON document graphstitch writes, shipped beside this file.

Each schema is generated from the document's dataclass (``jsonio.schema_of``), so the files
cannot drift from the code: ``python -m graphstitch.schemas`` rewrites them, and the tests
check that the shipped files are current and that real outputs validate against them.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from typing import Any


def documents() -> dict[str, type]:
    """Document name -> its type (the top-level object of that JSON file)."""
    from ..fix import FixReport
    from ..fix.fixall import FixAll
    from ..fix.sweep import SweepFixes
    from ..gate import Baseline, CheckReport
    from ..guards import GuardReport
    from ..model import Census
    from ..perf import PerfResult
    from ..ranks import RanksReport, TraceReport
    from ..sweep import Row, SweepReport
    return {"census": Census, "fix": FixReport, "fixall": FixAll, "perf": PerfResult, "ranks": RanksReport,
            "trace": TraceReport, "guards": GuardReport, "baseline": Baseline, "check": CheckReport,
            "sweep": SweepReport, "sweep_row": Row, "sweep_fixes": SweepFixes}


def generate(name: str) -> dict[str, Any]:
    from ..jsonio import schema_of
    return schema_of(documents()[name], title=f"graphstitch {name}")


def text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def shipped(name: str) -> dict[str, Any]:
    """The schema file shipped in the package."""
    data: dict[str, Any] = json.loads(resources.files(__name__).joinpath(f"{name}.schema.json").read_text("utf-8"))
    return data


def main() -> int:
    from pathlib import Path
    here = Path(__file__).parent
    for name in documents():
        (here / f"{name}.schema.json").write_text(text(generate(name)), encoding="utf-8")
        print(f"wrote {here / f'{name}.schema.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
