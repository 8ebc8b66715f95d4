"""Events -> Census: the one data model every output reads.

The README's "Definitions" section is the contract implemented here; renderers never
re-derive counts. This module must not import torch (trace analysis runs without it).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Iterable

from . import __version__
from .records import (COLLECTIVE_NAMESPACES, BackendGraph, BreakReport, FrameMetrics, FrameStart,
                      Guards, OutputGraph, RecompileReasons, RunInfo, StackFrame)

SCHEMA_VERSION = 1
LOOP_GB = "GB7000"  # "graph break in loop": Dynamo skips the whole frame


# ----------------------------------------------------------------------------- model

@dataclass
class Graph:
    compile_id: str
    file: str
    line: int
    function: str
    op_count: int | None
    ops: list[str] = field(default_factory=list)
    collectives: list[str] = field(default_factory=list)  # collective ops in order (ops is live-only)


@dataclass
class Site:
    gb_id: str
    gb_type: str
    explanation: str
    hints: list[str]
    file: str
    line: int
    function: str
    code: str                 # the user's source line, as the traceback showed it
    events: int
    nesting_depth: int
    frame_skipped: bool
    stack: list[dict]         # full user-code traceback of the first report, outermost first
    compile_ids: list[str]
    gb_chain: list[str]       # every GB id in the first report, root first
    advice: list[dict] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.gb_id, self.file, self.line)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class RecompileCause:
    reason: str               # normalized guard failure, values stripped
    count: int                # recompiles it caused, across frames and resume functions
    frames: list[str]         # functions that recompiled for it
    compile_ids: list[str]
    examples: list[str]       # raw reasons as Dynamo wrote them (first few)


@dataclass
class SkippedFrame:
    compile_id: str
    file: str
    line: int
    function: str
    fail_type: str
    reason: str


@dataclass
class FrameCompile:
    compile_id: str
    file: str
    line: int
    function: str
    compile_seconds: float
    guard_count: int | None
    graph: bool
    fail_type: str | None


@dataclass
class Census:
    target: str | None = None
    torch_version: str | None = None
    config: dict = field(default_factory=dict)
    graphs: list[Graph] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    recompiles: list[RecompileCause] = field(default_factory=list)
    skipped_frames: list[SkippedFrame] = field(default_factory=list)
    frames: list[FrameCompile] = field(default_factory=list)
    guards: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    outputs_match_eager: bool | None = None
    output_mismatch: str | None = None
    error: dict | None = None
    trace_stats: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)   # fix trials: fresh-input outputs, side effects
    fixes: list[dict] = field(default_factory=list)   # `graphstitch fix` results, per site

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_events(self) -> int:
        return sum(s.events for s in self.sites)

    @property
    def recompile_count(self) -> int:
        return sum(c.count for c in self.recompiles)

    @property
    def compile_seconds(self) -> float:
        return round(sum(f.compile_seconds for f in self.frames), 6)

    def to_dict(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "graphstitch_version": __version__,
            "torch_version": self.torch_version,
            "target": self.target,
            "config": self.config,
            "calls": self.calls,
            "graph_count": self.graph_count,
            "break_site_count": len(self.sites),
            "break_events": self.break_events,
            "recompile_count": self.recompile_count,
            "compile_seconds": self.compile_seconds,
            "outputs_match_eager": self.outputs_match_eager,
            "output_mismatch": self.output_mismatch,
            "error": self.error,
            "graphs": [asdict(g) for g in self.graphs],
            "sites": [asdict(s) for s in self.sites],
            "recompiles": [asdict(r) for r in self.recompiles],
            "skipped_frames": [asdict(s) for s in self.skipped_frames],
            "frames": [asdict(f) for f in self.frames],
            "trace_stats": self.trace_stats,
            "checks": self.checks,
            "fixes": self.fixes,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Census":
        return cls(
            target=d.get("target"), torch_version=d.get("torch_version"), config=d.get("config") or {},
            graphs=[Graph(**g) for g in d.get("graphs", [])],
            sites=[Site(**s) for s in d.get("sites", [])],
            recompiles=[RecompileCause(**r) for r in d.get("recompiles", [])],
            skipped_frames=[SkippedFrame(**s) for s in d.get("skipped_frames", [])],
            frames=[FrameCompile(**f) for f in d.get("frames", [])],
            calls=d.get("calls", 0), outputs_match_eager=d.get("outputs_match_eager"),
            output_mismatch=d.get("output_mismatch"), error=d.get("error"),
            trace_stats=d.get("trace_stats") or {},
            checks=d.get("checks") or {}, fixes=list(d.get("fixes") or []),
        )


# ----------------------------------------------------------------------------- GB registry

@functools.lru_cache(maxsize=1)
def _torch_root() -> str | None:
    # find_spec does not import torch: trace analysis must not pay for it.
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


@functools.lru_cache(maxsize=1)
def gb_registry() -> dict[str, dict]:
    """The installed torch's graph_break_registry.json (GB id -> first entry); {} without torch."""
    root = _torch_root()
    if root is None:
        return {}
    try:
        with open(os.path.join(root, "_dynamo", "graph_break_registry.json"), encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: v[0] for k, v in raw.items() if isinstance(v, list) and v and isinstance(v[0], dict)}


@functools.lru_cache(maxsize=1)
def _gb_by_type() -> dict[str, str]:
    out: dict[str, str] = {}
    for gid, entry in sorted(gb_registry().items()):
        out.setdefault(entry.get("Gb_type", ""), gid)
    return out


def gb_info(gb_id: str | None, gb_type: str = "") -> tuple[str, dict]:
    """Resolve a break to (GB id, registry entry). The id from the message URL wins; the
    type is only a fallback. Unknown ids keep their own text (entry {})."""
    reg = gb_registry()
    if not gb_id and gb_type:
        gb_id = _gb_by_type().get(gb_type)
    return (gb_id or "GB????"), reg.get(gb_id or "", {})


# ----------------------------------------------------------------------------- helpers

_TORCH_PATH_RE = re.compile(r"(^|[\\/])(site|dist)-packages[\\/]torch[\\/]|^torch[\\/]|[\\/]pytorch[\\/]torch[\\/]")
_RESUME_RE = re.compile(r"^torch_dynamo_resume_in_(.+)_at_\d+$")
_NN_DISPATCH = {"_call_impl", "_wrapped_call_impl"}


@functools.lru_cache(maxsize=8192)  # realpath per stack frame dominated trace reading
def is_torch_file(path: str) -> bool:
    """True for a frame inside torch's own package, which is never the attributed site."""
    root = _torch_root()
    if root and os.path.realpath(path).startswith(root + os.sep):
        return True
    return bool(_TORCH_PATH_RE.search(path))


_STDLIB_RE = re.compile(r"[\\/]lib[\\/]python3\.\d+[\\/](?!(site|dist)-packages[\\/])[^\\/]")


@functools.lru_cache(maxsize=1)
def _stdlib_root() -> str:
    import sysconfig
    return os.path.realpath(sysconfig.get_paths()["stdlib"])


@functools.lru_cache(maxsize=8192)
def is_internal_file(path: str) -> bool:
    """A frame no user edits: torch's own package or the Python standard library (a
    `log.info()` breaks inside logging/__init__.py; the site is the user's call)."""
    if is_torch_file(path) or path.startswith("<frozen"):
        return True
    if _STDLIB_RE.search(path):
        return True
    real = os.path.realpath(path)
    return real.startswith(_stdlib_root() + os.sep) and "-packages" not in real


_HARNESS = {os.path.join(os.path.dirname(os.path.abspath(__file__)), f) for f in ("live.py", "target.py")}


def user_stack(tb: list[StackFrame]) -> list[StackFrame]:
    """The traceback without graphstitch's own harness frames and what called them."""
    cut = max((i for i, fr in enumerate(tb) if fr.file in _HARNESS), default=-1)
    return tb[cut + 1:]


def original_name(function: str) -> str:
    m = _RESUME_RE.match(function)
    return m.group(1) if m else function


def _nesting_depth(tb: list[StackFrame], compiled: StackFrame | None) -> int:
    """User-code frames from the compiled frame down to the break, inclusive (1 = the break
    is directly in the compiled function)."""
    start = 0
    if compiled is not None:
        name = original_name(compiled.function)
        for i, fr in enumerate(tb):
            if fr.function == name and os.path.basename(fr.file) == os.path.basename(compiled.file):
                start = i
                break
        else:
            return 1
    return max(1, sum(1 for fr in tb[start:] if not is_internal_file(fr.file) and fr.function not in _NN_DISPATCH))


_CID_PREFIX_RE = re.compile(r"^\s*(\d+)/(\d+):\s*")


def normalize_guard_failure(reason: str) -> str:
    """Strip what changes between occurrences of the same cause: the cache entry prefix,
    the expected/actual values, object ids, addresses and the source comment."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    s = _CID_PREFIX_RE.sub("", first)
    s = re.sub(r"\s+#.*$", "", s)                       # "  # code  # file:line in fn"
    s = re.sub(r"\.?\s*expected .*?,\s*actual .*$", "", s)
    s = re.sub(r"0x[0-9a-fA-F]+", "<addr>", s)
    s = re.sub(r"(___check_(?:obj|type)_id\(.*?,\s*)\d+\)", r"\1<id>)", s)
    s = re.sub(r"(==|!=|<=|>=|<|>|\bis\b|\bis not\b)\s*-?\d+(\.\d+)?\b", r"\1 <value>", s)
    s = re.sub(r"\b-?\d+(\.\d+)?\s*(<=|<|>=|>)\s*", r"<value> \2 ", s)
    s = re.sub(r"___stack\d+", "___stack", s)
    return re.sub(r"\s+", " ", s).strip()


def _cause_key(normalized: str) -> str:
    # A changed input fans out into every resume function, where the same tensor has another
    # local name ('x', '___stack', 'y'): tensor-metadata failures group by kind + dim only.
    return re.sub(r"^tensor '[^']*'", "tensor", normalized)


def _primary_reason(reasons: list[str]) -> str:
    """The failure of the newest cache entry is what made this compile happen."""
    def rank(r: str):
        m = _CID_PREFIX_RE.match(r)
        return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    return max(reasons, key=rank) if reasons else ""


def compile_id_key(cid: str):
    try:
        a, b = cid.rsplit("/", 1)
        return (int(a.split("/")[-1]), int(b))
    except ValueError:
        return (1 << 30, 0)


# ----------------------------------------------------------------------------- analysis

def build_census(events: Iterable, *, target: str | None = None) -> Census:
    starts: dict[str, FrameStart] = {}
    metrics: dict[str, FrameMetrics] = {}
    graph_order: list[str] = []
    backend: dict[str, BackendGraph] = {}
    output: dict[str, OutputGraph] = {}
    reports: list[BreakReport] = []
    recompiles: list[RecompileReasons] = []
    c = Census(target=target)

    for ev in events:
        if isinstance(ev, FrameStart):
            starts.setdefault(ev.compile_id, ev)
        elif isinstance(ev, FrameMetrics):
            metrics[ev.compile_id] = ev
        elif isinstance(ev, OutputGraph | BackendGraph):
            if ev.compile_id not in graph_order:
                graph_order.append(ev.compile_id)
            if isinstance(ev, BackendGraph):
                backend[ev.compile_id] = ev
            else:
                output[ev.compile_id] = ev
        elif isinstance(ev, BreakReport):
            reports.append(ev)
        elif isinstance(ev, RecompileReasons):
            recompiles.append(ev)
        elif isinstance(ev, Guards):
            c.guards[ev.compile_id] = ev.text
        elif isinstance(ev, RunInfo):
            d = ev.data
            for k in ("target", "torch_version"):
                if d.get(k) is not None:
                    setattr(c, k, d[k])
            c.config.update(d.get("config") or {})
            if "calls" in d:
                c.calls = d["calls"]
            if "outputs_match_eager" in d:
                c.outputs_match_eager = d["outputs_match_eager"]
            if d.get("output_mismatch"):
                c.output_mismatch = d["output_mismatch"]
            c.checks.update(d.get("checks") or {})
            if d.get("error") and c.error is None:
                c.error = d["error"]
    if target is not None:
        c.target = target

    def located(cid: str) -> StackFrame | None:
        m = metrics.get(cid)
        if m is not None and m.function != "?":
            return StackFrame(m.file, m.line, m.function)
        s = starts.get(cid)
        return s.stack[-1] if s and s.stack else None

    # A compile refused at the recompile limit carries no code location: any other compile
    # of the same frame (F/*) names it.
    by_frame: dict[str, StackFrame] = {}
    for cid in list(metrics) + list(starts):
        fr = located(cid)
        if fr is not None:
            by_frame.setdefault(cid.rsplit("/", 1)[0], fr)

    def compiled_frame(cid: str) -> StackFrame | None:
        return located(cid) or by_frame.get(cid.rsplit("/", 1)[0])

    for cid in graph_order:
        fr = compiled_frame(cid) or StackFrame("?", 0, "?")
        b = backend.get(cid)
        m = metrics.get(cid)
        o = output.get(cid)
        c.graphs.append(Graph(cid, fr.file, fr.line, original_name(fr.function),
                              b.op_count if b else (m.graph_op_count if m else None),
                              list(b.ops) if b else [],
                              list(o.collectives) if o else
                              [op for op in (b.ops if b else []) if op.split(".")[0] in COLLECTIVE_NAMESPACES]))

    failed = {cid for cid, m in metrics.items() if m.fail_type}
    sites: dict[tuple, Site] = {}
    for r in reports:
        r.traceback = user_stack(r.traceback)
        user = [fr for fr in r.traceback if not is_internal_file(fr.file)]
        if user:
            at = user[-1]
        elif r.at_file and not is_internal_file(r.at_file):
            at = StackFrame(r.at_file, r.at_line or 0, "?")
        else:
            m = metrics.get(r.compile_id)
            at = StackFrame(m.fail_file or m.file, m.fail_line or m.line, m.function) if m else \
                StackFrame(r.at_file or "?", r.at_line or 0, "?")
        gb_id, entry = gb_info(r.gb_ids[0] if r.gb_ids else None, r.gb_type)
        key = (gb_id, at.file, at.line)
        skipped = LOOP_GB in r.gb_ids or r.compile_id in failed
        depth = _nesting_depth(r.traceback, compiled_frame(r.compile_id))
        s = sites.get(key)
        if s is None:
            sites[key] = Site(
                gb_id=gb_id,
                gb_type=r.gb_type or entry.get("Gb_type", ""),
                explanation=r.explanation or entry.get("Explanation", ""),
                hints=r.hints or list(entry.get("Hints", [])),
                file=at.file, line=at.line, function=original_name(at.function), code=at.code,
                events=1, nesting_depth=depth, frame_skipped=skipped,
                stack=[asdict(fr) for fr in r.traceback], compile_ids=[r.compile_id],
                gb_chain=r.gb_ids or [gb_id])
        else:
            s.events += 1
            s.nesting_depth = max(s.nesting_depth, depth)
            s.frame_skipped = s.frame_skipped or skipped
            s.compile_ids.append(r.compile_id)
    # Skipped frames cost the most (the whole frame runs eager), then the most reported.
    c.sites = sorted(sites.values(), key=lambda s: (not s.frame_skipped, -s.events, s.file, s.line, s.gb_id))

    causes: dict[str, RecompileCause] = {}
    for rr in recompiles:
        primary = _primary_reason(rr.reasons)
        norm = normalize_guard_failure(primary)
        key = _cause_key(norm)
        fr = compiled_frame(rr.compile_id)
        fn = original_name(fr.function) if fr else "?"
        cause = causes.setdefault(key, RecompileCause(norm, 0, [], [], []))
        cause.count += 1
        if fn not in cause.frames:
            cause.frames.append(fn)
        cause.compile_ids.append(rr.compile_id)
        if len(cause.examples) < 3:
            cause.examples.append(primary.strip())
    c.recompiles = sorted(causes.values(), key=lambda x: (-x.count, x.reason))

    for cid in sorted(set(metrics) | set(starts), key=compile_id_key):
        m = metrics.get(cid)
        fr = compiled_frame(cid) or StackFrame("?", 0, "?")
        c.frames.append(FrameCompile(cid, fr.file, fr.line, fr.function,
                                     round(m.compile_seconds, 6) if m else 0.0,
                                     m.guard_count if m else None, cid in graph_order,
                                     m.fail_type if m else None))
        if m and m.fail_type:
            reason = (m.fail_reason or "").strip().splitlines()
            c.skipped_frames.append(SkippedFrame(cid, fr.file, fr.line, original_name(fr.function),
                                                 m.fail_type, reason[0] if reason else ""))
    return c
