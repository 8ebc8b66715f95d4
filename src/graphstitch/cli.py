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

err_console = Console(stderr=True, highlight=False, emoji=False)  # "x.py:factory:" is not an emoji


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


def compile_options(f):
    """The options that say how a target is compiled and called; shared by every command
    that runs targets so they mean the same everywhere."""
    opts = [
        click.option("--nested-graph-breaks", is_flag=True, help="Set torch._dynamo.config.nested_graph_breaks=True (a nested break is reported once)."),
        click.option("--backend", default="counting", show_default=True,
                     help="'counting' records each graph and runs it eagerly (fast); or any torch.compile backend, e.g. inductor."),
        click.option("--dynamic", type=click.Choice(["auto", "true", "false"]), default="auto", show_default=True,
                     help="torch.compile(dynamic=...): auto = None (automatic dynamic shapes after a recompile)."),
        click.option("--grad", is_flag=True, help="Run the calls with autograd enabled (default: under torch.no_grad())."),
        click.option("--no-eager-check", is_flag=True, help="Skip running the calls eagerly to compare outputs."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def target_options(f):
    """compile_options plus where the target runs."""
    opts = [
        compile_options,
        click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, help="Kill the target after S seconds (exit 3)."),
        click.option("--in-process", is_flag=True, help="Run the target in this process instead of a fresh subprocess (no crash isolation, no --timeout)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def ci_options(f):
    f = click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False),
                     help="Write a Markdown summary (for PR comments); also appended to $GITHUB_STEP_SUMMARY when set.")(f)
    return click.option("--sarif", "sarif_path", type=click.Path(dir_okay=False),
                        help="Write SARIF 2.1.0 (one result per break site and recompile cause) for code scanning.")(f)


def make_options(*, nested_graph_breaks, backend, dynamic, grad, no_eager_check):
    """target.Options from the values of compile_options."""
    from .target import Options
    return Options(backend=backend, nested_graph_breaks=nested_graph_breaks, dynamic=_dynamic(dynamic),
                   grad=grad, check_eager=not no_eager_check)


def run_target(spec: str, *, nested_graph_breaks, backend, dynamic, grad, no_eager_check, timeout, in_process):
    """Census of one target with the shared options. A bad target exits 2 here; a target
    that failed while running comes back with ``census.error`` set."""
    if in_process and timeout:
        fail("--timeout needs the subprocess runner; drop --in-process")
    opts = make_options(nested_graph_breaks=nested_graph_breaks, backend=backend, dynamic=dynamic, grad=grad,
                        no_eager_check=no_eager_check)
    if in_process:
        import linecache
        from .target import TargetError, census_target
        linecache.checkcache()  # source lines of a file edited since an earlier in-process run
        try:
            return census_target(spec, opts)
        except TargetError as e:
            fail(str(e))
    from .target import census_subprocess
    c, _ = census_subprocess(spec, opts, timeout=timeout)
    if c.error and c.error.get("kind") == "target":
        fail(c.error["message"])
    return c


def target_failure(c) -> str:
    msg = str(c.error.get("message") or "")
    return f"target failed ({c.error.get('kind')}): {msg.splitlines()[0] if msg else ''}"


def write_ci_reports(censuses, sarif_path, markdown_path, notes=None) -> None:
    from .ci_reports import write_markdown, write_sarif
    if sarif_path:
        write_sarif(censuses, sarif_path)
    if markdown_path:   # only when asked: a CI job's other census runs must not fill its summary
        write_markdown(censuses, markdown_path, notes=notes)


@main.command(epilog=TARGET_HELP + "\n" + EXIT_CODES_HELP)
@click.argument("target", required=False)
@click.option("--demo", is_flag=True, help="Run the built-in demo model (several kinds of breaks and a recompile).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the census as JSON (schema in README).")
@target_options
@ci_options
def census(target, demo, json_path, sarif_path, markdown_path, **run_opts):
    """Compile TARGET, run its calls, and report every graph break and recompile."""
    from .report import render_terminal, write_json

    if demo == bool(target):
        fail("give exactly one of TARGET or --demo (see `graphstitch census --help`)")
    spec = "graphstitch.demo:demo" if demo else target
    c = run_target(spec, **run_opts)
    render_terminal(c)
    if json_path:
        write_json(c, json_path)
    write_ci_reports([c], sarif_path, markdown_path)
    if c.error:
        fail(target_failure(c), EXIT_TARGET)


# ----------------------------------------------------------------------------- check

CHECK_EXIT_HELP = """\b
Exit codes:
  0  no regression (or the baseline was written with --update)
  1  regression: a new break site, more events of a site, more graphs, a new skipped
     frame, a new recompile cause, or a budget exceeded
  2  usage error, bad target, or a missing/unreadable/corrupt baseline (never rewritten
     without --update)
  3  a target failed while running (the baseline is not written)
"""


@main.command(epilog=TARGET_HELP + "\n" + CHECK_EXIT_HELP)
@click.argument("targets", nargs=-1, required=True)
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False),
              help="Baseline JSON to compare with (one entry per TARGET); commit it with your code.")
@click.option("--update", is_flag=True, help="Write the current census of each TARGET into the baseline (ratchet).")
@click.option("--max-breaks", type=click.IntRange(min=0), default=None, help="Budget: at most N break sites per target.")
@click.option("--max-graphs", type=click.IntRange(min=0), default=None, help="Budget: at most N graphs per target.")
@click.option("--max-recompiles", type=click.IntRange(min=0), default=None, help="Budget: at most N recompiles per target.")
@target_options
@ci_options
def check(targets, baseline_path, update, max_breaks, max_graphs, max_recompiles, sarif_path, markdown_path, **run_opts):
    """Fail when TARGETs got worse than the baseline or over budget (a CI gate).

    Sites are matched on GB id + function + the text of the source line, so an edit above a
    site does not fail the gate. Fewer breaks pass and suggest --update to ratchet. Budgets
    also come from [tool.graphstitch] in pyproject.toml (max-breaks, max-graphs,
    max-recompiles); command-line values win.
    """
    from .gate import BaselineError, baseline_text, compare, entry_from_census, load_baseline, pyproject_budgets
    from .report import atomic_write

    try:
        budgets, _ = pyproject_budgets()
    except BaselineError as e:
        fail(str(e))
    budgets.update({k: v for k, v in (("max_breaks", max_breaks), ("max_graphs", max_graphs),
                                      ("max_recompiles", max_recompiles)) if v is not None})
    if update and not baseline_path:
        fail("--update needs --baseline FILE")
    if not baseline_path and not budgets:
        fail("nothing to check against: give --baseline FILE and/or a budget (--max-breaks, "
             "--max-graphs, --max-recompiles or [tool.graphstitch] in pyproject.toml)")
    base: dict | None = None
    if baseline_path:
        try:
            base = load_baseline(baseline_path)
        except BaselineError as e:
            if not update or os.path.exists(baseline_path) and not _backup(baseline_path):
                fail(str(e))
            base = None
        if base is not None and not update:
            missing = [t for t in targets if t not in base["targets"]]
            if missing:
                fail(f"{', '.join(missing)}: not in baseline {baseline_path}; add with --update")

    censuses = []
    for spec in targets:
        c = run_target(spec, **run_opts)
        censuses.append(c)
        if c.error:
            write_ci_reports(censuses, sarif_path, markdown_path)
            fail(f"{spec}: {target_failure(c)}", EXIT_TARGET)

    out = Console(highlight=False, emoji=False)
    if update:
        entries = dict(base["targets"]) if base else {}
        for spec, c in zip(targets, censuses):
            entries[spec] = entry_from_census(c)
        atomic_write(baseline_path, baseline_text(entries, censuses[0].torch_version))
        for spec, c in zip(targets, censuses):
            out.print(f"[green]baseline updated[/] {spec}: {len(c.sites)} break sites, "
                      f"{c.graph_count} graphs, {c.recompile_count} recompiles")
    verdicts = [compare(spec, c, None if update or base is None else base["targets"][spec],
                        base_torch=None if base is None else base.get("torch_version"), budgets=budgets)
                for spec, c in zip(targets, censuses)]
    notes = {}
    for v in verdicts:
        for w in v.warnings:
            err_console.print(f"[yellow]graphstitch: warning:[/] {w}")
        status = "[bold red]FAIL[/]" if not v.ok else "[green]ok[/]"
        out.print(f"{status} {v.target}")
        for r in v.regressions:
            out.print(f"  [red]- {r}[/]")
        for i in v.improvements:
            out.print(f"  [green]+ {i}[/]")
        notes[v.target] = [*(f"warning: {w}" for w in v.warnings), *(f"regression: {r}" for r in v.regressions),
                           *(f"improved: {i}" for i in v.improvements)]
    write_ci_reports(censuses, sarif_path, markdown_path, notes)
    if any(v.improvements for v in verdicts) and all(v.ok for v in verdicts):
        out.print(f"Improved. Ratchet the baseline: graphstitch check {' '.join(targets)} "
                  f"--baseline {baseline_path} --update")
    if not all(v.ok for v in verdicts):
        sys.exit(EXIT_FAIL)


def _backup(path: str) -> bool:
    """Before --update replaces an unreadable baseline, keep a copy next to it."""
    import shutil
    try:
        shutil.copy2(path, path + ".bak")
    except OSError:
        return False
    err_console.print(f"[yellow]graphstitch: warning:[/] {path} was unreadable; kept a copy as {path}.bak")
    return True


# ----------------------------------------------------------------------------- guards

GUARDS_EXIT_HELP = """\b
Exit codes:
  0  stable: --repeat made no recompile; --vary generalized after at most one recompile
     per frame and recompile_limit was not hit
  1  unstable: a recompile on repeated calls, no generalization, or recompile_limit hit
  2  usage error or bad target
  3  the target itself failed
"""


@main.command(epilog=TARGET_HELP + "\n" + GUARDS_EXIT_HELP)
@click.argument("target")
@click.option("--repeat", type=click.IntRange(min=2), default=None,
              help="Make the factory's calls N times; any recompile is a failure naming its cause.")
@click.option("--vary", "vary", metavar="[NAME:]DIM", default=None,
              help="Call the factory's first call with one tensor's dimension changed over a few sizes (0 = first tensor argument, x:0 = argument x).")
@click.option("--sizes", default=None, metavar="N,N,...", help="Sizes for --vary (default: the original size, then 3 larger ones).")
@click.option("--recompile-limit", type=click.IntRange(min=1), default=None,
              help="Patch torch._dynamo.config.recompile_limit for this run (default: torch's, 8).")
@click.option("--full", is_flag=True, help="Print every guard of every cache entry, not only the differences.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the result as JSON.")
@compile_options
def guards(target, repeat, vary, sizes, recompile_limit, full, json_path, **compile_opts):
    """Check that TARGET keeps its compiled code: repeated calls, or one dimension varied.

    Shows each recompile cause with advice, whether automatic dynamic shapes generalized,
    whether recompile_limit was hit (the silent fallback to eager), and the guard set of each
    cache entry as a diff against the previous one (object ids, addresses and the global
    state blob normalized away). Runs in this process.
    """
    import json

    from . import guards as g
    from .report import atomic_write
    from .target import TargetError

    if (repeat is None) == (vary is None):
        fail("give exactly one of --repeat N or --vary DIM (see `graphstitch guards --help`)")
    if sizes and not vary:
        fail("--sizes goes with --vary")
    size_list = None
    if sizes:
        try:
            size_list = [int(s) for s in sizes.split(",")]
        except ValueError:
            fail(f"--sizes {sizes!r}: expected comma-separated integers, e.g. 2,3,4")
        if len(size_list) < 2 or min(size_list) < 0:
            fail("--sizes needs at least two non-negative sizes")
    if vary:
        try:
            g.parse_vary(vary)
        except ValueError as e:
            fail(str(e))
    from .dynamo import quiet_dynamo_warnings
    quiet_dynamo_warnings()
    try:
        c, info = g.run(target, make_options(**compile_opts), repeat=repeat, vary=vary, sizes=size_list,
                        recompile_limit=recompile_limit)
    except (TargetError, ValueError) as e:
        fail(str(e))
    st = g.judge(c, info)
    g.render(c, info, st, Console(highlight=False, emoji=False), full=full)
    if json_path:
        atomic_write(json_path, json.dumps(g.to_dict(c, info, st), indent=2) + "\n")
    if c.error:
        fail(target_failure(c), EXIT_TARGET)
    if not st.ok:
        sys.exit(EXIT_FAIL)
