"""The server's HTML pages: server-rendered, usable without JavaScript, every typed name escaped.

Tables and charts are the HTML report's own (cardbench.report.html: its drawer cells, bars,
reader and verify sections, CSS; cardbench.report.svg: the charts); this module only lays out
pages and links them. Every text a person typed (card, brand, reader, station) goes through
``_e`` (html.escape) like the report does.
"""

from __future__ import annotations

import statistics
import time
from typing import Any
from urllib.parse import quote, urlencode

from cardbench import __version__
from cardbench.kinds import Kind
from cardbench.report import html as rh
from cardbench.report.drawer import cells, drawer_row, headers, legend
from cardbench.report.endurance import endurance_section
from cardbench.report.readers import reader_title
from cardbench.report.svg import bar_chart
from cardbench.result import Card, Result
from cardbench.units import fmt_rate, fmt_size, rate_in

_e = rh._e
RATE_UNIT = "MB/s"

EXTRA_CSS = """
nav { font-size: 13px; margin-bottom: 12px; } nav a { margin-right: 14px; }
form.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin: 8px 0; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
.scroll { overflow-x: auto; } .pager a { margin-right: 12px; }
tr.new td { background: #eef8ee; } tr.ended td { color: #666; }
@media (max-width: 640px) { body { margin: 8px auto; } th, td { padding: 3px 4px; font-size: 12px; }
  .wide { display: none; } table { display: block; overflow-x: auto; max-width: 100%; } }
"""


def page(title: str, body: str, *, head_extra: str = "", scripts: tuple[str, ...] = ()) -> str:
    tags = "".join(f'<script src="{_e(s)}" defer></script>' for s in scripts)
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)} · cardbench</title>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{rh.CSS}{EXTRA_CSS}</style>{head_extra}{tags}</head><body>"
            '<nav><a href="/">Drawer</a><a href="/readers">Readers</a><a href="/live">Live</a>'
            '<a href="/api/v1/results">JSON</a></nav>'
            f"<header><h1>{_e(title)}</h1></header>\n{body}\n"
            f'<p class="meta">cardbench {_e(__version__)} station server. Rates in {_e(RATE_UNIT)}; '
            "1X = 150,000 B/s.</p></body></html>\n")


def card_url(identity: str) -> str:
    return "/card/" + quote(identity, safe="")


def reader_url(identity: str) -> str:
    return "/reader/" + quote(identity, safe="")


def model_url(key: str) -> str:
    return "/model/" + quote(key, safe="")


def model_key(card: Card) -> str:
    """What cards of one model share: the ATA model of a CF card; the register/USB model the device
    reported (CID name or USB product), with its maker; else brand + name + capacity + label."""
    return model_key_of_row({"identity": card.identity(), "brand": card.brand, "name": card.name,
                             "capacity_bytes": card.capacity_bytes, "label": card.label, "model": card.model},
                            ata_model=(card.ata or {}).get("model"))


def model_key_of_row(row: dict, ata_model: str | None = None) -> str:
    """:func:`model_key` of a row of the store's ``cards`` table (a CF card's ATA model is the
    first part of its identity, ``ata:MODEL|SERIAL|SECTORS``)."""
    ident = str(row.get("identity") or "")
    if ata_model is None and ident.startswith("ata:"):
        ata_model = ident[4:].split("|", 1)[0]
    if ata_model:
        return f"ata:{ata_model}"
    if row.get("model"):
        return f"model:{row.get('brand') or ''}|{row['model']}"
    return (f"user:{row.get('brand') or ''}|{row.get('name') or ''}|{row.get('capacity_bytes') or ''}|"
            f"{row.get('label') or ''}")


def drawer_table(results: list[Result], stations: dict[str, str] | None = None, *, table_id: str = "drawer-table",
                 link: bool = True) -> str:
    head = headers(RATE_UNIT)
    narrow_hidden = set(head[3:6])          # write file, write runs, average write: dropped on a phone
    head = [head[0], "Reader", *head[1:]]
    if stations is not None:
        head = ["Station", *head]
    out = [f'<div class="scroll"><table class="drawer" id="{_e(table_id)}"><thead><tr>'
           + "".join(f'<th{" class=wide" if h in narrow_hidden else ""}>{_e(h)}</th>' for h in head)
           + "</tr></thead><tbody>"]
    out += [drawer_tr(r, stations, link=link) for r in results]
    out.append("</tbody></table></div>")
    out.append(f'<p class="legend">{_e(legend(RATE_UNIT))}</p>')
    return "\n".join(out)


def drawer_tr(r: Result, stations: dict[str, str] | None = None, *, link: bool = True, cls: str = "") -> str:
    row = drawer_row(r)
    cs = cells(row, RATE_UNIT)
    tds = []
    if stations is not None:
        tds.append(f"<td>{_e(stations.get(r.id, '-'))}</td>")
    for i, c in enumerate(cs[:-1]):
        text = _e(c)
        if i == 0 and link:
            text = f'<a href="{_e(card_url(r.card.identity()))}">{text}</a>'
        cls_ = ' class="num wide"' if 3 <= i <= 5 else " class=num" if 6 <= i <= 9 else ""
        tds.append(f"<td{cls_}>{text}</td>")
        if i == 0:
            name = _e(reader_title(r.reader.name or r.reader.identity()))
            tds.append(f'<td><a href="{_e(reader_url(r.reader.identity()))}">{name}</a></td>' if link
                       else f"<td>{name}</td>")
    tds.append(f"<td>{_e(' '.join(row.notes()))}</td>")
    state = "complete" if row.complete else "incomplete"
    return f'<tr class="{state} {cls}" id="run-{_e(r.id)}">' + "".join(tds) + "</tr>"


def drawer_page(results: list[Result], *, filters: dict[str, str], page_no: int, has_next: bool,
                stations: dict[str, str]) -> str:
    f = {k: v for k, v in filters.items() if v}
    form = ('<form class="filters" method="get" action="/">'
            + "".join(f'<label>{_e(k)}<input name="{k}" value="{_e(filters.get(k) or "")}"></label>'
                      for k in ("card", "reader", "since"))
            + '<button type="submit">Filter</button></form>')
    pager = []
    if page_no > 1:
        pager.append(f'<a href="/?{_e(urlencode({**f, "page": page_no - 1}))}">newer</a>')
    if has_next:
        pager.append(f'<a href="/?{_e(urlencode({**f, "page": page_no + 1}))}">older</a>')
    body = (form + f"<p class=meta>Page {page_no}, newest first; the same filters as "
            "<code>cardbench results</code>.</p>"
            + (drawer_table(results, stations) if results else "<p>No results.</p>")
            + f'<p class="pager">{"".join(pager)}</p>')
    return page("The drawer, all stations", body)


def _when_labels(results: list[Result]) -> list[str]:
    return [f"{r.started_at[:16].replace('T', ' ')} ({r.id[:6]})" for r in results]


#: kinds a card page shows with a table of their own (heading, renderer); the other listed kinds
#: (cardbench.kinds) as one line each: when, and the answer in words
CARD_TABLES = {"verify": ("Fake-capacity checks", rh._verify),
               "endurance": ("Endurance runs", lambda docs: endurance_section(docs, rate_unit=RATE_UNIT))}


def records_section(kind: Kind, docs: list[dict]) -> str:
    """The records of one kind on a card's page."""
    heading, render = CARD_TABLES.get(kind.name, (f"{kind.title[:1].upper()}{kind.title[1:]}s", None))
    if render is not None:
        return f"<h2>{_e(heading)}</h2>" + render(docs)
    rows = "".join(f"<tr><td>{_e(str(kind.created(d) or '-')[:16].replace('T', ' '))}</td>"
                   f"<td>{_e(kind.summary(d))}</td></tr>" for d in docs)
    return (f"<h2>{_e(heading)}</h2><table><thead><tr><th>When</th><th>Answer</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def row_label(row: dict) -> str:
    """A card as its row in the store names it (brand and name, size, label): the names of the
    station that names it (cardbench.server.tokens)."""
    text = " ".join(str(row[k]) for k in ("brand", "name") if row.get(k)) or row.get("model") or row.get("serial") \
        or row.get("identity") or "(unnamed card)"
    cap = row.get("capacity_bytes")
    size = fmt_size(cap) if isinstance(cap, int) and cap > 0 else None
    return " ".join(str(p) for p in (text, size, row.get("label")) if p)


def other_names(row: dict | None, results: list[Result], stations: dict[str, str]) -> str:
    """The names other stations gave the card in their own records, shown as theirs."""
    if row is None:
        return ""
    mine = row_label(row)
    seen: dict[tuple[str, str], None] = {}
    for r in results:
        label = rh.card_label(r)
        if label != mine:
            seen[(stations.get(r.id, "-"), label)] = None
    if not seen:
        return ""
    items = "".join(f"<li>station {_e(st)}: {_e(label)}</li>" for st, label in seen)
    return f'<div id="other-names"><p class=meta>Named otherwise in some records (each station\'s own view):</p><ul>{items}</ul></div>'


def card_page(identity: str, results: list[Result], records: list[tuple[Kind, list[dict]]],
              stations: dict[str, str], row: dict | None = None, namer: str | None = None) -> str:
    """A card's page: its runs, then the records of every listed kind that name it. Its title is
    its row's (the names of the station that names it, ``namer``), other names each station's own."""
    records = [(k, docs) for k, docs in records if docs]
    if not results and not records:
        return page("No such card", f"<p>No record names card {_e(identity)}.</p>")
    title = row_label(row) if row else rh.card_label(results[-1]) if results else identity
    body = [f"<p class=meta>Card <code>{_e(identity)}</code>"]
    if namer:
        body.append(f" · named by station {_e(namer)}")
    if results:
        mk = model_key(results[-1].card)
        body.append(f' · <a href="{_e(model_url(mk))}">its model among others</a>')
    body.append("</p>")
    body.append(other_names(row, results, stations))
    if results:
        labels = _when_labels(results)
        body.append("<h2>Every run, over time</h2>" + drawer_table(results, stations))
        body.append(bar_chart(rh._bars(results, labels, "write"), title="Write rate per run (seq_write, median)",
                              rate_unit=RATE_UNIT, color="#1f6fb2", chart_id="write-chart"))
        body.append(bar_chart(rh._bars(results, labels, "read"), title="Read rate per run (cold_read, median)",
                              rate_unit=RATE_UNIT, color="#2e8b57", chart_id="read-chart"))
        body.append("<h2>Verdicts</h2>" + _verdicts(results))
        body.append("<h2>Readers it went through</h2>" + rh._readers(results, RATE_UNIT))
    body += [records_section(k, docs) for k, docs in records]
    return page(title, "\n".join(body))


def _verdicts(results: list[Result]) -> str:
    out = ["<table><thead><tr><th>Run</th><th>Claim</th><th>Verdict</th><th>Why</th></tr></thead><tbody>"]
    n = 0
    for r in results:
        for c in r.claims or []:
            c = c if isinstance(c, dict) else getattr(c, "__dict__", {})
            n += 1
            out.append(f"<tr><td>{_e(r.started_at[:16])}</td><td>{_e(c.get('claim') or c.get('label') or '')}</td>"
                       f"<td>{_e(c.get('verdict') or '')}</td><td>{_e(c.get('reason') or c.get('why') or '')}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out) if n else "<p>No label claims were judged.</p>"


def _spread(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    if not values:
        return {}
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) >= 2 else [values[0]] * 3
    return {"median": statistics.median(values), "low": values[0], "high": values[-1], "q1": q[0], "q3": q[2]}


def model_page(key: str, results: list[Result], this_card: str | None) -> str:
    if not results:
        return page("No such card model", f"<p>No card of model {_e(key)}.</p>")
    best: dict[str, Result] = {}
    for r in results:      # each card's latest run stands for it
        best[r.card.identity()] = r
    cards = list(best.values())
    body = [f"<p class=meta>Cards sharing the model identity <code>{_e(key)}</code>: {len(cards)} "
            f"card{'s' if len(cards) != 1 else ''}, {len(results)} runs. Each card's latest run stands for it.</p>"]
    body.append('<table id="model-figures"><thead><tr><th>Figure</th><th>Median</th><th>Spread (lowest, '
                'quartiles, highest)</th><th>This card</th><th>Where it falls</th></tr></thead><tbody>')
    for which in ("write", "read"):
        vals = {i: getattr(drawer_row(r), f"{which}_bytes_per_s") for i, r in best.items()}
        vals = {i: v for i, v in vals.items() if v}
        s = _spread(list(vals.values()))
        if not s:
            continue
        mine = vals.get(this_card or "")
        fmt = lambda v: f"{rate_in(v, RATE_UNIT):.3g}"  # noqa: E731
        if mine is not None:
            rank = sum(1 for v in vals.values() if v > mine) + 1
            where = f"#{rank} of {len(vals)} (1 = fastest)" if len(vals) > 1 else "the only one"
        else:
            where = "-"
        body.append(f"<tr><td>{which} ({_e(RATE_UNIT)})</td><td class=num>{fmt(s['median'])}</td>"
                    f"<td class=num>{fmt(s['low'])}, {fmt(s['q1'])} to {fmt(s['q3'])}, {fmt(s['high'])}</td>"
                    f"<td class=num>{fmt(mine) if mine else '-'}</td><td>{_e(where)}</td></tr>")
    body.append("</tbody></table>")
    labels = [("▶ " if r.card.identity() == this_card else "") + rh.card_label(r) + f" ({r.id[:6]})" for r in cards]
    body.append(bar_chart(rh._bars(cards, labels, "write"), title="Write rate per card of this model",
                          rate_unit=RATE_UNIT, color="#1f6fb2", chart_id="model-write-chart"))
    body.append(bar_chart(rh._bars(cards, labels, "read"), title="Read rate per card of this model",
                          rate_unit=RATE_UNIT, color="#2e8b57", chart_id="model-read-chart"))
    body.append("<h2>The cards</h2>" + drawer_table(cards, None))
    name = rh.card_label(cards[-1])
    return page(f"Card model: {name}", "\n".join(body))


def reader_page(identity: str, results: list[Result], row: dict | None = None) -> str:
    """A reader's page, named by its row in the store (the station that named it first)."""
    if not results:
        return page("No such reader", f"<p>No run went through reader {_e(identity)}.</p>")
    name = (row or {}).get("name") or results[-1].reader.name or identity
    body = [f"<p class=meta>Reader <code>{_e(identity)}</code>: {len(results)} runs.</p>",
            "<h2>Ceiling and evidence</h2>", rh._readers(results, RATE_UNIT),
            "<h2>Runs through it</h2>", drawer_table(results, None)]
    return page(f"Reader: {name}", "\n".join(body))


def readers_page(readers: list[dict]) -> str:
    rows = "".join(f'<tr><td><a href="{_e(reader_url(r["identity"]))}">{_e(r.get("name") or r["identity"])}</a></td>'
                   f"<td>{_e(r.get('transport') or '')}</td></tr>" for r in readers)
    return page("Readers", f"<table id=readers-list><thead><tr><th>Reader</th><th>Transport</th></tr></thead>"
                           f"<tbody>{rows}</tbody></table>")


def live_index(stations: dict[str, list[dict]]) -> str:
    """Every station and every card it sends progress for (the store's live rows)."""
    items = []
    for st, rows in stations.items():
        cards = "".join(f'<li data-key="{_e(r["card_key"])}">{_e(card_line(r))}</li>' for r in rows)
        items.append(f'<li class="station" data-station="{_e(st)}"><a href="/live/{_e(quote(st, safe=""))}">'
                     f'{_e(st)}</a>' + (f"<ul>{cards}</ul>" if cards else "") + "</li>")
    head = '<meta http-equiv="refresh" content="10">'
    body = (f'<ul id="live-stations">{"".join(items)}</ul>' if items else "<p>No station has shared yet.</p>")
    return page("Live stations", body + "<p class=meta>This page reloads itself every 10 s.</p>", head_extra=head)


CARD_HEADS = ("Card", "Task", "Done", "Round", "Written", "Rate", "Bad", "Ends in", "Updated", "State")


def _clock(epoch: float | None) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch)) if epoch else ""


def _duration(s: float | None) -> str:
    if s is None:
        return ""
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d} h" if s >= 3600 else f"{s // 60}:{s % 60:02d} min"


def card_cells(row: dict) -> list[str]:
    """A card's live row as texts (the page and its script set them as text, never markup)."""
    done, total = row.get("done"), row.get("total")
    far = ("" if row.get("ended") else f"{100 * done / total:.0f}%" if done is not None and total
           else fmt_size(done) if done is not None else "")      # an ended card: its State says so
    bad = row.get("bad_fraction")
    task = " ".join(dict.fromkeys(x for x in (row.get("kind"), row.get("task")) if x))      # not "endurance endurance"
    return [row.get("label") or row["card_key"] or "the station", task, far,
            str(row["round_no"]) if row.get("round_no") is not None else "",
            fmt_size(row["bytes_written"]) if row.get("bytes_written") is not None else "",
            fmt_rate(row["rate_bytes_per_s"], RATE_UNIT) if row.get("rate_bytes_per_s") is not None else "",
            f"{100 * bad:.3g}%" if bad is not None else "", _duration(row.get("eta_s")), _clock(row.get("at_epoch")),
            f"finished: {row['ended']}" if row.get("ended") else "running"]


def card_line(row: dict) -> str:
    """A live row in one line (the /live index); a station's own progress (no card key) as "Now"."""
    c = card_cells(row)
    if row["card_key"] == "":
        return " ".join(p for p in ("Now:", c[1], c[2], c[8]) if p)
    parts = [c[0] + ":", c[1], c[2], f"round {c[3]}" if c[3] else "", c[9], c[8]]
    return " ".join(p for p in parts if p)


def cards_table(rows: list[dict]) -> str:
    rows = [r for r in rows if r["card_key"] != ""]
    trs = "".join(f'<tr data-key="{_e(r["card_key"])}" data-done="{_e(str(r["done"]) if r.get("done") is not None else "")}"'
                  f'{" class=ended" if r.get("ended") else ""}>'
                  + "".join(f"<td>{_e(c)}</td>" for c in card_cells(r)) + "</tr>" for r in rows)
    return ('<div class="scroll"><table id="live-cards"><thead><tr>'
            + "".join(f"<th>{_e(h)}</th>" for h in CARD_HEADS) + f"</tr></thead><tbody>{trs}</tbody></table></div>")


def live_page(station: str, results: list[Result], current: dict | None, cards: list[dict] | None = None) -> str:
    """A station's live page: its own progress, its cards' progress, what it shared last, its rows."""
    cards = cards or []
    own = next((r for r in cards if r["card_key"] == ""), None)
    now = _current(current)
    body = (f'<p class=meta>Station <b>{_e(station)}</b>. New rows appear as the station shares them '
            '(server-sent events); without JavaScript, this page reloads itself every 10 s.</p>'
            f'<p id="progress"><b>{_e(progress_text(own))}</b></p>'
            + "<h2>Cards</h2>" + cards_table(cards)
            + f'<p id="now">{now}</p>' + drawer_table(results, None, table_id="live-table"))
    head = '<noscript><meta http-equiv="refresh" content="10"></noscript>'
    return page(f"Live: {station}", body, head_extra=head, scripts=("/static/live.js",))


def current_text(current: dict | None) -> str:
    """What the station did last, as plain text (the live script sets it as text, never markup)."""
    if not current:
        return "Waiting for the next card."
    return f"Last: {current.get('card') or '?'} ({current.get('what') or 'result'}) at {current.get('at') or ''}"


def progress_text(ev: dict | None) -> str:
    """What the station is doing now (its card and task, how far), as plain text."""
    if not ev:
        return "No test running that this server was told of."
    done, total = ev.get("done"), ev.get("total")
    far = f" {100 * done / total:.0f}%" if done is not None and total else ""
    return f"Now ({_clock(ev.get('at_epoch'))}): {ev.get('task') or ''}{far}"


def _current(current: dict | None) -> str:
    return _e(current_text(current))


LIVE_JS = """
(function () {
  var table = document.querySelector('#live-table tbody');
  if (!table || !window.EventSource) return;
  var newest = table.querySelector('tr[id^="run-"]');
  var after = newest ? newest.id.slice(4) : '';
  var src = new EventSource(location.pathname.replace(/\\/$/, '') + '/events?after=' + encodeURIComponent(after));
  src.addEventListener('row', function (ev) {
    var msg = JSON.parse(ev.data);
    if (document.getElementById('run-' + msg.id)) return;
    table.insertAdjacentHTML('afterbegin', msg.html);
    var now = document.getElementById('now');
    if (now) now.textContent = msg.now;
  });
  src.addEventListener('progress', function (ev) {
    var el = document.getElementById('progress');
    if (el) el.textContent = JSON.parse(ev.data).text;
  });
  src.addEventListener('now', function (ev) {
    var el = document.getElementById('now');
    if (el) el.textContent = JSON.parse(ev.data).text;
  });
  src.addEventListener('card', function (ev) {
    var msg = JSON.parse(ev.data);
    var body = document.querySelector('#live-cards tbody');
    if (!body) return;
    var tr = null;
    for (var i = 0; i < body.rows.length; i++) {
      if (body.rows[i].getAttribute('data-key') === msg.key) { tr = body.rows[i]; break; }
    }
    if (!tr) {
      tr = document.createElement('tr');
      tr.setAttribute('data-key', msg.key);
      body.appendChild(tr);
    }
    tr.className = msg.ended ? 'ended' : '';
    while (tr.cells.length < msg.cells.length) tr.insertCell(-1);
    for (var j = 0; j < msg.cells.length; j++) tr.cells[j].textContent = msg.cells[j];
    tr.setAttribute('data-done', msg.done === null ? '' : String(msg.done));
  });
})();
"""
