"""The pacing model of emulated cards and readers (pure logic, no FUSE, no sleeping).

Each card has one *bus* timeline shared by reads and writes: a request of ``n`` bytes starts at
``max(now, bus_free)`` and takes ``latency + n / rate``; the server sleeps until its finish time
before answering. A reader with a ceiling adds a second timeline shared by all its cards: the
request also occupies the reader for ``n / ceiling``, and finishes when both are done.

Turnaround allowance: between two back-to-back requests the host spends some time (kernel,
loop driver, FUSE, Python) that a real card's bus would overlap with the transfer, and the
server's own sleep may wake late (a VM or a loaded machine). A request that arrives no later
than ``turnaround`` seconds after the server answered the previous one starts at ``bus_free``
instead of ``now``, so neither lowers the measured rate; the host's part of the gap is credited
up to half the request's own duration (small requests after a short think time still take at
least half their set time). A request after a longer pause starts at ``now`` (the bus was
idle), so isolated requests see the full latency. With a queue (several requests in flight)
the bus is never idle and this plays no role.

Write cache: after no write for ``cache_idle`` seconds the cache is full again; the next
``cache_bytes`` written go at ``cache_rate``, the rest at ``write_rate``. The cache starts full.

Volatile write cache (``volatile_bytes``, ``drain_rate``, ``flush``): a write enters the card's
RAM (waiting until there is room) and is acknowledged; the cache drains to the backing store in
order at ``drain_rate``, each entry with a known start and end. The drain is settled lazily:
before every request, flush and pull, the entries whose drain ended are written back (the
server does the pwrite); reads see the cache over the backing store. A pull writes back what
drained, the front of the entry being drained (cut at a sector: a torn write), and loses the
rest. Unpaced, the cache is bypassed (writes go straight to the backing store).

Flash geometry (off unless the spec sets ``au_bytes``): a request that crosses an AU boundary
takes ``au_cross`` seconds more, one that crosses a page boundary (and no AU boundary)
``page_cross`` more. A write that opens an AU beyond the ``open_aus`` the card keeps open closes
the least recently written one and costs ``gc_seconds`` (a garbage collection); an AU written out
of order (not where its last write ended, or not from its start) counts against
``open_aus_random`` as well. The first ``fat_aus`` AUs are FAT-tuned: free of both. These extra
seconds are added after the turnaround credit and counted from the request's arrival at the
earliest, so they are never credited away: the answer comes at least that much after the request
(a loaded machine only adds to it).

Wear (``wear_cycles`` set): after the pieces are mapped, :mod:`cardbench.emulate.wear` counts a
write's bytes per wear block and rewrites the pieces of worn blocks (dropped, moved, or an
error), and marks the worn pieces of a read (0xFF, or an error). A worn card that turned
read-only answers every write with EROFS.

Fake capacity: :meth:`CardModel.map` splits an advertised range into pieces of the backing file
(``real_size`` bytes): past ``real_size`` offsets wrap around (mod ``real_size``) or are dropped.
"""

from __future__ import annotations

import errno
import math
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from cardbench.emulate.spec import SECTOR, WEAR_SETTINGS, CardSpec, ErrorRange
from cardbench.emulate.wear import WearModel

#: Default turnaround allowance (seconds), see the module docstring.
DEFAULT_TURNAROUND = 0.010
#: A back-to-back request is credited at most this fraction of its own duration, so small
#: requests after a short pause (think time) still take at least half their set time.
CREDIT_FRACTION = 0.5


class Timeline:
    """A resource used by one request at a time (a card's bus, a reader's link)."""

    __slots__ = ("free_at", "answered_at", "due_at", "busy")

    def __init__(self) -> None:
        self.free_at = 0.0      # when the last booked request finishes on this timeline
        self.answered_at = 0.0  # when the server really answered the last request
        self.due_at = 0.0       # when the requests booked here were due in all (the card's bus
                                # and the reader's link: the later of the two finishes)
        self.busy = 0.0         # total seconds booked

    def start_for(self, now: float, turnaround: float, duration: float = math.inf) -> float:
        """When a request arriving ``now`` starts: queued behind the bus if it is busy;
        back-to-back if it came within ``turnaround`` of the last answer (at ``free_at``, the
        host's gap credited up to ``CREDIT_FRACTION * duration``); else now. Our own late
        answers (a sleep that overshot) are not counted as idle time; waiting for the *other*
        timeline (a card's bus behind a reader's ceiling, or the reader's link behind a slow
        card) is not our lateness and earns no credit."""
        if self.free_at >= now:
            return self.free_at
        if now - max(self.free_at, self.answered_at) > turnaround:
            return now
        oversleep = max(0.0, self.answered_at - max(self.free_at, self.due_at))  # our fault, credited in full
        return max(self.free_at, now - oversleep - CREDIT_FRACTION * duration)

    def book(self, now: float, duration: float, turnaround: float) -> tuple[float, float]:
        """Book ``duration`` seconds; returns (start, finish)."""
        start = self.start_for(now, turnaround, duration)
        finish = start + duration
        self.free_at = finish
        self.busy += duration
        return start, finish


@dataclass
class Counters:
    reads: int = 0
    writes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_cached: int = 0     # written at the cache rate
    bytes_dropped: int = 0    # written past real_size on a "drop" card
    bytes_wrapped: int = 0    # written past real_size on a "wraparound" card
    eio: int = 0              # requests answered with EIO
    flushes: int = 0          # flushes (fsync/fdatasync) that reached the card
    pulls: int = 0            # times the card was pulled
    bytes_lost: int = 0       # volatile cache bytes lost by pulls
    bytes_torn: int = 0       # bytes of cut entries that did reach the store before a pull
    au_crossings: int = 0     # requests that crossed an AU boundary (geometry)
    page_crossings: int = 0   # requests that crossed a page boundary and no AU boundary
    garbage_collections: int = 0  # AUs closed to open another (open_aus exceeded)
    erofs: int = 0            # writes refused because the card turned read-only (wear)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Verdict:
    """What the server does with one request."""

    finish: float            # monotonic time to answer at (may be in the past)
    error: bool = False      # answer with ``errno`` (after waiting until ``finish``)
    pieces: list[tuple[int | None, int]] = field(default_factory=list)  # (backing offset or None, length)
    errno: int = errno.EIO   # with ``error``: EIO, or EROFS (a worn card turned read-only)


class CardModel:
    """Settings, state and counters of one card. Thread safety: hold ``reader.lock``."""

    def __init__(self, spec: CardSpec, reader: "ReaderModel") -> None:
        self.spec = spec
        self.reader = reader
        self.name = spec.name
        self.size = spec.size
        self.real_size = spec.kept
        self.fake = spec.real_size is not None
        self.fake_mode = spec.fake_mode
        self.write_rate = spec.write_rate
        self.read_rate = spec.read_rate
        self.latency = spec.latency
        self.cache_bytes = spec.cache_bytes
        self.cache_rate = spec.cache_rate
        self.cache_idle = spec.cache_idle
        self.errors: tuple[ErrorRange, ...] = spec.errors
        self.paced = True
        self.yanked = False
        self.bus = Timeline()
        self.cache_left = spec.cache_bytes
        self.last_write_end: float | None = None
        self.counters = Counters()
        self.volatile_bytes = spec.volatile_bytes
        self.drain_rate = spec.drain_rate
        self.flush = spec.flush
        self.pull_damage: tuple[tuple[int, int], ...] = spec.pull_damage
        #: the volatile cache: [backing offset, data, drain start, drain end], in drain order
        self.pending: deque[list] = deque()
        self.pending_bytes = 0
        self.drain_free_at = 0.0
        self.au_bytes = spec.au_bytes
        self.page_bytes = spec.page_bytes
        self.au_cross = spec.au_cross
        self.page_cross = spec.page_cross
        self.open_aus = spec.open_aus
        self.open_aus_random = spec.open_aus_random if spec.open_aus_random is not None else spec.open_aus
        self.gc_seconds = spec.gc_seconds
        self.fat_aus = spec.fat_aus
        #: open AUs, least recently written first: AU index -> [where the last write ended, out of order]
        self.open_units: OrderedDict[int, list] = OrderedDict()
        self.wear_settings: dict[str, Any] = {key: getattr(spec, key) for key in WEAR_SETTINGS}
        self.wear: WearModel | None = self._wear_model(self.wear_settings, None)

    def _wear_model(self, settings: dict[str, Any], old: WearModel | None) -> WearModel | None:
        if settings["wear_cycles"] is None:
            return None
        return WearModel.rebuilt(old, self.real_size, self.au_bytes, cycles=settings["wear_cycles"],
                                 spread=settings["wear_spread"], seed=settings["wear_seed"],
                                 block=settings["wear_block"], mode=settings["wear_mode"],
                                 readonly_at=settings["wear_readonly_at"])

    # -- settings -----------------------------------------------------------------------
    def apply(self, settings: dict[str, Any]) -> None:
        """Apply validated live settings (see :func:`cardbench.emulate.spec.validate_settings`).
        Wear settings draw the limits again (checked first: a bad one changes nothing)."""
        wear = {key: settings[key] for key in WEAR_SETTINGS if key in settings}
        if wear:
            merged = {**self.wear_settings, **wear}
            self.wear = self._wear_model(merged, self.wear)
            self.wear_settings = merged
        for key, value in settings.items():
            if key == "turnaround":
                self.reader.turnaround = value
            elif key not in wear:
                setattr(self, key, value)
        if "cache_bytes" in settings:
            self.cache_left = self.cache_bytes
        if self.cache_bytes and self.cache_rate is None:
            self.cache_rate = self.write_rate

    def settings(self) -> dict[str, Any]:
        return {
            "name": self.name, "size": self.size,
            "real_size": self.real_size if self.fake else None, "fake_mode": self.fake_mode,
            "write_rate": self.write_rate, "read_rate": self.read_rate, "latency": self.latency,
            "cache_bytes": self.cache_bytes, "cache_rate": self.cache_rate, "cache_idle": self.cache_idle,
            "errors": [e.to_list() for e in self.errors],
            "paced": self.paced, "yanked": self.yanked,
            "volatile_bytes": self.volatile_bytes, "drain_rate": self.drain_rate, "flush": self.flush,
            "pull_damage": [list(r) for r in self.pull_damage],
            "au_bytes": self.au_bytes, "page_bytes": self.page_bytes, "au_cross": self.au_cross,
            "page_cross": self.page_cross, "open_aus": self.open_aus, "open_aus_random": self.open_aus_random,
            "gc_seconds": self.gc_seconds, "fat_aus": self.fat_aus,
            **self.wear_settings,
        }

    def status(self) -> dict[str, Any]:
        d = self.settings()
        d["counters"] = self.counters.as_dict()
        d["cache_left"] = self.cache_left
        d["volatile_held"] = self.pending_bytes
        d["busy_seconds"] = self.bus.busy
        d["wear"] = self.wear.summary() if self.wear is not None else None
        return d

    # -- the model ----------------------------------------------------------------------
    def map(self, offset: int, length: int) -> list[tuple[int | None, int]]:
        """Split an advertised range into (backing offset or None for dropped, length) pieces."""
        pieces: list[tuple[int | None, int]] = []
        real = self.real_size
        while length > 0:
            if offset < real:
                n = min(length, real - offset)
                pieces.append((offset, n))
            elif self.fake_mode == "drop":
                n = length
                pieces.append((None, n))
            else:
                inner = offset % real
                n = min(length, real - inner)
                pieces.append((inner, n))
            offset += n
            length -= n
        return pieces

    def _write_seconds(self, n: int, start: float) -> float:
        if not self.cache_bytes:
            return n / self.write_rate
        if self.last_write_end is not None and start - self.last_write_end >= self.cache_idle:
            self.cache_left = self.cache_bytes
        fast = min(n, self.cache_left)
        self.cache_left -= fast
        self.counters.bytes_cached += fast
        return fast / (self.cache_rate or self.write_rate) + (n - fast) / self.write_rate

    def geometry_seconds(self, op: str, offset: int, length: int) -> float:
        """Extra seconds the card's geometry adds to this request (and its open-AU bookkeeping)."""
        au = self.au_bytes
        if not au or length <= 0:
            return 0.0
        c = self.counters
        extra = 0.0
        last = offset + length - 1
        first_au, last_au = offset // au, last // au
        if first_au != last_au:
            c.au_crossings += 1
            extra += self.au_cross
        elif self.page_bytes and offset // self.page_bytes != last // self.page_bytes:
            c.page_crossings += 1
            extra += self.page_cross
        if op == "write" and self.open_aus:
            for unit in range(first_au, last_au + 1):
                start = max(offset, unit * au) - unit * au
                end = min(offset + length, (unit + 1) * au) - unit * au
                extra += self._write_unit(unit, start, end)
        return extra

    def _write_unit(self, unit: int, start: int, end: int) -> float:
        """A write of ``[start, end)`` inside AU ``unit``: the garbage collections it costs."""
        if unit < self.fat_aus:
            return 0.0
        units = self.open_units
        gcs = 0
        entry = units.get(unit)
        if entry is None:
            if len(units) >= self.open_aus:
                units.popitem(last=False)
                gcs += 1
            entry = units[unit] = [0, False]
        else:
            units.move_to_end(unit)
        if start != entry[0] and not entry[1]:
            entry[1] = True
            shuffled = [u for u, e in units.items() if e[1]]
            if len(shuffled) > self.open_aus_random:
                del units[shuffled[0]]
                gcs += 1
        entry[0] = end
        self.counters.garbage_collections += gcs
        return gcs * self.gc_seconds

    def request(self, op: str, offset: int, length: int, now: float) -> Verdict:
        """Book one read/write; caller holds ``reader.lock``. ``op`` is "read" or "write"."""
        c = self.counters
        if self.yanked:
            c.eio += 1
            return Verdict(finish=now, error=True)
        length = max(0, min(length, self.size - offset))
        error = any(e.matches(op, offset, length) for e in self.errors)
        if op == "write":
            c.writes += 1
            c.bytes_written += length
            if offset + length > self.real_size and self.fake:
                past = offset + length - max(offset, self.real_size)
                if self.fake_mode == "drop":
                    c.bytes_dropped += past
                else:
                    c.bytes_wrapped += past
        else:
            c.reads += 1
            c.bytes_read += length
        if error:
            c.eio += 1
        pieces = [] if error else self.map(offset, length)
        err = errno.EIO
        if self.wear is not None and not error:
            pieces, worn_err = self.wear.write(pieces) if op == "write" else self.wear.read(pieces)
            if worn_err:
                error, err = True, worn_err
                if worn_err == errno.EROFS:
                    c.erofs += 1
                else:
                    c.eio += 1
        extra = 0.0 if error else self.geometry_seconds(op, offset, length)
        if not self.paced:
            # due now: its answer is no lateness to credit to the next paced request
            self.bus.due_at = max(self.bus.due_at, now)
            self.reader.link.due_at = max(self.reader.link.due_at, now)
            return Verdict(finish=now, error=error, pieces=pieces, errno=err)
        turnaround = self.reader.turnaround
        # The card bus: latency + transfer. For writes the cache rate may apply.
        start = self.bus.start_for(now, turnaround)
        if op == "write":
            seconds = self._write_seconds(length, start)
        else:
            seconds = length / self.read_rate
        _, finish = self.bus.book(now, self.latency + seconds, turnaround)
        if extra:   # after the turnaround credit, from the request's arrival: never credited away
            finish = max(finish, now) + extra
            self.bus.free_at = finish
            self.bus.busy += extra
        if op == "write":
            self.last_write_end = finish
        # The reader link (shared by all cards behind the reader).
        if self.reader.ceiling:
            _, rfinish = self.reader.link.book(now, length / self.reader.ceiling, turnaround)
            finish = max(finish, rfinish)
            self.reader.link.due_at = max(self.reader.link.due_at, finish)
        self.bus.due_at = max(self.bus.due_at, finish)
        return Verdict(finish=finish, error=error, pieces=pieces, errno=err)

    # -- the volatile write cache (caller holds reader.lock; the server does the pwrites) --------
    @property
    def caching(self) -> bool:
        """Whether writes go through the volatile cache now."""
        return bool(self.volatile_bytes) and self.paced and bool(self.drain_rate)

    def settle(self, now: float) -> list[tuple[int, bytes]]:
        """Take the entries whose drain ended by ``now``: (backing offset, data) to write back."""
        done = []
        while self.pending and self.pending[0][3] <= now:
            off, data, _, _ = self.pending.popleft()
            self.pending_bytes -= len(data)
            done.append((off, data))
        return done

    def accept_at(self, n: int, now: float) -> float:
        """When a write of ``n`` bytes arriving at ``now`` finds room in the cache (entries
        whose drain ended by then have left it; a write larger than the cache waits for it to
        empty)."""
        excess = self.pending_bytes + n - self.volatile_bytes
        if excess <= 0 or not self.pending:
            return now
        for entry in self.pending:
            excess -= len(entry[1])
            if excess <= 0:
                return max(now, entry[3])
        return max(now, self.pending[-1][3])

    def cache_put(self, pieces: list[tuple[int | None, int]], data, accept: float) -> None:
        """Put a write's pieces into the cache at ``accept``; they drain after what is there."""
        view = memoryview(data)
        pos = 0
        for where, n in pieces:
            if where is not None and where >= 0:
                start = max(accept, self.drain_free_at)
                end = start + n / float(self.drain_rate or 1.0)
                self.pending.append([where, bytes(view[pos:pos + n]), start, end])
                self.pending_bytes += n
                self.drain_free_at = end
            pos += n

    def empty_at(self, now: float) -> float:
        """When the cache will be empty (an honest flush waits until then)."""
        return max(now, self.pending[-1][3]) if self.pending else now

    def overlay(self, where: int, buf: bytearray) -> None:
        """Copy the cached data over ``buf`` (backing bytes read from ``where``), oldest first."""
        end = where + len(buf)
        for off, data, _, _ in self.pending:
            lo, hi = max(off, where), min(off + len(data), end)
            if lo < hi:
                buf[lo - where:hi - where] = data[lo - off:hi - off]

    def cut(self, now: float) -> list[tuple[int, bytes]]:
        """Pull the card at ``now``: what reaches the store (the drained entries and the drained
        front of the one draining, whole sectors), the rest of the cache is lost. The card is
        yanked from then on."""
        writes = self.settle(now)
        part = 0
        if self.pending and self.pending[0][2] < now:
            off, data, start, end = self.pending[0]
            part = int(len(data) * (now - start) / (end - start)) // SECTOR * SECTOR
            if part:
                writes.append((off, data[:part]))
                self.counters.bytes_torn += part
        self.counters.bytes_lost += self.pending_bytes - part
        self.pending.clear()
        self.pending_bytes = 0
        self.drain_free_at = now
        self.yanked = True
        self.counters.pulls += 1
        return writes

    def answered(self, when: float) -> None:
        """The server answered a request at ``when`` (monotonic); see :meth:`Timeline.start_for`."""
        if when > self.bus.answered_at:
            self.bus.answered_at = when
        if when > self.reader.link.answered_at:
            self.reader.link.answered_at = when


class ReaderModel:
    """A card reader: a lock, an optional ceiling (bytes/s) and the cards behind it."""

    def __init__(self, ceiling: float | None = None, turnaround: float = DEFAULT_TURNAROUND) -> None:
        self.lock = threading.Lock()
        self.ceiling = ceiling
        self.turnaround = turnaround
        self.link = Timeline()
        self.cards: dict[str, CardModel] = {}

    def add(self, spec: CardSpec) -> CardModel:
        card = CardModel(spec, self)
        self.cards[spec.name] = card
        return card

    def status(self) -> dict[str, Any]:
        return {
            "ceiling": self.ceiling, "turnaround": self.turnaround, "link_busy_seconds": self.link.busy,
            "cards": {name: card.status() for name, card in self.cards.items()},
        }
