"""The ``graphstitch`` command line: parse, validate, call a command, render, exit.

Every command reads typed results (a Census, a FixReport, a PerfResult...) and hands them
to ``render``; nothing here counts or matches. Arguments are checked before torch is
imported, so a usage error answers at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import click
from rich.console import Console

from . import __version__
from .model import Census, ErrorKind, gb_text
from .targets import Options

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TARGET = 0, 1, 2, 3

# Every command that runs a target stops it after this long unless told otherwise (0: never).
DEFAULT_TIMEOUT = 600.0
TIMEOUT_HELP = f"[default: {DEFAULT_TIMEOUT:g}; 0: no limit]"

EXIT_CODES_HELP = """\b
Exit codes:
  0  ran (with or without graph breaks)
  2  usage error or bad target (missing file/factory, import error, wrong factory shape),
     or a report path refused (missing folder, unwritable, two options on one file)
  3  the target itself failed (exception, crash, timeout); the partial census is still
     written to --json
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
"""

TARGET_HELP = """\b
TARGET is PATH.py:FACTORY or package.module:FACTORY. FACTORY() returns (fn, args, kwargs)
for one call, or a list of such tuples: the calls are made in order, so recompiles between
them are seen. fn may be an nn.Module or any callable; graphstitch compiles it itself.
"""

err_console = Console(stderr=True, highlight=False, emoji=False)  # "x.py:factory:" is not an emoji


class _Output(click.Path):
    """A report file to write: refused at parse time (one line, exit 2) when it exists and
    must not be replaced, so a long run never ends in a write it cannot do."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from .files import WriteRefused, check_writable
        path = super().convert(value, param, ctx)
        try:
            check_writable(str(path))
        except WriteRefused as e:
            fail(str(e))
        return path


OUTPUT = _Output()


def check_outputs(named: list[tuple[str, str]], create_dirs: bool) -> None:
    """Every report path of a command, before anything runs (exit 2, one line): two options
    on one file, a missing folder (made only with --create-dirs), a folder that cannot take
    the file. NAMED: (option, path)."""
    from .files import WriteRefused, check_folder
    seen: dict[str, str] = {}
    for opt, path in named:
        real = os.path.realpath(path)
        if real in seen:
            fail(f"{seen[real]} and {opt} are both {path}: give each report its own file")
        seen[real] = opt
        folder = os.path.dirname(real)
        if create_dirs and not os.path.exists(folder):
            try:
                os.makedirs(folder)
            except OSError as e:
                fail(f"{opt} {path}: cannot create folder {folder} ({e.strerror})")
        try:
            check_folder(folder)
        except WriteRefused as e:
            hint = " (--create-dirs makes it)" if not os.path.exists(folder) else ""
            fail(f"{opt} {path}: {e}{hint}")


class _Cmd(click.Command):
    """A command whose report paths (options of type OUTPUT) are all checked together before
    it runs, with --create-dirs to make their folders."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if any(isinstance(p.type, _Output) for p in self.params):
            self.params.append(click.Option(["--create-dirs"], is_flag=True,
                                            help="Create missing folders of report paths (otherwise refused, exit 2)."))

    def invoke(self, ctx: click.Context) -> Any:
        create = bool(ctx.params.pop("create_dirs", False))
        named = [(p.opts[0], str(ctx.params[p.name])) for p in self.params
                 if isinstance(p.type, _Output) and p.name and ctx.params.get(p.name)]
        check_outputs(named, create)
        return super().invoke(ctx)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """One clear line on stderr and a documented exit code; never a traceback."""
    from rich.markup import escape
    # escape: messages quote user and library text ("[/__w/pytorch/...] Connection closed").
    err_console.print(f"[bold red]graphstitch: error:[/] {escape(message)}", markup=True, soft_wrap=True)
    sys.exit(code)


class _Group(click.Group):
    command_class = _Cmd

    def invoke(self, ctx: click.Context) -> Any:
        from .files import WriteRefused
        from .procs import own_signals
        # A signal that ends us (CI cancel, `timeout`, Ctrl-C, SIGHUP) ends every worker too.
        try:
            with own_signals(lambda line: err_console.print(f"[bold red]{line}[/]", markup=True, soft_wrap=True)):
                return super().invoke(ctx)
        except WriteRefused as e:  # any report/baseline/source write refused: one line, exit 2
            fail(str(e))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="graphstitch")
def main() -> None:
    """Find, explain and eliminate torch.compile graph breaks and recompiles.

    Start with `graphstitch census --demo`. Every output (terminal, --json) reads one census;
    the README's "Definitions" section says what a graph, a break event, a break site and a
    recompile cause are.
    """
    import warnings
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # see procs.child_env


def _dynamic(value: str) -> bool | None:
    return {"auto": None, "true": True, "false": False}[value]


def compile_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options that say how a target is compiled and called; shared by every command
    that runs targets so they mean the same everywhere."""
    opts = [
        click.option("--nested-graph-breaks", is_flag=True, help="Set torch._dynamo.config.nested_graph_breaks=True (a nested break is reported once)."),
        click.option("--backend", default="counting", show_default=True,
                     help="'counting' records each graph and runs it eagerly (fast); or any torch.compile backend, e.g. inductor."),
        click.option("--dynamic", type=click.Choice(["auto", "true", "false"]), default="auto", show_default=True,
                     help="torch.compile(dynamic=...): auto = None (automatic dynamic shapes after a recompile)."),
        click.option("--grad", is_flag=True, help="Run the calls with autograd enabled (default: under torch.no_grad(); a "
                          "target that calls backward() or registers a gradient hook there runs again with autograd by itself)."),
        click.option("--no-eager-check", is_flag=True, help="Skip running the calls eagerly to compare outputs."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """compile_options plus where the target runs."""
    opts = [
        compile_options,
        click.option("--timeout", type=click.FloatRange(min=0), default=None,
                     help=f"Kill the target after S seconds, counted from the worker's start-up (exit 3). {TIMEOUT_HELP}"),
        click.option("--in-process", is_flag=True, help="Run the target in this process instead of a fresh subprocess (no crash isolation, no --timeout)."),
        click.option("-v", "--verbose", is_flag=True, help="Also show the target's own output and warnings "
                     "(captured per worker; shown anyway when the target fails)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def ci_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--html", "html_path", type=OUTPUT,
                     help="Write a self-contained HTML report (opens from disk, no network).")(f)
    f = click.option("--markdown", "markdown_path", type=OUTPUT,
                     help="Write a Markdown summary (for PR comments); also appended to $GITHUB_STEP_SUMMARY when set.")(f)
    return click.option("--sarif", "sarif_path", type=OUTPUT,
                        help="Write SARIF 2.1.0 (one result per break site and recompile cause) for code scanning.")(f)


def project_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--project", "project", type=click.Path(exists=True, file_okay=False),
                        help="Your code: owner frames are the first frames under DIR (default: [tool.graphstitch] "
                             "project in pyproject.toml, else the target's project root; never site-packages).")(f)


def resolve_project(project: str | None, start: str = ".") -> str | None:
    """--project, else [tool.graphstitch] project (relative to its pyproject.toml)."""
    if project:
        return os.path.realpath(project)
    from .gate import BaselineError, pyproject_setting
    try:
        value, where = pyproject_setting("project", start)
    except BaselineError as e:
        fail(str(e))
    if value is None or where is None:
        return None
    if not isinstance(value, str):
        fail(f"{where}: [tool.graphstitch] project must be a folder path")
    path = os.path.realpath(os.path.join(os.path.dirname(where), value))
    if not os.path.isdir(path):
        fail(f"{where}: [tool.graphstitch] project {value!r} is not a folder")
    return path


def with_owners(c: Census, project: str | None) -> Census:
    from .owners import attach
    return attach(c, project) if project else c


def make_options(*, nested_graph_breaks: bool, backend: str, dynamic: str, grad: bool,
                 no_eager_check: bool) -> Options:
    """targets.Options from the values of compile_options."""
    return Options(backend=backend, nested_graph_breaks=nested_graph_breaks, dynamic=_dynamic(dynamic),
                   grad=grad, check_eager=not no_eager_check)


def check_target(spec: str) -> None:
    """What can be checked before anything is imported: exit 2 with one line."""
    from .targets import TargetError, check_spec
    try:
        check_spec(spec)
    except TargetError as e:
        fail(str(e))


def resolve_timeout(timeout: float | None, in_process: bool = False) -> float | None:
    """--timeout as given (0: no limit), else the default, except in this process (no limit)."""
    if timeout is None:
        return None if in_process else DEFAULT_TIMEOUT
    return timeout or None


@contextlib.contextmanager
def progress_line(label: str) -> Iterator[Callable[[str], None] | None]:
    """On a terminal, one transient line on stderr (spinner, LABEL: phase, elapsed) fed by the
    callback yielded; piped or in CI logs: nothing (None)."""
    if not err_console.is_terminal:
        yield None
        return
    where, colon, name = label.rpartition(":")
    if colon and os.sep in where:   # a long path would push the phase off the line
        label = f"{where.rsplit(' ', 1)[0]} {os.path.basename(where)}:{name}" if " " in where else \
            f"{os.path.basename(where)}:{name}"
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    # Plain text: "x.py:factory:" is neither markup nor an emoji code.
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task(label)
        yield lambda text: bar.update(task, description=f"{label}: {text}")


def run_target(spec: str, *, timeout: float | None, in_process: bool, project: str | None = None,
               cost: bool = False, fullgraph_semantics: bool = False, verbose: bool = False,
               **compile_opts: Any) -> Census:
    """Census of one target with the shared options. A bad target exits 2 here; a target
    that failed while running comes back with ``census.error`` set. ``cost``: also time
    each compiled region and eager gap of warm calls (perf/gaps.py)."""
    if in_process and timeout:
        fail("--timeout needs the subprocess runner; drop --in-process")
    timeout = resolve_timeout(timeout, in_process)
    check_target(spec)
    from .targets import target_root
    opts = make_options(**compile_opts)
    opts.fullgraph_semantics = fullgraph_semantics
    root = target_root(spec)
    mine = resolve_project(project)
    if in_process:
        from .targets import TargetError
        try:
            if cost:
                from .perf.gaps import census_with_cost
                return with_owners(census_with_cost(spec, opts, project_root=root), mine)
            from .live import census_target
            return with_owners(census_target(spec, opts, project_root=root), mine)
        except TargetError as e:
            fail(str(e))
    from .worker import Job
    from .worker import run as run_job
    job = Job(spec=spec, options=opts, project_root=root)
    if cost:
        job.handler = "graphstitch.perf.gaps:cost_job"
    with progress_line(f"census {spec}") as progress:
        out = run_job(job, timeout=timeout, progress=progress)
    c = out.census
    if verbose and c.output is None:   # a failed census shows its output itself
        from .render import terminal
        terminal.target_output(out.output, err_console)
    if c.error and c.error.kind is ErrorKind.TARGET:
        fail(c.error.message)
    return with_owners(c, mine)


def target_failure(c: Census) -> str:
    e = c.error
    assert e is not None
    if e.kind is ErrorKind.CAPTURE:
        return f"capture not verified: {e.headline}"
    lead = f"{e.type} at {e.where}: " if e.type and e.where and e.kind is not ErrorKind.EXIT else ""
    return f"target failed ({e.kind.value}): {lead}{e.headline}"


def write_ci_reports(censuses: list[Census], sarif_path: str | None, markdown_path: str | None,
                     notes: dict[str, list[str]] | None = None) -> None:
    if sarif_path:
        from .render.sarif import write_sarif
        write_sarif(censuses, sarif_path)
    if markdown_path:   # only when asked: a CI job's other census runs must not fill its summary
        from .render.markdown import write_markdown
        write_markdown(censuses, markdown_path, notes=notes)


@main.command(epilog=TARGET_HELP + "\n" + EXIT_CODES_HELP)
@click.argument("target", required=False)
@click.option("--demo", is_flag=True, help="Run the built-in demo model (several kinds of breaks and a recompile).")
@click.option("--json", "json_path", type=OUTPUT, help="Also write the census as JSON (schema in README).")
@click.option("--cost", is_flag=True, help="Also time each compiled region and each eager gap of warm calls, "
              "attribute each gap to its break site and rank sites by seconds per call.")
@click.option("--fullgraph-semantics", is_flag=True, help="Report what a fullgraph=True compile would fail on "
              "(it implies capture_scalar_outputs and capture_dynamic_output_shape_ops).")
@click.option("--full-stack", is_flag=True, help="Show torch's own frames in stacks (collapsed by default).")
@project_option
@target_options
@ci_options
def census(target: str | None, demo: bool, json_path: str | None, sarif_path: str | None,
           markdown_path: str | None, html_path: str | None, full_stack: bool, **run_opts: Any) -> None:
    """Compile TARGET, run its calls, and report every graph break and recompile."""
    if demo == bool(target):
        fail("give exactly one of TARGET or --demo (see `graphstitch census --help`)")
    spec = "graphstitch.demo:demo" if demo else str(target)
    c = run_target(spec, **run_opts)
    if run_opts.get("cost") and c.cost is None and c.error is None:
        err_console.print("[yellow]graphstitch: warning:[/] no cost: the warm timing passes failed "
                          "(the target fails when called again?)")
    from .advice import advise
    _show(advise(c), json_path, sarif_path, markdown_path, html_path, full_stack=full_stack)


def _show(c: Census, json_path: str | None, sarif_path: str | None = None, markdown_path: str | None = None,
          html_path: str | None = None, more: Sequence[Callable[[Any], None]] = (), full_stack: bool = False,
          command: str = "census", exit_on_error: bool = True) -> None:
    """Terminal (plus ``more`` renderers), --json/--html, CI reports, then exit 3 if the
    target failed (unless EXIT_ON_ERROR is off: the caller has more to do first)."""
    from .render import terminal
    terminal.census(c, full_stack=full_stack, command=command)
    for render in more:
        render(c)
    _write_outputs(c, json_path, html_path)
    write_ci_reports([c], sarif_path, markdown_path)
    if c.error and exit_on_error:
        fail(target_failure(c), EXIT_TARGET)


# ----------------------------------------------------------------------------- check

CHECK_EXIT_HELP = """\b
Exit codes:
  0  no regression (or the baseline was written with --update)
  1  regression: a new break site, more events of a site, more graphs, a new skipped
     frame, a new recompile cause, or a budget exceeded; with --strict also "unknown":
     code that ran untraced (Dynamo never saw it, so a break there is not counted)
     changed or is new
  2  usage error, bad target, or a missing/unreadable/corrupt baseline (never rewritten
     without --update)
  3  a target failed while running (the baseline is not written)
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
"""


@main.command(epilog=TARGET_HELP + "\n" + CHECK_EXIT_HELP)
@click.argument("targets", nargs=-1, required=True)
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False),
              help="Baseline JSON to compare with (one entry per TARGET); commit it with your code.")
@click.option("--update", is_flag=True, help="Write the current census of each TARGET into the baseline (ratchet).")
@click.option("--max-breaks", type=click.IntRange(min=0), default=None, help="Budget: at most N break sites per target.")
@click.option("--max-graphs", type=click.IntRange(min=0), default=None, help="Budget: at most N graphs per target.")
@click.option("--max-recompiles", type=click.IntRange(min=0), default=None, help="Budget: at most N recompiles per target.")
@click.option("--strict", is_flag=True,
              help="Fail (exit 1) on 'unknown' too: code Dynamo never traced changed or is new, so the gate "
                   "cannot tell whether it breaks.")
@click.option("--json", "json_path", type=OUTPUT, help="Also write each target's verdict and census as JSON (schema graphstitch.check/1).")
@project_option
@target_options
@ci_options
def check(targets: tuple[str, ...], baseline_path: str | None, update: bool, max_breaks: int | None,
          max_graphs: int | None, max_recompiles: int | None, strict: bool, json_path: str | None,
          sarif_path: str | None,
          markdown_path: str | None, html_path: str | None, **run_opts: Any) -> None:
    """Fail when TARGETs got worse than the baseline or over budget (a CI gate).

    Sites are matched on their identity (GB id + file relative to the project + function +
    the text of the source line), so an edit above a site does not fail the gate, and a
    baseline made in one checkout works in another. Fewer breaks pass and suggest --update
    to ratchet. Budgets also come from [tool.graphstitch] in pyproject.toml (max-breaks,
    max-graphs, max-recompiles); command-line values win. Code that ran without Dynamo
    tracing it (the rest of a skipped frame, a torch.compiler.disable function) is kept in
    the baseline by its text: a change there is "unknown", not "ok" (--strict fails on it).
    """
    from .files import WriteRefused, atomic_write
    from .gate import (
        BASELINE_FORMAT,
        Baseline,
        BaselineEntry,
        BaselineError,
        CheckReport,
        baseline_text,
        compare,
        load_baseline,
        new_baseline,
        pyproject_budgets,
    )
    from .render import terminal, write_json
    from .targets import target_key

    try:
        budgets, _ = pyproject_budgets()
    except BaselineError as e:
        fail(str(e))
    budgets.update({k: v for k, v in (("max_breaks", max_breaks), ("max_graphs", max_graphs),
                                      ("max_recompiles", max_recompiles)) if v is not None})
    if update and not baseline_path:
        fail("--update needs --baseline FILE")
    if update and baseline_path:  # before the censuses, not after them
        check_outputs([("--baseline", baseline_path)], create_dirs=False)
        from .files import check_writable
        try:
            check_writable(baseline_path)
        except WriteRefused as e:
            fail(str(e))
    if not baseline_path and not budgets:
        fail("nothing to check against: give --baseline FILE and/or a budget (--max-breaks, "
             "--max-graphs, --max-recompiles or [tool.graphstitch] in pyproject.toml)")
    for spec in targets:
        check_target(spec)
    keys = [target_key(t) for t in targets]
    base: Baseline | None = None
    if baseline_path:
        try:
            base = load_baseline(baseline_path)
        except BaselineError as e:
            if not update or os.path.exists(baseline_path) and not _backup(baseline_path):
                fail(str(e))
            base = None
        if base is not None and not update:
            missing = [t for t, k in zip(targets, keys) if k not in base.targets]
            if missing:
                fail(f"{', '.join(missing)}: not in baseline {baseline_path}; add with --update")

    censuses: list[Census] = []
    for spec in targets:
        c = run_target(spec, **run_opts)
        censuses.append(c)
        if c.error:
            if json_path:
                write_json(CheckReport(baseline_path, False, [], dict(zip(targets, censuses))), json_path)
            write_ci_reports(censuses, sarif_path, markdown_path)
            _write_outputs(c, None, html_path, ranks=dict(zip(targets, censuses)))
            fail(f"{spec}: {target_failure(c)}", EXIT_TARGET)
    _write_outputs(censuses[0], None, html_path, ranks=dict(zip(targets, censuses)))

    out = Console(highlight=False, emoji=False)
    if update:
        assert baseline_path is not None
        entries = dict(base.targets) if base else {}
        for key, c in zip(keys, censuses):
            entries[key] = BaselineEntry.of(c)
        try:
            atomic_write(baseline_path, baseline_text(new_baseline(entries, censuses[0].torch_version)))
        except WriteRefused as e:
            fail(str(e))
        for spec, c in zip(targets, censuses):
            out.print(f"[green]baseline updated[/] {spec}: {len(c.sites)} break sites, "
                      f"{c.graph_count} graphs, {c.recompile_count} recompiles")
    results = [compare(spec, c, None if update or base is None else base.targets[key],
                       base_torch=None if base is None else base.torch_version, budgets=budgets,
                       base_format=BASELINE_FORMAT if base is None else base.format)
               for spec, key, c in zip(targets, keys, censuses)]
    terminal.verdicts(results, out, err_console)
    notes = {v.target: [*(f"warning: {w}" for w in v.warnings), *(f"regression: {r}" for r in v.regressions),
                        *(f"unknown: {u}" for u in v.unknowns), *(f"improved: {i}" for i in v.improvements)]
             for v in results}
    write_ci_reports(censuses, sarif_path, markdown_path, notes)
    if json_path:
        write_json(CheckReport(baseline_path, update, results, dict(zip(targets, censuses))), json_path)
    if any(v.improvements for v in results) and all(v.ok for v in results) and not update:
        out.print(f"Improved. Ratchet the baseline: graphstitch check {' '.join(targets)} "
                  f"--baseline {baseline_path} --update")
    if any(v.unknowns for v in results) and not update:
        out.print("Unknown: code that ran untraced changed; the gate cannot judge it"
                  + (" (--strict: failing)." if strict else " (--strict fails on this)."))
    if not all(v.ok for v in results) or strict and not update and any(v.unknowns for v in results):
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
  0  stable: the repeat passes made no recompile (the first pass may); --vary generalized
     after at most one recompile per frame; recompile_limit was not hit
  1  unstable: a recompile in a repeat pass, no generalization, or recompile_limit hit
  2  usage error or bad target
  3  the target itself failed
"""


@main.command(epilog=TARGET_HELP + "\n" + GUARDS_EXIT_HELP)
@click.argument("target")
@click.option("--repeat", type=click.IntRange(min=2), default=None,
              help="Make the factory's calls N times (default 2 without --vary); a recompile in a repeat pass is a "
                   "failure naming its cause (recompiles in the first pass, over the factory's own calls, are reported).")
@click.option("--vary", "vary", metavar="[NAME:]DIM", default=None,
              help="Call the factory's first call with one tensor's dimension changed over a few sizes (0 = first tensor argument, x:0 = argument x).")
@click.option("--sizes", default=None, metavar="N,N,...", help="Sizes for --vary (default: the original size, then 3 larger ones).")
@click.option("--recompile-limit", type=click.IntRange(min=1), default=None,
              help="Patch torch._dynamo.config.recompile_limit for this run (default: torch's, 8).")
@click.option("--full", is_flag=True, help="Print every guard of every cache entry, not only the differences.")
@click.option("--json", "json_path", type=OUTPUT, help="Also write the result as JSON.")
@compile_options
def guards(target: str, repeat: int | None, vary: str | None, sizes: str | None, recompile_limit: int | None,
           full: bool, json_path: str | None, **compile_opts: Any) -> None:
    """Check that TARGET keeps its compiled code: repeated calls, or one dimension varied.

    Shows each recompile cause with advice, whether automatic dynamic shapes generalized,
    whether recompile_limit was hit (the silent fallback to eager), and the guard set of each
    cache entry as a diff against the previous one (object ids, addresses and the global
    state blob normalized away). Runs in this process.
    """
    if repeat is not None and vary is not None:
        fail("give one of --repeat N or --vary DIM, not both (see `graphstitch guards --help`)")
    if repeat is None and vary is None:
        repeat = 2   # the factory's calls (first pass), then once more: what stays compiled
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
    from . import guards as g
    if vary:
        try:
            g.parse_vary(vary)
        except ValueError as e:
            fail(str(e))
    check_target(target)
    from .dynamo import quiet_dynamo_warnings
    from .render import terminal, write_json
    from .targets import TargetError, target_root
    quiet_dynamo_warnings()
    try:
        c, info = g.run(target, make_options(**compile_opts), repeat=repeat, vary=vary, sizes=size_list,
                        recompile_limit=recompile_limit, project_root=target_root(target))
    except (TargetError, ValueError) as e:
        fail(str(e))
    rep = g.report(c, info, g.judge(c, info))
    terminal.guards(rep, Console(highlight=False, emoji=False), full=full)
    if json_path:
        write_json(rep, json_path)
    if c.error:
        fail(target_failure(c), EXIT_TARGET)
    if not rep.ok:
        sys.exit(EXIT_FAIL)


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
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
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
@click.option("--json", "json_path", type=OUTPUT, help="Write the results as JSON.")
@click.option("--svg", "svg_path", type=OUTPUT, help="Write a bar chart of latencies and compile times as SVG.")
@click.option("--html", "html_path", type=OUTPUT, help="Write a self-contained HTML page: the chart and the table.")
@click.option("--timeout", type=click.FloatRange(min=0), default=DEFAULT_TIMEOUT,
              help=f"Kill any measuring process after S seconds (exit 3). {TIMEOUT_HELP}")
def perf(target: str | None, demo: bool, backend: str, regional: bool, block: str | None, repeats: int, warmup: int,
         max_seconds: float, json_path: str | None, svg_path: str | None, html_path: str | None,
         timeout: float | None) -> None:
    """Measure eager vs compiled latency, cold/warm compile time and peak memory of TARGET."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    if demo == bool(target):
        fail("give exactly one of TARGET or --demo (see `graphstitch perf --help`)")
    spec = "graphstitch.demo:demo" if demo else str(target)
    check_target(spec)
    from .files import atomic_write
    from .perf import failed, run_perf
    from .render import terminal, write_json
    from .render.html import perf_html
    from .render.svg import perf_svg
    from .targets import TargetError
    regional = regional or bool(block)
    steps = 3 + (2 if regional else 0)
    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=err_console, transient=True) as bar:
            task = bar.add_task("perf", total=steps)

            def progress(step: str) -> None:
                bar.update(task, description=f"perf: {step}", advance=0 if step == "eager" else 1)
            result = run_perf(spec, backend=backend, regional=regional, block=block, repeats=repeats,
                              warmup=warmup, max_seconds=max_seconds, timeout=timeout or None, progress=progress)
    except TargetError as e:
        fail(str(e))
    terminal.perf(result)
    if json_path:
        write_json(result, json_path)
    if svg_path:
        atomic_write(svg_path, perf_svg(result))
    if html_path:
        atomic_write(html_path, perf_html(result))
    err = failed(result)
    if err:
        fail(f"{err.side} run failed ({err.error.kind.value}): {err.error.headline}", EXIT_TARGET)


RANKS_EXIT_HELP = """\b
Exit codes:
  0  symmetric: every rank compiled the same graphs, breaks, recompiles and collectives
  1  the ranks diverge (the first divergence is printed first, and in --json)
  2  usage error or bad target
  3  a rank failed (exception, crash, or still running at --timeout); the other ranks'
     censuses are still compared and written to --json
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
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
@click.option("--json", "json_path", type=OUTPUT, help="Write the comparison and each rank's census as JSON.")
@click.option("--trace-dir", type=click.Path(file_okay=False), help="Keep each rank's trace file (TORCH_TRACE format) in this folder.")
@click.option("--backend", default="counting", show_default=True, help="torch.compile backend for TARGET (as in `census`).")
@click.option("--no-eager-check", is_flag=True, help="Skip the eager reference run of TARGET's calls.")
def ranks(target_or_args: tuple[str, ...], nproc: int, script: str | None, timeout: float, json_path: str | None,
          trace_dir: str | None, backend: str, no_eager_check: bool) -> None:
    """Run TARGET (or --script) on NPROC ranks and check that they compile symmetrically.

    Each rank runs under capture with torch.distributed.run (free port, --standalone). The
    ranks' break sites, break events, graphs and their order, recompile causes, skipped
    frames and the order of collectives in each graph are compared; the first divergence
    names the ranks, the compile id, the site or cause and the user's file:line.
    """
    if script is None and len(target_or_args) != 1:
        fail("give exactly one TARGET, or --script PATH [-- ARGS] (see `graphstitch ranks --help`)")
    spec = None if script else target_or_args[0]
    if spec is not None:
        check_target(spec)  # before launching N ranks that would all fail the same way
    from .ranks import RanksReport, compare_ranks, run_ranks
    from .render import terminal, write_json
    from .targets import target_root
    root = target_root(spec) if spec else os.path.dirname(os.path.abspath(str(script)))
    censuses, info = run_ranks(spec, nproc, Options(backend=backend, check_eager=not no_eager_check),
                               script=script, script_args=target_or_args if script else (), timeout=timeout,
                               trace_dir=trace_dir, project_root=root)
    bad = [c.error.message for c in censuses.values() if c.error and c.error.kind is ErrorKind.TARGET]
    if bad:
        fail(bad[0])
    result = compare_ranks(censuses)
    terminal.ranks(result)
    if json_path:
        info.launcher_log_tail = ""
        write_json(RanksReport(**vars(result), run=info, censuses=censuses), json_path)
    if result.failed:
        first = result.failed[0]
        msg = first.message.strip().splitlines()
        fail(f"rank {first.rank} failed ({first.kind}): {msg[0] if msg else ''}"
             + (f" (launcher log: {info.trace_dir}/launcher.txt)" if info.trace_dir else ""), EXIT_TARGET)
    sys.exit(EXIT_OK if result.symmetric else EXIT_FAIL)


FIX_HELP = """\b
What fix tries for each break site, in this order (each candidate is its own census in a
fresh process, on a patched copy of your project; your files are not touched):
  1. rewrite   source rewrites of the statement that breaks (fix/rules/): .item() kept
               as a tensor, a data-dependent if -> torch.where / torch.cond, ...
  2. caller    what does not belong in the compiled region done by its caller and
               passed in (a generator argument becomes a list the caller builds); a
               function entry's split, where your factory compiles a module of its parts
               instead of the function, is a caller move too (tried with the splits)
  3. extract   the breaking statement moved into a helper Dynamo does not trace
               (nonstrict_trace)
  then, only for the sites none of those fixed:
  4. split     a region split: the function's parts compiled apart, glue eager
  5. config    a torch._dynamo.config flag (capture_scalar_outputs, ..., the two
               data-dependence flags together; reorderable_logging_functions)
  6. hatch     a wrapper on the function that holds the break: nonstrict_trace and
               compiler.disable (leaf_function, custom_op, allow_in_graph only when
               named with --candidate: reported, never written)
  7. upstream  a verified patch to a file outside your project (a library's): printed
               by --diff as a patch to send, never written
A candidate is VERIFIED only if its site is gone, no new site (a moved break) and no new
skipped frame appeared, outputs equal eager on the factory's calls and on a fresh random
input set, and what the code prints/logs/warns/writes per call is unchanged. Trials use
--backend aot_eager by default: there side effects vanish as under inductor.

Recompile causes get fixes too (mark_dynamic or a 0-d tensor where the factory makes the
call, a module attribute kept as a buffer, config lines): each is VERIFIED only if that
cause's recompiles are gone, nothing new appeared, outputs equal eager and a repeat pass
over the same calls recompiles nothing. Expected recompiles (train/eval, dtype, a string
picking code) are explained with their count, never "fixed".
"""

FIX_EXIT_HELP = """\b
Exit codes:
  0  ran (with or without graph breaks or verified fixes)
  1  --diff/--apply: nothing verified to write, the write was refused, or the patched
     copy did not re-verify
  2  usage error, bad target, a report path refused, or --apply on a read-only target
     file (all before anything runs)
  3  the target itself failed (exception, crash, timeout); --json is still written. A
     target that fails only when compiled still gets its fixes tried, judged against
     eager: --diff/--apply write a verified one (exit 0; 3 when none verified)
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
"""


@main.command(epilog=FIX_HELP + "\n" + TARGET_HELP + "\n" + FIX_EXIT_HELP)
@click.argument("target")
@click.option("--json", "json_path", type=OUTPUT, help="Write the census with advice and fixes[] as JSON.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Trials in parallel (default: CPU cores).")
@click.option("--backend", default="aot_eager", show_default=True, help="torch.compile backend for the baseline and every trial.")
@click.option("--site", "site_filter", default=None, help="Only sites whose 'GBxxxx path:line' contains this text.")
@click.option("--candidate", "kinds", multiple=True, type=click.Choice(["rewrite", "caller", "extract", "split", "config",
              "nonstrict_trace", "leaf_function", "custom_op", "allow_in_graph", "disable"]),
              help="Only try these kinds of candidate (repeatable). Default: every kind graphstitch can write as source "
                   "(leaf_function, custom_op and allow_in_graph are tried only when named: their fakes are generated "
                   "at run time, so they are reported, never written).")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff making the best verified candidate permanent.")
@click.option("--apply", "do_apply", is_flag=True, help="Write that patch (after re-verifying it on a patched copy); keeps FILE.graphstitch.bak.")
@click.option("--grad", is_flag=True, help="Run the calls with autograd enabled (a target that calls backward() or registers a gradient hook "
              "gets it by itself).")
@click.option("--timeout", type=click.FloatRange(min=0), default=DEFAULT_TIMEOUT,
              help=f"Kill one census (the baseline, a trial) after S seconds. {TIMEOUT_HELP}")
@click.option("-v", "--verbose", is_flag=True, help="Show every trial's own output and warnings in full "
              "(captured per trial; a failing trial's last lines are shown anyway).")
@click.option("--html", "html_path", type=OUTPUT, help="Also write a self-contained HTML report (sites with their verified fixes).")
@click.option("--measure", is_flag=True, help="For each verified fix, time the compiled target before and after it "
              "(alternating, same backend) and report the speedup.")
@click.option("--all", "fix_everything", is_flag=True, help="Apply verified source patches site by site on a copy "
              "(rewrites first; config flags and hatches as source lines where no rewrite verifies), "
              "re-running the census after each, to a fixed point; report the final graph count. With --diff/--apply: "
              "the combined patch (re-verified from the pristine files).")
@project_option
def fix(target: str, json_path: str | None, jobs: int | None, backend: str, site_filter: str | None,
        kinds: tuple[str, ...], show_diff: bool, do_apply: bool, grad: bool, timeout: float, verbose: bool,
        html_path: str | None, measure: bool, fix_everything: bool, project: str | None) -> None:
    """Try fixes for every break and recompile cause in TARGET, verify each, and rank the verified ones."""
    check_target(target)
    if do_apply:
        _check_apply(target)
    from .fix import WRITTEN_KINDS, apply_best, run_fix
    from .fix.workspace import Workspace
    from .render import terminal
    opts = Options(backend=backend, grad=grad)
    # The project fix may edit, and where its rules look: --project, [tool.graphstitch], the target's root.
    mine = resolve_project(project)
    ws = Workspace.of(target, mine)
    if fix_everything:
        from .fix.fixall import apply_all, fix_all
        with progress_line(f"fix --all {target}") as progress:
            result, files = fix_all(target, opts, jobs=jobs or 2, timeout=timeout or None, project_root=ws.project,
                                    progress=progress)
        terminal.fix_all(result)
        if json_path:
            from .render import write_json
            write_json(result, json_path)
        if do_apply:
            msg, ok = apply_all(result, files, ws, opts, timeout=timeout or None)
            if not ok:
                fail(msg, EXIT_FAIL)
            click.echo(msg)
        elif show_diff:
            if not result.verified:
                fail("no verified combined patch: " + ("; ".join(result.why_not) or "no patch verified"), EXIT_FAIL)
            click.echo(result.patch, nl=False)
        return
    with progress_line(f"fix {target}") as progress:
        report = run_fix(target, opts, jobs=jobs, timeout=timeout or None, kinds=set(kinds) or WRITTEN_KINDS,
                         project_root=ws.project, progress=progress, causes=site_filter is None,
                         only=(lambda s: site_filter in f"{s.gb_id} {s.id.path}:{s.line}"
                               or site_filter in f"{gb_text(s.gb_id)} {s.id.path}:{s.line}") if site_filter else None)
    if report.error and report.error.kind is ErrorKind.TARGET:
        fail(report.error.message)
    with_owners(report, mine)
    more: tuple[Callable[[Any], None], ...] = (lambda r: terminal.fixes(r, verbose=verbose),)
    if measure:
        from .fix.measure import measure_fixes
        measure_fixes(report, target, opts, timeout=timeout or None)
        more += (terminal.measures,)
    # A target that fails only when compiled still gets its fixes tried (judged against eager):
    # a verified one is a patch after which the compiled run completes. --diff/--apply go on.
    writes = bool(show_diff or do_apply)
    compiled_only = report.error is not None and report.error.kind is ErrorKind.COMPILED
    _show(report, json_path, html_path=html_path, more=more, command="fix",
          exit_on_error=not (writes and compiled_only))
    if writes:
        msg, ok = apply_best(report, ws, opts, write=do_apply, timeout=timeout or None)
        if not ok:
            fail(msg if not report.error else f"{msg} ({target_failure(report)})",
                 EXIT_TARGET if report.error else EXIT_FAIL)
        click.echo(msg)


def _check_apply(spec: str) -> None:
    """--apply writes the target's file (and its backup beside it): refuse at once, not after
    every trial, when that cannot be done (a read-only file or folder)."""
    from .files import WriteRefused, check_folder, check_writable
    from .targets import target_file
    tfile = target_file(spec)
    if not tfile or not os.path.isfile(tfile):
        return
    try:
        check_writable(tfile)
        check_folder(os.path.dirname(tfile))
    except WriteRefused as e:
        fail(f"--apply: {e}")


# ----------------------------------------------------------------------------- trace / run

def _write_outputs(c: Census, json_path: str | None, html_path: str | None, *,
                   ranks: dict[Any, Census] | None = None, symmetry: Any = None) -> None:
    """--json / --html for one census, or for {rank or target: census} (JSON: a TraceReport,
    {"ranks": {...}, "symmetry": ...})."""
    from .render import write_json
    if json_path:
        if ranks and len(ranks) > 1:
            from .ranks import TraceReport
            write_json(TraceReport({str(r): x for r, x in ranks.items()}, symmetry), json_path)
        else:
            write_json(c, json_path)
    if html_path:
        from .render.html import write_html
        write_html(ranks if ranks and len(ranks) > 1 else c, html_path, symmetry=symmetry)


TRACE_EXIT_HELP = """\b
Exit codes:
  0  the trace was read (with or without graph breaks); several ranks: they are symmetric
  1  several ranks, and they diverge (as `graphstitch ranks` reports it)
  2  PATH missing, holds no TORCH_TRACE logs, no record could be read, or no Dynamo
     compile is in it (an export / AOTInductor-only log)
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
"""


@main.command(epilog=TRACE_EXIT_HELP)
@click.argument("path", type=click.Path())
@click.option("--rank", type=int, default=None, help="Multi-rank logs: show this rank in the terminal (default: the lowest).")
@click.option("--json", "json_path", type=OUTPUT, help="Also write the census as JSON; several ranks give {\"ranks\": {RANK: census}}.")
@click.option("--html", "html_path", type=OUTPUT, help="Also write a self-contained HTML report (a rank selector for several ranks).")
def trace(path: str, rank: int | None, json_path: str | None, html_path: str | None) -> None:
    """Census of a TORCH_TRACE log: a file, a directory of them, or a multi-rank directory.

    Reads what `TORCH_TRACE=DIR python train.py` (or torchrun) wrote, with the same parsers
    and analysis as a live census, without importing torch. Malformed, truncated or unknown
    lines are skipped and counted. Source lines come from the files named in the trace when
    they exist on this machine.
    """
    from .render import terminal
    from .traces import NO_DYNAMO_COMPILE, TraceError, censuses_from_path, source_context

    try:
        censuses = censuses_from_path(path)
    except TraceError as e:
        fail(str(e))
    if not any(c.trace_stats.records for c in censuses.values()):
        fail(f"no TORCH_TRACE records could be read from {path}")
    if all(c.error is not None and c.error.message == NO_DYNAMO_COMPILE for c in censuses.values()):
        fail(f"{path}: {NO_DYNAMO_COMPILE}")
    if rank is not None and rank not in censuses:
        fail(f"no logs for rank {rank} in {path} (ranks: {', '.join(str(r) for r in censuses)})")
    shown = censuses[rank if rank is not None else next(iter(censuses))]
    console = Console(highlight=False, emoji=False)
    if len(censuses) > 1:
        console.print(f"[bold]{len(censuses)} ranks[/] in {path}:")
        for r, c in censuses.items():
            console.print(f"  rank {r}: graphs {c.graph_count} · break sites {len(c.sites)} · "
                          f"break events {c.break_events} · recompile causes {len(c.recompiles)}")
        console.print(f"[dim]showing rank {next(r for r, c in censuses.items() if c is shown)} "
                      f"(--rank N for another)[/]\n")
    terminal.census(shown, console, command="trace", fullgraph_flag=False)
    missing = sorted({s.file for s in shown.sites if source_context(s.file, s.line, 0) is None})
    if missing:
        console.print(f"[dim]source not available on this machine for: {', '.join(missing)} "
                      f"(lines shown are from the trace)[/]")
    symmetry = None
    if len(censuses) > 1 and all(isinstance(r, int) for r in censuses):
        from .ranks import compare_ranks
        symmetry = compare_ranks({int(r): c for r, c in censuses.items() if r is not None})
        terminal.ranks(symmetry, console)
    _write_outputs(shown, json_path, html_path, ranks=dict(censuses), symmetry=symmetry)
    st = [c.trace_stats for c in censuses.values()]
    bad = sum(s.malformed for s in st)
    console.print(f"[dim]read {sum(s.files or 0 for s in st)} file(s), {sum(s.records for s in st)} records[/]"
                  + (f" · [yellow]{bad} malformed line(s) skipped[/]" if bad else ""))
    for s in st:
        for u in s.unreadable:
            err_console.print(f"[yellow]graphstitch: unreadable log skipped:[/] {u}")
    if symmetry is not None and not symmetry.symmetric:
        sys.exit(EXIT_FAIL)


RUN_EXIT_HELP = """\b
Exit codes:
  the script's own exit code (0 when it ends normally, 1 after an uncaught exception,
  128+N when it is killed by signal N); 2 when SCRIPT does not exist.
  The census is printed (and written) in every case, also after a crash.
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
"""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
              epilog=RUN_EXIT_HELP)
@click.option("--json", "json_path", type=OUTPUT, help="Also write the census as JSON.")
@click.option("--html", "html_path", type=OUTPUT, help="Also write a self-contained HTML report.")
@project_option
@click.argument("script", type=click.Path())
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(json_path: str | None, html_path: str | None, project: str | None, script: str, args: tuple[str, ...]) -> None:
    """Run an unmodified SCRIPT as __main__ with ARGS and report what torch.compile did.

    The script compiles with its own torch.compile calls and backend; graphstitch only
    listens (graphs are counted from Dynamo's output-graph records). It runs in a child
    process, its stdout/stderr pass through, and the census is printed when it ends,
    also when it raised or crashed. graphstitch's own options go before SCRIPT.
    """
    from . import worker
    from .paths import project_root
    from .render import terminal

    if not os.path.isfile(script):
        fail(f"script not found: {script}")
    # The script keeps the terminal's process group (Ctrl-C reaches it as usual) and what it
    # leaves running stays running, as with `python script.py`.
    out = worker.run(worker.Job(handler="graphstitch.worker:script_job", script=script, argv=list(args),
                                project_root=project_root(script), capture=False),
                     own_session=False, ok_codes=None, what="script", reap=False)
    c, rc = with_owners(out.census, resolve_project(project, os.path.dirname(os.path.abspath(script)))), out.exit_code
    sys.stdout.flush()
    sys.stderr.flush()
    console = Console(highlight=False, emoji=False)
    console.print()
    import shlex

    from .advice import advise
    advise(c, rerun=" ".join(shlex.quote(a) for a in ("graphstitch", "run", script, *args)))
    terminal.census(c, console, command="run", fullgraph_flag=False)
    if not c.frames:
        console.print("[dim]Nothing was compiled in the script's own process. Compiles in processes it "
                      "starts (mp.spawn, torchrun) are not seen here: run it with TORCH_TRACE=DIR and "
                      "then `graphstitch trace DIR`.[/]")
    _write_outputs(c, json_path, html_path)
    sys.exit(128 - rc if rc < 0 else rc)


# ----------------------------------------------------------------------------- sweep

SWEEP_HELP = """\b
SOURCE is any of:
  transformers | diffusers | torch_geometric   every model of a registry, built small from configs
  transformers/BertModel[@train]               one zoo model
  PATH.py:FACTORY | package.module:FACTORY     one TARGET
  PATH.py | package.module                     every factory in it (public functions without
                                               required arguments, or its __all__)
  DIR                                          every .py file in it (not _* or test_*)
  LIST.toml                                    targets = ["...", ...] and/or [[target]] source=, modes=
With --merge, the SOURCEs are JSONL files of earlier sweeps (shards) to join and report.

\b
Each target is one census in its own worker process (crash/hang isolation, --timeout, one
retry for a crash or timeout), with torch.compile's fullgraph=False semantics (a break splits
the graph and is counted). Mode eval runs under no_grad; train puts zoo models in train()
with labels and runs with autograd enabled.

\b
Exit codes:
  0  the sweep ran (whatever the targets' statuses)
  1  --gate: a regression against --compare (or an improvement, with --fail-on-improvement)
  2  usage error: unknown source, bad --shard, --out exists without --resume, unreadable file
  129/130/143  stopped by SIGHUP / SIGINT (Ctrl-C) / SIGTERM: every worker killed, temp files removed
"""


@main.command(epilog=SWEEP_HELP)
@click.argument("sources", nargs=-1, required=True)
@click.option("--only", multiple=True, metavar="GLOB", help="Keep only targets whose id or name matches (repeatable).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Drop targets whose id or name matches (repeatable).")
@click.option("--mode", "modes", default="eval", show_default=True, metavar="eval,train", help="Modes to run each model in.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Workers in parallel (local pool).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="Per-target limit in seconds, from the worker's start-up (then killed; retried once).")
@click.option("--retries", type=click.IntRange(min=0), default=1, show_default=True, help="Extra tries for a crash or timeout.")
@click.option("--min-free-mb", type=click.FloatRange(min=0), default=2048, show_default=True,
              help="Memory guard: start no new worker while available memory is below this (one always runs).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Stream one JSON row per target to this JSONL file as each finishes.")
@click.option("--resume", is_flag=True, help="Continue the sweep in --out: skip targets it already has.")
@click.option("--logs", "log_dir", type=click.Path(file_okay=False), default=None, help="Keep each worker's output in DIR/<target>.log.")
@click.option("--ray", "ray_address", metavar="auto|ADDRESS|local", default=None,
              help="Run the targets as Ray tasks on a cluster (ray.init(address)); 'local' starts one here with -j CPUs.")
@click.option("--num-cpus", type=click.FloatRange(min=0), default=1, show_default=True, help="Ray: CPUs per task.")
@click.option("--num-gpus", type=click.FloatRange(min=0), default=0, show_default=True, help="Ray: GPUs per task (1 = one task per GPU).")
@click.option("--shard", default=None, metavar="K/N", help="Run only shard K of N (a stable hash of each target id).")
@click.option("--merge", is_flag=True, help="SOURCES are JSONL files of earlier sweeps: join them (--out writes the union) and report.")
@click.option("--compare", "compare_path", type=click.Path(dir_okay=False), default=None,
              help="Compare with the rows of an earlier sweep (JSONL): regressions and improvements per model and root cause.")
@click.option("--gate", is_flag=True, help="With --compare: exit 1 on any regression.")
@click.option("--fail-on-improvement", is_flag=True, help="With --gate: also exit 1 on improvements not yet recorded.")
@click.option("--json", "json_path", type=OUTPUT, help="Write the report as JSON (schema graphstitch.sweep/1).")
@click.option("--markdown", "markdown_path", type=OUTPUT, help="Write the report as Markdown.")
@click.option("--html", "html_path", type=OUTPUT, help="Write a self-contained HTML report with sortable tables.")
@click.option("--quiet", is_flag=True, help="No progress bar and no per-target table in the terminal.")
@click.option("--fix", "fix_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Then `fix --all` every breaking eval-mode model with --project as the project (e.g. a library "
                   "checkout on PYTHONPATH): DIR/<model>.diff per verified combined patch, DIR/root-cause-N.diff per "
                   "file patched the same way for several models, DIR/fixes.json. Nothing in the project is written.")
@project_option
@compile_options
def sweep(sources: tuple[str, ...], only: tuple[str, ...], exclude: tuple[str, ...], modes: str, jobs: int,
          timeout: float, retries: int, min_free_mb: float, out_path: str | None, resume: bool, log_dir: str | None,
          ray_address: str | None, num_cpus: float, num_gpus: float, shard: str | None, merge: bool,
          compare_path: str | None, gate: bool, fail_on_improvement: bool, json_path: str | None,
          markdown_path: str | None, html_path: str | None, quiet: bool, fix_dir: str | None, project: str | None,
          **compile_opts: Any) -> None:
    """Census every model of a zoo (a registry, your factories, a TOML list), locally or on Ray;
    with --fix, verified patches for the breaking models and their shared root causes."""
    from . import sweep as sw
    from .render import sweep as render_sweep
    from .render import write_json

    if gate and not compare_path:
        fail("--gate needs --compare OLD.jsonl")
    if fix_dir:   # refused now, not after the sweep
        try:
            os.makedirs(fix_dir, exist_ok=True)
        except OSError as e:
            fail(f"--fix {fix_dir}: cannot make the folder: {e.strerror or e}")
        if not os.access(fix_dir, os.W_OK):
            fail(f"--fix {fix_dir}: the folder is not writable")
    if resume and not out_path:
        fail("--resume needs --out FILE (the sweep to continue)")

    def load(path: str) -> list[sw.Row]:
        try:
            rows, bad = sw.read_rows(path)
        except OSError as e:
            fail(f"cannot read {path}: {e.strerror or e}")
        if bad:
            err_console.print(f"[yellow]graphstitch: {bad} unreadable line(s) skipped in {path}[/]")
        return rows

    old = load(compare_path) if compare_path else None
    wall: float | None = None
    if merge:
        rows = sw.merge(load(p) for p in sources)
        if out_path:
            from .files import atomic_write
            from .sweep.rows import row_line
            if os.path.exists(out_path) and os.path.realpath(out_path) not in {os.path.realpath(p) for p in sources}:
                fail(f"{out_path} exists: choose another --out for the merged rows")
            atomic_write(out_path, "".join(row_line(r) for r in rows))
    else:
        try:
            targets = sw.resolve(sources, only=only, exclude=exclude,
                                 modes=[m.strip() for m in modes.split(",") if m.strip()],
                                 shard=sw.parse_shard(shard) if shard else None)
        except (sw.SourceError, ValueError) as e:
            fail(str(e))
        if not targets:
            fail("no targets: the sources and filters select nothing")
        if ray_address:
            try:
                import ray  # noqa: F401
            except ImportError:
                fail("--ray needs Ray: pip install 'graphstitch[ray]'")
        cfg = sw.RunConfig(make_options(**compile_opts), timeout=timeout, retries=retries, log_dir=log_dir)
        try:
            rows, wall = sw.execute(targets, cfg, jobs=jobs, ray=ray_address, num_cpus=num_cpus, num_gpus=num_gpus,
                                    out=out_path, resume=resume, min_free_mb=min_free_mb, progress=not quiet)
        except FileExistsError as e:
            fail(str(e))
    cmp = sw.compare(old, rows, old_name=compare_path) if old is not None and compare_path else None
    report = sw.build_report(rows, wall_seconds=wall, compare=cmp)
    render_sweep.terminal(report, Console(highlight=False, emoji=False), all_rows=not quiet)
    if json_path:
        write_json(report, json_path)
    if markdown_path:
        render_sweep.write_markdown(report, markdown_path)
    if html_path:
        render_sweep.write_html(report, html_path)
    if fix_dir:
        _sweep_fix(rows, fix_dir, resolve_project(project), timeout, max(2, jobs), compile_opts)
    if gate and cmp is not None and sw.gate_failed(cmp, fail_on_improvement=fail_on_improvement):
        sys.exit(EXIT_FAIL)


def _sweep_fix(rows: Any, folder: str, project: str | None, timeout: float, jobs: int,
               compile_opts: dict[str, Any]) -> None:
    from .fix.sweep import ModelFix, breaking, fix_rows
    from .render import write_json

    console = Console(highlight=False, emoji=False)
    todo = breaking(rows)
    if not todo:
        console.print("sweep --fix: no breaking eval-mode model to fix.")
        return

    def said(i: int, n: int, m: ModelFix) -> None:
        what = (f"error: {m.error}" if m.error else
                f"{m.fixed}/{m.sites} site(s) by a verified patch ({', '.join(f'{k} {v}' for k, v in m.strategies.items())})"
                f" -> {m.patch_file}" if m.patch_file else f"no verified combined patch ({m.sites} site(s))")
        err_console.print(f"[{i}/{n}] {m.target}: {what}")

    res = fix_rows(rows, folder, project=project, timeout=timeout, jobs=jobs, opts=make_options(**compile_opts),
                   on_model=said)
    for rc in res.root_causes:
        console.print(f"root cause patched the same way in {len(rc.models)} models: {', '.join(rc.sites) or rc.file}"
                      f" -> {rc.patch_file}")
    write_json(res, os.path.join(folder, "fixes.json"))
    fixed = sum(m.fixed for m in res.models)
    console.print(f"sweep --fix: {fixed} of {sum(m.sites for m in res.models)} site(s) in {len(res.models)} model(s) "
                  f"have a verified patch; {len(res.root_causes)} shared root-cause patch(es); {folder}/fixes.json")
