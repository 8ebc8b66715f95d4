"""Source maps and coverage: which functions Dynamo met, what it traced, what ran untraced.

The trace names code by file, line and ``co_name`` (Python 3.11 tracebacks and
``compilation_metrics`` carry no ``co_qualname``); this module reads the source to give
each function its qualified name (``TinyClassifier.forward``, ``f.<locals>.g``) and its line
span. ``analysis.py`` feeds it, per frame compile, where tracing started and stopped, and
gets back the census's :class:`~graphstitch.model.Coverage` (README "Definitions":
coverage). No torch import; a file that is not on this machine leaves names unqualified and
extents unknown.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from dataclasses import dataclass, field

from . import paths
from .model import Coverage, FunctionCoverage, LineSpan, Untraced, normalize_code


@dataclass(frozen=True)
class Def:
    name: str
    qualname: str
    start: int                # first decorator line (what co_firstlineno says), else the def line
    def_line: int
    body_start: int
    end: int


@dataclass
class Source:
    lines: list[str]
    defs: list[Def]

    def code_lines(self, start: int, end: int) -> list[int]:
        """Line numbers in [start, end] holding code (not blank, not comment-only)."""
        out = []
        for n in range(max(1, start), min(end, len(self.lines)) + 1):
            s = self.lines[n - 1].strip()
            if s and not s.startswith("#"):
                out.append(n)
        return out


def _index(tree: ast.AST) -> list[Def]:
    out: list[Def] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + child.name
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                out.append(Def(child.name, q, start, child.lineno, child.body[0].lineno,
                               child.end_lineno or child.lineno))
                walk(child, q + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)
    walk(tree, "")
    return out


@functools.lru_cache(maxsize=256)
def _load(file: str, stamp: tuple[int, int]) -> Source | None:
    from .files import parse_python, source_text
    try:
        text = source_text(file)
        tree = parse_python(text, file)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    return Source(text.split("\n"), _index(tree))


def source(file: str) -> Source | None:
    """FILE parsed (cached while its size and mtime stay), or None when it is not here."""
    try:
        st = os.stat(file)
    except (OSError, ValueError):
        return None
    return _load(file, (st.st_mtime_ns, st.st_size))


def function_at(file: str, line: int, name: str | None = None) -> Def | None:
    """The innermost function of FILE whose lines hold LINE (and is called NAME, if given)."""
    src = source(file) if file and not file.startswith("<") else None
    if src is None:
        return None
    hits = [d for d in src.defs if d.start <= line <= d.end and (name is None or d.name == name)]
    return min(hits, key=lambda d: d.end - d.start, default=None)


@functools.lru_cache(maxsize=65536)
def qualname(file: str, line: int, name: str) -> str:
    """co_qualname of the function NAME holding FILE:LINE; "" when the source says nothing.
    Memoized (every break report's stack asks); ``forget`` starts afresh for a new census."""
    if not name or name.startswith("<"):
        return ""
    d = function_at(file, line, name)
    return d.qualname if d is not None else ""


def forget() -> None:
    """Drop memoized names: a file may have been edited since the last census."""
    qualname.cache_clear()


def find_qualname(files: list[str], qual: str) -> tuple[str, Def] | None:
    """The function called QUAL (a co_qualname) in the first of FILES that defines it."""
    for f in files:
        src = source(f)
        if src is None:
            continue
        d = next((d for d in src.defs if d.qualname == qual), None)
        if d is not None:
            return f, d
    return None


def fingerprint(src: Source, lines: list[int]) -> str:
    text = "\n".join(normalize_code(src.lines[n - 1]) for n in lines)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- building

@dataclass
class FrameSpan:
    """One frame compile as coverage sees it: FILE's function NAME (the original name of a
    resume function) traced from START (its def, or the resume line) to STOP (the line where
    tracing stopped in this frame; None: it ran to the end). SKIPPED: the compile failed, so
    the rest of the frame after STOP ran eagerly, untraced."""
    compile_id: str
    file: str
    name: str
    first_line: int           # co_firstlineno (a resume function: the resume line)
    resumed_at: int | None
    stop: int | None
    skipped: bool
    reason: str = ""


@dataclass
class DisabledCall:
    """A call Dynamo did not trace into: a function under torch.compiler.disable (GB0098)."""
    qualname: str
    call_file: str
    call_line: int
    compile_id: str
    look_in: list[str] = field(default_factory=list)   # files to find its def in, best first


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _subtract(spans: list[tuple[int, int]], minus: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for a, b in spans:
        cur = [(a, b)]
        for c, d in minus:
            nxt = []
            for x, y in cur:
                if d < x or c > y:
                    nxt.append((x, y))
                    continue
                if x < c:
                    nxt.append((x, c - 1))
                if d < y:
                    nxt.append((d + 1, y))
            cur = nxt
        out += cur
    return out


def build(frames: list[FrameSpan], disabled: list[DisabledCall], root: str | None) -> Coverage:
    """Coverage from the frame compiles and the disabled calls of one run (see README)."""
    funcs: dict[tuple[str, str], FunctionCoverage] = {}
    traced: dict[tuple[str, str], list[tuple[int, int]]] = {}
    untraced: dict[tuple[str, str], list[tuple[int, int, str, str, str]]] = {}  # start, end, why, reason, cid
    unknown: list[Untraced] = []

    for fr in frames:
        if paths.is_internal(fr.file) or fr.file.startswith("<"):
            continue
        d = function_at(fr.file, fr.first_line, fr.name)
        if d is None:
            if fr.skipped:   # no source here: the frame's extent is unknown, but it did run untraced
                at = fr.stop or fr.first_line
                unknown.append(Untraced(fr.file, paths.identity_path(fr.file, root), fr.name, at + 1, None, 0,
                                        "skipped", fr.reason, "", fr.compile_id))
            continue
        key = (fr.file, d.qualname)
        fc = funcs.setdefault(key, FunctionCoverage(fr.file, d.qualname, d.start, d.end))
        fc.compile_ids.append(fr.compile_id)
        start = fr.resumed_at if fr.resumed_at is not None else d.start
        stop = fr.stop if fr.stop is not None and start <= fr.stop <= d.end else d.end
        traced.setdefault(key, []).append((start, stop))
        if fr.skipped and stop < d.end:
            untraced.setdefault(key, []).append((stop + 1, d.end, "skipped", fr.reason, fr.compile_id))

    for dc in disabled:
        found = find_qualname(dc.look_in, dc.qualname)
        if found is None:
            unknown.append(Untraced(dc.call_file, paths.identity_path(dc.call_file, root), dc.qualname, dc.call_line,
                                    None, 0, "disabled",
                                    f"{dc.qualname} (called at line {dc.call_line}) is under torch.compiler.disable; "
                                    "its source was not found", "", dc.compile_id))
            continue
        file, d = found
        key = (file, d.qualname)
        funcs.setdefault(key, FunctionCoverage(file, d.qualname, d.start, d.end)).compile_ids.append(dc.compile_id)
        untraced.setdefault(key, []).append(
            (d.body_start, d.end, "disabled",
             f"{d.qualname} is under torch.compiler.disable: called at "
             f"{os.path.basename(dc.call_file)}:{dc.call_line}, it runs eagerly and Dynamo never traces it",
             dc.compile_id))

    out = Coverage()
    for key, fc in funcs.items():
        src = source(fc.file)
        seen = _merge(traced.get(key, []))
        fc.traced = [LineSpan(a, b) for a, b in seen]
        left: list[tuple[int, int]] = []
        for a, b, why, reason, cid in sorted(untraced.get(key, [])):
            for x, y in _subtract([(a, b)], seen + left):
                lines = src.code_lines(x, y) if src else []
                if not lines:
                    continue
                x, y = lines[0], lines[-1]
                left.append((x, y))
                out.untraced.append(Untraced(fc.file, paths.identity_path(fc.file, root), fc.function, x, y,
                                             len(lines), why, reason, fingerprint(src, lines) if src else "", cid))
        fc.untraced = [LineSpan(a, b) for a, b in _merge(left)]
        out.functions.append(fc)
    out.untraced += unknown
    out.functions.sort(key=lambda f: (f.file, f.first_line))
    out.untraced.sort(key=lambda u: (u.file, u.start))
    return out
