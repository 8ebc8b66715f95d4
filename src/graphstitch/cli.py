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
    from rich.markup import escape
    # escape: messages quote user and library text ("[/__w/pytorch/...] Connection closed").
    err_console.print(f"[bold red]graphstitch: error:[/] {escape(message)}", markup=True, soft_wrap=True)
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

    from .target import Options
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


RANKS_EXIT_HELP = """\b
Exit codes:
  0  symmetric: every rank compiled the same graphs, breaks, recompiles and collectives
  1  the ranks diverge (the first divergence is printed first, and in --json)
  2  usage error or bad target
  3  a rank failed (exception, crash, or still running at --timeout); the other ranks'
     censuses are still compared and written to --json
"""


@main.command(epilog=TARGET_HELP + """\b
In a distributed run the factory may call torch.distributed.get_rank(): graphstitch starts
the process group (gloo on CPU; gloo+nccl when CUDA is present) before calling it.
--script runs a training script on every rank instead (it starts its own process group);
pass its arguments after `--`: graphstitch ranks --script train.py -- --epochs 1
""" + "\n" + RANKS_EXIT_HELP)
@click.argument("target_or_args", nargs=-1, type=click.UNPROCESSED, metavar="[TARGET] [-- SCRIPT_ARGS]")
@click.option("--nproc", type=click.IntRange(min=1), default=2, show_default=True, help="Number of ranks to launch.")
@click.option("--script", type=click.Path(exists=True, dir_okay=False, resolve_path=True), help="Run this script on each rank instead of a TARGET.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=300, show_default=True,
              help="Kill every rank after S seconds; ranks still running are reported as hung (exit 3).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the comparison and each rank's census as JSON.")
@click.option("--trace-dir", type=click.Path(file_okay=False), help="Keep each rank's trace file (TORCH_TRACE format) in this folder.")
@click.option("--backend", default="counting", show_default=True, help="torch.compile backend for TARGET (as in `census`).")
@click.option("--no-eager-check", is_flag=True, help="Skip the eager reference run of TARGET's calls.")
def ranks(target_or_args, nproc, script, timeout, json_path, trace_dir, backend, no_eager_check):
    """Run TARGET (or --script) on NPROC ranks and check that they compile symmetrically.

    Each rank runs under capture with torch.distributed.run (free port, --standalone). The
    ranks' break sites, break events, graphs and their order, recompile causes, skipped
    frames and the order of collectives in each graph are compared; the first divergence
    names the ranks, the compile id, the site or cause and the user's file:line.
    """
    import json as _json

    from .ranks import compare_ranks, render_ranks, run_ranks
    from .report import atomic_write

    if script is None and len(target_or_args) != 1:
        fail("give exactly one TARGET, or --script PATH [-- ARGS] (see `graphstitch ranks --help`)")
    spec = None if script else target_or_args[0]
    if spec is not None:
        from .target import TargetError, check_spec
        try:
            check_spec(spec)  # before launching N ranks that would all fail the same way
        except TargetError as e:
            fail(str(e))
    # Options as a dict: this process launches the ranks and compares, it never imports torch.
    censuses, info = run_ranks(spec, nproc, {"backend": backend, "check_eager": not no_eager_check}, script=script, script_args=target_or_args if script else (),
                               timeout=timeout, trace_dir=trace_dir)
    bad = [c.error["message"] for c in censuses.values() if c.error and c.error.get("kind") == "target"]
    if bad:
        fail(bad[0])
    result = compare_ranks(censuses)
    render_ranks(result)
    if json_path:
        doc = dict(result, run={k: v for k, v in info.items() if k != "launcher_log_tail"},
                   censuses={r: c.to_dict() for r, c in censuses.items()})
        atomic_write(json_path, _json.dumps(doc, indent=2, default=str))
    if result["failed"]:
        first = result["failed"][0]
        msg = str(first.get("message") or "").strip().splitlines()
        fail(f"rank {first['rank']} failed ({first.get('kind')}): {msg[0] if msg else ''}"
             + (f" (launcher log: {info['trace_dir']}/launcher.log)" if info["trace_dir"] else ""), EXIT_TARGET)
    sys.exit(EXIT_OK if result["symmetric"] else EXIT_FAIL)
