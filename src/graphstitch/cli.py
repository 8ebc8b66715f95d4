"""The ``graphstitch`` command line."""

from __future__ import annotations

import os
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
@click.option("--nested-graph-breaks", is_flag=True, help="Set torch._dynamo.config.nested_graph_breaks=True (a nested break is reported once).")
@click.option("--backend", default="counting", show_default=True,
              help="'counting' records each graph and runs it eagerly (fast); or any torch.compile backend, e.g. inductor.")
@click.option("--dynamic", type=click.Choice(["auto", "true", "false"]), default="auto", show_default=True,
              help="torch.compile(dynamic=...): auto = None (automatic dynamic shapes after a recompile).")
@click.option("--grad", is_flag=True, help="Run the calls with autograd enabled (default: under torch.no_grad()).")
@click.option("--no-eager-check", is_flag=True, help="Skip running the calls eagerly to compare outputs.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="Kill the target after S seconds (exit 3).")
@click.option("--in-process", is_flag=True, help="Run the target in this process instead of a fresh subprocess (no crash isolation, no --timeout).")
def census(target, demo, json_path, nested_graph_breaks, backend, dynamic, grad, no_eager_check, timeout, in_process):
    """Compile TARGET, run its calls, and report every graph break and recompile."""
    from .analysis import Census

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
    from .advice import advise
    _show(advise(c), json_path)


def _show(c, json_path, *more) -> None:
    """Terminal (plus ``more`` renderers), --json, then exit 3 if the target failed."""
    from .report import render_terminal, write_json
    for render in (render_terminal,) + more:
        render(c)
    if json_path:
        write_json(c, json_path)
    if c.error:
        fail(f"target failed ({c.error.get('kind')}): {str(c.error.get('message', '')).splitlines()[0] if c.error.get('message') else ''}",
             EXIT_TARGET)


FIX_HELP = """\b
Each candidate is a change applied for one run without editing your source: a
torch._dynamo.config flag, or an escape hatch wrapped at run time around the function
that holds the break (nonstrict_trace, leaf_function / custom_op with a fake derived from
an eager run, allow_in_graph, compiler.disable). Every candidate runs as its own census in
a fresh process. It is VERIFIED only if its site is gone, no new site (a moved break) and
no new skipped frame appeared, outputs equal eager on the factory's calls and on a fresh
random input set of the same shapes/dtypes, and what the code prints/logs per call at run
time is unchanged. Trials use --backend aot_eager by default: it is where allow_in_graph
and nonstrict_trace drop run-time side effects, as inductor does.
"""


@main.command(epilog=FIX_HELP + "\n" + TARGET_HELP + "\n" + EXIT_CODES_HELP.replace(
    "  3  the target", "  1  --apply: nothing verified to apply, refused, or re-verification failed\n  3  the target"))
@click.argument("target")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the census with advice and fixes[] as JSON.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Trials in parallel (default: CPU cores).")
@click.option("--backend", default="aot_eager", show_default=True, help="torch.compile backend for the baseline and every trial.")
@click.option("--site", "site_filter", default=None, help="Only sites whose 'GBxxxx path:line' contains this text.")
@click.option("--candidate", "kinds", multiple=True, type=click.Choice(["config", "nonstrict_trace", "leaf_function",
              "custom_op", "allow_in_graph", "disable"]), help="Only try these kinds of candidate (repeatable).")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff making the best verified candidate permanent.")
@click.option("--apply", "do_apply", is_flag=True, help="Write that patch (after re-verifying it on a patched copy); keeps FILE.graphstitch.bak.")
@click.option("--grad", is_flag=True, help="Run the calls with autograd enabled.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="Kill one census after S seconds.")
def fix(target, json_path, jobs, backend, site_filter, kinds, show_diff, do_apply, grad, timeout):
    """Try fixes for every break in TARGET, verify each, and rank the verified ones."""
    from .fix import apply_best, render_fixes, run_fix
    from .live import Options

    where = target.rpartition(":")[0]
    if ":" not in target or ((where.endswith(".py") or "/" in where) and not os.path.isfile(where)):
        fail(f"target must be an existing PATH.py:FACTORY or package.module:FACTORY, got {target!r}")
    opts = Options(backend=backend, grad=grad)
    c = run_fix(target, opts, jobs=jobs, timeout=timeout, kinds=set(kinds) or None,
                only=(lambda s: site_filter in f"{s.gb_id} {s.file}:{s.line}") if site_filter else None)
    if c.error and c.error.get("kind") == "target":
        fail(c.error["message"])
    _show(c, json_path, render_fixes)
    if show_diff or do_apply:
        msg, ok = apply_best(c, target, opts, write=do_apply, timeout=timeout)
        if not ok:
            fail(msg, EXIT_FAIL)
        click.echo(msg)
