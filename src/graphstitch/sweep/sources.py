"""SOURCE arguments -> the sweep's targets, without importing torch or the user's code.

A SOURCE is one of:

- a registry (``transformers``, ``diffusers``, ``torch_geometric``): its models (graphstitch.zoo);
- a zoo model ``registry/Name`` (optionally ``@mode``);
- a TARGET ``PATH.py:FACTORY`` or ``package.module:FACTORY``;
- a Python file or ``package.module``: every factory in it (a public top-level function
  that takes no required argument, found by reading the source, so nothing runs in the
  parent), or the names in its ``__all__`` when it has one;
- a directory: every such file in it (recursively, ``_*`` and ``test_*`` files excluded);
- a ``.toml`` file: ``targets = [SOURCE, ...]`` (strings), and/or ``[[target]]`` tables with
  ``source`` (any SOURCE) and optional ``modes = ["eval", "train"]``.

Each source is expanded once per ``--mode``; ``--only`` / ``--exclude`` globs match the
target's id, its name and ``source/name``.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import importlib.util
import os
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import zoo
from ..files import parse_python
from ..targets import TargetError, check_spec, target_key, target_root
from .rows import Target


class SourceError(ValueError):
    """A SOURCE that names nothing usable (exit 2); str() is one line."""


def _user_target(spec: str, mode: str) -> Target:
    try:
        check_spec(spec)
    except TargetError as e:
        raise SourceError(str(e)) from None
    root = target_root(spec)
    key = target_key(spec, root)
    return Target(id=f"{key}@{mode}", source="user", name=spec.rpartition(":")[2], mode=mode,
                  spec=spec, project_root=root)


def factories_in(path: Path) -> list[str]:
    """The factory names of a Python file, read from its source (nothing is imported)."""
    try:
        tree = parse_python(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError) as e:
        raise SourceError(f"cannot read {path}: {type(e).__name__}: {e}") from None
    funcs: dict[str, ast.FunctionDef] = {}
    exported: list[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            funcs[node.name] = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                exported = [str(x) for x in ast.literal_eval(node.value)]
            except ValueError:
                exported = None
    if exported is not None:
        return [n for n in exported if n in funcs]

    def no_required(f: ast.FunctionDef) -> bool:
        a = f.args
        return len(a.posonlyargs) + len(a.args) == len(a.defaults) and all(d is not None for d in a.kw_defaults)
    return [n for n, f in funcs.items() if not n.startswith("_") and no_required(f)]


def _module_file(name: str) -> Path | None:
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return Path(found.origin) if found and found.origin and found.origin.endswith(".py") else None


def _toml_sources(path: Path, modes: Sequence[str]) -> list[tuple[str, Sequence[str]]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SourceError(f"cannot read {path}: {e}") from None
    out: list[tuple[str, Sequence[str]]] = []
    items = data.get("targets", [])
    tables = data.get("target", [])
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items) or not isinstance(tables, list):
        raise SourceError(f"{path}: 'targets' must be a list of strings and [[target]] tables")
    base = path.parent
    # Paths in the list are relative to the list's folder (when something is there).
    rel = lambda s: str(base / s) if not os.path.isabs(s) and (base / s.split(":")[0]).exists() else s
    out += [(rel(s), modes) for s in items]
    for t in tables:
        if not isinstance(t, dict) or not isinstance(t.get("source"), str):
            raise SourceError(f"{path}: each [[target]] needs source = \"...\"")
        m = t.get("modes", modes)
        if not isinstance(m, list) or not all(x in zoo.MODES for x in m):
            raise SourceError(f"{path}: modes must be a list of {', '.join(zoo.MODES)}")
        out.append((rel(t["source"]), m))
    if not out:
        raise SourceError(f"{path}: no targets (write targets = [\"file.py:factory\", ...])")
    return out


def _expand(source: str, modes: Sequence[str]) -> list[Target]:
    if source in zoo.REGISTRIES:
        return [Target(e.id, e.registry, e.name, e.mode, zoo=f"{e.registry}/{e.name}")
                for e in zoo.list_models(source, modes=modes)]
    head = source.split("/", 1)[0]
    if head in zoo.REGISTRIES and ":" not in source and not os.path.exists(source):
        name, _, mode = source.split("/", 1)[1].partition("@")
        if name not in zoo.list_names(head):
            raise SourceError(f"{head} has no model {name!r}")
        return [Target(f"{head}/{name}@{m}", head, name, m, zoo=f"{head}/{name}") for m in ([mode] if mode else modes)]
    if ":" in source and not source.endswith(".toml"):
        return [_user_target(source, m) for m in modes]
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.py")
                       if not p.name.startswith(("_", "test_")) and not any(x.startswith(".") for x in p.parts))
        return [t for f in files for t in _expand(str(f), modes)]
    if path.suffix == ".toml" and path.is_file():
        return [t for s, m in _toml_sources(path, modes) for t in _expand(s, m)]
    if path.suffix == ".py":
        if not path.is_file():
            raise SourceError(f"source file not found: {source}")
        return [_user_target(f"{source}:{n}", m) for n in factories_in(path) for m in modes]
    mod = _module_file(source) if source.replace(".", "").replace("_", "").isalnum() else None
    if mod is not None:
        return [_user_target(f"{source}:{n}", m) for n in factories_in(mod) for m in modes]
    raise SourceError(f"unknown source {source!r}: not a registry ({', '.join(zoo.REGISTRIES)}), zoo model, "
                      "TARGET, Python file or module, directory or .toml list")


def _matches(t: Target, patterns: Iterable[str]) -> bool:
    keys = (t.id, t.name, f"{t.source}/{t.name}")
    return any(fnmatch.fnmatchcase(k, p) for p in patterns for k in keys)


def shard_of(target_id: str, n: int) -> int:
    """A stable shard (1..n) for a target id: the same on every machine and Python."""
    return int.from_bytes(hashlib.sha256(target_id.encode()).digest()[:8], "big") % n + 1


def resolve(sources: Sequence[str], *, only: Sequence[str] = (), exclude: Sequence[str] = (),
            modes: Sequence[str] = ("eval",), shard: tuple[int, int] | None = None) -> list[Target]:
    """Every target the sources name (first occurrence wins), filtered, in a stable order."""
    for m in modes:
        if m not in zoo.MODES:
            raise SourceError(f"unknown mode {m!r}; known: {', '.join(zoo.MODES)}")
    out: dict[str, Target] = {}
    for s in sources:
        for t in _expand(s, modes):
            out.setdefault(t.id, t)
    targets = [t for t in out.values()
               if (not only or _matches(t, only)) and not (exclude and _matches(t, exclude))]
    if shard is not None:
        k, n = shard
        targets = [t for t in targets if shard_of(t.id, n) == k]
    return targets


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N) -> (K, N)."""
    k, sep, n = text.partition("/")
    try:
        ki, ni = int(k), int(n)
    except ValueError:
        ki = ni = 0
    if not sep or ni < 1 or not 1 <= ki <= ni:
        raise SourceError(f"--shard {text!r}: expected K/N with 1 <= K <= N (e.g. 2/4)")
    return ki, ni
