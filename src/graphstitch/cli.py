"""The ``graphstitch`` command line."""

from __future__ import annotations

import sys
from typing import NoReturn

import click
from rich.console import Console

from . import __version__

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TARGET = 0, 1, 2, 3

EXIT_CODES_HELP = """\b
Exit codes:
  0  ran (with or without graph breaks)
  2  usage error or bad target (missing file/factory, import error, wrong factory shape)
  3  the target itself failed (exception, crash, timeout); the partial census is still
     written to --json
"""

TARGET_HELP = """\b
TARGET is PATH.py:FACTORY or package.module:FACTORY. FACTORY() returns (fn, args, kwargs)
for one call, or a list of such tuples: the calls are made in order, so recompiles between
them are seen. fn may be an nn.Module or any callable; graphstitch compiles it itself.
"""

err_console = Console(stderr=True, highlight=False)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """One clear line on stderr and a documented exit code; never a traceback."""
    err_console.print(f"[bold red]graphstitch: error:[/] {message}", markup=True, soft_wrap=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="graphstitch")
def main() -> None:
    """Find, explain and eliminate torch.compile graph breaks and recompiles.

    Start with `graphstitch census --demo`. Every output (terminal, --json) reads one census;
    the README's "Definitions" section says what a graph, a break event, a break site and a
    recompile cause are.
    """


def _dynamic(value: str) -> bool | None:
    return {"auto": None, "true": True, "false": False}[value]


@main.command(epilog=TARGET_HELP + "\n" + EXIT_CODES_HELP)
@click.argument("target", required=False)
@click.option("--demo", is_flag=True, help="Run the built-in demo model (several kinds of breaks and a recompile).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the census as JSON (schema in README).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Also write a self-contained HTML report.")
@click.option("--nested-graph-breaks", is_flag=True, help="Set torch._dynamo.config.nested_graph_breaks=True (a nested break is reported once).")
@click.option("--backend", default="counting", show_default=True,
              help="'counting' records each graph and runs it eagerly (fast); or any torch.compile backend, e.g. inductor.")
@click.option("--dynamic", type=click.Choice(["auto", "true", "false"]), default="auto", show_default=True,
              help="torch.compile(dynamic=...): auto = None (automatic dynamic shapes after a recompile).")
@click.option("--grad", is_flag=True, help="Run the calls with autograd enabled (default: under torch.no_grad()).")
@click.option("--no-eager-check", is_flag=True, help="Skip running the calls eagerly to compare outputs.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="Kill the target after S seconds (exit 3).")
@click.option("--in-process", is_flag=True, help="Run the target in this process instead of a fresh subprocess (no crash isolation, no --timeout).")
def census(target, demo, json_path, html_path, nested_graph_breaks, backend, dynamic, grad, no_eager_check, timeout, in_process):
    """Compile TARGET, run its calls, and report every graph break and recompile."""
    from .analysis import Census
    from .report import render_terminal

    if demo == bool(target):
        fail("give exactly one of TARGET or --demo (see `graphstitch census --help`)")
    spec = "graphstitch.demo:demo" if demo else target
    if in_process and timeout:
        fail("--timeout needs the subprocess runner; drop --in-process")

    from .live import Options
    opts = Options(backend=backend, nested_graph_breaks=nested_graph_breaks, dynamic=_dynamic(dynamic),
                   grad=grad, check_eager=not no_eager_check)
    if in_process:
        from .target import TargetError, census_target
        try:
            c: Census = census_target(spec, opts)
        except TargetError as e:
            fail(str(e))
    else:
        from .target import census_subprocess
        c, _ = census_subprocess(spec, opts, timeout=timeout)
        if c.error and c.error.get("kind") == "target":
            fail(c.error["message"])
    render_terminal(c)
    _write_outputs(c, json_path, html_path)
    if c.error:
        fail(f"target failed ({c.error.get('kind')}): {str(c.error.get('message', '')).splitlines()[0] if c.error.get('message') else ''}",
             EXIT_TARGET)


# ----------------------------------------------------------------------------- trace / run

def _write_outputs(c, json_path: str | None, html_path: str | None, *, ranks: dict | None = None) -> None:
    """--json / --html for one census, or for {rank: census} (JSON: {"ranks": {...}})."""
    from .report import atomic_write, write_json
    if json_path:
        if ranks and len(ranks) > 1:
            import json
            atomic_write(json_path, json.dumps({"ranks": {str(r): x.to_dict() for r, x in ranks.items()}},
                                               indent=2) + "\n")
        else:
            write_json(c, json_path)
    if html_path:
        from .html import write_html
        write_html(ranks if ranks and len(ranks) > 1 else c, html_path)


TRACE_EXIT_HELP = """\b
Exit codes:
  0  the trace was read (with or without graph breaks)
  2  PATH missing, holds no TORCH_TRACE logs, or no record could be read
"""


@main.command(epilog=TRACE_EXIT_HELP)
@click.argument("path", type=click.Path())
@click.option("--rank", type=int, default=None, help="Multi-rank logs: show this rank in the terminal (default: the lowest).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the census as JSON; several ranks give {\"ranks\": {RANK: census}}.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Also write a self-contained HTML report (a rank selector for several ranks).")
def trace(path, rank, json_path, html_path):
    """Census of a TORCH_TRACE log: a file, a directory of them, or a multi-rank directory.

    Reads what `TORCH_TRACE=DIR python train.py` (or torchrun) wrote, with the same parsers
    and analysis as a live census, without importing torch. Malformed, truncated or unknown
    lines are skipped and counted. Source lines come from the files named in the trace when
    they exist on this machine.
    """
    from .report import render_terminal
    from .traces import TraceError, censuses_from_path, source_context

    try:
        censuses = censuses_from_path(path)
    except TraceError as e:
        fail(str(e))
    if not any(c.trace_stats.get("records") for c in censuses.values()):
        fail(f"no TORCH_TRACE records could be read from {path}")
    if rank is not None and rank not in censuses:
        fail(f"no logs for rank {rank} in {path} (ranks: {', '.join(str(r) for r in censuses)})")
    shown = censuses[rank if rank is not None else next(iter(censuses))]
    console = Console(highlight=False)
    if len(censuses) > 1:
        console.print(f"[bold]{len(censuses)} ranks[/] in {path}:")
        for r, c in censuses.items():
            console.print(f"  rank {r}: graphs {c.graph_count} · break sites {len(c.sites)} · "
                          f"break events {c.break_events} · recompile causes {len(c.recompiles)}")
        console.print(f"[dim]showing rank {next(r for r, c in censuses.items() if c is shown)} "
                      f"(--rank N for another)[/]\n")
    render_terminal(shown, console)
    missing = sorted({s.file for s in shown.sites if source_context(s.file, s.line, 0) is None})
    if missing:
        console.print(f"[dim]source not available on this machine for: {', '.join(missing)} "
                      f"(lines shown are from the trace)[/]")
    _write_outputs(shown, json_path, html_path, ranks=censuses)
    st = [c.trace_stats for c in censuses.values()]
    bad = sum(s.get("malformed", 0) for s in st)
    console.print(f"[dim]read {sum(s.get('files', 0) for s in st)} file(s), "
                  f"{sum(s.get('records', 0) for s in st)} records[/]"
                  + (f" · [yellow]{bad} malformed line(s) skipped[/]" if bad else ""))
    for s in st:
        for u in s.get("unreadable", []):
            err_console.print(f"[yellow]graphstitch: unreadable log skipped:[/] {u}")


RUN_EXIT_HELP = """\b
Exit codes:
  the script's own exit code (0 when it ends normally, 1 after an uncaught exception,
  128+N when it is killed by signal N); 2 when SCRIPT does not exist.
  The census is printed (and written) in every case, also after a crash.
"""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
              epilog=RUN_EXIT_HELP)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the census as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="Also write a self-contained HTML report.")
@click.argument("script", type=click.Path())
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(json_path, html_path, script, args):
    """Run an unmodified SCRIPT as __main__ with ARGS and report what torch.compile did.

    The script compiles with its own torch.compile calls and backend; graphstitch only
    listens (graphs are counted from Dynamo's output-graph records). It runs in a child
    process, its stdout/stderr pass through, and the census is printed when it ends,
    also when it raised or crashed. graphstitch's own options go before SCRIPT.
    """
    import os
    from .report import render_terminal
    from .target import census_script

    if not os.path.isfile(script):
        fail(f"script not found: {script}")
    c, rc = census_script(script, list(args))
    sys.stdout.flush()
    sys.stderr.flush()
    console = Console(highlight=False)
    console.print()
    render_terminal(c, console)
    if not c.frames:
        console.print("[dim]Nothing was compiled in the script's own process. Compiles in processes it "
                      "starts (mp.spawn, torchrun) are not seen here: run it with TORCH_TRACE=DIR and "
                      "then `graphstitch trace DIR`.[/]")
    _write_outputs(c, json_path, html_path)
    sys.exit(128 - rc if rc < 0 else rc)
