"""Renderers: every output a person or a CI system reads, from typed results only.

``terminal`` (rich), ``html`` (one self-contained page), ``sarif`` (code scanning),
``markdown`` (PR comments, $GITHUB_STEP_SUMMARY), ``svg`` (perf charts), and JSON (here:
``jsonio.to_json`` of the result, written atomically).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..files import atomic_write
from ..jsonio import to_json


def write_json(result: Any, path: str | os.PathLike[str]) -> None:
    """A typed result (or a dict of them) as indented JSON."""
    atomic_write(path, json.dumps(to_json(result), indent=2) + "\n")
