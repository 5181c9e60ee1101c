"""The geometry document in words: the answer first, then the advice, then how it was measured."""

from __future__ import annotations

from cardbench.geometry.doc import size_text
from cardbench.report.svg import FONT, esc, nice_step


def render_geometry(doc: dict) -> str:
    """Plain text for the terminal (``cardbench geometry DEVICE``)."""
    lines = [f"{doc.get('device')}: {doc.get('message')}", ""]
    units, confs = doc.get("open_units") or {}, doc.get("open_units_confidence") or {}
    rows = [
        ("allocation unit", size_text(doc.get("allocation_unit_bytes")), doc.get("allocation_unit_confidence")),
        ("page", size_text(doc.get("page_bytes")), doc.get("page_confidence")),
        ("declared AU", size_text(doc.get("declared_au_bytes")),
         (doc.get("declared_au_source") or "none (not on a native SD slot)")),
        ("open AUs, linear", "-" if units.get("linear") is None else str(units["linear"]), confs.get("linear")),
        ("open AUs, random", "-" if units.get("random") is None else str(units["random"]), confs.get("random")),
        ("FAT-tuned AUs", "-" if doc.get("fat_units") is None else str(doc["fat_units"]),
         doc.get("fat_units_confidence")),
    ]
    if doc.get("write") is None:
        rows[3:5] = [("open AUs", "-", "not tested (--write finds them)")]
        rows[-1] = ("FAT-tuned AUs", "-", "not tested (--write)")
    width = max(len(r[0]) for r in rows)
    for name, value, conf in rows:
        lines.append(f"  {name:<{width}}  {value:>8}  {conf or ''}")
    advice = doc.get("advice") or {}
    if advice.get("lines"):
        lines += ["", "Advice:"] + [f"  - {line}" for line in advice["lines"]]
    if doc.get("notes"):
        lines += ["", "Notes:"] + [f"  - {n}" for n in doc["notes"]]
    method = doc.get("method") or {}
    if method:
        lines += ["", f"Measured in {doc.get('seconds')} s: {method.get('read_bytes')} B reads, minimum of "
                      f"{method.get('repeats')} tries each, at {method.get('au_boundaries')} AU and "
                      f"{method.get('page_boundaries')} page boundaries ({method.get('io')})."]
    return "\n".join(lines) + "\n"


def geometry_chart(doc: dict, *, width: int = 960, height: int = 320, chart_id: str = "") -> str:
    """The AU scan as an SVG: the cost of reading across each boundary (us) against its offset,
    the boundaries at multiples of the AU found in red, the step (median level there) marked."""
    scan = ((doc.get("timing") or {}).get("au") or {})
    offsets, costs = scan.get("offsets") or [], scan.get("cost_seconds") or []
    pts = [(o, c * 1e6) for o, c in zip(offsets, costs, strict=False) if isinstance(o, (int, float)) and isinstance(c, (int, float))]
    au = doc.get("allocation_unit_bytes")
    title = (f"Reading across a boundary: extra time per boundary; AU {size_text(au)} marked" if au else
             "Reading across a boundary: extra time per boundary (no boundary found)")
    left, right, top, bottom = 70, 20, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    if not pts:
        return f'<p class="note">{esc(doc.get("device") or "")}: no timing recorded.</p>'
    x_max = max(o for o, _ in pts) or 1
    y_lo, y_hi = min(0.0, min(c for _, c in pts)), max(c for _, c in pts) * 1.1 or 1.0
    y_step = nice_step(y_hi - y_lo, 6)

    def px(x: float) -> float:
        return left + plot_w * x / x_max

    def py(y: float) -> float:
        return top + plot_h - plot_h * (y - y_lo) / (y_hi - y_lo)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart geometry-chart" id="{esc(chart_id)}" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" '
           f'{FONT} font-size="12">', f"<title>{esc(title)}</title>",
           f'<text x="{left}" y="22" font-size="15" font-weight="600">{esc(title)}</text>']
    v = y_step * int(y_lo / y_step)
    while v <= y_hi:
        out.append(f'<line x1="{left}" y1="{py(v):.1f}" x2="{left + plot_w}" y2="{py(v):.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += y_step
    for frac in (0, 0.25, 0.5, 0.75, 1):
        x = x_max * frac
        out.append(f'<text x="{px(x):.1f}" y="{top + plot_h + 17}" text-anchor="middle">{esc(size_text(int(x)))}'
                   "</text>")
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 36}" text-anchor="middle" fill="#333">'
               "boundary (offset on the device)</text>")
    out.append(f'<text x="16" y="{top + plot_h / 2:.1f}" transform="rotate(-90 16 {top + plot_h / 2:.1f})" '
               'text-anchor="middle" fill="#333">extra time (us)</text>')
    for o, c in pts:
        on = isinstance(au, int) and au > 0 and o % au == 0
        out.append(f'<circle cx="{px(o):.1f}" cy="{py(c):.1f}" r="{3 if on else 1.6}" '
                   f'fill="{"#b8322c" if on else "#1f6fb2"}"/>')
    step = ((scan.get("finding") or {}).get("step"))
    if au and isinstance(step, (int, float)):
        level = sorted(c for o, c in pts if isinstance(au, int) and au > 0 and o % au == 0)
        if level:
            y = py(level[len(level) // 2])
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#b8322c" '
                       f'stroke-dasharray="6 4"><title>the step at the AU boundaries: {step * 1e6:.0f} us</title></line>')
    out.append("</svg>")
    return "\n".join(out)


def geometry_section(docs: list[dict]) -> str:
    """The HTML report's flash geometry section: per document its sentence, the advice, the chart."""
    out = []
    for i, d in enumerate(docs):
        out.append(f"<h3>{esc(d.get('device') or '?')}</h3><p>{esc(d.get('message') or '')}</p>")
        lines = (d.get("advice") or {}).get("lines") or []
        if lines:
            out.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>")
        out.append(geometry_chart(d, chart_id=f"geometry-chart-{i}"))
    return "\n".join(out)
