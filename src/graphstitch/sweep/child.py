"""The child side of a sweep target: a worker job handler (``graphstitch.sweep.child:job``).

It makes the calls (a zoo model built small by its registry, or a user TARGET's factory),
then runs the same census as every other command (``worker.census_of_calls``). What it
returns in ``result.json``: the create error's one-line reason, and the worker's peak RSS.
"""

from __future__ import annotations

import resource
import sys
from typing import Any

from ..model import ErrorInfo, ErrorKind
from ..worker import Context, Job, census_of_calls, note

HANDLER = "graphstitch.sweep.child:job"


def _peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kb / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def job(job: Job, ctx: Context) -> tuple[int, Any]:
    calls: list[Any] | ErrorInfo
    zoo_id = job.params.get("zoo")
    mode = job.params.get("mode", "eval")
    target = zoo_id or job.spec
    try:
        if zoo_id:
            from .. import zoo
            registry, _, name = str(zoo_id).partition("/")
            calls = zoo.build(registry, name, mode)
        else:
            from ..live import load_calls
            assert job.spec is not None
            calls = load_calls(job.spec)  # an exit in the factory: an incomplete census (kind exit)
    except Exception as e:  # noqa: BLE001 - a model that cannot be built is a row, not a crash
        from ..targets import TargetError
        # zoo.CreateError and TargetError already say what failed; anything else: its type too.
        reason = str(e) if isinstance(e, TargetError) or hasattr(e, "reason") else f"{type(e).__name__}: {e}"
        reason = " ".join(str(reason).split())[:300]
        note(ctx.sink, target=target, error=ErrorInfo(ErrorKind.TARGET, str(e)[:2000], type(e).__name__))
        return 2, {"create_error": reason, "peak_rss_mb": _peak_rss_mb()}
    code, _ = census_of_calls(job, ctx, calls, target)
    return code, {"peak_rss_mb": _peak_rss_mb()}
