"""The ``cardbench.endurance/1`` document of an endurance run, from its host state, with its
answer in words, milestones, totals and the rated comparison (see docs/formats.md for the fields).

The document is built the same way whether the run goes on (``ended`` None, ``complete`` False: the
``round`` event's document, stored as each round ends under the run's one record id, so each newer
document replaces its older self) or is over."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from cardbench import __version__
from cardbench.kinds.endurance import CLASSES, ENDINGS, MILESTONES, SCHEMA, VERDICTS
from cardbench.kinds.shapes import card_words
from cardbench.result import host_info, now_iso
from cardbench.units import fmt_size

__all__ = ["CLASSES", "ENDINGS", "MILESTONES", "SCHEMA", "VERDICTS", "answer", "build_doc", "milestones",
           "round_line"]

#: a class as the answer phrases it (what each class means: kinds.endurance.CLASS_WORDS) ("stale data in 14 sectors (lost writes)")
CLASS_PHRASES = {
    "erased": "erased sectors (00/FF: writes that never reached the flash) in {n}",
    "stale": "stale data in {n} (lost writes)",
    "misplaced": "misplaced data in {n} (wrong addressing)",
    "foreign": "another card's data in {n} (mixed-up cards)",
    "corrupt": "corrupt data in {n}",
    "unreadable": "{n} unreadable (I/O errors)",
}


def milestone_name(fraction: float) -> str:
    if fraction == 0.0:
        return "first error"
    return f"{fraction * 100:g}% bad"


def empty_counts() -> dict[str, int]:
    return {c: 0 for c in CLASSES}


def _sectors(n: int) -> str:
    return f"{n:,} sector" + ("" if n == 1 else "s")


def _full(nbytes: int, capacity: int) -> str:
    fw = nbytes / capacity if capacity else 0.0
    text = f"{fw:,.0f}" if fw >= 10 else f"{fw:,.1f}".replace(".0", "") if fw >= 1 else f"{fw:.2f}"
    return f"{text} full write" + ("" if text == "1" else "s") + f" ({fmt_size(nbytes)})"


def card_name(doc: dict[str, Any]) -> str:
    """"SanDisk 32.0 GB": the card in words, with its capacity (decimal)."""
    card = doc.get("card")
    words = card_words(card) if isinstance(card, dict) and (card.get("brand") or card.get("name")) else ""
    size = fmt_size(doc.get("capacity_bytes") or 0).replace(".0 ", " ")
    return f"{words} {size}" if words else f"{size} card"


def answer(doc: dict[str, Any]) -> str:
    """The answer in words (both of the issue's forms, and the endings that are findings)."""
    cap = doc["capacity_bytes"]
    ended = doc.get("ended")
    rounds = doc["rounds"]
    name = card_name(doc)
    probe = (doc.get("method") or {}).get("fake_check") or {}
    if ended == "counterfeit":
        return (f"{name}: counterfeit ({probe.get('kind') or 'fake capacity'}: "
                f"{fmt_size(probe.get('usable_bytes'))} usable) - not worn, wearing out a fake says nothing")
    if not rounds:
        if ended == "read_only":
            return f"{name}: read-only before the first round ended; nothing could be worn"
        if ended == "dead":
            return f"{name}: stopped answering before the first round ended"
        return f"{name}: no round finished yet"
    so_far = "so far: " if ended in (None, "interrupted") else ""
    first = next((m for m in doc["milestones"] if m["what"] == "first error"), None)
    if first is None:
        text = f"{name}: {so_far}{_full(doc['bytes_written'], cap)} with no error"
    else:
        r = rounds[first["round"] - 1] if 0 < first["round"] <= len(rounds) else rounds[-1]
        bad = {k: v for k, v in r["bad_sectors"].items() if v}
        order = sorted(bad, key=lambda k: -bad[k])
        what = "; ".join(CLASS_PHRASES[k].format(n=_sectors(bad[k])) for k in order[:2])
        text = f"{name}: {so_far}first error after {_full(first['bytes_written'], cap)}: {what}"
        later = [m for m in doc["milestones"] if m["what"] != "first error"]
        if later:
            m = later[-1]
            text += f"; {m['what']} after {m['bytes_written'] / cap:,.0f}" if cap else ""
    if ended == "read_only":
        text += f"; then it turned read-only (after {_full(doc['bytes_written'], cap)})"
    elif ended == "dead":
        text += "; then it stopped answering"
    slow = doc.get("read_slowdown")
    if slow is not None and len(rounds) > 1 and abs(slow) >= 0.01:
        text += (f"; reads slowed {slow * 100:.0f}% since round 1" if slow > 0
                 else f"; reads {-slow * 100:.0f}% faster than in round 1")
    rated = doc.get("rated") or {}
    if rated.get("used_fraction") is not None:
        text += f"; {rated['used_fraction'] * 100:.0f}% of its rating"
    return text


def verdict_of(doc: dict[str, Any]) -> str:
    ended = doc.get("ended")
    if ended in ("counterfeit", "dead", "interrupted"):
        return ended
    if ended == "read_only":
        return "read-only"
    return "worn" if doc.get("first_error_round") is not None else "no error"


def rated(opts: dict[str, Any], bytes_written: int) -> dict[str, Any] | None:
    """The rating the run is set against (``--rated-tbw``, ``--rated-video HOURS@MBPS``), or None."""
    tbw, video = opts.get("rated_tbw"), opts.get("rated_video")
    if tbw is None and video is None:
        return None
    hours, mbps = (video or (None, None))
    rated_bytes = None
    if tbw is not None:
        rated_bytes = int(tbw * 1e12)
    elif hours is not None and mbps is not None:
        rated_bytes = int(hours * 3600 * mbps * 1e6 / 8)
    return {"tbw": tbw, "video_hours": hours, "video_mbps": mbps, "rated_bytes": rated_bytes,
            "used_fraction": round(bytes_written / rated_bytes, 6) if rated_bytes else None}


def build_doc(state: dict[str, Any], *, error: str | None = None) -> dict[str, Any]:
    """The ``cardbench.endurance/1`` document of a run as its state stands."""
    rounds = [dict(r) for r in state["rounds"]]
    cap = state["capacity_bytes"]
    total = sum(r["bytes_written"] for r in rounds) + int((state.get("current") or {}).get("bytes_written") or 0)
    ended = state.get("ended")
    first = next((r["round"] for r in rounds if r["bad_total"]), None)
    read1 = rounds[0]["read_bytes_per_s"] if rounds else None
    slow = None
    if read1 and len(rounds) > 1 and rounds[-1]["read_bytes_per_s"]:
        slow = round(1 - rounds[-1]["read_bytes_per_s"] / read1, 4)
    opts = state["options"]
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "id": state["record_id"],
        "created_at": None,
        "started_at": _dt.datetime.fromtimestamp(state["started_t"], _dt.UTC).isoformat(timespec="seconds"),
        "finished_at": now_iso(),
        "tool": {"name": "cardbench", "version": __version__},
        "host": host_info(),
        "card": state.get("card"),
        "reader": state.get("reader"),
        "device": state["device"],
        "capacity_bytes": cap,
        "sector_bytes": 512,
        "card_uuid": state["card_uuid"],
        "options": {k: opts.get(k) for k in ("rounds", "hours", "until_bad", "slices", "request_bytes")},
        "rated": rated(opts, total),
        "rounds": rounds,
        "first_error_round": first,
        "milestones": milestones(rounds),
        "bytes_written": total,
        "full_writes": round(total / cap, 4) if cap else 0.0,
        "read_slowdown": slow,
        "ended": ended,
        "complete": ended is not None and ended != "interrupted" and error is None,
        "error": error if error is not None else state.get("error"),
        "method": state["method"],
    }
    doc["created_at"] = doc["finished_at"]
    doc["verdict"] = verdict_of(doc)
    doc["answer"] = answer(doc)
    return doc


def milestones(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first error, then each of :data:`MILESTONES` reached: its first round and the bytes
    written by the end of it, in order."""
    out = []
    total = 0
    todo = [0.0, *MILESTONES]
    for r in rounds:
        total += r["bytes_written"]
        while todo and ((todo[0] == 0.0 and r["bad_total"] > 0) or (todo[0] > 0 and r["bad_fraction"] >= todo[0])):
            f = todo.pop(0)
            out.append({"what": milestone_name(f), "bad_fraction": f, "round": r["round"], "bytes_written": total})
    return out


def round_line(r: dict[str, Any]) -> str:
    """A round in one line of at most 80 columns."""
    bad = ", ".join(f"{k} {v:,}" for k, v in r["bad_sectors"].items() if v)
    return (f"round {r['round']:>4}: write {r['write_bytes_per_s'] / 1e6:7.1f} MB/s, read "
            f"{r['read_bytes_per_s'] / 1e6:7.1f} MB/s, bad {r['bad_fraction'] * 100:.3g}%"
            + (f" ({bad})" if bad else ""))[:80]
