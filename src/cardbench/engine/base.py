"""The engine interface (fio's ``ioengine_ops``): operations, completions and the closed loop.

The engines themselves (sync, queued, fio) live in their own modules and register by name in
:mod:`cardbench.engine.registry`; nothing here imports them."""

from __future__ import annotations

import os
import time
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, cast

from cardbench.engine.errors import io_error
from cardbench.engine.registry import Capabilities

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on

#: ``fill(i, offset)``: make buffer ``i`` the data of the write about to go out at ``offset``
Fill = Callable[[int, int], None]


@dataclass
class IoOp:
    """One operation: read or write ``length`` bytes at ``offset`` from/into ``buf``."""

    kind: str           # "read" | "write"
    offset: int
    buf: Buffer         # writable buffer (mmap / memoryview) of at least ``length`` bytes
    length: int
    tag: object = None  # caller's cookie, handed back in the completion


@dataclass
class Completion:
    op: IoOp
    result: int          # bytes done
    submitted: float     # time.perf_counter() at submit
    completed: float     # time.perf_counter() at completion

    @property
    def latency(self) -> float:
        return self.completed - self.submitted


@dataclass
class LoopResult:
    """What :func:`closed_loop` did: ``ops`` operations moved ``bytes`` between ``t0`` and ``t1``
    (``time.perf_counter()``), and why it stopped: "size" (``max_ops`` issued), "duration" or
    "end of target" (a short transfer)."""

    bytes: int
    ops: int
    t0: float
    t1: float
    stopped: str


class Engine(Protocol):
    """What a workload needs from an engine.

    An engine whose ``caps.own_loop`` is set also offers ``closed_loop`` (same arguments as
    :func:`closed_loop` after the engine): the same loop without a Python object per operation.
    After ``open``, ``file`` is the :class:`cardbench.engine.data.DataFile` it moves bytes of
    and ``direct`` whether O_DIRECT was granted; ``backend`` names the way it moves bytes when it
    has several (queued: io_uring, threads, direct), else None.
    """

    name: str
    caps: Capabilities
    queue_depth: int
    direct: bool
    backend: str | None

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None: ...

    def submit(self, op: IoOp) -> None: ...

    def reap(self, min_complete: int = 1) -> list[Completion]: ...

    def pending(self) -> int: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


class OwnLoopEngine(Engine, Protocol):
    """An engine whose ``caps.own_loop`` is set: it runs :func:`closed_loop` itself."""

    def closed_loop(self, kind: str, bufs: Sequence, length: int, next_offset: Callable[[], int], *,
                    max_ops: int, duration: float, latencies: array, fill: Fill | None = None) -> LoopResult: ...


def closed_loop(engine: Engine, kind: str, bufs: Sequence, length: int, next_offset: Callable[[], int], *,
                max_ops: int, duration: float, latencies: array, fill: Fill | None = None) -> LoopResult:
    """Keep ``len(bufs)`` operations of ``length`` bytes in flight on an open ``engine``.

    Each buffer carries one operation at a time; when it completes, the buffer goes out again
    at ``next_offset()``. ``fill(i, offset)`` (writes), called just before buffer ``i`` goes out
    at ``offset``, makes the data of that write (:class:`cardbench.patterns.FreshWrites`: data
    unique to each write); without it every write carries what its buffer holds. Stops issuing
    once ``max_ops`` were issued, ``duration`` seconds have passed, or a transfer comes back
    short; waits for those in flight and returns. Each operation's latency (seconds, from when
    it was queued to when its completion was seen, fio's "lat") is appended to ``latencies``. An I/O error is raised (a one-line cardbench
    error) after the operations in flight have finished; nothing is left in flight.
    """
    if kind not in ("read", "write"):
        raise ValueError(f"unknown operation {kind!r}")
    if max_ops < 1 or not bufs:
        raise ValueError("closed_loop needs at least one buffer and one operation")
    if engine.caps.own_loop:
        return cast(OwnLoopEngine, engine).closed_loop(kind, bufs, length, next_offset, max_ops=max_ops,
                                                       duration=duration, latencies=latencies, fill=fill)
    return submit_reap_loop(engine, kind, bufs, length, next_offset, max_ops=max_ops, duration=duration,
                            latencies=latencies, fill=fill)


def submit_reap_loop(engine: Engine, kind: str, bufs: Sequence, length: int, next_offset: Callable[[], int], *,
                     max_ops: int, duration: float, latencies: array, fill: Fill | None = None) -> LoopResult:
    """:func:`closed_loop` through ``submit`` and ``reap`` (any engine; one IoOp per buffer)."""
    submit = engine.submit
    reap = engine.reap
    pending = engine.pending
    append = latencies.append
    perf = time.perf_counter
    ops = [IoOp(kind, 0, b, length, tag=i) for i, b in enumerate(bufs[:max_ops])]
    if kind != "write":
        fill = None
    total = n = 0
    stopped = "size"
    t0 = perf()
    deadline = t0 + duration
    try:
        for op in ops:
            op.offset = next_offset()
            if fill is not None:
                fill(cast(int, op.tag), op.offset)
            submit(op)
        issued = len(ops)
        stop = issued >= max_ops
        while True:
            comps = reap(1)
            if not stop and perf() >= deadline:
                stop = True
                stopped = "duration"
            for c in comps:
                append(c.completed - c.submitted)
                r = c.result
                total += r
                n += 1
                if r != length:
                    if not stop:
                        stopped = "end of target"
                    stop = True
                if not stop:
                    op = c.op
                    op.offset = next_offset()
                    if fill is not None:
                        fill(cast(int, op.tag), op.offset)
                    submit(op)
                    issued += 1
                    if issued >= max_ops:
                        stop = True
            if stop and not pending():
                break
    except BaseException:
        _drain(engine)
        raise
    return LoopResult(total, n, t0, perf(), stopped)


def _drain(engine: Engine) -> None:
    """Wait for what is in flight after a failure (buffers must not be reused while the kernel
    may still write into them); errors of those operations are dropped, the first one counts."""
    for _ in range(1000):
        if not engine.pending():
            return
        try:
            engine.reap(engine.pending())
        except Exception:
            pass


def pio_loop(fd: int, path: str, kind: str, buf, length: int, next_offset: Callable[[], int], *, max_ops: int,
             duration: float, latencies: array, fill: Fill | None = None) -> LoopResult:
    """:func:`closed_loop` at depth 1 with plain ``preadv``/``pwritev``: the sync engine's loop
    (and the queued engine's at depth 1). Each operation is timed around its system call
    (after ``fill(0, offset)`` made a write's data)."""
    if kind != "write":
        fill = None
    call = os.preadv if kind == "read" else os.pwritev
    mv = memoryview(buf)[:length]
    iov = [mv]
    perf = time.perf_counter
    append = latencies.append
    total = n = 0
    stopped = "size"
    t0 = perf()
    deadline = t0 + duration
    try:
        while n < max_ops:
            off = next_offset()
            if fill is not None:
                fill(0, off)
            t = perf()
            r = call(fd, iov, off)
            t1 = perf()
            append(t1 - t)
            n += 1
            total += r
            if r != length:
                stopped = "end of target"
                break
            if t1 >= deadline:
                stopped = "duration"
                break
    except OSError as e:
        raise io_error(e, path, op=kind) from None
    finally:
        mv.release()
    return LoopResult(total, n, t0, perf(), stopped)
