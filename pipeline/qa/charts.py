"""Inline SVG charts for the report: no scripts, no external assets, readable without colour.

Every label goes through :func:`html.escape`: rule ids and agent ids come from
operators' data.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

SEVERITY_COLOURS = {
    "critical": "#8b1a1a",
    "high": "#d0491f",
    "medium": "#e0a100",
    "low": "#4a7fb5",
    "info": "#8a8f98",
}
_BAR = "#3d6fa8"


def score_bins(scores: Sequence[float], width: int = 10) -> list[tuple[str, int]]:
    """Counts per score band: 0–9, 10–19, …, 90–100 (100 falls in the last band)."""
    edges = list(range(0, 100, width))
    counts = [0] * len(edges)
    for score in scores:
        counts[min(int(score // width), len(edges) - 1)] += 1
    labels = [f"{lo}–{lo + width - 1 if lo + width < 100 else 100}" for lo in edges]
    return list(zip(labels, counts, strict=True))


def histogram_svg(bins: Sequence[tuple[str, int]], title: str, height_px: int = 220) -> str:
    """Vertical bars with counts on top and band labels below."""
    bar_w, gap, left, bottom, top = 44, 8, 36, 36, 20
    width = left + len(bins) * (bar_w + gap) + gap
    plot_h = height_px - bottom - top
    peak = max((c for _, c in bins), default=0) or 1
    parts = [_svg_open(width, height_px, title)]
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width}" y2="{top + plot_h}" stroke="#444"/>')
    for i, (label, count) in enumerate(bins):
        x = left + gap + i * (bar_w + gap)
        h = round(plot_h * count / peak)
        y = top + plot_h - h
        parts.append(_rect(x, y, bar_w, h, _BAR, f"{label}: {count}"))
        parts.append(
            f'<text x="{x + bar_w / 2}" y="{y - 4}" text-anchor="middle" font-size="11">{count}</text>'
        )
        parts.append(
            f'<text x="{x + bar_w / 2}" y="{top + plot_h + 16}" text-anchor="middle" font-size="10">'
            f"{escape(label)}</text>"
        )
    parts.append(
        f'<text x="{left + gap}" y="{height_px - 4}" font-size="11" fill="#555">score band (100 = clean)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def hbar_svg(
    items: Sequence[tuple[str, float, str]], title: str, unit: str = "", max_value: float | None = None
) -> str:
    """Horizontal bars, one per (label, value, colour), largest first as given."""
    row_h, label_w, bar_max, pad = 22, 260, 360, 10
    height = pad * 2 + max(len(items), 1) * row_h
    width = label_w + bar_max + 80
    peak = max_value if max_value else (max((v for _, v, _ in items), default=0) or 1)
    parts = [_svg_open(width, height, title)]
    if not items:
        parts.append(f'<text x="{pad}" y="{pad + 14}" font-size="12">nothing to show</text>')
    for i, (label, value, colour) in enumerate(items):
        y = pad + i * row_h
        w = max(round(bar_max * value / peak), 1 if value else 0)
        shown = label if len(label) <= 40 else label[:39] + "…"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end" font-size="12">{escape(shown)}</text>'
        )
        parts.append(_rect(label_w, y + 3, w, row_h - 6, colour, f"{label}: {value:g}{unit}"))
        parts.append(
            f'<text x="{label_w + w + 6}" y="{y + 15}" font-size="12">{value:g}{escape(unit)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def lines_svg(
    series: dict[str, Sequence[tuple[float, float]]], title: str, x_label: str, y_label: str
) -> str:
    """One polyline per named series of (x, y) points on shared axes, with a legend."""
    width, height, left, bottom, top, right = 640, 260, 56, 36, 20, 130
    points = [p for s in series.values() for p in s]
    x_max = max((x for x, _ in points), default=0.0) or 1.0
    y_max = max((y for _, y in points), default=0.0) or 1.0
    plot_w, plot_h = width - left - right, height - bottom - top
    parts = [_svg_open(width, height, title)]
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#444"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>'
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end" font-size="10">{y_max:.3g}</text>'
        f'<text x="{left + plot_w}" y="{top + plot_h + 14}" text-anchor="end" font-size="10">{x_max:.3g}</text>'
        f'<text x="{left}" y="{height - 4}" font-size="11" fill="#555">{escape(x_label)}</text>'
        f'<text x="4" y="{top - 6}" font-size="11" fill="#555">{escape(y_label)}</text>'
    )
    palette = ("#3d6fa8", "#d0491f", "#4a7", "#8b1a1a", "#e0a100", "#8a8f98")
    for i, (name, pts) in enumerate(series.items()):
        colour = palette[i % len(palette)]
        coords = " ".join(
            f"{left + plot_w * x / x_max:.1f},{top + plot_h - plot_h * y / y_max:.1f}" for x, y in pts
        )
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5">'
            f"<title>{escape(name)}</title></polyline>"
        )
        y = top + 14 * i + 8
        parts.append(
            f'<line x1="{left + plot_w + 10}" y1="{y}" x2="{left + plot_w + 28}" y2="{y}" stroke="{colour}" '
            f'stroke-width="3"/><text x="{left + plot_w + 32}" y="{y + 4}" font-size="11">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _rect(x: float, y: float, width: float, height: float, colour: str, tooltip: str) -> str:
    return (
        f'<rect class="bar" x="{x}" y="{y}" width="{width}" height="{height}" fill="{colour}">'
        f"<title>{escape(tooltip)}</title></rect>"
    )


def _svg_open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif"><title>{escape(title)}</title>'
    )
