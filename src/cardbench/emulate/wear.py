"""The wear model of an emulated card: per-block write counts, limits with a known spread, and
what a worn-out block does (pure logic, no FUSE; the fields are documented on
:class:`cardbench.emulate.spec.CardSpec`).

The card's kept bytes (the backing store, so a wraparound fake wears its real blocks twice as
fast) are cut into ``blocks`` wear blocks of ``block`` bytes (the last one may be shorter). Per
block the model keeps, in numpy arrays (about 21 bytes a block): the bytes written into it so
far (``written``), its limit in cycles (``limits``) and in bytes (``limit_bytes``: the limit
times the block's size), whether it is worn, and (``"mixed"``) its mode.

A cycle is one block's size written into the block: every byte a write request puts into the
block counts, so a pass over the whole card costs every block exactly one cycle whatever the
request size and order. A block is worn once ``written > limit_bytes``, i.e. by the first
write into it after it survived ``limit`` whole writes, and stays worn. The write that wears
it already gets the worn behaviour for that block's part. Every request's bookkeeping is a few
numpy operations on the slice of blocks it touches; only requests touching a worn block are
split block by block.
"""

from __future__ import annotations

import errno
from typing import Any

import numpy as np

from cardbench.emulate.spec import WEAR_BLOCK_MODES, wear_geometry

#: a read piece's backing offset meaning "reads as 0xFF" (a worn block of mode "ff")
ERASED = -1

_CODES = {name: code for code, name in enumerate(WEAR_BLOCK_MODES)}
_STALE, _EIO, _FF, _MISPLACE = (_CODES[m] for m in ("stale", "eio", "ff", "misplace"))

Pieces = list[tuple[int | None, int]]


def _limits(blocks: int, cycles: int, spread: float, seed: int) -> np.ndarray:
    if not spread:
        return np.full(blocks, cycles, dtype=np.int32)
    lo = max(1, round(cycles * (1 - spread)))
    hi = max(lo, round(cycles * (1 + spread)))
    return np.random.default_rng(seed).integers(lo, hi + 1, size=blocks, dtype=np.int32)


class WearModel:
    """The wear state of one card. Thread safety: the caller holds the reader's lock."""

    def __init__(self, kept: int, au_bytes: int, *, cycles: int, spread: float = 0.0, seed: int = 0,
                 block: int = 0, mode: str = "stale", readonly_at: float | None = None,
                 written: np.ndarray | None = None) -> None:
        self.block, self.blocks = wear_geometry(kept, au_bytes, block, mode)
        self.kept = kept
        self.requested_block = block
        self.cycles, self.spread, self.seed, self.mode, self.readonly_at = cycles, spread, seed, mode, readonly_at
        self.whole = kept // self.block           # whole blocks (misplaced writes land among them)
        self.shift = (self.whole // 2) * self.block
        self.last_size = kept - (self.blocks - 1) * self.block
        self.limits = _limits(self.blocks, cycles, spread, seed)
        self.limit_bytes = self.limits.astype(np.int64) * self.block
        self.limit_bytes[-1] = int(self.limits[-1]) * self.last_size
        if written is not None and written.shape == (self.blocks,):
            self.written = written
        else:
            self.written = np.zeros(self.blocks, dtype=np.int64)
        self.worn = self.written > self.limit_bytes
        self.worn_count = int(self.worn.sum())
        #: per-block mode codes ("mixed": drawn from a stream of its own, so the limits do not
        #: change with the mode), or None: every block has ``self.code``
        self.modes: np.ndarray | None = None
        self.code = _CODES.get(mode, _STALE)      # "readonly": worn blocks keep their old data
        if mode == "mixed":
            rng = np.random.default_rng([seed, 1])
            self.modes = rng.integers(0, len(WEAR_BLOCK_MODES), size=self.blocks, dtype=np.int8)
        if mode == "readonly":
            self.readonly_after: int | None = 1
        elif readonly_at is not None:
            self.readonly_after = max(1, int(np.ceil(readonly_at * self.blocks - 1e-9)))
        else:
            self.readonly_after = None
        self.read_only = self.readonly_after is not None and self.worn_count >= self.readonly_after
        self.worn_requests = 0      # requests that touched a worn block (reads and writes)
        self.refused = 0            # writes refused because the card is read-only

    @classmethod
    def rebuilt(cls, old: "WearModel | None", kept: int, au_bytes: int, **settings: Any) -> "WearModel":
        """A model with new settings that keeps ``old``'s counts (unless the blocks changed)."""
        model = cls(kept, au_bytes, written=None if old is None else old.written, **settings)
        if old is not None and model.written is old.written:
            model.worn_requests, model.refused = old.worn_requests, old.refused
        return model

    def _mode(self, block: int) -> int:
        return self.code if self.modes is None else int(self.modes[block])

    # -- the data path ---------------------------------------------------------------------
    def write(self, pieces: Pieces) -> tuple[Pieces, int]:
        """Count a write of these (backing offset, length) pieces; returns the pieces to store
        (None: dropped) and 0 or the errno to answer with (the pieces are still stored)."""
        if self.read_only:
            self.refused += 1
            return [], errno.EROFS
        B = self.block
        out: Pieces = []
        err = 0
        touched_worn = False
        for where, n in pieces:
            if where is None or n <= 0:
                out.append((where, n))
                continue
            end = where + n
            fb, lb = where // B, (end - 1) // B
            seg = self.written[fb:lb + 1]
            if fb == lb:
                seg += n
            else:
                seg += B
                seg[0] -= where - fb * B
                seg[-1] -= (lb + 1) * B - end
            worn = seg > self.limit_bytes[fb:lb + 1]
            if not worn.any():
                out.append((where, n))
                continue
            touched_worn = True
            known = self.worn[fb:lb + 1]
            fresh = int(np.count_nonzero(worn & ~known))
            if fresh:
                known |= worn
                self.worn_count += fresh
                if self.readonly_after is not None and self.worn_count >= self.readonly_after:
                    self.read_only = True
                    self.refused += 1
                    self.worn_requests += 1
                    return [], errno.EROFS
            for k in range(fb, lb + 1):
                lo, hi = max(where, k * B), min(end, (k + 1) * B)
                if not worn[k - fb]:
                    out.append((lo, hi - lo))
                    continue
                mode = self._mode(k)
                if mode == _MISPLACE:
                    out.append(((k * B + self.shift) % (self.whole * B) + lo - k * B, hi - lo))
                else:
                    if mode == _EIO:
                        err = errno.EIO
                    out.append((None, hi - lo))
        if touched_worn:
            self.worn_requests += 1
        return _merge(out), err

    def read(self, pieces: Pieces) -> tuple[Pieces, int]:
        """A read of these pieces: the pieces to read (:data:`ERASED`: all 0xFF) and 0 or the
        errno to answer with (then nothing is read)."""
        if not self.worn_count:
            return pieces, 0
        B = self.block
        out: Pieces = []
        touched = False
        for where, n in pieces:
            if where is None or n <= 0:
                out.append((where, n))
                continue
            end = where + n
            fb, lb = where // B, (end - 1) // B
            worn = self.worn[fb:lb + 1]
            if not worn.any():
                out.append((where, n))
                continue
            touched = True
            for k in range(fb, lb + 1):
                lo, hi = max(where, k * B), min(end, (k + 1) * B)
                mode = self._mode(k) if worn[k - fb] else -1
                if mode == _EIO:
                    self.worn_requests += 1
                    return [], errno.EIO
                out.append((ERASED if mode == _FF else lo, hi - lo))
        if touched:
            self.worn_requests += 1
        return _merge(out), 0

    # -- the truth ---------------------------------------------------------------------------
    def sizes(self) -> np.ndarray:
        sizes = np.full(self.blocks, self.block, dtype=np.int64)
        sizes[-1] = self.last_size
        return sizes

    def summary(self) -> dict[str, Any]:
        """A few figures for the card's status."""
        return {"block": self.block, "blocks": self.blocks, "worn": self.worn_count, "read_only": self.read_only,
                "passes": float(self.written.sum()) / self.kept}

    def report(self, full: bool = False) -> dict[str, Any]:
        """The truth for a test (see :meth:`cardbench.emulate.EmulatedCard.wear`)."""
        cycles = self.written / self.sizes()
        values, counts = np.unique(self.limits, return_counts=True)
        first = int(np.argmin(self.limits))
        d: dict[str, Any] = {
            "cycles": self.cycles, "spread": self.spread, "seed": self.seed, "mode": self.mode,
            "readonly_at": self.readonly_at, "readonly_after": self.readonly_after,
            "block": self.block, "blocks": self.blocks, "last_block": self.last_size,
            "misplace_shift": self.shift,
            "limits": [[int(v), int(c)] for v, c in zip(values, counts, strict=True)],
            "first_block": first, "first_limit": int(self.limits[first]),
            "passes": float(self.written.sum()) / self.kept,
            "cycles_min": float(cycles.min()), "cycles_max": float(cycles.max()),
            "worn": self.worn_count, "read_only": self.read_only,
            "worn_requests": self.worn_requests, "refused": self.refused,
            "worn_blocks": [int(i) for i in np.flatnonzero(self.worn)[:1000]],
        }
        if self.modes is not None:
            d["modes"] = {name: int(np.count_nonzero(self.modes == code)) for name, code in _CODES.items()}
        if full:
            d["worn_blocks"] = [int(i) for i in np.flatnonzero(self.worn)]
            d["block_limits"] = self.limits.tolist()
            d["block_cycles"] = cycles.tolist()
            d["block_modes"] = ([WEAR_BLOCK_MODES[c] for c in self.modes.tolist()] if self.modes is not None
                                else None)
        return d


def _merge(pieces: Pieces) -> Pieces:
    """Join neighbouring pieces that continue each other (both dropped, or contiguous)."""
    out: Pieces = []
    for where, n in pieces:
        if out:
            pw, pn = out[-1]
            if (pw is None and where is None) or (pw == ERASED and where == ERASED) or \
                    (pw is not None and pw >= 0 and where is not None and where == pw + pn):
                out[-1] = (pw, pn + n)
                continue
        out.append((where, n))
    return out
