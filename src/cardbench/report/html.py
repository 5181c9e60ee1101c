"""One self-contained HTML report: inline CSS and inline SVG, no scripts, nothing fetched.

Sections: the drawer table; bar charts of write and read rates per card (gridlines in X, each
card's label claim marked when the label carries an X figure such as "4X" or "133x"); rate
against position (``raw_read`` test extra ``positions``: [[offset_bytes, bytes_per_s], ...]) and
sustained-write curves (``sustained_write`` extra ``curve``: [[bytes_written, bytes_per_s], ...])
when any result has them; readers with the ceilings ``cardbench.verdicts.readers.reader_ceilings``
infers (when that module is present); fake-capacity verdicts (``cardbench.verify/1`` documents); flash geometry
(``cardbench.geometry/1``); pull tests (``cardbench.pulltest/1``: the verdict in words, a row per pull);
endurance runs (``cardbench.endurance/1``: one chart of every card's rates and bad sectors against
rounds, the milestones marked; per card its answer, milestones and last rounds).

A Content-Security-Policy meta tag forbids scripts and any fetch, so the file shows the same
offline, in a mail, or years later.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from cardbench import __version__
from cardbench.report.drawer import (
    card_title,
    cells,
    check_rate_unit,
    drawer_row,
    headers,
    legend,
)
from cardbench.report.endurance import endurance_section
from cardbench.report.geometry import geometry_section
from cardbench.report.readers import reader_title
from cardbench.report.svg import Bar, Series, bar_chart, esc, line_chart
from cardbench.report.terminal import plain
from cardbench.report.verify import verify_details, verify_sentence
from cardbench.result import Card, Reader, Result
from cardbench.units import fmt_size, rate_in, x_rating
from cardbench.verdicts.labels import claimed_x
from cardbench.verdicts.readers import reader_ceilings

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       margin: 24px auto; max-width: 1200px; padding: 0 16px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
p.meta, p.legend, p.note { color: #555; font-size: 12.5px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #d5d5d5; padding: 4px 8px; vertical-align: top; }
th { background: #f3f5f8; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.incomplete td { color: #888; font-style: italic; }
.mark { display: inline-block; padding: 0 5px; border-radius: 3px; font-size: 11.5px; margin-right: 3px; }
.mark.warn { background: #fff1c2; } .mark.limited { background: #dbe9ff; } .mark.incomplete { background: #f4d4d4; }
.verdict-fake, .verdict-fails, .verdict-loses, .confidence-likely { color: #a61b1b; font-weight: 600; }
.verdict-genuine, .verdict-meets, .verdict-keeps, .verdict-no-error { color: #1f7a3a; font-weight: 600; }
.verdict-worn, .verdict-dead, .verdict-read-only, .verdict-counterfeit { color: #a61b1b; font-weight: 600; }
table caption { text-align: left; font-size: 12.5px; color: #555; padding: 2px 0; }
svg.chart { display: block; margin: 10px 0 18px; max-width: 100%; height: auto; }
code { font-size: 12px; }
"""


def _e(text: Any) -> str:
    return esc("" if text is None else text)


def card_label(result: Result) -> str:
    c = result.card
    parts = [card_title(result), fmt_size(c.capacity_bytes) if c.capacity_bytes else None, c.label]
    return " ".join(p for p in parts if p)


def _unique_labels(results: list[Result]) -> list[str]:
    """Card labels, with the run's date added where two runs would read the same."""
    labels = [card_label(r) for r in results]
    seen: dict[str, int] = {}
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
    return [f"{lab} ({r.started_at[:10]}, {r.id[:6]})" if seen[lab] > 1 else lab for lab, r in zip(labels, results, strict=True)]


def _drawer_table(results: list[Result], rate_unit: str) -> str:
    head = headers(rate_unit)
    out = ['<table class="drawer" id="drawer-table"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head)
           + "</tr></thead><tbody>"]
    for r in results:
        row = drawer_row(r)
        cs = cells(row, rate_unit)
        marks = []
        for note in row.notes():
            cls = "incomplete" if note == "INCOMPLETE" else "limited" if note.startswith("limited") else "warn"
            tip = "; ".join(row.warnings) if cls == "warn" else "; ".join(row.limited_by) if cls == "limited" else (
                r.error or "the run did not finish")
            marks.append(f'<span class="mark {cls}" title="{_e(tip)}">{_e(note)}</span>')
        tds = [f'<td{" class=num" if 3 <= i <= 9 else ""}>{_e(c)}</td>' for i, c in enumerate(cs[:-1])]
        tds.append(f"<td>{''.join(marks)}</td>")
        out.append(f'<tr class="{"complete" if row.complete else "incomplete"}">' + "".join(tds) + "</tr>")
    out.append("</tbody></table>")
    out.append(f'<p class="legend">{_e(legend(rate_unit))}</p>')
    return "\n".join(out)


def _bars(results: list[Result], labels: list[str], which: str) -> list[Bar]:
    bars = []
    for r, lab in zip(results, labels, strict=True):
        row = drawer_row(r)
        notes = [n for n in row.notes() if n in ("INCOMPLETE",) or n.startswith("limited")]
        bars.append(Bar(label=lab, bytes_per_s=row.write_bytes_per_s if which == "write" else row.read_bytes_per_s,
                        claim_x=claimed_x(r.card.label), note=", ".join(n.lower() for n in notes)))
    return bars


def _curves(results: list[Result], labels: list[str], test: str, key: str) -> list[Series]:
    series = []
    for r, lab in zip(results, labels, strict=True):
        t = r.test(test)
        pts = (t.extra or {}).get(key) if t else None
        if not pts:
            continue
        clean = []
        for p in pts:
            try:
                x, y = float(p[0]), float(p[1])
            except (TypeError, ValueError, IndexError):
                continue
            if y >= 0 and x >= 0:
                clean.append((x, y))
        if clean:
            series.append(Series(lab, clean))
    return series


def _readers(results: list[Result], rate_unit: str) -> str:
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(r.reader.identity(), []).append(r)
    out = ['<table class="readers"><thead><tr><th>Reader</th><th>USB id</th><th>Link</th><th>Driver / transport</th>'
           f'<th>Runs</th><th>Cards</th><th>Fastest write ({_e(rate_unit)})</th>'
           f'<th>Fastest read ({_e(rate_unit)})</th></tr></thead><tbody>']
    for ident, rs in groups.items():
        rd: Reader = rs[-1].reader
        rows = [drawer_row(r) for r in rs]
        w = max((x.write_bytes_per_s for x in rows if x.write_bytes_per_s), default=None)
        rr = max((x.read_bytes_per_s for x in rows if x.read_bytes_per_s), default=None)
        link = f"{rd.link_speed_mbit:g} Mbit/s" if rd.link_speed_mbit else "unknown"
        usb = f"{rd.vendor_id}:{rd.product_id}" if rd.vendor_id and rd.product_id else "-"
        out.append(f"<tr><td>{_e(reader_title(rd.name or ident))}</td><td><code>{_e(usb)}</code></td><td>{_e(link)}</td>"
                   f"<td>{_e(' / '.join(p for p in (rd.driver, rd.transport) if p) or '-')}</td>"
                   f"<td class=num>{len(rs)}</td><td class=num>{len({r.card.identity() for r in rs})}</td>"
                   f"<td class=num>{_e(_rate(w, rate_unit))}</td><td class=num>{_e(_rate(rr, rate_unit))}</td></tr>")
    out.append("</tbody></table>")
    out.append(_ceilings(results, rate_unit))
    return "\n".join(out)


def _rate(v: float | None, unit: str) -> str:
    return "n/a" if v is None else f"{rate_in(v, unit):.3g} ({x_rating(v):.1f}X)"


def _ceilings(results: list[Result], rate_unit: str) -> str:
    try:
        found = reader_ceilings(results)
    except Exception as e:  # noqa: BLE001 - a report still renders without this section
        return f'<p class="note">Reader ceilings could not be inferred: {_e(type(e).__name__)}: {_e(e)}</p>'
    if not found:
        return ""
    out = ['<h3>Reader ceilings</h3><p class="note">A ceiling is named when several different cards reach the same '
           'top rate through one reader (cardbench.verdicts.readers).</p>',
           f'<table class="ceilings"><thead><tr><th>Reader</th><th>Ceiling ({_e(rate_unit)})</th><th>Direction</th>'
           '<th>Confidence</th><th>Cards at it</th><th>Evidence</th></tr></thead><tbody>']
    for c in found if isinstance(found, list) else []:
        if not isinstance(c, dict):
            continue
        ceiling = c.get("ceiling_bytes_per_s")
        conf = str(c.get("confidence") or "")
        out.append(f"<tr><td>{_e(reader_title(c.get('name') or c.get('identity')))}</td>"
                   f"<td class=num>{_e(_rate(ceiling, rate_unit) if ceiling else 'none named')}</td>"
                   f"<td>{_e(c.get('direction') or '')}</td><td class=\"confidence-{_e(conf)}\">{_e(conf)}</td>"
                   f"<td class=num>{_e(c.get('cards_at_ceiling', ''))} of {_e(c.get('cards', ''))}</td>"
                   f"<td>{_e(plain(c.get('evidence') or ''))}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _card_name(d: dict) -> str:
    """A stored document's card in words (brand, name, capacity, label), else the device it ran on."""
    card = Card.from_dict(d.get("card")) if isinstance(d.get("card"), dict) else Card()
    return " ".join(p for p in (card.brand, card.name, fmt_size(card.capacity_bytes) if card.capacity_bytes
                                else None, card.label) if p) or str(d.get("device") or
                                                                  (d.get("target") or {}).get("path") or "?")


def _verify(docs: list[dict]) -> str:
    out = ['<table class="verify"><thead><tr><th>Card</th><th>Reader</th><th>Verdict</th><th>When</th><th>Details</th>'
           '</tr></thead><tbody>']
    for d in docs:
        reader = Reader.from_dict(d.get("reader")) if isinstance(d.get("reader"), dict) else Reader()
        cname = _card_name(d)
        verdict = str(d.get("verdict") or "unknown")
        sentence = " ".join(verify_sentence(d))
        details = "; ".join(f"{k}: {v}" for k, v in verify_details(d) if k not in ("verdict", "card", "reader"))
        when = d.get("finished_at") or d.get("started_at") or d.get("created_at") or ""
        rname = reader_title(reader.name or reader.identity())
        out.append(f"<tr><td>{_e(cname)}</td><td>{_e(rname)}</td>"
                   f'<td class="verdict-{_e(verdict.lower())}">{_e(verdict)}</td><td>{_e(when)}</td>'
                   f"<td><b>{_e(sentence)}</b><br>{_e(details)}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


#: a pull's counts in the pull test table: (heading, key)
PULL_COLUMNS = (("acknowledged", "acknowledged"), ("intact", "intact"), ("lost", "lost"), ("torn", "torn"),
                ("in flight", "in_flight"), ("in flight, torn", "in_flight_torn"), ("old data damaged", "old_damaged"))


def _oldest(ages: Any) -> str:
    return f"{max(ages):.2f} s" if isinstance(ages, list) and ages else "-"


def _pulltest(docs: list[dict]) -> str:
    """Per ``cardbench.pulltest/1`` document: the verdict and the answer in words, a row per pull
    (its counts and how long before the pull the oldest lost write was acknowledged), the sums,
    and what the kernel sent the card (no flush at all on a "write through" cache)."""
    out = []
    for d in docs:
        verdict = str(d.get("verdict") or "unknown")
        when = d.get("finished_at") or d.get("started_at") or ""
        out.append(f"<h3>{_e(_card_name(d))}</h3><p><span class=\"verdict-{_e(verdict)}\">{_e(verdict)}</span>: "
                   f"<b>{_e(d.get('answer') or '')}</b><br><span class=\"note\">{_e(d.get('device') or '')}"
                   f"{', ' if d.get('device') and when else ''}{_e(when)}</span></p>")
        out.append('<table class="pulltest"><thead><tr><th>Pull</th>'
                   + "".join(f"<th>{_e(h)}</th>" for h, _ in PULL_COLUMNS)
                   + "<th>oldest lost write, before the pull</th></tr></thead><tbody>")
        for p in d.get("pulls") or []:
            out.append(f"<tr><td class=num>{_e(p.get('cycle'))}</td>"
                       + "".join(f"<td class=num>{_e(f'{p.get(k, 0):,}')}</td>" for _, k in PULL_COLUMNS)
                       + f"<td class=num>{_e(_oldest(p.get('lost_ages_s')))}</td></tr>")
        if len(d.get("pulls") or []) > 1:
            out.append("<tr><th>all</th>" + "".join(f"<td class=num><b>{_e(f'{d.get(k) or 0:,}')}</b></td>"
                                                    for _, k in PULL_COLUMNS)
                       + f"<td class=num><b>{_e(_oldest(d.get('lost_ages_s')))}</b></td></tr>")
        out.append("</tbody></table>")
        kernel = d.get("kernel") or {}
        notes = []
        if kernel.get("write_cache"):
            notes.append(f"The kernel saw the card's write cache as \"{kernel['write_cache']}\""
                         + (" and sent it flushes (each record: write, then fdatasync)." if kernel.get("flush_sent")
                            else ": it sent no flush at all; a write's completion was its only promise."))
        if d.get("error"):
            notes.append(f"Stopped early: {d['error']}")
        if notes:
            out.append(f'<p class="note">{_e(" ".join(notes))}</p>')
    out.append('<p class="note">Acknowledged: the write and its flush returned before the pull. Lost: it '
               "reads back as older data (the lie); torn: part new, part old. In flight: the write the pull "
               "interrupted (old or new is right; torn is allowed). Old data damaged: records written before "
               "the pull that no longer read back.</p>")
    return "\n".join(out)


def render_html(results: list[Result], verify_docs: list[dict] | None = None, *, rate_unit: str = "MB/s",
                title: str = "cardbench report", geometry_docs: list[dict] | None = None,
                pulltest_docs: list[dict] | None = None, endurance_docs: list[dict] | None = None) -> str:
    """The whole report as one HTML document (a string)."""
    check_rate_unit(rate_unit)
    results = list(results)
    labels = _unique_labels(results)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
             "img-src data:\">",
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
             f"<header><h1>{_e(title)}</h1><p class=\"meta\">{len(results)} run{'s' if len(results) != 1 else ''}; "
             f"generated {_e(now)} by cardbench {_e(__version__)}. Rates in {_e(rate_unit)}; 1X = 150,000 B/s; "
             "sizes in decimal units (1 MB = 10^6 B).</p></header>"]
    parts.append('<section id="drawer"><h2>The drawer</h2>')
    parts.append(_drawer_table(results, rate_unit) if results else "<p>No results.</p>")
    parts.append("</section>")
    if results:
        parts.append('<section id="rates"><h2>Write and read rates</h2>')
        parts.append(bar_chart(_bars(results, labels, "write"), title="Write rate per card (seq_write, median)",
                               rate_unit=rate_unit, color="#1f6fb2", chart_id="write-chart"))
        parts.append(bar_chart(_bars(results, labels, "read"), title="Read rate per card (cold_read, median)",
                               rate_unit=rate_unit, color="#2e8b57", chart_id="read-chart"))
        parts.append('<p class="note">An X on a label is marked on both charts: makers disagree on whether it '
                     'promises read or write speed.</p></section>')
        pos = _curves(results, labels, "raw_read", "positions")
        sus = _curves(results, labels, "sustained_write", "curve")
        if pos or sus:
            parts.append('<section id="curves"><h2>Rate across the card and over time</h2>')
            if pos:
                parts.append(line_chart(pos, title="Read rate against position on the card (raw_read)",
                                        x_label="offset on the device", rate_unit=rate_unit, chart_id="position-chart"))
            if sus:
                parts.append(line_chart(sus, title="Sustained write: rate against bytes written",
                                        x_label="bytes written so far", rate_unit=rate_unit,
                                        chart_id="sustained-chart"))
            parts.append("</section>")
        parts.append('<section id="readers"><h2>Readers</h2>')
        parts.append(_readers(results, rate_unit))
        parts.append("</section>")
    if verify_docs:
        parts.append('<section id="verify"><h2>Fake-capacity checks</h2>')
        parts.append(_verify(list(verify_docs)))
        parts.append("</section>")
    if geometry_docs:
        parts.append('<section id="geometry"><h2>Flash geometry</h2>')
        parts.append(geometry_section(list(geometry_docs)))
        parts.append("</section>")
    if pulltest_docs:
        parts.append('<section id="pulltest"><h2>Pull tests: does it keep what it acknowledged?</h2>')
        parts.append(_pulltest(list(pulltest_docs)))
        parts.append("</section>")
    if endurance_docs:
        parts.append('<section id="endurance"><h2>Endurance: how long does it last?</h2>')
        parts.append(endurance_section(list(endurance_docs), rate_unit=rate_unit))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
