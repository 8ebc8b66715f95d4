"""The typed data model every command and renderer reads: the Census and its parts.

The README's "Definitions" section says what each part means; ``analysis.py`` builds a
Census from trace events, ``changes.py`` compares two. The identity of a break site across
runs, checkouts and line shifts is :class:`SiteId` (and :class:`FrameId` for a skipped
frame); every consumer (gate, fix, ranks, HTML, SARIF, Markdown, JSON) matches on them.

JSON is generated from these dataclasses (``jsonio.to_json``); totals that are derived
(``graph_count``...) are properties listed in ``__computed__`` so the JSON and its schema
carry them while nothing can set them out of step. No torch import.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from . import __version__

SCHEMA = "graphstitch.census/2"
LOOP_GB = "GB7000"  # "graph break in loop": Dynamo skips the whole frame
UNKNOWN_GB = "GB????"   # in identities and JSON; people read gb_text()


def gb_text(gb_id: str) -> str:
    """A GB id as people read it: a break report without one says so in words."""
    return "no GB id" if gb_id == UNKNOWN_GB else gb_id


def normalize_code(code: str) -> str:
    """Source text with whitespace collapsed: what a site's identity keeps of its line."""
    return re.sub(r"\s+", " ", code or "").strip()


# ----------------------------------------------------------------------------- identity

@dataclass(frozen=True, order=True)
class SiteId:
    """A break site's identity across runs: root GB id + where the file is (project-relative,
    or the module path for installed code) + function + the normalized text of its line.

    The line number is not part of it (an edit above a site does not move it); when the same
    text breaks at several lines of one function, ``occurrence`` counts them in line order.
    Without source text (a trace from elsewhere), the line is the only anchor left.
    """
    gb_id: str
    path: str
    function: str
    code: str
    occurrence: int = 1

    def __str__(self) -> str:
        n = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.gb_id} {self.path} {self.function}: {self.code}{n}"

    def without_gb(self) -> tuple[str, str, str, int]:
        """The identity when GB ids cannot be trusted (another torch may renumber them)."""
        return (self.path, self.function, self.code, self.occurrence)


@dataclass(frozen=True, order=True)
class FrameId:
    """A skipped frame's identity across runs: file (as in SiteId) + function (+ occurrence
    when one file has several skipped functions of that name)."""
    path: str
    function: str
    occurrence: int = 1

    def __str__(self) -> str:
        n = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.function} in {self.path}{n}"


# Recompile cause kinds (``RecompileCause.kind``). Avoidable ones have fixes `fix` tries; the
# others must recompile (a different graph by design) and are explained with their count.
AVOIDABLE_KINDS = ("shape", "scalar", "attribute", "object")
EXPECTED_KINDS = {
    "dtype": "a different dtype is a different graph; convert inputs once before the call if it is not meant",
    "device": "a different device is a different graph",
    "requires_grad": "requires_grad changes what autograd records: a different graph",
    "rank": "a different number of dimensions is a structurally different input",
    "dispatch": "a different dispatch key set (e.g. a subclass or inference tensor) is a different graph",
    "training": "train and eval mode run different code (dropout, batch-norm statistics)",
    "global_state": "grad mode, autocast or default dtype changed around the call: a different graph",
    "constant": "a string, bool or None value picks the code path: each value is its own graph",
    "type": "an object of another type is a structurally different input",
    "code": "a different function (another code object) is different code: each is its own graph",
    "length": "a list or tuple of another length is a structurally different input",
}


@dataclass(frozen=True, order=True)
class CauseId:
    """A recompile cause's identity across runs: the frame it recompiled (identity path +
    function of the first frame it hit), the guard's kind and what the guard reads (an
    input, ``x dim 0``, an attribute), never the guarded value."""
    path: str
    function: str
    kind: str
    subject: str

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} in {self.function} ({self.path})"


# ----------------------------------------------------------------------------- errors

class ErrorKind(str, enum.Enum):
    """Why a run did not complete. Every value is documented in the README."""
    TARGET = "target"        # bad target: file/module/factory missing, import failed, factory raised or returned the wrong shape
    EAGER = "eager"          # the calls fail eagerly too: the target's own bug
    COMPILED = "compiled"    # a call fails only when compiled (compile error, or compiled-only run-time error)
    EXIT = "exit"            # the target or script exited early (sys.exit / os._exit) with a code
    SCRIPT = "script"        # a script (run, ranks --script) raised an uncaught exception
    CRASH = "crash"          # the process died (signal) or ended without finishing
    TIMEOUT = "timeout"      # still running at --timeout; killed
    STOPPED = "stopped"      # a rank the launcher stopped after another rank failed
    PATCH = "patch"          # a fix candidate could not be applied (its hatch refused the function)
    CAPTURE = "capture"      # graphstitch could not verify its own capture (records missing, unknown layout)


@dataclass
class ErrorInfo:
    kind: ErrorKind
    message: str
    type: str | None = None          # the exception's type name
    where: str | None = None         # file:line, the user's frame where it could be told
    code: int | None = None          # exit code (kind exit / crash)
    at: float | None = None          # wall-clock time it happened (orders failing ranks)

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> ErrorInfo:
        """From a run record (a trace may carry anything: unknown kinds read as crash)."""
        try:
            kind = ErrorKind(d.get("kind"))
        except ValueError:
            kind = ErrorKind.CRASH
        opt = lambda k, t: t(d[k]) if isinstance(d.get(k), (str, int, float)) else None
        return cls(kind, str(d.get("message") or ""), opt("type", str), opt("where", str), opt("code", int),
                   opt("at", float))

    @property
    def headline(self) -> str:
        """The first line of the message (terminal, one-line errors)."""
        lines = self.message.strip().splitlines()
        return lines[0] if lines else ""


# ----------------------------------------------------------------------------- parts

@dataclass
class StackEntry:
    file: str
    line: int
    function: str
    code: str = ""
    qualname: str = ""        # co_qualname read from the source (Class.method); "" when not found

    @property
    def name(self) -> str:
        return self.qualname or self.function


@dataclass
class Advice:
    strategy: str             # a family of advice.STRATEGIES
    summary: str              # one line naming the user's function and line
    detail: str = ""
    before: str | None = None
    after: str | None = None
    curated: bool = False


@dataclass
class Graph:
    compile_id: str
    file: str
    line: int
    function: str
    op_count: int | None
    ops: list[str] = field(default_factory=list)          # live runs only
    collectives: list[str] = field(default_factory=list)  # collective ops in graph order
    # The order Inductor's compiled code runs its collectives in (its `inductor_collective_schedule`
    # artifact; None when the log has none for this graph, e.g. another backend).
    schedule: list[str] | None = None
    qualname: str = ""        # the frame's function as co_qualname (Class.method), "" when not found


@dataclass
class Route:
    """One way the code reaches a site (see owners.py): the owner frame, the first frame in
    the user's project on the way down (or, with none, where the call entered code outside
    torch), and the library chain from it to the root cause (the site's own line)."""
    owner: StackEntry
    in_project: bool
    chain: list[StackEntry] = field(default_factory=list)   # below the owner, down to the root cause
    events: int = 1
    frames: list[StackEntry] = field(default_factory=list)  # every frame outside torch/stdlib, outermost first


@dataclass
class Site:
    id: SiteId
    gb_id: str
    gb_type: str
    file: str
    line: int                 # where it is now (a hint; not part of the identity)
    function: str
    code: str                 # the user's source line, as the traceback showed it
    events: int
    nesting_depth: int = 1
    frame_skipped: bool = False
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    stack: list[StackEntry] = field(default_factory=list)  # user-code traceback of the first report, outermost first
    compile_ids: list[str] = field(default_factory=list)
    gb_chain: list[str] = field(default_factory=list)      # every GB id of the first report, root first
    advice: list[Advice] = field(default_factory=list)
    # Inferred, not reported: the log has no break reports (torch before 2.6 wrote none), so the
    # site comes from a resume function's name (torch_dynamo_resume_in_FN_at_LINE) and restarts.
    approximate: bool = False
    routes: list[Route] = field(default_factory=list)      # owner frames reaching this root cause, most events first
    next_step: NextStep | None = None
    qualname: str = ""        # function as co_qualname (Class.method); `function` stays the identity's name

    @property
    def name(self) -> str:
        return self.qualname or self.function

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def owner(self) -> Route | None:
        return self.routes[0] if self.routes else None


@dataclass
class RecompileCause:
    reason: str               # normalized guard failure, values stripped (the identity)
    count: int                # recompiles it caused, across frames and resume functions
    frames: list[str] = field(default_factory=list)
    compile_ids: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # raw reasons as Dynamo wrote them (first few)
    advice: list[str] = field(default_factory=list)
    compile_seconds: float = 0.0   # what the recompiles of this cause cost to compile
    fan_out: str = ""              # why one changed input recompiled several frames (resume functions)
    names: dict[str, str] = field(default_factory=dict)   # frame -> the tensor's name in that frame
    id: CauseId | None = None      # identity (frame, kind, subject); None for a trace without reasons
    kind: str = "other"            # shape, scalar, attribute, object, dtype, training, constant, ... (CAUSE_KINDS)
    subject: str = ""              # what the guard reads: "x dim 0", "scale", "self.steps"
    # The user line that made the guarded value (the argument's frame, the .item(), the
    # attribute's assignment) and, when a break handed the value to a resume function, that site.
    provenance: StackEntry | None = None
    site: SiteId | None = None
    expected: str = ""             # why it must recompile (train/eval, dtype...): explained, never "fixed"
    repeats: int = 0               # of ``count``, recompiles during repeat passes (identical calls again)
    checks: int = 0                # of ``count``, recompiles during graphstitch's fresh-input check (`fix` trials)
    calls: list[int] = field(default_factory=list)   # the call (0-based, first pass) each recompile happened in


@dataclass
class LimitHit:
    """A frame that hit recompile_limit (or the accumulated limit): from that call on, every
    call no cache entry matches runs that frame eagerly, silently."""
    compile_id: str
    file: str
    line: int
    function: str
    limit: str                # "recompile_limit" | "accumulated_recompile_limit"
    reason: str
    call: int | None = None   # the call (0-based) that hit it; None in a trace
    eager_calls: int | None = None   # calls from the hit to the end of the run (each may run eagerly)
    repeat: bool = False      # hit during a repeat pass


@dataclass
class SkippedFrame:
    id: FrameId
    compile_id: str
    file: str
    line: int                 # where tracing of this frame stopped (in this frame, not in a callee)
    function: str
    fail_type: str
    reason: str
    qualname: str = ""        # the function that ran eagerly, as co_qualname (Class.method)
    resumed_at: int | None = None   # a resume function: the line after which Dynamo resumed the frame
    start: int | None = None        # the frame's code: resume point (or def) ...
    end: int | None = None          # ... to the function's last line (None: source not here)

    @property
    def name(self) -> str:
        return self.qualname or self.function


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
    qualname: str = ""        # original function as co_qualname (a resume function: the function it resumes)


@dataclass
class SideEffects:
    call: int
    eager: list[str]
    compiled: list[str]


@dataclass
class Checks:
    """`graphstitch fix` trials: a fresh random input set, and what each call printed/logged."""
    fresh_outputs_match: bool | None = None
    fresh_mismatch: str | None = None
    fresh_error: str | None = None
    side_effects_kept: bool | None = None
    side_effects: SideEffects | None = None
    # The original code itself fails on every fresh input set tried: nothing fresh can be
    # compared, so a trial proves equality on the factory's calls only (and says so).
    fresh_unusable: str | None = None
    # The factory's own calls, run again warm: printed/logged the same as the original's
    # eager run (None: not compared, e.g. a generator argument cannot run twice).
    given_effects_kept: bool | None = None

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Checks:
        flag = lambda k: d[k] if isinstance(d.get(k), bool) else None
        text = lambda k: str(d[k]) if d.get(k) is not None else None
        se = d.get("side_effects")
        effects = SideEffects(int(se.get("call", 0)), [str(x) for x in se.get("eager", [])],
                              [str(x) for x in se.get("compiled", [])]) if isinstance(se, dict) else None
        return cls(flag("fresh_outputs_match"), text("fresh_mismatch"), text("fresh_error"),
                   flag("side_effects_kept"), effects, text("fresh_unusable"), flag("given_effects_kept"))


@dataclass
class TraceStats:
    records: int = 0
    malformed: int = 0
    files: int | None = None          # trace files read (`trace`)
    bytes: int | None = None
    runs: int | None = None           # runs found in the files (a file may hold several; see traces.py)
    unreadable: list[str] = field(default_factory=list)


@dataclass
class NextStep:
    """The one thing to do next about a site, and the command that proves it worked."""
    action: str
    command: str
    differs_from_dynamo: str = ""   # why it is not Dynamo's own hint, when it is not


@dataclass
class Spread:
    """Median and interquartile range of timing samples, seconds."""
    median_s: float
    q1_s: float
    q3_s: float
    samples: int


@dataclass
class Region:
    """One stretch of a warm call, in order: a compiled graph, or eager code between graphs."""
    kind: str                 # "graph" | "gap"
    median_s: float
    compile_id: str | None = None   # graph: its compile id; gap: the graph it follows (None: call start)
    site: SiteId | None = None      # gap: the break site it is attributed to


@dataclass
class SiteCost:
    site: SiteId
    seconds: Spread           # eager gap time per call attributed to this site
    share: float              # of the compiled call's median
    gain_s: float             # estimated saving per call if the gap's code joined its neighbours
    gaps: int                 # gaps per call attributed to it


@dataclass
class Cost:
    """`census --cost`: a warm call's compiled regions and eager gaps, each gap attributed to
    the break site that caused it; measured alternately with eager calls, several rounds."""
    device: str
    rounds: int
    stable: bool
    call: Spread              # one compiled pass over the factory's calls
    eager: Spread | None      # the same pass run eagerly (alternating)
    graphs: Spread            # time inside compiled graphs per pass
    gaps: Spread              # time in eager gaps per pass
    sites: list[SiteCost] = field(default_factory=list)      # most seconds first
    unattributed: Spread | None = None                       # gaps before the first break (guards, prologue)
    regions: list[Region] = field(default_factory=list)      # the timeline of one pass, medians


@dataclass
class LineSpan:
    start: int
    end: int                  # inclusive


@dataclass
class Untraced:
    """Code that ran eagerly without Dynamo tracing it: a break there is never reported, so
    the census cannot count it. ``why``: ``skipped`` (the rest of a frame Dynamo gave up on,
    e.g. after a break in a loop) or ``disabled`` (a function under torch.compiler.disable)."""
    file: str
    path: str                 # identity path (as in SiteId)
    function: str             # co_qualname
    start: int
    end: int | None           # None: the source is not on this machine (extent unknown)
    lines: int                # code lines in it (blank and comment-only lines not counted)
    why: str
    reason: str               # one line: what Dynamo did and where
    fingerprint: str = ""     # hash of its code text: the gate sees a change there
    compile_id: str | None = None

    @property
    def where(self) -> str:
        return f"{self.start}-{self.end}" if self.end is not None and self.end != self.start else str(self.start)


@dataclass
class FunctionCoverage:
    """One user function Dynamo met: the lines it traced and those that ran eagerly untraced."""
    file: str
    function: str             # co_qualname
    first_line: int
    last_line: int | None
    traced: list[LineSpan] = field(default_factory=list)
    untraced: list[LineSpan] = field(default_factory=list)
    compile_ids: list[str] = field(default_factory=list)


@dataclass
class Coverage:
    """What Dynamo traced (README "Definitions": coverage). ``untraced`` lists each stretch of
    code that ran without being traced; ``functions`` each user function met, with its spans."""
    functions: list[FunctionCoverage] = field(default_factory=list)
    untraced: list[Untraced] = field(default_factory=list)

    @property
    def lines(self) -> int:
        return sum(u.lines for u in self.untraced)

    @property
    def function_count(self) -> int:
        return len({(u.file, u.function) for u in self.untraced})

    @property
    def extent_known(self) -> bool:
        return all(u.end is not None for u in self.untraced)


# ----------------------------------------------------------------------------- census

@dataclass
class Census:
    target: str | None = None
    torch_version: str | None = None
    project_root: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    # Did the run reach its end? True: every call (or the script) finished; False: it stopped
    # early (error says how); None: unknown (a trace of someone else's run).
    completed: bool | None = None
    graphs: list[Graph] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    recompiles: list[RecompileCause] = field(default_factory=list)
    skipped_frames: list[SkippedFrame] = field(default_factory=list)
    frames: list[FrameCompile] = field(default_factory=list)
    guards: dict[str, str] = field(default_factory=dict)   # compile id -> Dynamo's guard tree text
    outputs_match_eager: bool | None = None
    output_mismatch: str | None = None
    error: ErrorInfo | None = None
    checks: Checks = field(default_factory=Checks)
    trace_stats: TraceStats = field(default_factory=TraceStats)
    # What graphstitch doubts about its own capture (an unparsed break report, counters that
    # disagree with the records); an unusable capture is error kind "capture" instead.
    warnings: list[str] = field(default_factory=list)
    project: str | None = None       # where "your code" is (owner frames); None: project_root
    semantics: str = "default"       # "default" or "fullgraph" (what a fullgraph=True compile would fail on)
    cost: Cost | None = None         # `census --cost`
    coverage: Coverage = field(default_factory=Coverage)   # code Dynamo traced, and code it never did
    # What the target printed (stdout + stderr, its last 4000 characters) when the census has
    # an error: a subprocess census captures it instead of letting it scroll past.
    output: str | None = None

    limit_hits: list[LimitHit] = field(default_factory=list)   # reported first in every output
    repeat_passes: int = 0           # identical passes over the calls after the first (guards, fix trials)

    __computed__: ClassVar[tuple[str, ...]] = (
        "schema", "graphstitch_version", "graph_count", "break_site_count", "break_events",
        "recompile_count", "first_pass_recompiles", "compile_seconds", "untraced_lines", "untraced_functions", "clean",
        "summary")

    @property
    def schema(self) -> str:
        return SCHEMA

    @property
    def graphstitch_version(self) -> str:
        return __version__

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_site_count(self) -> int:
        return len(self.sites)

    @property
    def break_events(self) -> int:
        return sum(s.events for s in self.sites)

    @property
    def recompile_count(self) -> int:
        return sum(c.count for c in self.recompiles)

    @property
    def compile_seconds(self) -> float:
        return round(sum(f.compile_seconds for f in self.frames), 6)

    @property
    def untraced_lines(self) -> int:
        return self.coverage.lines

    @property
    def untraced_functions(self) -> int:
        return self.coverage.function_count

    @property
    def first_pass_recompiles(self) -> int:
        """Recompiles over the factory's calls, the first time (not repeats, not graphstitch's checks)."""
        return sum(r.count - r.repeats - r.checks for r in self.recompiles)

    @property
    def clean(self) -> bool:
        """"No graph breaks." is known: no site, the run completed (or the trace is someone
        else's whole run), nothing went wrong, capture included, and Dynamo traced all the code
        that ran (a break in untraced code is never reported)."""
        return (not self.sites and not self.skipped_frames and not self.coverage.untraced and self.error is None
                and self.completed is not False)

    @property
    def coverage_note(self) -> str:
        """"M lines in F functions were never traced (breaks there are not counted)", or ""."""
        if not self.coverage.untraced:
            return ""
        n, f = self.untraced_lines, self.untraced_functions
        lines = f"{'at least ' if not self.coverage.extent_known else ''}{n} line{'s' if n != 1 else ''}"
        return (f"{lines} in {f} function{'s' if f != 1 else ''} {'was' if n == 1 else 'were'} never traced "
                "(breaks there are not counted)")

    @property
    def summary(self) -> str:
        """One sentence of what is known; every renderer prints this, none re-derives it."""
        if self.clean:
            return "No graph breaks." if self.completed else "No graph breaks in this trace."
        n, ev = len(self.sites), self.break_events
        found = f"{n} break site{'s' if n != 1 else ''} ({ev} break event{'s' if ev != 1 else ''})"
        # Untraced code makes the count a lower bound: the same sentence says so.
        note = f"; {self.coverage_note}" if self.coverage_note else ""
        if self.error is None:
            if note:
                return f"{found} found{note}."
            return found + "." if n else f"{len(self.skipped_frames)} frame(s) skipped by Dynamo."
        e = self.error
        where = f" at {e.where}" if e.where else ""
        if e.kind is ErrorKind.EXIT:
            what = e.headline + (f" ({e.where})" if e.where else "")
        elif e.kind is ErrorKind.COMPILED:
            what = f"compile failed{where}: {e.headline}"
        elif e.kind is ErrorKind.CAPTURE:
            what = f"graphstitch could not verify its capture: {e.headline}"
        else:
            what = f"{e.kind.value}{where}: {e.headline}"
        if n:
            return f"{found} before the run stopped: {what}{note}."
        if not self.graphs:
            return f"Incomplete, no graph compiled: {what}{note}."
        return f"Incomplete, no break seen in {self.graph_count} graph(s) before {what}{note}."

    def site(self, sid: SiteId) -> Site | None:
        return next((s for s in self.sites if s.id == sid), None)

    def to_dict(self) -> dict[str, Any]:
        from .jsonio import to_json
        out: dict[str, Any] = to_json(self)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Census:
        """Validated: a wrong type raises jsonio.JSONError (one line)."""
        from .jsonio import from_json
        return from_json(cls, d)
