"""The drawer session, ``cardbench.session/1``: which cards one ``cardbench drawer`` sitting
read, in what order, what became of each, and the reader verdict said at its end
(:mod:`cardbench.evidence`). Stored in ``sessions``, its cards and readers in ``record_cards``."""

from __future__ import annotations

from cardbench.kinds.registry import Kind, Link, Table, register
from cardbench.kinds.shapes import card_words, common_problem, fields_problem, seq

SCHEMA = "cardbench.session/1"

VERDICT = (("ceiling_bytes_per_s", "number"), ("cards", "number"), ("cards_at_ceiling", "number"), ("name", "text"),
           ("identity", "text"), ("direction", "text"), ("confidence", "text"), ("kind", "text"), ("evidence", "text"))
CARD = (("device", "text"), ("result_id", "text"), ("verify_id", "text"), ("mode", "text"), ("error", "text"))


def problem(d: dict) -> str | None:
    found = common_problem(d)
    if found:
        return found
    if not isinstance(d.get("cards"), list) or not all(isinstance(c, dict) for c in d["cards"]):
        return "'cards' must be a list of objects"
    if not isinstance(d.get("probes", []), list) or not isinstance(d.get("reader_verdict", []), list):
        return "'probes' and 'reader_verdict' must be lists"
    for i, v in enumerate(d.get("reader_verdict") or []):
        if not isinstance(v, dict):
            return f"'reader_verdict[{i}]' must be an object"
        found = fields_problem(v, VERDICT, f"reader_verdict[{i}].")
        if found:
            return found
    for i, c in enumerate(d.get("cards") or []):
        found = fields_problem(c, CARD, f"cards[{i}].")
        if found:
            return found
    return None


def _cards(d: dict) -> list:
    return seq(d, "cards")


def cards(d: dict) -> list[Link]:
    """Each card of the session (in order) with the reader it was read through."""
    return [(c.get("card") if isinstance(c.get("card"), dict) else None,
             c.get("reader") if isinstance(c.get("reader"), dict) else None) if isinstance(c, dict)
            else (None, None) for c in _cards(d)]


def summary(d: dict) -> str:
    """"drawer session: 2 cards (Lexar 4X, SanDisk), 1 probe"."""
    cs = _cards(d)
    probes = seq(d, "probes")
    names = ", ".join(card_words(c.get("card")) for c in cs if isinstance(c, dict))
    return (f"drawer session: {len(cs)} card{'s' if len(cs) != 1 else ''} ({names}), "
            f"{len(probes)} probe{'s' if len(probes) != 1 else ''}")


SESSION = register(Kind(
    name="session", schema=SCHEMA, section="sessions", noun="session", title="drawer session",
    problem=problem, cards=cards, summary=summary,
    created=lambda d: d.get("started_at"),
    table=Table("sessions", "session_id", "started_epoch",
                columns=(("finished_at", lambda d: d.get("finished_at")), ("n_cards", lambda d: len(_cards(d))))),
    listed=False))              # shown by `cardbench readers`
