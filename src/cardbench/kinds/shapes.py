"""The pieces of a kind's shape check (:attr:`cardbench.kinds.registry.Kind.problem`).

Each returns None when the value is fine, else one line naming the field and what it must be
(``"'cards[0].card.capacity_bytes' must be a number"``); a kind's check returns the first.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: the fields of a card or a reader (as in a result) that are numbers; the others are text
ENTITY_NUMBERS = ("capacity_bytes", "link_speed_mbit")

_SAID = {"text": "text", "number": "a number", "object": "an object", "flag": "true or false",
         "list": "a list", "ranges": "a list of [start, end] byte pairs"}


def obj(d: Any, key: str) -> dict:
    """``d[key]`` when it is an object, else an empty one (for reading a document not yet checked)."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def seq(d: Any, key: str) -> list:
    """``d[key]`` when it is a list, else an empty one."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, list) else []


def is_number(x: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def typed(x: Any, kind: str, what: str) -> str | None:
    """None when ``x`` is null or of ``kind`` (text, number, object, flag, list, ranges); else the
    one line saying what ``what`` must be."""
    if x is None:
        return None
    ok = {"text": isinstance(x, str), "number": is_number(x), "object": isinstance(x, dict),
          "flag": isinstance(x, bool), "list": isinstance(x, list),
          "ranges": isinstance(x, list) and all(isinstance(r, list) and len(r) == 2 and
                                                all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                    for v in r) for r in x)}[kind]
    return None if ok else f"'{what}' must be {_SAID[kind]}"


def fields_problem(d: dict, fields: tuple[tuple[str, str], ...], prefix: str = "") -> str | None:
    """The first of ``fields`` ((key, kind), ...) of ``d`` that is not null and not of its kind."""
    for k, kind in fields:
        problem = typed(d.get(k), kind, prefix + k)
        if problem:
            return problem
    return None


def entity_problem(value: Any, what: str, numeric: tuple[str, ...] = ENTITY_NUMBERS) -> str | None:
    """A card or reader (as in a result) whose fields have the types the store relies on."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"'{what}' must be an object"
    for f, x in value.items():
        if f in ("ata", "sd") and x is not None and not isinstance(x, dict):
            return f"'{what}.{f}' must be an object"
        if f in ("identity", "ata", "sd") or x is None:
            continue
        ok = (isinstance(x, (int, float)) and not isinstance(x, bool)) if f in numeric else isinstance(x, str)
        if not ok:
            return f"'{what}.{f}' must be {'a number' if f in numeric else 'text'}"
    return None


def common_problem(d: dict) -> str | None:
    """What every document kind checks: its ``card`` and ``reader``, the cards of a probe's
    ``measured.devices`` and of a session's ``cards`` (where present), and its times as text."""
    entities = [(d.get("card"), "card"), (d.get("reader"), "reader")]
    devices = seq(obj(d, "measured"), "devices")
    cards = seq(d, "cards")
    entities += [(x.get("card"), f"measured.devices[{i}].card") for i, x in enumerate(devices) if isinstance(x, dict)]
    entities += [(c.get(k), f"cards[{i}].{k}") for i, c in enumerate(cards) if isinstance(c, dict)
                 for k in ("card", "reader")]
    for value, what in entities:
        problem = entity_problem(value, what)
        if problem:
            return problem
    for k in ("created_at", "started_at", "finished_at"):
        if d.get(k) is not None and not isinstance(d[k], str):
            return f"'{k}' must be text"
    return None


def one_card(d: dict) -> list[tuple[dict | None, dict | None]]:
    """The (card, reader) of a document about one card through one reader (``card``, ``reader``)."""
    card = d.get("card") if isinstance(d.get("card"), dict) else None
    reader = d.get("reader") if isinstance(d.get("reader"), dict) else None
    return [(card, reader)] if card or reader else []


def card_words(card: Any) -> str:
    """A card in a few words (brand, name, label; else its identity)."""
    if not isinstance(card, dict):
        return "a card"
    words = " ".join(str(card[k]) for k in ("brand", "name", "label") if card.get(k))
    return words or str(card.get("identity") or "a card")


def as_text(v: Any) -> str | None:
    """A column's text: text as it is, anything else as compact JSON (None stays None)."""
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
