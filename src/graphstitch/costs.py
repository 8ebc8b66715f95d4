"""What each break costs: timed regions of warm calls -> seconds per site (`census --cost`).

The child (``perf/gaps.py``) times every compiled graph of several warm passes over the
target's calls and writes the raw timeline as a run record: per pass, in order, graphs
(compile id, seconds) and the eager gaps between them (the graph each follows). Here,
torch-free, each gap is attributed to the break site that caused it: the site reported
while compiling the graph the gap follows (a frame's graph ends at its break; the gap is
the break's own code, the return to Python and the entry of the resume function). A graph
with no break of its own (a resume function's last graph, returning through an outer frame
that broke on the same site) passes its gap on to the site still unwinding. Gaps before the
first break (guard checks, the prologue) are not a site's. Recompile causes cost the compile
seconds of their compiles. No torch import.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .model import Census, Cost, Region, SiteCost, SiteId, Spread


def spread(samples: Sequence[float]) -> Spread:
    s = sorted(samples) or [0.0]
    q1, _, q3 = statistics.quantiles(s, n=4) if len(s) > 1 else (s[0], s[0], s[0])
    return Spread(round(statistics.median(s), 9), round(q1, 9), round(q3, 9), len(samples))


def _site_of(c: Census) -> dict[str, SiteId]:
    out: dict[str, SiteId] = {}
    for s in c.sites:   # ranked: the first site reported at a compile id owns its gap
        for cid in s.compile_ids:
            out.setdefault(cid, s.id)
    return out


def _attribute(segments: list[list[Any]], site_of: dict[str, SiteId],
               skipped: SiteId | None) -> list[Region]:
    regions: list[Region] = []
    current: SiteId | None = None
    graphs = any(seg[0] == "graph" for seg in segments)
    for kind, cid, dt in segments:
        if kind == "graph":
            regions.append(Region("graph", float(dt), cid))
            continue
        if cid is not None:
            current = site_of.get(cid, current)
        elif not graphs:
            current = skipped     # no graph at all ran: the skipped frame is the whole call
        regions.append(Region("gap", float(dt), cid, current))
    return regions


def cost_of(c: Census, raw: dict[str, Any]) -> Cost:
    site_of = _site_of(c)
    skipped = next((s.id for s in c.sites if s.frame_skipped), None)
    passes = [_attribute(p.get("segments", []), site_of, skipped) for p in raw.get("passes", [])]
    per_site: dict[SiteId, list[float]] = {}
    gaps_per: dict[SiteId, int] = {}
    loose: list[float] = []
    for regions in passes:
        totals: dict[SiteId, float] = {}
        free = 0.0
        for r in regions:
            if r.kind != "gap":
                continue
            if r.site is None:
                free += r.median_s
            else:
                totals[r.site] = totals.get(r.site, 0.0) + r.median_s
        for sid in totals.keys() | per_site.keys():
            per_site.setdefault(sid, []).append(totals.get(sid, 0.0))
        loose.append(free)
    if passes:
        for r in passes[0]:
            if r.site is not None and r.kind == "gap":
                gaps_per[r.site] = gaps_per.get(r.site, 0) + 1
    calls = [float(p["total"]) for p in raw.get("passes", [])]
    call = spread(calls)
    sites = []
    for sid, xs in per_site.items():
        sp = spread(xs)
        sites.append(SiteCost(sid, sp, round(sp.median_s / call.median_s, 4) if call.median_s else 0.0,
                              sp.median_s, gaps_per.get(sid, 0)))
    sites.sort(key=lambda x: -x.seconds.median_s)
    eager = raw.get("eager") or []
    return Cost(str(raw.get("device", "cpu")), int(raw.get("rounds", len(calls))), bool(raw.get("stable")),
                call, spread(eager) if eager else None,
                spread([sum(r.median_s for r in p if r.kind == "graph") for p in passes]),
                spread([sum(r.median_s for r in p if r.kind == "gap") for p in passes]),
                sites, spread(loose) if passes else None, _median_timeline(passes))


def _median_timeline(passes: list[list[Region]]) -> list[Region]:
    """One pass's timeline with each region's median over the passes that ran the same
    sequence of regions as the first one."""
    if not passes:
        return []
    shape = [(r.kind, r.compile_id) for r in passes[0]]
    same = [p for p in passes if [(r.kind, r.compile_id) for r in p] == shape]
    return [Region(r.kind, round(statistics.median(p[i].median_s for p in same), 9), r.compile_id, r.site)
            for i, r in enumerate(passes[0])]


def attach(c: Census, raw: dict[str, Any] | None) -> None:
    """Census-level facts about cost and semantics, read from the run's own records."""
    secs = {f.compile_id: f.compile_seconds for f in c.frames}
    for cause in c.recompiles:
        cause.compile_seconds = round(sum(secs.get(cid, 0.0) for cid in cause.compile_ids), 6)
        frames = {cid.split("/")[0] for cid in cause.compile_ids}
        if len(frames) > 1:
            cause.fan_out = (f"{cause.count} recompiles from one changed input: the function and each resume "
                             f"function after its graph breaks ({len(frames)} frames) are compiled separately, "
                             "and each guards on the input")
    if c.config.get("semantics") == "fullgraph":
        c.semantics = "fullgraph"
    if raw is not None:
        c.cost = cost_of(c, raw)


def cost_for(c: Census, sid: SiteId) -> SiteCost | None:
    if c.cost is None:
        return None
    return next((x for x in c.cost.sites if x.site == sid), None)
