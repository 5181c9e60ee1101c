"""Inline SVG charts drawn in Python: horizontal bar charts with X gridlines and claim marks, and
line charts (rate against position / bytes written). No scripts, no fonts or files fetched.

Values come in bytes per second and bytes; the chart labels them in the report's rate unit and
in X (1X = 150,000 B/s).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from html import escape

from cardbench.units import RATE_UNITS, X_BYTES_PER_S, fmt_size, rate_in

PALETTE = ["#1f6fb2", "#d9731a", "#2e8b57", "#b8322c", "#7b52ab", "#8c6d1f", "#d45aa0", "#4f6d7a"]
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\""


#: characters HTML and SVG may not hold (controls but tab and newlines, C1 controls, lone
#: surrogates, as a station may have typed them): shown as U+FFFD
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def esc(text: object) -> str:
    """Text as HTML/SVG text or attribute: escaped, characters markup may not hold replaced."""
    return escape(_NOT_TEXT.sub("\ufffd", str(text)), quote=True)


def nice_step(span: float, max_lines: int = 10) -> float:
    """The smallest 1-2-5 x 10^k step that divides ``span`` into at most ``max_lines`` parts."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max_lines
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * mag >= raw - 1e-12 * raw:
            return m * mag
    return 10 * mag


def _fmt_tick(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"


@dataclass
class Bar:
    label: str
    bytes_per_s: float | None
    claim_x: float | None = None      # the X figure the card's label claims, if any
    note: str = ""                    # e.g. "incomplete", "limited by reader"


def bar_chart(bars: list[Bar], *, title: str, rate_unit: str = "MB/s", color: str = PALETTE[0],
              width: int = 960, chart_id: str = "") -> str:
    """Horizontal bars (one per card) on a scale in X with gridlines every 1-2-5 step of X;
    each card's claimed X is a red tick across its bar."""
    left, right, top, row_h, bar_h = 300, 40, 46, 28, 16
    plot_w = width - left - right
    xs = [b.bytes_per_s / X_BYTES_PER_S for b in bars if b.bytes_per_s]
    xs += [b.claim_x for b in bars if b.claim_x]
    top_x = max(xs) if xs else 1.0
    step = nice_step(top_x * 1.05, 10)
    axis_max = step * math.ceil(top_x * 1.05 / step)
    height = top + row_h * max(1, len(bars)) + 46

    def px(x_value: float) -> float:
        return left + plot_w * x_value / axis_max

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bar-chart" id="{esc(chart_id)}" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="{esc(title)}" {FONT} font-size="12">',
           f'<title>{esc(title)}</title>',
           f'<text x="{left}" y="20" font-size="15" font-weight="600">{esc(title)}</text>',
           f'<text x="{left}" y="36" fill="#555">gridlines every {_fmt_tick(step)}X '
           f'({_fmt_tick(rate_in(step * X_BYTES_PER_S, rate_unit))} {esc(rate_unit)}); red mark: the X on the '
           f'card\'s label</text>']
    bottom = top + row_h * max(1, len(bars))
    n_lines = int(round(axis_max / step))
    for i in range(n_lines + 1):
        xv = i * step
        x = px(xv)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{bottom}" '
                   f'stroke="{"#999" if i == 0 else "#ddd"}" stroke-width="1"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle" fill="#333">{_fmt_tick(xv)}X</text>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 30}" text-anchor="middle" fill="#777" font-size="10">'
                   f'{_fmt_tick(rate_in(xv * X_BYTES_PER_S, rate_unit))}</text>')
    out.append(f'<text x="{width - right}" y="{bottom + 44}" text-anchor="end" fill="#555" font-size="11">'
               f'X (1X = 150,000 B/s); small figures: {esc(rate_unit)}</text>')
    for i, b in enumerate(bars):
        y = top + i * row_h + (row_h - bar_h) / 2
        cy = y + bar_h / 2 + 4
        label = b.label if len(b.label) <= 44 else b.label[:43] + "…"
        out.append(f'<text x="{left - 8}" y="{cy:.1f}" text-anchor="end">{esc(label)}</text>')
        if b.bytes_per_s:
            xv = b.bytes_per_s / X_BYTES_PER_S
            w = max(1.0, px(xv) - left)
            value = f"{rate_in(b.bytes_per_s, rate_unit):.3g} {rate_unit} · {xv:.1f}X"
            opacity = "0.45" if "incomplete" in b.note else "0.9"
            out.append(f'<rect class="bar" x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar_h}" fill="{color}" '
                       f'fill-opacity="{opacity}"><title>{esc(b.label)}: {esc(value)}'
                       f'{esc(" (" + b.note + ")") if b.note else ""}</title></rect>')
            text = value + (f" — {b.note}" if b.note else "")
            text_w = 6.2 * len(text)          # rough width of 11 px text
            if left + w + 6 + text_w <= width - 4:
                tx, anchor, fill = left + w + 6, "start", "#222"
            elif w >= text_w + 12:
                tx, anchor, fill = left + w - 6, "end", "#fff" if opacity == "0.9" else "#111"
            else:
                tx, anchor, fill, text = left + w + 6, "start", "#222", value
            out.append(f'<text x="{tx:.1f}" y="{cy:.1f}" text-anchor="{anchor}" fill="{fill}" font-size="11">'
                       f'{esc(text)}</text>')
        else:
            out.append(f'<text x="{left + 6}" y="{cy:.1f}" fill="#888" font-size="11">not measured</text>')
        if b.claim_x:
            cx = px(b.claim_x)
            out.append(f'<g class="claim"><line x1="{cx:.1f}" y1="{y - 4:.1f}" x2="{cx:.1f}" y2="{y + bar_h + 4:.1f}" '
                       f'stroke="#c0392b" stroke-width="3"/><path d="M{cx - 5:.1f},{y - 6:.1f} L{cx + 5:.1f},'
                       f'{y - 6:.1f} L{cx:.1f},{y - 1:.1f} Z" fill="#c0392b"/>'
                       f'<title>label claims {b.claim_x:g}X = '
                       f'{esc(f"{rate_in(b.claim_x * X_BYTES_PER_S, rate_unit):.3g}")} {esc(rate_unit)}</title></g>')
    out.append("</svg>")
    return "\n".join(out)


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]   # (bytes, bytes per second)


def line_chart(series: list[Series], *, title: str, x_label: str, rate_unit: str = "MB/s", width: int = 960,
               height: int = 380, chart_id: str = "") -> str:
    """Rate (y, in rate_unit, X on the right) against bytes (x) for one or more series."""
    left, right, top, bottom = 78, 70, 46, 60 + 18 * ((len(series) + 2) // 3)
    plot_w, plot_h = width - left - right, height - top - bottom
    all_pts = [p for s in series for p in s.points]
    x_max = max((p[0] for p in all_pts), default=1.0) or 1.0
    y_max = max((p[1] for p in all_pts), default=1.0) or 1.0
    y_max_u = rate_in(y_max, rate_unit) * 1.08
    y_step = nice_step(y_max_u, 6)
    y_top = y_step * math.ceil(y_max_u / y_step)
    x_step = nice_step(x_max, 8)
    x_top = x_step * math.ceil(x_max / x_step)

    def px(xv: float) -> float:
        return left + plot_w * xv / x_top

    def py(bps: float) -> float:
        return top + plot_h - plot_h * rate_in(bps, rate_unit) / y_top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart line-chart" id="{esc(chart_id)}" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" {FONT} '
           f'font-size="12">', f'<title>{esc(title)}</title>',
           f'<text x="{left}" y="22" font-size="15" font-weight="600">{esc(title)}</text>']
    n_y = int(round(y_top / y_step))
    for i in range(n_y + 1):
        v = i * y_step
        y = top + plot_h - plot_h * v / y_top
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                   f'stroke="{"#999" if i == 0 else "#e3e3e3"}"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt_tick(v)}</text>')
        bps = v * RATE_UNITS[rate_unit]
        out.append(f'<text x="{left + plot_w + 6}" y="{y + 4:.1f}" fill="#777">{bps / X_BYTES_PER_S:.3g}X</text>')
    n_x = int(round(x_top / x_step))
    for i in range(n_x + 1):
        xv = i * x_step
        x = px(xv)
        out.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#999"/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 17}" text-anchor="middle">'
                   f'{esc(fmt_size(xv) if xv else "0")}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 34}" text-anchor="middle" fill="#333">'
               f'{esc(x_label)}</text>')
    out.append(f'<text x="16" y="{top + plot_h / 2:.1f}" transform="rotate(-90 16 {top + plot_h / 2:.1f})" '
               f'text-anchor="middle" fill="#333">rate ({esc(rate_unit)})</text>')
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        pts = sorted(s.points)
        if not pts:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline class="series" points="{path}" fill="none" stroke="{color}" stroke-width="2">'
                   f'<title>{esc(s.name)}</title></polyline>')
        if len(pts) <= 60:
            out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}"/>' for x, y in pts]
        lx = left + (k % 3) * (plot_w / 3)
        ly = top + plot_h + 52 + 18 * (k // 3)
        name = s.name if len(s.name) <= 40 else s.name[:39] + "…"
        out.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="14" height="4" fill="{color}"/>'
                   f'<text x="{lx + 20:.1f}" y="{ly - 4}">{esc(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
