"""SVG charts (no dependency): perf's latency and compile-time bars."""

from __future__ import annotations

import html

from ..perf import PerfResult
from ..perf.timing import LatencyStats


def perf_svg(result: PerfResult) -> str:
    """A self-contained SVG bar chart: steady-state latency and compile times (no dependency)."""
    e, w, r = result.eager, result.whole, result.regional

    def med(st: LatencyStats | None) -> float | None:
        return st.median_s if st else None
    lat = [("eager", med(e.latency), e.latency), ("whole", med(w.latency) if w else None, w.latency if w else None)]
    comp = [("whole cold", w.compile_cold_s if w else None), ("whole warm", w.compile_warm_s if w else None)]
    if r:
        lat.append(("regional", med(r.latency), r.latency))
        comp += [("regional cold", r.compile_cold_s), ("regional warm", r.compile_warm_s)]
    width, bar_h, gap, label_w, plot_w = 640, 22, 8, 120, 380
    parts: list[str] = []
    y = 40

    def panel(title: str, rows: list[tuple[str, float | None, LatencyStats | None]], unit: str, scale: float) -> None:
        nonlocal y
        parts.append(f'<text x="10" y="{y}" font-weight="bold">{html.escape(title)}</text>')
        y += 12
        vals = [v for _, v, _ in rows if v]
        top = max(vals + [s.q3_s if s else 0.0 for _, _, s in rows]) if vals else 1.0
        for label, v, st in rows:
            parts.append(f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{html.escape(label)}</text>')
            if v is None:
                parts.append(f'<text x="{label_w + 4}" y="{y + 15}" fill="#a00">failed</text>')
            else:
                bw = max(plot_w * v / top, 1)
                parts.append(f'<rect x="{label_w}" y="{y}" width="{bw:.1f}" height="{bar_h}" fill="#4a78b5"/>')
                if st:  # IQR whisker
                    x1, x2 = label_w + plot_w * st.q1_s / top, label_w + plot_w * st.q3_s / top
                    parts.append(f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y + bar_h / 2}" y2="{y + bar_h / 2}" '
                                 'stroke="#222" stroke-width="2"/>')
                parts.append(f'<text x="{label_w + max(bw, plot_w * (st.q3_s if st else 0.0) / top) + 6:.1f}" '
                             f'y="{y + 15}">{v * scale:.3g} {html.escape(unit)}</text>')
            y += bar_h + gap
        y += 20

    title = f"graphstitch perf — {result.target} ({result.backend}, {result.device})"
    panel("steady-state latency (median, IQR whisker)", lat, "ms", 1e3)
    panel("compile time (first call)", [(n, v, None) for n, v in comp], "s", 1.0)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" viewBox="0 0 {width} {y}" '
            'font-family="sans-serif" font-size="12">'
            f'<rect width="100%" height="100%" fill="white"/><text x="10" y="20" font-size="14">{html.escape(title)}</text>')
    return head + "".join(parts) + "</svg>\n"
