"""The endurance test's sectors: every 512-byte sector says whose it is, where it belongs, which
round wrote it, and carries a check; a read-back is classified sector by sector.

A sector written at byte ``pos`` in round ``r`` of card ``uuid`` (16 random bytes, as two
little-endian 64-bit words ``lo``, ``hi``) holds eight-byte words::

    0  lo          the card's UUID (which card wrote it)
    1  hi
    2  pos         its address in bytes
    3  r           the round that wrote it
    4  check       a 64-bit mix of words 0..3 (a header that is whole, whoever wrote it)
    5..63          the body: row ``(pos/512 + r * 7919) mod 16384`` of the card's pool
                   (:func:`cardbench.patterns.pool_rows`, 8 MiB of PCG64 output seeded by ``lo``):
                   a request's sectors are consecutive rows, copied out of the pool in one or two
                   pieces (a row gather, as :class:`~cardbench.patterns.Pattern` makes, cost 2.7
                   GB/s; the copy runs at memory speed)

so every sector of the card is regenerated from (address, round) alone, out of the pool that
:class:`cardbench.patterns.Pattern` uses (no second generator), and a sector found anywhere can be
judged without a table: its header names the card, address and round it claims, and its body is
that (address, round)'s row or it is not. Classes of a sector read back at ``where`` in round
``r`` (:data:`CLASSES`, the document's names):

``erased``      all 00 or all FF: unwritten or erased (the write never reached the flash)
``stale``       this card's sector of this address from an earlier round, whole: the write was lost
``misplaced``   this card's sector of another address, whole: wrong addressing, or a wraparound fake
``foreign``     a whole header of another card's UUID: the reader or the host mixed cards
``corrupt``     anything else: the check fails, the body is not its row, a nonsense round
``unreadable``  an I/O error (found by the reader of the round, not here)

Making a round's data is a gather and a few vector operations; judging it regenerates the
expected bytes and compares them (one ``array_equal`` when all is well): well over 1 GB/s on one
core (``bench/endure_speed.py``).
"""

from __future__ import annotations

import uuid as uuidlib

import numpy as np

from cardbench.kinds.endurance import CLASSES
from cardbench.patterns import ROWS, SECTOR, pool_rows

#: class codes of :meth:`RoundSectors.classify` (OK first, then CLASSES in order)
__all__ = ["CLASSES", "RoundSectors", "bad_counts", "new_card_uuid", "sector_uuids"]
OK, ERASED, STALE, MISPLACED, FOREIGN, CORRUPT, UNREADABLE = range(7)
#: how the body's row moves from one round to the next (odd, so rounds never share a row for long)
ROUND_STEP = 7919
HEADER_WORDS = 5
WORDS = SECTOR // 8
#: sectors handled per numpy call (bounds temporary memory: 16 Ki rows = 8 MiB)
_BATCH = 16384
_M = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9),
      np.uint64(0xD6E8FEB86659FD93), np.uint64(0xFF51AFD7ED558CCD))
LAYOUT = ("512-byte sectors: card UUID (16 bytes), address, round, a 64-bit check of those, then the "
          "card's pool row for (address, round)")


def _check(w0, w1, w2, w3):
    """The header check of words 0..3 (arrays or scalars of uint64; wraps as uint64 does)."""
    with np.errstate(over="ignore"):
        h = (w0 * _M[0]) ^ (w1 * _M[1]) ^ (w2 * _M[2]) ^ (w3 * _M[3])
        h = h ^ (h >> np.uint64(31))
        h = h * _M[4]
        return h ^ (h >> np.uint64(29))


def new_card_uuid() -> str:
    """A fresh card UUID (32 hex digits) whose pool seed is not 0."""
    while True:
        u = uuidlib.uuid4().hex
        if int.from_bytes(bytes.fromhex(u)[:8], "little"):
            return u


class RoundSectors:
    """The sectors of one card: ``fill(buf, pos, rnd)`` writes what round ``rnd`` puts at ``pos``;
    ``classify(buf, pos, rnd)`` counts what was read back there (an array indexed by class code)."""

    def __init__(self, card_uuid: str) -> None:
        raw = bytes.fromhex(card_uuid)
        if len(raw) != 16:
            raise ValueError("a card UUID is 16 bytes (32 hex digits)")
        self.uuid = card_uuid
        self.lo = np.uint64(int.from_bytes(raw[:8], "little"))
        self.hi = np.uint64(int.from_bytes(raw[8:], "little"))
        if not self.lo:
            raise ValueError("the card UUID's first 8 bytes must not be 0 (they seed its pool)")
        self._rows = pool_rows(int(self.lo))
        self._rows64 = self._rows.view(np.uint64).reshape(ROWS, WORDS)
        self._scratch: np.ndarray | None = None

    @staticmethod
    def _row_index(sectors: np.ndarray, rnd) -> np.ndarray:
        return ((sectors + np.uint64(rnd) * np.uint64(ROUND_STEP)) % np.uint64(ROWS)).astype(np.intp)

    def _fill_rows(self, out64: np.ndarray, pos: int, rnd: int) -> None:
        n = out64.shape[0]
        done = 0
        r = np.uint64(rnd)
        while done < n:
            k = min(_BATCH, n - done)       # at most ROWS: two plain copies out of the pool
            first = pos // SECTOR + done
            out = out64[done:done + k]
            row = (first + rnd * ROUND_STEP) % ROWS
            head = min(k, ROWS - row)
            out[:head] = self._rows64[row:row + head]
            if head < k:
                out[head:] = self._rows64[:k - head]
            addr = np.arange(first, first + k, dtype=np.uint64) * np.uint64(SECTOR)
            out[:, 0] = self.lo
            out[:, 1] = self.hi
            out[:, 2] = addr
            out[:, 3] = r
            out[:, 4] = _check(self.lo, self.hi, addr, r)
            done += k

    @staticmethod
    def _words(buf) -> np.ndarray:
        view = np.frombuffer(buf, dtype=np.uint8)
        if view.size % SECTOR:
            raise ValueError("buffer length must be a multiple of 512")
        return view.view(np.uint64).reshape(-1, WORDS)

    def fill(self, buf, pos: int, rnd: int) -> None:
        """Fill ``buf`` (writable, a multiple of 512 bytes) with round ``rnd``'s sectors at ``pos``."""
        if pos % SECTOR or pos < 0 or rnd < 1:
            raise ValueError("position must be a multiple of 512 and the round 1 or more")
        self._fill_rows(self._words(buf), pos, rnd)

    def _expected(self, k: int, pos: int, rnd: int) -> np.ndarray:
        if self._scratch is None or self._scratch.shape[0] < k:
            self._scratch = np.empty((max(k, 2048), WORDS), dtype=np.uint64)
        exp = self._scratch[:k]
        self._fill_rows(exp, pos, rnd)
        return exp

    def classify(self, buf, pos: int, rnd: int) -> np.ndarray:
        """Counts of what ``buf`` (read back from ``pos`` in round ``rnd``) holds: an array of 7
        (OK and the classes, by code). Fast when all is well (one comparison per batch)."""
        if pos % SECTOR:
            raise ValueError("position must be a multiple of 512")
        got = self._words(buf)
        counts = np.zeros(7, dtype=np.int64)
        n = got.shape[0]
        done = 0
        while done < n:
            k = min(_BATCH, n - done)
            part = got[done:done + k]
            start = pos + done * SECTOR
            exp = self._expected(k, start, rnd)
            if np.array_equal(part, exp):
                counts[OK] += k
            else:
                counts += np.bincount(self._classes(part, exp, start, rnd), minlength=7)
            done += k
        return counts

    def classes(self, buf, pos: int, rnd: int) -> np.ndarray:
        """The class code of every sector of ``buf`` (for tests and reports of where)."""
        got = self._words(buf)
        return self._classes(got, self._expected(got.shape[0], pos, rnd), pos, rnd)

    def _classes(self, got: np.ndarray, exp: np.ndarray, start: int, rnd: int) -> np.ndarray:
        k = got.shape[0]
        cls = np.full(k, OK, dtype=np.uint8)
        bad = np.nonzero(~(got == exp).all(axis=1))[0]
        if not bad.size:
            return cls
        g = got[bad]
        sub = np.full(bad.size, CORRUPT, dtype=np.uint8)
        w0, w1, w2, w3, w4 = (g[:, i] for i in range(HEADER_WORDS))
        whole = (_check(w0, w1, w2, w3) == w4) & (w0 != np.uint64(0))
        ours = whole & (w0 == self.lo) & (w1 == self.hi)
        sub[whole & ~ours] = FOREIGN
        where = np.uint64(start) + bad.astype(np.uint64) * np.uint64(SECTOR)
        # this card's sectors: judged by their own (address, round) body
        plausible = ours & (w2 % np.uint64(SECTOR) == 0) & (w3 >= np.uint64(1)) & (w3 <= np.uint64(rnd))
        idx = np.nonzero(plausible)[0]
        if idx.size:
            rows = self._row_index(w2[idx] // np.uint64(SECTOR), w3[idx])
            body_ok = (g[idx, HEADER_WORDS:] == self._rows64[rows, HEADER_WORDS:]).all(axis=1)
            at_home = w2[idx] == where[idx]
            sub[idx[body_ok & at_home & (w3[idx] < np.uint64(rnd))]] = STALE
            sub[idx[body_ok & ~at_home]] = MISPLACED
        erased = ~g.any(axis=1) | (g == np.uint64(0xFFFF_FFFF_FFFF_FFFF)).all(axis=1)
        sub[erased] = ERASED
        cls[bad] = sub
        return cls


def sector_uuids(buf) -> list[str | None]:
    """The card UUID (hex) each sector of ``buf`` claims where its header is whole, else None."""
    got = np.frombuffer(buf, dtype=np.uint8).view(np.uint64).reshape(-1, WORDS)
    w = [got[:, i] for i in range(HEADER_WORDS)]
    whole = (_check(w[0], w[1], w[2], w[3]) == w[4]) & (w[0] != 0)
    out: list[str | None] = []
    for i in range(got.shape[0]):
        if whole[i]:
            out.append(int(w[0][i]).to_bytes(8, "little").hex() + int(w[1][i]).to_bytes(8, "little").hex())
        else:
            out.append(None)
    return out


def bad_counts(counts: np.ndarray) -> dict[str, int]:
    """The document's ``bad_sectors`` object from :meth:`RoundSectors.classify` counts."""
    return {name: int(counts[i + 1]) for i, name in enumerate(CLASSES)}
