"""The endurance run: rounds of writing the whole card and reading it all back, until a stop rule
(:func:`run_endurance`, :func:`resume_endurance`).

A round writes every slice (``slices``, default 16, of the card) in an order shuffled anew each
round (``random.Random("<card uuid>:<round>:write")``, and ``:read`` for the read-back), in
requests of ``request_bytes`` through the queued engine (io_uring at ``depth``, O_DIRECT; each
request's sectors made while the others are in flight), each slice ended by an fsync, so the
write is timed to stable storage; then reads every slice back and classifies each sector
(:mod:`cardbench.endure.sectors`). A request that fails to read is read again in smaller pieces,
down to single sectors (bounded), so only the sectors that fail are counted unreadable.

The state is saved on the host after every slice (:mod:`cardbench.endure.state`). A card that goes
away pauses the run (event ``paused``); it is found again by the UUID in its own sectors on any
device name (:func:`cardbench.devices.refind.wait_for_card`; event ``back``) and the slice under
way is done again; another card in its place is refused and never written. A card whose writes
fail as read-only, or that does not come back within ``timeout``, ends the run with that finding.
"""

from __future__ import annotations

import errno
import os
import queue
import random
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cardbench.devices import refind
from cardbench.devices.identity import identify
from cardbench.devices.lock import target_lock
from cardbench.devices.safety import check_destructive
from cardbench.endure.doc import ENDINGS, build_doc
from cardbench.endure.sectors import (
    CLASSES,
    LAYOUT,
    UNREADABLE,
    RoundSectors,
    bad_counts,
    new_card_uuid,
    sector_uuids,
)
from cardbench.endure.state import StateError, load_state, resumable, save_state, saved_states, state_path
from cardbench.engine.base import IoOp
from cardbench.engine.buffers import AlignedBuffers, aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.engine.errors import GONE, GONE_WORDS, IO_ERRORS, fault_errno, shown
from cardbench.engine.queued import QueuedEngine
from cardbench.errors import Interrupted, TargetError, UsageError
from cardbench.result import Card, Reader
from cardbench.signals import start_thread
from cardbench.target import GONE_WAIT, DeviceTarget, open_device_target
from cardbench.verify.quick import verify_device

SECTOR = 512
#: failed reads, at most, per slice while a failed request is read again in pieces (a failing read
#: can take long: the emulator's ~6 ms, a real card's up to its SCSI timeout); past it, a piece that
#: fails counts whole as unreadable (an upper bound, on a card already failing everywhere)
PROBE_FAILS = 64
#: pieces a failed read request is split into, largest first (down to one sector)
PROBE_PIECES = (64 << 10, 4 << 10, SECTOR)
#: errnos of a write that say the card is read-only
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EPERM, errno.EACCES})
#: progress events at most this often (seconds)
PROGRESS_EVERY = 0.5


@dataclass
class EndureOptions:
    """What an endurance run does (the contract's fields first; see docs/commands.md)."""

    rounds: int | None = None
    hours: float | None = None
    until_bad: float = 0.5
    slices: int = 16
    request_bytes: int = 1 << 20
    rated_tbw: float | None = None
    rated_video: tuple[float, float] | None = None
    timeout: float = 600.0
    say: Callable[[str], None] | None = None
    events: Callable[[str, dict], None] | None = None
    stop: threading.Event | None = None
    #: requests in flight (io_uring); 1 is one request at a time
    depth: int = 4
    #: where the host's state goes (default :func:`cardbench.endure.state.state_dir`)
    state_dir: str | os.PathLike | None = None
    #: run the quick fake-capacity probe before round 1
    probe: bool = True

    def validate(self) -> None:
        if self.rounds is not None and self.rounds < 1:
            raise UsageError(f"--rounds must be 1 or more, got {self.rounds}")
        if self.hours is not None and not self.hours > 0:
            raise UsageError(f"--hours must be more than 0, got {self.hours}")
        if not 0 < self.until_bad <= 1:
            raise UsageError(f"--until-bad must be more than 0% and at most 100%, got {self.until_bad * 100:g}%")
        if not 1 <= self.slices <= 4096:
            raise UsageError(f"--slices must be 1..4096, got {self.slices}")
        if self.request_bytes < 4096 or self.request_bytes % 4096 or self.request_bytes > 64 << 20:
            raise UsageError(f"--request must be a multiple of 4 KiB from 4 KiB to 64 MiB, got {self.request_bytes} "
                             "bytes")
        if not 1 <= self.depth <= 64:
            raise UsageError(f"the queue depth must be 1..64, got {self.depth}")
        if self.rated_tbw is not None and not self.rated_tbw > 0:
            raise UsageError(f"--rated-tbw must be more than 0, got {self.rated_tbw}")
        if self.rated_video is not None and not (self.rated_video[0] > 0 and self.rated_video[1] > 0):
            raise UsageError("--rated-video needs HOURS@MBPS, both more than 0")
        if not self.timeout > 0:
            raise UsageError(f"--timeout must be more than 0 s, got {self.timeout}")


class _Gone(Exception):
    """The card went away during a slice (the slice is done again once it is back)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _ReadOnly(Exception):
    """The card refuses writes (read-only)."""


@dataclass
class _Acc:
    """What one slice of a phase has done so far (committed to the round when its last request is)."""

    k: int
    size: int
    requests: int
    left: int = 0
    failed: int = 0
    pieces_written: int = 0
    unread_whole: bool = False
    counts: np.ndarray = field(default_factory=lambda: np.zeros(7, dtype=np.int64))
    budget: list[int] = field(default_factory=lambda: [PROBE_FAILS])

    def __post_init__(self) -> None:
        self.left = self.requests


class _Flusher:
    """Finished slices flushed (fsync) and committed in a thread of its own, in order, so the
    engine's queue stays full meanwhile (an fsync waits for the writes in flight: 57 ms a slice
    on an emulated card at 60 MB/s, during which nothing new went out when it was done in line).
    ``commit(acc, seconds)`` gets each slice with the time since the one before was done."""

    def __init__(self, file: DataFile | None, commit: Callable[[_Acc, float], None],
                 failure: Callable[[BaseException], BaseException]) -> None:
        self.file = file
        self.commit = commit
        self.failure = failure
        self.queue: queue.Queue[_Acc | None] = queue.Queue()
        self.error: BaseException | None = None
        self.t_mark = time.perf_counter()
        self.thread = threading.Thread(target=self._run, name="endure-flush", daemon=True)
        start_thread(self.thread)

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            if self.file is not None:
                self.file.close()

    def _loop(self) -> None:
        while True:
            acc = self.queue.get()
            if acc is None or self.error is not None:
                return
            try:
                if self.file is not None:
                    self.file.sync()
                now = time.perf_counter()
                self.commit(acc, now - self.t_mark)
                self.t_mark = now
            except IO_ERRORS as e:     # the fsync: the card went away, or refuses writes
                self.error = self.failure(e)
                return
            except BaseException as e:  # noqa: BLE001 - raised in the run's thread (check/close)
                self.error = e
                return

    def put(self, acc: _Acc) -> None:
        self.check()
        self.queue.put(acc)

    def check(self) -> None:
        """Raise what the thread met (a failed fsync, a host disk that filled up)."""
        if self.error is not None:
            raise self.error

    def close(self, *, quiet: bool = False) -> None:
        """Wait until every slice handed over is flushed and committed; raise what went wrong
        (not with ``quiet``: another error is on its way)."""
        self.queue.put(None)
        self.thread.join()
        if not quiet:
            self.check()


def slice_bounds(capacity: int, slices: int) -> list[tuple[int, int]]:
    """[start, end) of each slice: equal shares of the card, on 4 KiB boundaries where the
    capacity allows (else on sectors)."""
    align = 4096 if capacity % 4096 == 0 else SECTOR
    units = capacity // align
    n = max(1, min(slices, units))
    edges = [i * units // n * align for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n)]


def slice_order(card_uuid: str, rnd: int, phase: str, n: int) -> list[int]:
    """The order of the slices in one phase of a round (seeded by the card, the round and the phase)."""
    order = list(range(n))
    random.Random(f"{card_uuid}:{rnd}:{phase}").shuffle(order)
    return order


def card_uuid_on(path: str, capacity: int, slices: int = 16) -> str | None:
    """The endurance card UUID written on the device at ``path``: the one most of the first 4 KiB
    of its slices (and of the card) claim with whole headers; None when none does. Raises the I/O
    error of a device that went away."""
    found: dict[str, int] = {}
    buf = aligned_buffer(4096)
    try:
        with DataFile.open(path, write=False) as f:
            for start in sorted({0, *(s for s, _ in slice_bounds(capacity, slices))}):
                try:
                    f.read_exact(memoryview(buf)[:4096], start)
                except IO_ERRORS as e:
                    if e.errno in GONE:
                        raise
                    continue
                for u in sector_uuids(buf):
                    if u is not None:
                        found[u] = found.get(u, 0) + 1
    finally:
        release(buf)
    return max(found, key=lambda u: found[u]) if found else None


def _sys_read_only(path: str) -> bool:
    try:
        with open(f"/sys/block/{os.path.basename(os.path.realpath(path))}/ro") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


class Endurance:
    """One endurance run (see the module); made by :func:`run_endurance` / :func:`resume_endurance`."""

    def __init__(self, target: DeviceTarget, opts: EndureOptions, state: dict[str, Any]) -> None:
        self.target = target
        self.opts = opts
        self.state = state
        self.sectors = RoundSectors(state["card_uuid"])
        self.bounds = slice_bounds(state["capacity_bytes"], state["options"]["slices"])
        self.say = opts.say or (lambda line: None)
        self.emit = opts.events or (lambda name, details: None)
        self._last_progress = 0.0
        self._refused: set[tuple[str, str | None]] = set()
        self._bufs: AlignedBuffers | None = None
        self._phase_t: tuple[Any, str, float, int] | None = None

    def _buffers(self, size: int) -> AlignedBuffers:
        """The run's request buffers (``depth`` of ``size`` bytes), made once."""
        if self._bufs is None:
            self._bufs = AlignedBuffers(self.opts.depth, size)
        return self._bufs

    # -- state -----------------------------------------------------------------------------------
    def save(self) -> None:
        save_state(self.state, self.opts.state_dir)

    def document(self, error: str | None = None) -> dict[str, Any]:
        return build_doc(self.state, error=error)

    def _new_current(self, rnd: int) -> dict[str, Any]:
        return {"round": rnd, "phase": "write", "done": [], "write_seconds": 0.0, "read_seconds": 0.0,
                "bytes_written": 0, "bytes_read": 0, "bad": [0] * 7, "slices_redone": 0, "write_errors": 0}

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Rounds until a stop rule; returns the document (raises Interrupted with it on Ctrl-C)."""
        st = self.state
        try:
            while st.get("ended") is None:
                if self._stop_asked():
                    st["ended"] = "interrupted"
                    break
                cur = st.get("current")
                if cur is None:
                    cur = st["current"] = self._new_current(len(st["rounds"]) + 1)
                ended = self._round(cur)
                if ended is not None:
                    st["ended"] = ended
                    break
                if st.get("current") is None:            # the round ended
                    so_far = self.document()             # complete False, ended None (the contract's)
                    st["ended"] = self._stop_rule()
                    self.save()
                    self.emit("round", {"round": st["rounds"][-1], "document": so_far})
            self.save()
        except (KeyboardInterrupt, Interrupted):     # Ctrl-C; SIGTERM (cardbench.signals)
            st["ended"] = "interrupted"
            try:
                self.save()
            except StateError:
                pass
            raise Interrupted("interrupted; the state is kept: `cardbench endure --resume` goes on",
                              partial=self.document()) from None
        except StateError as e:
            e.partial = self.document(error=e.message)
            raise
        finally:
            release(self._bufs)
            self._bufs = None
        return self.document()

    def _stop_asked(self) -> bool:
        return self.opts.stop is not None and self.opts.stop.is_set()

    def _stop_rule(self) -> str | None:
        st = self.state
        o = st["options"]
        last = st["rounds"][-1]
        if last["bad_fraction"] >= o["until_bad"]:
            return "bad_limit"
        if o.get("rounds") is not None and len(st["rounds"]) >= o["rounds"]:
            return "rounds"
        if o.get("hours") is not None and st["active_seconds"] >= o["hours"] * 3600:
            return "hours"
        return None

    def _round(self, cur: dict[str, Any]) -> str | None:
        """Go on with the round under way (from the slices its phase has done); returns an ending
        (read_only, dead, interrupted) or None (the round ended, or it goes on after a pause)."""
        rnd = cur["round"]
        n = len(self.bounds)
        for phase in ("write", "read"):
            if cur["phase"] != phase:
                continue
            order = [k for k in slice_order(self.state["card_uuid"], rnd, phase, n) if k not in cur["done"]]
            try:
                if self._phase(cur, phase, order):
                    return "interrupted"
            except _Gone as g:
                ending = self._pause(g.why)
                if ending is not None:
                    return ending
                cur["slices_redone"] += 1
                return None        # the loop comes back to this round, its done slices kept
            except _ReadOnly as e:
                self.state["error_detail"] = str(e)
                return "read_only"
            if phase == "write":
                cur["phase"], cur["done"] = "read", []
                self.save()
                self.emit("reading", {"round": rnd})
        self._end_round(cur)
        return None

    def _end_round(self, cur: dict[str, Any]) -> None:
        st = self.state
        cap = st["capacity_bytes"]
        bad = bad_counts(np.array(cur["bad"]))
        total = sum(bad.values())
        r = {"round": cur["round"],
             "write_bytes_per_s": round(cur["bytes_written"] / cur["write_seconds"], 1) if cur["write_seconds"] else 0.0,
             "read_bytes_per_s": round(cur["bytes_read"] / cur["read_seconds"], 1) if cur["read_seconds"] else 0.0,
             "write_seconds": round(cur["write_seconds"], 4), "read_seconds": round(cur["read_seconds"], 4),
             "bytes_written": cur["bytes_written"], "bad_sectors": bad, "bad_total": total,
             "bad_fraction": round(total / (cap // SECTOR), 9), "ended_at": _now(),
             "slices_redone": cur["slices_redone"]}
        st["rounds"].append(r)
        st["current"] = None

    # -- one slice -------------------------------------------------------------------------------
    def _phase(self, cur: dict[str, Any], phase: str, order: list[int]) -> bool:
        """Write (or read back) the slices of ``order``, one stream of requests through the engine
        (``depth`` in flight, each write's sectors made while the others fly), so the card never
        waits at a slice's end: a slice is done when its last request is, then (a write) flushed
        with an fsync, counted, and the state saved, while the next slice's requests are under
        way. True when a stop was asked (after a slice; the slices under way are dropped)."""
        if not order:
            return False
        self._phase_t = None
        rnd = cur["round"]
        path = self.target.path
        req = self.state["options"]["request_bytes"]
        requests = []
        accs: dict[int, _Acc] = {}
        for k in order:
            start, end = self.bounds[k]
            accs[k] = _Acc(k, end - start, -(-(end - start) // req))
            requests += [(k, off, min(req, end - off)) for off in range(start, end, req)]
        if phase == "write":
            self._check_card(cur)
        depth = min(self.opts.depth, len(requests))
        eng = QueuedEngine(depth, backend="auto" if depth > 1 else "direct")
        try:
            eng.open(path, write=phase == "write", direct=True)
        except IO_ERRORS as e:
            raise self._failure(e, phase) from None
        bufs = self._buffers(req)
        # the flusher's own descriptor: a flush still under way when the engine closes (Ctrl-C) is
        # never issued on a closed (or reused) file number
        flusher = _Flusher(DataFile(os.dup(eng.fd), path, owned=True) if phase == "write" and eng.fd is not None
                           else None,
                           lambda acc, took: self._commit(cur, phase, acc, took), lambda e: self._failure(e, phase))
        try:
            free = list(range(depth))
            inflight: dict[int, tuple[int, int, int]] = {}     # offset -> (slice, buffer, length)
            i = 0
            stopping = False
            done_bytes = 0
            while (i < len(requests) and not stopping) or inflight:
                while i < len(requests) and free and not stopping:
                    b = free.pop()
                    k, off, n = requests[i]
                    i += 1
                    view = bufs[b] if n == req else bufs[b][:n]
                    if phase == "write":
                        self.sectors.fill(view, off, rnd)
                    inflight[off] = (k, b, n)
                    try:
                        eng.submit(IoOp(phase, off, view, n))
                    except IO_ERRORS as e:     # the direct backend does the request in submit
                        inflight.pop(off)
                        free.append(b)
                        self._request_failed(cur, e, phase, off, n, accs[k], rnd)
                        stopping = self._request_done(phase, accs[k], flusher, stopping)
                        continue
                try:
                    comps = eng.reap(1)
                except IO_ERRORS as e:
                    if e.offset not in inflight:
                        raise self._failure(e, phase) from None
                    k, b, n = inflight.pop(e.offset)
                    free.append(b)
                    self._request_failed(cur, e, phase, e.offset, n, accs[k], rnd)
                    stopping = self._request_done(phase, accs[k], flusher, stopping)
                    continue
                for c in comps:
                    off = c.op.offset
                    k, b, n = inflight.pop(off)
                    acc = accs[k]
                    if c.result != n:
                        self._request_failed(cur, None, phase, off, n, acc, rnd)
                    elif phase == "read":
                        acc.counts += self.sectors.classify(bufs[b][:n], off, rnd)
                    free.append(b)
                    done_bytes += n
                    stopping = self._request_done(phase, acc, flusher, stopping)
                    self._progress(cur, phase, done_bytes)
                flusher.check()
        except BaseException:
            flusher.close(quiet=True)
            raise
        else:
            flusher.close()
        finally:
            eng.close()
        return stopping

    def _request_done(self, phase: str, acc: _Acc, flusher: _Flusher, stopping: bool) -> bool:
        """One request of ``acc``'s slice is over; its last ends the slice (see :meth:`_phase`):
        judged here, flushed, counted and saved by the ``flusher``. Returns whether to stop."""
        acc.left -= 1
        if acc.left:
            return stopping
        path = self.target.path
        if phase == "write":
            if acc.failed and self._gone_after_errors():
                raise _Gone(f"{shown(path)}: {GONE_WORDS}")
            if acc.failed == acc.requests and not acc.pieces_written:
                raise _ReadOnly(f"every write of a slice failed ({shown(path)}, slice {acc.k})")
        elif acc.unread_whole and self._gone_after_errors():
            raise _Gone(f"{shown(path)}: {GONE_WORDS}")
        flusher.put(acc)
        return stopping or self._stop_asked()

    def _commit(self, cur: dict[str, Any], phase: str, acc: _Acc, took: float) -> None:
        """A slice is done (its writes flushed): into the round, and the state saved (the flusher's
        thread, the only one that changes the state while a phase runs)."""
        if phase == "write":
            cur["write_seconds"] += took
            cur["bytes_written"] += acc.size
            cur["write_errors"] += acc.failed
        else:
            cur["read_seconds"] += took
            cur["bytes_read"] += acc.size
            cur["bad"] = [a + int(b) for a, b in zip(cur["bad"], acc.counts, strict=True)]
        self.state["active_seconds"] += took
        cur["done"].append(acc.k)
        self.save()

    def _gone_after_errors(self) -> bool:
        """After requests failed with I/O errors: whether the card went away (a pulled card fails
        with EIO before it leaves sysfs). A card that still reads any of its slices' first 4 KiB
        is there (a worn card, not a pulled one): no wait; else the target's rule, with its wait."""
        if self.target.gone():
            return True
        buf = aligned_buffer(4096)
        try:
            with DataFile.open(self.target.path, write=False) as f:
                for start, _ in self.bounds:
                    try:
                        f.read_exact(buf, start)
                        return False
                    except IO_ERRORS:
                        continue
        except IO_ERRORS:
            pass
        finally:
            release(buf)
        return self.target.gone(errno.EIO, wait=GONE_WAIT)

    def _check_card(self, cur: dict[str, Any]) -> None:
        """The device still holds this card: before a phase writes, and after any request failed
        (a name freed by a pull may already be another card's, and a loop device keeps its number:
        an open file would write into whatever was attached next). Else the run pauses as for a
        pulled card, so another card is never written. Looked for in the sectors this run wrote
        (the first of each slice); skipped while none were written yet, and on a card so worn that
        its sectors no longer say whose they are."""
        st = self.state
        wrote = bool(st["rounds"]) or cur["phase"] == "read" or bool(cur["done"])
        if not wrote or (st["rounds"] and st["rounds"][-1]["bad_fraction"] >= 0.5):
            return
        try:
            found = card_uuid_on(self.target.path, st["capacity_bytes"], st["options"]["slices"])
        except IO_ERRORS:
            found = None
        if found != st["card_uuid"]:
            raise _Gone(f"{shown(self.target.path)}: {GONE_WORDS}" if self.target.gone()
                        else f"{shown(self.target.path)} no longer holds this card")

    def _failure(self, e: BaseException, phase: str) -> BaseException:
        """What a failed open or flush means: the card went away, turned read-only, or (else) the
        error as it is."""
        err = fault_errno(e)
        if self.target.gone(err, wait=GONE_WAIT):
            return _Gone(f"{shown(self.target.path)}: {GONE_WORDS}")
        if phase == "write" and (err in READ_ONLY_ERRNOS or _sys_read_only(self.target.path)):
            return _ReadOnly(f"{shown(self.target.path)} refuses writes ({os.strerror(err)})")
        return e

    def _request_failed(self, cur: dict[str, Any], e: BaseException | None, phase: str, off: int, n: int,
                        acc: _Acc, rnd: int) -> None:
        """A request that failed (``e``, or a short transfer): the card gone or read-only raises;
        a failed write is written again in pieces and counts (its sectors are judged at the
        read-back); a failed read is read again in pieces, so only its failing sectors count as
        unreadable."""
        acc.failed += 1
        err = fault_errno(e) if e is not None else errno.EIO
        if err in GONE or self.target.gone(err):
            raise _Gone(f"{shown(self.target.path)}: {GONE_WORDS}")
        self._check_card(cur)
        if phase == "write":
            if err in READ_ONLY_ERRNOS or _sys_read_only(self.target.path):
                raise _ReadOnly(f"{shown(self.target.path)} refuses writes ({os.strerror(err)})")
            acc.pieces_written += self._rewrite(off, n, rnd)
            return
        found = self._probe_read(off, n, rnd, acc.budget)
        if found[UNREADABLE] == n // SECTOR:
            acc.unread_whole = True       # a pulled card fails with EIO before it leaves sysfs
        acc.counts += found

    def _rewrite(self, off: int, n: int, rnd: int) -> int:
        """Write a failed request again in pieces (:data:`PROBE_PIECES`'s largest), so its good part
        lands (a card may drop a whole request for one bad spot); the pieces written. None of them
        on a slice whose every request failed: the card refuses writes everywhere (read-only)."""
        piece = PROBE_PIECES[0]
        done = 0
        buf = aligned_buffer(piece)
        try:
            with DataFile.open(self.target.path, write=True) as f:
                for p in range(off, off + n, piece):
                    view = memoryview(buf)[:min(piece, off + n - p)]
                    self.sectors.fill(view, p, rnd)
                    try:
                        f.write_exact(view, p)
                        done += 1
                    except IO_ERRORS as e:
                        if e.errno in GONE:
                            raise
        except IO_ERRORS as e:
            if e.errno in GONE or self.target.gone(e.errno):
                raise _Gone(f"{shown(self.target.path)}: {GONE_WORDS}") from None
        finally:
            release(buf)
        return done

    def _probe_read(self, off: int, n: int, rnd: int, budget: list[int]) -> np.ndarray:
        """Read [off, off+n) again in ever smaller pieces (:data:`PROBE_PIECES`, at most
        :data:`PROBE_FAILS` failed reads a slice): the counts of what could be read, and the rest
        unreadable."""
        counts = np.zeros(7, dtype=np.int64)
        buf = aligned_buffer(PROBE_PIECES[0])
        try:
            with DataFile.open(self.target.path, write=False) as f:
                self._probe(f, buf, off, n, 0, rnd, counts, budget)
        except IO_ERRORS as e:
            if e.errno in GONE or self.target.gone(e.errno):
                raise _Gone(f"{shown(self.target.path)}: {GONE_WORDS}") from None
            counts[:] = 0
            counts[UNREADABLE] = n // SECTOR
        finally:
            release(buf)
        return counts

    def _probe(self, f: DataFile, buf, off: int, n: int, level: int, rnd: int, counts: np.ndarray,
               budget: list[int]) -> None:
        """Read [off, off+n) in pieces of ``PROBE_PIECES[level]``; a piece that fails is read again
        in the next smaller pieces while ``budget[0]`` (failed reads left) lasts, else counted
        whole as unreadable."""
        piece = PROBE_PIECES[level]
        for p in range(off, off + n, piece):
            m = min(piece, off + n - p)
            view = memoryview(buf)[:m]
            try:
                f.read_exact(view, p)
            except IO_ERRORS as e:
                if e.errno in GONE:
                    raise
                budget[0] -= 1
                if piece == SECTOR or budget[0] <= 0:
                    counts[UNREADABLE] += m // SECTOR
                else:
                    self._probe(f, buf, p, m, level + 1, rnd, counts, budget)
                continue
            counts += self.sectors.classify(view, p, rnd)

    def _progress(self, cur: dict[str, Any], phase: str, done: int) -> None:
        """A ``progress`` event (at most every :data:`PROGRESS_EVERY` s); ``done``: bytes of this
        phase moved since it (re)started."""
        now = time.monotonic()
        if self._phase_t is None:
            self._phase_t = (cur, phase, now, cur["bytes_written"] if phase == "write" else cur["bytes_read"])
        if now - self._last_progress < PROGRESS_EVERY:
            return
        self._last_progress = now
        st = self.state
        cap = st["capacity_bytes"]
        _c, _p, t0, before = self._phase_t
        moved = before + done
        total = sum(r["bytes_written"] for r in st["rounds"]) + (moved if phase == "write" else cur["bytes_written"])
        last = st["rounds"][-1]["bad_fraction"] if st["rounds"] else None
        self.emit("progress", {"round": cur["round"], "phase": phase, "done_bytes": min(moved, cap),
                               "round_bytes": cap, "bytes_written": total,
                               "rate_bytes_per_s": round(done / (now - t0), 1) if now > t0 else None,
                               "bad_fraction": last, "eta_s": self._eta(cur, phase, min(moved, cap))})

    def _eta(self, cur: dict[str, Any], phase: str, done: int) -> float | None:
        """Seconds to the stop rule (rounds or hours), or None (only the bad limit can end it)."""
        st = self.state
        o = st["options"]
        cands = []
        if o.get("hours") is not None:
            cands.append(max(0.0, o["hours"] * 3600 - st["active_seconds"]))
        if o.get("rounds") is not None and st["rounds"]:
            per_round = sum(r["write_seconds"] + r["read_seconds"] for r in st["rounds"]) / len(st["rounds"])
            cap = st["capacity_bytes"]
            frac = (done / cap / 2) if phase == "write" else 0.5 + done / cap / 2
            cands.append(max(0.0, (o["rounds"] - len(st["rounds"]) - frac) * per_round))
        return round(min(cands), 1) if cands else None

    # -- a card that went away -------------------------------------------------------------------
    def _pause(self, why: str) -> str | None:
        """The card went away: wait for it (by its UUID, any device name); None when it is back
        (the target is the new device), else the ending ("dead", "interrupted")."""
        st = self.state
        self.save()
        self.emit("paused", {"why": why})
        me = st["card_uuid"]
        self.say(f"{why}: paused; put the card back in (any slot or reader), waiting up to "
                 f"{self.opts.timeout:g} s")
        cap = st["capacity_bytes"]
        slices = st["options"]["slices"]

        def refused(path: str, found: str | None) -> None:
            if (path, found) in self._refused:
                return
            self._refused.add((path, found))
            other = f"endurance card {found[:8]}" if found else "no endurance data of this run"
            self.say(f"{path} is not the card of this run ({other}, not {me[:8]}): refused, nothing written; "
                     "still waiting")

        path = refind.wait_for_card(cap, lambda p: card_uuid_on(p, cap, slices), me, timeout=self.opts.timeout,
                                    refused=refused, stop=self._stop_asked)
        if path is None:
            if self._stop_asked():
                return "interrupted"
            st["error_detail"] = f"the card did not come back within {self.opts.timeout:g} s"
            self.say(f"{st['error_detail']}: the run ends here, the card called dead")
            return "dead"
        self.target = open_device_target(path, whole_device=True)
        st["device"] = path
        self.emit("back", {"device": path})
        self.say(f"It is back as {path}; going on with round {(st.get('current') or {}).get('round')}.")
        return None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def card_and_reader(target: DeviceTarget) -> tuple[dict | None, dict | None]:
    dev = target.block_device()
    if dev is None:
        return None, None
    card, reader = Card(), Reader()
    identify(dev, card, reader)
    has_reader = reader.vendor_id or reader.name or reader.transport
    return card.to_dict(), (reader.to_dict() if has_reader else None)


def _method(opts: EndureOptions, backend: str | None = None) -> dict[str, Any]:
    return {"engine": "queued (io_uring)" if opts.depth > 1 else "queued (direct)", "depth": opts.depth,
            "direct": True, "request_bytes": opts.request_bytes, "slices": opts.slices,
            "order": "slices shuffled each round and phase by random.Random('<card_uuid>:<round>:<write|read>')",
            "sector_layout": LAYOUT, "sync": "fsync after each slice (the write timed to stable storage)"}


def run_endurance(target: DeviceTarget, opts: EndureOptions) -> dict[str, Any]:
    """An endurance run on ``target`` (a whole block device, destroyed: the caller confirmed it):
    the quick fake-capacity probe, then rounds until a stop rule. Returns the
    ``cardbench.endurance/1`` document; raises :class:`Interrupted` (Ctrl-C) or
    :class:`~cardbench.endure.state.StateError` (the host's disk) with the document so far as
    ``partial``."""
    if not isinstance(target, DeviceTarget):
        raise UsageError(f"{shown(target.path)}: an endurance run needs a whole block device")
    opts.validate()
    card, reader = card_and_reader(target)
    with DataFile.open(target.path, write=False) as f:
        sector, capacity = f.geometry()
    if capacity < opts.slices * 4096:
        raise TargetError(f"{shown(target.path)} is too small for {opts.slices} slices ({capacity} bytes)")
    if sector > SECTOR and (capacity % sector or opts.request_bytes % sector):
        raise TargetError(f"{shown(target.path)} has {sector}-byte sectors that the slices do not fit")
    card_uuid = new_card_uuid()
    state: dict[str, Any] = {
        "schema": "cardbench.endure-state/1", "card_uuid": card_uuid, "record_id": uuidlib.uuid4().hex,
        "device": target.path, "capacity_bytes": capacity, "logical_sector": sector, "started_t": time.time(),
        "options": {"rounds": opts.rounds, "hours": opts.hours, "until_bad": opts.until_bad, "slices": opts.slices,
                    "request_bytes": opts.request_bytes, "rated_tbw": opts.rated_tbw,
                    "rated_video": list(opts.rated_video) if opts.rated_video else None},
        "card": card, "reader": reader, "method": _method(opts), "rounds": [], "current": None,
        "active_seconds": 0.0, "ended": None, "error": None}
    if _sys_read_only(target.path) or _refuses_writes(target):
        state["ended"] = "read_only"
        save_state(state, opts.state_dir)
        return build_doc(state)
    if opts.probe:
        probe = _fake_check(target, opts)
        state["method"]["fake_check"] = probe
        if probe.get("verdict") == "counterfeit":
            state["ended"] = "counterfeit"
            save_state(state, opts.state_dir)
            return build_doc(state)
    save_state(state, opts.state_dir)
    with target_lock(target.lock_key, label=target.path):
        return Endurance(target, opts, state).run()


def _refuses_writes(target: DeviceTarget) -> bool:
    """Whether the card's first 4 KiB cannot be written (read-only, or failing every write: the
    fake-capacity probe would take that for a fake); the run overwrites them anyway."""
    buf = aligned_buffer(4096)
    try:
        with DataFile.open(target.path, write=True) as f:
            f.write_exact(buf, 0)
            f.sync()
    except IO_ERRORS as e:
        return not target.gone(e.errno)
    finally:
        release(buf)
    return False


def _fake_check(target: DeviceTarget, opts: EndureOptions) -> dict[str, Any]:
    """The quick fake-capacity probe (destructive: the run writes everything anyway)."""
    say = opts.say or (lambda line: None)
    say("Checking for fake capacity first (the quick probe)...")
    doc = verify_device(target, destructive=True)
    return {"verdict": doc.get("verdict"), "kind": doc.get("kind"), "usable_bytes": doc.get("usable_bytes"),
            "verify_id": doc.get("id")}


def find_state(target: DeviceTarget | None, state_dir: str | os.PathLike | None = None,
               ) -> tuple[dict[str, Any], str]:
    """The saved, unfinished state to go on with, and the card's device path now. With a
    ``target``: the state of the card on it (UsageError, one line, when it holds none saved here,
    or another card's); without: the one unfinished run on this host (its card found by its UUID
    among the block devices)."""
    states = saved_states(state_dir)
    if target is not None:
        with DataFile.open(target.path, write=False) as f:
            capacity = f.geometry()[1]
        try:
            on_card = card_uuid_on(target.path, capacity)
            for other in sorted({s["options"]["slices"] for s in states} - {16}):
                on_card = on_card or card_uuid_on(target.path, capacity, other)   # round 1, other slices
        except IO_ERRORS as e:
            raise TargetError(f"{shown(target.path)}: cannot read it ({e})") from None
        mine = [s for s in states if s["card_uuid"] == on_card]
        if not mine:
            if on_card is not None and load_state(on_card, state_dir) is not None:
                raise UsageError(f"the endurance run of {shown(target.path)} (card {on_card[:8]}) has ended; "
                                 "nothing to resume")
            if not states:
                raise UsageError("no endurance run to resume: this host has no saved state")
            others = ", ".join(f"{s['card_uuid'][:8]} ({s['device']})" for s in states)
            held = f"card {on_card[:8]}" if on_card else "no endurance data"
            raise UsageError(f"{shown(target.path)} is not the card of a saved endurance run ({held}; saved: "
                             f"{others}): refused, nothing written")
        return mine[0], target.path
    if not states:
        raise UsageError("no endurance run to resume: this host has no saved state")
    if len(states) > 1:
        others = ", ".join(f"{s['card_uuid'][:8]} ({s['device']})" for s in states)
        raise UsageError(f"{len(states)} endurance runs can be resumed ({others}): name the DEVICE")
    st = states[0]
    cap = st["capacity_bytes"]
    found = refind.candidates(cap, lambda p: card_uuid_on(p, cap, st["options"]["slices"]))
    for name, (_devno, u) in found.items():
        if u == st["card_uuid"]:
            return st, f"/dev/{name}"
    raise UsageError(f"card {st['card_uuid'][:8]} of the saved endurance run ({st['device']}) is not here: put it "
                     "in and run `cardbench endure --resume` again")


def resume_endurance(target: DeviceTarget | None, opts: EndureOptions) -> dict[str, Any]:
    """Go on with a saved endurance run (see :func:`find_state`): its own options, with the stop
    rules ``rounds`` and ``hours`` replaced where ``opts`` gives them. Returns the document as
    :func:`run_endurance` does."""
    opts.validate()
    state, path = find_state(target, opts.state_dir)
    if target is None or target.path != path:
        target = open_device_target(path, whole_device=True)
    check_destructive(target.block_device())       # the safety rules (not mounted, not the system's) now
    if opts.rounds is not None:
        state["options"]["rounds"] = opts.rounds
    if opts.hours is not None:
        state["options"]["hours"] = opts.hours
    state["ended"] = None
    state["device"] = target.path
    if state.get("current") is not None:
        state["current"]["slices_redone"] += 1      # the slice under way when it stopped
    if _sys_read_only(target.path):
        state["ended"] = "read_only"
        save_state(state, opts.state_dir)
        return build_doc(state)
    save_state(state, opts.state_dir)
    with target_lock(target.lock_key, label=target.path):
        return Endurance(target, opts, state).run()


def saved_run_on(target: DeviceTarget, state_dir: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The unfinished run saved on this host whose card is ``target`` (None: none), for a plain
    ``cardbench endure DEVICE`` that goes on with it."""
    try:
        with DataFile.open(target.path, write=False) as f:
            capacity = f.geometry()[1]
        u = card_uuid_on(target.path, capacity)
    except (*IO_ERRORS, OSError):
        return None
    st = load_state(u, state_dir) if u else None
    return st if st is not None and resumable(st) else None


__all__ = ["CLASSES", "ENDINGS", "EndureOptions", "Endurance", "card_uuid_on", "find_state", "resume_endurance",
           "run_endurance", "saved_run_on", "slice_bounds", "slice_order", "state_path"]
