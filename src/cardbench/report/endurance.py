"""Endurance runs (``cardbench.endurance/1``) shown: the chart of rate and bad sectors against
rounds, several cards on one chart, the milestones marked; the HTML section of the report and of a
card's page on the station server; the text a terminal shows of one run.

The chart has two panels over one axis of rounds (a round writes the whole card once, so rounds
are full writes): above, each card's write rate (solid) and read rate (dashed) in the report's rate
unit; below, each card's bad sectors as a share of the card on a logarithmic scale (0.0001% to
100%), with the milestones (first error, 0.1%, 1%, 10%, 25%, 50% bad) marked on its line. With one
card, the bad sectors of each class are drawn too, thin, beside the total.
"""

from __future__ import annotations

import math
import re
import textwrap
from html import escape
from typing import Any

from cardbench.kinds.endurance import CLASS_WORDS, CLASSES, bad_by_class, card_name
from cardbench.kinds.shapes import is_number, obj, seq
from cardbench.report.svg import FONT, PALETTE, nice_step
from cardbench.report.svg import esc as _svg_esc
from cardbench.report.terminal import Col, fit_table
from cardbench.units import fmt_size, rate_in

#: a class's own colour in the one-card chart
CLASS_COLORS = {"erased": "#8c6d1f", "stale": "#d9731a", "misplaced": "#7b52ab", "foreign": "#d45aa0",
                "corrupt": "#b8322c", "unreadable": "#4f6d7a"}
#: the lowest bad share the lower panel shows (0.0001%); 100% is the top
LOW = 1e-6
#: characters XML does not allow (a card named by a station with a control character in it)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def esc(text: Any) -> str:
    """Text for the SVG: escaped, without the characters XML refuses."""
    return _svg_esc(_NOT_XML.sub("", str(text)))


def _e(text: Any) -> str:
    return escape("" if text is None else str(text), quote=True)


def rounds_of(doc: dict) -> list[dict]:
    """The rounds that can be drawn: objects with a whole round number, in order."""
    out = [r for r in seq(doc, "rounds") if isinstance(r, dict) and is_number(r.get("round"))]
    return sorted(out, key=lambda r: r["round"])


def _num(x: Any) -> float | None:
    """``x`` when it is a finite number (not a bool), else None."""
    return float(x) if is_number(x) else None


def _fraction(r: dict) -> float | None:
    f = _num(r.get("bad_fraction"))
    return f if f is not None and 0 <= f <= 1 else None


def _labels(docs: list[dict]) -> list[str]:
    """Each card's name; where two read the same, with its device (else its date and id)."""
    names = [card_name(d) for d in docs]
    out = []
    for n, d in zip(names, docs, strict=True):
        if names.count(n) > 1:
            twins = [x.get("device") for m, x in zip(names, docs, strict=True) if m == n]
            dev = d.get("device")
            n += f" ({dev})" if dev and twins.count(dev) == 1 else \
                f" ({str(d.get('created_at') or '')[:10]}, {str(d.get('id') or '')[:6]})"
        out.append(n)
    return out


def endurance_chart(docs: list[dict], *, rate_unit: str = "MB/s", width: int = 960, chart_id: str = "endurance-chart",
                    title: str = "Endurance: rate and bad sectors against rounds (full writes)") -> str:
    """One SVG of every card's rounds (see the module's docstring); "" when no round was finished."""
    docs = [d for d in docs if rounds_of(d)]
    if not docs:
        return ""
    names = _labels(docs)
    left, right, top = 78, 24, 56
    rate_h, gap, bad_h = 200, 54, 170
    legend_rows = (len(docs) + 1) // 2
    one = len(docs) == 1
    classes_shown = [c for c in CLASSES if one and any(bad_by_class(r)[c] for r in rounds_of(docs[0]))]
    height = top + rate_h + gap + bad_h + 44 + 18 * legend_rows + (18 if classes_shown else 0)
    plot_w = width - left - right
    last = max(rounds_of(d)[-1]["round"] for d in docs)
    x_step = max(1.0, nice_step(last, 10))
    x_top = x_step * math.ceil(last / x_step) or 1.0
    rates = [r.get(k) for d in docs for r in rounds_of(d) for k in ("write_bytes_per_s", "read_bytes_per_s")]
    rate_max = max((rate_in(v, rate_unit) for v in map(_num, rates) if v is not None and v > 0), default=1.0) * 1.08
    y_step = nice_step(rate_max, 5)
    y_top = y_step * math.ceil(rate_max / y_step)
    rate_y0 = top + rate_h
    bad_top = rate_y0 + gap
    bad_y0 = bad_top + bad_h
    decades = int(round(-math.log10(LOW)))

    def px(round_no: float) -> float:
        return left + plot_w * round_no / x_top

    def py_rate(bps: float) -> float:
        return rate_y0 - rate_h * min(rate_in(bps, rate_unit), y_top) / y_top

    zero = 16        # the "0" baseline sits this far below the lowest decade

    def py_bad(fraction: float) -> float:
        """0 on the baseline; LOW..1 on the log scale above it."""
        if fraction <= 0:
            return bad_y0
        return bad_y0 - zero - (bad_h - zero) * (math.log10(max(fraction, LOW)) - math.log10(LOW)) / decades

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart endurance-chart" id="{esc(chart_id)}" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}" '
           f'{FONT} font-size="12">', f"<title>{esc(title)}</title>",
           f'<rect class="background" x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
           f'<text x="{left}" y="20" font-size="15" font-weight="600">{esc(title)}</text>',
           f'<text x="{left}" y="38" fill="#555">above: write rate (solid) and read rate (dashed); below: bad '
           f"sectors, share of the card (log scale); marks: the milestones</text>"]
    # the rate panel
    for i in range(int(round(y_top / y_step)) + 1):
        v = i * y_step
        y = rate_y0 - rate_h * v / y_top
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                   f'stroke="{"#999" if i == 0 else "#e3e3e3"}"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<text x="16" y="{rate_y0 - rate_h / 2:.1f}" transform="rotate(-90 16 {rate_y0 - rate_h / 2:.1f})" '
               f'text-anchor="middle" fill="#333">rate ({esc(rate_unit)})</text>')
    # the bad-sector panel: one gridline a decade, "0" on the baseline
    for k in range(decades + 1):
        f = LOW * 10 ** k
        y = py_bad(f)
        pct = f * 100
        label = f"{pct:.{max(0, -k + 4)}f}%" if k < 4 else f"{pct:g}%"
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{label}</text>')
    out.append(f'<line x1="{left}" y1="{bad_y0}" x2="{left + plot_w}" y2="{bad_y0}" stroke="#999"/>'
               f'<text x="{left - 6}" y="{bad_y0 + 4}" text-anchor="end" font-size="11">0</text>')
    out.append(f'<text x="16" y="{bad_top + bad_h / 2:.1f}" transform="rotate(-90 16 {bad_top + bad_h / 2:.1f})" '
               f'text-anchor="middle" fill="#333">bad sectors</text>')
    # the rounds axis, under both panels
    for i in range(int(round(x_top / x_step)) + 1):
        xv = i * x_step
        x = px(xv)
        for y0 in (rate_y0, bad_y0):
            out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 4}" stroke="#999"/>')
        out.append(f'<text x="{x:.1f}" y="{rate_y0 + 16}" text-anchor="middle" font-size="11">{xv:g}</text>')
        out.append(f'<text x="{x:.1f}" y="{bad_y0 + 17}" text-anchor="middle">{xv:g}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{bad_y0 + 34}" text-anchor="middle" fill="#333">round '
               f"(each writes the whole card once: rounds = full writes)</text>")
    for k, (d, name) in enumerate(zip(docs, names, strict=True)):
        color = PALETTE[k % len(PALETTE)]
        rs = rounds_of(d)
        for key, dash in (("write_bytes_per_s", ""), ("read_bytes_per_s", ' stroke-dasharray="6 4"')):
            pts = [(r["round"], r[key]) for r in rs if is_number(r.get(key)) and r[key] >= 0]
            if pts:
                path = " ".join(f"{px(x):.1f},{py_rate(y):.1f}" for x, y in pts)
                what = "write" if key.startswith("write") else "read"
                out.append(f'<polyline class="rate {what}" points="{path}" fill="none" stroke="{color}" '
                           f'stroke-width="2"{dash}><title>{esc(name)}: {what} rate</title></polyline>')
        pts = [(r["round"], f) for r in rs if (f := _fraction(r)) is not None]
        if pts:
            path = " ".join(f"{px(x):.1f},{py_bad(y):.1f}" for x, y in pts)
            out.append(f'<polyline class="bad total" points="{path}" fill="none" stroke="{color}" stroke-width="2">'
                       f"<title>{esc(name)}: bad sectors</title></polyline>")
            if len(pts) <= 80:
                for r in rs:
                    f = _fraction(r)
                    if f is None:
                        continue
                    by = ", ".join(f"{c} {n:,.0f}" for c, n in bad_by_class(r).items() if n) or "none"
                    out.append(f'<circle cx="{px(r["round"]):.1f}" cy="{py_bad(f):.1f}" r="2.2" fill="{color}">'
                               f'<title>{esc(name)}, round {r["round"]:g}: {f * 100:.4g}% bad ({esc(by)})</title>'
                               "</circle>")
        for c in classes_shown:
            sectors = _sectors(d)
            if not sectors:
                break
            cpts = [(r["round"], bad_by_class(r)[c] / sectors) for r in rs]
            path = " ".join(f"{px(x):.1f},{py_bad(y):.1f}" for x, y in cpts)
            out.append(f'<polyline class="bad class-{c}" points="{path}" fill="none" stroke="{CLASS_COLORS[c]}" '
                       f'stroke-width="1.2" stroke-dasharray="3 3"><title>{c}: {esc(CLASS_WORDS[c])}</title>'
                       "</polyline>")
        # the milestones, one mark per round (milestones reached in the same round share it)
        marks: dict[float, list[dict]] = {}
        for m in seq(d, "milestones"):
            if isinstance(m, dict) and is_number(m.get("round")):
                marks.setdefault(m["round"], []).append(m)
        for round_no, ms in marks.items():
            at = next((r for r in rs if r["round"] == round_no), None)
            f = _fraction(at) if at else None
            if f is None:
                continue
            x, y = px(round_no), py_bad(f)
            short = ", ".join("1st" if not m.get("bad_fraction") else f"{m['bad_fraction'] * 100:g}%" for m in ms
                              if is_number(m.get("bad_fraction")) or m.get("bad_fraction") is None)
            said = "; ".join(f"{m.get('what')} ({fmt_size(m['bytes_written']) if is_number(m.get('bytes_written')) else '?'}"
                             " written)" for m in ms)
            tx, anchor = (x + 7, "start") if x + 7 + 6 * len(short) < width - 2 else (x - 7, "end")
            out.append(f'<g class="milestone"><path d="M{x:.1f},{y - 7:.1f} L{x + 5:.1f},{y:.1f} L{x:.1f},'
                       f'{y + 7:.1f} L{x - 5:.1f},{y:.1f} Z" fill="#fff" stroke="{color}" stroke-width="1.8"/>'
                       f'<text x="{tx:.1f}" y="{y + 12:.1f}" font-size="10.5" fill="{color}" text-anchor="{anchor}">'
                       f"{esc(short)}</text><title>{esc(name)}, round {round_no:g}: {esc(said)}</title></g>")
        # an ending that is a finding (read-only, dead) marked where the card's line stops
        ended = d.get("ended")
        if ended in ("read_only", "dead") and rs:
            f = _fraction(rs[-1]) or 0.0
            x, y = px(rs[-1]["round"]), py_bad(f)
            words = str(ended).replace("_", "-")
            tx, anchor = (x + 8, "start") if x + 8 + 6 * len(words) < width - 2 else (x - 8, "end")
            out.append(f'<g class="ending"><path d="M{x - 5:.1f},{y - 5:.1f} L{x + 5:.1f},{y + 5:.1f} M{x - 5:.1f},'
                       f'{y + 5:.1f} L{x + 5:.1f},{y - 5:.1f}" stroke="{color}" stroke-width="2.2"/>'
                       f'<text x="{tx:.1f}" y="{y - 8:.1f}" font-size="10.5" fill="{color}" text-anchor="{anchor}">'
                       f"{esc(words)}</text><title>{esc(name)}: {esc(words)} after round {rs[-1]['round']:g}</title>"
                       "</g>")
        ly = bad_y0 + 56 + 18 * (k // 2)
        lx = left + (k % 2) * (plot_w / 2)
        label = name if len(name) <= 52 else name[:51] + "…"
        out.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="16" height="4" fill="{color}"/>'
                   f'<text x="{lx + 22:.1f}" y="{ly - 4}">{esc(label)}</text>')
    if classes_shown:
        ly = bad_y0 + 56 + 18 * legend_rows
        x = float(left)
        for c in classes_shown:
            out.append(f'<line x1="{x:.1f}" y1="{ly - 7}" x2="{x + 16:.1f}" y2="{ly - 7}" stroke="{CLASS_COLORS[c]}" '
                       f'stroke-width="1.5" stroke-dasharray="3 3"/><text x="{x + 22:.1f}" y="{ly - 3}">{c}</text>')
            x += 36 + 7 * len(c)
    out.append("</svg>")
    return "\n".join(out)


def _sectors(d: dict) -> float | None:
    cap, sector = _num(d.get("capacity_bytes")), _num(d.get("sector_bytes") or 512)
    if cap is not None and cap > 0 and sector is not None and sector > 0:
        return cap / sector
    return None


def _rate(v: Any, unit: str) -> str:
    return f"{rate_in(v, unit):.3g}" if is_number(v) else "-"


def _ended(d: dict) -> str:
    ended = d.get("ended")
    return "still running" if ended is None else str(ended).replace("_", " ")


def rated_words(d: dict) -> str | None:
    """The run set against the card's rating, in words; None without one."""
    rated = obj(d, "rated")
    rb, used = _num(rated.get("rated_bytes")), _num(rated.get("used_fraction"))
    if rb is None or used is None:
        return None
    what = (f"{rated['tbw']:g} TBW" if is_number(rated.get("tbw")) else
            f"{rated.get('video_hours'):g} h of video at {rated.get('video_mbps'):g} Mbit/s"
            if is_number(rated.get("video_hours")) and is_number(rated.get("video_mbps")) else "its rating")
    first = d.get("first_error_round")
    tail = "before its first error" if is_number(first) else "with no error yet"
    return f"rated for {what} ({fmt_size(rb)}): it wrote {used * 100:.3g}% of that {tail}"


def endurance_section(docs: list[dict], *, rate_unit: str = "MB/s", chart_id: str = "endurance-chart") -> str:
    """HTML: the chart of every card, then per card its answer, its milestones and its last round."""
    out = [endurance_chart(docs, rate_unit=rate_unit, chart_id=chart_id)]
    for d, name in zip(docs, _labels(docs), strict=True):
        verdict = str(d.get("verdict") or "unknown")
        full = f"{d['full_writes']:,.1f}" if is_number(d.get("full_writes")) else "?"
        written = fmt_size(d["bytes_written"]) if is_number(d.get("bytes_written")) else "?"
        out.append(f'<h3>{_e(name)}</h3><p><span class="verdict-{_e(verdict.replace(" ", "-"))}">'
                   f"{_e(verdict)}</span>: <b>{_e(d.get('answer') or '')}</b></p><p class=\"note\">"
                   f"{_e(d.get('device') or '')} · ended: {_e(_ended(d))} · "
                   f"{_e(written)} written, {_e(full)} full writes</p>")
        words = rated_words(d)
        if words:
            out.append(f'<p class="note">{_e(words)}</p>')
        rs = rounds_of(d)
        ms = [m for m in seq(d, "milestones") if isinstance(m, dict)]
        if ms:
            out.append('<table class="milestones"><thead><tr><th>Milestone</th><th>Round</th><th>Written</th>'
                       "</tr></thead><tbody>"
                       + "".join(f"<tr><td>{_e(m.get('what'))}</td><td class=num>{_e(m.get('round'))}</td>"
                                 f"<td class=num>{_e(fmt_size(m['bytes_written']) if is_number(m.get('bytes_written')) else '-')}"
                                 "</td></tr>" for m in ms) + "</tbody></table>")
        if rs:
            head = "".join(f"<th>{_e(c)}</th>" for c in CLASSES)
            show = rs if len(rs) <= 6 else [rs[0], *rs[-5:]]
            rows = []
            for r in show:
                by = bad_by_class(r)
                f = _fraction(r)
                rows.append(f"<tr><td class=num>{_e(r['round'])}</td><td class=num>{_rate(r.get('write_bytes_per_s'), rate_unit)}"
                            f"</td><td class=num>{_rate(r.get('read_bytes_per_s'), rate_unit)}</td>"
                            + "".join(f"<td class=num>{by[c]:,.0f}</td>" for c in CLASSES)
                            + f"<td class=num>{'-' if f is None else f'{f * 100:.4g}%'}</td></tr>")
            more = f" (round 1 and the last 5 of {len(rs)})" if len(rs) > 6 else ""
            out.append(f'<table class="rounds"><caption>Rounds{_e(more)}</caption><thead><tr><th>Round</th>'
                       f"<th>Write ({_e(rate_unit)})</th><th>Read ({_e(rate_unit)})</th>{head}<th>Bad</th></tr>"
                       f"</thead><tbody>{''.join(rows)}</tbody></table>")
        if d.get("error"):
            out.append(f'<p class="note">Stopped: {_e(d["error"])}</p>')
    out.append('<p class="note">Bad sectors by class: '
               + "; ".join(f"<b>{_e(c)}</b>: {_e(w)}" for c, w in CLASS_WORDS.items())
               + ". A round writes every sector of the card with its address, the round, the card's own random "
                 "id and a checksum, then reads them all back.</p>")
    return "\n".join(x for x in out if x)


def render_endurance(doc: dict, *, rate_unit: str = "MB/s") -> str:
    """Plain text of one run (what `cardbench endure` prints at its end): the answer (wrapped at
    80 columns), the milestones, how it ended."""
    name, answer = card_name(doc), str(doc.get("answer") or "")
    first = answer if answer.startswith(name) else f"{name}: {answer}"
    lines = [textwrap.fill(first, 79, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)]
    words = rated_words(doc)
    if words:
        lines.append(f"  {words}")
    for m in seq(doc, "milestones"):
        if isinstance(m, dict):
            written = fmt_size(m["bytes_written"]) if is_number(m.get("bytes_written")) else "?"
            lines.append(f"  {str(m.get('what')):<12} round {m.get('round')}, {written} written")
    rs = rounds_of(doc)
    if rs:
        r = rs[-1]
        lines.append(f"  last round {r['round']:g}: write {_rate(r.get('write_bytes_per_s'), rate_unit)}, read "
                     f"{_rate(r.get('read_bytes_per_s'), rate_unit)} {rate_unit}")
    total = doc.get("bytes_written")
    full = doc.get("full_writes")
    written = (f", after {full:,.1f} full writes ({fmt_size(total)})"
               if is_number(total) and is_number(full) else "")
    lines.append(f"  ended: {_ended(doc)}{written}")
    return "\n".join(lines) + "\n"


def _eta(seconds: Any) -> str:
    s = _num(seconds)
    if s is None:
        return "-"
    if s >= 86400:
        return f"{s / 86400:.1f} d"
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.0f} min" if s >= 60 else f"{s:.0f} s"


def live_cells(row: dict, rate_unit: str = "MB/s") -> list[str]:
    """One card's cells of the live table (a row of :func:`cardbench.endure.many.CardRow.as_dict`)."""
    written = _num(row.get("bytes_written"))
    bad = _num(row.get("bad_fraction"))
    rate = _num(row.get("rate_bytes_per_s"))
    state = str(row.get("state") or "")
    if state in ("ended", "failed"):
        doing = str(row.get("ended") or "failed").replace("_", " ")
    elif state == "paused":
        doing = "paused: " + str(row.get("error") or "card gone")
    else:
        doing = state
    return [str(row.get("label") or row.get("device") or "?"), f"{row.get('round') or 0:,}",
            "-" if written is None else fmt_size(written),
            "-" if rate is None or state in ("ended", "failed") else f"{rate_in(rate, rate_unit):.3g}",
            "-" if bad is None else f"{bad * 100:.3g}%", "-" if state in ("ended", "failed") else _eta(row.get("eta_s")),
            doing]


def live_table(rows: list[dict], *, width: int = 80, rate_unit: str = "MB/s"):
    """The live table of many cards at once (a rich Table that fits ``width``): card, round, bytes
    written (MB, GB, TB), the rate of the phase under way, bad sectors (share of the card, last round), the
    time to the stop rule, and what it does."""
    cols = [Col("Card", squeeze=True), Col("Round", right=True, wrap=False), Col("Written", right=True, wrap=False),
            Col(f"Rate {rate_unit}", right=True), Col("Bad", right=True, wrap=False), Col("ETA", right=True, drop=2),
            Col("Now", drop=1, squeeze=True)]
    return fit_table(cols, [live_cells(r, rate_unit) for r in rows], width, title=f"Endurance: {len(rows)} cards")
