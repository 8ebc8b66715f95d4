"""The CI gate: compare a census to a checked-in baseline and to budgets.

A baseline stores, per target, only what the gate compares: sites keyed so that an
unrelated edit above a site does not move it (GB id + function + file name + the text of
the source line), skipped frames, recompile causes, and the totals. It reads the Census;
it never counts anything itself. No torch import here.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .analysis import Census
from .report import short_path

BASELINE_FORMAT = 1
BUDGET_KEYS = ("max_breaks", "max_graphs", "max_recompiles")


class BaselineError(Exception):
    """The baseline file is missing, unreadable or not a graphstitch baseline (exit 2)."""


def _norm_code(code: str) -> str:
    return re.sub(r"\s+", " ", code or "").strip()


def site_key(entry: dict, *, with_gb: bool = True) -> str:
    """Identity of a site across runs and unrelated line shifts. Without source text (no
    traceback line) the line number is the only anchor left."""
    anchor = _norm_code(entry.get("code", "")) or f"line {entry.get('line')}"
    parts = [os.path.basename(entry.get("file", "")), entry.get("function", ""), anchor]
    return " | ".join(([entry.get("gb_id", "")] if with_gb else []) + parts)


def skipped_key(entry: dict) -> str:
    return f"{os.path.basename(entry.get('file', ''))} | {entry.get('function', '')} | {entry.get('fail_type', '')}"


def entry_from_census(c: Census) -> dict:
    """The part of a census a baseline keeps (stable, sorted, human-diffable)."""
    return {
        "graph_count": c.graph_count,
        "break_site_count": len(c.sites),
        "break_events": c.break_events,
        "recompile_count": c.recompile_count,
        "sites": sorted(({"gb_id": s.gb_id, "file": short_path(s.file), "line": s.line, "function": s.function,
                          "code": _norm_code(s.code), "events": s.events} for s in c.sites),
                        key=lambda e: (e["file"], e["line"], e["gb_id"])),
        "skipped_frames": sorted(({"function": f.function, "file": short_path(f.file), "line": f.line,
                                   "fail_type": f.fail_type} for f in c.skipped_frames),
                                 key=lambda e: (e["file"], e["line"])),
        "recompiles": sorted(({"reason": r.reason, "count": r.count} for r in c.recompiles),
                             key=lambda e: e["reason"]),
    }


# ----------------------------------------------------------------------------- baseline file

def load_baseline(path: str | os.PathLike) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist (create it with --update)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BaselineError(f"cannot read baseline {path}: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise BaselineError(f"baseline {path} is not valid JSON ({e}); fix it or recreate it with --update") from None
    if not isinstance(data, dict) or not isinstance(data.get("targets"), dict) \
            or data.get("format") != BASELINE_FORMAT:
        raise BaselineError(f"baseline {path} is not a graphstitch baseline (format {BASELINE_FORMAT}); "
                            "recreate it with --update")
    for name, entry in data["targets"].items():
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), list)
                                                  for k in ("sites", "skipped_frames", "recompiles")):
            raise BaselineError(f"baseline {path}: entry for {name!r} is malformed; recreate it with --update")
    return data


def baseline_text(entries: dict[str, dict], torch_version: str | None) -> str:
    data = {"format": BASELINE_FORMAT, "graphstitch_version": __version__,
            "torch_version": torch_version, "targets": entries}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


# ----------------------------------------------------------------------------- budgets

def pyproject_budgets(start: str | os.PathLike = ".") -> tuple[dict, Path | None]:
    """[tool.graphstitch] budgets from the nearest pyproject.toml at or above ``start``.
    Keys may be spelled max-breaks or max_breaks."""
    here = Path(start).resolve()
    for d in (here, *here.parents):
        p = d / "pyproject.toml"
        if p.is_file():
            try:
                tool = tomllib.loads(p.read_text(encoding="utf-8")).get("tool", {}).get("graphstitch", {})
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise BaselineError(f"cannot read {p}: {e}") from None
            out = {}
            for k, v in tool.items():
                k = k.replace("-", "_")
                if k in BUDGET_KEYS:
                    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                        raise BaselineError(f"{p}: [tool.graphstitch] {k} must be a non-negative integer")
                    out[k] = v
            return out, p
    return {}, None


# ----------------------------------------------------------------------------- comparison

@dataclass
class Verdict:
    target: str
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.regressions


def _where(e: dict) -> str:
    return f"{short_path(e.get('file', '?'))}:{e.get('line', '?')}"


def compare(target: str, c: Census, base: dict | None, *, base_torch: str | None = None,
            budgets: dict | None = None) -> Verdict:
    """Regressions (new or grown sites, more graphs, new skipped frames, new recompile
    causes, budgets exceeded) and improvements of ``c`` against a baseline entry."""
    v = Verdict(target)
    now = entry_from_census(c)
    if base is not None:
        # Another torch may renumber or retype breaks: match sites on the source line only
        # then, and keep comparing every total, so nothing passes silently.
        same_torch = not base_torch or not c.torch_version or base_torch == c.torch_version
        if not same_torch:
            v.warnings.append(f"baseline was made with torch {base_torch}, this is torch {c.torch_version}: "
                              "sites are matched without their GB id; re-baseline with --update")
        key = (lambda e: site_key(e)) if same_torch else (lambda e: site_key(e, with_gb=False))
        old_sites = {key(e): e for e in base["sites"]}
        new_sites = {key(e): e for e in now["sites"]}
        for k, e in new_sites.items():
            o = old_sites.get(k)
            if o is None:
                v.regressions.append(f"new break site {e['gb_id']} at {_where(e)} in {e['function']}: {e['code']}")
            elif e["events"] > o["events"]:
                v.regressions.append(f"more break events at {_where(e)} ({e['gb_id']}): {o['events']} -> {e['events']}")
            elif e["events"] < o["events"]:
                v.improvements.append(f"fewer break events at {_where(e)} ({e['gb_id']}): {o['events']} -> {e['events']}")
        for k, o in old_sites.items():
            if k not in new_sites:
                v.improvements.append(f"break site gone: {o['gb_id']} at {_where(o)} in {o['function']}")
        old_g, new_g = base.get("graph_count"), now["graph_count"]
        if isinstance(old_g, int):
            if new_g > old_g:
                v.regressions.append(f"more graphs: {old_g} -> {new_g}")
            elif new_g < old_g:
                v.improvements.append(f"fewer graphs: {old_g} -> {new_g}")
        old_sk = {skipped_key(e) for e in base["skipped_frames"]}
        new_sk = {skipped_key(e) for e in now["skipped_frames"]}
        for e in now["skipped_frames"]:
            if skipped_key(e) not in old_sk:
                v.regressions.append(f"new skipped frame (runs eager): {e['function']} at {_where(e)} ({e['fail_type']})")
        for e in base["skipped_frames"]:
            if skipped_key(e) not in new_sk:
                v.improvements.append(f"frame no longer skipped: {e['function']} at {_where(e)}")
        old_rc = {e.get("reason"): e.get("count", 0) for e in base["recompiles"]}
        new_rc = {e["reason"] for e in now["recompiles"]}
        for e in now["recompiles"]:
            if e["reason"] not in old_rc:
                v.regressions.append(f"new recompile cause ({e['count']}x): {e['reason']}")
            elif e["count"] < old_rc[e["reason"]]:
                v.improvements.append(f"fewer recompiles ({old_rc[e['reason']]} -> {e['count']}): {e['reason']}")
        for r in sorted(set(old_rc) - new_rc, key=str):
            v.improvements.append(f"recompile cause gone: {r}")
    for name, value, limit in (("break sites", len(c.sites), (budgets or {}).get("max_breaks")),
                               ("graphs", c.graph_count, (budgets or {}).get("max_graphs")),
                               ("recompiles", c.recompile_count, (budgets or {}).get("max_recompiles"))):
        if limit is not None and value > limit:
            v.regressions.append(f"{name}: {value} over budget {limit}")
    return v


# ----------------------------------------------------------------------------- in tests

def violations(c: Census, limits: dict) -> str | None:
    """The failure text for a census over its limits (pytest plugin, assert helper): the
    budgets exceeded, then every site (file:line, GB id, first hint) and recompile cause."""
    v = compare(c.target or "", c, None, budgets=limits)
    if v.ok:
        return None
    lines = ["graphstitch: torch.compile limits exceeded: " + "; ".join(v.regressions)]
    for s in c.sites:
        lines.append(f"  {short_path(s.file)}:{s.line} {s.gb_id} {s.gb_type}"
                     + (" (whole frame skipped)" if s.frame_skipped else ""))
        if s.hints:
            lines.append(f"    hint: {s.hints[0]}")
    for r in c.recompiles:
        lines.append(f"  recompile ({r.count}x in {', '.join(r.frames)}): {r.reason}")
    return "\n".join(lines)


def assert_no_graph_breaks(fn, *args, **kwargs) -> Census:
    """Compile ``fn``, call it once, and raise AssertionError naming every break site.
    Returns the census when there is none."""
    from .live import census
    c = census(fn, *args, **kwargs)
    if c.error:
        raise AssertionError(f"graphstitch: {fn!r} failed: {c.error.get('message')}")
    msg = violations(c, {"max_breaks": 0})
    if msg:
        raise AssertionError(msg)
    return c
