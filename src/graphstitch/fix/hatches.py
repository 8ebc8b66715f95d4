"""The child side of `graphstitch fix` trials: wrap the user's function in an escape hatch
before the target is compiled (run inside the trial's worker, with torch).

``install`` is the job's ``setup`` hook (see ``worker.Job.setup``).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from ..files import line_map, source_text
from ..paths import is_torch_file_path
from ..targets import Call, Options, Wrap


def install(calls: list[Call], options: Options) -> dict[str, Any]:
    """Install the trial's wrapper; returns the config note (which function was wrapped)."""
    assert options.patches is not None and options.patches.wrap is not None
    wrap = options.patches.wrap
    copy = options.overlay.get(os.path.realpath(wrap.file))
    if copy is not None:
        # The file is patched in this trial (a baseline's own hatch): its module was loaded
        # from the copy, where the wrapped line may have moved.
        back = line_map(source_text(wrap.file), source_text(copy))
        line = next((new for new, old in back.items() if old == wrap.line), wrap.line)
        wrap = dataclasses.replace(wrap, file=copy, line=line)
    return {"wrapped": install_wrapper(wrap, calls)}


def _find_function(file: str, function: str, line: int) -> tuple[Any, str, str, Callable[..., Any]]:
    """(owner object, attribute name, module:qualname, the object to wrap) of the user function
    whose code holds ``file:line``: a module global or a method of a class of the module (nested
    classes too). A decorated function is found through ``__wrapped__`` and wrapped as it is
    decorated (the hatch goes around the decorator: the decorator keeps its meaning)."""
    real = os.path.realpath(file)
    mod = next((m for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and os.path.realpath(str(m.__file__)) == real), None)
    if mod is None:
        raise LookupError(f"no loaded module for {file}")

    def holds(obj: Any) -> bool:
        fn = inspect.unwrap(obj) if callable(obj) else obj
        code = getattr(fn, "__code__", None)
        if code is None or code.co_name != function or os.path.realpath(code.co_filename) != real:
            return False
        lines = [ln for _, _, ln in code.co_lines() if ln is not None]
        return code.co_firstlineno <= line <= max(lines or [code.co_firstlineno])

    for name, obj in list(vars(mod).items()):
        if holds(obj):
            return mod, name, f"{mod.__name__}:{name}", obj
    classes = [obj for obj in vars(mod).values() if isinstance(obj, type) and getattr(obj, "__module__", None) == mod.__name__]
    while classes:
        cls = classes.pop()
        for attr, raw in list(vars(cls).items()):
            if isinstance(raw, type) and raw.__module__ == mod.__name__:
                classes.append(raw)
                continue
            fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            if holds(fn):
                if isinstance(raw, classmethod):
                    raise LookupError(f"{cls.__name__}.{attr} is a classmethod; not wrapped")
                return cls, attr, f"{mod.__name__}:{cls.__qualname__}.{attr}", raw
    raise LookupError(f"{function}() at {file}:{line} is not a module-level function or method "
                      "(a nested function or a lambda: an extract into a module-level helper is the way)")


def _flat(x: Any) -> list[Any] | None:
    if _is_tensor(x):
        return [x]
    if isinstance(x, (tuple, list)) and all(_is_tensor(v) for v in x):
        return list(x)
    return None


def _is_tensor(x: Any) -> bool:
    import torch
    return isinstance(x, torch.Tensor)


def _derive_fake(fn: Callable[..., Any], calls: list[Call], owner: Any, attr: str, *,
                 modules: bool = False) -> tuple[Callable[..., Any], str]:
    """Run the calls eagerly once, recording ``fn``'s inputs and outputs, and derive a fake
    (shape function) and an op schema from them. Each output must have the shape of one
    tensor argument in every recorded call, or one fixed shape."""
    import torch
    seen: list[tuple[tuple[Any, ...], Any]] = []

    def recorder(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        seen.append((args, out))
        return out
    setattr(owner, attr, recorder)
    try:
        with torch.no_grad():
            for f, a, k in calls:
                torch.manual_seed(0)
                f(*a, **k)
    finally:
        setattr(owner, attr, fn)
    if not seen:
        raise LookupError("the function was never called eagerly; no fake can be derived")
    import torch.nn
    kinds = {type(a).__name__ for args, _ in seen for a in args if not (modules and isinstance(a, torch.nn.Module))}
    if not kinds <= {"Tensor", "Parameter", "int", "float", "bool"}:
        raise TypeError(f"arguments of type {sorted(kinds)} cannot cross an opaque op"
                        + ("" if modules else " (a custom op takes tensors and numbers)"))
    flat = [_flat(o) for _, o in seen]
    outs = [o for o in flat if o is not None]
    if len(outs) != len(flat) or len({len(o) for o in outs}) != 1:
        raise TypeError("outputs are not a tensor or a fixed-length tuple of tensors")
    rules: list[tuple[str, Any, Any]] = []
    for j in range(len(outs[0])):
        dtype = outs[0][j].dtype
        src = next((i for i in range(len(seen[0][0]))
                    if all(_is_tensor(args[i]) and args[i].shape == o[j].shape for (args, _), o in zip(seen, outs))), None)
        if src is not None:
            rules.append(("like", src, dtype))
        elif len({tuple(o[j].shape) for o in outs}) == 1:
            rules.append(("fixed", tuple(outs[0][j].shape), dtype))
        else:
            raise TypeError("output shapes follow no input; no fake can be derived from the eager run")
    single = _is_tensor(seen[0][1])
    as_tuple = isinstance(seen[0][1], tuple)

    def fake(*args: Any, **kwargs: Any) -> Any:
        res = [args[r[1]].new_empty(args[r[1]].shape, dtype=r[2]) if r[0] == "like"
               else torch.empty(r[1], dtype=r[2]) for r in rules]
        return res[0] if single else (tuple(res) if as_tuple else res)
    types = {"Tensor": "Tensor", "Parameter": "Tensor", "int": "SymInt", "float": "float", "bool": "bool"}
    params = ", ".join(f"{types.get(type(a).__name__, 'Any')} a{i}" for i, a in enumerate(seen[0][0]))
    ret = "Tensor" if single else ("(" + ", ".join("Tensor" for _ in rules) + ")" if as_tuple else "Tensor[]")
    return fake, f"({params}) -> {ret}"


def install_wrapper(wrap: Wrap, calls: list[Call]) -> str:
    """Replace the user function at ``wrap.file:wrap.line`` by an escape hatch around it
    (in its owner and wherever another module imported it). Returns module:qualname."""
    from .. import dynamo
    owner, attr, qualname, found = _find_function(wrap.file, wrap.function, int(wrap.line))
    static = isinstance(found, staticmethod)
    fn: Callable[..., Any] = found.__func__ if isinstance(found, staticmethod) else found
    how = wrap.how
    fake = schema = None
    if how in ("leaf_function", "custom_op"):
        # leaf_function takes a module argument (its parameters are tracked); a custom op not
        fake, schema = _derive_fake(fn, calls, owner, attr, modules=how == "leaf_function")
    name = re.sub(r"\W", "_", qualname)
    new = dynamo.hatch(how, fn, fake=fake, schema=schema, name=name)
    setattr(owner, attr, staticmethod(new) if static else new)
    if isinstance(owner, type(sys)):
        for m in list(sys.modules.values()):
            d = getattr(m, "__dict__", None)
            if d and not is_torch_file_path(getattr(m, "__file__", None) or "torch/"):
                for k, v in list(d.items()):
                    if v is fn:
                        d[k] = new
    return qualname
