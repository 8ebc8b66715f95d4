"""CI outputs that read a Census: SARIF 2.1.0 for code scanning, Markdown for PR comments.

Like every renderer, they only read the census; no counting here. No torch import.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from . import __version__
from .analysis import Census
from .gate import site_key
from .report import atomic_write, short_path

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
RECOMPILE_RULE = "GS-RECOMPILE"   # recompile causes have no GB id
INFO_URI = "https://meta-pytorch.github.io/compile-graph-break-site/"


def _gb_url(gb_id: str) -> str | None:
    return f"{INFO_URI}gb/{gb_id.lower()}.html" if gb_id[2:].isdigit() else None


def _artifact(path: str, root: Path) -> dict:
    """Paths under the working directory are relative to %SRCROOT% (what code scanning
    maps onto the repository); others stay absolute file URIs."""
    p = Path(path)
    try:
        return {"uri": p.resolve().relative_to(root).as_posix(), "uriBaseId": "SRCROOT"}
    except (ValueError, OSError):
        return {"uri": p.as_uri() if p.is_absolute() else p.as_posix()}


def _location(path: str, line: int, root: Path) -> dict:
    loc: dict = {"physicalLocation": {"artifactLocation": _artifact(path, root)}}
    if line and line > 0:
        loc["physicalLocation"]["region"] = {"startLine": int(line)}
    return loc


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def recompile_advice(reason: str) -> str:
    from .guards import advice_for
    return " ".join(advice_for(reason))


def sarif(censuses: list[Census], root: str | os.PathLike | None = None) -> dict:
    """One SARIF run (one tool) holding a result per break site and per recompile cause of
    every census; rules are the GB ids met, plus one rule for recompiles."""
    root = Path(root or os.getcwd()).resolve()
    rules: dict[str, dict] = {}
    results: list[dict] = []

    def rule(rid: str, name: str, full: str, help_text: str) -> int:
        if rid not in rules:
            r = {"id": rid, "name": name or rid, "shortDescription": {"text": name or rid},
                 "fullDescription": {"text": full or name or rid}, "help": {"text": help_text or full or rid},
                 "defaultConfiguration": {"level": "warning"}}
            url = _gb_url(rid)
            if url:
                r["helpUri"] = url
            rules[rid] = r
        return list(rules).index(rid)

    for c in censuses:
        for s in c.sites:
            advice = [str(a.get("summary", "")) for a in s.advice if a.get("summary")]
            help_text = "\n".join(filter(None, [s.explanation, *(f"Hint: {h}" for h in s.hints),
                                               *(f"Advice: {a}" for a in advice)]))
            idx = rule(s.gb_id, s.gb_type, s.explanation, help_text)
            skipped = " The whole frame is skipped and runs eagerly." if s.frame_skipped else ""
            results.append({
                "ruleId": s.gb_id, "ruleIndex": idx,
                "level": "error" if s.frame_skipped else "warning",
                "message": {"text": f"Graph break {s.gb_id} in {s.function}: {s.gb_type} "
                                    f"({s.events} event{'s' if s.events != 1 else ''}).{skipped}"
                                    + (f" Hint: {s.hints[0]}" if s.hints else "")},
                "locations": [_location(s.file, s.line, root)],
                "partialFingerprints": {"graphstitch/site/v1": _fingerprint(site_key(
                    {"gb_id": s.gb_id, "file": s.file, "function": s.function, "code": s.code, "line": s.line}))},
                "properties": {"target": c.target, "events": s.events, "nesting_depth": s.nesting_depth,
                               "frame_skipped": s.frame_skipped, "gb_chain": s.gb_chain},
            })
        frames = {f.compile_id: f for f in c.frames}
        for r in c.recompiles:
            idx = rule(RECOMPILE_RULE, "Recompile",
                       "A guard failed, so Dynamo compiled the frame again. After recompile_limit "
                       "recompiles (8 by default) the frame silently falls back to eager.",
                       "Run `graphstitch guards TARGET --repeat 3` or `--vary DIM` to see the guards that failed.")
            fr = next((frames[cid] for cid in r.compile_ids if cid in frames), None)
            results.append({
                "ruleId": RECOMPILE_RULE, "ruleIndex": idx, "level": "warning",
                "message": {"text": f"{r.count} recompile{'s' if r.count != 1 else ''} of "
                                    f"{', '.join(r.frames)}: {r.reason}. {recompile_advice(r.reason)}".strip()},
                "locations": [_location(fr.file, fr.line, root)] if fr else [],
                "partialFingerprints": {"graphstitch/recompile/v1": _fingerprint(c.target or "", r.reason)},
                "properties": {"target": c.target, "count": r.count, "examples": r.examples},
            })
    run = {
        "tool": {"driver": {"name": "graphstitch", "version": __version__, "informationUri": INFO_URI,
                            "rules": list(rules.values())}},
        "originalUriBaseIds": {"SRCROOT": {"uri": root.as_uri() + "/"}},
        "results": results,
        "properties": {"targets": [c.target for c in censuses],
                       "torch_versions": sorted({c.torch_version for c in censuses if c.torch_version})},
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def write_sarif(censuses: list[Census], path: str) -> None:
    atomic_write(path, json.dumps(sarif(censuses), indent=2) + "\n")


# ----------------------------------------------------------------------------- Markdown

def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(censuses: list[Census], notes: dict[str, list[str]] | None = None) -> str:
    """A short summary per target: totals, then a table of sites and one of recompile causes.
    ``notes`` (per target) carries the gate's verdict lines."""
    out: list[str] = []
    for c in censuses:
        out.append(f"### graphstitch: `{c.target or '?'}`\n")
        match = {True: "yes", False: "**NO**", None: "not checked"}[c.outputs_match_eager]
        out.append(f"torch {c.torch_version or '?'} · graphs **{c.graph_count}** · break sites "
                   f"**{len(c.sites)}** · break events **{c.break_events}** · skipped frames "
                   f"**{len(c.skipped_frames)}** · recompiles **{c.recompile_count}** "
                   f"({len(c.recompiles)} causes) · outputs match eager {match}\n")
        for line in (notes or {}).get(c.target or "", []):
            out.append(f"- {line}")
        if (notes or {}).get(c.target or ""):
            out.append("")
        if c.sites:
            out.append("| # | GB id | where | function | events | break |")
            out.append("|---|---|---|---|---|---|")
            for i, s in enumerate(c.sites, 1):
                gb = f"[{s.gb_id}]({_gb_url(s.gb_id)})" if _gb_url(s.gb_id) else s.gb_id
                flag = " (frame skipped)" if s.frame_skipped else ""
                out.append(f"| {i} | {gb} | `{_cell(short_path(s.file))}:{s.line}` | `{_cell(s.function)}` | "
                           f"{s.events} | {_cell(s.gb_type)}{flag} |")
            out.append("")
        if c.recompiles:
            out.append("| recompiles | cause | frames |")
            out.append("|---|---|---|")
            for r in c.recompiles:
                out.append(f"| {r.count} | `{_cell(r.reason)}` | {_cell(', '.join(r.frames))} |")
            out.append("")
        if c.error:
            out.append(f"**Target failed ({_cell(c.error.get('kind'))})**: "
                       f"{_cell(str(c.error.get('message', ''))[:300])}\n")
    return "\n".join(out).rstrip() + "\n"


def write_markdown(censuses: list[Census], path: str, notes: dict[str, list[str]] | None = None) -> None:
    text = markdown(censuses, notes)
    atomic_write(path, text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        # GitHub collects every step's lines from this file: append, never replace.
        with open(summary, "a", encoding="utf-8") as f:
            f.write(text + "\n")
