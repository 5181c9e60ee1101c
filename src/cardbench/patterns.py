"""Fast, incompressible, verifiable data: every 512-byte sector says where it belongs and which write put it there.

Every 512-byte sector written at absolute position ``pos`` (bytes from the start of the file or
device) by the write numbered ``seq`` carries

    bytes 0..7    the run tag (uint64 LE, never 0)
    bytes 8..15   ``pos``
    bytes 16..23  ``seq`` (uint64 LE): 0 for the one write of a position (a file written once, a
                  verification pass); 1, 2, 3 ... for the writes of a closed loop that rewrites
                  positions (the pattern tests: :class:`FreshWrites`)
    bytes 24..511 pool bytes chosen by ``pos`` and ``seq``: row ``(pos/512 + seq * 7919) * 4099
                  mod 16384`` of the run's 8 MiB pool of PCG64 output seeded by the tag

so the data is incompressible, no two writes of a run carry the same sector (a rewrite of a
position differs from the write before it in its header and in its whole body), and any sector
can be regenerated from its position and sequence number whatever the request it was written
in. A sector read back at ``where`` that carries another ``pos`` of this run *and* that
position's body is proof of wraparound (``overwritten``, distance ``pos - where``), not mere
corruption. Making data is one numpy add per MiB (a template of the pool's rows in sector order
with the headers laid in, plus the write's position and sequence number) and judging it a
vectorised comparison: several GB/s per core (bench/patterns_speed.py). Used by every workload
that writes (seq_write, cold_read's check, raw_write, random and sustained writes, the engine's
closed loop) and by verification.

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
#: a write's sequence number moves its sectors' rows by this many places (odd: every rewrite of
#: a position gets another body, for 16384 rewrites in a row)
SEQ_STEP = 7919
#: positions above this are nonsense (an 8 EiB card does not exist)
MAX_POS = 1 << 56
#: sectors made or judged per numpy call (bounds temporary memory: 16 Ki rows = 8 MiB)
_BATCH_ROWS = 16384
#: sectors made per numpy add: the template holds this many rows past the pool's end
_SPAN = 2048
_MASK64 = (1 << 64) - 1
#: header words of a sector (uint64): tag, position, sequence number; the body follows
_HEAD = 3

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


def _template(tag: int) -> np.ndarray:
    """The pool's rows in sector order (row ``r`` is pool row ``r * STRIDE mod ROWS``), ``_SPAN``
    rows repeated past the end, as uint64 words with the header laid in: word 0 the tag, word 1
    ``r * 512``, word 2 zero. The sectors of a write are then one slice of it plus a constant
    (see :meth:`Pattern._fill_rows`)."""
    pool = _pool(tag).view(np.uint64)
    order = (np.arange(ROWS + _SPAN, dtype=np.int64) % ROWS * STRIDE % ROWS).astype(np.intp)
    tmpl = pool[order]
    tmpl[:, 0] = tag
    tmpl[:, 1] = np.arange(ROWS + _SPAN, dtype=np.uint64) * np.uint64(SECTOR)
    tmpl[:, 2] = 0
    return tmpl


def _first_row(sector: int, seq: int) -> int:
    """The template row of the sector numbered ``sector`` (position / 512) written by write ``seq``."""
    return (sector + seq * SEQ_STEP) % ROWS


class Pattern:
    """The data of one run: ``Pattern(tag)`` makes the same bytes every time.

    ``fill(buf, pos, seq=0)`` writes the sectors that belong at ``pos`` .. ``pos + len(buf)``
    (written by the write numbered ``seq``); ``judge(buf, pos, seq=0)`` classifies what was read
    back from there; ``headers(buf)`` says, sector by sector, whose data it holds.
    """

    def __init__(self, tag: int):
        self.tag = int(tag) & 0xFFFF_FFFF_FFFF_FFFF
        if self.tag == 0:
            raise ValueError("the run tag must not be 0 (zero sectors would look like ours)")
        self._tmpl = _template(self.tag)
        self._scratch: np.ndarray | None = None

    # -- making data ------------------------------------------------------------------------------
    def _fill_rows(self, rows: np.ndarray, pos: int, seq: int = 0) -> None:
        """``rows`` (n x 512 bytes) := the sectors of write ``seq`` at ``pos``: for each span of
        up to ``_SPAN`` sectors, the template's rows from the span's first row on, plus (word by
        word) ``[0, pos - row * 512, seq, 0, ...]``: tag and body as the template has them,
        position and sequence number set. One numpy call per span."""
        words = rows.view(np.uint64)
        n = words.shape[0]
        add = np.zeros(SECTOR // 8, dtype=np.uint64)
        add[2] = seq & _MASK64
        tmpl = self._tmpl
        done = 0
        while done < n:
            k = min(_SPAN, n - done)
            at = pos + done * SECTOR
            j = _first_row(at // SECTOR, seq)
            add[1] = (at - j * SECTOR) & _MASK64
            np.add(tmpl[j:j + k], add, out=words[done:done + k])
            done += k

    def fill(self, buf, pos: int, seq: int = 0) -> None:
        """Fill ``buf`` (writable, a multiple of 512 bytes) with the sectors that belong at ``pos``,
        as the write numbered ``seq`` (0: the one write of that position) makes them."""
        view = np.frombuffer(buf, dtype=np.uint8)
        if view.size % SECTOR or pos % SECTOR or pos < 0:
            raise ValueError("buffer length and position must be multiples of 512")
        self._fill_rows(view.reshape(-1, SECTOR), pos, seq)

    def block(self, pos: int, length: int, seq: int = 0) -> bytearray:
        buf = bytearray(length)
        self.fill(buf, pos, seq)
        return buf

    def headers(self, buf) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What each sector of ``buf`` (read back, a multiple of 512 bytes) says of itself:
        (tags, positions, sequence numbers, intact), uint64 arrays and a bool array; ``intact``
        is True where the tag is this run's and the body is the one its own position and
        sequence number make (so the sector is, whole, the data of that write of this run)."""
        got = np.frombuffer(buf, dtype=np.uint8)
        if got.size % SECTOR:
            raise ValueError("buffer length must be a multiple of 512")
        g = got.view(np.uint64).reshape(-1, SECTOR // 8)
        tags, belongs, seqs = g[:, 0].copy(), g[:, 1].copy(), g[:, 2].copy()
        intact = (tags == np.uint64(self.tag)) & (belongs % np.uint64(SECTOR) == 0) & (belongs < np.uint64(MAX_POS))
        idx = np.nonzero(intact)[0]
        if idx.size:
            intact[idx] = self._bodies_match(g[idx], belongs[idx], seqs[idx])
        return tags, belongs, seqs, intact

    def _bodies_match(self, g: np.ndarray, belongs: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Which rows of ``g`` (uint64 words of sectors) carry the body of their own header's
        position and sequence number."""
        rows = ((belongs // np.uint64(SECTOR) + seqs * np.uint64(SEQ_STEP)) % np.uint64(ROWS)).astype(np.intp)
        return (g[:, _HEAD:] == self._tmpl[rows, _HEAD:]).all(axis=1)

    # -- judging data -----------------------------------------------------------------------------
    def _expected(self, n_bytes: int, pos: int, seq: int) -> np.ndarray:
        if self._scratch is None or self._scratch.size < n_bytes:
            self._scratch = np.empty(max(n_bytes, 1 << 20), dtype=np.uint8)
        exp = self._scratch[:n_bytes].reshape(-1, SECTOR)
        self._fill_rows(exp, pos, seq)
        return exp

    def judge(self, buf, pos: int, *, seq: int = 0, keep_classes: bool = False,
              max_misplaced: int = 64) -> Judgement:
        """Classify every sector of ``buf`` (read back from ``pos``) against what the write
        numbered ``seq`` put there. Fast when all is well. This run's data of the right position
        from another write (another ``seq``) is ``changed``; :meth:`headers` tells it apart."""
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
            exp = self._expected(k * SECTOR, start, seq)
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
        # compare 8 bytes at a time: rows of 64 uint64 words (word 0 tag, 1 position, 2 sequence)
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
            body_ok = self._bodies_match(g[idx], belongs[idx], g[idx, 2])
            sub[idx[body_ok]] = OVERWRITTEN
        foreign = ~ours & (tags != 0) & plausible
        if foreign.any():
            # our body under a damaged tag is damage, not another run's data
            idx = np.nonzero(foreign & (belongs == where))[0]
            if idx.size:
                body_ours = (g[idx, _HEAD:] == e64[bad[idx], _HEAD:]).all(axis=1)
                foreign[idx[body_ours]] = False
                sub[idx[body_ours]] = CHANGED
        sub[foreign] = FOREIGN
        sub[zero] = ZERO
        cls[bad] = sub
        return cls


#: writes of up to this many sectors are made by a copy and two stores a sector (cheaper than a
#: numpy call: ~0.8 against ~1.2 us for 4 KiB); larger ones by one numpy add per MiB
_SMALL = 16


class FreshWrites:
    """Data unique to every write of a closed loop over a fixed set of buffers.

    ``fill(i, pos)`` makes buffer ``i`` (of ``bufs``) the data of the next write, at ``pos``: the
    pattern's sectors of that position with the next sequence number (``first_seq``, then one
    more per write). Two writes of the loop never carry the same sector, also when they hit the
    same position (random offsets repeat; time-based runs wrap), and each can be told apart
    when read back (:meth:`Pattern.headers`: the last write's sequence number is the highest).
    Made for the hot path, nothing allocated per write: up to 8 KiB a copy from the template
    and two stores a sector (~0.8 us for 4 KiB), larger writes one numpy add per MiB. ``close``
    lets go of the buffers (before they are closed; also after a Ctrl-C inside ``fill``).
    """

    def __init__(self, pattern: Pattern, bufs, length: int, first_seq: int = 1) -> None:
        if length <= 0 or length % SECTOR:
            raise ValueError("the write length must be a positive multiple of 512")
        self.pattern = pattern
        self.length = length
        self._next = [first_seq]          # the next write's sequence number (shared with a closure)
        self._n = length // SECTOR
        self._tmpl = pattern._tmpl
        self._add = np.zeros(SECTOR // 8, dtype=np.uint64)
        #: small writes: the template's bytes, each buffer's bytes and its uint64 words
        self._tbytes: memoryview | None = None
        self._bytes: list[memoryview] = []
        self._q: list[memoryview] = []
        #: large writes: each buffer as rows of uint64 words
        self._words: list[np.ndarray] | None = None
        if self._n <= _SMALL:
            self._tbytes = self._tmpl.data.cast("B")
            self._bytes = [memoryview(b)[:length] for b in bufs]
            self._q = [v.cast("Q") for v in self._bytes]
            # the hot path as a closure (a quarter cheaper than a method reading attributes)
            self.fill = self._small_fill()      # type: ignore[method-assign]
        else:
            self._words = [np.frombuffer(b, dtype=np.uint64, count=length // 8).reshape(-1, SECTOR // 8)
                           for b in bufs]

    @property
    def seq(self) -> int:
        """The sequence number the next write gets."""
        return self._next[0]

    def _small_fill(self):
        """``fill`` for writes of up to ``_SMALL`` sectors: a copy of the template's rows, then
        each sector's position and sequence number stored (the memory views it holds are
        released by ``close``, whoever still holds them: also after a Ctrl-C inside it)."""
        tbytes, views, words, length, nxt = self._tbytes, self._bytes, self._q, self.length, self._next
        assert tbytes is not None
        heads = tuple(range(1, self._n << 6, 64))
        mask = ROWS - 1     # ROWS is a power of two: & is the modulo

        if self._n == 8:
            # 4 KiB, the random-write size: the same stores unrolled (no loop: ~0.2 us less a
            # write, worth it where a QD32 loop is CPU-bound)
            def fill8(i: int, pos: int) -> None:
                seq = nxt[0]
                nxt[0] = seq + 1
                at = (((pos >> 9) + seq * SEQ_STEP) & mask) << 9
                views[i][:] = tbytes[at:at + 4096]
                q = words[i]
                q[1] = pos
                q[2] = seq
                q[65] = pos + 512
                q[66] = seq
                q[129] = pos + 1024
                q[130] = seq
                q[193] = pos + 1536
                q[194] = seq
                q[257] = pos + 2048
                q[258] = seq
                q[321] = pos + 2560
                q[322] = seq
                q[385] = pos + 3072
                q[386] = seq
                q[449] = pos + 3584
                q[450] = seq
            return fill8

        def fill(i: int, pos: int) -> None:
            seq = nxt[0]
            nxt[0] = seq + 1
            at = (((pos >> 9) + seq * SEQ_STEP) & mask) << 9
            views[i][:] = tbytes[at:at + length]
            q = words[i]
            for k in heads:
                q[k] = pos
                q[k + 1] = seq
                pos += SECTOR
        return fill

    def fill(self, i: int, pos: int) -> None:
        """Make buffer ``i`` the data of the next write, at ``pos``."""
        # (no local name holds a numpy view of the buffers: a Ctrl-C in here keeps this frame
        # alive in its traceback, and such a view would make closing the buffers a BufferError)
        seq = self._next[0]
        self._next[0] = seq + 1
        n = self._n
        add = self._add
        add[2] = seq & _MASK64
        done = 0
        while done < n:
            k = min(_SPAN, n - done)
            at = pos + done * SECTOR
            j = ((at >> 9) + seq * SEQ_STEP) % ROWS
            add[1] = (at - (j << 9)) & _MASK64
            np.add(self._tmpl[j:j + k], add, out=self._words[i][done:done + k])    # type: ignore[index]
            done += k

    def close(self) -> None:
        for views in (self._q, self._bytes):
            for v in views:
                v.release()
        self._q, self._bytes, self._words = [], [], None
        if self._tbytes is not None:
            self._tbytes.release()
            self._tbytes = None

    def __enter__(self) -> "FreshWrites":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
