"""`graphstitch fix`: try fixes for every break, verify each by running it, rank the
verified ones, and make the best permanent (`--diff`, `--apply`).

- ``rules``: source rewrites, one family per module;
- ``workspace``: the user's project with some files patched (every trial runs there);
- ``candidates``: what can be tried for a site (config flags, run-time escape hatches);
- ``hatches``: the child side, wrapping the user's function before compiling;
- ``trials``: every candidate as its own census, judged with ``changes.diff``;
- ``causes``: recompile causes' candidates, trials and explanations;
- ``patches``: the source patch, re-verified on a patched copy, written atomically;
- ``measure``: what each verified fix buys (`--measure`).
"""

from typing import Any

from . import trials
from .patches import apply_best, best
from .trials import WRITTEN_KINDS, Counts, Fix, FixReport, Measure


def run_fix(spec: str, opts: Any, *, causes: bool = True, **kw: Any) -> FixReport:
    """``trials.run_fix`` for the break sites and, with CAUSES, the recompile causes too
    (``causes.cause_trials``: it builds on trials, so trials cannot call it itself)."""
    from .causes import cause_trials
    return trials.run_fix(spec, opts, causes=cause_trials if causes else None, **kw)

__all__ = ["WRITTEN_KINDS", "Counts", "Fix", "FixReport", "Measure", "apply_best", "best", "run_fix"]
