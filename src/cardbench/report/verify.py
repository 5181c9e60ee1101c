"""Verify verdicts (``cardbench.verify/1`` documents): the table of stored ones for `cardbench
results` (:func:`render_verify`), and one document as `cardbench verify` prints it
(:func:`render_verify_doc`): first a sentence naming what was found and the command that fixes
it (:func:`verify_sentence`, f3's model), then the details.
"""

from __future__ import annotations

from rich.table import Table

from cardbench.report.drawer import md_table
from cardbench.report.readers import reader_title
from cardbench.report.terminal import Col, fit_table, plain, to_text
from cardbench.units import fmt_rate, fmt_seconds, fmt_size

HEADERS = ["Card", "Reader", "Mode", "Verdict", "Announced", "Usable", "Kind", "Bad ranges", "When", "Notes"]


def verify_cells(doc: dict) -> list[str]:
    card = doc.get("card") or {}
    reader = doc.get("reader") or {}
    target = doc.get("target")
    name = " ".join(str(x) for x in (card.get("brand"), card.get("name") or card.get("model")) if x) \
        or str(doc.get("device") or (target.get("path") if isinstance(target, dict) else target) or "?")
    bad = doc.get("bad_ranges") or []
    notes = []
    if not doc.get("complete", True):
        notes.append("INCOMPLETE: " + str(doc.get("error") or "stopped early"))
    return [name, reader_title(reader.get("name") or reader.get("identity")) if reader else "-", str(doc.get("mode") or "-"),
            str(doc.get("verdict") or "-").upper(), fmt_size(doc.get("announced_bytes")),
            fmt_size(doc.get("usable_bytes")), str(doc.get("kind") or "-"), str(len(bad)) if bad else "-",
            str(doc.get("finished_at") or doc.get("started_at") or "-")[:16], "; ".join(notes)]


def render_verify(docs: list[dict], fmt: str = "table", *, width: int = 150) -> str:
    """The verify table; empty string when there is nothing to show."""
    if not docs:
        return ""
    rows = [verify_cells(d) for d in docs]
    if fmt == "md":
        return "\n" + md_table(HEADERS, rows, right={4, 5, 7}) + "\n"
    drop = {1: 3, 2: 4, 6: 5, 7: 2, 8: 1}
    table = fit_table([Col(h, right=i in (4, 5, 7), drop=drop.get(i)) for i, h in enumerate(HEADERS)], rows,
                      width, title=f"verify verdicts ({len(rows)})")
    return to_text([table, "Sizes: MB = 10^6 B. Usable: what the card really holds from its start (partition "
                           "it to that)."], width)


def verify_sentence(doc: dict, *, mib: bool = False) -> list[str]:
    """What was found, in words, and the fix: "Bad news: this card is a counterfeit (wraparound):
    only 16.8 MB of the 67.1 MB it announces are usable." then "Fix: ..." (f3's ending)."""
    verdict = doc.get("verdict")
    announced, usable = doc.get("announced_bytes"), doc.get("usable_bytes")

    def size(n: int | float | None) -> str:
        return fmt_size(n, binary=mib)

    lines = []
    if not doc.get("complete", True):
        lines.append(f"The check stopped before the end: {plain(doc.get('error') or 'no reason recorded')}; "
                     "what it found so far is below.")
    if verdict == "genuine":
        written = doc.get("written_bytes")
        if doc.get("mode") == "full" and written and announced and written < announced:
            lines.append(f"Good news: this card is genuine: all {size(written)} written to it read back right "
                         f"(it announces {size(announced)}).")
        else:
            lines.append(f"Good news: this card is genuine: all {size(announced)} it announces are usable."
                         if announced else "Good news: this card is genuine.")
        if doc.get("mode") == "quick":
            lines.append("A quick probe samples the card; `cardbench verify --full` checks every sector.")
    elif verdict == "counterfeit":
        kind = f" ({doc['kind']})" if doc.get("kind") else ""
        lines.append(f"Bad news: this card is a counterfeit{kind}: only {size(usable)} of the {size(announced)} "
                     "it announces are usable.")
    elif verdict == "damaged":
        bad = len(doc.get("bad_ranges") or [])
        lines.append(f"Bad news: this card is damaged: {bad} range{'s' if bad != 1 else ''} of it "
                     f"did not read back as written; {size(usable)} from its start are usable.")
    elif verdict:
        lines.append(f"Verdict: {verdict}.")
    elif not doc.get("complete", True):
        lines.append("No verdict: the check stopped before it could tell.")
    fix = doc.get("fix") or {}
    if doc.get("fix_command") and verdict != "genuine":
        lines.append(f"Fix: {doc['fix_command']}")
    elif fix.get("note") and verdict not in (None, "genuine"):
        lines.append(f"Fix: {plain(fix['note'])}")
    return lines


def _sz(n, mib: bool) -> str:
    return "unknown" if n is None else f"{fmt_size(n, binary=mib)} ({n:,} bytes)"


def verify_details(doc: dict, *, mib: bool = False) -> list[tuple[str, str]]:
    """The figures behind the verdict, as (what, value) pairs."""
    unit = "MiB/s" if mib else "MB/s"

    def size(n: int | float | None) -> str:
        return fmt_size(n, binary=mib)

    rows: list[tuple[str, str]] = [("target", str(doc.get("device") or (doc.get("target") or {}).get("path")))]
    card = doc.get("card") or {}
    if card.get("serial") or card.get("model"):
        rows.append(("card", " ".join(str(x) for x in (card.get("brand"), card.get("model"), card.get("serial"))
                                      if x)))
    reader = doc.get("reader") or {}
    if reader.get("vendor_id"):
        rows.append(("reader", f"{reader.get('name') or ''} {reader.get('vendor_id')}:{reader.get('product_id')}"
                     .strip()))
    verdict = doc.get("verdict") or "unknown"
    rows.append(("verdict", verdict.upper() + (f" ({doc['kind']})" if doc.get("kind") else "")))
    if doc.get("tool_verdict"):      # an imported log: what the tool itself said
        rows.append((f"{(doc.get('tool') or {}).get('name') or 'the tool'} said", plain(doc["tool_verdict"])))
    rows.append(("announced", _sz(doc.get("announced_bytes"), mib)))
    rows.append(("usable", _sz(doc.get("usable_bytes"), mib) +
                 (f" ({doc['usable_basis']})" if doc.get("usable_basis") and verdict != "genuine" else "")))
    if doc.get("bad_ranges"):
        rs = doc["bad_ranges"]
        shown = ", ".join(f"[{s:,}, {e:,})" for s, e in rs[:4]) + (f" and {len(rs) - 4} more" if len(rs) > 4 else "")
        space = doc.get("bad_ranges_space")
        rows.append(("bad ranges", shown + (" (positions in the fill, not on the card)" if space == "fill" else "")))
    fix = doc.get("fix") or {}
    if doc.get("fix_command") and fix.get("note"):
        rows.append(("fix", f"{fix.get('tool')}: {plain(fix['note'])}"))
    if doc.get("mode") == "quick":
        m = doc.get("method") or {}
        conf = doc.get("confidence") or {}
        rows.append(("method", f"{m.get('positions_sampled')} positions, {m.get('sample_bytes')} B blocks, "
                               f"cache flush {size(m.get('cache_flush_bytes'))}, {size(m.get('bytes_written'))} "
                               "written" + ("" if m.get("preserved") else " (destructive)")))
        if conf.get("statement"):
            rows.append(("confidence", plain(conf["statement"])))
        cache = doc.get("cache") or {}
        if cache.get("note"):
            rows.append(("card cache", plain(cache["note"])))
        pres = doc.get("preserve") or {}
        if pres.get("status") in ("restored", "kept"):
            rows.append(("preserved", plain(pres.get("message", ""))))
    else:
        rows.append(("checked", f"{size(doc.get('written_bytes'))} written, {size(doc.get('ok_bytes'))} read back "
                                f"right, {size(doc.get('lost_bytes'))} lost"))
        sec = doc.get("sectors") or {}
        bad = {k: v for k, v in sec.items() if k != "ok" and v}
        if bad:
            rows.append(("bad sectors", ", ".join(f"{k} {v:,}" for k, v in bad.items())))
        tim = doc.get("timings") or {}
        rows.append(("rates", f"write {fmt_rate(tim.get('write_bytes_per_s'), unit)}, "
                              f"read {fmt_rate(tim.get('read_bytes_per_s'), unit)} (average over the card)"))
    rows.append(("time", fmt_seconds((doc.get("timings") or {}).get("seconds"))))
    if doc.get("error"):
        rows.append(("error", plain(doc["error"])))
    for n in (doc.get("notes") or [])[:4]:
        rows.append(("note", plain(n)))
    return rows


def render_verify_doc(doc: dict, *, mib: bool = False, width: int = 80) -> str:
    """One verify document as `cardbench verify` prints it: the sentence first, then the details
    and, for full mode, the speed over the card."""
    unit = "MiB/s" if mib else "MB/s"
    title = "cardbench verify (" + ("quick probe" if doc.get("mode") == "quick" else "full check") + ")"
    details = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    details.add_column(no_wrap=True)
    details.add_column()
    for k, v in verify_details(doc, mib=mib):
        details.add_row(k, v)
    parts: list[object] = verify_sentence(doc, mib=mib) + ["", details]
    files = doc.get("files") or []
    if doc.get("mode") == "full" and files:
        step = max(1, len(files) // 32)
        body = []
        for f in files[::step]:
            ok = f.get("ok_bytes") or 0
            body.append([str(f["index"]), fmt_size(f["bytes"], binary=mib),
                         fmt_rate(f.get("write_bytes_per_s"), unit).split()[0],
                         fmt_rate(f.get("read_bytes_per_s"), unit).split()[0],
                         f"{100 * ok / f['bytes']:.0f}%" if f["bytes"] else "-", f.get("error") or ""])
        parts += ["", fit_table([Col("#", right=True), Col("bytes", right=True), Col(f"write {unit}", right=True),
                                 Col(f"read {unit}", right=True), Col("ok", right=True), Col("note")], body, width,
                                title="speed over the card (per file / segment)")]
    return to_text(parts, width)
