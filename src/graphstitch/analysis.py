"""Events -> Census: the README's "Definitions", implemented once.

``build_census`` reads the typed events of ``records.py`` (from a live capture or a
TORCH_TRACE file) and builds the one Census every output reads: graphs, break sites (each
with its :class:`~graphstitch.census.SiteId`), recompile causes, skipped frames and per-frame
compiles. Renderers never re-derive any of it. No torch import.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import costs, coverage, owners, paths
from .jsonio import to_json
from .model import (
    EXPECTED_KINDS,
    LOOP_GB,
    UNKNOWN_GB,
    CauseId,
    Census,
    Checks,
    Coverage,
    ErrorInfo,
    ErrorKind,
    FrameCompile,
    FrameId,
    Graph,
    LimitHit,
    RecompileCause,
    Site,
    SiteId,
    SkippedFrame,
    StackEntry,
    normalize_code,
)
from .records import (
    COLLECTIVE_NAMESPACES,
    UNKNOWN_COMPILE_ID,
    BackendGraph,
    BreakReport,
    CollectiveSchedule,
    FrameError,
    FrameMetrics,
    FrameStart,
    Guards,
    OutputGraph,
    RecompileReasons,
    RunInfo,
    StackFrame,
    compile_order,
    frame_key,
    recompile_index,
)

# ----------------------------------------------------------------------------- GB registry


@functools.lru_cache(maxsize=1)
def gb_registry() -> dict[str, dict[str, Any]]:
    """The installed torch's graph_break_registry.json (GB id -> first entry); {} without torch."""
    root = paths.torch_root()
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


def gb_info(gb_id: str | None, gb_type: str = "") -> tuple[str, dict[str, Any]]:
    """Resolve a break to (GB id, registry entry). The id from the message URL wins; the
    type is only a fallback. Unknown ids keep their own text (entry {})."""
    if not gb_id and gb_type:
        gb_id = _gb_by_type().get(gb_type)
    return (gb_id or UNKNOWN_GB), gb_registry().get(gb_id or "", {})


# ----------------------------------------------------------------------------- frames

_RESUME_RE = re.compile(r"^torch_dynamo_resume_in_(.+)_at_\d+$")
_NN_DISPATCH = {"_call_impl", "_wrapped_call_impl"}
_HARNESS = {os.path.join(os.path.dirname(os.path.abspath(__file__)), f) for f in ("live.py", "worker.py")}


def user_stack(tb: list[StackFrame]) -> list[StackFrame]:
    """The traceback without graphstitch's own harness frames and what called them."""
    cut = max((i for i, fr in enumerate(tb) if fr.file in _HARNESS), default=-1)
    return tb[cut + 1:]


def original_name(function: str) -> str:
    """A resume function's name is its frame's original function (torch_dynamo_resume_in_f_at_12 -> f)."""
    while (m := _RESUME_RE.match(function)) is not None:
        function = m.group(1)
    return function


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
    return max(1, sum(1 for fr in tb[start:] if not paths.is_internal(fr.file) and fr.function not in _NN_DISPATCH))


# ----------------------------------------------------------------------------- recompiles

_CID_PREFIX_RE = re.compile(r"^\s*(\d+)/(\d+):\s*")


def normalize_guard_failure(reason: str) -> str:
    """Strip what changes between occurrences of the same cause: the cache entry prefix,
    the expected/actual values, object ids, addresses and the source comment."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    s = _CID_PREFIX_RE.sub("", first)
    s = re.sub(r"\s+#.*$", "", s)                       # "  # code  # file:line in fn"
    s = re.sub(r"\.?\s*expected .*?,\s*actual .*$", "", s)
    s = re.sub(r"(mismatch)\.\s*expected\b.*$", r"\1", s)          # "requires_grad mismatch. expected requires_grad=0"
    s = re.sub(r"0x[0-9a-fA-F]+", "<addr>", s)
    s = re.sub(r"(___check_(?:obj|type)_id\(.*?,\s*)\d+\)", r"\1<id>)", s)
    s = re.sub(r"(==|!=|<=|>=|<|>|\bis\b|\bis not\b)\s*-?\d+(\.\d+)?\b", r"\1 <value>", s)
    s = re.sub(r"\b-?\d+(\.\d+)?\s*(<=|<|>=|>)\s*", r"<value> \2 ", s)
    s = re.sub(r"___stack\d+", "___stack", s)
    return re.sub(r"\s+", " ", s).strip()


def _cause_key(normalized: str) -> str:
    # A changed input fans out into every resume function, where the same tensor has another
    # local name ('x', '___stack', 'y'): tensor-metadata failures group by kind + dim only.
    # Older torch names the tensor by its source (tensor 'L['x']'): quotes inside [...] are part of it.
    return re.sub(r"^tensor '(?:[^']|(?<=\[)'|'(?=\]))*'", "tensor", normalized)


def _primary_reason(reasons: list[str]) -> str:
    """The failure of the newest cache entry is what made this compile happen."""
    def rank(r: str) -> tuple[int, int]:
        m = _CID_PREFIX_RE.match(r)
        return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    return max(reasons, key=rank) if reasons else ""


# ----------------------------------------------------------------------------- analysis

def _merge_metrics(into: FrameMetrics, more: FrameMetrics) -> None:
    """Several metrics records for one compile (a restart, a later backward compile): what the
    first one left empty, a later one fills in; restart reasons add up."""
    for name in FrameMetrics.__slots__:
        if name == "restart_reasons":
            into.restart_reasons += [r for r in more.restart_reasons if r not in into.restart_reasons]
        elif getattr(into, name) in (None, "?", 0) and getattr(more, name) not in (None, "?", 0):
            setattr(into, name, getattr(more, name))


@dataclass
class _Collected:
    """The events of one run, sorted by kind (first record of a kind per compile id wins;
    metrics records of one compile are merged)."""
    starts: dict[str, FrameStart] = field(default_factory=dict)
    metrics: dict[str, FrameMetrics] = field(default_factory=dict)
    graph_order: list[str] = field(default_factory=list)
    backend: dict[str, BackendGraph] = field(default_factory=dict)
    output: dict[str, OutputGraph] = field(default_factory=dict)
    schedules: dict[str, list[str]] = field(default_factory=dict)
    reports: list[BreakReport] = field(default_factory=list)
    recompiles: list[RecompileReasons] = field(default_factory=list)
    cost: dict[str, Any] | None = None   # `census --cost` samples (a graphstitch run record)
    errors: dict[str, FrameError] = field(default_factory=dict)
    spans: dict[str, coverage.FrameSpan | None] = field(default_factory=dict)
    # One copy of each guard tree text: a long or restarted job compiles the same frames again
    # and again, and keeping a copy per compile made memory grow with the log.
    texts: dict[str, str] = field(default_factory=dict)
    # Where each compile happened in a live run: (pass, call), from graphstitch's call marks.
    at: dict[str, tuple[int, int]] = field(default_factory=dict)
    now: tuple[int, int] | None = None
    calls: int = 0

    def tag(self, cid: str) -> None:
        if self.now is not None:
            self.at.setdefault(cid, self.now)

    def located(self, cid: str) -> StackFrame | None:
        m = self.metrics.get(cid)
        if m is not None and m.function != "?":
            return StackFrame(m.file, m.line, m.function)
        s = self.starts.get(cid)
        if not self.metrics and self.stack_ends_at_caller:
            # torch 2.3 wrote no metrics, and its dynamo_start stack ends at the caller, not at
            # the compiled frame: the graph's first "# File: F:L in NAME" names the frame.
            o = self.output.get(cid)
            return StackFrame(o.first_op.file, o.first_op.line, o.first_op.function) if o and o.first_op else None
        return s.stack[-1] if s and s.stack else None

    @functools.cached_property
    def reports_by_cid(self) -> dict[str, list[BreakReport]]:
        out: dict[str, list[BreakReport]] = {}
        for r in self.reports:
            out.setdefault(r.compile_id, []).append(r)
        return out

    def span(self, cid: str) -> coverage.FrameSpan | None:
        """What coverage needs of one frame compile (from its metrics): the function, where
        tracing began (def or resume line) and where it stopped in this frame."""
        if cid not in self.spans:
            self.spans[cid] = self._span(cid)
        return self.spans[cid]

    def _span(self, cid: str) -> coverage.FrameSpan | None:
        m = self.metrics.get(cid)
        if m is None or m.function == "?" or m.file == "?":
            return None
        name = original_name(m.function)
        at = _RESUME_AT_RE.match(m.function)
        resumed = int(at.group(2)) if at else None
        d = coverage.function_at(m.file, m.line, name)
        lo, hi = (d.start, d.end) if d else (m.line, m.line)

        def mine(file: str, line: int, fn: str) -> bool:
            return file == m.file and lo <= line <= hi and original_name(fn) in (name, "?")
        stop = None
        err = self.errors.get(cid)
        for fr in (err.frames if err else []):   # "from user code" starts at the compiled frame
            if mine(fr.file, fr.line, fr.function):
                stop = fr.line
                break
        if stop is None:
            for r in self.reports_by_cid.get(cid, []):
                stop = next((fr.line for fr in r.traceback if mine(fr.file, fr.line, fr.function)), None)
                if stop is not None:
                    break
        if stop is None and m.fail_type and m.fail_line and m.fail_file == m.file and lo <= m.fail_line <= hi:
            stop = m.fail_line
        reason = ""
        if m.fail_type:
            first = (m.fail_reason or "").strip().splitlines()
            where = f" (resumed after line {resumed})" if resumed is not None else ""
            reason = (f"Dynamo skipped {d.qualname if d else name}{where} at line {stop or m.line}"
                      f"{': ' + first[0] if first else ''}; the rest of it ran eagerly")
        return coverage.FrameSpan(cid, m.file, name, m.line, resumed, stop, bool(m.fail_type), reason)

    @functools.cached_property
    def stack_ends_at_caller(self) -> bool:
        # Old layout: the first compile's stack ends in torch's own eval_frame wrapper.
        return any(s.stack and paths.is_internal(s.stack[-1].file) for s in self.starts.values())

    def compiled_frame(self, cid: str) -> StackFrame | None:
        # A compile refused at the recompile limit carries no code location: any other
        # compile of the same frame (F/*) names it.
        fr = self.located(cid)
        if fr is not None:
            return fr
        key = frame_key(cid)
        for other in list(self.metrics) + list(self.starts):
            if frame_key(other) == key and (fr := self.located(other)) is not None:
                return fr
        return None


def _collect(events: Iterable[object], c: Census) -> _Collected:
    col = _Collected()
    for ev in events:
        if isinstance(ev, (FrameStart, FrameMetrics, RecompileReasons)):
            col.tag(ev.compile_id)
        if isinstance(ev, FrameStart):
            if ev.compile_id != UNKNOWN_COMPILE_ID:
                col.starts.setdefault(ev.compile_id, ev)
        elif isinstance(ev, FrameMetrics):
            if ev.compile_id in col.metrics:
                _merge_metrics(col.metrics[ev.compile_id], ev)
            else:
                col.metrics[ev.compile_id] = ev
        elif isinstance(ev, CollectiveSchedule):
            col.schedules.setdefault(ev.compile_id, []).extend(ev.ops)
        elif isinstance(ev, (OutputGraph, BackendGraph)):
            if ev.compile_id not in col.graph_order:
                col.graph_order.append(ev.compile_id)
            if isinstance(ev, BackendGraph):
                col.backend[ev.compile_id] = ev
            else:
                col.output[ev.compile_id] = ev
        elif isinstance(ev, BreakReport):
            col.reports.append(ev)
        elif isinstance(ev, RecompileReasons):
            col.recompiles.append(ev)
        elif isinstance(ev, Guards):
            c.guards[ev.compile_id] = col.texts.setdefault(ev.text, ev.text)
        elif isinstance(ev, RunInfo):
            _apply_run_info(c, ev.data)
            if isinstance(ev.data.get("call"), int):
                col.now = (int(ev.data.get("pass_index") or 0), ev.data["call"])
            if isinstance(ev.data.get("cost_samples"), dict):
                col.cost = ev.data["cost_samples"]
        elif isinstance(ev, FrameError):
            col.errors.setdefault(ev.compile_id, ev)
    return col


def _apply_run_info(c: Census, d: dict[str, Any]) -> None:
    """graphstitch's own run records: what ran, and how it ended."""
    for k in ("target", "torch_version"):
        if d.get(k) is not None:
            setattr(c, k, d[k])
    c.config.update(d.get("config") or {})
    if "calls" in d:
        c.calls = d["calls"]
    if isinstance(d.get("repeat_passes"), int):
        c.repeat_passes = d["repeat_passes"]
    if isinstance(d.get("completed"), bool):
        c.completed = d["completed"]
    if isinstance(d.get("dynamo_counts"), dict):
        c.config["dynamo_counts"] = d["dynamo_counts"]
    if "outputs_match_eager" in d:
        c.outputs_match_eager = d["outputs_match_eager"]
    if d.get("output_mismatch"):
        c.output_mismatch = d["output_mismatch"]
    if isinstance(d.get("checks"), dict):
        c.checks = Checks.from_record({**to_json(c.checks), **d["checks"]})
    if isinstance(d.get("error"), dict) and c.error is None:
        c.error = ErrorInfo.from_record(d["error"])


def _graphs(col: _Collected) -> list[Graph]:
    out = []
    for cid in col.graph_order:
        fr = col.compiled_frame(cid) or StackFrame("?", 0, "?")
        b, m, o = col.backend.get(cid), col.metrics.get(cid), col.output.get(cid)
        ops = list(b.ops) if b else []
        out.append(Graph(cid, fr.file, fr.line, original_name(fr.function),
                         b.op_count if b else (m.graph_op_count if m else None), ops,
                         list(o.collectives) if o else
                         [op for op in ops if op.split(".")[0] in COLLECTIVE_NAMESPACES],
                         col.schedules.get(cid), _qualname(fr)))
    return out


def _site_frame(r: BreakReport, col: _Collected) -> StackFrame:
    """The innermost frame outside torch and the standard library: the break's site."""
    user = [fr for fr in r.traceback if not paths.is_internal(fr.file)]
    if user:
        return user[-1]
    if r.at_file and not paths.is_internal(r.at_file):
        return StackFrame(r.at_file, r.at_line or 0, "?")
    m = col.metrics.get(r.compile_id)
    if m is not None:
        return StackFrame(m.fail_file or m.file, m.fail_line or m.line, m.function)
    return StackFrame(r.at_file or "?", r.at_line or 0, "?")


def _sites(col: _Collected, root: str | None) -> list[Site]:
    failed = {cid for cid, m in col.metrics.items() if m.fail_type}
    sites: dict[tuple[str, str, int], Site] = {}
    for r in col.reports:
        r.traceback = _with_calling_lines(user_stack(r.traceback), col.errors.get(r.compile_id))
        at = _site_frame(r, col)
        gb_id, entry = gb_info(r.gb_ids[0] if r.gb_ids else None, r.gb_type)
        skipped = LOOP_GB in r.gb_ids or r.compile_id in failed
        depth = _nesting_depth(r.traceback, col.compiled_frame(r.compile_id))
        s = sites.get((gb_id, at.file, at.line))
        if s is None:
            function = original_name(at.function)
            sites[(gb_id, at.file, at.line)] = Site(
                id=SiteId(gb_id, paths.identity_path(at.file, root), function, _anchor(at.code, at.line)),
                gb_id=gb_id, gb_type=r.gb_type or entry.get("Gb_type", ""),
                file=at.file, line=at.line, function=function, code=at.code,
                events=1, nesting_depth=depth, frame_skipped=skipped,
                explanation=r.explanation or entry.get("Explanation", ""),
                hints=r.hints or list(entry.get("Hints", [])),
                stack=_stack(r.traceback),
                compile_ids=[r.compile_id], gb_chain=r.gb_ids or [gb_id],
                qualname=coverage.qualname(at.file, at.line, function))
        else:
            s.events += 1
            if depth > s.nesting_depth and len(r.traceback) > len(s.stack):
                # the deepest report's stack reads from the outermost compiled frame down
                s.stack = _stack(r.traceback)
            s.nesting_depth = max(s.nesting_depth, depth)
            s.frame_skipped = s.frame_skipped or skipped
            s.compile_ids.append(r.compile_id)
        owners.add_route(sites[(gb_id, at.file, at.line)], r.traceback, root)
    out = list(sites.values())
    _number_occurrences(out)
    # Skipped frames cost the most (the whole frame runs eager), then the most reported.
    return sorted(out, key=lambda s: (not s.frame_skipped, -s.events, s.file, s.line, s.gb_id))


_RESUME_AT_RE = re.compile(r"^torch_dynamo_resume_in_(.+)_at_(\d+)$")


def _inferred_sites(col: _Collected, root: str | None) -> list[Site]:
    """Sites for a log without break reports (torch before 2.6): each resume function
    ``torch_dynamo_resume_in_FN_at_LINE`` that was compiled or called says Dynamo broke FN's
    graph at LINE. The reason comes from the restart reasons of the compile of FN that ran up
    to that line, when the metrics carry them. Marked approximate."""
    seen: dict[tuple[str, str], set[str]] = {}  # (file, resume name) -> compile ids of it
    for cid in sorted(set(col.metrics) | set(col.starts) | set(col.output), key=compile_order):
        fr = col.located(cid)
        if fr is not None and _RESUME_AT_RE.match(fr.function):
            seen.setdefault((fr.file, fr.function), set()).add(cid)
        for caller in (col.starts[cid].stack if cid in col.starts else []):
            if _RESUME_AT_RE.match(caller.function):
                seen.setdefault((caller.file, caller.function), set())
    sites = []
    for (file, name), cids in seen.items():
        if file.startswith("<interned "):
            continue  # the intern table entry was lost (a cut log): no file to name
        m = _RESUME_AT_RE.match(name)
        assert m is not None
        fn, line = original_name(m.group(1)), int(m.group(2))
        # The compile that ran up to LINE: the one of FN that starts closest above it.
        before = [x for x in col.metrics.values() if x.file == file and original_name(x.function) == fn
                  and x.line < line]
        nearest = max((x.line for x in before), default=None)
        reasons = [r for x in before if x.line == nearest for r in x.restart_reasons]
        reason = reasons[0].strip() if reasons else ""
        first = reason.splitlines()[0] if reason else ""
        gb_id, entry = gb_info(None, first)
        sites.append(Site(
            id=SiteId(gb_id, paths.identity_path(file, root), fn, _anchor("", line)),
            gb_id=gb_id, gb_type=first or "graph break (inferred)", file=file, line=line, function=fn, code="",
            events=max(1, len(cids)),
            explanation=(f"Approximate: inferred from the resume function {name} (this log has no graph-break "
                         "reports; torch before 2.6 wrote none): the line is where Dynamo resumed"
                         + ("; the type is the compile's restart reason." if first else
                            "; the reason is not in the log.")),
            hints=list(entry.get("Hints", [])), compile_ids=sorted(cids, key=compile_order), gb_chain=[gb_id],
            approximate=True))
    return sorted(sites, key=lambda s: (s.file, s.line))


def _stack(tb: list[StackFrame]) -> list[StackEntry]:
    return [StackEntry(fr.file, fr.line, fr.function, fr.code, _qualname(fr)) for fr in tb]


def _qualname(fr: StackFrame) -> str:
    return coverage.qualname(fr.file, fr.line, original_name(fr.function))


def _with_calling_lines(tb: list[StackFrame], err: FrameError | None) -> list[StackFrame]:
    """A break in a loop reports the stack of the inner exception: the calling line in the
    compiled frame (``h = blk(h)``) is missing. The failed compile's "from user code" frames
    (its ``dynamo_error``) have it: each one the traceback lacks goes in before the next one
    it has, so the stack reads from the compiled frame down to the break."""
    if err is None or not err.frames:
        return tb
    out = list(tb)
    have = {(fr.file, fr.line) for fr in out}
    missing: list[StackFrame] = []
    for fr in err.frames:
        if (fr.file, fr.line) not in have:
            missing.append(fr)
            continue
        if missing:
            at = next(i for i, x in enumerate(out) if (x.file, x.line) == (fr.file, fr.line))
            out[at:at] = [StackFrame(m.file, m.line, m.function, m.code) for m in missing]
            have.update((m.file, m.line) for m in missing)
            missing = []
    return out


def _anchor(code: str, line: int) -> str:
    return normalize_code(code) or f"line {line}"


def _number_occurrences(sites: list[Site]) -> None:
    """The same text breaking at several lines of one function: number them in line order."""
    seen: Counter[SiteId] = Counter()
    for s in sorted(sites, key=lambda s: s.line):
        seen[s.id] += 1
        if seen[s.id] > 1:
            s.id = SiteId(s.id.gb_id, s.id.path, s.id.function, s.id.code, seen[s.id])


def _recompile_causes(col: _Collected, sites: list[Site], root: str | None) -> list[RecompileCause]:
    causes: dict[str, RecompileCause] = {}
    for rr in col.recompiles:
        primary = _primary_reason(rr.reasons)
        norm = normalize_guard_failure(primary)
        fr = col.compiled_frame(rr.compile_id)
        fn = original_name(fr.function) if fr else "?"
        cause = causes.get(_cause_key(norm))
        if cause is None:
            cause = causes[_cause_key(norm)] = RecompileCause(norm, 0)
            _identify(cause, primary, fr, sites, root)
        cause.count += 1
        pass_call = col.at.get(rr.compile_id)
        if pass_call is not None:
            if pass_call[0] > 0:
                cause.repeats += 1
            elif pass_call[0] < 0:
                cause.checks += 1
            else:
                cause.calls.append(pass_call[1])
        if fn not in cause.frames:
            cause.frames.append(fn)
        named = re.match(r"tensor '([^']*)'", norm)
        if named and not named.group(1).startswith("___"):   # each frame's own name for the input
            cause.names.setdefault(fn, named.group(1))
        cause.compile_ids.append(rr.compile_id)
        if len(cause.examples) < 3:
            cause.examples.append(primary.strip())
    if not col.recompiles:
        # Older torch (2.3) wrote no recompile reasons: a compile F/R with R > 0 is still a recompile.
        for cid in sorted(set(col.starts) | set(col.metrics), key=compile_order):
            if recompile_index(cid) > 0:
                fr = col.compiled_frame(cid)
                fn = original_name(fr.function) if fr else "?"
                cause = causes.setdefault(UNKNOWN_RECOMPILE, RecompileCause(UNKNOWN_RECOMPILE, 0))
                cause.count += 1
                if fn not in cause.frames:
                    cause.frames.append(fn)
                cause.compile_ids.append(cid)
    for cause in causes.values():   # the tensor as the first frame names it (a resume function says ___stack0)
        if cause.kind == "shape" and cause.frames and cause.frames[0] in cause.names and cause.id is not None:
            dim = cause.subject.rpartition(" dim ")[2]
            cause.subject = f"{cause.names[cause.frames[0]]} dim {dim}"
            cause.id = CauseId(cause.id.path, cause.id.function, cause.kind, cause.subject)
    return sorted(causes.values(), key=lambda x: (-x.count, x.reason))


_GUARD_SOURCE_RE = re.compile(r"#\s(?P<code>.*?)\s+#\s(?P<file>[^#\s][^#]*?):(?P<line>\d+) in (?P<fn>\S+)")
_USER_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n\s*(?P<code>.*)$', re.M)


def classify(reason: str) -> tuple[str, str]:
    """(kind, subject) of a normalized guard failure: what kind of value the guard checked and
    what it reads (never the value). The kinds are model.AVOIDABLE_KINDS and EXPECTED_KINDS."""
    m = re.match(r"tensor(?: '((?:[^']|(?<=\[)'|'(?=\]))*)')? (size|stride) mismatch at index (\d+)", reason)
    if m:
        return "shape", f"{m.group(1) or 'tensor'} dim {m.group(3)}"
    m = re.match(r"tensor(?: '((?:[^']|(?<=\[)'|'(?=\]))*)')? (dtype|device|requires_grad|rank|dispatch key set)\b", reason)
    if m:
        return ("dispatch" if m.group(2).startswith("dispatch") else m.group(2)), m.group(1) or "tensor"
    if re.search(r"GLOBAL_STATE|global state|grad_mode|autocast", reason, re.I):
        return "global_state", "global state"
    m = re.search(r"(\S+)\.training\b", reason)
    if m:
        return "training", f"{m.group(1)}.training"
    m = re.search(r"___check_(obj|type)_id\((.*?),", reason)
    if m and m.group(1) == "obj" and m.group(2).endswith(".__code__"):
        return "code", m.group(2)[: -len(".__code__")]
    if m:
        return ("object" if m.group(1) == "obj" else "type"), m.group(2)
    m = re.match(r"expected type of '(.*?)' to be", reason)   # a parameter that is None in one call, a tensor in another
    if m:
        return "type", m.group(1)
    m = re.match(r"len\((.*)\) == <value>", reason)
    if m:
        return "length", m.group(1)
    m = re.match(r"(\S+) (?:==|is|is not|!=) (?:'.*'|\".*\"|True|False|None)$", reason)
    if m:
        return "constant", m.group(1)
    m = re.match(r"(\S+) (?:==|!=|<=|>=|<|>) <value>$", reason) or re.match(r"<value> \S+ (\S+)$", reason)
    if m:
        subject = re.sub(r"^L\['(\w+)'\]", r"\1", m.group(1))
        return ("attribute" if "." in subject or "[" in subject else "scalar"), subject
    return "other", reason


def _identify(cause: RecompileCause, raw: str, fr: StackFrame | None, sites: list[Site], root: str | None) -> None:
    """Identity, kind and provenance of a cause from its first recompile's raw failure: the
    user line Dynamo names for the guard (its source comment and user stack trace, innermost
    frame outside torch), else the compiled frame; a resume function's stack value
    (``___stack0``) was made at the break its name names (``..._at_LINE``): that site."""
    cause.kind, cause.subject = classify(cause.reason)
    cause.expected = EXPECTED_KINDS.get(cause.kind, "")
    fn = original_name(fr.function) if fr else "?"
    cause.id = CauseId(paths.identity_path(fr.file, root) if fr else "?", fn, cause.kind, cause.subject)
    user = [StackEntry(m.group("file"), int(m.group("line")), m.group("fn"), m.group("code").strip())
            for m in _USER_FRAME_RE.finditer(raw)]
    user = [u for u in user if not paths.is_internal(u.file)]
    resume = _RESUME_AT_RE.match(fr.function) if fr else None
    if resume is not None and cause.subject.startswith("___stack"):
        line = int(resume.group(2))
        site = next((s for s in sites if s.line == line and s.function == fn
                     and os.path.realpath(s.file) == os.path.realpath(fr.file if fr else "")), None)
        if site is not None:
            cause.site = site.id
            cause.provenance = StackEntry(site.file, site.line, site.function, site.code)
            return
        cause.provenance = StackEntry(fr.file if fr else "?", line, fn, "")
        return
    if user:
        u = user[-1]
        cause.provenance = StackEntry(u.file, u.line, original_name(u.function), u.code)
    elif fr is not None:
        m = _GUARD_SOURCE_RE.search(raw.splitlines()[0] if raw else "")
        cause.provenance = (StackEntry(fr.file, int(m.group("line")), fn, m.group("code").strip()) if m
                            else StackEntry(fr.file, fr.line, fn, f"argument of {fn}()"))


_LIMIT_RE = re.compile(r"recompile limit|cache_size_limit|cache size limit", re.I)


def _limit_hits(col: _Collected, c: Census) -> list[LimitHit]:
    """Frames refused at recompile_limit (or the accumulated limit): they run eagerly from
    that call on whenever no cache entry matches."""
    out = []
    total = c.calls * (1 + c.repeat_passes)
    for sf in c.skipped_frames:
        m = col.metrics.get(sf.compile_id)
        text = " ".join(x for x in (sf.reason, m.fail_reason if m else "") if x)
        if not _LIMIT_RE.search(text):
            continue
        limit = "accumulated_recompile_limit" if "accumulated" in text.lower() else "recompile_limit"
        at = col.at.get(sf.compile_id)
        if at is not None and at[0] < 0:
            continue   # reached during `fix`'s own fresh-input check: calls the user never makes
        hit = LimitHit(sf.compile_id, sf.file, sf.line, sf.function, limit, sf.reason)
        if at is not None and at[0] >= 0:
            hit.call, hit.repeat = at[1], at[0] > 0
            hit.eager_calls = max(0, total - (at[0] * c.calls + at[1]))
        out.append(hit)
    return out


UNKNOWN_RECOMPILE = "reason not in the log (older torch wrote no recompile reasons)"


def _frames(col: _Collected, root: str | None) -> tuple[list[FrameCompile], list[SkippedFrame]]:
    frames, skipped = [], []
    for cid in sorted(set(col.metrics) | set(col.starts), key=compile_order):
        m = col.metrics.get(cid)
        fr = col.compiled_frame(cid) or StackFrame("?", 0, "?")
        frames.append(FrameCompile(cid, fr.file, fr.line, fr.function,
                                   round(m.compile_seconds or 0.0, 6) if m else 0.0,
                                   m.guard_count if m else None, cid in col.graph_order,
                                   m.fail_type if m else None, _qualname(fr)))
        if m and m.fail_type:
            reason = (m.fail_reason or "").strip().splitlines()
            at = col.at.get(cid)
            if at is not None and at[0] < 0 and _LIMIT_RE.search(" ".join([m.fail_type, *reason])):
                # a recompile limit reached on `fix`'s own fresh-input check (calls the user never
                # makes; how many it makes varies): as for limit hits, not the user's skipped frame
                continue
            fn = original_name(fr.function)
            span = col.span(cid)
            d = coverage.function_at(fr.file, fr.line, fn)
            # Where tracing stopped in this frame (the calling line of a callee that broke in
            # a loop), not the callee's line; else the metrics' failing frame in this file.
            line = span.stop if span is not None and span.stop is not None else (
                m.fail_line if m.fail_line and m.fail_file == fr.file else fr.line)
            skipped.append(SkippedFrame(FrameId(paths.identity_path(fr.file, root), fn), cid, fr.file, line,
                                        fn, m.fail_type, reason[0] if reason else "",
                                        d.qualname if d else "", span.resumed_at if span else None,
                                        (span.resumed_at or d.start) if d and span else None,
                                        d.end if d else None))
    seen: Counter[FrameId] = Counter()
    for sf in sorted(skipped, key=lambda s: s.line):
        seen[sf.id] += 1
        if seen[sf.id] > 1:
            sf.id = FrameId(sf.id.path, sf.id.function, seen[sf.id])
    return frames, skipped


def build_census(events: Iterable[object], *, target: str | None = None,
                 project_root: str | None = None) -> Census:
    """The census of one run's events. PROJECT_ROOT names files in site identities (see
    ``paths.identity_path``); None keeps them as the trace wrote them."""
    c = Census(target=target, project_root=project_root)
    coverage.forget()   # source read afresh: a file edited since the last census in this process
    col = _collect(events, c)
    if target is not None:
        c.target = target
    c.graphs = _graphs(col)
    c.sites = _sites(col, project_root) if col.reports else _inferred_sites(col, project_root)
    c.recompiles = _recompile_causes(col, c.sites, project_root)
    c.frames, c.skipped_frames = _frames(col, project_root)
    c.coverage = _coverage(col, project_root)
    c.limit_hits = _limit_hits(col, c)
    _verify_capture(c, col)
    costs.attach(c, col.cost)
    return c


_DISABLED_GB = "GB0098"   # "Skip calling torch.compiler.disable()d function"
_FUNCTION_REPR_RE = re.compile(r"<(?:function|bound method) ([^\s>]+)")


def _coverage(col: _Collected, root: str | None) -> Coverage:
    """Coverage (README "Definitions"): per frame compile, the lines traced and, where the
    compile failed, the rest of the frame that ran eagerly; plus every function Dynamo
    refused to trace because it is under torch.compiler.disable (its repr names it)."""
    spans = [sp for cid in sorted(col.metrics, key=compile_order) if (sp := col.span(cid)) is not None]
    disabled = []
    for r in col.reports:
        if not r.gb_ids or r.gb_ids[0] != _DISABLED_GB:
            continue
        m = _FUNCTION_REPR_RE.search(r.explanation) or _FUNCTION_REPR_RE.search(r.reason)
        if m is None:
            continue
        at = _site_frame(r, col)
        look = [at.file, *(fr.file for fr in reversed(r.traceback)), *(x.file for x in col.metrics.values())]
        disabled.append(coverage.DisabledCall(m.group(1), at.file, at.line, r.compile_id,
                                              [f for f in dict.fromkeys(look) if not paths.is_internal(f)]))
    return coverage.build(spans, disabled, root)


def _verify_capture(c: Census, col: _Collected) -> None:
    """Check the records against what else is known, so a torch that moved its trace logger or
    changed its message layout cannot make a run look clean."""
    torch_v = f"torch {c.torch_version or '?'}"
    counts = c.config.get("dynamo_counts") or {}
    dynamo_records = bool(col.starts or col.metrics or col.output)
    if col.backend and not dynamo_records:
        c.error = c.error or ErrorInfo(
            ErrorKind.CAPTURE, f"{len(col.backend)} graph(s) were compiled but {torch_v} sent no Dynamo trace "
            "records to graphstitch: break sites and recompiles cannot be counted with this torch")
    elif counts.get("graph_breaks", 0) > 0 and not col.reports:
        c.error = c.error or ErrorInfo(
            ErrorKind.CAPTURE, f"Dynamo counted {counts['graph_breaks']} graph break(s) but {torch_v} sent no "
            "break report graphstitch could read: the break-report layout may have changed")
    unknown = [s for s in c.sites if s.gb_id == UNKNOWN_GB]
    if unknown:
        c.warnings.append(f"{len(unknown)} break site(s) have no GB id: {torch_v} wrote a break report whose "
                          "layout graphstitch does not know; their type and advice may be wrong")
