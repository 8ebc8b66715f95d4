"""A sweep's report (:class:`~graphstitch.sweep.SweepReport`): terminal, Markdown and one-file
HTML with sortable tables. Reads the typed report only; counts come from it. No torch import."""

from __future__ import annotations

import os

from markupsafe import Markup
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..files import atomic_write
from ..model import gb_text
from ..paths import short_path
from ..sweep.rows import RootCause, Row, Status, SweepComparison, SweepReport
from .html import _ENV, _pygments

SEMANTICS_NOTE = ("Rows are graphstitch censuses: torch.compile with fullgraph=False, so a break splits the "
                  "graph and is counted (fullgraph=True would stop at the first break).")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _num(x: int | None) -> str:
    return "-" if x is None else str(x)


def _match(r: Row) -> str:
    return {True: "yes", False: "NO", None: "-"}[r.outputs_match_eager]


def _cause_label(c: RootCause) -> str:
    return f"{gb_text(c.id.gb_id)} {short_path(c.file)}:{c.line}"


def headline(rep: SweepReport) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in rep.status_counts.items() if n)
    wall = f" in {rep.wall_seconds:.0f} s" if rep.wall_seconds is not None else ""
    return (f"{rep.total} targets{wall}: {counts or 'none'}; full graph {rep.full_graph}/{rep.ran} that ran "
            f"({_pct(rep.full_graph_share)}); {len(rep.root_causes)} root causes")


def terminal(rep: SweepReport, console: Console | None = None, *, top: int = 15, all_rows: bool = True) -> None:
    con = console or Console(highlight=False, emoji=False)
    con.print(f"[bold]graphstitch sweep[/] {escape(headline(rep))}")
    con.print(f"[dim]{escape(SEMANTICS_NOTE)} torch {', '.join(rep.torch_versions) or '?'}[/]")
    if rep.root_causes:
        t = Table(title="Root causes, by models affected", title_justify="left")
        for col in ("#", "models", "site", "gb_type", "where", "events"):
            t.add_column(col, justify="right" if col in ("#", "models", "events") else "left")
        for i, c in enumerate(rep.root_causes[:top], 1):
            t.add_row(str(i), str(c.model_count), escape(_cause_label(c)), escape(c.gb_type), c.where, str(c.events))
        con.print(t)
        best = rep.root_causes[0]
        con.print(f"fixing [bold]{escape(_cause_label(best))}[/] ({escape(best.id.code)}) unblocks "
                  f"{best.model_count} model{'s' if best.model_count != 1 else ''}")
        if len(rep.root_causes) > top:
            con.print(f"[dim]… {len(rep.root_causes) - top} more root causes (--json / --html for all)[/]")
    if all_rows:
        t = Table(title="Targets", title_justify="left")
        for col in ("target", "status", "graphs", "sites", "events", "skipped", "recompiles", "= eager", "s"):
            t.add_column(col, justify="left" if col in ("target", "status") else "right")
        for r in rep.rows:
            st = r.status.value if r.status is Status.OK else f"[red]{r.status.value}[/]"
            t.add_row(escape(r.id), st, _num(r.graphs), _num(r.break_sites), _num(r.break_events),
                      _num(r.skipped_frames), _num(r.recompiles), _match(r), f"{r.wall_seconds:.1f}")
        con.print(t)
    failed = [r for r in rep.rows if r.status is not Status.OK]
    for r in failed[:top]:
        con.print(f"[red]{r.status.value}[/] {escape(r.id)}: {escape(r.reason or '')}", soft_wrap=True)
    if rep.compare is not None:
        comparison(rep.compare, con)


def comparison(cmp: SweepComparison, con: Console) -> None:
    con.print(f"[bold]compared with {escape(cmp.old)}[/]: {len(cmp.regressions)} regressed, "
              f"{len(cmp.improvements)} improved, {len(cmp.changed)} failing differently; root causes "
              f"{len(cmp.causes_worse)} worse, {len(cmp.causes_better)} better"
              + ("" if cmp.matched_on_gb else " (torch versions differ: sites matched without GB ids)"))
    for m in cmp.regressions:
        for d in m.details:
            con.print(f"  [red]regression[/] {escape(m.id)}: {escape(d)}", soft_wrap=True)
    for m in cmp.improvements:
        for d in m.details:
            con.print(f"  [green]improvement[/] {escape(m.id)}: {escape(d)}", soft_wrap=True)
    for s in cmp.causes_worse:
        con.print(f"  [red]root cause[/] {escape(str(s.id))}: {s.before} -> {s.after} models", soft_wrap=True)
    for s in cmp.causes_better:
        con.print(f"  [green]root cause[/] {escape(str(s.id))}: {s.before} -> {s.after} models", soft_wrap=True)
    if cmp.only_old or cmp.only_new:
        con.print(f"  [dim]{len(cmp.only_old)} targets only in the old sweep, {len(cmp.only_new)} only in this one[/]")


def _cell(x: object) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown(rep: SweepReport, *, top: int = 30) -> str:
    out = [f"## graphstitch sweep\n\n{headline(rep)}.\n\n_{SEMANTICS_NOTE}_\n"]
    if rep.root_causes:
        out.append("### Root causes, by models affected\n\n| # | models | GB id | site | code | gb_type |\n|---|---|---|---|---|---|")
        for i, c in enumerate(rep.root_causes[:top], 1):
            out.append(f"| {i} | {c.model_count} | {gb_text(c.id.gb_id)} | `{_cell(short_path(c.file))}:{c.line}` | "
                       f"`{_cell(c.id.code)}` | {_cell(c.gb_type)} |")
        out.append("")
    out.append("### Targets\n\n| target | status | graphs | sites | events | skipped | recompiles | = eager | s |\n"
               "|---|---|---|---|---|---|---|---|---|")
    for r in rep.rows:
        out.append(f"| `{_cell(r.id)}` | {r.status.value} | {_num(r.graphs)} | {_num(r.break_sites)} | "
                   f"{_num(r.break_events)} | {_num(r.skipped_frames)} | {_num(r.recompiles)} | {_match(r)} | "
                   f"{r.wall_seconds:.1f} |")
    cmp = rep.compare
    if cmp is not None:
        out.append(f"\n### Compared with `{_cell(cmp.old)}`\n")
        for kind, items in (("regression", cmp.regressions), ("improvement", cmp.improvements)):
            out += [f"- **{kind}** `{_cell(m.id)}`: {_cell(d)}" for m in items for d in m.details]
        out += [f"- **root cause worse** `{_cell(s.id)}`: {s.before} → {s.after} models" for s in cmp.causes_worse]
        out += [f"- **root cause better** `{_cell(s.id)}`: {s.before} → {s.after} models" for s in cmp.causes_better]
    return "\n".join(out) + "\n"


def write_markdown(rep: SweepReport, path: str) -> None:
    atomic_write(path, markdown(rep))


def render_html(rep: SweepReport) -> str:
    return _ENV.get_template("sweep.html.j2").render(
        rep=rep, headline=headline(rep), semantics=SEMANTICS_NOTE, pygments_css=Markup(_pygments()[2]),
        title=f"sweep of {rep.total} targets", Status=Status, short=short_path)


def write_html(rep: SweepReport, path: str | os.PathLike[str]) -> None:
    atomic_write(path, render_html(rep))
