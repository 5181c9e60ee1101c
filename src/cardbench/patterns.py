"""Fast, incompressible, verifiable data: every 512-byte sector says where it belongs.

Every 512-byte sector written at absolute position ``pos`` (bytes from the start of the file or
device) carries

    bytes 0..7    the run tag (uint64 LE, never 0)
    bytes 8..15   ``pos``
    bytes 16..511 pool bytes chosen by ``pos`` alone: row ``pos/512 * 4099 mod 16384`` of the run's
                  8 MiB pool of PCG64 output seeded by the tag

so the data is incompressible and any sector can be regenerated from its position whatever the
request it was written in. A sector read back at ``where`` that carries another ``pos`` of this run
*and* that position's body is proof of wraparound (``overwritten``, distance ``pos - where``), not
mere corruption. Making data is a numpy row gather and judging it a vectorised comparison: several
GB/s per core (bench/patterns_speed.py). Used by every workload that writes (seq_write, cold_read's
check, raw_write, random and sustained writes) and by verification.

Classes of a sector read back at ``where``:

``ok``           exactly what this run wrote there
``zero``         all zeros (a dropped write, or a card that reads unwritten space as zeros)
``overwritten``  this run's data of another position (the card wrapped around)
``changed``      this run's tag but the wrong body or a nonsense position (the card damaged it)
``foreign``      another cardbench run's data (the write did not land: old data)
``garbage``      anything else: old contents, 0xFF (erased flash), noise (the write did not land)

``zero``, ``foreign`` and ``garbage`` mean the write was lost ("dropped").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SECTOR = 512
POOL_BYTES = 8 << 20
STRIDE = 4099
ROWS = POOL_BYTES // SECTOR
#: positions above this are nonsense (an 8 EiB card does not exist)
MAX_POS = 1 << 56
#: sectors gathered per numpy call (bounds temporary memory: 16 Ki rows = 8 MiB)
_BATCH_ROWS = 16384

CLASSES = ("ok", "zero", "overwritten", "changed", "foreign", "garbage")
OK, ZERO, OVERWRITTEN, CHANGED, FOREIGN, GARBAGE = range(6)
DROPPED_CLASSES = (ZERO, FOREIGN, GARBAGE)


@dataclass
class Judgement:
    """What a read-back of ``length`` bytes at ``offset`` held, sector by sector."""

    offset: int
    length: int
    counts: dict[str, int] = field(default_factory=dict)
    #: absolute position of the first sector that is not ok (None: all ok)
    first_bad: int | None = None
    #: class name of that first bad sector
    first_bad_class: str | None = None
    #: (where found, where it belongs) of overwritten sectors, first few
    misplaced: list[tuple[int, int]] = field(default_factory=list)
    #: per-sector class codes (only when asked for)
    classes: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        return self.first_bad is None

    @property
    def sectors(self) -> int:
        return self.length // SECTOR

    @property
    def bad(self) -> int:
        return self.sectors - self.counts.get("ok", 0)

    def dominant_bad(self) -> str | None:
        """The most frequent bad class ("overwritten" wins ties: it is the strongest evidence)."""
        bad = {k: v for k, v in self.counts.items() if k != "ok" and v}
        if not bad:
            return None
        return max(bad, key=lambda k: (bad[k], k == "overwritten"))


def _pool(tag: int) -> np.ndarray:
    """8 MiB of PCG64 output seeded by the tag (raw 64-bit words: ~6x faster than ``bytes``)."""
    raw = np.random.PCG64(tag).random_raw(POOL_BYTES // 8).astype("<u8", copy=False)
    return raw.view(np.uint8).reshape(ROWS, SECTOR)


def pool_rows(tag: int) -> np.ndarray:
    """The pool of ``tag`` as :class:`Pattern` gathers its sectors from it (``ROWS`` rows of 512
    bytes): for sector layouts built on the same machinery (:mod:`cardbench.endure.sectors`)."""
    return _pool(tag)


class Pattern:
    """The data of one run: ``Pattern(tag)`` makes the same bytes every time.

    ``fill(buf, pos)`` writes the sectors that belong at ``pos`` .. ``pos + len(buf)``;
    ``judge(buf, pos)`` classifies what was read back from there.
    """

    def __init__(self, tag: int):
        self.tag = int(tag) & 0xFFFF_FFFF_FFFF_FFFF
        if self.tag == 0:
            raise ValueError("the run tag must not be 0 (zero sectors would look like ours)")
        self._rows = _pool(self.tag)
        self._rows64 = self._rows.view(np.uint64)
        self._scratch: np.ndarray | None = None

    # -- making data ------------------------------------------------------------------------------
    @staticmethod
    def _row_index(first_sector: int, count: int) -> np.ndarray:
        s = np.arange(first_sector, first_sector + count, dtype=np.uint64)
        return ((s * np.uint64(STRIDE)) % np.uint64(ROWS)).astype(np.intp)

    def _fill_rows(self, rows: np.ndarray, pos: int) -> None:
        n = rows.shape[0]
        done = 0
        while done < n:
            k = min(_BATCH_ROWS, n - done)
            first = pos // SECTOR + done
            out = rows[done:done + k]
            np.take(self._rows, self._row_index(first, k), axis=0, out=out)
            hdr = out[:, :16].view(np.uint64)
            hdr[:, 0] = self.tag
            hdr[:, 1] = np.arange(first * SECTOR, (first + k) * SECTOR, SECTOR, dtype=np.uint64)
            done += k

    def fill(self, buf, pos: int) -> None:
        """Fill ``buf`` (writable, a multiple of 512 bytes) with the sectors that belong at ``pos``."""
        view = np.frombuffer(buf, dtype=np.uint8)
        if view.size % SECTOR or pos % SECTOR or pos < 0:
            raise ValueError("buffer length and position must be multiples of 512")
        self._fill_rows(view.reshape(-1, SECTOR), pos)

    def block(self, pos: int, length: int) -> bytearray:
        buf = bytearray(length)
        self.fill(buf, pos)
        return buf

    # -- judging data -----------------------------------------------------------------------------
    def _expected(self, n_bytes: int, pos: int) -> np.ndarray:
        if self._scratch is None or self._scratch.size < n_bytes:
            self._scratch = np.empty(max(n_bytes, 1 << 20), dtype=np.uint8)
        exp = self._scratch[:n_bytes].reshape(-1, SECTOR)
        self._fill_rows(exp, pos)
        return exp

    def judge(self, buf, pos: int, *, keep_classes: bool = False, max_misplaced: int = 64) -> Judgement:
        """Classify every sector of ``buf`` (read back from ``pos``). Fast when all is well."""
        got = np.frombuffer(buf, dtype=np.uint8)
        n = got.size
        if n % SECTOR or pos % SECTOR:
            raise ValueError("buffer length and position must be multiples of 512")
        j = Judgement(offset=pos, length=n)
        rows = got.reshape(-1, SECTOR)
        nrows = rows.shape[0]
        classes = np.zeros(nrows, dtype=np.uint8) if keep_classes else None
        totals = np.zeros(len(CLASSES), dtype=np.int64)
        done = 0
        while done < nrows:
            k = min(_BATCH_ROWS, nrows - done)
            part = rows[done:done + k]
            start = pos + done * SECTOR
            exp = self._expected(k * SECTOR, start)
            if np.array_equal(part, exp):
                totals[OK] += k
            else:
                cls = self._classify(part, exp, start)
                totals += np.bincount(cls, minlength=len(CLASSES))
                if classes is not None:
                    classes[done:done + k] = cls
                bad = np.nonzero(cls != OK)[0]
                if bad.size and j.first_bad is None:
                    j.first_bad = start + int(bad[0]) * SECTOR
                    j.first_bad_class = CLASSES[int(cls[bad[0]])]
                if len(j.misplaced) < max_misplaced:
                    ow = np.nonzero(cls == OVERWRITTEN)[0][: max_misplaced - len(j.misplaced)]
                    if ow.size:
                        belongs = part[ow, 8:16].copy().view(np.uint64).ravel()
                        j.misplaced.extend((start + int(i) * SECTOR, int(b)) for i, b in zip(ow, belongs, strict=True))
            done += k
        j.counts = {name: int(totals[i]) for i, name in enumerate(CLASSES)}
        j.classes = classes
        return j

    def _classify(self, got: np.ndarray, exp: np.ndarray, start: int) -> np.ndarray:
        # compare 8 bytes at a time: rows of 64 uint64 words (word 0 tag, word 1 position)
        k = got.shape[0]
        g64 = got.view(np.uint64).reshape(k, SECTOR // 8)
        e64 = exp.view(np.uint64).reshape(k, SECTOR // 8)
        cls = np.full(k, GARBAGE, dtype=np.uint8)
        same = (g64 == e64).all(axis=1)
        cls[same] = OK
        bad = np.nonzero(~same)[0]
        if not bad.size:
            return cls
        g = g64 if bad.size == k else g64[bad]
        zero = ~g.any(axis=1)
        tags = g[:, 0]
        belongs = g[:, 1]
        where = (np.uint64(start) + bad.astype(np.uint64) * np.uint64(SECTOR))
        ours = tags == np.uint64(self.tag)
        plausible = (belongs % np.uint64(SECTOR) == 0) & (belongs < np.uint64(MAX_POS))
        moved = ours & plausible & (belongs != where)
        sub = np.full(bad.size, GARBAGE, dtype=np.uint8)
        sub[ours] = CHANGED
        if moved.any():
            idx = np.nonzero(moved)[0]
            rows = ((belongs[idx] // np.uint64(SECTOR)) * np.uint64(STRIDE) % np.uint64(ROWS)).astype(np.intp)
            pool64 = self._rows64[rows, 2:]
            body = g[:, 2:] if idx.size == g.shape[0] else g[idx, 2:]
            body_ok = (body == pool64).all(axis=1)
            sub[idx[body_ok]] = OVERWRITTEN
        foreign = ~ours & (tags != 0) & plausible
        if foreign.any():
            # our body under a damaged tag is damage, not another run's data
            idx = np.nonzero(foreign & (belongs == where))[0]
            if idx.size:
                body_ours = (g[idx, 2:] == e64[bad[idx], 2:]).all(axis=1)
                foreign[idx[body_ours]] = False
                sub[idx[body_ours]] = CHANGED
        sub[foreign] = FOREIGN
        sub[zero] = ZERO
        cls[bad] = sub
        return cls


def bad_runs(classes: np.ndarray, pos: int) -> list[tuple[int, int, int]]:
    """Runs of equal non-ok classes: [(start, end, class code), ...] in absolute bytes."""
    if classes.size == 0:
        return []
    change = np.nonzero(np.diff(classes.astype(np.int16)))[0] + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [classes.size]])
    out = []
    for s, e in zip(starts, ends, strict=True):
        c = int(classes[s])
        if c != OK:
            out.append((pos + int(s) * SECTOR, pos + int(e) * SECTOR, c))
    return out


def merge_ranges(ranges: list[tuple[int, int]] | list[list[int]], gap: int = 0) -> list[list[int]]:
    """Sorted, merged [start, end) ranges (touching or closer than ``gap`` merge)."""
    out: list[list[int]] = []
    for s, e in sorted((int(r[0]), int(r[1])) for r in ranges):
        if out and s <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out
