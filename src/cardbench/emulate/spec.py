"""What an emulated card is: :class:`CardSpec` and the settings that can change while it runs.

Everything is bytes, seconds and bytes per second (see :mod:`cardbench.units`). A spec is plain
data; it travels to the server process as JSON (:meth:`CardSpec.to_json` / :meth:`from_json`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from cardbench.errors import UsageError

#: Sector size: sizes and fake capacities must be multiples of it (the loop device needs it).
SECTOR = 512

ERROR_KINDS = ("read", "write", "both")
#: what a flush (fsync/fdatasync reaching the card) does with a volatile write cache
FLUSH_MODES = ("honest", "liar")
FAKE_MODES = ("wraparound", "drop")
#: what a worn-out block does (see :class:`CardSpec`, ``wear_mode``)
WEAR_MODES = ("stale", "eio", "ff", "misplace", "readonly", "mixed")
#: the per-block modes ``wear_mode="mixed"`` draws from
WEAR_BLOCK_MODES = ("stale", "eio", "ff", "misplace")
#: default wear block (when neither ``wear_block`` nor ``au_bytes`` is set)
WEAR_BLOCK = 64 * 1024
#: at most this many wear blocks per card (about 21 bytes of server memory each)
MAX_WEAR_BLOCKS = 1 << 22

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

#: Settings :meth:`EmulatedCard.set` accepts (all live; applied atomically on the server).
LIVE_SETTINGS = (
    "write_rate", "read_rate", "latency", "cache_bytes", "cache_rate", "cache_idle",
    "errors", "paced", "turnaround", "volatile_bytes", "drain_rate", "flush", "pull_damage",
    "wear_cycles", "wear_spread", "wear_seed", "wear_block", "wear_mode", "wear_readonly_at",
)
#: the wear model's settings (a subset of :data:`LIVE_SETTINGS`)
WEAR_SETTINGS = ("wear_cycles", "wear_spread", "wear_seed", "wear_block", "wear_mode", "wear_readonly_at")


@dataclass(frozen=True)
class ErrorRange:
    """I/O that touches bytes ``[start, end)`` of the advertised space fails with EIO.

    ``kind`` is "read", "write" or "both".
    """

    start: int
    end: int
    kind: str = "both"

    def matches(self, op: str, offset: int, length: int) -> bool:
        """True if an ``op`` ("read"/"write") of ``length`` bytes at ``offset`` touches this range."""
        if self.kind != "both" and self.kind != op:
            return False
        return offset < self.end and offset + length > self.start

    def to_list(self) -> list:
        return [self.start, self.end, self.kind]


def parse_errors(errors: Iterable[Any] | None) -> tuple[ErrorRange, ...]:
    """Normalise ``[(start, end, kind), ...]`` (or ErrorRange / dicts) into ErrorRange tuples."""
    out: list[ErrorRange] = []
    for item in errors or ():
        if isinstance(item, ErrorRange):
            rng = item
        elif isinstance(item, dict):
            rng = ErrorRange(int(item["start"]), int(item["end"]), str(item.get("kind", "both")))
        else:
            seq = list(item)
            if len(seq) == 2:
                seq.append("both")
            if len(seq) != 3:
                raise UsageError(f"an error range is (start, end, kind), got {item!r}")
            rng = ErrorRange(_int(seq[0], "error range start"), _int(seq[1], "error range end"), str(seq[2]))
        if rng.kind not in ERROR_KINDS:
            raise UsageError(f"error range kind must be read, write or both, got {rng.kind!r}")
        if rng.start < 0 or rng.end <= rng.start:
            raise UsageError(f"error range needs 0 <= start < end, got [{rng.start}, {rng.end})")
        out.append(rng)
    return tuple(out)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise UsageError(f"{what} must be a whole number of bytes, got {value!r}")
    return int(value)


def _rate(value: Any, what: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what} must be a positive number of bytes/s, got {value!r}")
    return float(value)


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UsageError(f"{what} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def validate_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Check live settings (a subset of :data:`LIVE_SETTINGS`); returns them normalised."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key not in LIVE_SETTINGS:
            raise UsageError(f"unknown card setting {key!r} (settable: {', '.join(LIVE_SETTINGS)})")
        if key in ("write_rate", "read_rate"):
            out[key] = _rate(value, key)
        elif key == "cache_rate":
            out[key] = _rate(value, key, optional=True)
        elif key in ("latency", "cache_idle", "turnaround"):
            out[key] = _seconds(value, key)
        elif key == "cache_bytes":
            out[key] = _int(value, key)
            if out[key] < 0:
                raise UsageError(f"cache_bytes must be >= 0, got {value!r}")
        elif key == "errors":
            out[key] = parse_errors(value)
        elif key == "volatile_bytes":
            out[key] = _int(value, key)
            if out[key] < 0 or out[key] % SECTOR:
                raise UsageError(f"volatile_bytes must be a multiple of 512 B >= 0, got {value!r}")
        elif key == "drain_rate":
            out[key] = _rate(value, key, optional=True)
        elif key == "flush":
            if value not in FLUSH_MODES:
                raise UsageError(f"flush must be honest or liar, got {value!r}")
            out[key] = value
        elif key == "pull_damage":
            out[key] = tuple((r.start, r.end) for r in parse_errors(value))
        elif key == "paced":
            out[key] = bool(value)
        elif key in WEAR_SETTINGS:
            out[key] = _wear_setting(key, value)
    return out


def _fraction(value: Any, what: str, *, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not (0 < value <= 1 if low_open else 0 <= value <= 1):
        raise UsageError(f"{what} must be a number {'above 0 and up to' if low_open else 'from 0 to'} 1, got {value!r}")
    return float(value)


def _wear_setting(key: str, value: Any) -> Any:
    if key == "wear_cycles":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1 \
                or value >= 2 ** 31:
            raise UsageError(f"wear_cycles must be a whole number of writes >= 1 (or None: no wear), got {value!r}")
        return int(value)
    if key == "wear_spread":
        return _fraction(value, "wear_spread")
    if key == "wear_seed":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"wear_seed must be a whole number >= 0, got {value!r}")
        return value
    if key == "wear_block":
        block = _int(value, "wear_block")
        if block < 0 or block % SECTOR:
            raise UsageError(f"wear_block must be a multiple of 512 B (0: the default), got {value!r}")
        return block
    if key == "wear_mode":
        if value not in WEAR_MODES:
            raise UsageError(f"wear_mode must be one of {', '.join(WEAR_MODES)}, got {value!r}")
        return value
    # wear_readonly_at
    return None if value is None else _fraction(value, "wear_readonly_at", low_open=True)


def wear_geometry(kept: int, au_bytes: int, wear_block: int, wear_mode: str) -> tuple[int, int]:
    """The wear block in effect and the number of wear blocks of a card keeping ``kept`` bytes.

    ``wear_block`` 0 means the default: the AU if ``au_bytes`` is set, else :data:`WEAR_BLOCK`,
    doubled until the card has at most :data:`MAX_WEAR_BLOCKS`. The last block may be shorter.
    Raises UsageError for a block larger than the card, too many blocks, or ``misplace`` with
    fewer than two whole blocks.
    """
    block = wear_block
    if not block:
        block = au_bytes or WEAR_BLOCK
        while -(-kept // block) > MAX_WEAR_BLOCKS:
            block *= 2
    if block > kept:
        raise UsageError(f"wear_block ({block} B) is larger than the card's {kept} B")
    blocks = -(-kept // block)
    if blocks > MAX_WEAR_BLOCKS:
        raise UsageError(f"wear_block {block} B makes {blocks} wear blocks (at most {MAX_WEAR_BLOCKS}); "
                         f"give a wear_block of at least {-(-kept // MAX_WEAR_BLOCKS // SECTOR) * SECTOR} B")
    if wear_mode in ("misplace", "mixed") and kept // block < 2:
        raise UsageError(f"wear_mode {wear_mode} needs at least two whole wear blocks "
                         f"(the card keeps {kept} B, the wear block is {block} B)")
    return block, blocks


@dataclass(frozen=True)
class CardSpec:
    """An emulated card.

    size        advertised capacity in bytes (multiple of 512).
    write_rate  sustained write rate, bytes/s.   read_rate: read rate, bytes/s.
    latency     seconds added to every request (reads and writes).
    real_size   bytes actually kept (fake card) or None for a genuine card; past it writes
                wrap around (``fake_mode="wraparound"``: offset mod real_size) or are dropped
                and read back as zeros (``fake_mode="drop"``).
    cache_bytes / cache_rate / cache_idle
                write cache (SLC-like): after no write for ``cache_idle`` s the next
                ``cache_bytes`` written go at ``cache_rate``, the rest at ``write_rate``.
                0 / None disables it. The cache starts full.
    errors      ``[(start, end, kind), ...]``: I/O touching ``[start, end)`` fails with EIO;
                kind is "read", "write" or "both".
    volatile_bytes / drain_rate / flush
                a volatile write cache (RAM on the card): a write is acknowledged once it is
                in the cache (waiting for room when it is full) and reaches the backing store
                in the background at ``drain_rate``, in order. A flush waits until the cache
                is empty (``flush="honest"``) or returns at once (``"liar"``). A pull
                (:meth:`EmulatedCard.pull`) loses what the cache still holds; the write being
                drained at that moment is cut at a sector (torn). 0 disables it.
    pull_damage ``[(start, end), ...]``: a pull scrambles these bytes of the backing store
                (old data damaged by a power cut, as in Zheng et al., FAST 2013).
    name        card file name on the FUSE mount (letters, digits, ``_.-``).

    Flash geometry (all off by default; see :mod:`cardbench.emulate.pacing`):
    au_bytes    allocation unit (erase block) size, a multiple of 512 (not only powers of two:
                12 MiB is an SD AU_SIZE code); 0 = no geometry.
    page_bytes  page size (divides ``au_bytes``); 0 = none.
    au_cross / page_cross
                seconds added to a request that crosses an AU boundary / a page boundary (a
                request crossing an AU boundary pays ``au_cross`` only).
    open_aus    AUs the card keeps open for writing (0 = no limit); a write that opens one
                more closes the least recently written one and costs ``gc_seconds``.
    open_aus_random
                of those, how many may be written out of order (None: as many as ``open_aus``);
                one more written out of order closes the oldest such AU (``gc_seconds``).
    fat_aus     the first this many AUs are FAT-tuned: written in any order at no cost, never
                counted as open.

    Wear (off by default; the model is :mod:`cardbench.emulate.wear`, its truth
    :meth:`EmulatedCard.wear`). The kept bytes are cut into wear blocks; each has a limit of
    writes it survives, and the write that takes a block past its limit wears it out for good:
    wear_cycles the mean limit, in whole writes of a block (None: no wear).
    wear_spread 0 to 1: the limits are drawn uniformly from the whole numbers in
                ``[round(c * (1 - s)), round(c * (1 + s))]`` (c = wear_cycles, s = wear_spread,
                the low end at least 1), seeded by ``wear_seed``; 0: every block survives
                exactly ``wear_cycles`` writes.
    wear_seed   the seed of the limits (and of the modes of ``"mixed"``): the same spec, the
                same limits.
    wear_block  bytes per wear block (a multiple of 512; 0: the AU if ``au_bytes`` is set,
                else 64 KiB). The last block may be shorter.
                What counts: every byte written to a block counts; a block has done one
                cycle per block size written into it (a shorter last block: per its size).
                So a pass writing the whole card once costs every block exactly one cycle,
                whatever the request size and order, and a block of limit L is worn by the
                first write into it in pass L + 1 (with ``wear_spread=0``: passes 1..c are
                clean, pass c + 1 fails everywhere).
    wear_mode   what a worn block does:
                "stale"     writes to it are dropped and report success; it keeps its old data.
                "eio"       a write touching it fails with EIO (the rest of that write lands);
                            a read touching it fails with EIO.
                "ff"        it reads as all 0xFF (erased); writes to it report success.
                "misplace"  writes to it land ``(whole blocks // 2) * wear_block`` bytes further
                            on (mod the whole blocks: an address line stuck); it keeps its old data.
                "readonly"  the first worn block turns the whole card read-only: that write and
                            every later one fail (EROFS at the card, which the loop device
                            passes up as EIO); reads still work, worn blocks read their old data.
                "mixed"     each block draws one of stale, eio, ff, misplace (seeded).
    wear_readonly_at
                None, or a fraction above 0 up to 1: once this fraction of the blocks is worn
                (at least one block), the card turns read-only as in "readonly" (any mode).
    Wear counts belong to the card: they survive :meth:`EmulatedCard.pull` / ``reinsert``
    (a card that turned read-only comes back as a read-only device). Setting a wear field with
    :meth:`EmulatedCard.set` draws the limits again and keeps the counts (a new ``wear_block``
    starts the counts afresh); which blocks are worn is then judged again against the new limits.
    """

    size: int
    write_rate: float
    read_rate: float
    latency: float = 0.0
    real_size: int | None = None
    fake_mode: str = "wraparound"
    cache_bytes: int = 0
    cache_rate: float | None = None
    cache_idle: float = 1.0
    errors: tuple[ErrorRange, ...] = field(default_factory=tuple)
    name: str = "card0"
    volatile_bytes: int = 0
    drain_rate: float | None = None
    flush: str = "honest"
    pull_damage: tuple[tuple[int, int], ...] = field(default_factory=tuple)
    au_bytes: int = 0
    page_bytes: int = 0
    au_cross: float = 0.0
    page_cross: float = 0.0
    open_aus: int = 0
    open_aus_random: int | None = None
    gc_seconds: float = 0.0
    fat_aus: int = 0
    wear_cycles: int | None = None
    wear_spread: float = 0.0
    wear_seed: int = 0
    wear_block: int = 0
    wear_mode: str = "stale"
    wear_readonly_at: float | None = None

    def __post_init__(self) -> None:
        # Normalise and validate; frozen, so go through object.__setattr__.
        size = _int(self.size, "size")
        if size < 64 * 1024 or size % SECTOR:
            raise UsageError(f"card size must be a multiple of 512 B and at least 64 KiB, got {self.size!r}")
        object.__setattr__(self, "size", size)
        if self.real_size is not None:
            real = _int(self.real_size, "real_size")
            if real <= 0 or real % SECTOR or real >= size:
                raise UsageError(
                    f"real size must be a multiple of 512 B and smaller than the size ({size} B), got {self.real_size!r}")
            object.__setattr__(self, "real_size", real)
        if self.fake_mode not in FAKE_MODES:
            raise UsageError(f"fake mode must be wraparound or drop, got {self.fake_mode!r}")
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise UsageError(f"card name must be 1-64 letters, digits, '_', '.' or '-', got {self.name!r}")
        settings = validate_settings({
            "write_rate": self.write_rate, "read_rate": self.read_rate, "latency": self.latency,
            "cache_bytes": self.cache_bytes, "cache_rate": self.cache_rate,
            "cache_idle": self.cache_idle, "errors": self.errors,
            "volatile_bytes": self.volatile_bytes, "drain_rate": self.drain_rate, "flush": self.flush,
            "pull_damage": self.pull_damage,
            **{key: getattr(self, key) for key in WEAR_SETTINGS},
        })
        for key, value in settings.items():
            object.__setattr__(self, key, value)
        if self.cache_bytes and self.cache_rate is None:
            raise UsageError("a write cache (cache_bytes > 0) needs a cache_rate")
        if self.volatile_bytes and self.drain_rate is None:
            raise UsageError("a volatile write cache (volatile_bytes > 0) needs a drain_rate")
        self._check_geometry()
        if self.wear_cycles is not None:
            wear_geometry(self.kept, self.au_bytes, self.wear_block, self.wear_mode)

    def _check_geometry(self) -> None:
        for key in ("au_bytes", "page_bytes", "open_aus", "fat_aus"):
            value = _int(getattr(self, key), key)
            if value < 0:
                raise UsageError(f"{key} must be >= 0, got {value!r}")
            object.__setattr__(self, key, value)
        for key in ("au_cross", "page_cross", "gc_seconds"):
            object.__setattr__(self, key, _seconds(getattr(self, key), key))
        au, page = self.au_bytes, self.page_bytes
        if au % SECTOR or page % SECTOR:
            raise UsageError(f"au_bytes and page_bytes must be multiples of 512 B, got {au} and {page}")
        if page and (not au or au % page):
            raise UsageError(f"page_bytes ({page}) must divide au_bytes ({au})")
        if not au and (self.open_aus or self.fat_aus or self.au_cross or self.gc_seconds):
            raise UsageError("open_aus, fat_aus, au_cross and gc_seconds need an au_bytes")
        if self.open_aus_random is not None:
            value = _int(self.open_aus_random, "open_aus_random")
            if not 1 <= value <= self.open_aus:
                raise UsageError(f"open_aus_random must be between 1 and open_aus ({self.open_aus}), got {value}")
            object.__setattr__(self, "open_aus_random", value)

    @property
    def kept(self) -> int:
        """Bytes the card really stores."""
        return self.real_size if self.real_size is not None else self.size

    def replace(self, **changes: Any) -> "CardSpec":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["errors"] = [e.to_list() for e in self.errors]
        d["pull_damage"] = [list(r) for r in self.pull_damage]
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CardSpec":
        return cls(**data)
