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

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

#: Settings :meth:`EmulatedCard.set` accepts (all live; applied atomically on the server).
LIVE_SETTINGS = (
    "write_rate", "read_rate", "latency", "cache_bytes", "cache_rate", "cache_idle",
    "errors", "paced", "turnaround", "volatile_bytes", "drain_rate", "flush", "pull_damage",
)


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
    return out


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
        })
        for key, value in settings.items():
            object.__setattr__(self, key, value)
        if self.cache_bytes and self.cache_rate is None:
            raise UsageError("a write cache (cache_bytes > 0) needs a cache_rate")
        if self.volatile_bytes and self.drain_rate is None:
            raise UsageError("a volatile write cache (volatile_bytes > 0) needs a drain_rate")
        self._check_geometry()

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
