"""`graphstitch ranks`: do all ranks of a distributed job compile symmetrically?

- ``compare``: the ranks' censuses compared (``changes.diff`` against the lowest rank), the
  first divergence named, rank-dependent code and graph-breaking collectives flagged;
- ``launch``: N ranks under torch.distributed.run, each a worker job under capture.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..model import Census
from ..traces import census_from_files, file_rank
from .compare import Divergence, Flag, RankComparison, RankFailure, RankSummary, compare_ranks
from .launch import RunInfo, run_ranks

__all__ = ["Divergence", "Flag", "RankComparison", "RankFailure", "RankSummary", "RanksReport", "RunInfo", "TraceReport",
           "censuses_from_rank_files", "compare_ranks", "run_ranks"]


@dataclass
class RanksReport(RankComparison):
    """`graphstitch ranks --json`: the comparison, how the run went, and each rank's census."""
    run: RunInfo | None = None
    censuses: dict[int, Census] | None = None

    __computed__ = ("schema",)

    @property
    def schema(self) -> str:
        return "graphstitch.ranks/2"


@dataclass
class TraceReport:
    """`graphstitch trace --json` over several ranks (or `check` over several targets):
    each census by rank, and the ranks' comparison."""
    ranks: dict[str, Census]
    symmetry: RankComparison | None = None

    __computed__ = ("schema",)

    @property
    def schema(self) -> str:
        return "graphstitch.trace/2"


def censuses_from_rank_files(paths_by_rank: dict[int, str] | Iterable[str], target: str | None = None,
                             project_root: str | None = None) -> dict[int, Census]:
    """Offline: decode per-rank TORCH_TRACE files (from a cluster, or `--trace-dir`): one
    census per file. Given a list, each file's rank comes from ``rank_N`` in its name (else
    its records' ``rank``, else its position); two files of one rank are a ValueError."""
    if not isinstance(paths_by_rank, dict):
        listed = list(paths_by_rank)
        named = [file_rank(Path(p)) for p in listed]
        ranks = named if None not in named and len(set(named)) == len(named) else list(range(len(listed)))
        if None not in named and len(set(named)) != len(named):
            raise ValueError("several files name the same rank: " + ", ".join(map(str, listed)))
        paths_by_rank = {int(r): p for r, p in zip(ranks, listed, strict=True)}  # type: ignore[arg-type]
    return {r: census_from_files([Path(p)] if os.path.exists(p) else [], target=target, project_root=project_root)
            for r, p in sorted(paths_by_rank.items())}
