"""The live state of a lab: what each station is doing, kept in the store, not in one process.

One table (schema migration 6): ``live_cards`` holds the latest progress event per (station,
card key), one row each, replaced by the next event (card key ``''``: a station's progress
without a card key, as ``drawer --share`` sends it). A progress event is one upsert of one row:
nothing else is stored of it. What a station shared last is read from ``record_stations`` (its
latest record; an index of migration 6): an upload writes nothing more than its records.

Every write tells the app servers that something changed: on PostgreSQL, once it has committed,
a ``NOTIFY`` on channel :data:`CHANNEL` whose payload names the stations and card keys only,
never a document (PostgreSQL refuses a payload over 8,000 bytes; a key is at most
:data:`KEY_MAX` characters and a station name 100); a server gathers the notices of
:data:`NOTIFY_EVERY_S` into one statement (PostgreSQL serializes the commits of notifying
transactions: one a batch, not one a request). Each app server has one :class:`Hub`: one
thread holding one dedicated ``LISTEN`` connection, which reads each changed row once and fans
it out to that server's event streams. So any number of app servers on one
database show the same live pages. When the connection is lost (PostgreSQL restarting), the
thread connects again and sends every watched station's current rows (the pages catch up). On
SQLite (one server) the same thread is told in-process instead.

Kept: the latest row per card; a row not updated for :data:`KEEP_S` is left off the pages and
deleted by the next sweep (every :data:`SWEEP_EVERY_S`); a card whose event says ``ended`` is
shown as finished until then.
"""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading
import time
from typing import Any, Callable

from cardbench import kinds
from cardbench.errors import UsageError
from cardbench.report import html as rh
from cardbench.server import pages, tokens
from cardbench.store.core import open_store, parse_target
from cardbench.units import INT64_MAX, fmt_size

CHANNEL = "cardbench_live"
#: the application_name of an app server's LISTEN connection
LISTENER_NAME = "cardbench live listener"
#: the longest card key (a NOTIFY payload carries it: far below PostgreSQL's 8,000 bytes)
KEY_MAX = 200
LABEL_MAX = 200
TASK_MAX = 300
#: the largest progress body taken (its card identity included)
BODY_MAX = 64 * 1024
#: a live row not updated for this long is left off the pages and deleted
KEEP_S = 24 * 3600.0
SWEEP_EVERY_S = 600.0
#: result rows a live page shows (and its stream looks for new ones among)
ROWS = 50
#: the largest NOTIFY payload sent (PostgreSQL refuses one over 8,000 bytes)
NOTICE_MAX = 7000
#: how long a server gathers its writes' notices into one NOTIFY
NOTIFY_EVERY_S = 0.02

FIELDS = ("label", "identity", "kind", "task", "done", "total", "round_no", "bytes_written", "rate_bytes_per_s",
          "bad_fraction", "eta_s", "ended", "at_epoch")
CARD_COLUMNS = ("card_key",) + FIELDS


class Unannounced(Exception):
    """Progress for a card key the station never announced (HTTP 409)."""


# -- reading an event ------------------------------------------------------------------------------

def _count(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (0 <= v <= INT64_MAX):        # NaN, infinities, negatives
        return None
    return int(v) if 0 <= v <= INT64_MAX else None


def _real(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if 0 <= f < float("inf") else None


def _text(v: Any, limit: int) -> str | None:
    if not isinstance(v, str):
        return None
    v = "".join(c for c in v if c >= " " or c == "\t").strip()
    return v.encode("utf-8", "replace").decode("utf-8")[:limit] or None


def read_event(raw: bytes) -> dict:
    """The body of ``POST /api/v1/live`` as the row it becomes; UsageError (400, one line)."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise UsageError("the body is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("task"), str):
        raise UsageError('give {"task": text, "done": bytes, "total": bytes or null}, and "card": '
                         '{"key": text, "label": text, "identity": {...}} for one card of several')
    card = doc.get("card")
    key, label, identity = "", None, None
    if card is not None:
        if not isinstance(card, dict) or not isinstance(card.get("key"), str):
            raise UsageError('"card" is {"key": text, "label": text, "identity": {the card, as in a record}}')
        key = card["key"]
        if not key.strip() or len(key) > KEY_MAX or any(c < " " for c in key):
            raise UsageError(f"card.key is 1 to {KEY_MAX} printable characters")
        key = key.encode("utf-8", "replace").decode("utf-8")        # a lone surrogate cannot be stored
        label = _text(card.get("label"), LABEL_MAX)
        if card.get("identity") is not None:
            if not isinstance(card["identity"], dict):
                raise UsageError("card.identity is the card as a record names it (an object)")
            try:
                identity = json.dumps(card["identity"], ensure_ascii=True, allow_nan=False)
            except ValueError:
                raise UsageError("card.identity holds a number that is not finite") from None
            if label is None:
                c = card["identity"]
                label = _text(" ".join(str(c[f]) for f in ("brand", "name", "label") if c.get(f)), LABEL_MAX)
    return {"card_key": key, "label": label, "identity": identity, "kind": _text(doc.get("kind"), 40),
            "task": _text(doc["task"], TASK_MAX) or "", "done": _count(doc.get("done")),
            "total": _count(doc.get("total")), "round_no": _count(doc.get("round")),
            "bytes_written": _count(doc.get("bytes_written")), "rate_bytes_per_s": _real(doc.get("rate_bytes_per_s")),
            "bad_fraction": _real(doc.get("bad_fraction")), "eta_s": _real(doc.get("eta_s")),
            "ended": _text(doc.get("ended"), 40), "at_epoch": time.time()}


# -- writing -----------------------------------------------------------------------------------

def write_progress(store, station: str, ev: dict) -> int:
    """One statement: the upsert of the card's row (the app server's :class:`Hub` tells the
    others after it, :meth:`Hub.changed`). The first event for a key carries ``card.identity`` (it announces the card, and sets
    every field); a later one sets the fields it gives; an event for a key this station has no
    row for raises :class:`Unannounced`. Returns the row's id."""
    db = store._db
    key = ev["card_key"]
    vals = [ev[f] for f in FIELDS]
    if ev["identity"] is not None or key == "":
        cols = ", ".join(FIELDS)
        sql = (f"INSERT INTO live_cards (station, card_key, announced_at, {cols}) "
               f"VALUES (?, ?, ?, {', '.join('?' * len(FIELDS))}) ON CONFLICT (station, card_key) DO UPDATE SET "
               + ", ".join(f"{f} = excluded.{f}" for f in FIELDS) + " RETURNING id")
        params = [station, key, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), *vals]
    else:
        # a field the event leaves out keeps its value (once ended, a card stays ended until announced again)
        sets = ", ".join(f"{f} = COALESCE(?, {f})" for f in FIELDS)
        sql = f"UPDATE live_cards SET {sets} WHERE station = ? AND card_key = ? RETURNING id"
        params = [*vals, station, key]
    rows = store._run("writing live progress", db.execute, sql, params)
    if not rows:
        raise Unannounced(f"card {key!r} was never announced by station {station!r}: its first event carries "
                          "card.identity")
    return int(rows[0][0])


def notices(changes: list[tuple[str, str | None]]) -> list[str]:
    """NOTIFY payloads for these (station, card key or None: it shared records): JSON lists of
    pairs, each under NOTICE_MAX bytes (a station name is at most 100 characters, a key KEY_MAX)."""
    out: list[str] = []
    part: list[list] = []
    size = 2
    for station, key in dict.fromkeys(changes):
        item = json.dumps([station, key])
        if part and size + len(item.encode()) + 1 > NOTICE_MAX:
            out.append(json.dumps(part))
            part, size = [], 2
        part.append([station, key])
        size += len(item.encode()) + 1
    if part:
        out.append(json.dumps(part))
    return out


def send_notices(store, payloads: list[str]) -> None:
    """One statement: a NOTIFY per payload (PostgreSQL takes a database-wide lock while it commits
    a transaction that notifies: once per batch here, not once per request)."""
    if payloads:
        sql = "SELECT " + ", ".join("pg_notify(?, ?)" for _ in payloads)
        store._run("telling the other servers", store._db.execute, sql, [x for p in payloads for x in (CHANNEL, p)])


# -- reading -----------------------------------------------------------------------------------

def _card_rows(rows) -> list[dict]:
    return [dict(zip(CARD_COLUMNS, r, strict=True)) for r in rows]


def cards_of(store, station: str, keys: list[str] | None = None) -> list[dict]:
    """The live rows of a station (or of these keys of it) updated within KEEP_S, by key."""
    sql = f"SELECT {', '.join(CARD_COLUMNS)} FROM live_cards WHERE station = ? AND at_epoch >= ?"
    since = time.time() - KEEP_S
    if keys is None:
        rows = store._run("reading live cards", store._db.execute, sql + " ORDER BY card_key", (station, since))
    else:
        rows = store._run("reading live cards", store._db.rows_in, sql + " AND card_key {in}", keys,
                          (station, since))
    return _card_rows(rows)


def station_of(store, station: str) -> dict | None:
    """What the station shared last (its latest record): {"card", "what", "at"}, or None."""
    rows = store._run("reading a station's last record", store._db.execute,
                      "SELECT kind, record_id, shared_at FROM record_stations WHERE station = ? "
                      f"AND kind NOT IN ({', '.join(repr(n) for n in tokens.NAMES)}) "      # records, not name claims
                      "ORDER BY shared_at DESC, record_id DESC LIMIT 1", (station,))
    if not rows:
        return None
    kind, rid, at = rows[0]
    try:
        k = kinds.kind_named(kind)
        if kind == kinds.RESULT.name:
            r = store.get(rid)
            return {"card": rh.card_label(r), "what": "result", "at": r.started_at}
        doc = store.stored_document(kind, rid) or {}
    except UsageError:           # removed since, or a kind this server does not know
        return {"card": None, "what": kind, "at": at}
    links = k.cards(doc) if doc else []
    c = links[0][0] if links and isinstance(links[0][0], dict) else {}
    cap = c.get("capacity_bytes")
    name = (" ".join(str(c[f]) for f in ("brand", "name", "label") if c.get(f))
            or (f"{fmt_size(cap)} card" if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None)
            or c.get("identity"))
    return {"card": str(name) if name else None, "what": k.noun, "at": k.created(doc) or at}


def everything(store) -> dict[str, list[dict]]:
    """Every station (that shared, or sent progress) and its live rows: the ``/live`` index."""
    out: dict[str, list[dict]] = {}
    for (st,) in store._run("reading stations", store._db.execute,
                            "SELECT station FROM record_stations UNION SELECT station FROM live_cards"):
        out[st] = []
    rows = store._run("reading live cards", store._db.execute,
                      f"SELECT station, {', '.join(CARD_COLUMNS)} FROM live_cards WHERE at_epoch >= ? "
                      "ORDER BY station, card_key", (time.time() - KEEP_S,))
    for r in rows:
        out.setdefault(r[0], []).append(dict(zip(CARD_COLUMNS, r[1:], strict=True)))
    return dict(sorted(out.items()))


def result_ids(store, station: str, limit: int = ROWS) -> list[str]:
    """The ids of the station's latest results, the last stored first: by the order they were
    stored in (``runs.id``; ``shared_at`` has whole seconds), among its latest by ``shared_at``
    (its index)."""
    rows = store._run("reading a station's records", store._db.execute,
                      "SELECT rs.record_id FROM (SELECT record_id FROM record_stations WHERE station = ? "
                      "AND kind = 'result' ORDER BY shared_at DESC LIMIT ?) rs "
                      "JOIN runs ON runs.result_id = rs.record_id ORDER BY runs.id DESC LIMIT ?",
                      (station, 4 * limit, limit))
    return [r[0] for r in rows]


def results_of(store, ids: list[str]) -> list:
    out = []
    for rid in ids:
        try:
            out.append(store.get(rid))
        except UsageError:          # removed since
            pass
    return out


def sweep(store, now: float | None = None) -> int:
    """Delete the live rows not updated for KEEP_S; how many."""
    rows = store._run("sweeping live cards", store._db.execute,
                      "DELETE FROM live_cards WHERE at_epoch < ? RETURNING id", ((now or time.time()) - KEEP_S,))
    return len(rows)


# -- the events of a live page -------------------------------------------------------------------

def card_event(row: dict) -> tuple[str, dict]:
    if row["card_key"] == "":
        return "progress", {"text": pages.progress_text(row), "at_epoch": row["at_epoch"]}
    return "card", {"key": row["card_key"], "cells": pages.card_cells(row), "ended": bool(row["ended"]),
                    "done": row["done"], "round": row["round_no"], "at_epoch": row["at_epoch"]}


def sse(name: str, data: dict) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


# -- one hub per app server ------------------------------------------------------------------------

class Hub:
    """The fan-out of one app server: its event-stream clients by station, and one thread that
    learns what changed (a dedicated LISTEN connection on PostgreSQL; in-process on SQLite),
    reads each changed row once and hands the events to the clients of that station."""

    def __init__(self, db: Any, call: Callable):
        self.db, self.call = db, call
        self.pg = parse_target(db)[0] == "postgresql"
        self.subs: dict[str, set[asyncio.Queue]] = {}
        self.lock = threading.Lock()
        self.local: queue.SimpleQueue = queue.SimpleQueue()
        self.stopping = threading.Event()
        #: set while the thread listens (PostgreSQL: its LISTEN is on), cleared while it reconnects
        self.listening = threading.Event()
        self.reconnects = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.notifier: threading.Thread | None = None
        self.sent: dict[str, set[str]] = {}          # result ids streamed, by station (the thread's)
        self.known: dict[str, set[str]] = {}         # ids a page was rendered with (under lock)
        self.last_sweep = 0.0

    # -- the event loop's side --
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stopping.clear()
        self.thread = threading.Thread(target=self._run, name="cardbench-live-hub", daemon=True)
        self.thread.start()
        if self.pg:
            self.notifier = threading.Thread(target=self._notify, name="cardbench-live-notify", daemon=True)
            self.notifier.start()

    def stop(self) -> None:
        self.stopping.set()
        self.local.put(None)
        for t in (self.thread, self.notifier):
            if t is not None:
                t.join(timeout=5)
        self.thread = self.notifier = None

    def subscribe(self, station: str, shown_ids: list[str]) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue(maxsize=2000)
        with self.lock:
            self.subs.setdefault(station, set()).add(q)
            self.known.setdefault(station, set()).update(shown_ids)
        return q

    def unsubscribe(self, station: str, q: asyncio.Queue) -> None:
        with self.lock:
            qs = self.subs.get(station)
            if qs is not None:
                qs.discard(q)
                if not qs:
                    del self.subs[station]
                    self.known.pop(station, None)

    def changed(self, station: str, key: str | None) -> None:
        """A write of this process has committed. SQLite: the thread is told here. PostgreSQL:
        every server's thread, this one's too, by a NOTIFY the notifier thread sends, gathering
        the notices of NOTIFY_EVERY_S into one statement."""
        self.local.put((station, key))

    def _deliver(self, station: str, events: list[tuple[str, dict]]) -> None:
        for q in list(self.subs.get(station, ())):
            for ev in events:
                try:
                    q.put_nowait(ev)
                except asyncio.QueueFull:       # a client that does not read: its stream ends, the
                    q.overflowed = True         # type: ignore[attr-defined]  # browser reconnects
                    break

    # -- the thread's side --
    def _watched(self) -> dict[str, set[str]]:
        with self.lock:
            return {st: set(self.known.get(st, ())) for st in self.subs}

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                if self.pg:
                    self._listen()
                else:
                    self._local()
            except Exception as e:  # noqa: BLE001 - the live pages wait (StoreError, a lost connection); go on
                self.listening.clear()
                if self.stopping.is_set():
                    return
                self.reconnects += 1
                why = (str(e).strip().splitlines() or [""])[0][:200]
                print(f"cardbench serve: live updates paused ({type(e).__name__}: {why}); connecting again",
                      file=sys.stderr)
                self.stopping.wait(1.0)

    def _listen(self) -> None:
        store = open_store(self.db)              # a connection of its own, held for LISTEN
        try:
            conn = store._db.conn                # type: ignore[attr-defined]
            conn.execute(f"SET application_name = '{LISTENER_NAME}'")      # as pg_stat_activity shows it
            conn.execute(f"LISTEN {CHANNEL}")
            self.listening.set()
            self._catch_up()
            quiet = time.monotonic()
            while not self.stopping.is_set():
                got = [n.payload for n in conn.notifies(timeout=1.0, stop_after=1)]
                if got:
                    got += [n.payload for n in conn.notifies(timeout=0.01)]     # what came with it
                    self._handle([tuple(pair) for p in got for pair in json.loads(p)])
                    quiet = time.monotonic()
                elif time.monotonic() - quiet > 10:
                    conn.execute("SELECT 1")     # a connection lost without a word says so here
                    quiet = time.monotonic()
                self._maybe_sweep()
        finally:
            self.listening.clear()
            try:
                store.close()
            except Exception:  # noqa: BLE001 - a lost connection is dropped either way
                pass

    def _local(self) -> None:
        self.listening.set()
        self._catch_up()
        while not self.stopping.is_set():
            try:
                first = self.local.get(timeout=1.0)
            except queue.Empty:
                self._maybe_sweep()
                continue
            got = [first]
            while True:
                try:
                    got.append(self.local.get_nowait())
                except queue.Empty:
                    break
            self._handle([g for g in got if g is not None])

    def _notify(self) -> None:
        """PostgreSQL: the NOTIFY of what this server's writes changed, a batch at a time."""
        pending: list[tuple[str, str | None]] = []
        while not self.stopping.is_set():
            try:
                first = self.local.get(timeout=1.0)
            except queue.Empty:
                first = None
            if first is not None:
                pending.append(first)
                time.sleep(NOTIFY_EVERY_S)
            while True:
                try:
                    got = self.local.get_nowait()
                except queue.Empty:
                    break
                if got is not None:
                    pending.append(got)
            if not pending:
                continue
            try:
                self.call(send_notices, notices(pending))
                pending = []
            except Exception as e:  # noqa: BLE001 - kept and sent again; the listeners catch up anyway
                pending = list(dict.fromkeys(pending))[-10_000:]
                print(f"cardbench serve: live notices wait ({type(e).__name__})", file=sys.stderr)
                self.stopping.wait(1.0)

    def _maybe_sweep(self) -> None:
        if time.monotonic() - self.last_sweep > SWEEP_EVERY_S:
            self.last_sweep = time.monotonic()
            self.call(sweep)

    def _catch_up(self) -> None:
        """After (re)connecting: every watched station's rows as they are now."""
        for station in self._watched():
            self._send(station, None, uploaded=True)

    def _handle(self, notices: list[tuple]) -> None:
        watched = self._watched()
        by_station: dict[str, tuple[set[str], bool]] = {}
        for station, key in notices:
            if station not in watched:
                continue
            keys, up = by_station.setdefault(station, (set(), False))
            if key is None:
                by_station[station] = (keys, True)
            else:
                keys.add(key)
        for station, (keys, up) in by_station.items():
            self._send(station, sorted(keys), uploaded=up)

    def _send(self, station: str, keys: list[str] | None, *, uploaded: bool) -> None:
        events: list[tuple[str, dict]] = []
        if keys is None or keys:
            events += [card_event(r) for r in self.call(cards_of, station, keys)]
        if uploaded:
            with self.lock:
                known = self.known.get(station, set())
            sent = self.sent.setdefault(station, set()) | known
            ids = self.call(result_ids, station)
            new = [i for i in reversed(ids) if i not in sent]
            now = pages.current_text(self.call(station_of, station))
            for r in self.call(results_of, new):
                events.append(("row", {"id": r.id, "html": pages.drawer_tr(r, cls="new"), "now": now}))
            events.append(("now", {"text": now}))
            self.sent[station] = (sent & set(ids)) | set(new)
        if events and self.loop is not None:
            try:
                self.loop.call_soon_threadsafe(self._deliver, station, events)
            except RuntimeError:         # the loop has closed: the server is stopping
                pass
