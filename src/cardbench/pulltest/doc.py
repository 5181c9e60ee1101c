"""Judging a pull and the ``cardbench.pulltest/1`` document, with its answer in words.

Per slot (the last record written at each address, as diskchecker.pl keeps the last write per
page) the blocks read back say which record each holds (:func:`cardbench.pulltest.layout.read_block`):

acknowledged, intact     every block is the record's (a write acknowledged in this cycle)
acknowledged, lost       every block is an older record's: the write was acknowledged (write +
                         fdatasync returned) and is not there: the lie
acknowledged, torn       some blocks new, some not (or a block torn inside)
in flight                the write the pull interrupted: all new or all old is right; a mix is
                         counted as ``in_flight_torn`` (allowed, but worth knowing)
old data damaged         a record acknowledged in an earlier cycle (or the old region, written
                         and verified before any pull) that no longer reads back intact

``lost_ages_s``: for every acknowledged write lost or torn, the seconds between its
acknowledgement and the pull (the moment the host saw the card fail; ``pull_window_s`` says how
long after the last acknowledgement that was: the pull happened within that window).
"""

from __future__ import annotations

import datetime as _dt
import statistics
import uuid
from typing import Any

from cardbench import __version__
from cardbench.devices.identity import identify
from cardbench.kinds.pulltest import COUNTS, SCHEMA
from cardbench.pulltest.hostlog import State
from cardbench.result import Card, Reader, host_info, now_iso

VERDICTS = ("keeps", "loses", "inconclusive")


def _judge(blocks: list[int | None], new: int, older: set[int]) -> str:
    """"intact" (all ``new``), "old" (all older records of the slot) or "torn"."""
    if all(b == new for b in blocks):
        return "intact"
    if all(b is not None and b in older for b in blocks):
        return "old"
    return "torn"


def pull_result(state: State, cycle: int, pulled_at: float,
                found: dict[int, list[int | None]]) -> tuple[dict[str, Any], list[int]]:
    """The counts of one pull from what was read back (``found``: address -> record number per
    block); and the addresses to rewrite before the next cycle (not holding their last record)."""
    c: dict[str, Any] = {k: 0 for k in COUNTS}
    ages: list[float] = []
    repair: list[int] = []
    for addr, numbers in state.slots.items():
        blocks = found[addr]
        last = state.records[numbers[-1]]
        older = set(numbers[:-1])
        if blocks and not all(b == last.n for b in blocks):
            repair.append(addr)
        if last.acked is not None:
            judged, rec = _judge(blocks, last.n, older), last
        else:
            # the write in flight: all new or all old is right
            c["in_flight"] += 1
            prev = state.records[numbers[-2]] if len(numbers) > 1 else None
            if prev is None or all(b == last.n for b in blocks) or all(b == prev.n for b in blocks):
                continue
            if all(b in (last.n, prev.n, None) for b in blocks):
                # new and old blocks, or a block torn inside (None): the interrupted write's tear
                c["in_flight_torn"] += 1
                continue
            # a block holds a record older than the one before: that one did not survive either
            c["in_flight_torn"] += int(any(b == last.n for b in blocks))
            judged, rec = ("torn" if any(b == prev.n for b in blocks) else "old"), prev
            if rec.acked is None:
                continue
        if rec.gen == cycle:
            c["acknowledged"] += 1
            if judged == "intact":
                c["intact"] += 1
            else:
                c["lost" if judged == "old" else "torn"] += 1
                ages.append(round(pulled_at - rec.acked, 3))  # type: ignore[operator]
        elif judged != "intact":
            c["old_damaged"] += 1
    c["lost_ages_s"] = sorted(ages, reverse=True)
    c["cycle"] = cycle
    acked = [r.acked for r in state.records.values() if r.gen == cycle and r.acked is not None]
    c["written"] = len(acked)
    c["pulled_at"] = pulled_at
    # the pull happened between the last acknowledgement and the failure the host saw (pulled_at):
    # the ages above may be this much too long (a write hanging on a pulled USB device, say)
    c["pull_window_s"] = round(pulled_at - max(acked), 3) if acked else None
    return c, repair


def verdict_of(pulls: list[dict[str, Any]]) -> str:
    if any(p["lost"] or p["torn"] or p["old_damaged"] for p in pulls):
        return "loses"
    if not pulls or sum(p["acknowledged"] for p in pulls) == 0:
        return "inconclusive"
    return "keeps"


def _n(x: int) -> str:
    return f"{x:,}"


def answer(doc: dict[str, Any]) -> str:
    """The answer in words."""
    pulls = doc["pulls"]
    ack, lost = doc["acknowledged"], doc["lost"] + doc["torn"]
    k = len(pulls)
    pulls_word = f"{k} pull" + ("" if k == 1 else "s")
    if doc["verdict"] == "inconclusive":
        return (f"Inconclusive: no acknowledged write could be judged in {pulls_word} "
                "(was the card pulled before the first write was acknowledged?)")
    if doc["verdict"] == "keeps":
        return f"Keeps what it acknowledges: 0 of {_n(ack)} acknowledged writes lost in {pulls_word}"
    parts = []
    if lost:
        ages = doc["lost_ages_s"]
        losing = sum(1 for p in pulls if p["lost"] or p["torn"])
        parts.append(f"Loses acknowledged writes: {_n(lost)} of {_n(ack)} (up to {max(ages):.1f} s old, median "
                     f"{statistics.median(ages):.1f} s) in {losing} of {pulls_word}"
                     + (f", {_n(doc['torn'])} of them torn" if doc["torn"] else "")
                     + ("; an acknowledged write is not durable on this card (the kernel sends it no flush: "
                        "write cache \"write through\")" if (doc.get("kernel") or {}).get("flush_sent") is False
                        else "; a flush does not make data durable on this card"))
    if doc["old_damaged"]:
        damaged = sum(1 for p in pulls if p["old_damaged"])
        parts.append(("Damages old data" if not lost else "it also damages old data")
                     + f": {_n(doc['old_damaged'])} records written before the pull read back wrong "
                       f"in {damaged} of {pulls_word}")
    return "; ".join(parts)


def build_doc(state: State, target, *, error: str | None = None) -> dict[str, Any]:
    """The ``cardbench.pulltest/1`` document of a test as its log stands."""
    pulls = [state.verified[c]["result"] for c in sorted(state.verified)]
    dev = target.block_device() if target is not None else None
    card = reader = None
    if dev is not None:
        card, reader = Card(), Reader()
        identify(dev, card, reader)
        reader = reader if (reader.vendor_id or reader.name or reader.transport) else None
    start = state.start
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "card_uuid": start["uuid"],
        "started_at": _dt.datetime.fromtimestamp(start["t"], _dt.UTC).isoformat(timespec="seconds"),
        "finished_at": now_iso(),
        "created_at": None,
        "device": target.path if target is not None else None,
        "card": card.to_dict() if card else None,
        "reader": reader.to_dict() if reader else None,
        "kernel": start.get("kernel"),
        "method": {"layout": start["layout"], "mix": start.get("mix"), "sync": "pwritev(O_DIRECT) + fdatasync",
                   "cycles_asked": start.get("cycles"), **(start.get("options") or {})},
        "pulls": pulls,
        "lost_ages_s": sorted((a for p in pulls for a in p["lost_ages_s"]), reverse=True),
        "complete": error is None and len(pulls) >= int(start.get("cycles") or 1),
        "error": error,
        "tool": {"name": "cardbench", "version": __version__},
        "host": host_info(),
    }
    for k in COUNTS:
        doc[k] = sum(p[k] for p in pulls)
    doc["created_at"] = doc["finished_at"]
    doc["verdict"] = verdict_of(pulls)
    doc["answer"] = answer(doc)
    return doc
