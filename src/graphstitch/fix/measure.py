"""`fix --measure`: what each verified fix buys, before and after timed alternately.

The two compiled variants run in two worker processes (a run-time wrapper cannot coexist
with the unwrapped code in one), each timing its own passes so the pipe is not counted.
"""

from __future__ import annotations

import dataclasses
import functools

from .. import worker
from ..perf.timing import alternate
from ..targets import Options
from .trials import FixReport, Measure


def _one_pass(session: worker.Session) -> float:
    return float(session.ask("pass"))


def measure_fixes(report: FixReport, spec: str, opts: Options, *, repeats: int = 20, warmup: int = 3,
                  max_seconds: float = 20.0, timeout: float | None = None) -> None:
    """Fill ``fix.measure`` for each verified fix: steady-state latency before and after
    with the user's backend, the two variants timed alternately in one run."""
    for f in report.fixes:
        if not f.verified:
            continue
        sides: list[worker.Session] = []
        try:
            for patches in (None, f.patches):
                o = dataclasses.replace(opts, patches=patches, fresh=False)
                setup = "graphstitch.fix.hatches:install" if patches and patches.wrap else None
                s = worker.Session(worker.Job(handler="graphstitch.perf.timing:timed_job", spec=spec,
                                              options=o, setup=setup), timeout=timeout)
                sides.append(s)
                answer = s.ask("ready")
                if answer != "ok":
                    raise RuntimeError(answer.removeprefix("error ").strip())
            (b, a), stable, _ = alternate([functools.partial(_one_pass, s) for s in sides], repeats=repeats,
                                          warmup=warmup, max_seconds=max_seconds, self_timed=True)
            f.measure = Measure(opts.backend, b, a, b.median_s / a.median_s if a.median_s > 0 else None, stable)
        except RuntimeError as e:
            f.measure = Measure(opts.backend, error=str(e))
        finally:
            for s in sides:
                s.close()
