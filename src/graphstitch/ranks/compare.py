"""Do all ranks compile the same graphs, breaks and collectives in the same order?

Ranks that take different graph breaks or guard paths enter collectives in different orders
and hang. Each rank's census is compared with the lowest rank's through ``changes.diff``; this
module groups what the diffs say into divergences, in program order, and flags code that
makes ranks differ. No torch import: offline traces are compared on machines without it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..changes import CensusDiff, collective_sequence, diff, schedule_sequence
from ..files import parse_python
from ..model import Census, Graph, SiteId, gb_text
from ..records import compile_order

_COLLECTIVE_TEXT = re.compile(
    r"\b(all_reduce\w*|allreduce\w*|all_gather\w*|reduce_scatter\w*|broadcast|broadcast_object_list|"
    r"barrier|all_to_all\w*|isend|irecv)\s*\(|\b(dist|torch\.distributed)\.(?!get_|is_)\w+\(")
_DISABLED_FN = re.compile(r"function `<function (\w+) at")

FUNCTIONAL_ADVICE = (
    "Use functional collectives (torch.distributed._functional_collectives: all_reduce, "
    "all_gather_tensor, reduce_scatter_tensor, ...), which trace into the graph, instead of "
    "collectives that break it or run inside torch._dynamo.disable; in-place dist.all_reduce also "
    "traces on torch 2.13. A field report saw ~160 breaks per forward fall to 2 after the switch. "
    "A collective outside the graphs is invisible to this check's collective order.")
RANK_ADVICE = (
    "Keep the compiled region identical on every rank: move rank-dependent code (`if rank == 0: "
    "print(...)`, logging, checkpoint I/O) outside the compiled function, or make it traceable "
    "(torch._dynamo.config.reorderable_logging_functions for print/logging). A different break "
    "on one rank changes its graphs, and then the order its collectives run in.")

KINDS = ("break_site", "skipped_frame", "recompile", "break_events", "collective_order", "collective_schedule",
         "graphs")


@dataclass
class Divergence:
    kind: str                          # one of KINDS
    ranks: list[int]                   # the odd ones
    other_ranks: list[int]
    compile_id: str | None
    file: str | None
    line: int | None
    message: str
    collectives: dict[int, list[str] | None] = field(default_factory=dict)  # that graph's, per rank
    function: str | None = None
    gb_id: str | None = None
    code: str | None = None
    reason: str | None = None
    events: dict[int, int] | None = None
    counts: dict[int, int] | None = None
    examples: list[str] | None = None
    graph_index: int | None = None
    collective_index: int | None = None


@dataclass
class Flag:
    kind: str                          # rank_dependent_code | collective_break | disabled_collective
    ranks: list[int]
    file: str
    line: int
    gb_id: str
    code: str
    message: str
    advice: str


@dataclass
class RankFailure:
    rank: int
    kind: str
    message: str
    type: str | None = None
    where: str | None = None


@dataclass
class RankSummary:
    graphs: int
    break_sites: int
    break_events: int
    recompiles: int
    skipped_frames: int
    error: str | None


@dataclass
class RankComparison:
    symmetric: bool
    ranks: list[int]
    failed: list[RankFailure]          # the first to fail first
    divergences: list[Divergence]      # program order: divergences[0] is the first
    flags: list[Flag]
    collectives: dict[int, list[list[str]]]
    summary: dict[int, RankSummary]


# ----------------------------------------------------------------------------- helpers

def _groups(values: dict[int, Any]) -> list[list[int]]:
    """Ranks grouped by equal value: the largest group first (ties: the one with the lowest rank)."""
    groups: list[tuple[Any, list[int]]] = []
    for r in sorted(values):
        for v, rs in groups:
            if v == values[r]:
                rs.append(r)
                break
        else:
            groups.append((values[r], [r]))
    return [rs for _, rs in sorted(groups, key=lambda g: (-len(g[1]), g[1][0]))]


def fmt_ranks(rs: Iterable[int]) -> str:
    rs = list(rs)
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(map(str, rs))


def _frame_at(c: Census, cid: str | None) -> tuple[str | None, int | None, str | None]:
    for f in c.frames:
        if f.compile_id == cid:
            return f.file, f.line, f.function
    for g in c.graphs:
        if g.compile_id == cid:
            return g.file, g.line, g.function
    return None, None, None


def _graph_collectives(censuses: dict[int, Census], cid: str | None) -> dict[int, list[str] | None]:
    return {r: next((list(g.collectives) for g in c.graphs if g.compile_id == cid), None)
            for r, c in censuses.items()}


def _per_rank(ref: int, censuses: dict[int, Census], diffs: dict[int, CensusDiff],
              ref_items: dict[Hashable, Any], new: str, gone: str, key: Any) -> dict[Hashable, dict[int, Any]]:
    """For each item key: {rank: that rank's item, or None}, read from the diffs against REF."""
    out: dict[Hashable, dict[int, Any]] = {k: {ref: v} for k, v in ref_items.items()}
    for r, d in diffs.items():
        gone_keys = {key(x) for x in getattr(d, gone)}
        for k in list(out):
            out[k][r] = None if k in gone_keys else out[k][ref]
        for x in getattr(d, new):
            out.setdefault(key(x), {ref: None})[r] = x
    for k in out:
        for r in censuses:
            out[k].setdefault(r, None)
    return out


# ----------------------------------------------------------------------------- divergences

def _site_divergences(ref: int, censuses: dict[int, Census], diffs: dict[int, CensusDiff]) -> list[Divergence]:
    out = []
    events_of: dict[int, dict[Hashable, int]] = {
        r: {ch.site.id: ch.after for ch in d.site_events} for r, d in diffs.items()}
    present = _per_rank(ref, censuses, diffs, {s.id: s for s in censuses[ref].sites}, "new_sites", "gone_sites",
                        lambda s: s.id)
    for sid, by in present.items():
        have = sorted(r for r, s in by.items() if s is not None)
        lack = sorted(r for r, s in by.items() if s is None)
        s = by[have[0]]
        if lack:
            msg = (f"break {gb_text(s.gb_id)} ({s.gb_type}) at {s.file}:{s.line} `{s.code.strip()}` in "
                   f"{s.function} is taken on {fmt_ranks(have)} only, not on {fmt_ranks(lack)}: "
                   "a rank-dependent code path inside the compiled region")
            out.append(Divergence("break_site", have, lack, s.compile_ids[0], s.file, s.line, msg,
                                  _graph_collectives(censuses, s.compile_ids[0]), s.function, s.gb_id, s.code))
            continue
        events = {r: events_of.get(r, {}).get(sid, by[r].events) for r in have}
        groups = _groups(events)
        if len(groups) > 1:
            odd = sorted(r for g in groups[1:] for r in g)
            sides = "; ".join(f"{fmt_ranks(g)}: {events[g[0]]}" for g in groups)
            msg = (f"break {gb_text(s.gb_id)} at {s.file}:{s.line} `{s.code.strip()}` is reported a different "
                   f"number of times per rank ({sides}): the ranks compiled that code differently often")
            odd_site = censuses[odd[0]].site(s.id)
            cid = odd_site.compile_ids[-1] if odd_site else s.compile_ids[-1]
            out.append(Divergence("break_events", odd, groups[0], cid, s.file, s.line, msg,
                                  _graph_collectives(censuses, cid), s.function, s.gb_id, s.code,
                                  events={r: events[r] for r in sorted(events)}))
    return out


def _skipped_divergences(ref: int, censuses: dict[int, Census], diffs: dict[int, CensusDiff]) -> list[Divergence]:
    out = []
    present = _per_rank(ref, censuses, diffs, {f.id: f for f in censuses[ref].skipped_frames},
                        "new_skipped", "gone_skipped", lambda f: f.id)
    for by in present.values():
        have = sorted(r for r, f in by.items() if f)
        lack = sorted(r for r, f in by.items() if not f)
        if lack:
            sf = by[have[0]]
            msg = (f"frame {sf.function} ({sf.file}:{sf.line}) is skipped ({sf.fail_type}: {sf.reason}) on "
                   f"{fmt_ranks(have)} only: it runs eagerly there and compiled on {fmt_ranks(lack)}")
            out.append(Divergence("skipped_frame", have, lack, sf.compile_id, sf.file, sf.line, msg,
                                  _graph_collectives(censuses, sf.compile_id), sf.function))
    return out


def _recompile_divergences(ref: int, censuses: dict[int, Census], diffs: dict[int, CensusDiff]) -> list[Divergence]:
    out = []
    present = _per_rank(ref, censuses, diffs, {r.reason: r for r in censuses[ref].recompiles},
                        "new_causes", "gone_causes", lambda r: r.reason)
    changed: dict[int, dict[Hashable, int]] = {r: {cc.cause.reason: cc.after for cc in d.cause_counts}
                                               for r, d in diffs.items()}
    for reason, by in present.items():
        counts = {r: changed.get(r, {}).get(reason, x.count) if x else 0 for r, x in by.items()}
        groups = _groups(counts)
        if len(groups) == 1:
            continue
        odd = sorted(r for g in groups[1:] for r in g)
        at = next(r for r in odd + groups[0] if counts[r])  # a rank that did recompile names the place
        cause = censuses[at].recompiles[[x.reason for x in censuses[at].recompiles].index(str(reason))]
        cid = cause.compile_ids[0]
        file, line, fn = _frame_at(censuses[at], cid)
        sides = "; ".join(f"{fmt_ranks(g)}: {counts[g[0]]}x" for g in groups)
        msg = (f"recompile cause `{reason}` in {', '.join(cause.frames)} differs across ranks ({sides}), "
               f"first at {cid} on rank {at}: the ranks' inputs or guards differ")
        out.append(Divergence("recompile", odd, groups[0], cid, file, line, msg, _graph_collectives(censuses, cid),
                              fn, reason=str(reason), counts={r: counts[r] for r in sorted(counts)},
                              examples=cause.examples))
    return out


def _graph_divergence(censuses: dict[int, Census], diffs: dict[int, CensusDiff]) -> list[Divergence]:
    """The first position where the ranks' graph sequences differ (everything after shifts)."""
    found = [d.first_graph_difference for d in diffs.values() if d.first_graph_difference is not None]
    if not found:
        return []
    i = min(found)

    def sig(c: Census) -> Any:
        g = c.graphs[i] if i < len(c.graphs) else None
        return (g.compile_id, g.function, g.file, g.line, g.op_count, tuple(g.collectives)) if g else None
    groups = _groups({r: sig(c) for r, c in censuses.items()})
    odd = sorted(r for g in groups[1:] for r in g)

    def side(r: int) -> str:
        c = censuses[r]
        if i >= len(c.graphs):
            return f"rank {r}: no graph #{i} ({c.graph_count} graphs)"
        g = c.graphs[i]
        return (f"rank {r}: {g.compile_id} {g.function} ({g.file}:{g.line}, {g.op_count} ops, "
                f"collectives {[op.split('.')[-1] for op in g.collectives]})")
    ref = next((r for r in odd + groups[0] if i < len(censuses[r].graphs)), odd[0])
    g = censuses[ref].graphs[i] if i < len(censuses[ref].graphs) else None
    msg = (f"graph #{i} differs (graph counts: " +
           ", ".join(f"rank {r}: {censuses[r].graph_count}" for r in sorted(censuses)) + "): " +
           "; ".join(side(r) for r in sorted(censuses)))
    return [Divergence("graphs", odd, groups[0], g.compile_id if g else None, g.file if g else None,
                       g.line if g else None, msg,
                       {r: (list(c.graphs[i].collectives) if i < len(c.graphs) else None) for r, c in censuses.items()},
                       graph_index=i)]


def _order_divergence(censuses: dict[int, Census], found: list[int], kind: str,
                      ops: Callable[[Graph], list[str]], what: str, lead: str,
                      sequence: Callable[[Census], Any]) -> list[Divergence]:
    """The first collective some rank would enter in a different order (where a job hangs),
    in Dynamo's graphs or in Inductor's executed schedule; FOUND: each diff's first index."""
    if not found:
        return []
    k = min(found)
    seqs = {r: [(op, g) for g in c.graphs for op in ops(g)] for r, c in censuses.items()}
    groups = _groups({r: (s[k][0] if k < len(s) else None) for r, s in seqs.items()})
    odd = sorted(r for g in groups[1:] for r in g)

    def side(r: int) -> str:
        if k >= len(seqs[r]):
            return f"rank {r}: none (only {len(seqs[r])} {what})"
        op, g = seqs[r][k]
        return f"rank {r}: {op} in graph {g.compile_id} {g.function} ({g.file}:{g.line})"
    ref = next((r for r in odd + groups[0] if k < len(seqs[r])), odd[0])
    g = seqs[ref][k][1] if k < len(seqs[ref]) else None
    msg = lead.format(k=k) + "; ".join(side(r) for r in sorted(seqs))
    return [Divergence(kind, odd, groups[0], g.compile_id if g else None, g.file if g else None,
                       g.line if g else None, msg, {r: list(sequence(c)) for r, c in censuses.items()},
                       collective_index=k)]


def _collective_divergence(censuses: dict[int, Census], diffs: dict[int, CensusDiff]) -> list[Divergence]:
    found = [d.first_collective_difference for d in diffs.values() if d.first_collective_difference is not None]
    return _order_divergence(
        censuses, found, "collective_order", lambda g: g.collectives, "collectives in graphs",
        "collective #{k} in the compiled graphs differs; where these graphs run in step, the ranks "
        "wait on different collectives (a hang): ", collective_sequence)


def _schedule_divergence(censuses: dict[int, Census], diffs: dict[int, CensusDiff]) -> list[Divergence]:
    """Inductor's ``inductor_collective_schedule``: the order that actually executes, after
    Inductor's reordering and bucketing, which Dynamo's graphs do not show."""
    found = [d.first_schedule_difference for d in diffs.values() if d.first_schedule_difference is not None]
    dynamo_same = all(d.first_collective_difference is None for d in diffs.values())
    lead = ("collective #{k} of Inductor's executed schedule differs"
            + (" while Dynamo's graphs hold the same collectives (Inductor reordered or bucketed them "
               "differently per rank: compare the ranks' inductor configs)" if dynamo_same else
               " (Dynamo's graphs differ too)")
            + "; the ranks wait on different collectives (a hang): ")
    return _order_divergence(censuses, found, "collective_schedule", lambda g: g.schedule or [],
                             "scheduled collectives", lead, schedule_sequence)


# ----------------------------------------------------------------------------- flags

def _disabled_fn_calls_collective(explanation: str, file: str) -> bool:
    """A torch._dynamo.disable'd function whose source (found next to the site) calls a collective."""
    m = _DISABLED_FN.search(explanation or "")
    if not m:
        return False
    try:
        with open(file, encoding="utf-8") as f:
            src = f.read()
        tree = parse_python(src)
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == m.group(1):
            body = ast.get_source_segment(src, node) or ""
            return bool(_COLLECTIVE_TEXT.search(body.split(":", 1)[-1]))
    return False


def _flags(censuses: dict[int, Census], divergences: list[Divergence]) -> list[Flag]:
    flags = [Flag("rank_dependent_code", d.ranks, d.file or "?", d.line or 0, d.gb_id or "", d.code or "",
                  f"{d.file}:{d.line} `{(d.code or '').strip()}` breaks the graph on {fmt_ranks(d.ranks)} only",
                  RANK_ADVICE) for d in divergences if d.kind == "break_site"]
    seen: dict[SiteId, Flag] = {}
    for r in sorted(censuses):
        for s in censuses[r].sites:
            if s.id in seen:
                seen[s.id].ranks.append(r)
                continue
            disabled = _disabled_fn_calls_collective(s.explanation, s.file)
            if not (disabled or _COLLECTIVE_TEXT.search(s.code or "")):
                continue
            what = ("a torch._dynamo.disable'd function that calls a collective" if disabled
                    else "a collective call")
            seen[s.id] = Flag("disabled_collective" if disabled else "collective_break", [r], s.file, s.line,
                              s.gb_id, s.code, f"{s.file}:{s.line} `{s.code.strip()}` ({what}) breaks the graph "
                                               f"({gb_text(s.gb_id)}: {s.gb_type})", FUNCTIONAL_ADVICE)
    return flags + list(seen.values())


def compare_ranks(censuses: dict[int, Census]) -> RankComparison:
    """Compare the ranks' censuses; ``divergences`` is in program order (by compile id, the
    cause before its consequences): ``divergences[0]`` is the first divergence."""
    ranks = sorted(censuses)
    # The rank that failed first is the cause; the others often fail because it left.
    bad = sorted((r for r in ranks if censuses[r].error),
                 key=lambda r: (censuses[r].error.kind.value == "stopped",  # type: ignore[union-attr]
                                censuses[r].error.at or float("inf"), r))  # type: ignore[union-attr]
    failed = [RankFailure(r, e.kind.value, e.message, e.type, e.where)
              for r in bad for e in [censuses[r].error] if e is not None]
    divergences: list[Divergence] = []
    if len(ranks) > 1:
        ref = ranks[0]
        diffs = {r: diff(censuses[ref], censuses[r]) for r in ranks[1:]}
        divergences = (_site_divergences(ref, censuses, diffs) + _skipped_divergences(ref, censuses, diffs)
                       + _recompile_divergences(ref, censuses, diffs) + _collective_divergence(censuses, diffs)
                       + _schedule_divergence(censuses, diffs) + _graph_divergence(censuses, diffs))
        divergences.sort(key=lambda d: (compile_order(d.compile_id), KINDS.index(d.kind)))
    return RankComparison(
        symmetric=not divergences and not failed, ranks=ranks, failed=failed, divergences=divergences,
        flags=_flags(censuses, divergences),
        collectives={r: [list(g.collectives) for g in censuses[r].graphs] for r in ranks},
        summary={r: RankSummary(c.graph_count, len(c.sites), c.break_events, c.recompile_count,
                                len(c.skipped_frames), c.error.kind.value if c.error else None)
                 for r, c in censuses.items()})
