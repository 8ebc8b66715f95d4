"""The self-contained HTML reports: one file, inline CSS/JS/SVG, opens from disk, no network.

The census report (one census, several ranks, or a `fix` report with its trials) and the
perf page share one base template (``templates/base.html.j2``, loaded as package
resources). They read typed results and nothing else (no counting here). Every string that
comes from user code, messages or traces goes through Jinja's autoescape; the page also
carries a Content-Security-Policy that forbids loading anything, as a second line of defence.
Source lines are highlighted here with pygments, not in the browser. No torch import.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Any

import jinja2
from markupsafe import Markup

from ..costs import cost_for
from ..files import atomic_write
from ..jsonio import to_json
from ..model import Census, FrameCompile, Site, gb_text
from ..owners import chain_text, group_line
from ..paths import short_path
from ..traces import source_context

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("graphstitch", "render/templates"),
                          autoescape=True, trim_blocks=True, lstrip_blocks=True)
_ENV.filters["short"] = short_path
_ENV.filters["gb"] = gb_text


def side_by_side(patch: str | None) -> list[dict[str, Any]]:
    """A unified diff as before/after rows, each side highlighted: {"file"} rows start a
    file, {"old", "new", "kind"} rows pair removed with added lines (kind: same/change)."""
    rows: list[dict[str, Any]] = []
    minus: list[str] = []
    plus: list[str] = []

    def flush() -> None:
        for i in range(max(len(minus), len(plus))):
            rows.append({"old": highlight(minus[i]) if i < len(minus) else "",
                         "new": highlight(plus[i]) if i < len(plus) else "", "kind": "change"})
        minus.clear()
        plus.clear()
    for ln in (patch or "").splitlines():
        if ln.startswith("+++ "):
            rows.append({"file": ln[4:].removeprefix("b/")})
        elif ln.startswith(("--- ", "@@")):
            flush()
            if ln.startswith("@@"):
                rows.append({"hunk": ln.split("@@")[1].strip()})
        elif ln.startswith("-"):
            minus.append(ln[1:])
        elif ln.startswith("+"):
            plus.append(ln[1:])
        else:
            flush()
            rows.append({"old": highlight(ln[1:]), "new": highlight(ln[1:]), "kind": "same"})
    flush()
    return rows


_ENV.filters["side_by_side"] = side_by_side


@functools.lru_cache(maxsize=1)
def _pygments() -> tuple[Any, Any, str]:
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer
    fmt = HtmlFormatter(nowrap=True, classprefix="tok-")
    return PythonLexer(stripnl=False, ensurenl=False), fmt, fmt.get_style_defs("pre.src")


def highlight(line: str) -> Markup:
    """One source line as escaped HTML with pygments' token spans (a line out of context is
    fine: the lexer does not need balanced brackets)."""
    from pygments import highlight as hl
    lexer, fmt, _ = _pygments()
    return Markup(hl(line, lexer, fmt).rstrip("\n"))


def _source(site: Site) -> dict[str, Any]:
    ctx = source_context(site.file, site.line)
    if ctx is None:
        return {"available": False, "lines": []}
    return {"available": True,
            "lines": [{"n": n, "code": highlight(text), "hit": n == site.line} for n, text in ctx]}


def _frame_name(f: FrameCompile) -> str:
    """A frame compile by its qualified name; a resume function says where it resumed."""
    m = re.match(r"^torch_dynamo_resume_in_.+_at_(\d+)$", f.function)
    base = f.qualname or f.function
    return f"{base} after line {m.group(1)}" if m and f.qualname else base


_ENV.filters["frame_name"] = _frame_name


def _timeline(c: Census) -> list[dict[str, Any]]:
    """The first call, schematically: each frame's first compile in order, as a compiled
    region (it produced a graph) or eager code (skipped frame / no graph), followed by an
    eager gap for each break reported while compiling it."""
    from ..records import recompile_index
    breaks: dict[str, list[Site]] = {}
    for s in c.sites:
        for cid in s.compile_ids:
            breaks.setdefault(cid, []).append(s)
    ops = {g.compile_id: g.op_count for g in c.graphs}
    items = []
    for f in c.frames:
        if recompile_index(f.compile_id) != 0:
            continue  # recompiles belong to later calls
        name = _frame_name(f)
        if f.graph:
            items.append({"kind": "compiled", "label": f"{f.compile_id} {name}",
                          "detail": f"graph, {ops.get(f.compile_id) or '?'} ops"})
        else:
            items.append({"kind": "skipped" if f.fail_type else "empty",
                          "label": f"{f.compile_id} {name}",
                          "detail": f"frame skipped ({f.fail_type}): runs eager" if f.fail_type else "no graph"})
        for s in breaks.get(f.compile_id, []):
            items.append({"kind": "break", "label": f"{gb_text(s.gb_id)} {os.path.basename(s.file)}:{s.line}",
                          "detail": s.gb_type})
    return items


def _measured(c: Census) -> dict[str, Any] | None:
    """`census --cost`: one warm pass, each region as wide as its median time (a minimum
    width keeps short graphs visible); gaps labelled with their duration and site."""
    if c.cost is None or not c.cost.regions:
        return None
    total = sum(r.median_s for r in c.cost.regions) or 1.0
    width, x, out = 900.0, 0.0, []
    for r in c.cost.regions:
        w = max(width * r.median_s / total, 6.0)
        label = (f"{r.compile_id} graph" if r.kind == "graph" else
                 f"gap{f' {gb_text(r.site.gb_id)}' if r.site else ''}") + f" {r.median_s * 1e3:.3g} ms"
        out.append({"kind": r.kind, "x": round(x, 1), "w": round(w, 1), "label": label,
                    "site": str(r.site) if r.site else "", "show": w > 7 * len(label) + 8})
        x += w + 2
    return {"regions": out, "width": max(int(x), 100)}


def _clip(text: str, n: int = 44) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _svg_width(text: str) -> int:
    return 7 * len(text) + 12


def _view(c: Census, rank: Any) -> dict[str, Any]:
    frames = sorted(c.frames, key=lambda f: -f.compile_seconds)
    longest = max((f.compile_seconds for f in frames), default=0.0) or 1.0
    label_w = min(420, max((_svg_width(f"{f.compile_id} {_frame_name(f)}") for f in frames), default=100))
    timeline = _timeline(c)
    x = 0
    for it in timeline:
        it["label"] = _clip(it["label"])
        it["w"] = max(_svg_width(it["label"]), 60)
        it["x"] = x
        x += it["w"] + 4
    fixes_for = getattr(c, "fixes_for", None)   # a `fix` report: its trials, matched on SiteId
    stats = {k: v for k, v in to_json(c.trace_stats).items() if v not in (None, [])}
    sites = [{"s": s, "i": i, "short": short_path(s.file), "source": _source(s),
              "fixes": fixes_for(s.id) if fixes_for else [], "cost": cost_for(c, s.id),
              "no_candidate": [r for r in getattr(c, "no_candidate", []) if r.site == s.id],
              "chain": chain_text(s.owner) if s.owner is not None and s.owner.chain else None,
              "group": group_line(s)} for i, s in enumerate(c.sites, 1)]
    if c.cost is not None:   # measured: rank by seconds per call, as the terminal does
        sites.sort(key=lambda v: -v["cost"].seconds.median_s if v["cost"] else 0.0)
        for i, v in enumerate(sites, 1):
            v["i"] = i
    top_cost = max((v["cost"].seconds.median_s for v in sites if v["cost"]), default=0.0) or 1.0
    for v in sites:
        v["bar"] = round(100 * v["cost"].seconds.median_s / top_cost, 1) if v["cost"] else 0
    # Start here: the costliest site when measured, else the first ranked; its verified fix if `fix` ran.
    start = max(sites, key=lambda v: v["cost"].seconds.median_s if v["cost"] else -1.0) if sites else None
    if start is not None:
        start = {**start, "verified": next((f for f in start["fixes"] if f.verified), None)}
    cause_fixes: dict[Any, list[Any]] = {}
    for f in getattr(c, "cause_fixes", []):   # a `fix` report: recompile-cause trials, matched on CauseId
        cause_fixes.setdefault(f.cause, []).append(f)
    explained: dict[Any, list[Any]] = {}
    for e in getattr(c, "explained", []):
        explained.setdefault(e.cause, []).append(e)
    return {
        "cause_fixes": cause_fixes, "explained": explained,
        "rank": rank, "id": "all" if rank is None else f"rank{rank}", "c": c,
        "sites": sites, "start": start, "measured": _measured(c),
        "chart": {"frames": frames, "longest": longest, "label_w": label_w, "bar_w": 360,
                  "height": 22 * len(frames) + 8},
        "timeline": {"entries": timeline, "width": max(x, 100)},
        "stats": stats,
    }


def render_html(census: Census | Mapping[Any, Census], *, symmetry: Any = None, title: str | None = None) -> str:
    """The report for one census, or for ``{rank or target: Census}`` (a selector, and the
    ranks' ``symmetry`` (a RankComparison) when given)."""
    ranks = {None: census} if isinstance(census, Census) else dict(census)
    views = [_view(c, r) for r, c in ranks.items()]
    first = views[0]["c"]
    return _ENV.get_template("report.html.j2").render(
        views=views, multi=len(views) > 1, symmetry=symmetry, pygments_css=Markup(_pygments()[2]),
        title=title or first.target or "graphstitch report")


def write_html(census: Census | Mapping[Any, Census], path: str | os.PathLike[str], **kw: Any) -> None:
    atomic_write(path, render_html(census, **kw))


def perf_html(result: Any) -> str:
    """The perf page: the chart (svg.perf_svg) and the terminal table (rich's own HTML
    export, inline styles, escaped), in the report's base template."""
    import io

    from rich.console import Console

    from .svg import perf_svg
    from .terminal import perf as perf_table
    con = Console(record=True, width=110, file=io.StringIO(), highlight=False, emoji=False)
    perf_table(result, con)
    table = con.export_html(inline_styles=True, code_format="{code}")
    return _ENV.get_template("perf.html.j2").render(
        title=f"graphstitch perf — {result.target}", chart=Markup(perf_svg(result)), table=Markup(table),
        pygments_css="")
