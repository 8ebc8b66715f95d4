"""The self-contained HTML report: one file, inline CSS/JS/SVG, opens from disk, no network.

It reads the Census and nothing else (no counting here). Every string that comes from user
code, messages or traces goes through Jinja's autoescape; the page also carries a
Content-Security-Policy that forbids loading anything, as a second line of defence.
No torch import: ``graphstitch trace`` renders HTML on machines without torch.
"""

from __future__ import annotations

import builtins
import keyword
import os
import re
from typing import Mapping

import jinja2
from markupsafe import Markup, escape

from .analysis import Census
from .report import atomic_write, short_path
from .traces import source_context

# Comment | string | number | name: enough for a line of Python out of context, where
# `tokenize` would fail on unbalanced brackets or indentation.
_TOKEN_RE = re.compile(
    r"(?P<com>#.*$)|(?P<str>[rbfuRBFU]{0,2}(?:\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?))"
    r"|(?P<num>\b\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?\b)|(?P<name>[A-Za-z_]\w*)")
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
_BUILTINS = frozenset(dir(builtins))


def highlight(line: str) -> Markup:
    """One source line as escaped HTML with token spans (done here, not in the browser)."""
    out, pos = [], 0
    for m in _TOKEN_RE.finditer(line):
        out.append(escape(line[pos:m.start()]))
        kind, text = m.lastgroup, m.group()
        if kind == "name":
            kind = "kw" if text in _KEYWORDS else "bi" if text in _BUILTINS else None
        out.append(Markup('<span class="t-{}">{}</span>').format(kind, text) if kind else escape(text))
        pos = m.end()
    out.append(escape(line[pos:]))
    return Markup("").join(out)


def _source(site) -> dict:
    ctx = source_context(site.file, site.line)
    if ctx is None:
        return {"available": False, "lines": []}
    return {"available": True,
            "lines": [{"n": n, "code": highlight(text), "hit": n == site.line} for n, text in ctx]}


def _timeline(c: Census) -> list[dict]:
    """The first call, schematically: each frame's first compile in order, as a compiled
    region (it produced a graph) or eager code (skipped frame / no graph), followed by an
    eager gap for each break reported while compiling it."""
    breaks: dict[str, list] = {}
    for s in c.sites:
        for cid in s.compile_ids:
            breaks.setdefault(cid, []).append(s)
    ops = {g.compile_id: g.op_count for g in c.graphs}
    items = []
    for f in c.frames:
        if not f.compile_id.endswith("/0"):
            continue  # recompiles belong to later calls
        if f.graph:
            items.append({"kind": "compiled", "label": f"{f.compile_id} {f.function}",
                          "detail": f"graph, {ops.get(f.compile_id) or '?'} ops"})
        else:
            items.append({"kind": "skipped" if f.fail_type else "empty",
                          "label": f"{f.compile_id} {f.function}",
                          "detail": f"frame skipped ({f.fail_type}): runs eager" if f.fail_type else "no graph"})
        for s in breaks.get(f.compile_id, []):
            items.append({"kind": "break", "label": f"{s.gb_id} {os.path.basename(s.file)}:{s.line}",
                          "detail": s.gb_type})
    return items


def _clip(text: str, n: int = 44) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _svg_width(text: str) -> int:
    return 7 * len(text) + 12


def _context(c: Census, rank) -> dict:
    frames = sorted(c.frames, key=lambda f: -f.compile_seconds)
    longest = max((f.compile_seconds for f in frames), default=0.0) or 1.0
    label_w = min(420, max((_svg_width(f"{f.compile_id} {f.function}") for f in frames), default=100))
    timeline = _timeline(c)
    x = 0
    for it in timeline:
        it["label"] = _clip(it["label"])
        it["w"] = max(_svg_width(it["label"]), 60)
        it["x"] = x
        x += it["w"] + 4
    fixes_by_site: dict[str, list[dict]] = {}
    for fx in getattr(c, "fixes", None) or []:
        fixes_by_site.setdefault(str(fx.get("site", "")), []).append(fx)
    return {
        "rank": rank,
        "id": "all" if rank is None else f"rank{rank}",
        "c": c,
        "sites": [{"s": s, "i": i, "short": short_path(s.file), "source": _source(s),
                   "fixes": fixes_by_site.get(s.location, []) + fixes_by_site.get(f"{s.gb_id} {s.location}", [])}
                  for i, s in enumerate(c.sites, 1)],
        "chart": {"frames": frames, "longest": longest, "label_w": label_w, "bar_w": 360,
                  "height": 22 * len(frames) + 8},
        "timeline": {"entries": timeline, "width": max(x, 100)},
        "stats": c.trace_stats,
    }


_ENV = jinja2.Environment(autoescape=True,
                          loader=jinja2.DictLoader({}), trim_blocks=True, lstrip_blocks=True)
_ENV.filters["short"] = short_path
_TEMPLATE_PATH = os.path.join(os.path.dirname(__file__), "report.html.j2")


def _template() -> jinja2.Template:
    with open(_TEMPLATE_PATH, encoding="utf-8") as f:
        return _ENV.from_string(f.read())


def render_html(census: Census | Mapping, *, symmetry: dict | None = None, title: str | None = None) -> str:
    """The report for one census, or for ``{rank: Census}`` (multi-rank: a rank selector,
    and the ``symmetry`` summary from ``ranks.compare_ranks()`` when given)."""
    if isinstance(census, Census):
        ranks = {None: census}
    else:
        ranks = dict(census)
    views = [_context(c, r) for r, c in ranks.items()]
    first = views[0]["c"]
    return _template().render(views=views, multi=len(views) > 1, symmetry=symmetry,
                              title=title or first.target or "graphstitch report")


def write_html(census: Census | Mapping, path: str | os.PathLike, **kw) -> None:
    atomic_write(path, render_html(census, **kw))
