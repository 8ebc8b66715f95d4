"""Markdown for PR comments and $GITHUB_STEP_SUMMARY: totals, a table of sites, one of
recompile causes (plus the gate's verdict under `check`). No torch import."""

from __future__ import annotations

import os

from ..costs import cost_for
from ..files import atomic_write
from ..model import Census, gb_text
from ..owners import chain_text
from ..paths import short_path
from .sarif import gb_url


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(censuses: list[Census], notes: dict[str, list[str]] | None = None) -> str:
    """A short summary per target: totals, then a table of sites and one of recompile causes.
    ``notes`` (per target) carries the gate's verdict lines."""
    out: list[str] = []
    for c in censuses:
        out.append(f"### graphstitch: `{c.target or '?'}`\n")
        for h in c.limit_hits:   # first: the frame runs eagerly from that call on
            when = f"; from call {h.call + 1} on, {h.eager_calls} call(s) ran it eagerly" if h.call is not None else ""
            out.append(f"**{h.limit} hit**: `{_cell(h.function)}` at `{short_path(h.file)}:{h.line}`{when}\n")
        match = {True: "yes", False: "**NO**", None: "not checked"}[c.outputs_match_eager]
        out.append(f"torch {c.torch_version or '?'} · graphs **{c.graph_count}** · break sites "
                   f"**{len(c.sites)}** · break events **{c.break_events}** · skipped frames "
                   f"**{len(c.skipped_frames)}** · recompiles **{c.recompile_count}** "
                   f"({len(c.recompiles)} causes) · outputs match eager {match}\n")
        out.append(f"**{_cell(c.summary)}**\n")
        for w in c.warnings:
            out.append(f"> warning: {_cell(w)}\n")
        for line in (notes or {}).get(c.target or "", []):
            out.append(f"- {line}")
        if (notes or {}).get(c.target or ""):
            out.append("")
        out.append(f"_Semantics: {'fullgraph=True' if c.semantics == 'fullgraph' else 'default (fullgraph=False)'}._\n")
        if c.sites:
            out.append("| # | GB id | where | your code | function | events | cost/call | break |")
            out.append("|---|---|---|---|---|---|---|---|")
            for i, s in enumerate(c.sites, 1):
                gb = f"[{s.gb_id}]({gb_url(s.gb_id)})" if gb_url(s.gb_id) else gb_text(s.gb_id)
                flag = " (frame skipped)" if s.frame_skipped else ""
                route = s.owner
                mine = f"`{_cell(chain_text(route))}`" if route is not None and route.chain else "same line"
                sc = cost_for(c, s.id)
                spent = f"{sc.seconds.median_s * 1e3:.3g} ms ({sc.share:.0%})" if sc else "—"
                out.append(f"| {i} | {gb} | `{_cell(short_path(s.file))}:{s.line}` | {mine} | `{_cell(s.name)}` | "
                           f"{s.events} | {spent} | {_cell(s.gb_type)}{flag} |")
            out.append("")
            steps = [s for s in c.sites if s.next_step]
            for i, s in enumerate(steps, 1):
                assert s.next_step is not None
                out.append(f"{i}. {_cell(s.next_step.action)}: `{_cell(s.next_step.command)}`")
            if steps:
                out.append("")
        if c.coverage.untraced:
            out.append("| never traced (breaks there are not counted) | function | code lines | why |")
            out.append("|---|---|---|---|")
            for u in c.coverage.untraced:
                out.append(f"| `{_cell(short_path(u.file))}:{u.where}` | `{_cell(u.function)}` | "
                           f"{u.lines if u.end is not None else '?'} | {_cell(u.reason)} |")
            out.append("")
        if c.recompiles:
            out.append("| recompiles | cause | made at | frames |")
            out.append("|---|---|---|---|")
            for r in c.recompiles:
                at = f"`{short_path(r.provenance.file)}:{r.provenance.line}`" if r.provenance else ""
                note = " (expected)" if r.expected else ""
                out.append(f"| {r.count} | `{_cell(r.reason)}`{note} | {at} | {_cell(', '.join(r.frames))} |")
            out.append("")
        if c.error:
            out.append(f"**Target failed ({_cell(c.error.kind.value)})**: {_cell(c.error.message[:300])}\n")
    return "\n".join(out).rstrip() + "\n"


def write_markdown(censuses: list[Census], path: str, notes: dict[str, list[str]] | None = None) -> None:
    text = markdown(censuses, notes)
    atomic_write(path, text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        # GitHub collects every step's lines from this file: append, never replace.
        with open(summary, "a", encoding="utf-8") as f:
            f.write(text + "\n")
