"""Is it genuine? The one rule that the quick probe and the full fill both judge a card by.

A card is

* ``counterfeit`` when it holds less than it announces: data written to one place came back
  from another (a *wraparound*), or the writes past some point are lost (*dropped*: zeros or old
  data come back) all the way to the end, or the bytes it loses or refuses add up to
  1% of the card or more (:data:`COUNTERFEIT_DIVISOR`);
* ``damaged`` when it keeps its size but loses or changes some data, or fails reads or
  writes, or stopped answering before the test could tell (an incomplete test of a card that
  looked genuine so far is never called genuine);
* ``genuine`` otherwise.
"""

from __future__ import annotations

VERDICTS = ("genuine", "counterfeit", "damaged")
#: lost or refused bytes from this share of the card on (1 / COUNTERFEIT_DIVISOR, 1%) are a fake
#: capacity, not damage
COUNTERFEIT_DIVISOR = 100


def judge(*, whole: int, wrapped: bool = False, lost_bytes: int = 0, lost_kind: str | None = None,
          lost_is_tail: bool = False, damaged: bool = False, stopped: bool = False) -> tuple[str, str | None]:
    """(verdict, kind) from what a test found.

    ``whole``: bytes the share is taken of (the card's announced size, or what was written).
    ``wrapped``: data came back from another position. ``lost_bytes``: bytes lost or refused
    (of ``lost_kind``, "dropped" or "other"); ``lost_is_tail``: they run to the end of the card.
    ``damaged``: any other damage (changed data, read or write errors). ``stopped``: the test
    ended early (the card went away, an I/O error stopped it). ``kind`` is "wraparound",
    "dropped" or "other" for a counterfeit, None otherwise.
    """
    if wrapped:
        verdict, kind = "counterfeit", "wraparound"
    elif lost_bytes and ((lost_is_tail and lost_kind == "dropped") or lost_bytes >= whole // COUNTERFEIT_DIVISOR):
        verdict, kind = "counterfeit", lost_kind or "dropped"
    elif lost_bytes or damaged:
        verdict, kind = "damaged", None
    else:
        verdict, kind = "genuine", None
    if stopped and verdict == "genuine":
        verdict = "damaged"
    return verdict, kind
