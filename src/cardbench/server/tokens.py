"""Station tokens: ``cardbench serve token add STATION`` makes one, shown once and stored hashed.

A token is 32 random bytes (URL-safe text); the store keeps its SHA-256 only (a token this long
needs no slow hash: it cannot be guessed from its hash). A token writes only its own station's
records: the station that first shares a record id owns it (``record_stations``), and another
station sharing the same id is refused (:class:`Forbidden`, HTTP 403).

Who names a card or a reader: the first station to share a record naming it (its identity,
claimed in ``record_stations`` as kind ``card`` / ``reader``). Its names (brand, name, label,
size; a reader's name, driver, transport) stand in the store's ``cards`` / ``readers`` rows, which
pages and the API show; it may change them by sharing again. Another station's record naming the
same card is stored as sent, its own view, and never renames the row.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from cardbench.errors import UsageError

PREFIX = "cbt_"


class Forbidden(Exception):
    """A station writing a record another station shared first (HTTP 403)."""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def check_station_name(station: str) -> str:
    station = (station or "").strip()
    if not station or len(station) > 100 or any(ord(c) < 32 for c in station):
        raise UsageError("a station name is 1 to 100 printable characters")
    return station


def add(store, station: str) -> str:
    """A new token for ``station`` (returned once; only its hash is kept)."""
    station = check_station_name(station)
    token = PREFIX + secrets.token_urlsafe(32)
    store._run("adding a token", store._db.execute,
               "INSERT INTO station_tokens (station, token_hash, created_at) VALUES (?, ?, ?)",
               (station, hash_token(token), _now()))
    return token


@dataclass
class TokenRow:
    id: int
    station: str
    created_at: str
    revoked_at: str | None
    hash_prefix: str


def listing(store) -> list[TokenRow]:
    rows = store._run("reading tokens", store._db.execute,
                      "SELECT id, station, created_at, revoked_at, token_hash FROM station_tokens ORDER BY id")
    return [TokenRow(int(r[0]), r[1], r[2], r[3], r[4][:8]) for r in rows]


def revoke(store, which: str) -> int:
    """Revoke the tokens of a station (by name) or one token (by id); returns how many."""
    rows = listing(store)
    hit = [t for t in rows if t.revoked_at is None and (t.station == which or str(t.id) == which)]
    if not hit:
        raise UsageError(f"no live token for station or id {which!r}")
    for t in hit:
        store._run("revoking a token", store._db.execute,
                   "UPDATE station_tokens SET revoked_at = ? WHERE id = ?", (_now(), t.id))
    return len(hit)


def station_of(store, token: str | None) -> str | None:
    """The station of a live token, or None (missing, wrong or revoked)."""
    if not token:
        return None
    h = hash_token(token)
    rows = store._run("checking a token", store._db.execute,
                      "SELECT station, token_hash FROM station_tokens WHERE token_hash = ? AND revoked_at IS NULL",
                      (h,))
    for station, stored in rows:
        if hmac.compare_digest(stored, h):
            return station
    return None


#: the kinds ``record_stations`` claims names under (a card's or reader's identity), beside record kinds
NAMES = ("card", "reader")


def claimer(station: str, names: list[tuple[str, str]] | tuple = ()):
    """For ``Store.save_all(before=...)``: claim each record id for ``station`` inside the saving
    transaction; Forbidden (all undone) when another station shared one of them first. ``names``:
    the ("card" | "reader", identity) the records name, claimed for ``station`` when no station
    named them yet; returns those another station named (their rows are left as they are)."""
    named = list(dict.fromkeys((what, ident) for what, ident in names if what in NAMES and ident))

    def before(db, kinds_and_ids):
        now = _now()
        # one statement for the batch and its names, then ONE read of the owners of them all
        # (each record's and each name's: a round trip a request, not one per kind of claim)
        db.executemany("INSERT INTO record_stations (kind, record_id, station, shared_at) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT (kind, record_id) DO NOTHING",
                       [(kind, rid, station, now) for kind, rid in [*kinds_and_ids, *named]])
        claimed = [*kinds_and_ids, *named]
        kinds = list(dict.fromkeys(kind for kind, _ in claimed))
        owners = {(kind, rid): st for kind, rid, st in db.rows_in(
            f"SELECT kind, record_id, station FROM record_stations WHERE kind IN ({', '.join('?' * len(kinds))}) "
            "AND record_id {in}", list(dict.fromkeys(rid for _, rid in claimed)), kinds)}
        for kind, rid in kinds_and_ids:
            owner = owners.get((kind, db.key(rid)))
            if owner is not None and owner != station:
                raise Forbidden(f"{kind} {rid} was shared by another station first; station {station!r} "
                                "may not replace it")
        return {(what, ident) for what, ident in named if owners.get((what, db.key(ident)), station) != station}
    return before


def namer(store, what: str, identity: str) -> str | None:
    """The station that names this card or reader (``what``: "card" or "reader"), or None."""
    return station_of_record(store, what, identity)


def station_of_record(store, kind: str, rid: str) -> str | None:
    rows = store._run("reading a record's station", store._db.execute,
                      "SELECT station FROM record_stations WHERE kind = ? AND record_id = ?", (kind, rid))
    return rows[0][0] if rows else None
