"""Terminal renderers: every command's human output, read from its typed result.

One block per item rather than wide tables where lines are long, so output stays readable
at 80 columns and in CI logs. Nothing here counts or matches anything itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..costs import cost_for
from ..model import Census, ErrorKind, LimitHit, RecompileCause, Site, gb_text
from ..owners import chain_text, group_line
from ..paths import is_internal, short_path
from ..ranks.compare import fmt_ranks

if TYPE_CHECKING:   # types only: importing fix (libcst) or perf here costs every `trace` ~0.4 s and 20 MB
    from ..fix import FixReport
    from ..fix.fixall import FixAll
    from ..gate import Verdict
    from ..guards import GuardReport
    from ..perf import PerfResult
    from ..perf.timing import LatencyStats
    from ..ranks import RankComparison


def _yes_no(v: bool | None) -> str:
    return {True: "[green]yes[/]", False: "[bold red]NO[/]", None: "[dim]not checked[/]"}[v]


def _say(console: Console, markup: str) -> None:
    """Prose under a site, indented; wrapped lines keep the indent (readable in CI logs)."""
    for line in Text.from_markup(markup, emoji=False).wrap(console, max(console.width - 3, 20)):
        line.rstrip()
        console.print(Text("   ") + line, no_wrap=True, overflow="fold")


def _phrases(console: Console, parts: list[str | tuple[str, str]], indent: str = "", sep: str = " · ") -> None:
    """Short markup phrases ("recompile causes 2", "sites 2→2") joined by SEP (or by the
    separator a (phrase, sep) part brings) and wrapped only between phrases, never inside one:
    each line is laid out here and printed unwrapped. A phrase wider than the console alone
    is cut with an ellipsis."""
    lines: list[Text] = []
    for part in parts:
        markup, before = part if isinstance(part, tuple) else (part, sep)
        if not markup:
            continue
        t = Text.from_markup(markup, emoji=False)
        if lines and lines[-1].cell_len + len(before) + t.cell_len <= console.width:
            lines[-1].append(before)
            lines[-1].append(t)
        else:
            lines.append(Text(indent) + t if lines else t)
    for line in lines:
        console.print(line, no_wrap=True, overflow="ellipsis")


def _say_at(console: Console, markup: str, indent: str) -> None:
    """Prose wrapped at words, every line at INDENT."""
    for line in Text.from_markup(markup, emoji=False).wrap(console, max(console.width - len(indent), 20)):
        line.rstrip()
        console.print(Text(indent) + line, no_wrap=True, overflow="fold")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _code(console: Console, line: int, code: str, indent: str = "   ") -> None:
    """A source line: cut with an ellipsis at the console's width, never wrapped mid-word."""
    console.print(Text(f"{indent}{line:>5} | {code}", style="cyan"), no_wrap=True, overflow="ellipsis")


def _stack(console: Console, s: Site, full: bool) -> None:
    """The site's stack, outermost first; torch's own frames collapsed into one line."""
    hidden = 0

    def flush() -> None:
        nonlocal hidden
        if hidden:
            console.print(f"   [dim]… {hidden} torch/stdlib frame{'s' if hidden != 1 else ''} "
                          "(--full-stack)[/]")
            hidden = 0
    for fr in s.stack:
        if not full and is_internal(fr.file):
            hidden += 1
            continue
        flush()
        console.print(Text(f"   {short_path(fr.file)}:{fr.line} in {fr.name}", style="dim"), no_wrap=True,
                      overflow="ellipsis")
    flush()


def _semantics(c: Census, flag: bool) -> list[str]:
    if c.semantics == "fullgraph":
        return ["fullgraph=True semantics (capture_scalar_outputs, capture_dynamic_output_shape_ops):",
                "each site would fail a fullgraph compile"]
    return ["default torch.compile semantics (fullgraph=False)",
            *(["--fullgraph-semantics for fullgraph=True"] if flag else [])]


def limit_hits(hits: list[LimitHit], console: Console) -> None:
    """Frames that hit the recompile limit: first in every output (they run eagerly, silently)."""
    for h in hits:
        calls = (f"; from call {h.call + 1}{' of a repeat pass' if h.repeat else ''} on, {h.eager_calls} call"
                 f"{'s' if h.eager_calls != 1 else ''} ran it eagerly whenever no cache entry matched"
                 if h.call is not None and h.eager_calls is not None else "")
        console.print(f"[bold red]{escape(h.limit)} hit[/] · [bold]{escape(h.function)}[/] "
                      f"{escape(short_path(h.file))}:{h.line} ({escape(h.compile_id)}){escape(calls)}")


def cause_lines(rc: RecompileCause, console: Console) -> None:
    """A cause's kind, provenance (the user line that made the guard, the break that made the
    value) and, for a cause that must recompile, why."""
    if rc.provenance is not None:
        p = rc.provenance
        _say(console, f"[bold]{escape(rc.kind)}[/] {escape(rc.subject)} · made at "
                      f"{escape(short_path(p.file))}:{p.line} in {escape(p.function)}: {escape(p.code[:120])}")
    if rc.site is not None:
        _say(console, f"value handed over by the break {escape(rc.site.gb_id)} {escape(rc.site.path)} "
                      f"{escape(rc.site.function)}: {escape(rc.site.code[:100])}")
    if rc.expected:
        _say(console, f"[dim]expected ({rc.count} recompile{'s' if rc.count != 1 else ''}): {escape(rc.expected)}[/]")


def census(c: Census, console: Console | None = None, full_stack: bool = False, *, command: str = "census",
           fullgraph_flag: bool = True) -> None:
    """COMMAND names the command in the header; FULLGRAPH_FLAG: it has --fullgraph-semantics
    to suggest (`run` and `trace` do not)."""
    console = console or Console(highlight=False, emoji=False)
    cfg = c.config
    head = f"[bold]graphstitch {escape(command)}[/] {escape(c.target or '')}"
    bits = [f"torch {escape(c.torch_version or '?')}"]
    if cfg.get("backend"):
        bits.append(f"backend {escape(str(cfg['backend']))}")
    if cfg.get("nested_graph_breaks"):
        bits.append("nested_graph_breaks")
    if c.calls:
        bits.append(f"{c.calls} call{'s' if c.calls != 1 else ''}")
    if cfg.get("grad_auto"):
        bits.append("autograd on: the target needs autograd (backward(), a gradient hook), so it ran again as with --grad")
    elif cfg.get("grad"):
        bits.append("autograd on (--grad)")
    console.print(head)
    _phrases(console, [f"[dim]{b}[/]" for b in bits])
    _phrases(console, [f"[dim]{escape(x)}[/]" for x in _semantics(c, fullgraph_flag)], sep="; ")
    limit_hits(c.limit_hits, console)
    _phrases(console, [
        f"graphs [bold]{c.graph_count}[/]", f"break sites [bold]{len(c.sites)}[/]",
        f"break events [bold]{c.break_events}[/]", f"skipped frames [bold]{len(c.skipped_frames)}[/]",
        f"recompile causes [bold]{len(c.recompiles)}[/] ({c.recompile_count} recompiles)",
        f"compile {c.compile_seconds:.2f} s", f"outputs match eager {_yes_no(c.outputs_match_eager)}"])
    if c.output_mismatch:
        console.print(f"  [red]{escape(c.output_mismatch)}[/]")
    cost = c.cost
    if cost is not None:
        _phrases(console, [
            f"warm call {_ms(cost.call.median_s)} (IQR {_ms(cost.call.q3_s - cost.call.q1_s)}, "
            f"{cost.rounds} alternating rounds{'' if cost.stable else ', [yellow]not stable[/]'})",
            f"eager {_ms(cost.eager.median_s)}" if cost.eager else "",
            f"in graphs {_ms(cost.graphs.median_s)}", f"in eager gaps {_ms(cost.gaps.median_s)}"])

    if c.sites:
        # One block per site rather than a wide table: readable at 80 columns and in CI logs.
        order = c.sites
        if cost is not None:
            rank = {x.site: i for i, x in enumerate(cost.sites)}
            order = sorted(c.sites, key=lambda s: rank.get(s.id, len(rank)))
        console.print("\n[bold underline]Break sites, ranked by "
                      f"{'measured cost' if cost is not None else 'impact'}[/]")
        for i, s in enumerate(order, 1):
            sc = cost_for(c, s.id)
            _phrases(console, [
                f"[bold]{i}. {gb_text(s.gb_id)}[/]", (f"{escape(short_path(s.file))}:{s.line}", " "),
                (f"in [bold]{escape(s.name)}[/]", " "),
                f"{s.events} event{'s' if s.events != 1 else ''}", f"depth {s.nesting_depth}",
                f"[bold]{_ms(sc.seconds.median_s)}/call[/] ({sc.share:.0%}, IQR "
                f"{_ms(sc.seconds.q3_s - sc.seconds.q1_s)})" if sc else "",
                "[bold red]whole frame skipped (runs eager)[/]" if s.frame_skipped else ""], indent="   ")
            if s.code:
                _code(console, s.line, s.code)
            r = s.owner
            if r is not None and r.chain:
                who = "your code" if r.in_project else "entered at"
                _say(console, f"[bold]{who}:[/] {escape(chain_text(r))}")
                if r.owner.code:
                    _code(console, r.owner.line, r.owner.code)
                group = group_line(s)
                if group:
                    _say(console, f"[yellow]{escape(group)}:[/] " + ", ".join(
                        escape(f"{os.path.basename(x.owner.file)}:{x.owner.line}") for x in s.routes if x.in_project))
            if full_stack or s.nesting_depth > 1 or (r is not None and r.chain):
                _stack(console, s, full_stack)
            _say(console, f"[bold]{escape(s.gb_type)}[/]")
            if s.explanation:
                _say(console, f"{escape(s.explanation[:400])}")
            if s.hints:
                _say(console, f"[green]Dynamo's hint:[/] {escape(s.hints[0][:400])}")
            for a in s.advice[:1]:
                _say(console, f"[magenta]Advice:[/] {escape(a.summary[:400])}")
            if sc and sc.gain_s > 0:
                _say(console, f"[dim]joining this gap's code to its graphs saves up to {_ms(sc.gain_s)} per call[/]")
            step = s.next_step
            if step is not None:
                _say(console, f"[bold green]Next:[/] {escape(step.action)}")
                if step.differs_from_dynamo:
                    _say(console, f"[dim]Why not Dynamo's hint: {escape(step.differs_from_dynamo)}[/]")
                # One line even when longer than the console: it is meant to be copied.
                console.print(Text(f"     $ {step.command}", style="bold"), soft_wrap=True)
        if cost is not None and cost.unattributed is not None:
            console.print(f"[dim]eager time before the first break (guards, prologue): "
                          f"{_ms(cost.unattributed.median_s)}/call[/]")
    console.print(("[green]" if c.clean else "[bold yellow]" if not c.sites else "[bold]") + escape(c.summary) + "[/]")
    for w in c.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(w)}")

    if c.recompiles:
        console.print("\n[bold underline]Recompile causes[/]")
        for rc in c.recompiles:
            names = " · ".join(f"{f}({n})" if (n := rc.names.get(f)) else f for f in rc.frames)
            rhead: list[str | tuple[str, str]] = [f"[bold]{rc.count} recompile{'s' if rc.count != 1 else ''}[/]",
                                                  f"compile {rc.compile_seconds:.2f} s"]
            fits = len(f"{rc.count} recompiles · compile {rc.compile_seconds:.2f} s · {rc.reason}") <= console.width
            _phrases(console, [*rhead, escape(rc.reason)] if fits else rhead, indent="   ")
            if not fits:   # a long guard reason is prose: wrapped at words, never cut
                _say(console, escape(rc.reason))
            console.print(f"   frames: {escape(names)}")
            cause_lines(rc, console)
            for tip in rc.advice:
                _say(console, f"[magenta]Advice:[/] {escape(tip)}")

    if c.skipped_frames:
        console.print("\n[bold underline]Skipped frames (ran fully eager)[/]")
        for f in c.skipped_frames:
            resumed = f" (resumed after line {f.resumed_at})" if f.resumed_at is not None else ""
            span = f"{f.start}-{f.end}" if f.start is not None and f.end is not None else str(f.line)
            _phrases(console, [f"[bold]{escape(f.name)}[/]{resumed}", (f"{escape(short_path(f.file))}:{span}", " "),
                               f"tracing stopped at line {f.line}", escape(f.fail_type)], indent="   ")
            _say(console, f"{escape(f.reason)}")

    if c.coverage.untraced:
        console.print("\n[bold underline]Never traced (ran eagerly; breaks there are not counted)[/]")
        for u in c.coverage.untraced:
            n = f"{u.lines} line{'s' if u.lines != 1 else ''}" if u.end is not None else "extent unknown"
            console.print(f"[bold]{escape(u.function)}[/] {escape(short_path(u.file))}:{u.where} · {n} · {u.why}")
            _say(console, f"{escape(u.reason)}")

    if c.error:  # the summary has its first line; Dynamo's "from user code" frames say where
        _, sep, user = c.error.message.partition("from user code:")
        if sep:
            console.print(f"[dim]from user code:\n{escape(user.strip()[:1200])}[/]", soft_wrap=True)
        if c.output:
            target_output(c.output, console, lines=20)


def target_output(text: str, console: Console, *, lines: int | None = None, indent: str = "") -> None:
    """What a target printed (captured in its worker), dimmed and marked as its own: the last
    LINES lines, or all that was kept."""
    body = text.rstrip("\n").splitlines()
    if not body:
        return
    cut = len(body) - lines if lines is not None and len(body) > lines else 0
    more = f", last {lines} lines" if cut else ""
    console.print(f"{indent}[dim]── the target's own output{more} ──[/]")
    for ln in body[cut:]:
        console.print(Text(indent + ln, style="dim"), soft_wrap=True)


def fixes(report: FixReport, console: Console | None = None, verbose: bool = False) -> None:
    """Trials per site, best first, one line each (readable at 80 columns and in CI logs).
    An errored trial shows the end of its own output (all of it with VERBOSE)."""
    console = console or Console(highlight=False, emoji=False)
    if not (report.fixes or report.no_candidate or report.cause_fixes or report.explained or report.unreproduced
            or report.repeats_failed):
        console.print("[dim]No fix candidates tried.[/]")
        return
    if report.error is not None and report.error.kind is ErrorKind.COMPILED and report.fixes:
        console.print("\n[yellow]The original fails when compiled (below): each fix is judged against eager, "
                      "so a VERIFIED one is also a patch after which the compiled run completes.[/]")
    if report.config.get("base_config", {}).get("use_numpy_random_stream"):
        console.print("\n[yellow]Compiled, the original's NumPy random draws came from torch's generator "
                      "(Dynamo's default), so its outputs differed from eager. The census above keeps NumPy's "
                      "stream (torch._dynamo.config.use_numpy_random_stream = True: each draw is a break), and "
                      "every trial and patch below carries that line.[/]")
    if report.config.get("base_config", {}).get("trace_numpy") is False:
        console.print("\n[yellow]Compiled, the original failed in code that calls NumPy (Dynamo traces NumPy calls "
                      "as tensor ops). The census above leaves NumPy calls to Python "
                      "(torch._dynamo.config.trace_numpy = False: each call is a break), and every trial and patch "
                      "below carries that line.[/]")
    if (hatch := report.config.get("base_hatch")) and hatch.get("rewrites"):
        at = sorted({r[2] for r in hatch["rewrites"]})
        where = f"line {at[0]}" if len(at) == 1 else "lines " + ", ".join(map(str, at))
        calls = "that call" if len(hatch["rewrites"]) == 1 else "those calls"
        console.print(f"\n[yellow]Compiled, the original failed in {escape(hatch['function'])}() "
                      f"({escape(short_path(hatch['file']))}, {where}): {escape(hatch['why'])}. The census above "
                      f"runs with {calls} rewritten, and every trial and patch below carries the rewrite.[/]")
    elif hatch:
        console.print(f"\n[yellow]Compiled, the original failed in {escape(hatch['function'])}() "
                      f"({escape(short_path(hatch['file']))}:{hatch['line']}): {escape(hatch['why'])}. The census above "
                      "runs that function under torch.compiler.disable, and every trial and patch below carries "
                      "that decorator.[/]")
    for sid in dict.fromkeys(f.site for f in report.fixes):
        rows = report.fixes_for(sid)
        console.print(f"\n[bold underline]Fixes for {escape(rows[0].label)}[/]")
        for f in rows:
            b, a = f.before, f.after
            mark = "[bold green]VERIFIED[/]" if f.verified else "[bold red]ERROR[/]" if f.error else "[red]rejected[/]"
            if f.verified and f.given_inputs_only:
                mark += " [yellow]on the given inputs only[/]"
            # An errored trial proved nothing: its counts (graphs 8→0) would read as a win.
            counts = ["[red]no verdict: the trial failed[/]"] if f.error else [
                f"graphs {b.graphs}→{a.graphs}", f"sites {b.sites}→{a.sites}"]
            _phrases(console, [f"  {mark} {escape(f'[{f.strategy}]')} {escape(f.candidate)}", *counts,
                               f"on {f.ranks} gloo ranks" if f.ranks else "",
                               "[yellow]upstream patch[/] (outside your project: to send to the library)"
                               if f.upstream else ""], indent="      ")
            if f.error:
                _say_at(console, f"[red]error ({escape(f.error.kind.value)}): "
                                 f"{escape(f.error.type or '')} {escape(f.error.headline[:300])}[/]", "      ")
            if f.tradeoff:
                _say_at(console, f"[dim]trade-off: {escape(f.tradeoff)}[/]", "      ")
            for why in (f.why_not[1:] if f.error else f.why_not):   # the first says the error, shown above
                _say_at(console, f"[dim]{escape(why)}[/]", "      ")
            if f.given_inputs_only:
                console.print(f"      [dim]no fresh inputs compared: {escape(f.given_inputs_only)}[/]")
            if f.output:
                target_output(f.output, console, lines=None if verbose else 6, indent="      ")
            if f.via is not None:
                via = report.site(f.via)
                _say_at(console, f"[dim]the patch proposed for {escape(gb_text(f.via.gb_id))} {escape(f.via.path)}:"
                                 f"{via.line if via else '?'}, which removes this site too[/]", "      ")
            if f.uncovered:
                console.print(f"      [dim]uncovered (code Dynamo never traced before, now seen): "
                              f"{escape(', '.join(f.uncovered))}[/]")
            if f.verified and f.patch:
                compact_diff(f.patch, console)
        for r in report.refused:
            if r.site == sid:
                console.print(f"  [yellow]no rewrite[/] ({escape(r.rule)}): [dim]{escape(r.reason)}[/]")
    for r in report.no_candidate:
        site = report.site(r.site)
        label = f"{gb_text(r.site.gb_id)} {r.site.path}:{site.line if site else '?'}"
        console.print(f"\n[bold underline]No fix candidate for {escape(label)}[/]\n  [dim]{escape(r.reason)}[/]")
    for u in report.unreproduced:
        console.print(f"\n[bold underline]Not reproducible: {escape(u.label)}[/]")
        _say_at(console, f"[dim]{u.seen} of {u.runs} baseline censuses of the unchanged code have this site (the "
                         "code reads a clock): no fix of it can be verified[/]", "  ")
    if report.repeats_failed:
        console.print("\n[bold underline]Reproducibility not fully checked[/]")
        _say_at(console, f"[dim]{report.repeats_failed} of the repeat baseline censuses (run because the code reads "
                         "a clock) failed: a site they would have lacked is not known to be flaky[/]", "  ")
    cause_fixes(report, console)


def cause_fixes(report: FixReport, console: Console) -> None:
    """Recompile causes: each cause's trials (recompiles before -> after), then the causes
    explained as expected or left without a patch."""
    for cid in dict.fromkeys(f.cause for f in report.cause_fixes):
        rows = [f for f in report.cause_fixes if f.cause == cid]
        console.print(f"\n[bold underline]Fixes for recompile cause {escape(rows[0].label)}[/]")
        for f in rows:
            mark = "[bold green]VERIFIED[/]" if f.verified else "[red]rejected[/]"
            if f.verified and f.given_inputs_only:
                mark += " [yellow]on the given inputs only[/]"
            console.print(f"  {mark} {escape(f'[{f.strategy}]')} {escape(f.candidate)} · recompiles "
                          f"{f.recompiles_before}→{f.recompiles_after} · repeat pass "
                          f"{'stable' if f.repeat_stable else 'recompiles'} · graphs {f.before.graphs}→{f.after.graphs}")
            if f.tradeoff:
                console.print(f"      [dim]trade-off: {escape(f.tradeoff)}[/]")
            for why in f.why_not:
                console.print(f"      [dim]{escape(why)}[/]")
            if f.verified and f.patch:
                compact_diff(f.patch, console)
    for e in report.explained:
        head = "Expected recompiles" if e.expected else "No patch for recompile cause"
        console.print(f"\n[bold underline]{head}: {escape(str(e.cause))}[/] ({e.count}x)\n  [dim]{escape(e.reason)}[/]")


def compact_diff(patch: str, console: Console, limit: int = 12) -> None:
    """The changed lines of a patch (no context), indented under its fix."""
    lines = [ln for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    for ln in lines[:limit]:
        style = "green" if ln.startswith("+") else "red"
        console.print(f"      [{style}]{escape(ln)}[/]")
    if len(lines) > limit:
        console.print(f"      [dim]… {len(lines) - limit} more changed lines (--diff shows all)[/]")


def fix_all(result: FixAll, console: Console | None = None) -> None:
    """`fix --all`: the steps to the fixed point, graphs before and after, what is left."""
    console = console or Console(highlight=False, emoji=False)
    s, f = result.start, result.final
    _phrases(console, [f"[bold]graphstitch fix --all[/] {escape(result.target)}:", f"graphs {s.graphs}→{f.graphs}",
                       f"sites {s.sites}→{f.sites}", f"break events {s.break_events}→{f.break_events}",
                       f"recompiles {s.recompiles}→{f.recompiles}", f"recompile-limit hits {s.limit_hits}→{f.limit_hits}"],
             indent="  ")
    for i, st in enumerate(result.steps, 1):
        console.print(f"  {i}. {escape(f'[{st.strategy}]')} {escape(st.label)}: {escape(st.candidate)} (graphs → {st.graphs})")
        console.print(f"      [dim]trade-off: {escape(st.tradeoff)}[/]")
    for r in [*result.remaining, *result.remaining_causes]:
        console.print(f"  [yellow]left[/] {escape(r)}")
    for r in result.explained:
        console.print(f"  [dim]expected: {escape(r)}[/]")
    if result.steps:
        mark = "[bold green]VERIFIED[/]" if result.verified else "[red]NOT verified[/]"
        if result.verified and result.given_inputs_only:
            mark += " [yellow]on the given inputs only[/]"
        console.print(f"  combined patch, re-checked from the pristine files: {mark}")
        if result.given_inputs_only:
            console.print(f"      [dim]no fresh inputs compared: {escape(result.given_inputs_only)}[/]")
        for why in result.why_not:
            console.print(f"      [dim]{escape(why)}[/]")
        compact_diff(result.patch, console, limit=40)


def measures(report: FixReport, console: Console | None = None) -> None:
    console = console or Console(highlight=False, emoji=False)
    rows = [f for f in report.fixes if f.measure]
    if not rows:
        return
    console.print("\n[bold underline]What the verified fixes buy[/] (median of alternating passes)")
    for f in rows:
        m = f.measure
        assert m is not None
        head = f"  {escape(f.label)} · {escape(f.candidate)}"
        if m.error or not m.before or not m.after:
            console.print(f"{head}: [red]not measured[/] ({escape(m.error or '?')})")
            continue
        b, a = m.before.median_s * 1e3, m.after.median_s * 1e3
        note = "" if m.stable else " [yellow](not stable)[/]"
        console.print(f"{head}: {b:.3f} ms → {a:.3f} ms · [bold]{m.speedup or 0:.2f}×[/] ({escape(m.backend)}){note}")


def _fmt(x: float | None, unit: str = "", digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}{unit}"


def perf(result: PerfResult, console: Console | None = None) -> None:
    con = console or Console(highlight=False, emoji=False)
    c = result.census
    con.print(f"[bold]graphstitch perf[/] {escape(result.target)}  backend={escape(result.backend)}  "
              f"device={result.device}  (census: {c.graph_count} graphs, {c.break_events} break events at "
              f"{c.break_site_count} sites, {c.recompile_count} recompiles)")
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 1), pad_edge=False)
    for col in ("variant", "ms", "±IQR/2", "speedup", "cold s", "warm s", "MB", "graphs", "recomp", "ok"):  # fits 80 columns
        t.add_column(col, justify="left" if col == "variant" else "right", no_wrap=True, min_width=len(col))

    def lat(st: LatencyStats | None) -> tuple[str, str]:
        return ("—", "—") if not st else (f"{st.median_s * 1e3:.4g}", f"{st.iqr_s * 1e3 / 2:.2g}")
    e = result.eager
    t.add_row("eager", *lat(e.latency), "1.00×", "—", "—", _fmt(e.peak_memory_mb, digits=0), "—", "—", "—")
    for side, v in (("whole", result.whole), ("regional", result.regional)):
        if not v:
            continue
        vc = v.census
        t.add_row(side, *lat(v.latency), _fmt(v.speedup_vs_eager, "×"), _fmt(v.compile_cold_s),
                  _fmt(v.compile_warm_s), _fmt(v.peak_memory_mb, digits=0), str(vc.graph_count) if vc else "—",
                  str(vc.recompile_count) if vc else "—",
                  {True: "yes", False: "NO"}.get(v.outputs_match_eager, "—"))  # type: ignore[arg-type]
    con.print(t)
    r, w = result.ratios, result.winner
    blk = result.regional.block if result.regional else None
    if blk:
        con.print(f"regional = each of the {blk.count} {escape(blk.class_name)} blocks at `{escape(blk.path)}` "
                  "compiled on its own")
    if w:
        con.print(f"regional vs whole: latency {_fmt(r.regional_vs_whole_latency, '×')}, cold compile "
                  f"{_fmt(r.regional_vs_whole_compile_cold, '×')}, warm compile "
                  f"{_fmt(r.regional_vs_whole_compile_warm, '×')} (>1: regional better) — [bold]{w.summary}[/]")
    from ..perf import failed
    err = failed(result)
    if err:
        con.print(f"[red]{err.side} failed ({err.error.kind.value}): {escape(err.error.headline)}[/]")


def ranks(result: RankComparison, console: Console | None = None) -> None:
    """Terminal summary of a rank comparison (reads it, never re-counts)."""
    console = console or Console(highlight=False, emoji=False)
    t = Table(title="graphstitch ranks", title_justify="left")
    for col in ("rank", "graphs", "break sites", "break events", "recompiles", "skipped frames",
                "collectives", "status"):
        t.add_column(col, justify="left" if col == "status" else "right")
    for r in result.ranks:
        s = result.summary[r]
        n = sum(len(g) for g in result.collectives[r])
        t.add_row(str(r), str(s.graphs), str(s.break_sites), str(s.break_events),
                  str(s.recompiles), str(s.skipped_frames), str(n),
                  f"[red]{s.error}[/]" if s.error else "ok")
    console.print(t)
    for f in result.failed:
        where = f" at {escape(short_path(f.where))}" if f.where else ""
        msg = f.message.strip().splitlines()
        console.print(f"[bold red]rank {f.rank} failed[/] ({f.kind}{where}): {escape(msg[0] if msg else '')}")
    if result.symmetric:
        console.print("[bold green]symmetric[/]: every rank compiled the same graphs, breaks, recompiles "
                      "and collectives in the same order")
    for i, d in enumerate(result.divergences):
        head = "[bold red]first divergence[/]" if i == 0 else "[yellow]divergence[/]"
        at = f" at {escape(short_path(d.file))}:{d.line}" if d.file else ""
        console.print(f"{head} \\[{d.kind}] {fmt_ranks(d.ranks)}, compile id {d.compile_id}{at}")
        console.print("  " + escape(d.message))
        if i == 0 and any(v for v in d.collectives.values()):
            for r, ops in sorted(d.collectives.items()):
                names = "none in this graph" if ops is None else ", ".join(o.split(".")[-1] for o in ops) or "none"
                console.print(f"  collectives, rank {r}: {names}")
    for fl in result.flags:
        console.print(f"[bold yellow]{fl.kind}[/] {escape(fl.message)} ({fmt_ranks(fl.ranks)})")
        console.print(f"  advice: {escape(fl.advice)}")


def guards(rep: GuardReport, console: Console | None = None, full: bool = False) -> None:
    console = console or Console(highlight=False, emoji=False)
    info = rep.run
    mode = f"repeat x{info.repeat}" if info.mode == "repeat" else f"vary {info.vary} over {info.sizes}"
    count = sum(r.count for r in rep.recompiles)
    console.print(f"[bold]graphstitch guards[/] {escape(rep.target or '')} · {escape(mode)} · "
                  f"{count} recompiles · recompile_limit {info.recompile_limit}")
    limit_hits(rep.limit_hits, console)
    if info.mode == "repeat":
        console.print(f"first pass (the factory's calls, which may differ): {rep.first_pass_recompiles} recompiles · "
                      f"repeat passes (the same calls again): "
                      + (f"[bold red]{rep.repeat_recompiles}[/]" if rep.repeat_recompiles else "[green]0[/]")
                      + " recompiles")
    for r in rep.recompiles:
        when = f", {r.repeats} in repeat passes" if info.mode == "repeat" and r.repeats else ""
        console.print(f"[bold]recompile cause[/] ({r.count}x{when}, {escape(', '.join(r.frames))}): {escape(r.reason)}")
        cause_lines(r, console)
        for a in r.advice:
            console.print(f"  [magenta]Advice:[/] {escape(a)}")
    if rep.shared_code_advice:
        console.print(f"[magenta]Advice:[/] {escape(rep.shared_code_advice)}")
    if info.mode == "vary":
        console.print("automatic dynamic shapes generalized after one recompile: "
                      + ("[green]yes[/]" if rep.generalized else "[dim]no recompile[/]" if not rep.recompiles
                         else "[bold red]NO[/]"))
    console.print("recompile_limit hit (silent eager fallback): "
                  + (f"[bold red]YES[/] {escape(', '.join(rep.recompile_limit_hit))}" if rep.recompile_limit_hit
                     else "[green]no[/]"))
    for fe in rep.cache_entries:
        console.print(f"\n[bold]frame {escape(fe.frame)}[/] {escape(fe.function)}: {len(fe.compile_ids)} cache "
                      f"entr{'y' if len(fe.compile_ids) == 1 else 'ies'}")
        for cid in fe.compile_ids:
            console.print(f"  entry {escape(cid)}: {len(fe.guards[cid])} guard lines")
            if full:
                for line in fe.guards[cid]:
                    console.print(f"    [dim]{escape(line)}[/]")
            for d in fe.diffs.get(cid, []):
                console.print(f"    [{'red' if d[0] == '-' else 'green'}]{escape(d)}[/]")
    for p in rep.problems:
        console.print(f"[bold red]unstable:[/] {escape(p)}")
    if rep.ok:
        console.print("[green]stable[/]")


def verdicts(results: list[Verdict], console: Console, err: Console) -> None:
    """`graphstitch check`: per target, ok or FAIL with each regression and improvement."""
    for v in results:
        for w in v.warnings:
            err.print(f"[yellow]graphstitch: warning:[/] {escape(w)}")
        mark = {"fail": "[bold red]FAIL[/]", "unknown": "[bold yellow]UNKNOWN[/]", "ok": "[green]ok[/]"}[v.status]
        console.print(f"{mark} {escape(v.target)}")
        for r in v.regressions:
            console.print(f"  [red]- {escape(r)}[/]")
        for u in v.unknowns:
            console.print(f"  [yellow]? {escape(u)}[/]")
        for i in v.improvements:
            console.print(f"  [green]+ {escape(i)}[/]")
