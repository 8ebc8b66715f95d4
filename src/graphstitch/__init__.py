"""graphstitch: find, explain and eliminate torch.compile graph breaks and recompiles.

The public API. It is loaded lazily, so that reading traces (``graphstitch trace``) never
imports torch; type checkers see the real imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from .changes import CensusDiff, diff
    from .gate import assert_no_graph_breaks
    from .live import Capture, capture, census, census_calls
    from .model import Census, ErrorInfo, ErrorKind, FrameId, Site, SiteId
    from .traces import census_from_trace, censuses_from_path

__all__ = ["Capture", "Census", "CensusDiff", "ErrorInfo", "ErrorKind", "FrameId", "Site", "SiteId", "__version__",
           "assert_no_graph_breaks", "capture", "census", "census_calls", "census_from_trace", "censuses_from_path",
           "diff"]

_WHERE = {
    "Capture": "live", "capture": "live", "census": "live", "census_calls": "live",
    "CensusDiff": "changes", "diff": "changes", "assert_no_graph_breaks": "gate",
    "Census": "model", "ErrorInfo": "model", "ErrorKind": "model", "FrameId": "model", "Site": "model",
    "SiteId": "model", "census_from_trace": "traces", "censuses_from_path": "traces",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'graphstitch' has no attribute {name!r}")
