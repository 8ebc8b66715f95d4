"""graphstitch: find, explain and eliminate torch.compile graph breaks and recompiles.

The API is loaded lazily so that reading traces (``graphstitch trace``) never imports torch.
"""

__version__ = "0.1.0"

__all__ = ["census", "census_calls", "capture", "Census", "assert_no_graph_breaks", "__version__"]


def __getattr__(name):
    if name in ("census", "census_calls", "capture"):
        from . import live as _capture
        return getattr(_capture, name)
    if name == "assert_no_graph_breaks":
        from .gate import assert_no_graph_breaks
        return assert_no_graph_breaks
    if name == "Census":
        from .analysis import Census
        return Census
    raise AttributeError(f"module 'graphstitch' has no attribute {name!r}")
