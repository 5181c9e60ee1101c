"""How filters and sort keys given by a person are understood (shared by the store and the CLI).

Times (``since`` / ``until``):
  * a ``datetime`` or ``date`` object; a naive one is local time;
  * ISO 8601 text: ``2024-05-01``, ``2024-05-01T14:30``, ``2024-05-01 14:30:00+02:00``
    (without an offset: local time; a bare date means its midnight);
  * a span back from now: ``90m``, ``12h``, ``7d``, ``2w``.

Cards (``card=``) match when the text equals the card's identity (``serial:...`` / ``user:...``)
or when every word of it matches the card: a word matches as a case-insensitive part of its
brand, name, label, serial or model, or, when it reads as a size (``48M``, ``64GB``, ``32GiB``),
when the card's capacity lies within 85%..110% of it (cards hold a little less than their label).
Readers (``reader=``) match on identity or on words in name, vendor:product id, serial, driver
and transport.

Sort keys (``order_by``): ``started`` (default), ``card``, ``reader``, ``write`` and ``read``
(median rate of the write / read figure used in reports), ``source``, ``id``; a leading ``-``
reverses.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Callable

from cardbench.errors import UsageError
from cardbench.units import UnitError, parse_size

_SPAN_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
_SPAN_S = {"m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}

WRITE_TESTS = ("seq_write", "raw_write")
READ_TESTS = ("cold_read", "raw_read")


def epoch_of_iso(text: str | None) -> float | None:
    """Seconds since the epoch of a stored ISO timestamp (naive is taken as UTC); None if unreadable."""
    if not text:
        return None
    try:
        dt = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    return dt.timestamp()


def parse_when(value: Any, *, now: float | None = None, what: str = "time") -> float:
    """A since/until value as seconds since the epoch; UsageError with one line if unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, _dt.datetime):
        return (value if value.tzinfo else value.astimezone()).timestamp()
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day).astimezone().timestamp()
    text = str(value).strip()
    m = _SPAN_RE.match(text)
    if m:
        base = now if now is not None else _dt.datetime.now(_dt.timezone.utc).timestamp()
        return base - float(m.group(1)) * _SPAN_S[m.group(2).lower()]
    try:
        dt = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"not a {what}: {text!r} (try 2024-05-01, 2024-05-01T14:30 or 7d)") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, as a person means it
    return dt.timestamp()


def _size_of(word: str) -> int | None:
    if not re.match(r"^\d", word):
        return None
    try:
        return parse_size(word)
    except UnitError:
        return None


def card_matches(card: dict, query: str) -> bool:
    """Does the card row (identity, name, brand, capacity_bytes, label, serial, model) match the query?"""
    q = query.strip()
    if not q:
        return True
    if q == card.get("identity"):
        return True
    text = " ".join(str(card.get(k) or "") for k in ("brand", "name", "label", "serial", "model")).lower()
    cap = card.get("capacity_bytes")
    for word in q.lower().split():
        if word in text:
            continue
        size = _size_of(word)
        if size and cap and 0.85 * size <= cap <= 1.10 * size:
            continue
        return False
    return True


def reader_matches(reader: dict, query: str) -> bool:
    q = query.strip()
    if not q:
        return True
    if q == reader.get("identity"):
        return True
    vid_pid = f"{reader.get('vendor_id') or ''}:{reader.get('product_id') or ''}"
    text = " ".join([str(reader.get(k) or "") for k in ("name", "serial", "driver", "transport", "identity")]
                    + [vid_pid]).lower()
    return all(word in text for word in q.lower().split())


def pick_test(result, names: tuple[str, ...]):
    """The first test of ``names`` present in the result with at least one timed run, else None."""
    for n in names:
        t = result.test(n)
        if t is not None and t.rates():
            return t
    return None


def _rate_key(names: tuple[str, ...]) -> Callable:
    def key(r):
        t = pick_test(r, names)
        m = t.median_bytes_per_s if t else None
        return (m is None, m or 0.0)
    return key


def _card_key(r):
    c = r.card
    return ((c.brand or "").lower(), (c.name or "").lower(), c.capacity_bytes or 0, (c.label or "").lower())


SORT_KEYS: dict[str, Callable] = {
    "started": lambda r: (epoch_of_iso(r.started_at) or 0.0, r.id),
    "date": lambda r: (epoch_of_iso(r.started_at) or 0.0, r.id),
    "card": _card_key,
    "reader": lambda r: (r.reader.name or r.reader.identity()).lower(),
    "write": _rate_key(WRITE_TESTS),
    "read": _rate_key(READ_TESTS),
    "source": lambda r: r.source,
    "id": lambda r: r.id,
}


def sort_results(results: list, order_by: str | None) -> list:
    key_name = (order_by or "started").strip()
    reverse = key_name.startswith("-")
    key_name = key_name.lstrip("-+")
    if key_name not in SORT_KEYS:
        raise UsageError(f"cannot sort by {order_by!r} (use one of {', '.join(SORT_KEYS)}, '-' in front reverses)")
    out = sorted(results, key=SORT_KEYS[key_name], reverse=reverse)
    if key_name in ("write", "read") and reverse:
        # results without the figure stay last either way
        out = [r for r in out if SORT_KEYS[key_name](r)[0] is False] + \
              [r for r in out if SORT_KEYS[key_name](r)[0] is True]
    return out
