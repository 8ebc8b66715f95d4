"""The CI gate: compare a census to a checked-in baseline and to budgets.

A baseline keeps, per target (named by ``targets.target_key``, so the spelling of the path
does not matter), what the gate compares: each site's identity (``SiteId``: no line number,
so an edit above a site does not move it), skipped frames, recompile causes and the totals.
The comparison is ``changes.diff`` of the baseline's census and the new one; this module only
words its result. No torch import.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from . import __version__
from .changes import CensusDiff, diff
from .jsonio import JSONError, from_json, to_json
from .model import (
    CauseId,
    Census,
    Coverage,
    FrameId,
    Graph,
    LimitHit,
    RecompileCause,
    Site,
    SiteId,
    SkippedFrame,
    Untraced,
    gb_text,
    normalize_code,
)
from .paths import identity_path, short_path

BASELINE_FORMAT = 3   # 3: untraced code (coverage) is kept, so a change there is seen
BUDGET_KEYS = ("max_breaks", "max_graphs", "max_recompiles")


class BaselineError(Exception):
    """The baseline file is missing, unreadable or not a graphstitch baseline (exit 2)."""


# ----------------------------------------------------------------------------- baseline file

@dataclass
class BaselineSite:
    id: SiteId
    line: int                 # where it was (shown in messages; not matched on)
    events: int
    gb_type: str = ""


@dataclass
class BaselineFrame:
    id: FrameId
    line: int
    fail_type: str


@dataclass
class BaselineUntraced:
    """Code that ran untraced when the baseline was made, and a hash of its text: the gate
    cannot see a break there, but it can see that the code changed."""
    path: str
    function: str
    start: int                # shown in messages; matching is on path + function + why
    end: int | None
    why: str
    fingerprint: str


@dataclass
class BaselineCause:
    reason: str
    count: int
    id: CauseId | None = None     # absent in baselines of graphstitch before recompile identities


@dataclass
class BaselineLimit:
    """A frame at the recompile limit: the gate fails when a new one appears."""
    path: str
    function: str
    limit: str


@dataclass
class BaselineEntry:
    graph_count: int
    recompile_count: int
    sites: list[BaselineSite] = field(default_factory=list)
    skipped_frames: list[BaselineFrame] = field(default_factory=list)
    recompiles: list[BaselineCause] = field(default_factory=list)
    untraced: list[BaselineUntraced] = field(default_factory=list)
    limit_hits: list[BaselineLimit] = field(default_factory=list)

    @classmethod
    def of(cls, c: Census) -> BaselineEntry:
        """The part of a census a baseline keeps (stable, sorted, human-diffable)."""
        return cls(
            graph_count=c.graph_count, recompile_count=c.recompile_count,
            sites=sorted((BaselineSite(s.id, s.line, s.events, s.gb_type) for s in c.sites),
                         key=lambda e: (e.id.path, e.line, e.id.gb_id)),
            skipped_frames=sorted((BaselineFrame(f.id, f.line, f.fail_type) for f in c.skipped_frames),
                                  key=lambda e: (e.id.path, e.line)),
            recompiles=sorted((BaselineCause(r.reason, r.count, r.id) for r in c.recompiles), key=lambda e: e.reason),
            untraced=[BaselineUntraced(u.path, u.function, u.start, u.end, u.why, u.fingerprint)
                      for u in c.coverage.untraced],
            limit_hits=sorted((BaselineLimit(identity_path(h.file, c.project_root), h.function, h.limit)
                               for h in c.limit_hits), key=lambda e: (e.path, e.function)))

    def census(self, target: str) -> Census:
        """The baseline as a Census, for ``diff``: only what the gate compares is there."""
        return Census(
            target=target,
            graphs=[Graph("?", "?", 0, "?", None) for _ in range(self.graph_count)],
            sites=[Site(e.id, e.id.gb_id, e.gb_type, e.id.path, e.line, e.id.function, e.id.code, e.events)
                   for e in self.sites],
            skipped_frames=[SkippedFrame(e.id, "?", e.id.path, e.line, e.id.function, e.fail_type, "")
                            for e in self.skipped_frames],
            recompiles=[RecompileCause(e.reason, e.count, id=e.id) for e in self.recompiles],
            coverage=Coverage(untraced=[Untraced(e.path, e.path, e.function, e.start, e.end, 0, e.why, "",
                                                 e.fingerprint) for e in self.untraced]),
            limit_hits=[LimitHit("?", e.path, 0, e.function, e.limit, "") for e in self.limit_hits])


@dataclass
class Baseline:
    graphstitch_version: str
    torch_version: str | None
    targets: dict[str, BaselineEntry] = field(default_factory=dict)
    format: int = BASELINE_FORMAT


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist (create it with --update)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BaselineError(f"cannot read baseline {path}: {e}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise BaselineError(f"baseline {path} is not valid JSON ({e}); fix it or recreate it with --update") from None
    if not isinstance(data, dict) or data.get("format") not in (1, 2, BASELINE_FORMAT):
        raise BaselineError(f"baseline {path} is not a graphstitch baseline (format {BASELINE_FORMAT}); "
                            "recreate it with --update")
    try:
        if data["format"] == 1:
            data = _upgrade_format_1(data)
        return from_json(Baseline, data)
    except (JSONError, KeyError, TypeError, AttributeError) as e:
        raise BaselineError(f"baseline {path} is malformed ({e}); recreate it with --update") from None


def _upgrade_format_1(data: dict[str, Any]) -> dict[str, Any]:
    """graphstitch 0.1 baselines: sites keyed by file name + function + source text."""
    def entry(e: dict[str, Any]) -> dict[str, Any]:
        return {
            "graph_count": e["graph_count"], "recompile_count": e.get("recompile_count", 0),
            "sites": [{"id": {"gb_id": s["gb_id"], "path": s["file"], "function": s["function"],
                              "code": normalize_code(s.get("code", "")) or f"line {s['line']}"},
                       "line": s["line"], "events": s["events"]} for s in e["sites"]],
            "skipped_frames": [{"id": {"path": f["file"], "function": f["function"]}, "line": f["line"],
                                "fail_type": f["fail_type"]} for f in e["skipped_frames"]],
            "recompiles": e["recompiles"]}
    return {"format": BASELINE_FORMAT, "graphstitch_version": data.get("graphstitch_version", "?"),
            "torch_version": data.get("torch_version"),
            "targets": {k: entry(v) for k, v in data["targets"].items()}}


def baseline_text(b: Baseline) -> str:
    return json.dumps(to_json(b), indent=2, sort_keys=True) + "\n"


def new_baseline(entries: dict[str, BaselineEntry], torch_version: str | None) -> Baseline:
    return Baseline(__version__, torch_version, dict(sorted(entries.items())))


# ----------------------------------------------------------------------------- budgets

def _tool_table(start: str | os.PathLike[str]) -> tuple[dict[str, Any], Path | None]:
    """[tool.graphstitch] of the nearest pyproject.toml at or above ``start``, and that file."""
    here = Path(start).resolve()
    for d in (here, *here.parents):
        p = d / "pyproject.toml"
        if p.is_file():
            try:
                tool = tomllib.loads(p.read_text(encoding="utf-8")).get("tool", {}).get("graphstitch", {})
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise BaselineError(f"cannot read {p}: {e}") from None
            return (tool if isinstance(tool, dict) else {}), p
    return {}, None


def pyproject_budgets(start: str | os.PathLike[str] = ".") -> tuple[dict[str, int], Path | None]:
    """[tool.graphstitch] budgets from the nearest pyproject.toml at or above ``start``.
    Keys may be spelled max-breaks or max_breaks."""
    tool, p = _tool_table(start)
    out = {}
    for k, v in tool.items():
        k = k.replace("-", "_")
        if k in BUDGET_KEYS:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise BaselineError(f"{p}: [tool.graphstitch] {k} must be a non-negative integer")
            out[k] = v
    return out, p


def pyproject_setting(key: str, start: str | os.PathLike[str] = ".") -> tuple[Any, Path | None]:
    """One [tool.graphstitch] value (KEY or its dashed spelling) and the file it came from."""
    tool, p = _tool_table(start)
    return tool.get(key, tool.get(key.replace("_", "-"))), p


# ----------------------------------------------------------------------------- comparison

@dataclass
class Verdict:
    target: str
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # What the gate cannot judge: code that ran untraced changed (a break there is never
    # reported). Not "ok": `check` says "unknown", and fails with --strict.
    unknowns: list[str] = field(default_factory=list)

    __computed__: ClassVar[tuple[str, ...]] = ("ok",)

    @property
    def ok(self) -> bool:
        return not self.regressions

    @property
    def status(self) -> str:
        return "fail" if self.regressions else "unknown" if self.unknowns else "ok"


@dataclass
class CheckReport:
    """`graphstitch check --json`: the gate's verdict per target and each target's census (a
    target that failed has its census, with ``error``, and no verdict)."""
    baseline: str | None
    updated: bool
    verdicts: list[Verdict] = field(default_factory=list)
    censuses: dict[str, Census] = field(default_factory=dict)

    __computed__: ClassVar[tuple[str, ...]] = ("schema", "ok")

    @property
    def schema(self) -> str:
        return "graphstitch.check/1"

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts) and not any(c.error for c in self.censuses.values())


def _at(path: str, line: int) -> str:
    return f"{short_path(path)}:{line}"


def compare(target: str, c: Census, base: BaselineEntry | None, *, base_torch: str | None = None,
            budgets: dict[str, int] | None = None, base_format: int = BASELINE_FORMAT) -> Verdict:
    """Regressions (new or grown sites, more graphs, new skipped frames, new or grown
    recompile causes, budgets exceeded) and improvements of ``c`` against a baseline entry."""
    v = Verdict(target)
    if base is not None:
        # Another torch may renumber or retype breaks: match sites without their GB id then,
        # and keep comparing every total, so nothing passes silently.
        same_torch = not base_torch or not c.torch_version or base_torch == c.torch_version
        if not same_torch:
            v.warnings.append(f"baseline was made with torch {base_torch}, this is torch {c.torch_version}: "
                              "sites are matched without their GB id; re-baseline with --update")
        d = diff(base.census(target), c, match_gb=same_torch)
        for h in d.new_limit_hits:   # first: the frame now runs eagerly, silently
            v.regressions.append(f"new {h.limit} hit: {h.function} at {_at(h.file, h.line)} runs eagerly "
                                 f"from call {h.call + 1 if h.call is not None else '?'} on")
        for s in d.new_sites:
            v.regressions.append(f"new break site {gb_text(s.gb_id)} at {_at(s.file, s.line)} in {s.function}: {s.code.strip()}")
        for ch in d.site_events:
            s = ch.site
            words = "more" if ch.after > ch.before else "fewer"
            (v.regressions if ch.after > ch.before else v.improvements).append(
                f"{words} break events at {_at(s.file, s.line)} ({gb_text(s.gb_id)}): {ch.before} -> {ch.after}")
        for s in d.gone_sites:
            v.improvements.append(f"break site gone: {gb_text(s.gb_id)} at {s.id.path}:{s.line} in {s.function}")
        if d.graphs.after != d.graphs.before:
            words = "more" if d.graphs.after > d.graphs.before else "fewer"
            (v.regressions if d.graphs.after > d.graphs.before else v.improvements).append(
                f"{words} graphs: {d.graphs.before} -> {d.graphs.after}")
        for f in d.new_skipped:
            v.regressions.append(f"new skipped frame (runs eager): {f.function} at {_at(f.file, f.line)} ({f.fail_type})")
        for f in d.gone_skipped:
            v.improvements.append(f"frame no longer skipped: {f.function} at {f.id.path}:{f.line}")
        for r in d.new_causes:
            at = f" at {_at(r.provenance.file, r.provenance.line)}" if r.provenance else ""
            v.regressions.append(f"new recompile cause ({r.count}x){at}: {r.reason}")
        for cc in d.cause_counts:
            words = "more" if cc.after > cc.before else "fewer"
            (v.regressions if cc.after > cc.before else v.improvements).append(
                f"{words} recompiles ({cc.before} -> {cc.after}): {cc.cause.reason}")
        for r in d.gone_causes:
            v.improvements.append(f"recompile cause gone: {r.reason}")
        _untraced(v, c, d, base_format)
    elif budgets and c.coverage.untraced:   # a budget on a count that misses untraced code
        for u in c.coverage.untraced:
            v.unknowns.append(f"never traced: {_span(u.path, u.start, u.end)} in {u.function} ({u.why}); "
                              "breaks there are not counted")
    for name, value, limit in (("break sites", len(c.sites), (budgets or {}).get("max_breaks")),
                               ("graphs", c.graph_count, (budgets or {}).get("max_graphs")),
                               ("recompiles", c.recompile_count, (budgets or {}).get("max_recompiles"))):
        if limit is not None and value > limit:
            v.regressions.append(f"{name}: {value} over budget {limit}")
    return v


def _span(path: str, start: int, end: int | None) -> str:
    return f"{path}:{start}" + (f"-{end}" if end is not None and end != start else "")


def _untraced(v: Verdict, c: Census, d: CensusDiff, base_format: int) -> None:
    """Untraced code against the baseline's (``diff``: matched on file, function and why):
    other text, or code newly untraced, is a change the gate cannot judge; gone is progress."""
    if base_format < 3:
        if c.coverage.untraced:
            v.unknowns.append(f"the baseline (format {base_format}) has no record of untraced code; "
                              f"{c.untraced_lines} line(s) in {c.untraced_functions} function(s) ran untraced now, "
                              "so a change there cannot be judged: re-baseline with --update")
        return
    for u in d.new_untraced:
        v.unknowns.append(f"code newly untraced ({u.why}): {_span(u.path, u.start, u.end)} in {u.function}; "
                          "breaks there are not counted")
    for u in d.changed_untraced:
        v.unknowns.append(f"code that Dynamo never traced changed: {_span(u.path, u.start, u.end)} in {u.function}; "
                          "a break there is not counted, so this change is not judged")
    for u in d.gone_untraced:
        v.improvements.append(f"now traced: {_span(u.path, u.start, u.end)} in {u.function} (was {u.why})")


# ----------------------------------------------------------------------------- in tests

def violations(c: Census, limits: dict[str, Any]) -> str | None:
    """The failure text for a census over its limits (pytest plugin, assert helper): the
    budgets exceeded, then every site (file:line, GB id, first hint) and recompile cause."""
    v = compare(c.target or "", c, None, budgets=limits)
    if v.ok:
        return None
    lines = ["graphstitch: torch.compile limits exceeded: " + "; ".join(v.regressions)]
    for h in c.limit_hits:   # first: that frame runs eagerly from then on
        lines.append(f"  {short_path(h.file)}:{h.line} {h.function} hit {h.limit}"
                     + (f" at call {h.call + 1}: {h.eager_calls} call(s) may have run it eagerly" if h.call is not None else ""))
    for s in c.sites:
        lines.append(f"  {short_path(s.file)}:{s.line} {gb_text(s.gb_id)} {s.gb_type}"
                     + (" (whole frame skipped)" if s.frame_skipped else ""))
        if s.hints:
            lines.append(f"    hint: {s.hints[0]}")
    for r in c.recompiles:
        at = f" made at {short_path(r.provenance.file)}:{r.provenance.line}" if r.provenance else ""
        lines.append(f"  recompile ({r.count}x in {', '.join(r.frames)}): {r.reason}{at}")
    return "\n".join(lines)


def assert_no_graph_breaks(fn: Any, *args: Any, **kwargs: Any) -> Census:
    """Compile ``fn``, call it once, and raise AssertionError naming every break site.
    Returns the census when there is none."""
    from .live import census
    c = census(fn, *args, **kwargs)
    if c.error:
        raise AssertionError(f"graphstitch: {fn!r} failed: {c.error.message}")
    msg = violations(c, {"max_breaks": 0})
    if msg:
        raise AssertionError(msg)
    if not c.clean:  # e.g. a capture graphstitch could not verify: not known to be clean
        raise AssertionError(f"graphstitch: {c.summary}")
    return c
