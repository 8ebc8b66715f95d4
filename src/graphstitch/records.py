"""Trace records -> events.

A *record* is what `torch._logging.trace_structured` emits: a metadata dict whose one
non-context key names its kind (``dynamo_start``, ``artifact``, ``compilation_metrics``…)
plus an optional text payload. Live capture receives records from a logging handler;
TORCH_TRACE files hold the same records as text lines. Both feed one :class:`Decoder`,
which dispatches each record to the one parser registered for its kind and yields
typed events. The analysis (``census.py``) only ever sees events.

This module must not import torch: traces are read on machines without it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# Keys trace_structured adds around the kind key (torch/_logging/_internal.py).
CONTEXT_KEYS = frozenset(
    {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt",
     "severity", "timestamp", "pathname", "thread", "subgraph_name", "has_payload", "stack"}
)


@dataclass(slots=True)
class Record:
    meta: dict[str, Any]
    payload: str | None = None

    @property
    def kind(self) -> str | None:
        for k in self.meta:
            if k not in CONTEXT_KEYS:
                return k
        return None


# ----------------------------------------------------------------------------- events

@dataclass(slots=True)
class StackFrame:
    file: str
    line: int
    function: str
    code: str = ""


@dataclass(slots=True)
class FrameStart:
    compile_id: str
    stack: list[StackFrame]


@dataclass(slots=True)
class BreakReport:
    compile_id: str
    gb_ids: list[str]            # in message order; the first is the root cause
    gb_type: str
    explanation: str
    hints: list[str]
    at_file: str | None          # "Graph break in user code at FILE:LINE"
    at_line: int | None
    traceback: list[StackFrame]  # "User code traceback:", outermost first
    reason: str                  # the "Graph Break Reason:" line


@dataclass(slots=True)
class RecompileReasons:
    compile_id: str
    reasons: list[str]           # one per failed cache entry, "0/0: <guard failure>"


@dataclass(slots=True)
class FrameMetrics:
    compile_id: str
    function: str
    file: str
    line: int
    fail_type: str | None
    fail_reason: str | None
    fail_file: str | None
    fail_line: int | None
    graph_op_count: int | None
    guard_count: int | None
    compile_seconds: float | None    # None: this record carries no compile time
    start_time: float | None
    restart_reasons: list[str] = field(default_factory=list)  # why Dynamo restarted the frame (a break)


@dataclass(slots=True)
class OutputGraph:
    compile_id: str
    collectives: list[str] = field(default_factory=list)  # in graph order, "_c10d_functional.all_reduce"
    first_op: StackFrame | None = None  # the "# File: F:L in NAME" of its first node (old logs name frames so)


@dataclass(slots=True)
class CollectiveSchedule:
    """Inductor's executed collective order for one compiled graph (``inductor_collective_schedule``)."""
    compile_id: str
    ops: list[str]


@dataclass(slots=True)
class Guards:
    compile_id: str
    text: str


@dataclass(slots=True)
class BackendGraph:
    """One FX graph seen by graphstitch's counting backend (live capture only)."""
    compile_id: str
    op_count: int
    ops: list[str]


@dataclass(slots=True)
class RunInfo:
    """graphstitch's own record: what was run, how, and how it ended."""
    data: dict[str, Any]


@dataclass(slots=True)
class FrameError:
    """A compile that failed (``dynamo_error``): the "from user code" frames of its traceback,
    outermost first, which name the failing line (metrics name the innermost frame, often torch's)."""
    compile_id: str
    user_frames: list[tuple[str, int]]
    frames: list[StackFrame] = field(default_factory=list)   # the same frames, with function and code


DecodedEvent = (FrameStart | BreakReport | RecompileReasons | FrameMetrics | OutputGraph
                | CollectiveSchedule | Guards | BackendGraph | RunInfo | FrameError)


# ----------------------------------------------------------------------------- parsers

# One parser per record kind, as tlparse has one struct per kind: a function from (decoder
# state, the record's metadata, its payload when the parser asked for it) to typed events.
ParseFn = Callable[["Decoder", dict[str, Any], "str | None"], Iterable[DecodedEvent]]


@dataclass(slots=True)
class _Parser:
    fn: ParseFn
    wants_payload: bool


PARSERS: dict[str, _Parser] = {}


def parser(kind: str, *, payload: bool) -> Callable[[ParseFn], ParseFn]:
    """Register the parser for one record kind (``artifact:NAME`` for artifacts)."""
    def register(fn: ParseFn) -> ParseFn:
        PARSERS[kind] = _Parser(fn, payload)
        return fn
    return register


def dispatch_key(meta: dict[str, Any]) -> str | None:
    kind = next((k for k in meta if k not in CONTEXT_KEYS), None)
    if kind == "artifact":
        body = meta.get("artifact")
        if isinstance(body, dict):
            return f"artifact:{body.get('name')}"
    return kind


# ----------------------------------------------------------------------------- compile ids
#
# A compile id names one frame compile: "F/R" (frame F, its R-th recompile), "!A/F/R" under
# compiled autograd A, and "pN:F/R" when several processes' logs make one census. Parsed
# here only; every consumer asks these functions.

_CID_RE = re.compile(r"^(?P<prefix>(?:p\d+:)?(?:r\d+:)?)(?:!(?P<autograd>\d+)/)?(?P<frame>\d+|\?)/(?P<recompile>\d+|\?)$")


@dataclass(frozen=True, slots=True)
class CompileId:
    frame: int | None
    recompile: int | None
    autograd: int | None = None
    prefix: str = ""

    @classmethod
    def parse(cls, cid: str) -> CompileId:
        m = _CID_RE.match(cid.strip())
        if m is None:
            return cls(None, None)
        num = lambda k: int(m.group(k)) if m.group(k) and m.group(k) != "?" else None
        return cls(num("frame"), num("recompile"), num("autograd"), m.group("prefix") or "")

    @property
    def frame_key(self) -> str:
        """The frame this compile belongs to (the id without the recompile counter)."""
        auto = f"!{self.autograd}/" if self.autograd is not None else ""
        return f"{self.prefix}{auto}{'?' if self.frame is None else self.frame}"


def frame_key(cid: str) -> str:
    return CompileId.parse(cid).frame_key


def recompile_index(cid: str) -> int:
    return CompileId.parse(cid).recompile or 0


def compile_order(cid: str | None) -> tuple[str, int, int, int]:
    """Sort key: program order (process, frame, recompile); unknown ids last."""
    c = CompileId.parse(cid or "")
    big = 1 << 30
    return (c.prefix, big if c.frame is None else c.frame, big if c.recompile is None else c.recompile,
            -1 if c.autograd is None else c.autograd)


UNKNOWN_COMPILE_ID = "?/?"


def compile_id_of(meta: dict[str, Any]) -> str:
    """The compile id a record is tagged with ("?/?" outside any compile)."""
    fid, fcid = meta.get("frame_id"), meta.get("frame_compile_id")
    if not isinstance(fid, int) or not isinstance(fcid, int):
        return UNKNOWN_COMPILE_ID
    cid = f"{fid}/{fcid}"
    if isinstance(meta.get("compiled_autograd_id"), int):
        cid = f"!{meta['compiled_autograd_id']}/{cid}"
    return cid


# Traces are untrusted input: a record nested deeper than this is malformed (real records are
# a few levels deep; deep nesting would blow the stack in json or in anything that walks it).
MAX_JSON_DEPTH = 32


def load_json(text: str) -> Any:
    """json.loads with bounded nesting: ValueError for bad, truncated or too deeply nested JSON."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return value  # too few brackets to nest that deep (the common case, counted at C speed)
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError("JSON nested too deeply")
            todo.extend([(x, depth + 1) for x in (v.values() if type(v) is dict else v)
                         if type(x) is dict or type(x) is list])
    return value


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


@parser("str", payload=False)
def _parse_str(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    entry = meta.get("str")
    if isinstance(entry, list) and len(entry) == 2:
        dec.intern[entry[1]] = entry[0]
    return ()


@parser("dynamo_start", payload=False)
def _parse_dynamo_start(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    body = meta.get("dynamo_start") or {}
    stack = [dec.frame(s) for s in body.get("stack") or [] if isinstance(s, dict)]
    return (FrameStart(compile_id_of(meta), stack),)


_AT_RE = re.compile(r"Graph break in user code at (.+):(\d+)\s*$", re.M)
_GB_URL_RE = re.compile(r"compile-graph-break-site/gb/gb(\d{4})\.html", re.I)
_BETWEEN_TYPE_AND_EXPLANATION = ("Higher Order Operator:",)
_TB_FRAME_RE = re.compile(r'^\s*File "(.+)", line (\d+), in (.+?)\s*$')


def parse_break_text(text: str) -> dict[str, Any]:
    """Split one formatted graph-break message into its parts (torch 2.13 layout)."""
    lines = text.splitlines()
    at = _AT_RE.search(text)
    gb_ids = [f"GB{n}" for n in _GB_URL_RE.findall(text)]
    reason, gb_type, explanation, hints = "", "", [], []
    expl_idx = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Explanation:")), None)
    for ln in lines:
        if ln.startswith("Graph Break Reason:"):
            reason = ln.split(":", 1)[1].strip()
            break
    if expl_idx is not None:
        # torch 2.13 puts "Higher Order Operator: <name>" between the type and the explanation
        # for a break inside checkpoint / cond / wrap: the type is the line above those.
        prev = next((lines[i].strip() for i in range(expl_idx - 1, -1, -1)
                     if lines[i].strip() and not lines[i].strip().startswith(_BETWEEN_TYPE_AND_EXPLANATION)), "")
        gb_type = prev.removeprefix("Graph Break Reason:").strip()
        explanation.append(lines[expl_idx].strip().removeprefix("Explanation:").strip())
        i = expl_idx + 1
        # The explanation may continue over several lines, up to the first hint / debug context.
        while i < len(lines):
            s = lines[i].strip()
            if not s or s.startswith(("Hint:", "Developer debug context:", "For more details")):
                break  # a blank line ends it; what follows is debug detail (e.g. the branch's graph)
            explanation.append(s)
            i += 1
        while i < len(lines):
            s = lines[i].strip()
            if s.startswith("Hint:"):
                hints.append(s.removeprefix("Hint:").strip())
            elif s.startswith(("Developer debug context:", "For more details", "User code traceback:")):
                break
            i += 1
    else:
        # torch before 2.7: "Reason: Unsupported: builtin: print [...]" and no explanation.
        old = next((ln.strip() for ln in lines if ln.strip().startswith("Reason:")), "")
        reason = reason or old.removeprefix("Reason:").strip()
        gb_type = reason.removeprefix("Unsupported:").strip()
    traceback: list[StackFrame] = []
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("User code traceback:"))
    except StopIteration:
        start = None
    if start is not None:
        i = start + 1
        while i < len(lines):
            m = _TB_FRAME_RE.match(lines[i])
            if m:
                code = lines[i + 1].strip() if i + 1 < len(lines) and not _TB_FRAME_RE.match(lines[i + 1]) else ""
                traceback.append(StackFrame(m.group(1), int(m.group(2)), m.group(3), code))
            elif lines[i].strip() and not lines[i].startswith(" "):
                break  # end of the traceback block ("Traceback (most recent…", "NoneType: None")
            i += 1
    return {
        "gb_ids": gb_ids,
        "gb_type": gb_type,
        "explanation": " ".join(s for s in explanation if s).strip(),
        "hints": hints,
        "at_file": at.group(1) if at else None,
        "at_line": int(at.group(2)) if at else None,
        "traceback": traceback,
        "reason": reason,
    }


@parser("artifact:dynamo_graph_break_reason", payload=True)
def _parse_break(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    if not payload:
        return ()
    parts = parse_break_text(payload)
    if parts["at_file"] is None and not parts["traceback"]:
        # A report cut before its location would become an invented site: malformed instead.
        raise ValueError("graph-break report without a location")
    return (BreakReport(compile_id_of(meta), **parts),)


@parser("artifact:recompile_reasons", payload=True)
def _parse_recompile(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    if payload is None:
        return ()
    # One reason arrives as a JSON string, several as a JSON list; tolerate raw text too.
    try:
        value = load_json(payload)
    except ValueError:
        if payload.lstrip().startswith(("[", '"', "{")):
            raise  # JSON cut short or nested too deep: a malformed record, not a reason
        value = payload
    reasons = value if isinstance(value, list) else [value]
    return (RecompileReasons(compile_id_of(meta), [str(r) for r in reasons]),)


def _seconds(m: dict[str, Any]) -> float | None:
    """The frame's compile time from whichever field this torch wrote."""
    for key, scale in (("entire_frame_compile_time_s", 1.0), ("dynamo_cumulative_compile_time_us", 1e-6),
                       ("duration_us", 1e-6)):
        v = m.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v) * scale
    return None


def _reasons(v: Any) -> list[str]:
    # A list (2.4, 2.5), or a JSON string holding one (2.6 and later).
    if isinstance(v, str):
        try:
            v = load_json(v)
        except ValueError:
            return [v] if v.strip() else []
    return [str(x) for x in v] if isinstance(v, list) else []


@parser("compilation_metrics", payload=False)
def _parse_metrics(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    m = meta.get("compilation_metrics")
    if not isinstance(m, dict):
        raise TypeError("compilation_metrics is not an object")
    # The record's own frame ids (what trace_structured tagged it with) win over the body's
    # compile_id; with neither (a run-time or non-Dynamo metrics record) it is no frame compile.
    cid = compile_id_of(meta)
    if cid == UNKNOWN_COMPILE_ID and isinstance(m.get("compile_id"), str):
        cid = m["compile_id"] if CompileId.parse(m["compile_id"]).frame is not None else cid
    if cid == UNKNOWN_COMPILE_ID:
        return ()
    return (FrameMetrics(
        compile_id=str(cid),
        function=str(m.get("co_name") or "?"),
        file=str(m.get("co_filename") or "?"),
        line=_int(m.get("co_firstlineno")) or 0,
        fail_type=m.get("fail_type"),
        fail_reason=m.get("fail_reason"),
        fail_file=m.get("fail_user_frame_filename"),
        fail_line=_int(m.get("fail_user_frame_lineno")),
        graph_op_count=_int(m.get("graph_op_count")),
        guard_count=_int(m.get("guard_count")),
        compile_seconds=_seconds(m),
        start_time=m.get("start_time") if isinstance(m.get("start_time"), (int, float)) else None,
        restart_reasons=_reasons(m.get("restart_reasons")),
    ),)


# Collective ops live in these op namespaces (dist.all_reduce traces to
# torch.ops._c10d_functional.all_reduce + wait_tensor on torch 2.13).
COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d", "_dtensor")
# One node per code line; "# File: ..., code: ..." comment lines quote the source and are skipped.
_COLLECTIVE_CALL_RE = re.compile(r"^[^#\n]*?torch\.ops\.((?:" + "|".join(COLLECTIVE_NAMESPACES)
                                 + r")\.\w+)(?:\.\w+)?\(", re.M)


_FILE_COMMENT_RE = re.compile(r"^\s*# File: (.+):(\d+) in (\S+?)(?:, code: (.*))?$", re.M)


@parser("dynamo_output_graph", payload=True)
def _parse_output_graph(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    # The payload is the graph's code: the collectives' order is readable from any trace.
    first = _FILE_COMMENT_RE.search(payload or "")
    where = StackFrame(first.group(1), int(first.group(2)), first.group(3), first.group(4) or "") if first else None
    return (OutputGraph(compile_id_of(meta), _COLLECTIVE_CALL_RE.findall(payload or ""), where),)


@parser("artifact:inductor_collective_schedule", payload=True)
def _parse_collective_schedule(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    # torch/_inductor/debug.py: a JSON list of the collective kernels' python_kernel_name
    # (None where a kernel has none), in the order the compiled graph runs them.
    ops = load_json(payload or "")
    if not isinstance(ops, list):
        raise TypeError("collective schedule is not a list")
    return (CollectiveSchedule(compile_id_of(meta), [str(op) for op in ops]),)


@parser("dynamo_cpp_guards_str", payload=True)
def _parse_guards(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    return (Guards(compile_id_of(meta), payload or ""),)


@parser("artifact:torch_version", payload=True)
def _parse_torch_version(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    # Written once per TORCH_TRACE file; lets a trace census say which torch produced it.
    value = load_json(payload or "{}")
    return (RunInfo({"torch_version": str(value["pytorch_version"])}),) if isinstance(value, dict) and value.get("pytorch_version") else ()


_USER_FRAME_RE = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (\S+))?[^\n]*(?:\n(?!\s*File ")([^\n]*))?', re.M)


def error_frames(message: str) -> list[StackFrame]:
    """The "from user code:" frames of a Dynamo error's text, outermost first, with their code
    (none when the text has no such section)."""
    _, sep, user = (message or "").partition("from user code:")
    return [StackFrame(f, int(n), fn or "?", code.strip()) for f, n, fn, code in _USER_FRAME_RE.findall(user)] \
        if sep else []


@parser("artifact:dynamo_error", payload=True)
def _parse_dynamo_error(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    if "from user code:" not in (payload or ""):
        return ()
    frames = error_frames(payload or "")
    return (FrameError(compile_id_of(meta), [(f.file, f.line) for f in frames], frames),)


@parser("graphstitch_graph", payload=False)
def _parse_backend_graph(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    g = meta["graphstitch_graph"]
    return (BackendGraph(str(g["compile_id"]), int(g["op_count"]), list(g.get("ops") or [])),)


@parser("graphstitch_run", payload=False)
def _parse_run(dec: Decoder, meta: dict[str, Any], payload: str | None) -> Iterable[DecodedEvent]:
    return (RunInfo(dict(meta["graphstitch_run"])),)


# ----------------------------------------------------------------------------- decoding

@dataclass
class Decoder:
    """Turns records into events; holds per-stream state (the string intern table)."""
    intern: dict[int, str] = field(default_factory=dict)
    records: int = 0
    malformed: int = 0
    ranks: set[int] = field(default_factory=set)
    # One trace file may hold several runs (torch._dynamo.reset() restarts frame ids at 0, or
    # logs were concatenated): a compile id starting again, or a second torch_version header
    # after compiles, starts a new run, whose compile ids get the prefix "rN:".
    split_runs: bool = False
    run: int = 0
    _started: set[str] = field(default_factory=set)

    def frame(self, s: dict[str, Any]) -> StackFrame:
        f = s.get("filename")
        if isinstance(f, int):
            f = self.intern.get(f, f"<interned {f}>")
        return StackFrame(str(f), _int(s.get("line")) or 0, str(s.get("name", "?")), str(s.get("loc") or ""))

    def wants_payload(self, meta: dict[str, Any]) -> bool:
        p = PARSERS.get(dispatch_key(meta) or "")
        return bool(p and p.wants_payload)

    def decode(self, rec: Record) -> list[DecodedEvent]:
        self.records += 1
        if isinstance(rec.meta.get("rank"), int):  # traces are untrusted: anything may be there
            self.ranks.add(rec.meta["rank"])
        p = PARSERS.get(dispatch_key(rec.meta) or "")
        if p is None:
            return []
        try:
            events = list(p.fn(self, rec.meta, rec.payload))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError):
            self.malformed += 1
            return []
        if self.split_runs:
            self._runs(events)
        return events

    def _runs(self, events: list[DecodedEvent]) -> None:
        for ev in events:
            if isinstance(ev, FrameStart) and ev.compile_id != UNKNOWN_COMPILE_ID:
                if ev.compile_id in self._started:
                    self.run, self._started = self.run + 1, set()
                self._started.add(ev.compile_id)
            elif isinstance(ev, RunInfo) and "torch_version" in ev.data and self._started:
                self.run, self._started = self.run + 1, set()
        if self.run:
            for ev in events:
                cid = getattr(ev, "compile_id", None)
                if isinstance(cid, str) and cid != UNKNOWN_COMPILE_ID:
                    ev.compile_id = f"r{self.run}:{cid}"  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- trace text

def format_record(meta: dict[str, Any], payload: str | None) -> str:
    """One record in TORCH_TRACE's line format (glog-style prefix, JSON, tab-indented payload)."""
    line = "V0000 00:00:00.000000 0 graphstitch:0] " + json.dumps(meta, default=str)
    if payload is not None:
        line += "".join("\n\t" + ln for ln in payload.split("\n"))
    return line + "\n"


_ARTIFACT_HEAD = '{"artifact": {"name": "'


def _unwanted(raw: str, at: int) -> bool:
    """True when the header at RAW[AT:] is surely of a kind no parser wants, judged from its
    first key without decoding the JSON (trace_structured writes the kind key first; any
    other layout is decoded in full)."""
    if not raw.startswith('{"', at):
        return False
    end = raw.find('"', at + 2)
    key = raw[at + 2:end] if end > 0 else ""
    if not key or "\\" in key or key in CONTEXT_KEYS:
        return False
    if key == "artifact":
        if not raw.startswith(_ARTIFACT_HEAD, at):
            return False
        end = raw.find('"', at + len(_ARTIFACT_HEAD))
        name = raw[at + len(_ARTIFACT_HEAD):end] if end > 0 else ""
        return bool(name) and "\\" not in name and f"artifact:{name}" not in PARSERS
    return key not in PARSERS


_MD5_RE = re.compile(r"^[0-9a-f]{32}$")


def _finished(meta: dict[str, Any], chunks: list[str], want: bool, dec: Decoder, *, last: bool) -> Record | None:
    """The record whose header and payload lines have all been read. The LAST record of the
    input is where a log is cut (a process killed while writing): it is None (malformed) when
    its payload does not match the md5 torch wrote in ``has_payload``. Earlier records are
    complete by construction; a mismatch there is an edit (paths rewritten), not a cut."""
    if not (want and "has_payload" in meta):
        return Record(meta, None)
    payload = "\n".join(chunks)
    digest = meta["has_payload"]
    if last and isinstance(digest, str) and _MD5_RE.match(digest) and \
            hashlib.md5(payload.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest() != digest:
        dec.malformed += 1
        return None
    return Record(meta, payload)


def iter_trace_records(lines: Iterable[str], dec: Decoder) -> Iterator[Record]:
    """Stream records out of TORCH_TRACE text; payloads no parser wants are skipped unjoined,
    and headers of kinds no parser wants are counted on ``dec.records`` but not decoded.

    Malformed header lines (of wanted kinds: not JSON, cut short, nested too deeply) and a
    last wanted payload that fails torch's md5 (a cut log) are counted on ``dec.malformed``
    and skipped.
    """
    meta: dict[str, Any] | None = None
    want = False
    chunks: list[str] = []
    for raw in lines:
        if raw.startswith("\t"):
            if meta is not None and want:
                chunks.append(raw[1:].rstrip("\n"))
            continue
        if not raw.strip():
            continue   # noise, not a record: a payload around it goes on
        if meta is not None:
            if (rec := _finished(meta, chunks, want, dec, last=False)) is not None:
                yield rec
            meta, chunks = None, []
        i = raw.find("] {")
        if i >= 0 and _unwanted(raw, i + 2):
            dec.records += 1  # most records (chromium events, tensor descriptions): no json.loads
            continue
        try:
            m = load_json(raw[i + 2:]) if i >= 0 else None
        except ValueError:
            m = None
        if not isinstance(m, dict):
            dec.malformed += 1
            continue
        meta, want = m, dec.wants_payload(m)
    if meta is not None and (rec := _finished(meta, chunks, want, dec, last=True)) is not None:
        yield rec
