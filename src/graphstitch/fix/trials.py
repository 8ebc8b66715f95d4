"""`graphstitch fix` trials: every candidate as its own census in a fresh worker, and the
verdict on each, read from ``changes.diff`` of the baseline census and the trial's.

Verified = the site is gone, no new site (a moved break is not a removed one) and no new
skipped frame appeared, outputs equal eager on the factory's calls and on a fresh random
input set, and what the code prints/logs per call at run time is unchanged.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import queue
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .. import procs, worker
from ..advice import advise
from ..changes import diff, site_label
from ..files import file_hash, parse_python, reads_clock, source_text
from ..model import CauseId, Census, ErrorInfo, ErrorKind, Site, SiteId, StackEntry
from ..paths import in_project
from ..perf.timing import LatencyStats
from ..records import error_frames
from ..targets import Options, Patches, target_file
from .candidates import INVASIVENESS, Candidate, candidates, flags_together
from .rules import STRATEGY_RANK, Rewrite, proposals, tried_late, user_frames
from .workspace import Workspace, home_file, unified_diff, with_config, with_hatch

# Dynamo traces NumPy's random functions in compiled code on torch's generator
# (torch._dynamo.config.use_numpy_random_stream is off by default): code that draws from
# NumPy gets other numbers compiled than eagerly, and no fix of it can be judged against
# eager. With the flag the draws run on NumPy's own stream (each one a break), so `fix`
# keeps the flag in its baseline and in every trial and patch when it restores eager outputs.
NUMPY_STREAM = {"use_numpy_random_stream": True}
_NUMPY_RANDOM = re.compile(r"\b(np|numpy)\.random\.")

# Dynamo traces NumPy calls as tensor ops (torch._dynamo.config.trace_numpy). Library code
# that uses NumPy for what tensors cannot express (SciPy's sparse matrices viewing an array
# as `np.matrix`) then fails to compile, outside the user's code, where no hatch of theirs
# reaches: the compiled run never completes and no fix can be judged. When the failing
# frames Dynamo names call NumPy, `fix` tries a baseline with NumPy calls left to Python
# (each one a break) and keeps it, in every trial and patch, when that run completes.
NUMPY_OFF = {"trace_numpy": False}
_NUMPY_CALL = re.compile(r"\b(np|numpy)\.\w+")

# The factory fixes a run's inputs and seeds, not the clock: code that reads one may take
# another branch, or Dynamo may specialise on another int, in each run, so a site can be in
# one census and not in the next (seq2seq's epoch timer moved a format-string break between
# two prints). Such code gets this many more baseline censuses, beside the first trials; a
# site whose count differs between them is unreproduced, and no trial can show it removed.
CLOCK_REPEATS = 2

# The candidate kinds `fix` tries unless told otherwise: those it can write as source.
WRITTEN_KINDS = frozenset({"rewrite", "caller", "extract", "split", "config", "nonstrict_trace", "disable"})


@dataclass
class Counts:
    graphs: int
    sites: int
    break_events: int
    skipped_frames: int
    recompiles: int = 0       # in the first pass over the factory's calls
    limit_hits: int = 0
    # How much code compiles: the ops of each compiled frame (its largest graph, so that a
    # recompile does not count twice), summed over the frames.
    ops: int = 0

    @classmethod
    def of(cls, c: Census) -> Counts:
        per_frame: dict[tuple[str, int, str], int] = {}
        for g in c.graphs:
            key = (g.file, g.line, g.qualname or g.function)
            per_frame[key] = max(per_frame.get(key, 0), g.op_count or 0)
        return cls(c.graph_count, len(c.sites), c.break_events, len(c.skipped_frames),
                   c.first_pass_recompiles, len(c.limit_hits), sum(per_frame.values()))


@dataclass
class Measure:
    """`fix --measure`: steady-state latency before and after the fix, alternating."""
    backend: str
    before: LatencyStats | None = None
    after: LatencyStats | None = None
    speedup: float | None = None       # before / after
    stable: bool | None = None
    error: str | None = None


@dataclass
class Fix:
    """One (site, candidate) trial: what it proved."""
    site: SiteId
    label: str                       # "GBxxxx path:line", for people
    candidate: str
    kind: str                        # "config" or a hatch name
    patches: Patches
    verified: bool
    before: Counts
    after: Counts
    site_gone: bool
    outputs_match: bool
    side_effects_kept: bool | None
    wrapped: str | None = None       # module:qualname the hatch went on
    new_sites: list[str] = field(default_factory=list)
    new_skipped_frames: list[str] = field(default_factory=list)
    error: ErrorInfo | None = None
    why_not: list[str] = field(default_factory=list)   # empty when verified
    measure: Measure | None = None
    strategy: str = "hatch"          # rewrite > caller > extract (+ hatch) = hatch > split > config
    tradeoff: str = ""               # one line: what the candidate costs
    rule: str | None = None          # a source rewrite's rule id
    patch: str | None = None         # a source rewrite's unified diff (relative paths)
    ranks: int | None = None         # also run on this many gloo ranks (`graphstitch ranks`' launcher)
    uncovered: list[str] = field(default_factory=list)   # new sites in code Dynamo never traced before: progress
    upstream: bool = False           # a patch to a file outside the project: offered to send, never written
    given_inputs_only: str | None = None  # why no fresh input set could be compared (outputs proved on the factory's calls)
    output: str | None = None        # an errored trial's own stdout/stderr (its tail): why it failed
    via: SiteId | None = None        # proposed for this other site; its trial removed this one too
    gap_code: list[str] = field(default_factory=list)   # a split grown from its trial: these lines joined its gap


@dataclass
class CauseFix:
    """One (recompile cause, candidate) trial: what it proved."""
    cause: CauseId
    label: str                       # "shape x dim 0 in rowsum (recompiles.py)"
    candidate: str
    kind: str                        # mark_dynamic, maybe_mark_dynamic, tensor_arg, buffer, config, rewrite
    strategy: str                    # caller (at the call site) > rewrite > config
    verified: bool
    before: Counts
    after: Counts
    recompiles_before: int           # this cause's recompiles
    recompiles_after: int
    cause_gone: bool
    repeat_stable: bool              # a repeat pass over the same calls recompiled nothing
    outputs_match: bool
    side_effects_kept: bool | None
    new_sites: list[str] = field(default_factory=list)
    new_skipped_frames: list[str] = field(default_factory=list)
    new_causes: list[str] = field(default_factory=list)
    why_not: list[str] = field(default_factory=list)
    tradeoff: str = ""
    rule: str | None = None
    patch: str | None = None         # unified diff (relative paths)
    given_inputs_only: str | None = None


@dataclass
class Explained:
    """A cause with no fix to try, and why: it must recompile (expected), or its fix is one
    graphstitch does not write (hoisting an object out of a loop)."""
    cause: CauseId
    count: int
    expected: bool
    reason: str


@dataclass
class Refused:
    """A rewrite rule that recognised the site's pattern but offers no patch, and why."""
    site: SiteId
    rule: str
    reason: str


@dataclass
class Unreproduced:
    """A break site that is in some baseline censuses of the unchanged code and not in others."""
    site: SiteId
    label: str           # "GBxxxx path:line", for people
    seen: int            # baseline censuses that have it
    runs: int            # baseline censuses run


@dataclass
class FixReport(Census):
    """`graphstitch fix --json`: the baseline census (with advice) and every trial."""
    fixes: list[Fix] = field(default_factory=list)
    source_sha256: dict[str, str] = field(default_factory=dict)   # files hashed at the census (--apply refuses changed ones)
    refused: list[Refused] = field(default_factory=list)          # rewrite rules that matched a site but proposed nothing
    no_candidate: list[Refused] = field(default_factory=list)     # sites with no candidate at all, and why
    cause_fixes: list[CauseFix] = field(default_factory=list)     # recompile-cause trials, best first per cause
    explained: list[Explained] = field(default_factory=list)      # causes that must recompile, or have no patch to write
    unreproduced: list[Unreproduced] = field(default_factory=list)  # sites the baseline censuses disagree on (CLOCK_REPEATS)
    repeats_failed: int = 0       # repeat baseline censuses that did not run to the end: their sites were not compared
    census_seconds: float | None = None                           # wall time of the baseline census
    trials_seconds: float | None = None                           # wall time of all trials (with -j)

    @property
    def schema(self) -> str:
        return "graphstitch.fix/2"

    @classmethod
    def of(cls, c: Census) -> FixReport:
        return cls(**{f.name: getattr(c, f.name) for f in dataclasses.fields(Census)})

    def fixes_for(self, sid: SiteId) -> list[Fix]:
        return [f for f in self.fixes if f.site == sid]


def break_key(s: Site) -> tuple[str, str, str]:
    """A break as a patch sees it: its GB id on a line of code in a file, whatever function
    holds that line now or where (a region split or an extract moves statements into new
    functions; their other sites go along)."""
    return s.id.gb_id, s.id.path, s.code.strip()


def site_remains(base: Census, trial: Census, site: Site) -> bool:
    """Is SITE still there in TRIAL: as many breaks of its key as in BASE (the same line of
    code can break at several places: one fewer means this one went)."""
    key = break_key(site)
    return sum(break_key(s) == key for s in trial.sites) >= sum(break_key(s) == key for s in base.sites)


def new_breaks(base: Census, trial: Census) -> list[Site]:
    """TRIAL's breaks beyond BASE's, by key (relocated breaks are not new): for a key with
    more breaks than before, the excess ones (those whose identity BASE does not have first)."""
    left = Counter(break_key(s) for s in base.sites)
    known = {s.id for s in base.sites}
    out = []
    for s in sorted(trial.sites, key=lambda s: s.id not in known):
        k = break_key(s)
        if left[k] > 0:
            left[k] -= 1
        else:
            out.append(s)
    return out


Reader = Callable[[str], str]


def untraced_code(base: Census, read: Reader = source_text) -> dict[str, set[str]]:
    """file -> the (stripped) lines Dynamo never traced in BASE: the census's coverage (the
    rest of a frame it skipped, e.g. after a break in a loop, and bodies under
    torch.compiler.disable; README "Definitions"). READ gives the text BASE's line numbers
    refer to (the workspace may have patched the file since)."""
    out: dict[str, set[str]] = {}
    for u in base.coverage.untraced:
        if u.end is None:
            continue
        try:
            lines = read(u.file).splitlines()[u.start - 1:u.end]
        except (OSError, ValueError):
            continue
        out.setdefault(os.path.realpath(u.file), set()).update(ln.strip() for ln in lines if ln.strip())
    return out


def _frames(s: Site) -> list[StackEntry]:
    frames = user_frames(s)
    if not frames or (frames[-1].file, frames[-1].line) != (s.file, s.line):
        frames.append(StackEntry(s.file, s.line, s.function, s.code))
    return frames


def uncovered(base: Census, s: Site, untraced: dict[str, set[str]]) -> bool:
    """Is S a break in code BASE never traced (``untraced_code``)? Then it is progress: fixing
    the break that hid it let Dynamo see it. Its line is matched by text, so a statement a
    patch moved into a new function (a region split) still counts, and its function must not
    have compiled a graph in BASE."""
    if (os.path.realpath(s.file), s.function) in {(os.path.realpath(g.file), g.function) for g in base.graphs}:
        return False
    return s.code.strip() in untraced.get(os.path.realpath(s.file), set())


def reads_a_clock(base: Census, root: str | None) -> bool:
    """Whether a project function that compiled (a graph's, or a frame of a break's stack)
    reads a clock itself (``files.reads_clock``)."""
    at = {(g.file, g.line) for g in base.graphs} | {(fr.file, fr.line) for s in base.sites for fr in s.stack}
    return any(in_project(f, root) and reads_clock(f, line) for f, line in at)


def ran_to_end(c: Census) -> bool:
    """A census whose sites are all there: no error, or only the compiled run's."""
    return c.error is None or c.error.kind is ErrorKind.COMPILED


def unreproduced(base: Census, repeats: list[Census]) -> list[Unreproduced]:
    """The break keys whose count differs between BASE and its REPEATS (those that ran to the
    end): each as a site of BASE, or of the first repeat that has it."""
    runs = [base, *(r for r in repeats if ran_to_end(r))]
    if len(runs) < 2:
        return []
    counts = [Counter(break_key(s) for s in r.sites) for r in runs]
    out: list[Unreproduced] = []
    for key in dict.fromkeys(k for c in counts for k in c):
        if len({c[key] for c in counts}) > 1:
            s = next(s for r in runs for s in r.sites if break_key(s) == key)
            out.append(Unreproduced(s.id, site_label(s.id, s.line), sum(c[key] > 0 for c in counts), len(runs)))
    return out


def refuse_unreproduced(fixes: list[Fix], shaky: list[Unreproduced]) -> None:
    """No fix of an unreproduced site is verified: a trial without it proves nothing."""
    by_site = {u.site: u for u in shaky}
    for f in fixes:
        if (u := by_site.get(f.site)) is not None:
            f.verified = False
            f.why_not.append(f"not reproducible: {u.seen} of {u.runs} baseline censuses of the unchanged code have "
                             f"this site (the code reads a clock), so a trial without it proves nothing")


def proved(trial: Census, base: Census) -> tuple[bool, bool | None, str | None]:
    """What TRIAL proves against eager: outputs equal (bool), printed/logged output kept
    (False: changed), and why only the factory's calls count (None: the fresh set counts too).

    Outputs must match on the factory's calls and on a fresh input set, unless the original
    code itself raises on every fresh set (``Checks.fresh_unusable``), or BASE, the unpatched
    compiled code, already differs from eager there while it matched on the factory's calls
    (a training loop whose float drift over many steps flips an early-stopping test): no
    patch could make the fresh set match, so the factory's calls decide, outputs and prints."""
    if trial.checks.fresh_unusable is not None:
        return (bool(trial.outputs_match_eager) and trial.checks.fresh_outputs_match is not False,
                trial.checks.side_effects_kept, trial.checks.fresh_unusable)
    bc = base.checks
    # Each excuse separately: a base whose fresh outputs matched still holds the trial to them.
    outputs_excused = bool(base.outputs_match_eager) and bc.fresh_outputs_match is False
    effects_excused = bool(base.outputs_match_eager) and bc.side_effects_kept is False and bc.given_effects_kept is True
    outputs = bool(trial.outputs_match_eager) and (outputs_excused or trial.checks.fresh_outputs_match is True)
    given = trial.checks.given_effects_kept
    effects = (given if given is not None else trial.checks.side_effects_kept) if effects_excused \
        else trial.checks.side_effects_kept
    why = [w for w, on in ((bc.fresh_mismatch or "outputs", outputs_excused),
                           ("printed/logged output", effects_excused)) if on]
    return outputs, effects, \
        f"the unpatched compiled code already differs from eager on fresh inputs ({'; '.join(why)})" if why else None


def evaluate(site: Site, cand: Candidate, base: Census, trial: Census, read: Reader = source_text) -> Fix:
    """What the trial proved about this candidate for this site (READ gives the text BASE's
    line numbers refer to)."""
    why: list[str] = []
    if trial.error:
        why.append(f"error ({trial.error.kind.value}): {trial.error.type or ''} {trial.error.headline[:200]}"
                   .replace("  ", " "))
    d = diff(base, trial)
    # A break whose line a restructure moved into another function is the same break.
    still = site_remains(base, trial, site)
    moved = new_breaks(base, trial)
    hidden = untraced_code(base, read) if moved and not still else {}
    revealed = [s for s in moved if not still and uncovered(base, s, hidden)]
    new_sites = [site_label(s.id, s.line) for s in moved if s not in revealed]
    new_skips = [f"{f.function} {f.id.path}:{f.line}" for f in d.new_skipped]
    outputs, effects, given_only = proved(trial, base)
    if not trial.error:
        if still:
            why.append("site still present")
        if new_sites:
            why.append("moved, not removed: new site " + ", ".join(new_sites))
        if new_skips:
            why.append("new skipped frame " + ", ".join(new_skips))
        if base.graph_count and not trial.graph_count:
            why.append("nothing is compiled any more: the patch turns compilation off instead of removing the break")
        if not outputs:
            why.append("outputs differ from eager: " + str(trial.output_mismatch or trial.checks.fresh_mismatch
                                                           or trial.checks.fresh_error or "not checked"))
        if "ignore_logging_functions" in cand.patches.config:
            # It drops the record by design: lost whenever the logger's level is enabled, a
            # run-time state the trial cannot cover. Reported, never verified.
            why.append("drops the log record at run time by design (whenever its level is enabled): never verified")
        if effects is False:
            se = trial.checks.side_effects
            # fewer reports than eager: lost; more: added; as many with other text: changed
            how = "lost" if se is None or len(se.eager) > len(se.compiled) else \
                "added" if len(se.eager) < len(se.compiled) else "changed"
            why.append(f"side effect {how} at run time (call {se.call if se else '?'}: eager "
                       f"{len(se.eager) if se else '?'} print/log, compiled {len(se.compiled) if se else '?'})")
    rw = cand.rewrite
    return Fix(site.id, site_label(site.id, site.line), cand.label, cand.kind, cand.patches, not why,
               Counts.of(base), Counts.of(trial), not still and not trial.error, outputs, effects,
               trial.config.get("wrapped"), new_sites, new_skips, trial.error, why,
               strategy=cand.strategy, tradeoff=cand.tradeoff, rule=rw.rule if rw else None,
               patch=rewrite_diff(rw) if rw else None, uncovered=[site_label(s.id, s.line) for s in revealed],
               upstream=bool(rw and rw.upstream), given_inputs_only=given_only,
               output=trial.output if trial.error else None, gap_code=list(rw.gap_code) if rw else [])


def on_ranks(fix: Fix, site: Site, cand: Candidate, base: Census, ws: Workspace, opts: Options,
             timeout: float | None) -> None:
    """A collective rewrite verified in one process runs again on ``rewrite.ranks`` gloo
    ranks: every rank must pass the same checks (against the original's eager run on that
    rank) and the ranks must compile symmetrically. Otherwise it is not verified."""
    from ..ranks import compare_ranks
    assert cand.rewrite is not None
    n = cand.rewrite.ranks
    fix.ranks = n
    try:
        censuses = ws.ranks(opts, cand.rewrite.files, n, timeout)
    except LookupError as e:
        censuses, why = {}, [str(e)]
    else:
        why = [f"rank {r}: {w}" for r, c in sorted(censuses.items()) for w in evaluate(site, cand, base, c).why_not]
        comp = compare_ranks(censuses)
        if not comp.symmetric and comp.divergences:
            d = comp.divergences[0]
            why.append(f"ranks diverge ({d.kind}): {d.message}")
    if why:
        fix.verified = False
        fix.why_not += [f"on {n} gloo ranks: {w}" for w in why]


def rewrite_diff(rw: Rewrite, old: dict[str, str] | None = None) -> str:
    """One unified diff for a rewrite's files (against ``old`` texts, else the files on disk)."""
    return "".join(unified_diff(path, old[path] if old and path in old else source_text(path), new)
                   for path, new in rw.files.items())


def _patched_line(s: Site, text: str) -> int | None:
    """S's line in TEXT, the patched file its trial ran: a trial maps the lines a patch left
    alone back to the original's, the rest keep the patched numbering; the line whose code
    is S's, nearest to either."""
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if ln.strip() == s.code.strip()]
    return min(lines, key=lambda i: abs(i - s.line)) if lines else None


THEN = ", then "   # joins the labels of a joined rewrite's two steps


def joined(rw: Rewrite, base: Census, trial: Census, root: str | None, tfile: str | None,
           factory: str, overlay: dict[str, str] | None = None) -> list[Rewrite]:
    """RW joined to each proposal of the rules for a break it moved into code it feeds (TRIAL
    is RW's census): on the patched text (RW's files over OVERLAY, `--all`'s steps so far),
    one patch each. Splits and upstream patches are not joined."""
    out: list[Rewrite] = []
    for n in new_breaks(base, trial):
        text = next((t for p, t in rw.files.items() if os.path.realpath(p) == os.path.realpath(n.file)), None)
        line = _patched_line(n, text) if text is not None else n.line
        if line is None:
            continue
        props, _ = proposals(dataclasses.replace(n, line=line), root, target_file=tfile, factory=factory,
                             overlay={**(overlay or {}), **rw.files}, sites=trial.sites)
        for p in props:
            if p.upstream or p.strategy == "split":
                continue
            strategy = max(rw.strategy, p.strategy, key=lambda k: STRATEGY_RANK.get(k, 9))
            out.append(Rewrite(f"{rw.rule}+{p.rule}", strategy, f"{rw.label}{THEN}{p.label}",
                               f"{rw.tradeoff}; {p.tradeoff}", {**rw.files, **p.files}))
    return out


def chained(first: list[tuple[Site, Candidate]], fixes: list[Fix], trials: dict[str, Census], base: Census,
            root: str | None, tfile: str | None, factory: str, per_site: int = 3,
            overlay: dict[str, str] | None = None) -> list[tuple[Site, Candidate]]:
    """A rewrite that removed its site but moved the break to code it feeds (a count kept as
    ``int(...)`` breaks where it is used; a value kept as a tensor breaks at the `if` that
    tests it) goes on with ``joined``: one patch, judged for the original site like any
    other. One step deep: what is moved again is left to `fix --all`."""
    out: list[tuple[Site, Candidate]] = []
    for (s, c), f in zip(first, fixes):
        rw = c.rewrite
        if rw is None or f.verified or not f.site_gone or not f.new_sites or f.new_skipped_frames or rw.upstream:
            continue
        mine = sum(x.id == s.id for x, _ in out)
        for both in joined(rw, base, trials[c.key], root, tfile, factory, overlay)[:max(0, per_site - mine)]:
            out.append((s, Candidate(both.strategy, both.label, Patches(), both)))
    return out


# A split whose trial moved a break into one of its compiled parts is proposed again with the
# statements that broke in its gap, this many times at most (each time a batch of trials).
GROW_ROUNDS = 2


def moved_code(rw: Rewrite, base: Census, trial: Census, read: Reader = source_text) -> frozenset[str]:
    """The lines (stripped text) where RW's trial broke anew, in a file RW patched: each frame
    of a new break there. A frame on a line the original file (READ) lacks (a part's
    ``return`` of an object Dynamo cannot rebuild) stands for its whole part: the first line
    of each of the part's statements. A part Dynamo now skips whole (a loop that breaks,
    never traced before the split) counts by the frame of a break where its tracing stopped,
    and a part Dynamo failed compiling by the error's innermost frame in a patched file."""
    out: set[str] = set()
    stopped = {(os.path.realpath(sk.file), sk.line) for sk in diff(base, trial).new_skipped}
    frames = [fr for n in new_breaks(base, trial) for fr in _frames(n)] + \
        [fr for s in trial.sites for fr in _frames(s) if (os.path.realpath(fr.file), fr.line) in stopped]
    # A compiled part Dynamo fails in (an internal error): the innermost user frame in a patched
    # file (score-SDE's part returning an object built from a generator), unless the original
    # failed there too.
    mine, e = {os.path.realpath(p) for p in rw.files}, trial.error
    failed = [fr for fr in error_frames(e.message) if os.path.realpath(fr.file) in mine] \
        if e is not None and e.kind is ErrorKind.COMPILED and (base.error is None or base.error.where != e.where) else []
    frames += [StackEntry(fr.file, fr.line, fr.function, fr.code) for fr in failed[-1:]]
    for fr in frames:
        code = fr.code.strip()
        text = next((t for p, t in rw.files.items() if os.path.realpath(p) == os.path.realpath(fr.file)), None)
        if text is None or not code:
            continue
        orig = {ln.strip() for ln in read(fr.file).splitlines()}
        if code in orig:
            out.add(code)
            continue
        lines = text.splitlines()
        at = [i for i, ln in enumerate(lines, 1) if ln.strip() == code]
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        line = min(at, key=lambda i: abs(i - fr.line)) if at else fr.line
        parts = [d for d in ast.walk(tree) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and d.lineno <= line <= (d.end_lineno or d.lineno)]
        if parts:
            part = max(parts, key=lambda d: d.lineno)
            out |= {lines[st.lineno - 1].strip() for st in part.body} & orig
    return frozenset(out)


def may_grow(f: Fix) -> bool:
    """Whether a split's trial F failed in one of its compiled parts (``moved_code`` says
    where): it broke anew there (a new site or skipped frame), or Dynamo failed compiling it."""
    if f.verified or f.error is not None and f.error.kind is not ErrorKind.COMPILED:
        return False
    return f.error is not None or bool(f.new_sites or f.new_skipped_frames)


def grown(tried: list[tuple[Site, Candidate, Fix]], trials: dict[str, Census], base: Census, root: str | None,
          tfile: str | None, factory: str, per_site: int = 3) -> list[tuple[Site, Candidate]]:
    """Each split in TRIED whose trial broke anew in one of its compiled parts (an optimizer
    the gap made, used by a scheduler's constructor after it; a part returning loaders Dynamo
    cannot rebuild) or failed compiling one, proposed again with those statements in its gap:
    what is not tried yet."""
    out: list[tuple[Site, Candidate]] = []
    for s, c, f in tried:
        rw = c.rewrite
        if rw is None or not tried_late(rw) or not may_grow(f):
            continue
        more = moved_code(rw, base, trials[c.key]) - set(rw.gap_code)
        if not more:
            continue
        props, _ = proposals(s, root, target_file=tfile, factory=factory, sites=base.sites,
                             gap_code=frozenset(rw.gap_code) | more)
        mine = sum(x.id == s.id for x, _ in out)
        for p in [p for p in props if tried_late(p) and p.rule == rw.rule][:max(0, per_site - mine)]:
            cand = on_base(Candidate(p.strategy, p.label, Patches(), p), s, base, tfile, root)
            if cand.key not in trials and all(cand.key != o.key for _, o in out):
                out.append((s, cand))
    return out


def _strategy_rank(f: Fix) -> float:
    # A function entry's split changes what the caller compiles (a module of its parts): a
    # bigger change than a config line, so it ranks after config, unlike a forward's split.
    return STRATEGY_RANK["config"] + 0.5 if f.rule == "entry-split" else STRATEGY_RANK.get(f.strategy, 9)


def rank(fixes: list[Fix]) -> list[Fix]:
    """Per site (in census order): verified first, then patches to the project before upstream
    ones, then by strategy, then those that keep at least half the compiled ops of the site's
    best of the same strategy (a split whose gap holds a whole loop compiles fewer graphs than
    one that keeps the loop in Python and compiles what it calls, but far less code; a rewrite
    that compiles more does not demote every split), fewest sites uncovered (left to fix),
    fewest graphs, least invasive."""
    order: dict[SiteId, int] = {}
    most: dict[tuple[SiteId, float], int] = {}
    for f in fixes:
        order.setdefault(f.site, len(order))
        if f.verified:
            k = (f.site, _strategy_rank(f))
            most[k] = max(most.get(k, 0), f.after.ops)
    return sorted(fixes, key=lambda f: (order[f.site], not f.verified, f.upstream, _strategy_rank(f),
                                        2 * f.after.ops < most.get((f.site, _strategy_rank(f)), 0),
                                        len(f.uncovered), f.after.graphs, INVASIVENESS.get(f.kind, 9),
                                        f.candidate))


def also_removed(sites: list[Site], tried: list[tuple[Site, Candidate]], fixes: list[Fix], base: Census,
                 trials: dict[str, Census]) -> list[Fix]:
    """A patch proposed for one site that removes others too (a region split whose gap holds
    several sites, a hatch on the function that holds them): for each other site its trial
    removed, that trial's verdict on it, recorded when verified (``via`` the site it was
    proposed for). One patch, judged once per site it fixes."""
    out: list[Fix] = []
    have = {(f.site, f.candidate) for f in fixes}
    verified_for = {(f.site, f.candidate) for f in fixes if f.verified}
    for s, c in tried:
        trial = trials.get(c.key)
        if trial is None or (s.id, c.label) not in verified_for:
            continue
        for other in sites:
            if other.id == s.id or (other.id, c.label) in have or site_remains(base, trial, other):
                continue
            f = evaluate(other, c, base, trial)
            if f.verified:
                f.via = s.id
                out.append(f)
                have.add((other.id, c.label))
    return out


# The recompile causes' trials (``fix.causes.cause_trials``), run by run_fix on its workers after
# the break sites': (report, workspace, options, target file, factory, run_all, kinds).
CauseStep = Callable[..., None]


def run_fix(spec: str, opts: Options, *, jobs: int | None = None, timeout: float | None = None,
            only: Callable[[Site], bool] | None = None, kinds: AbstractSet[str] | None = None,
            project_root: str | None = None, exhaustive: bool = False, causes: CauseStep | None = None,
            progress: Callable[[str], None] | None = None) -> FixReport:
    """Census the target, then one trial census per distinct candidate, in parallel:
    source rewrites first (each in the workspace: the project with the patch), then config
    flags and run-time hatches for the sites no rewrite fixed (all of them with
    ``exhaustive``). ``project_root`` is the project fix may edit (default: the target's).
    ``progress`` gets the phase (baseline census, trials done of those started). Returns the baseline census with advice, and every trial in ``fixes``."""
    opts = dataclasses.replace(opts, fresh=True, patches=None)
    jobs = max(1, jobs or os.cpu_count() or 1)
    ws = Workspace.of(spec, project_root)
    # Trial workers import torch while the baseline runs; each still runs one trial only.
    warm: queue.SimpleQueue[object] = queue.SimpleQueue()
    for _ in range(jobs):
        warm.put(worker.prestart())
    try:
        return _run_fix(ws, opts, jobs, timeout, only, kinds, warm, exhaustive, causes, progress or (lambda _t: None))
    finally:
        while not warm.empty():  # idle workers hold no job: stop them, don't wait for imports
            child = warm.get()
            assert isinstance(child, procs.Child)
            child.kill_tree()


def draws_numpy_random(base: Census, root: str | None) -> bool:
    """Whether a project file that compiled (a graph's or a break's frame) calls np.random."""
    files = {g.file for g in base.graphs} | {fr.file for s in base.sites for fr in s.stack}
    return any(in_project(f, root) and os.path.isfile(f) and _NUMPY_RANDOM.search(source_text(f)) for f in files)


def on_base(c: Candidate, site: Site, base: Census, tfile: str | None, root: str | None) -> Candidate:
    """C with the baseline's own config (``base_config``, NumPy's random stream) and hatch
    (``base_hatch``, ``crash_hatch``): a rewrite carries them in its files, a flag or hatch
    trial runs with the config (and its worker with the hatch, ``_run_fix``)."""
    cfg, hatch = base.config.get("base_config"), base.config.get("base_hatch")
    if c.rewrite is not None and (cfg or hatch):
        files = with_config(c.rewrite.files, cfg or {}, home_file(site, tfile or site.file, root))
        with contextlib.suppress(LookupError, SyntaxError):   # a patch that removed the function: without it
            files = with_hatch(files, hatch)
        return dataclasses.replace(c, rewrite=dataclasses.replace(c.rewrite, files=files))
    if cfg and c.rewrite is None:
        return dataclasses.replace(c, patches=dataclasses.replace(c.patches, config={**cfg, **c.patches.config}))
    return c


def fails_in_numpy(base: Census) -> bool:
    """Whether the compiled run failed (``NUMPY_OFF``) in frames that call NumPy: the code
    of Dynamo's "from user code:" frames in the error."""
    e = base.error
    if e is None or e.kind is not ErrorKind.COMPILED:
        return False
    return any(_NUMPY_CALL.search(fr.code) for fr in error_frames(e.message))


# torch's legacy typed constructors and their dtypes: `torch.FloatTensor(a)` of a NumPy array
# (a tensor, once Dynamo traces NumPy) fails in Dynamo's fake tensor call; `torch.as_tensor(a,
# dtype=...)` is the same call (it shares a tensor or array of that dtype, converts others).
_LEGACY = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
           "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8", "ShortTensor": "int16",
           "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool"}
_LEGACY_FAKE_CALL = re.compile(r"call_function <class 'torch\.(cuda\.)?(\w+Tensor)'>\(\*\(FakeTensor")


def crash_hatch(base: Census, root: str | None, prior: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What the baseline and every trial and patch after it carry where the compiled run
    failed in a function of the project (the error's user frame), so that the rest of the code
    can be compiled and judged: when Dynamo failed calling a legacy typed constructor on a
    tensor, that call rewritten as ``torch.as_tensor`` (added to PRIOR's rewrites); otherwise
    the function under ``torch.compiler.disable`` (facenet's f-string, an internal error of
    Dynamo's). None when the run did not fail in the project (or PRIOR's rewrite led to a
    failure it cannot mend)."""
    e = base.error
    if e is None or e.kind is not ErrorKind.COMPILED or not e.where:
        return None
    path, _, line = e.where.rpartition(":")
    if not line.isdigit() or not in_project(path, root) or not os.path.isfile(path):
        return None
    try:
        text = source_text(path)
        if prior:
            text = with_hatch({path: text}, prior)[path]
        tree = parse_python(text)
    except (SyntaxError, ValueError, OSError, LookupError):
        return None
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.lineno <= int(line) <= (n.end_lineno or n.lineno)]
    if not defs:
        return None
    fn = max(defs, key=lambda n: n.lineno)
    head = (e.message.splitlines() or [""])[0][:80]
    if (m := _LEGACY_FAKE_CALL.search(e.message)) and (step := _as_tensor(text, fn, int(line), m[2], bool(m[1]))):
        return {"file": os.path.realpath(path), "function": fn.name, "line": int(line),
                "rewrites": [*(prior or {}).get("rewrites", []), step],
                "why": f"Dynamo failed calling torch.{m[1] or ''}{m[2]} on a tensor ({e.type or 'error'}: {head}); "
                       "torch.as_tensor is the same call"}
    if prior:
        return None
    return {"file": os.path.realpath(path), "function": fn.name, "line": fn.lineno,
            "why": f"the compiled run failed in it ({e.type or 'error'}: {head}); it runs eagerly"}


def hatch_label(hatch: dict[str, Any]) -> str:
    """The base hatch, for people: what every step carries."""
    if hatch.get("rewrites"):
        return f"torch.as_tensor for the legacy constructor at line{'s' if len(hatch['rewrites']) > 1 else ''} " \
               + ", ".join(str(r[2]) for r in hatch["rewrites"])
    return f"{hatch['function']}() under torch.compiler.disable"


def mend_crash(base: Census, root: str | None, census: Callable[[dict[str, Any]], Census],
               say: Callable[[str], None]) -> tuple[Census, dict[str, Any]] | None:
    """The baseline CENSUSed again with the crash hatch (``crash_hatch``), rewriting each next
    legacy constructor Dynamo fails on (a few rounds): the census that completes (its outputs
    may differ: each trial is judged against eager) and its hatch; None when none does."""
    hatch = crash_hatch(base, root)
    for _ in range(4):
        if hatch is None:
            return None
        say(f"baseline census, with {hatch_label(hatch)}: the compiled run failed there")
        try:
            kept = census(hatch)
        except (LookupError, SyntaxError):
            return None
        if kept.error is None and kept.graph_count:
            return kept, hatch
        hatch = crash_hatch(kept, root, hatch) if hatch.get("rewrites") else None
    return None


def _as_tensor(text: str, fn: ast.AST, line: int, ctor: str, cuda: bool) -> list[Any] | None:
    """[old, new, line]: the statement of FN at LINE with each one-argument call of
    ``torch[.cuda].CTOR`` rewritten as ``torch.as_tensor(arg, dtype=...)`` (whole lines)."""
    if ctor not in _LEGACY:
        return None
    stmts = [n for n in ast.walk(fn) if isinstance(n, ast.stmt) and not isinstance(n, (ast.FunctionDef, ast.ClassDef))
             and n.lineno <= line <= (n.end_lineno or n.lineno) and not any(
                 isinstance(c, ast.stmt) for c in ast.iter_child_nodes(n))]
    if not stmts:
        return None
    stmt = stmts[-1]
    owner = "torch.cuda" if cuda else "torch"
    calls = [c for c in ast.walk(stmt) if isinstance(c, ast.Call) and ast.unparse(c.func) == f"{owner}.{ctor}"
             and len(c.args) == 1 and not c.keywords and not isinstance(c.args[0], ast.Starred)]
    if not calls:
        return None
    lines = text.splitlines(keepends=True)
    first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
    old = "".join(lines[first - 1:last])
    raw = [ln.encode() for ln in lines[first - 1:last]]
    device = ', device="cuda"' if cuda else ""
    # Right to left, so that earlier offsets (UTF-8 bytes, per line) stay valid.
    for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        arg = ast.get_source_segment(text, c.args[0])
        if arg is None or c.end_lineno is None or c.end_col_offset is None:
            return None
        a, b = c.lineno - first, c.end_lineno - first
        new = f"torch.as_tensor({arg}, dtype=torch.{_LEGACY[ctor]}{device})".encode()
        raw[a:b + 1] = [raw[a][:c.col_offset] + new + raw[b][c.end_col_offset:]]
    return [old, b"".join(raw).decode(), first]


def _run_fix(ws: Workspace, opts: Options, jobs: int, timeout: float | None, only: Callable[[Site], bool] | None,
             kinds: AbstractSet[str] | None, warm: queue.SimpleQueue[object], exhaustive: bool,
             causes: CauseStep | None, say: Callable[[str], None]) -> FixReport:
    tfile = target_file(ws.spec)
    hashes = {tfile: file_hash(tfile)} if tfile and os.path.isfile(tfile) else {}
    t0 = time.perf_counter()
    base = FixReport.of(worker.run(ws.job(opts), timeout=timeout,
                                   progress=lambda t: say(f"baseline census: {t}")).census)
    if base.error is None and base.outputs_match_eager is False and draws_numpy_random(base, ws.project):
        kept = worker.run(ws.job(dataclasses.replace(opts, patches=Patches(config=dict(NUMPY_STREAM)))),
                          timeout=timeout, progress=lambda t: say(f"baseline census, NumPy's random stream: {t}")).census
        if kept.error is None and kept.outputs_match_eager:
            base = FixReport.of(kept)
            base.config["base_config"] = dict(NUMPY_STREAM)
    if (mended := mend_crash(base, ws.project, lambda h: ws.census(opts, with_hatch({}, h), timeout), say)):
        kept, hatch = mended
        base = FixReport.of(kept)
        base.config["base_hatch"] = hatch
        hashes.setdefault(hatch["file"], file_hash(hatch["file"]))
    if fails_in_numpy(base):
        say("baseline census, NumPy calls left to Python: the compiled run failed in code that calls NumPy")
        cfg = {**base.config.get("base_config", {}), **NUMPY_OFF}
        kept = worker.run(ws.job(dataclasses.replace(opts, patches=Patches(config=cfg))), timeout=timeout,
                          progress=lambda t: say(f"baseline census, NumPy calls left to Python: {t}")).census
        if kept.error is None and kept.graph_count:   # (its outputs may differ: each trial is judged against eager)
            base = FixReport.of(kept)
            base.config["base_config"] = cfg
    base.census_seconds = time.perf_counter() - t0
    if base.config.get("grad_auto"):   # a training step: its trials run with autograd from the start
        opts = dataclasses.replace(opts, grad=True)
    t0 = time.perf_counter()
    for s in base.sites:  # --apply refuses a file that changed after this point
        for path in {s.file, *(fr.file for fr in s.stack)}:
            real = os.path.realpath(path)
            if real not in hashes and os.path.isfile(real):
                hashes[real] = file_hash(real)
    for path in {f.file for f in base.frames}:   # recompile fixes patch the recompiled frames' files
        real = os.path.realpath(path)
        if real not in hashes and os.path.isfile(real):
            hashes[real] = file_hash(real)
    base.source_sha256 = hashes
    advise(base)
    if base.error and base.error.kind is not ErrorKind.COMPILED:
        return base
    sites = [s for s in base.sites if only is None or only(s)]
    factory = ws.spec.rpartition(":")[2]
    rewrites: list[tuple[Site, Candidate]] = []
    for s in sites:
        props, refused = proposals(s, ws.project, target_file=tfile, factory=factory, sites=base.sites)
        base.refused += [Refused(s.id, r.rule, r.reason) for r in refused]
        rewrites += [(s, on_base(Candidate(p.strategy, p.label, Patches(), p), s, base, tfile, ws.project))
                     for p in props]
    rewrites = [(s, c) for s, c in rewrites if kinds is None or c.kind in kinds]
    lock = threading.Lock()
    count = [0, 0]   # trials done, trials started so far (later batches add to it)

    def run_all(cands: dict[str, Candidate], o: Options = opts) -> dict[str, Census]:
        left = [len(cands)]
        count[1] += len(cands)
        if cands:
            say(f"trial {count[0]} of {count[1]} done")

        def trial(c: Candidate) -> Census:
            t = one_trial(c)
            with lock:
                count[0] += 1
                say(f"trial {count[0]} of {count[1]} done")
            return t

        def one_trial(c: Candidate) -> Census:
            with lock:
                left[0] -= 1
                child = warm.get() if not warm.empty() else worker.prestart()
                if left[0] >= jobs:
                    warm.put(worker.prestart())  # ready for a later trial
            assert isinstance(child, procs.Child)
            if c.rewrite is not None or base.config.get("base_hatch"):
                # (a flag or hatch trial on a baseline with a hatch: on the hatched project)
                try:
                    return ws.census(o, c.rewrite.files, timeout, warm=child) if c.rewrite is not None else \
                        ws.census(o, with_hatch({}, base.config["base_hatch"]), timeout, warm=child, patches=c.patches)
                except (LookupError, OSError, SyntaxError, UnicodeError) as e:
                    child.kill_tree()
                    return dataclasses.replace(base, sites=[], fixes=[], error=ErrorInfo(ErrorKind.PATCH, str(e)))
            return worker.run(ws.job(dataclasses.replace(o, patches=c.patches)), timeout=timeout, warm=child).census

        with ThreadPoolExecutor(max_workers=jobs) as ex:
            return dict(zip(cands, ex.map(trial, cands.values())))

    # Best strategy first: a site with a verified rewrite, caller move or extract needs no
    # split, run-time wrapper or flag (those run only for the sites left, unless exhaustive).
    first = [(s, c) for s, c in rewrites if c.rewrite is None or not tried_late(c.rewrite)]
    again = Candidate("baseline", "the unchanged code, again", Patches(config=dict(base.config.get("base_config", {}))))
    repeats = {f"baseline again {i}": again for i in range(CLOCK_REPEATS if sites and reads_a_clock(base, ws.project) else 0)}
    results = run_all({**repeats, **{c.key: c for _, c in first}})
    again_runs = [results.pop(k) for k in repeats]
    base.unreproduced = unreproduced(base, again_runs)
    base.repeats_failed = sum(not ran_to_end(r) for r in again_runs)
    trials: dict[str, Census] = dict(results)
    fixes = [evaluate(s, c, base, results[c.key]) for s, c in first]
    for f, (s, c) in zip(fixes, first):
        if f.verified and c.rewrite is not None and c.rewrite.ranks:
            on_ranks(f, s, c, base, ws, opts, timeout)
    follow = [(s, on_base(c, s, base, tfile, ws.project))
              for s, c in chained(first, fixes, trials, base, ws.project, tfile, factory) if kinds is None or c.kind in kinds]
    results = run_all({c.key: c for _, c in follow})
    trials.update(results)
    fixes += [evaluate(s, c, base, results[c.key]) for s, c in follow]
    first += follow
    done = {f.site for f in fixes if f.verified and not f.upstream and f.strategy in ("rewrite", "caller", "extract")} \
        if not exhaustive else set()
    pairs = [(s, c) for s, c in rewrites if c.rewrite is not None and tried_late(c.rewrite) and s.id not in done]
    pairs += [(s, on_base(c, s, base, tfile, ws.project)) for s in sites if s.id not in done
              for c in candidates(s, ws.project) if kinds is None or c.kind in kinds]
    results = run_all({c.key: c for _, c in pairs})
    trials.update(results)
    judged = [(s, c, evaluate(s, c, base, results[c.key])) for s, c in pairs]
    for _ in range(GROW_ROUNDS):
        fixes += [f for _, _, f in judged]
        more = [(s, c) for s, c in grown(judged, trials, base, ws.project, tfile, factory)
                if kinds is None or c.kind in kinds]
        results = run_all({c.key: c for _, c in more})
        trials.update(results)
        judged = [(s, c, evaluate(s, c, base, results[c.key])) for s, c in more]
        pairs += more
    fixes += [f for _, _, f in judged]
    both = [(s, on_base(pair, s, base, tfile, ws.project)) for s in sites
            if (pair := flags_together(s, fixes)) is not None]
    results = run_all({c.key: c for _, c in both})
    trials.update(results)
    fixes += [evaluate(s, c, base, results[c.key]) for s, c in both]
    fixes += also_removed(sites, [*first, *pairs, *both], fixes, base, trials)
    refuse_unreproduced(fixes, base.unreproduced)
    base.fixes = rank(fixes)
    tried = {f.site for f in fixes}
    for s in sites:   # a site nothing applies to says so, with the reasons
        if s.id not in tried:
            why = "; ".join(dict.fromkeys(r.reason for r in base.refused if r.site == s.id))
            base.no_candidate.append(Refused(s.id, "none", why or f"no rewrite rule, config flag or hatch applies "
                                             f"to {s.gb_id} ({s.gb_type or 'no break type'})"))
    if causes is not None:   # the recompile causes' trials (fix/causes.py), on the same workers
        causes(base, ws, opts, tfile, factory, run_all, kinds)
    base.trials_seconds = time.perf_counter() - t0
    return base
