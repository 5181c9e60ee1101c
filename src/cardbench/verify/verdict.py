"""Is it genuine? The one rule that every verify document is judged by: the quick probe, the full
fill, and the logs of f3read, f3probe and H2testw that ``cardbench import`` reads.

A card is

* ``counterfeit`` when it holds less than it announces: data written to one place came back
  from another (a *wraparound*), or its losses lie only at the end of the data (the writes past
  its real size are lost: zeros, old or foreign data come back; *dropped*), or -- found by the
  quick probe, which reads the card's end -- the end of the card refuses or garbles 1% of the card
  or more (:data:`COUNTERFEIT_DIVISOR`);
* ``damaged`` when it keeps its size but loses or changes some data -- scattered losses are
  damage however many there are --, or fails reads or writes, or stopped answering before the
  test could tell (an incomplete test of a card that looked genuine so far is never genuine);
* ``genuine`` otherwise: nothing lost, everything read;
* no verdict (None: the test is incomplete) when the device went away (pulled out, the medium
  taken out: :meth:`cardbench.target.Target.gone`) before the test could tell: what it could not
  read or write then says nothing of the card. Only what it had read back before counts (a
  wraparound or lost data seen earlier still make a counterfeit or damaged card).

:func:`judge` takes what a test found; :func:`judge_fill` is the same rule for a fill test (the
full verify, f3write + f3read, H2testw) from the lost ranges in the order the data was written,
and :func:`file_losses` gives those ranges for a tool that counts losses per file only.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from itertools import accumulate

from cardbench.patterns import SECTOR, merge_ranges

VERDICTS = ("genuine", "counterfeit", "damaged")   # or None: incomplete, the device went away
#: lost or refused bytes at the card's end from this share of the card on (1 / COUNTERFEIT_DIVISOR,
#: 1%) are a fake capacity, not damage, whatever came back there
COUNTERFEIT_DIVISOR = 100
#: losses are "at the end of the data" when they reach its end and, from the first lost byte on,
#: at least this share of the bytes is lost (a fake card loses nearly all that lies past its real
#: size; the file or segment that straddles the boundary keeps its first part)
TAIL_SHARE = 0.5


def judge(*, whole: int, wrapped: bool = False, lost_bytes: int = 0, lost_kind: str | None = None,
          lost_is_tail: bool = False, damaged: bool = False, stopped: bool = False,
          gone: bool = False) -> tuple[str | None, str | None]:
    """(verdict, kind) from what a test found.

    ``whole``: bytes the share is taken of (the card's announced size, or what was written).
    ``wrapped``: data came back from another position. ``lost_bytes``: bytes lost or refused
    (of ``lost_kind``, "dropped" or "other"); ``lost_is_tail``: they are at the end of the data
    (the card's end, or the end of what a fill wrote; see :func:`at_end`).
    ``damaged``: any other damage (changed data, read or write errors). ``stopped``: the test
    ended early (the card went away, an I/O error stopped it). ``gone``: it ended because the
    device went away; then the caller counts no read or write error it met (they are the
    removal's, not the card's), and a card that looked genuine so far gets no verdict (None)
    instead of damaged. ``kind`` is "wraparound", "dropped" or "other" for a counterfeit, None
    otherwise.
    """
    if wrapped:
        verdict, kind = "counterfeit", "wraparound"
    elif lost_bytes and lost_is_tail and (lost_kind == "dropped" or lost_bytes >= whole // COUNTERFEIT_DIVISOR):
        verdict, kind = "counterfeit", lost_kind or "dropped"
    elif lost_bytes or damaged:
        verdict, kind = "damaged", None
    else:
        verdict, kind = "genuine", None
    if (stopped or gone) and verdict == "genuine":
        return (None, None) if gone else ("damaged", None)
    return verdict, kind


def at_end(lost: Iterable[Sequence[int]], end: int) -> bool:
    """Do the ``lost`` ranges ([start, end) bytes in the order the data was written) lie at the end
    of the data ``[0, end)``: the last reaches the end (within a sector), and from the first lost
    byte on at least :data:`TAIL_SHARE` of the bytes are lost."""
    ranges = merge_ranges([(s, e) for s, e in lost if e > s])
    if not ranges or end <= 0 or ranges[-1][1] < end - SECTOR:
        return False
    lost_bytes = sum(e - s for s, e in ranges)
    return lost_bytes >= TAIL_SHARE * (end - ranges[0][0])


def file_losses(files: Iterable[tuple[int, int]]) -> list[list[int]]:
    """The lost ranges of a fill whose tool counts losses per file only (f3read): ``files`` are
    (bytes, lost bytes) in the order written; each file's losses are placed at its end (where the
    file that straddles a fake card's real size loses them; the tool does not say where)."""
    out: list[list[int]] = []
    base = 0
    for size, lost in files:
        if lost:
            out.append([base + size - lost, base + size])
        base += size
    return out


def judge_fill(*, written: int, lost: Iterable[Sequence[int]] = (), unplaced: int = 0, wrapped: bool = False,
               damaged: bool = False, stopped: bool = False, gone: bool = False) -> tuple[str | None, str | None]:
    """(verdict, kind) of a fill test of ``written`` bytes.

    ``lost``: the ranges whose data did not come back (zeros, old, foreign or garbage data; f3's
    and H2testw's "corrupted"), in the order written; ``unplaced``: more such bytes whose place
    the tool does not say (they are never "at the end"); ``wrapped``: sectors came back from
    another position (f3's "overwritten", H2testw's "overwritten" and "aliased memory");
    ``damaged``: slightly changed sectors, read or write errors; ``stopped``: the test ended early;
    ``gone``: because the device went away (see :func:`judge`)."""
    ranges = merge_ranges([(s, e) for s, e in lost if e > s])
    lost_bytes = sum(e - s for s, e in ranges) + unplaced
    return judge(whole=written, wrapped=wrapped, lost_bytes=lost_bytes, lost_kind="dropped",
                 lost_is_tail=not unplaced and at_end(ranges, written), damaged=damaged, stopped=stopped,
                 gone=gone)


def in_card_order(data: Iterable[tuple[int, int]], lost: Iterable[tuple[int, int]]) -> list[list[int]]:
    """The ``lost`` pieces re-addressed in the order the data lies on the card.

    ``data``: (card offset, bytes) of every piece the fill wrote; ``lost``: (card offset, bytes)
    of the pieces whose data did not come back. A filesystem places a fill's files where it likes
    (ext4 spreads them over its block groups), so the order the files were written is not the
    card's: a fake card loses what lies past its real size, which is the end of the data laid out
    in the card's order. Returns [start, end) ranges in that layout (the written data packed
    end to end, lowest card offset first), for :func:`at_end` and :func:`judge_fill`."""
    pieces = sorted((s, n) for s, n in data if n > 0)
    starts = [s for s, _ in pieces]
    base = list(accumulate((n for _, n in pieces), initial=0))
    out: list[list[int]] = []
    for s, n in lost:
        pos, end = s, s + n
        i = max(0, bisect.bisect_right(starts, pos) - 1)
        while pos < end and i < len(pieces):
            ps, pn = pieces[i]
            if pos < ps:
                pos = ps
                continue
            if pos >= ps + pn:
                i += 1
                continue
            stop = min(end, ps + pn)
            out.append([base[i] + pos - ps, base[i] + stop - ps])
            pos = stop
    return merge_ranges(out)
