"""Rows -> the aggregated :class:`SweepReport`, and two sweeps -> a :class:`SweepComparison`.

Root causes are break sites grouped by identity (:class:`SiteId`) across every model that
ran: the site of a break inside a library is that library's line (``transformers/...``), so
one line that breaks forty models is one root cause affecting forty models. Comparisons of
two rows that both have a census read ``changes.diff`` (the gate's own regressions); rows
without one compare on status. No torch import.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from ..changes import diff, site_label
from ..model import SiteId
from ..paths import where
from .rows import CauseShift, ModelChange, RootCause, Row, Status, SweepComparison, SweepReport


def root_causes(rows: Sequence[Row]) -> list[RootCause]:
    """Sites by identity with the models they break, most models first (then events)."""
    by_id: dict[SiteId, RootCause] = {}
    for r in rows:
        if r.census is None:
            continue
        for s in r.census.sites:
            rc = by_id.get(s.id)
            if rc is None:
                rc = by_id[s.id] = RootCause(s.id, s.gb_type, where(s.file, r.census.project_root).value, s.file,
                                             s.line, [], 0, False)
            if r.id not in rc.models:
                rc.models.append(r.id)
            rc.events += s.events
            rc.frame_skipped = rc.frame_skipped or s.frame_skipped
    return sorted(by_id.values(), key=lambda c: (-c.model_count, -c.events, c.id))


def build_report(rows: Sequence[Row], *, wall_seconds: float | None = None,
                 compare: SweepComparison | None = None) -> SweepReport:
    rows = sorted(rows, key=lambda r: r.id)
    counts = Counter(r.status.value for r in rows)
    versions = sorted({r.census.torch_version for r in rows if r.census and r.census.torch_version})
    return SweepReport(rows=list(rows), root_causes=root_causes(rows),
                       status_counts={s.value: counts.get(s.value, 0) for s in Status},
                       torch_versions=versions, wall_seconds=wall_seconds, compare=compare)


def _versions(rows: Sequence[Row]) -> set[str]:
    return {r.census.torch_version for r in rows if r.census and r.census.torch_version}


def compare(old: Sequence[Row], new: Sequence[Row], *, old_name: str = "old") -> SweepComparison:
    """Per model: status changes, and for two censuses ``changes.diff``'s regressions and
    improvements; per root cause: how many models it breaks before and after."""
    ov, nv = _versions(old), _versions(new)
    match_gb = not (ov and nv and ov != nv)   # another torch may renumber GB ids (as the gate does)
    cmp = SweepComparison(old=old_name, matched_on_gb=match_gb)
    before = {r.id: r for r in old}
    after = {r.id: r for r in new}
    cmp.only_old = sorted(set(before) - set(after))
    cmp.only_new = sorted(set(after) - set(before))
    for rid in sorted(set(before) & set(after)):
        a, b = before[rid], after[rid]
        if a.status is Status.OK and b.status is not Status.OK:
            cmp.regressions.append(ModelChange(rid, a.status, b.status, [f"{a.status.value} -> {b.status.value}: {b.reason}"]))
        elif a.status is not Status.OK and b.status is Status.OK:
            cmp.improvements.append(ModelChange(rid, a.status, b.status, [f"{a.status.value} -> ok"]))
        elif a.status is not b.status:
            cmp.changed.append(ModelChange(rid, a.status, b.status, [f"{a.status.value} -> {b.status.value}: {b.reason}"]))
        elif a.status is Status.OK and a.census is not None and b.census is not None:
            worse, better = _census_changes(a, b, match_gb)
            if worse:
                cmp.regressions.append(ModelChange(rid, a.status, b.status, worse))
            if better:
                cmp.improvements.append(ModelChange(rid, a.status, b.status, better))
    _cause_shifts(cmp, old, new, match_gb, set(before) & set(after))
    return cmp


def _census_changes(a: Row, b: Row, match_gb: bool) -> tuple[list[str], list[str]]:
    assert a.census is not None and b.census is not None
    d = diff(a.census, b.census, match_gb=match_gb)
    worse = [f"new site {site_label(s.id, s.line)} {s.gb_type}" for s in d.new_sites]
    better = [f"site gone {site_label(s.id, s.line)} {s.gb_type}" for s in d.gone_sites]
    for c in d.site_events:
        (worse if c.after > c.before else better).append(
            f"events {c.before} -> {c.after} at {site_label(c.site.id, c.site.line)}")
    worse += [f"new skipped frame {f.id}" for f in d.new_skipped]
    better += [f"skipped frame gone {f.id}" for f in d.gone_skipped]
    worse += [f"new recompile cause: {r.reason}" for r in d.new_causes]
    better += [f"recompile cause gone: {r.reason}" for r in d.gone_causes]
    for cc in d.cause_counts:
        (worse if cc.after > cc.before else better).append(f"recompiles {cc.before} -> {cc.after}: {cc.cause.reason}")
    if d.graphs.after != d.graphs.before:
        (worse if d.graphs.after > d.graphs.before else better).append(f"graphs {d.graphs.before} -> {d.graphs.after}")
    if a.outputs_match_eager is True and b.outputs_match_eager is False:
        worse.append(f"outputs no longer match eager: {b.census.output_mismatch}")
    return worse, better


def _cause_shifts(cmp: SweepComparison, old: Sequence[Row], new: Sequence[Row], match_gb: bool,
                  common: set[str]) -> None:
    # Only models in both sweeps count, so a shard missing from one side is no shift.
    def key(sid: SiteId) -> Hashable:
        return sid if match_gb else sid.without_gb()
    o = {key(c.id): c for c in root_causes([r for r in old if r.id in common])}
    n = {key(c.id): c for c in root_causes([r for r in new if r.id in common])}
    for k in sorted(set(o) | set(n), key=str):
        oc, nc = o.get(k), n.get(k)
        om = set(oc.models) if oc else set()
        nm = set(nc.models) if nc else set()
        if om == nm:
            continue
        ref = nc or oc
        assert ref is not None
        shift = CauseShift(ref.id, ref.gb_type, len(om), len(nm), sorted(nm - om), sorted(om - nm))
        (cmp.causes_worse if shift.models_added else cmp.causes_better).append(shift)
    cmp.causes_worse.sort(key=lambda s: (-(s.after - s.before), s.id))
    cmp.causes_better.sort(key=lambda s: (s.after - s.before, s.id))


def gate_failed(cmp: SweepComparison, *, fail_on_improvement: bool = False) -> bool:
    """``--gate``: any regression (a model worse, a root cause breaking more models); with
    FAIL_ON_IMPROVEMENT also any improvement, so the recorded expectations stay current."""
    if cmp.regressions or cmp.causes_worse:
        return True
    return fail_on_improvement and bool(cmp.improvements or cmp.causes_better)
