"""``sweep --fix DIR``: a verified combined patch per breaking model, and one patch per root
cause that several models share (a library line that breaks 40 models is one patch).

Each breaking eval-mode row gets ``fix --all`` (:func:`.fixall.fix_all`) with the
sweep's project (``--project``: a library checkout on ``PYTHONPATH``). Nothing is written into
the project: DIR gets ``<model>.diff`` for each verified combined patch, ``root-cause-<n>.diff``
for each file whose verified patched text is the same in several models, and ``fixes.json``.
A zoo model is fixed through a factory file in DIR that builds it as the sweep built it.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ..files import atomic_write
from ..sweep.rows import Row, Status

if TYPE_CHECKING:
    from ..targets import Options


@dataclass
class ModelFix:
    """One model's `fix --all`."""
    target: str                      # the row id ("transformers/LlavaModel@eval")
    sites: int                       # break sites before
    fixed: int                       # sites removed by the verified combined patch
    verified: bool                   # the combined patch, re-checked from pristine files
    strategies: dict[str, int] = field(default_factory=dict)
    patch_file: str | None = None    # DIR/<model>.diff when verified
    remaining: list[str] = field(default_factory=list)   # sites left, with why
    error: str | None = None         # fix could not run (one line)


@dataclass
class RootCausePatch:
    """One file patched the same way for several models: one patch to send upstream."""
    file: str                        # the file, as the combined diffs name it
    sites: list[str]                 # the sites its patch removed ("GBxxxx path:line")
    models: list[str]
    patch_file: str


@dataclass
class SweepFixes:
    __computed__: ClassVar[tuple[str, ...]] = ("schema",)
    project: str | None
    models: list[ModelFix] = field(default_factory=list)
    root_causes: list[RootCausePatch] = field(default_factory=list)

    @property
    def schema(self) -> str:
        return "graphstitch.sweep_fixes/1"


def breaking(rows: Sequence[Row]) -> list[Row]:
    """The rows `--fix` works on: ran, eval mode, with a break site or a skipped frame."""
    return [r for r in rows if r.status is Status.OK and r.mode == "eval" and r.census is not None
            and (r.census.sites or r.census.skipped_frames)]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"


def factory_spec(row: Row, folder: str) -> str:
    """The TARGET `fix` runs for ROW: a user target as given; a zoo model through a factory
    function appended to FOLDER/_sweep_factories.py that builds it as the sweep did."""
    if row.source == "user":
        return row.target
    path = os.path.join(folder, "_sweep_factories.py")
    fn = "m_" + _safe(row.name).replace(".", "_").replace("-", "_")
    head = "" if os.path.exists(path) else "from graphstitch import zoo\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{head}\n\ndef {fn}():\n    return zoo.build({row.source!r}, {row.name!r}, 'eval')\n")
    return f"{path}:{fn}"


def fix_rows(rows: Sequence[Row], folder: str, *, project: str | None, timeout: float | None, jobs: int,
             opts: Options, on_model: Callable[[int, int, ModelFix], None] | None = None) -> SweepFixes:
    """`fix --all` on every breaking row; per-model and per-root-cause patches into FOLDER."""
    from ..files import source_text
    from .fixall import fix_all
    from .workspace import unified_diff
    os.makedirs(folder, exist_ok=True)
    out = SweepFixes(project=project)
    models: dict[tuple[str, str], list[str]] = defaultdict(list)   # (file, patched text) -> models
    fixed_at: dict[tuple[str, str], set[str]] = defaultdict(set)   # (file, patched text) -> sites it removed
    todo = breaking(rows)
    for i, row in enumerate(todo, 1):
        mf = ModelFix(target=row.id, sites=row.break_sites or 0, fixed=0, verified=False)
        try:
            res, files = fix_all(factory_spec(row, folder), opts, jobs=jobs, timeout=timeout, project_root=project)
        except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end of the sweep
            mf.error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        else:
            mf.verified, mf.remaining = res.verified, res.remaining
            if res.verified and res.patch:
                mf.fixed = res.start.sites - res.final.sites
                mf.strategies = dict(Counter(s.strategy for s in res.steps))
                mf.patch_file = os.path.join(folder, _safe(row.id) + ".diff")
                atomic_write(mf.patch_file, res.patch)
                for path, new in files.items():
                    models[path, new].append(row.id)
                    # a step's label names its file by identity path: absolute, or relative to the factory's root
                    fixed_at[path, new] |= {s.label for s in res.steps if os.path.realpath(path).endswith(
                        s.label.split(" ", 1)[1].rsplit(":", 1)[0])}
        out.models.append(mf)
        if on_model:
            on_model(i, len(todo), mf)
    shared = [(key, ms) for key, ms in sorted(models.items()) if len(ms) > 1]
    for n, ((path, new), ms) in enumerate(shared, 1):
        pf = os.path.join(folder, f"root-cause-{n}.diff")
        atomic_write(pf, unified_diff(path, source_text(path), new, root=project))
        out.root_causes.append(RootCausePatch(file=path, sites=sorted(fixed_at[path, new]), models=sorted(ms),
                                              patch_file=pf))
    return out
