"""Targets: ``PATH.py:FACTORY`` or ``package.module:FACTORY``, and how they are compiled.

A factory returns ``(fn, args, kwargs)`` for one call or a list of such tuples. This module
loads it (importing the user's code) and says how to compile and call it (:class:`Options`);
it never imports torch itself. Where a target runs (in this process, or isolated in a
worker) is ``worker.py``'s business.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsonio import to_json
from .paths import identity_path, is_library, project_root

DEMO = "graphstitch.demo:demo"
Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


@dataclass
class Wrap:
    """A run-time escape hatch around the user function holding FILE:LINE (`fix` trials)."""
    file: str
    line: int
    function: str
    how: str                  # a dynamo.HATCHES name


@dataclass
class Patches:
    """What a `graphstitch fix` trial changes for one run, without editing the source."""
    config: dict[str, Any] = field(default_factory=dict)   # torch._dynamo.config flags (functions as dotted names)
    wrap: Wrap | None = None


@dataclass
class Options:
    """How a target is compiled and called; the same for every command that runs targets."""
    backend: str = "counting"
    nested_graph_breaks: bool = False
    dynamic: bool | None = None
    grad: bool = False
    check_eager: bool = True
    # `graphstitch fix` trials: also check a fresh random input set and side effects.
    fresh: bool = False
    patches: Patches | None = None
    # A source-rewrite trial: the ORIGINAL target whose eager outputs and printed/logged
    # output are the reference (the patched code's own eager run could share its mistake).
    reference: str | None = None
    # `census --fullgraph-semantics`: the configs fullgraph=True implies (live.FULLGRAPH_CONFIG).
    fullgraph_semantics: bool = False
    # A `fix` workspace: original file -> its patched copy, imported in its place (see
    # :func:`use_overlay`); the original code (``reference``) is loaded before it.
    overlay: dict[str, str] = field(default_factory=dict)
    # Identical passes over the calls after the first (`guards`, recompile-fix trials): a
    # recompile there is instability, not the factory's calls differing.
    repeat: int = 0

    def as_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"backend": self.backend, "nested_graph_breaks": self.nested_graph_breaks,
                               "dynamic": self.dynamic, "grad": self.grad}
        if self.fullgraph_semantics:
            cfg["semantics"] = "fullgraph"
        if self.patches:
            cfg["patches"] = to_json(self.patches)
        return cfg


class TargetError(Exception):
    """The target spec or factory is wrong (exit 2)."""


def raised(e: BaseException) -> str:
    """``TypeError at model.py:12: message``: the exception's type, the user's innermost
    frame, and the first line of its text (one line for a one-line error)."""
    if isinstance(e, SyntaxError) and e.filename:
        at = f"{e.filename}:{e.lineno}"
    else:
        frames = [fr for fr in traceback.extract_tb(e.__traceback__)
                  if not fr.filename.startswith("<frozen") and os.path.abspath(fr.filename) != _THIS]
        at = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    text = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}{f' at {at}' if at else ''}{f': {text}' if text else ''}"


_THIS = os.path.abspath(__file__)


def check_spec(spec: str) -> tuple[str, str, Path | None]:
    """What can be checked without importing the target: (module or file, factory, path)."""
    if ":" not in spec:
        raise TargetError(f"target {spec!r} must be PATH.py:FACTORY or package.module:FACTORY")
    where, _, name = spec.rpartition(":")
    if not name.isidentifier():
        raise TargetError(f"target {spec!r}: {name!r} is not a function name")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise TargetError(f"target file not found: {where}")
        return where, name, path
    return where, name, None


def target_key(spec: str, root: str | None = None) -> str:
    """A target's name independent of how its path was spelled: ``good.py:f``,
    ``./good.py:f`` and ``/abs/good.py:f`` are the same target, and a baseline made in one
    checkout matches in another (the file is named relative to its project root)."""
    where, _, name = spec.rpartition(":")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.realpath(os.path.expanduser(where))
        return f"{identity_path(path, root or project_root(path))}:{name}"
    return spec


# ------------------------------------------------------------------------- the fix overlay
# A `fix` trial runs the user's project with some files patched. The patched texts live in a
# temp folder; this finder makes every import of an original file load its patched copy
# instead, under the same module name and package path, however the project is laid out (src
# layouts, namespace packages, relative imports, a checkout on PYTHONPATH, an editable
# install). ``overlay_leaks`` then proves nothing imported an original.

_OVERLAY: dict[str, str] = {}     # realpath of an original file -> its patched copy


class _OverlayFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not _OVERLAY:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: importlib.machinery.ModuleSpec | None = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        copy = _OVERLAY.get(os.path.realpath(spec.origin)) if spec.origin and os.path.isabs(spec.origin) else None
        if copy is None:
            return spec
        return importlib.util.spec_from_file_location(fullname, copy,
                                                      submodule_search_locations=spec.submodule_search_locations)


_FINDER = _OverlayFinder()


def use_overlay(files: dict[str, str]) -> None:
    """From now on, importing an original file of FILES (original -> patched copy) loads
    the copy. Modules already imported are not touched (see :func:`forget_modules`)."""
    _OVERLAY.clear()
    _OVERLAY.update({os.path.realpath(k): v for k, v in files.items()})
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def overlay_leaks() -> list[str]:
    """Modules imported from an original file the overlay replaces (their code would run
    unpatched): must be empty for a trial to mean anything."""
    return sorted(name for name, m in list(sys.modules.items())
                  if (f := getattr(m, "__file__", None)) and os.path.realpath(f) in _OVERLAY)


def forget_modules(names: set[str], overlay: dict[str, str]) -> None:
    """Drop from sys.modules what the original target imported that a patched run must
    import again: the user's own modules, every module a patched file replaces, and, for a
    patched file inside an installed library, that whole library (its other modules hold
    the original's objects)."""
    patched = {os.path.realpath(p) for p in overlay}
    tops: set[str] = set()
    for name in names:
        f = getattr(sys.modules.get(name), "__file__", None)
        if f and os.path.realpath(f) in patched and is_library(f):
            tops.add(name.partition(".")[0])
    for name in names:
        f = getattr(sys.modules.get(name), "__file__", None)
        if f and (not is_library(f) or os.path.realpath(f) in patched or name.partition(".")[0] in tops):
            del sys.modules[name]


@contextlib.contextmanager
def modules_in_place(modules: dict[str, Any]) -> Iterator[None]:
    """While the original runs beside its patched copy, ``sys.modules`` names the original's
    modules: pickle (``torch.save(model)``) finds a class by its module's name and refuses
    one that is not the same object, and a lazy import must get the original's module."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_factory(spec: str) -> Callable[[], Any]:
    where, name, path = check_spec(spec)
    if path is not None:
        modname = path.stem
        # Dynamo re-imports the module while tracing: it must be findable in sys.modules.
        sys.path.insert(0, str(path.parent))
        # A patched target file loads from its copy (the original's folder stays on the path).
        loader_spec = importlib.util.spec_from_file_location(modname, _OVERLAY.get(str(path), path))
        if loader_spec is None or loader_spec.loader is None:
            raise TargetError(f"cannot load {where} as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[modname] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:
            raise TargetError(f"importing {where} failed: {raised(e)}") from e
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:
            raise TargetError(f"importing {where} failed: {raised(e)}") from e
    factory = getattr(module, name, None)
    if factory is None:
        raise TargetError(f"{where} has no {name!r}")
    if not callable(factory):
        raise TargetError(f"{spec}: {name!r} is not callable")
    return factory


def _one_call(item: Any, where: str) -> Call:
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise TargetError(f"{where} must be (fn, args, kwargs); got {type(item).__name__}")
    fn, args = item[0], item[1]
    kwargs = item[2] if len(item) == 3 else {}
    if not callable(fn):
        raise TargetError(f"{where}: fn is not callable ({type(fn).__name__})")
    if not isinstance(args, (tuple, list)):
        raise TargetError(f"{where}: args must be a tuple, got {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise TargetError(f"{where}: kwargs must be a dict, got {type(kwargs).__name__}")
    return fn, tuple(args), dict(kwargs)


def make_calls(factory: Callable[[], Any], spec: str) -> list[Call]:
    try:
        made = factory()
    except Exception as e:
        raise TargetError(f"{spec}: the factory raised {raised(e)}") from e
    if isinstance(made, list):
        if not made:
            raise TargetError(f"{spec}: the factory returned an empty list of calls")
        return [_one_call(c, f"{spec} call {i}") for i, c in enumerate(made)]
    return [_one_call(made, f"{spec}")]


def target_file(spec: str) -> str | None:
    """The source file of a target (PATH.py:FACTORY, or the module's file), without importing it."""
    where = spec.rpartition(":")[0]
    if where.endswith(".py") or os.sep in where or "/" in where:
        return os.path.realpath(os.path.expanduser(where))
    try:
        found = importlib.util.find_spec(where)
    except (ImportError, ValueError):
        return None
    return os.path.realpath(found.origin) if found and found.origin else None


def target_root(spec: str) -> str:
    """The project a target belongs to: the nearest folder above its file with a project
    marker (see paths.project_root); the working directory's project when unknown."""
    f = target_file(spec)
    return project_root(f) if f else project_root()
