"""Typed results <-> JSON, and the JSON Schema of each.

Output: :func:`to_json` turns any result dataclass into plain JSON data (enums as their
values, nested dataclasses as objects, the properties a class lists in ``__computed__`` as
read-only fields), in field order, so every JSON output is generated from its type.

Input: :func:`from_json` validates JSON data against a dataclass and builds it (pydantic's
TypeAdapter over our stdlib dataclasses): a baseline or a results file with a wrong type is
one clear line (:class:`JSONError`), never a TypeError deep inside a command.

:func:`schema_of` gives the JSON Schema of a type, as shipped in ``graphstitch/schemas``.
pydantic is imported only when reading JSON or making schemas. No torch import.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


class JSONError(ValueError):
    """JSON data does not match the type it should be; str() is one line."""


def to_json(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        computed = getattr(type(obj), "__computed__", ())
        for name in computed:
            out[name] = to_json(getattr(obj, name))
        for f in dataclasses.fields(obj):
            if f.name not in out:
                out[f.name] = to_json(getattr(obj, f.name))
        return out
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k.value if isinstance(k, enum.Enum) else k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


@functools.cache
def _adapter(cls: Any) -> Any:
    from pydantic import TypeAdapter
    return TypeAdapter(cls)


def from_json(cls: type[T], data: Any) -> T:
    """Build CLS from JSON data, validating every field. Computed fields are ignored."""
    from pydantic import ValidationError
    try:
        value: T = _adapter(typing.cast(Any, cls)).validate_python(data)
        return value
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "(top level)"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise JSONError(f"{where}: {err.get('msg', 'invalid')}{more}") from None


def from_trusted(cls: type[T], data: Any) -> T:
    """Build CLS from JSON data graphstitch wrote itself (job and result files between its
    own processes): no validation, so no pydantic import in every worker."""
    return typing.cast(T, _build(cls, data))


def _build(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], data) if len(inner) == 1 else data
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp) if f.init}
        return tp(**{k: _build(hints[k], v) for k, v in data.items() if k in names})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if origin is list and args:
        return [_build(args[0], v) for v in data]
    if origin is tuple and args:
        return tuple(_build(args[0], v) for v in data)
    if origin is dict and len(args) == 2:
        kt = args[0]
        return {(kt(k) if kt in (int, float) else k): _build(args[1], v) for k, v in data.items()}
    return data


def schema_of(cls: type, *, title: str | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of CLS's JSON: every object closed to unknown
    properties, computed fields included as required read-only properties."""
    schema: dict[str, Any] = _adapter(cls).json_schema(mode="serialization")
    classes = {c.__name__: c for c in _dataclasses_in(cls)}

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                c = classes.get(node.get("title", ""))
                for name in getattr(c, "__computed__", ()) if c else ():
                    ret = typing.get_type_hints(getattr(c, name).fget)["return"]
                    sub = _adapter(ret).json_schema(mode="serialization")
                    node["properties"][name] = {**sub, "readOnly": True}
                # to_json writes every field of a dataclass: all are required in outputs.
                if c is not None:
                    node["required"] = list(node["properties"])
            for v in node.values():
                close(v)
        elif isinstance(node, list):
            for v in node:
                close(v)
    close(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    if title:
        schema["title"] = title
    return schema


def _dataclasses_in(cls: Any, seen: set[Any] | None = None) -> set[Any]:
    """Every dataclass reachable from CLS's field types."""
    seen = set() if seen is None else seen
    if dataclasses.is_dataclass(cls) and isinstance(cls, type):
        if cls in seen:
            return seen
        seen.add(cls)
        for t in typing.get_type_hints(cls).values():
            _dataclasses_in(t, seen)
    for arg in typing.get_args(cls):
        _dataclasses_in(arg, seen)
    return seen
