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
    from .report import render_terminal, write_json

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
    if json_path:
        write_json(c, json_path)
    if c.error:
        fail(f"target failed ({c.error.get('kind')}): {str(c.error.get('message', '')).splitlines()[0] if c.error.get('message') else ''}",
             EXIT_TARGET)


PERF_HELP = """\b
Each measurement runs in a fresh process: a cold compile gets an empty
TORCHINDUCTOR_CACHE_DIR, a warm compile is a second process on the same cache. Latency
is one pass over the target's calls under torch.no_grad(), eager and compiled passes
alternating in one process after a warm-up, until the medians are stable; CUDA events
time it on a GPU, the wall clock on CPU. Peak memory: torch.cuda.max_memory_allocated
on a GPU, the measuring process's peak RSS on CPU. Graph/break/recompile counts come
from a census (counting backend).

\b
Exit codes:
  0  measured (with or without graph breaks)
  2  usage error, bad target, or no repeated blocks for --regional/--block
  3  the target failed (eager or compiled error, crash, timeout); --json still written
"""


@main.command(epilog=TARGET_HELP + "\n" + PERF_HELP)
@click.argument("target", required=False)
@click.option("--demo", is_flag=True, help="Measure the built-in demo model.")
@click.option("--backend", default="inductor", show_default=True, help="torch.compile backend to measure (inductor, aot_eager, eager, ...).")
@click.option("--regional", is_flag=True, help="Also compile each repeated block instead of the whole model, and compare.")
@click.option("--block", metavar="NAME", help="Attribute path of the blocks for --regional (e.g. transformer.h); default: detected.")
@click.option("--repeats", type=click.IntRange(min=3), default=20, show_default=True, help="Minimum timed passes per side.")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Untimed passes per side before timing.")
@click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="Stop timing a variant after this long even if the median is not yet stable.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the results as JSON.")
@click.option("--svg", "svg_path", type=click.Path(dir_okay=False), help="Write a bar chart of latencies and compile times as SVG.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="Kill any measuring process after S seconds (exit 3).")
def perf(target, demo, backend, regional, block, repeats, warmup, max_seconds, json_path, svg_path, timeout):
    """Measure eager vs compiled latency, cold/warm compile time and peak memory of TARGET."""
    import json as _json

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .perf import failed, perf_svg, render_terminal, run_perf
    from .report import atomic_write
    from .target import TargetError

    if demo == bool(target):
        fail("give exactly one of TARGET or --demo (see `graphstitch perf --help`)")
    spec = "graphstitch.demo:demo" if demo else target
    regional = regional or bool(block)
    steps = 3 + (2 if regional else 0)
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=err_console, transient=True) as bar:
            task = bar.add_task("perf", total=steps)

            def progress(step: str) -> None:
                bar.update(task, description=f"perf: {step}", advance=0 if step == "eager" else 1)
            result = run_perf(spec, backend=backend, regional=regional, block=block, repeats=repeats,
                              warmup=warmup, max_seconds=max_seconds, timeout=timeout, progress=progress)
    except TargetError as e:
        fail(str(e))
    render_terminal(result)
    if json_path:
        atomic_write(json_path, _json.dumps(result, indent=2) + "\n")
    if svg_path:
        atomic_write(svg_path, perf_svg(result))
    err = failed(result)
    if err:
        msg = str(err.get("message") or "").splitlines()
        fail(f"{err['side']} run failed ({err.get('kind')}): {msg[0] if msg else ''}", EXIT_TARGET)
