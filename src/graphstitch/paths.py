"""Where code lives: torch, the standard library, an installed library, or the user's project.

Decided here once for every consumer: which frame is a break's site (never torch or the
standard library), which frames are "your code" (advice, owner frames, which files `fix`
may edit), and how a file is named in a site identity so that it does not depend on where a
checkout lives (project-relative, or the module path for installed code).

No torch import: traces are analysed on machines without it.
"""

from __future__ import annotations

import enum
import functools
import importlib.util
import os
import re
import sysconfig
from pathlib import Path

PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


class Where(enum.Enum):
    TORCH = "torch"        # torch's own package (also a torch checkout's torch/)
    STDLIB = "stdlib"      # the Python standard library, frozen modules
    LIBRARY = "library"    # any other installed package (site-packages / dist-packages)
    PROJECT = "project"    # under the project root
    OTHER = "other"        # user code outside the project (another folder, a notebook, <string>)


@functools.lru_cache(maxsize=1)
def torch_root() -> str | None:
    """torch's package folder, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


@functools.lru_cache(maxsize=1)
def _stdlib_root() -> str:
    return os.path.realpath(sysconfig.get_paths()["stdlib"])


_TORCH_PATH_RE = re.compile(r"(^|[\\/])(site|dist)-packages[\\/]torch[\\/]|^torch[\\/]|[\\/]pytorch[\\/]torch[\\/]")
# A path from another machine: lib/python3.X/ (not site-packages) is the standard library there.
_STDLIB_RE = re.compile(r"[\\/]lib[\\/]python3\.\d+[\\/](?!(site|dist)-packages[\\/])[^\\/]")
_PACKAGES_RE = re.compile(r"[\\/](site|dist)-packages[\\/]")


@functools.lru_cache(maxsize=16384)  # realpath per stack frame dominated trace reading
def where(path: str, root: str | None = None) -> Where:
    """Classify a file path (from this machine or from a trace written elsewhere)."""
    if not path or path.startswith("<frozen"):
        return Where.STDLIB
    troot = torch_root()
    real = os.path.realpath(path) if os.path.isabs(path) else path
    if (troot and real.startswith(troot + os.sep)) or _TORCH_PATH_RE.search(path):
        return Where.TORCH
    if _PACKAGES_RE.search(path) or _PACKAGES_RE.search(real):
        return Where.LIBRARY
    if _STDLIB_RE.search(path) or real.startswith(_stdlib_root() + os.sep):
        return Where.STDLIB
    if root and real.startswith(root.rstrip(os.sep) + os.sep):
        return Where.PROJECT
    return Where.OTHER


def is_internal(path: str) -> bool:
    """torch or the standard library: never a break's site (a `log.info()` breaks inside
    logging/__init__.py; the site is the user's call)."""
    return where(path) in (Where.TORCH, Where.STDLIB)


def is_library(path: str) -> bool:
    """Installed code the user does not edit: torch, the standard library, site-packages."""
    return where(path) in (Where.TORCH, Where.STDLIB, Where.LIBRARY)


def in_project(path: str, root: str | None) -> bool:
    return root is not None and where(os.path.realpath(path), root) is Where.PROJECT


def project_root(start: str | os.PathLike[str] | None = None) -> str:
    """The nearest folder at or above START (a file or folder; default: the working
    directory) holding a project marker (pyproject.toml, setup.py, setup.cfg, .git); the
    start folder itself when none does."""
    here = Path(os.path.realpath(start or os.getcwd()))
    if here.is_file() or not here.exists():
        here = here.parent
    for d in (here, *here.parents):
        if any((d / m).exists() for m in PROJECT_MARKERS):
            return str(d)
    return str(here)


def identity_path(path: str, root: str | None) -> str:
    """How a file is named in a site identity: relative to the project root (posix), the
    module path for installed code (``transformers/utils/import_utils.py``,
    ``logging/__init__.py``), else the path as given."""
    w = where(path, root)
    if w is Where.PROJECT and root is not None:
        return Path(os.path.relpath(os.path.realpath(path), root)).as_posix()
    if w in (Where.LIBRARY, Where.TORCH):
        m = _PACKAGES_RE.search(path)
        if m:
            return Path(path[m.end():]).as_posix()
        troot = torch_root()
        real = os.path.realpath(path) if os.path.isabs(path) else path
        if troot and real.startswith(troot + os.sep):
            return "torch/" + Path(os.path.relpath(real, troot)).as_posix()
    if w is Where.STDLIB:
        m = re.search(r"[\\/]lib[\\/]python3\.\d+[\\/]", path)
        if m:
            return Path(path[m.end():]).as_posix()
    return Path(path).as_posix()


def short_path(path: str) -> str:
    """For display: relative to the working directory when under it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def is_torch_file_path(path: str) -> bool:
    return where(path) is Where.TORCH
