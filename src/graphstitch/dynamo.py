"""The one place graphstitch touches torch / Dynamo internals.

Everything private is reached through here, behind a feature check, so a torch upgrade
that moves something breaks one function with a clear message instead of the whole tool.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._dynamo

from .records import COLLECTIVE_NAMESPACES

TRACE_LOGGER = "torch.__trace"  # what TORCH_TRACE writes to (torch/_logging/_internal.py)


def torch_version() -> str:
    return str(torch.__version__)


def torch_dir() -> str:
    return os.path.dirname(os.path.abspath(torch.__file__))


@contextlib.contextmanager
def trace_handler(handler: logging.Handler) -> Iterator[None]:
    """Attach a handler to the structured-trace logger for the duration of the block.

    trace_structured() only builds records while the logger has handlers, so records cost
    nothing outside a capture.
    """
    log = logging.getLogger(TRACE_LOGGER)
    old_level, old_propagate = log.level, log.propagate
    log.setLevel(logging.DEBUG)
    log.propagate = False  # records are for us, not for the application's root handlers
    # pytest's log capture attaches its handlers to this logger too: during a capture they
    # would format and keep every trace payload. Set aside all but torch's own (TORCH_TRACE).
    foreign = [h for h in log.handlers if not type(h).__module__.startswith("torch.")]
    for h in foreign:
        log.removeHandler(h)
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
        for h in foreign:
            log.addHandler(h)
        log.setLevel(old_level)
        log.propagate = old_propagate


def intern_table() -> dict[int, str]:
    """Strings already interned in this process (int id -> string).

    Interning is per process: a filename interned by an earlier compile is never emitted
    again, so an in-process capture must start from the existing table.
    """
    try:
        from torch._logging.structured import INTERN_TABLE
    except ImportError:  # pragma: no cover - feature check
        return {}
    return {v: k for k, v in INTERN_TABLE.items()}


def current_compile_id() -> str | None:
    try:
        cid = torch._guards.CompileContext.current_compile_id()
    except AttributeError:  # pragma: no cover - feature check
        return None
    if cid is None:
        return None
    s = f"{cid.frame_id}/{cid.frame_compile_id}"
    if getattr(cid, "compiled_autograd_id", None) is not None:
        s = f"!{cid.compiled_autograd_id}/{s}"
    return s


def reset() -> None:
    """Forget every compile so the next capture sees Dynamo from scratch.

    reset() alone leaves `counters` and the compilation-metrics deque behind.
    """
    torch._dynamo.reset()
    with contextlib.suppress(Exception):
        torch._dynamo.utils.counters.clear()
    clear = getattr(torch._dynamo.utils, "clear_compilation_metrics", None)
    if clear is not None:
        clear()


@contextlib.contextmanager
def config(nested_graph_breaks: bool | None = None, **extra: Any) -> Iterator[None]:
    patch: dict[str, Any] = {}
    if nested_graph_breaks is not None:
        if not hasattr(torch._dynamo.config, "nested_graph_breaks"):
            raise RuntimeError("this torch has no torch._dynamo.config.nested_graph_breaks")
        patch["nested_graph_breaks"] = nested_graph_breaks
    patch.update(extra)
    with torch._dynamo.config.patch(**patch):
        yield


def lookup_backend(name: str) -> Callable:
    from torch._dynamo.backends.registry import lookup_backend as lb
    return lb(name)


def graph_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The ops of an FX graph, in order, as readable names (for op counts and collectives)."""
    ops = []
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            t = node.target
            # OpOverloadPacket has _qualified_op_name ("ns::op"); OpOverload has namespace/_opname.
            qual = getattr(t, "_qualified_op_name", None) or (
                f"{t.namespace}::{t._opname}" if hasattr(t, "namespace") and hasattr(t, "_opname") else "")
            ns, _, opname = str(qual).partition("::")
            if ns in COLLECTIVE_NAMESPACES:
                # dist.all_reduce traces to torch.ops._c10d_functional.all_reduce + wait_tensor;
                # keep the namespace so collectives cannot be mistaken for same-named ops.
                ops.append(f"{ns}.{opname}")
            else:
                ops.append(t if isinstance(t, str) else getattr(t, "__name__", None) or str(t))
    return ops



def quiet_dynamo_warnings() -> None:
    """Silence Dynamo's own graph-break warnings: the census reports each break once."""
    with contextlib.suppress(Exception):
        torch._logging.set_logs(dynamo=logging.ERROR)  # type: ignore[attr-defined]


def counts() -> dict[str, int]:
    """Dynamo's own tallies since the last reset (torch._dynamo.utils.counters): graph breaks
    and unique graphs. The census checks its records against them; {} where unavailable."""
    try:
        c = torch._dynamo.utils.counters
        return {"graph_breaks": int(sum(c["graph_break"].values())),
                "unique_graphs": int(c["stats"].get("unique_graphs", 0))}
    except Exception:  # noqa: BLE001 - a torch without these counters: nothing to check against
        return {}


def recompile_limit() -> int | None:
    """torch._dynamo.config.recompile_limit (cache_size_limit before torch 2.6)."""
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            return int(getattr(cfg, name))
    return None


# ----------------------------------------------------------------------------- fix trials

# Config values that hold functions: JSON carries them as dotted names.
_FUNCTION_SET_FLAGS = ("reorderable_logging_functions", "ignore_logging_functions")


def resolve_object(dotted: str) -> Any:
    """'builtins.print' / 'logging.Logger.debug' -> the object."""
    import importlib
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


def resolve_config(patch: dict) -> dict:
    """A JSON config patch -> torch._dynamo.config.patch kwargs (unknown flags are refused)."""
    out: dict[str, Any] = {}
    for k, v in patch.items():
        if not hasattr(torch._dynamo.config, k):
            raise RuntimeError(f"this torch has no torch._dynamo.config.{k}")
        out[k] = {resolve_object(n) for n in v} if k in _FUNCTION_SET_FLAGS else v
    return out


HATCHES = ("nonstrict_trace", "leaf_function", "custom_op", "allow_in_graph", "disable")


def hatch(how: str, fn: Callable[..., Any], fake: Callable[..., Any] | None = None, schema: str | None = None,
          name: str = "fn") -> Any:
    """Wrap ``fn`` in one of torch's escape hatches (what `graphstitch fix` tries).
    leaf_function and custom_op need FAKE (outputs' shapes from inputs)."""
    if how in ("leaf_function", "custom_op") and fake is None:
        raise ValueError(f"{how} needs a fake (register_fake)")
    if how == "nonstrict_trace":
        return torch._dynamo.nonstrict_trace(fn)
    if how == "allow_in_graph":
        return torch.compiler.allow_in_graph(fn)
    if how == "disable":
        return torch.compiler.disable(fn)
    if how == "leaf_function":
        from torch._dynamo.decorators import leaf_function
        wrapped: Any = leaf_function(fn)
        wrapped.register_fake(fake)
        return wrapped
    if how == "custom_op":
        op = torch.library.custom_op(f"graphstitch::{name}", fn, mutates_args=(), schema=schema)
        op.register_fake(fake)  # type: ignore[arg-type]
        return op
    raise ValueError(how)
