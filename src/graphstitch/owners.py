"""Owner frames: which line of *your* code leads to each break site.

A site is its root cause, the innermost frame outside torch and the standard library; in a
model built on a library that is often the library's line (seven transformers models break
at the same ``logger.debug``). The owner frame is the first frame of the user's project met
walking up from the root cause: the line the user can change. Between them is the library
chain (``modeling_x.py:418 -> transformers/utils/import_utils.py:75``). One site may be
reached from several owners (one library line, reached from three places in your code):
each is a :class:`~graphstitch.model.Route` with its own event count.

"Your project" is ``--project DIR`` / ``[tool.graphstitch] project`` when given (anything
under it, also inside site-packages: a transformers model author's checkout), else the
project root of the target (never site-packages). With no frame in the project, the owner
is where the call entered code outside torch (the compiled function). No torch import.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from . import coverage, paths
from .model import Census, Route, Site, StackEntry


class _Frame(Protocol):
    file: str
    line: int
    function: str
    code: str


def is_mine(path: str, root: str | None, project: str | None = None) -> bool:
    """Is PATH the user's own code? Under PROJECT when given, else in the project ROOT."""
    if project:
        real = os.path.realpath(path) if os.path.isabs(path) else path
        return real == project or real.startswith(project.rstrip(os.sep) + os.sep)
    return paths.in_project(path, root)


def _route(frames: list[StackEntry], root: str | None, project: str | None) -> Route:
    mine = [i for i, fr in enumerate(frames) if is_mine(fr.file, root, project)]
    at = mine[-1] if mine else 0
    return Route(frames[at], bool(mine), frames[at + 1:], 1, frames)


def outside_torch(stack: Sequence[_Frame]) -> list[StackEntry]:
    """The frames of a traceback outside torch and the standard library, outermost first."""
    return [StackEntry(fr.file, fr.line, fr.function, fr.code, getattr(fr, "qualname", "")
                       or coverage.qualname(fr.file, fr.line, fr.function))
            for fr in stack if not paths.is_internal(fr.file)]


def add_route(site: Site, stack: Sequence[_Frame], root: str | None, project: str | None = None) -> None:
    """Count one break report of SITE, reached through STACK (its traceback)."""
    frames = outside_torch(stack)
    if not frames or (frames[-1].file, frames[-1].line) != (site.file, site.line):
        frames.append(StackEntry(site.file, site.line, site.function, site.code, site.qualname))  # the root cause itself
    _merge(site, _route(frames, root, project))


def _merge(site: Site, r: Route) -> None:
    key = (r.owner.file, r.owner.line)
    for old in site.routes:
        if (old.owner.file, old.owner.line) == key:
            old.events += r.events
            return
    site.routes.append(r)
    site.routes.sort(key=lambda x: (not x.in_project, -x.events))   # your code first


def attach(c: Census, project: str | None) -> Census:
    """Recompute every site's owner frames for PROJECT (``--project``), from the frames the
    routes kept; ``project`` None: the census' project root."""
    c.project = os.path.realpath(project) if project else None
    for s in c.sites:
        old, s.routes = s.routes, []
        for r in old:
            new = _route(r.frames, c.project_root, c.project)
            new.events = r.events
            _merge(s, new)
    return c


def chain_text(r: Route, *, short: bool = True) -> str:
    """``modeling_x.py:418 -> transformers/utils/import_utils.py:75``: the owner, then each
    library frame down to the root cause (identity paths, so any checkout reads the same)."""
    def name(fr: StackEntry) -> str:
        lib = paths.where(fr.file) is paths.Where.LIBRARY
        return f"{paths.identity_path(fr.file, None) if lib or not short else os.path.basename(fr.file)}:{fr.line}"
    return " -> ".join(name(fr) for fr in [r.owner, *r.chain])


def library_rooted(s: Site) -> bool:
    """The root cause is not the user's line (it is in a library the owner calls)."""
    r = s.owner
    return r is not None and bool(r.chain)


def group_line(s: Site) -> str | None:
    """"1 library line, reached from 3 places in your code", when it is."""
    mine = [r for r in s.routes if r.in_project]
    if library_rooted(s) and len(mine) > 1:
        return f"1 library line, reached from {len(mine)} places in your code"
    return None
