"""Two censuses -> what changed: the one comparison gate, fix and ranks read.

``diff(before, after)`` matches break sites on :class:`~graphstitch.census.SiteId`, skipped
frames on :class:`~graphstitch.census.FrameId` and recompile causes on their normalized
reason, and compares the graph sequences and the collectives in them. Each consumer reads
the part it needs: the gate fails on regressions, `fix` calls a candidate "moved, not
removed" when ``new_sites`` is not empty, `ranks` names the first divergence. No torch import.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from .model import Census, Graph, LimitHit, RecompileCause, Site, SiteId, SkippedFrame, Untraced, gb_text


@dataclass
class Change:
    """A count that differs between the two censuses for one matched item."""
    before: int
    after: int


@dataclass
class SiteChange(Change):
    site: Site                 # as it is in `after`


@dataclass
class CauseChange(Change):
    cause: RecompileCause      # as it is in `after`


@dataclass
class CensusDiff:
    new_sites: list[Site] = field(default_factory=list)            # in after only
    gone_sites: list[Site] = field(default_factory=list)           # in before only
    site_events: list[SiteChange] = field(default_factory=list)    # matched, different event counts
    new_skipped: list[SkippedFrame] = field(default_factory=list)
    gone_skipped: list[SkippedFrame] = field(default_factory=list)
    new_causes: list[RecompileCause] = field(default_factory=list)
    gone_causes: list[RecompileCause] = field(default_factory=list)
    cause_counts: list[CauseChange] = field(default_factory=list)
    new_limit_hits: list[LimitHit] = field(default_factory=list)   # frames newly refused at the recompile limit
    graphs: Change = field(default_factory=lambda: Change(0, 0))
    events: Change = field(default_factory=lambda: Change(0, 0))
    recompiles: Change = field(default_factory=lambda: Change(0, 0))
    first_graph_difference: int | None = None       # index into the graph sequences
    first_collective_difference: int | None = None  # index into the collectives, graph by graph
    # index into the collectives Inductor's compiled graphs run (its schedule), graph by graph;
    # None also when neither census has a schedule
    first_schedule_difference: int | None = None
    # Code that ran untraced (coverage), matched on (path, function, why): a break there is
    # never reported, so these are what nobody can judge, not regressions.
    new_untraced: list[Untraced] = field(default_factory=list)       # untraced in after only
    changed_untraced: list[Untraced] = field(default_factory=list)   # untraced in both, other code text
    gone_untraced: list[Untraced] = field(default_factory=list)      # traced now (or gone)

    @property
    def unknowns(self) -> bool:
        """Code nobody traced changed or appeared: the gate says "unknown"."""
        return bool(self.new_untraced or self.changed_untraced)

    @property
    def regressions(self) -> bool:
        """Anything worse: what the gate fails on."""
        return bool(self.new_sites or self.new_skipped or self.new_causes or self.new_limit_hits
                    or any(c.after > c.before for c in [*self.site_events, *self.cause_counts])
                    or self.graphs.after > self.graphs.before)

    @property
    def same(self) -> bool:
        """Nothing differs that a census compares (what `ranks` calls symmetric)."""
        return not (self.new_sites or self.gone_sites or self.site_events or self.new_skipped
                    or self.gone_skipped or self.new_causes or self.gone_causes or self.cause_counts
                    or self.first_graph_difference is not None or self.first_collective_difference is not None
                    or self.first_schedule_difference is not None
                    or self.new_untraced or self.changed_untraced or self.gone_untraced)


def site_key(match_gb: bool) -> Callable[[Site], Hashable]:
    """How sites are matched: the full SiteId, or without the GB id when the two censuses
    come from different torch versions (ids may be renumbered)."""
    return (lambda s: s.id) if match_gb else (lambda s: s.id.without_gb())


def cause_key(before: Census, after: Census) -> Callable[[RecompileCause], Hashable]:
    """How recompile causes are matched: their identity (frame, guard kind, subject) when both
    censuses carry one (a baseline from an older graphstitch may not), else the normalized reason."""
    if all(r.id is not None for r in [*before.recompiles, *after.recompiles]):
        return lambda r: r.id
    return lambda r: r.reason


def diff(before: Census, after: Census, *, match_gb: bool = True) -> CensusDiff:
    d = CensusDiff()
    key = site_key(match_gb)
    old = {key(s): s for s in before.sites}
    new = {key(s): s for s in after.sites}
    d.new_sites = [s for k, s in new.items() if k not in old]
    d.gone_sites = [s for k, s in old.items() if k not in new]
    d.site_events = [SiteChange(old[k].events, s.events, s) for k, s in new.items()
                     if k in old and old[k].events != s.events]

    old_sk = {f.id: f for f in before.skipped_frames}
    new_sk = {f.id: f for f in after.skipped_frames}
    d.new_skipped = [f for k, f in new_sk.items() if k not in old_sk]
    d.gone_skipped = [f for k, f in old_sk.items() if k not in new_sk]

    ckey = cause_key(before, after)
    old_rc = {ckey(r): r for r in before.recompiles}
    new_rc = {ckey(r): r for r in after.recompiles}
    d.new_causes = [r for k, r in new_rc.items() if k not in old_rc]
    d.gone_causes = [r for k, r in old_rc.items() if k not in new_rc]
    d.cause_counts = [CauseChange(old_rc[k].count, r.count, r) for k, r in new_rc.items()
                      if k in old_rc and old_rc[k].count != r.count]

    # A baseline keeps the identity path, a census the file: the base name and function match both.
    old_hits = {(os.path.basename(h.file), h.function) for h in before.limit_hits}
    d.new_limit_hits = [h for h in after.limit_hits if (os.path.basename(h.file), h.function) not in old_hits]
    d.graphs = Change(before.graph_count, after.graph_count)
    d.events = Change(before.break_events, after.break_events)
    d.recompiles = Change(before.recompile_count, after.recompile_count)
    d.first_graph_difference = _first_difference([_graph_sig(g) for g in before.graphs],
                                                 [_graph_sig(g) for g in after.graphs])
    d.first_collective_difference = _first_difference(collective_sequence(before), collective_sequence(after))
    d.first_schedule_difference = _first_difference(schedule_sequence(before), schedule_sequence(after))
    d.new_untraced, d.changed_untraced, d.gone_untraced = _untraced(before, after)
    return d


def _untraced(before: Census, after: Census) -> tuple[list[Untraced], list[Untraced], list[Untraced]]:
    key = lambda u: (u.path, u.function, u.why)
    old: dict[tuple[str, str, str], set[str]] = {}
    for u in before.coverage.untraced:
        old.setdefault(key(u), set()).add(u.fingerprint)
    now = {key(u) for u in after.coverage.untraced}
    new = [u for u in after.coverage.untraced if key(u) not in old]
    # No fingerprint (the source was not readable): a change cannot be ruled out.
    changed = [u for u in after.coverage.untraced if key(u) in old and (not u.fingerprint or u.fingerprint not in old[key(u)])]
    gone = [u for u in before.coverage.untraced if key(u) not in now]
    return new, changed, gone


def collective_sequence(c: Census) -> list[str]:
    """The collectives of the compiled graphs in compile order: the order a rank enters them."""
    return [op for g in c.graphs for op in g.collectives]


def schedule_sequence(c: Census) -> list[str]:
    """The collectives Inductor's compiled graphs run, in compile order then schedule order
    (graphs without a schedule artifact add nothing)."""
    return [op for g in c.graphs for op in (g.schedule or [])]


def _graph_sig(g: Graph) -> tuple[object, ...]:
    # Where a graph's frame starts is a hint, like a site's line: an edit above it is no change.
    return (g.compile_id, g.function, g.op_count, tuple(g.collectives))


def _first_difference(a: Sequence[object], b: Sequence[object]) -> int | None:
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b) or a[i] != b[i]:
            return i
    return None


def site_label(sid: SiteId, line: int) -> str:
    """How a site is named in messages: GB id, identity path and the current line."""
    return f"{gb_text(sid.gb_id)} {sid.path}:{line}"
