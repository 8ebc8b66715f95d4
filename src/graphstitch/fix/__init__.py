"""`graphstitch fix`: try fixes for every break, verify each by running it, rank the
verified ones, and make the best permanent (`--diff`, `--apply`).

- ``rules``: source rewrites, one family per module;
- ``workspace``: the user's project with some files patched (every trial runs there);
- ``candidates``: what can be tried for a site (config flags, run-time escape hatches);
- ``hatches``: the child side, wrapping the user's function before compiling;
- ``trials``: every candidate as its own census, judged with ``changes.diff``;
- ``patches``: the source patch, re-verified on a patched copy, written atomically;
- ``measure``: what each verified fix buys (`--measure`).
"""

from .patches import apply_best, best
from .trials import WRITTEN_KINDS, Counts, Fix, FixReport, Measure, run_fix

__all__ = ["WRITTEN_KINDS", "Counts", "Fix", "FixReport", "Measure", "apply_best", "best", "run_fix"]
