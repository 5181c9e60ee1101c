"""Many cards at once (issue 31, section 3): :func:`endure_many` runs :func:`run_endurance` on each
card in its own worker thread (started with :func:`cardbench.signals.start_thread`), while this
thread (the caller's, the one that gets Ctrl-C) keeps each card's row for the live table, hands
each finished round's document to ``save`` and each card's progress to ``live``.

Threads, not processes: the sector work is numpy on whole requests (the GIL is let go in it) and
the I/O waits in the kernel. Measured with ``bench/endure_many.py`` (four 16 MiB emulated cards,
3 rounds, on the shared 2-core machine at a load of 9-10): paced at 40/80 MB/s, each card kept its
lone rate in threads (write 37.6, read 71.6 MB/s per card; alone 36.0/65.5; four processes
34.9/63.0); not paced, threads and processes traded places between runs (122-294 MB/s write per
card in threads, 158-250 in processes): the load's noise, no winner. One process also keeps one
store connection, one outbox, one live client and one Ctrl-C (tests/endure/test_endure_many.py
checks four paced cards keep their lone speed).

Ctrl-C (or SIGTERM, which :mod:`cardbench.signals` turns into :class:`Interrupted`) sets the shared
stop event (it is taken only while this thread waits: everything else it does, the store and the
queue included, runs with the signals held, so no lock is left held by an interrupt): every card ends after its current slice, ``ended: "interrupted"``, its state kept for
``--resume``, and its document is saved like the others before :func:`endure_many` returns.
A second Ctrl-C does not cut that short (a slice takes a second or so).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from cardbench.endure.run import EndureOptions, card_and_reader, run_endurance
from cardbench.errors import CardbenchError, Interrupted
from cardbench.result import Card
from cardbench.signals import signals_held, start_thread
from cardbench.target import DeviceTarget

#: how often the live table is redrawn (seconds)
REFRESH = 0.5


@dataclass
class CardRow:
    """One card's line of the live table (and its end)."""

    device: str
    key: str                       # stable for the run: the card's identity, else its device
    label: str
    identity: dict | None = None   # the card as a record has it (announced to the live page)
    round: int = 0                 # the round under way (or the last one, once it ended)
    phase: str = ""
    done_bytes: int | None = None   # of the phase under way
    round_bytes: int | None = None  # the card's bytes: a phase's whole
    bytes_written: int = 0
    rate_bytes_per_s: float | None = None
    bad_fraction: float | None = None
    eta_s: float | None = None
    state: str = "starting"        # starting, write, read, paused, ended, failed
    ended: str | None = None
    doc: dict | None = None        # its newest document (the last round's, then the final one)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "doc"}


@dataclass
class ManyResult:
    """What :func:`endure_many` did: each card's row (in the order given) and final document."""

    rows: list[CardRow]
    interrupted: bool = False

    @property
    def docs(self) -> list[dict]:
        return [r.doc for r in self.rows if r.doc is not None]


def _label(target: DeviceTarget) -> tuple[str, str, dict | None]:
    """(key, label, identity) of a card: the card as its record will have it (identity: its
    ``Card.to_dict()``), keyed by its identity (serial, CID; else its size), labelled by its
    device and its name."""
    card, _reader = card_and_reader(target)
    if card is None:
        return target.path, target.path, None
    c = Card.from_dict(card)
    words = " ".join(str(x) for x in (c.brand, c.name, c.model) if x)
    return c.identity(), f"{target.path} {words}".strip(), card


def endure_many(targets: list[DeviceTarget], opts: EndureOptions, *,
                save: Callable[[dict], Any] | None = None,
                live: Callable[[CardRow], None] | None = None,
                show: Callable[[list[CardRow]], None] | None = None,
                say: Callable[[str], None] | None = None,
                run: Callable[[DeviceTarget, EndureOptions], dict] = run_endurance) -> ManyResult:
    """An endurance run on every card of ``targets`` at once (each confirmed by the caller), each
    with ``opts`` (its own copy: its events, its say, the one shared stop event).

    ``save(doc)``: each round's document as the round ends, then each card's final document (the
    caller stores it: store, else outbox, shared); called in this thread only, so a store is never
    written from two threads. ``live(row)``: a card's row whenever it changed (the live page).
    ``show(rows)``: every row, every :data:`REFRESH` s and at the end (the live table). ``say``: a
    card's own lines, prefixed with its device. ``run``: the single-card run (tests pass a wrapper).

    Returns when every card has ended; Ctrl-C stops them all after their current slice (see the
    module) and :attr:`ManyResult.interrupted` says so."""
    stop = opts.stop or threading.Event()
    inbox: queue.Queue[tuple[int, str, dict]] = queue.Queue()
    rows: list[CardRow] = []
    for t in targets:
        key, label, identity = _label(t)
        rows.append(CardRow(device=t.path, key=key, label=label, identity=identity))
    keys = [r.key for r in rows]
    for r in rows:                               # two cards without identity would share a key
        if keys.count(r.key) > 1:
            r.key = f"{r.key}@{r.device}"

    def worker(i: int, target: DeviceTarget) -> None:
        def events(name: str, details: dict) -> None:
            inbox.put((i, name, details))

        def said(line: str) -> None:
            inbox.put((i, "say", {"line": line}))

        own = dataclasses.replace(opts, events=events, say=said, stop=stop)
        try:
            doc = run(target, own)
            inbox.put((i, "done", {"document": doc}))
        except CardbenchError as e:
            inbox.put((i, "failed", {"error": e.message, "document": e.partial if isinstance(e.partial, dict)
                                     else None}))
        except Exception as e:  # noqa: BLE001 - one card's failure is that card's, the others go on
            inbox.put((i, "failed", {"error": f"{type(e).__name__}: {e}", "document": None}))

    threads = [threading.Thread(target=worker, args=(i, t), name=f"cardbench-endure-{i}", daemon=True)
               for i, t in enumerate(targets)]
    interrupted = False
    for th in threads:
        start_thread(th)
    last_show = 0.0

    def interrupt() -> None:
        nonlocal interrupted
        if not interrupted and say is not None:
            say("Stopping every card after its current slice (its state is kept for --resume)...")
        interrupted = True
        stop.set()

    while True:
        try:
            # all but the wait with Ctrl-C held (its Python handler swapped for one that records):
            # an interrupt inside a queue's, a store's or a thread's lock would leave it held
            with signals_held() as got:
                took = _drain(inbox, rows, save, live, say)
                over = all(not th.is_alive() for th in threads) and inbox.empty()
                now = time.monotonic()
                if show is not None and now - last_show >= REFRESH:
                    show(rows)
                    last_show = now
            if got:
                interrupt()
            if over:
                break
            if not took:
                time.sleep(0.05)          # Ctrl-C comes here
        except (KeyboardInterrupt, Interrupted):
            interrupt()
    if show is not None:
        show(rows)
    return ManyResult(rows, interrupted=interrupted)


def _drain(inbox: queue.Queue, rows: list[CardRow], save, live, say) -> bool:
    """Take what the workers said; True when there was something."""
    took = False
    while True:
        try:
            i, name, details = inbox.get_nowait()
        except queue.Empty:
            return took
        took = True
        row = rows[i]
        changed = _apply(row, name, details)
        if name == "say" and say is not None:
            say(f"{row.device}: {details['line']}")
        if name in ("round", "done", "failed"):
            doc = details.get("document")
            if isinstance(doc, dict):
                row.doc = doc
                if save is not None:
                    save(doc)
        if changed and live is not None:
            live(row)


def _apply(row: CardRow, name: str, d: dict) -> bool:
    """A worker's event on its card's row; True when the row changed."""
    if name == "progress":
        row.round, row.phase, row.state = d.get("round") or row.round, d.get("phase") or "", d.get("phase") or "write"
        row.bytes_written = d.get("bytes_written") or row.bytes_written
        row.done_bytes, row.round_bytes = d.get("done_bytes"), d.get("round_bytes")
        row.rate_bytes_per_s = d.get("rate_bytes_per_s")
        row.bad_fraction = d.get("bad_fraction", row.bad_fraction)
        row.eta_s = d.get("eta_s")
        return True
    if name == "round":
        r = d.get("round") or {}
        row.round = r.get("round") or row.round
        row.bad_fraction = r.get("bad_fraction", row.bad_fraction)
        doc = d.get("document") or {}
        row.bytes_written = doc.get("bytes_written") or row.bytes_written
        return True
    if name == "paused":
        row.state, row.error = "paused", d.get("why")
        return True
    if name == "back":
        row.state, row.error, row.device = "write", None, d.get("device") or row.device
        return True
    if name in ("done", "failed"):
        doc = d.get("document") or {}
        row.state = "ended" if name == "done" else "failed"
        row.ended = doc.get("ended") if isinstance(doc, dict) else None
        row.error = d.get("error") or (doc.get("error") if isinstance(doc, dict) else None)
        if isinstance(doc, dict):
            rounds = doc.get("rounds") or []
            row.round = rounds[-1]["round"] if rounds else row.round
            row.bytes_written = doc.get("bytes_written") or row.bytes_written
            row.bad_fraction = rounds[-1]["bad_fraction"] if rounds else row.bad_fraction
        row.eta_s = None
        return True
    return False
