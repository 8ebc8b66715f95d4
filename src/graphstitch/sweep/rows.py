"""The typed results of a sweep: a :class:`Target`, one :class:`Row` per target (one JSONL
line), and the aggregated :class:`SweepReport` every renderer reads. No torch import.

A row keeps a slim copy of its target's census (sites with their identity and a short
stack, skipped frames, recompile causes, graphs without op lists; no guard text, no
advice), so two sweeps can be compared with ``changes.diff`` long after they ran; its
totals are properties read from that census, never counted twice.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..jsonio import JSONError, from_json, to_json
from ..model import Census, Coverage, ErrorKind, SiteId

ROW_SCHEMA = "graphstitch.sweep_row/1"
REPORT_SCHEMA = "graphstitch.sweep/1"
# What a row's census means: graphstitch's census compiles with fullgraph=False (a break
# splits the graph and is counted), not fullgraph=True (the first break is an error).
SEMANTICS = "fullgraph=False"


class Status(str, enum.Enum):
    OK = "ok"                        # the census ran (with or without breaks)
    CREATE_ERROR = "create_error"    # the model/factory could not be built (reason says why)
    EAGER_ERROR = "eager_error"      # its calls fail eagerly too
    COMPILE_ERROR = "compile_error"  # a call fails only when compiled
    TIMEOUT = "timeout"              # still running at --timeout (after the retry)
    CRASH = "crash"                  # the worker died (signal, early exit), after the retry


# How a worker's error kind reads as a row status.
STATUS_OF = {ErrorKind.TARGET: Status.CREATE_ERROR, ErrorKind.EAGER: Status.EAGER_ERROR,
             ErrorKind.COMPILED: Status.COMPILE_ERROR, ErrorKind.TIMEOUT: Status.TIMEOUT}
RETRIED = (Status.CRASH, Status.TIMEOUT)   # flaky failures get one more try


@dataclass(frozen=True)
class Target:
    """One thing to census: a zoo model in one mode, or a user TARGET in one mode."""
    id: str                      # unique and stable: "transformers/BertModel@eval", "models.py:clean@eval"
    source: str                  # the registry name, or "user"
    name: str                    # "BertModel", "clean"
    mode: str                    # eval (no_grad) | train (train(), grad)
    spec: str | None = None      # a user TARGET (PATH.py:FACTORY or package.module:FACTORY)
    zoo: str | None = None       # a zoo model: "registry/name"
    project_root: str | None = None


@dataclass
class Row:
    id: str
    source: str
    name: str
    mode: str
    target: str                  # the TARGET spec, or the zoo model
    status: Status
    reason: str | None = None    # one line, when status is not ok
    census: Census | None = None  # slim (see the module doc); None when no worker result
    wall_seconds: float = 0.0    # the worker's whole life, attempts included
    attempts: int = 1
    peak_rss_mb: float | None = None  # the worker's peak resident memory
    host: str | None = None      # where it ran (hostname; Ray node)
    semantics: str = SEMANTICS

    __computed__: ClassVar[tuple[str, ...]] = (
        "schema", "graphs", "break_sites", "break_events", "skipped_frames", "recompiles",
        "outputs_match_eager", "full_graph")

    @property
    def schema(self) -> str:
        return ROW_SCHEMA

    @property
    def graphs(self) -> int | None:
        return self.census.graph_count if self.census else None

    @property
    def break_sites(self) -> int | None:
        return self.census.break_site_count if self.census else None

    @property
    def break_events(self) -> int | None:
        return self.census.break_events if self.census else None

    @property
    def skipped_frames(self) -> int | None:
        return len(self.census.skipped_frames) if self.census else None

    @property
    def recompiles(self) -> int | None:
        return self.census.recompile_count if self.census else None

    @property
    def outputs_match_eager(self) -> bool | None:
        return self.census.outputs_match_eager if self.census else None

    @property
    def full_graph(self) -> bool:
        """Ran, and the census is known clean: no break, no skipped frame, run completed."""
        return self.status is Status.OK and self.census is not None and self.census.clean


def slim(c: Census) -> Census:
    """What a row keeps of a census (see the module doc)."""
    sites = [replace(s, explanation="", hints=[], advice=[], stack=s.stack[-3:]) for s in c.sites]
    graphs = [replace(g, ops=[]) for g in c.graphs]
    recompiles = [replace(r, advice=[], examples=r.examples[:1]) for r in c.recompiles]
    # Untraced code stays (it decides `clean`); the per-function spans do not.
    return replace(c, sites=sites, graphs=graphs, recompiles=recompiles, guards={},
                   coverage=Coverage(untraced=list(c.coverage.untraced)))


# ----------------------------------------------------------------------------- JSONL

def row_line(row: Row) -> str:
    return json.dumps(to_json(row), sort_keys=False) + "\n"


def read_rows(path: str) -> tuple[list[Row], int]:
    """The rows of a JSONL file and how many lines were unreadable (a sweep killed while
    writing leaves a truncated last line). A later row for the same id wins."""
    rows: dict[str, Row] = {}
    bad = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                row = from_json(Row, data)
            except (ValueError, JSONError):
                bad += 1
                continue
            rows[row.id] = row
    return list(rows.values()), bad


def merge(groups: Iterable[Iterable[Row]]) -> list[Row]:
    """Rows of several files (shards) as one list, sorted by id; a later file wins a tie."""
    out: dict[str, Row] = {}
    for rows in groups:
        for r in rows:
            out[r.id] = r
    return [out[k] for k in sorted(out)]


# ----------------------------------------------------------------------------- report

@dataclass
class RootCause:
    """One break site (by identity) across the zoo, and the models it breaks."""
    id: SiteId
    gb_type: str
    where: str                   # library | project | other: where the attributed line lives
    file: str
    line: int
    models: list[str]            # row ids
    events: int                  # its break events summed over those models
    frame_skipped: bool

    __computed__: ClassVar[tuple[str, ...]] = ("model_count",)

    @property
    def model_count(self) -> int:
        return len(self.models)


@dataclass
class ModelChange:
    """One model that got worse or better between two sweeps."""
    id: str
    before: Status | None        # None: not in the old sweep
    after: Status | None
    details: list[str] = field(default_factory=list)  # one line per change, from changes.diff


@dataclass
class CauseShift:
    """A root cause that breaks more (or fewer) models than before."""
    id: SiteId
    gb_type: str
    before: int
    after: int
    models_added: list[str] = field(default_factory=list)
    models_removed: list[str] = field(default_factory=list)


@dataclass
class SweepComparison:
    old: str                     # the old rows' file
    matched_on_gb: bool          # False when the torch versions differ: sites matched without GB ids
    regressions: list[ModelChange] = field(default_factory=list)
    improvements: list[ModelChange] = field(default_factory=list)
    changed: list[ModelChange] = field(default_factory=list)     # failed before and after, differently
    causes_worse: list[CauseShift] = field(default_factory=list)
    causes_better: list[CauseShift] = field(default_factory=list)
    only_old: list[str] = field(default_factory=list)            # ids not in the new sweep
    only_new: list[str] = field(default_factory=list)


@dataclass
class SweepReport:
    rows: list[Row]
    root_causes: list[RootCause]           # ranked: most models first
    status_counts: dict[str, int]
    torch_versions: list[str]
    semantics: str = SEMANTICS
    wall_seconds: float | None = None      # the sweep's own wall time (None for merged files)
    compare: SweepComparison | None = None

    __computed__: ClassVar[tuple[str, ...]] = ("schema", "total", "ran", "full_graph", "full_graph_share")

    @property
    def schema(self) -> str:
        return REPORT_SCHEMA

    @property
    def total(self) -> int:
        return len(self.rows)

    @property
    def ran(self) -> int:
        return sum(1 for r in self.rows if r.status is Status.OK)

    @property
    def full_graph(self) -> int:
        return sum(1 for r in self.rows if r.full_graph)

    @property
    def full_graph_share(self) -> float | None:
        """Full-graph models among those that ran."""
        return round(self.full_graph / self.ran, 4) if self.ran else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = to_json(self)
        return out


def iter_failed(rows: Iterable[Row]) -> Iterator[Row]:
    return (r for r in rows if r.status is not Status.OK)
