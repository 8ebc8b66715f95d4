"""SARIF 2.1.0 for code scanning: a result per break site and per recompile cause.

Like every renderer, it only reads the census (sites, their identity and advice); no
counting here. No torch import.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .. import __version__
from ..files import atomic_write
from ..model import Census, gb_text
from ..owners import chain_text

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
RECOMPILE_RULE = "GS-RECOMPILE"   # recompile causes have no GB id
UNTRACED_RULE = "GS-UNTRACED"     # code that ran without Dynamo tracing it
LIMIT_RULE = "GS-RECOMPILE-LIMIT"
INFO_URI = "https://meta-pytorch.github.io/compile-graph-break-site/"


def gb_url(gb_id: str) -> str | None:
    return f"{INFO_URI}gb/{gb_id.lower()}.html" if gb_id[2:].isdigit() else None


def _artifact(path: str, root: Path) -> dict[str, Any]:
    """Paths under the working directory are relative to %SRCROOT% (what code scanning
    maps onto the repository); others stay absolute file URIs."""
    p = Path(path)
    try:
        return {"uri": p.resolve().relative_to(root).as_posix(), "uriBaseId": "SRCROOT"}
    except (ValueError, OSError):
        return {"uri": p.as_uri() if p.is_absolute() else p.as_posix()}


def _location(path: str, line: int, root: Path) -> dict[str, Any]:
    loc: dict[str, Any] = {"physicalLocation": {"artifactLocation": _artifact(path, root)}}
    if line and line > 0:
        loc["physicalLocation"]["region"] = {"startLine": int(line)}
    return loc


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def sarif(censuses: list[Census], root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """One SARIF run (one tool) holding a result per break site and per recompile cause of
    every census; rules are the GB ids met, plus one rule for recompiles."""
    root = Path(root or os.getcwd()).resolve()
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []

    def rule(rid: str, name: str, full: str, help_text: str) -> int:
        if rid not in rules:
            r = {"id": rid, "name": name or rid, "shortDescription": {"text": name or rid},
                 "fullDescription": {"text": full or name or rid}, "help": {"text": help_text or full or rid},
                 "defaultConfiguration": {"level": "warning"}}
            url = gb_url(rid)
            if url:
                r["helpUri"] = url
            rules[rid] = r
        return list(rules).index(rid)

    for c in censuses:
        for s in c.sites:
            advice = [a.summary for a in s.advice if a.summary]
            help_text = "\n".join(filter(None, [s.explanation, *(f"Hint: {h}" for h in s.hints),
                                               *(f"Advice: {a}" for a in advice)]))
            idx = rule(s.gb_id, s.gb_type, s.explanation, help_text)
            skipped = " The whole frame is skipped and runs eagerly." if s.frame_skipped else ""
            # Code scanning annotates the user's own line (the owner frame); the library line
            # that breaks is a related location. Fingerprints stay on the SiteId.
            owner = s.owner
            at = owner.owner if owner is not None and owner.chain else None
            via = f" Reached through {chain_text(owner)}." if at is not None and owner is not None else ""
            step = f" Next: {s.next_step.action}. Prove it: {s.next_step.command}" if s.next_step else ""
            results.append({
                "ruleId": s.gb_id, "ruleIndex": idx,
                "level": "error" if s.frame_skipped else "warning",
                "message": {"text": f"Graph break {gb_text(s.gb_id)} in {s.name}: {s.gb_type} "
                                    f"({s.events} event{'s' if s.events != 1 else ''}).{skipped}"
                                    + via + (f" Hint: {s.hints[0]}" if s.hints else "") + step},
                "locations": [_location(at.file, at.line, root) if at is not None else _location(s.file, s.line, root)],
                **({"relatedLocations": [{"id": 0, **_location(s.file, s.line, root),
                                          "message": {"text": f"root cause: {s.gb_type}"}}]} if at is not None else {}),
                "partialFingerprints": {"graphstitch/site/v2": _fingerprint(str(s.id))},
                "properties": {"target": c.target, "events": s.events, "nesting_depth": s.nesting_depth,
                               "frame_skipped": s.frame_skipped, "gb_chain": s.gb_chain},
            })
        for u in c.coverage.untraced:
            idx = rule(UNTRACED_RULE, "Never traced",
                       "This code ran eagerly without Dynamo tracing it (the rest of a frame Dynamo skipped, "
                       "or a function under torch.compiler.disable): a graph break there is never reported, "
                       "so the census's counts do not include it.",
                       "Fix the break that made Dynamo skip the frame (often a break inside a loop), or drop "
                       "the torch.compiler.disable, then run the census again.")
            uloc = _location(u.file, u.start, root)
            if u.end is not None and "region" in uloc["physicalLocation"]:
                uloc["physicalLocation"]["region"]["endLine"] = int(u.end)
            results.append({
                "ruleId": UNTRACED_RULE, "ruleIndex": idx, "level": "warning",
                "message": {"text": f"Never traced: {u.function} lines {u.where} ran eagerly; breaks there are "
                                    f"not counted. {u.reason}"},
                "locations": [uloc],
                "partialFingerprints": {"graphstitch/untraced/v1": _fingerprint(u.path, u.function, u.why)},
                "properties": {"target": c.target, "lines": u.lines, "why": u.why, "function": u.function},
            })
        for h in c.limit_hits:   # first: the frame runs eagerly from that call on
            idx = rule(LIMIT_RULE, "RecompileLimit",
                       "A frame hit recompile_limit: from that call on it runs eagerly, silently, whenever no "
                       "cache entry matches.", "Fix its recompile causes (`graphstitch fix TARGET`).")
            results.append({
                "ruleId": LIMIT_RULE, "ruleIndex": idx, "level": "error",
                "message": {"text": f"{h.function} hit {h.limit} ({h.compile_id})"
                                    + (f"; from call {h.call + 1} on, {h.eager_calls} call(s) ran it eagerly"
                                       if h.call is not None else "")},
                "locations": [_location(h.file, h.line, root)],
                "partialFingerprints": {"graphstitch/limit/v1": _fingerprint(c.target or "", h.function, h.limit)},
                "properties": {"target": c.target, "call": h.call, "eager_calls": h.eager_calls},
            })
        frames = {f.compile_id: f for f in c.frames}
        for r in c.recompiles:
            idx = rule(RECOMPILE_RULE, "Recompile",
                       "A guard failed, so Dynamo compiled the frame again. After recompile_limit "
                       "recompiles (8 by default) the frame silently falls back to eager.",
                       "Run `graphstitch guards TARGET --repeat 3` or `--vary DIM` to see the guards that failed.")
            fr = next((frames[cid] for cid in r.compile_ids if cid in frames), None)
            # The result lands on the user line that made the guard; the frame is related.
            at = r.provenance
            loc = [_location(at.file, at.line, root)] if at else [_location(fr.file, fr.line, root)] if fr else []
            fixes = [f for f in getattr(c, "cause_fixes", []) if f.cause == r.id and f.verified][:1]
            results.append({
                "ruleId": RECOMPILE_RULE, "ruleIndex": idx, "level": "note" if r.expected else "warning",
                "message": {"text": f"{r.count} recompile{'s' if r.count != 1 else ''} of "
                                    f"{', '.join(r.frames)} ({r.kind} {r.subject}): {r.reason}. "
                                    + (f"Expected: {r.expected}. " if r.expected else "")
                                    + (f"Verified fix: {fixes[0].candidate}. " if fixes else "")
                                    + " ".join(r.advice).strip()},
                "locations": loc,
                **({"relatedLocations": [{"id": 0, **_location(fr.file, fr.line, root),
                                          "message": {"text": f"recompiled frame {fr.function}"}}]} if at and fr else {}),
                "partialFingerprints": {"graphstitch/recompile/v1": _fingerprint(c.target or "", r.reason)},
                "properties": {"target": c.target, "count": r.count, "examples": r.examples, "kind": r.kind,
                               "subject": r.subject, "expected": bool(r.expected),
                               "site": str(r.site) if r.site else None},
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
