"""Renderers that read a Census: terminal summary and JSON. They never re-count."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .analysis import Census


def short_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write via a temp file in the same folder + rename: a reader never sees half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(census: Census, path: str) -> None:
    atomic_write(path, json.dumps(census.to_dict(), indent=2, sort_keys=False) + "\n")


def _yes_no(v: bool | None) -> str:
    return {True: "[green]yes[/]", False: "[bold red]NO[/]", None: "[dim]not checked[/]"}[v]


def render_terminal(c: Census, console: Console | None = None) -> None:
    console = console or Console(highlight=False)
    cfg = c.config
    head = f"[bold]graphstitch census[/] {escape(c.target or '')}"
    bits = [f"torch {escape(c.torch_version or '?')}"]
    if cfg.get("backend"):
        bits.append(f"backend {escape(str(cfg['backend']))}")
    if cfg.get("nested_graph_breaks"):
        bits.append("nested_graph_breaks")
    if c.calls:
        bits.append(f"{c.calls} call{'s' if c.calls != 1 else ''}")
    console.print(head)
    console.print("[dim]" + " · ".join(bits) + "[/]")
    console.print(
        f"graphs [bold]{c.graph_count}[/] · break sites [bold]{len(c.sites)}[/] · "
        f"break events [bold]{c.break_events}[/] · skipped frames [bold]{len(c.skipped_frames)}[/] · "
        f"recompile causes [bold]{len(c.recompiles)}[/] ({c.recompile_count} recompiles) · "
        f"compile {c.compile_seconds:.2f} s · outputs match eager {_yes_no(c.outputs_match_eager)}")
    if c.output_mismatch:
        console.print(f"  [red]{escape(c.output_mismatch)}[/]")

    if c.sites:
        # One block per site rather than a wide table: readable at 80 columns and in CI logs.
        console.print("\n[bold underline]Break sites, ranked by impact[/]")
        for i, s in enumerate(c.sites, 1):
            flag = " [bold red]· whole frame skipped (runs eager)[/]" if s.frame_skipped else ""
            console.print(f"[bold]{i}. {s.gb_id}[/] {escape(short_path(s.file))}:{s.line} in "
                          f"[bold]{escape(s.function)}[/] · {s.events} event{'s' if s.events != 1 else ''}"
                          f" · depth {s.nesting_depth}{flag}")
            if s.code:
                console.print(f"   [cyan]{s.line:>5} | {escape(s.code)}[/]")
            console.print(f"   [bold]{escape(s.gb_type)}[/]")
            if s.explanation:
                console.print(f"   {escape(s.explanation[:400])}")
            if s.hints:
                console.print(f"   [green]Hint:[/] {escape(s.hints[0][:400])}")
            for a in s.advice[:1]:
                console.print(f"   [magenta]Advice:[/] {escape(str(a.get('summary', ''))[:400])}")
    else:
        console.print("[green]No graph breaks.[/]")

    if c.recompiles:
        t = Table(title="Recompile causes", title_justify="left", expand=True)
        t.add_column("recompiles", justify="right", no_wrap=True)
        t.add_column("cause (values stripped)", ratio=3, overflow="fold")
        t.add_column("frames", ratio=1, overflow="fold")
        for r in c.recompiles:
            t.add_row(str(r.count), escape(r.reason), escape(", ".join(r.frames)))
        console.print(t)

    if c.skipped_frames:
        t = Table(title="Skipped frames (ran fully eager)", title_justify="left", expand=True)
        t.add_column("function", no_wrap=True)
        t.add_column("where", overflow="fold")
        t.add_column("why", ratio=3, overflow="fold")
        for f in c.skipped_frames:
            t.add_row(escape(f.function), f"{escape(short_path(f.file))}:{f.line}",
                      escape(f"{f.fail_type}: {f.reason}"))
        console.print(t)

    if c.error:
        console.print(f"[bold red]error ({escape(str(c.error.get('kind')))}):[/] "
                      f"{escape(str(c.error.get('message', ''))[:500])}")
