"""The queued engine's io_uring backend: operations as submission entries on a raw ring
(:mod:`cardbench.engine.uring_abi`), completions read from the CQ ring, and the lean
``closed_loop`` that reuses one slot per buffer (see :mod:`cardbench.engine.queued`)."""

from __future__ import annotations

import ctypes
import errno
import os
import time

from cardbench.engine.base import Completion, IoOp, LoopResult
from cardbench.engine.errors import io_error
from cardbench.engine.uring_abi import (
    _CQE,
    _IORING_ENTER_GETEVENTS,
    _IOSQE_FIXED_FILE,
    _OPCODES,
    _OPCODES_FIXED,
    _RETRY_ERRNOS,
    _SQE,
    _SYS_IO_URING_ENTER,
    _perf,
    _Ring,
)
from cardbench.errors import UsageError


class _UringImpl:

    def __init__(self, fd: int, path: str, queue_depth: int, submit_batch: int) -> None:
        self.fd = fd
        self.path = path
        self.ring = _Ring(queue_depth)
        self.depth = self.ring.sq_entries       # power of two >= queue_depth
        self.slots_free = list(range(self.depth - 1, -1, -1))
        self.slot_op: list[IoOp | None] = [None] * self.depth
        self.slot_t: list[float] = [0.0] * self.depth
        self.unsent: list[int] = []              # slots written into the SQ, not yet entered
        self.inflight = 0                        # entered, not completed
        self.done: list[Completion] = []         # completed, not yet handed out
        #: id(buffer): (buffer, its ctypes view, address, size); see _address
        self.addr: dict[int, tuple[object, object, int, int]] = {}
        self.errors: list[Exception] = []         # failed operations, raised one per reap
        #: hand queued entries to the kernel once this many wait (see QueuedEngine)
        self.submit_batch = submit_batch
        #: the file registered with the ring (closed_loop then names it as fixed file 0: no
        #: file lookup per operation); False where the kernel refused
        self.fixed_file = self.ring.register_file(fd)

    def _address(self, buf) -> tuple[object, object, int, int]:
        """(buf, ctypes view, address, size); cached, which keeps the buffer referenced (so mapped)."""
        c: object
        try:
            view = ctypes.c_char.from_buffer(buf)
            c, a = view, ctypes.addressof(view)
            size = memoryview(buf).nbytes
        except TypeError:
            if isinstance(buf, bytes):   # read-only bytes can be written from
                ptr = ctypes.c_char_p(buf)
                # a bytes object's data is never at NULL, so the address is never None
                c, a = ptr, ctypes.cast(ptr, ctypes.c_void_p).value or 0
                size = len(buf)
            else:
                raise
        if len(self.addr) > 4096 and not self.inflight and not self.unsent:
            self.addr.clear()
        ent = self.addr[id(buf)] = (buf, c, a, size)
        return ent

    def _queue(self, op: IoOp) -> int:
        """Write ``op`` into a free slot's SQE and put that slot on the SQ ring (not yet handed
        to the kernel); returns the slot. The caller has made sure a slot is free."""
        opcode = _OPCODES.get(op.kind)
        if opcode is None:
            raise ValueError(f"unknown operation {op.kind!r}")
        buf = op.buf
        ent = self.addr.get(id(buf))
        if ent is None or ent[0] is not buf:
            ent = self._address(buf)
        length = op.length
        if not 0 < length <= ent[3]:
            raise ValueError(f"operation length {length} does not fit its {ent[3]}-byte buffer")
        slot = self.slots_free.pop()
        ring = self.ring
        tail = ring.sq_tail
        _SQE.pack_into(ring.sqes, slot << 6, opcode, 0, 0, self.fd, op.offset, ent[2], length, 0, slot,
                       0, 0, 0, 0, 0)
        ring.sq32[ring.sq_array_i + (tail & ring.sq_mask)] = slot
        tail = (tail + 1) & 0xFFFFFFFF
        ring.sq_tail = tail
        ring.sq32[ring.sq_tail_i] = tail
        self.slot_op[slot] = op
        return slot

    def _enter_failure(self, err: int) -> Exception:
        """The one-line error for an ``io_uring_enter`` that failed with ``err`` (not one of
        the passing ones in ``_RETRY_ERRNOS``)."""
        if err == errno.EEXIST:
            return UsageError("a queued engine belongs to the thread that opened it (make one engine per thread)")
        return io_error(OSError(err, os.strerror(err)), self.path)

    def submit(self, op: IoOp) -> None:
        # a free slot means free room in the SQ too (entries in the SQ hold slots)
        if not self.slots_free:
            self._wait(1)        # full: make room, keep the completions for the next reap
        unsent = self.unsent
        unsent.append(self._queue(op))
        if len(unsent) >= self.submit_batch:
            self._wait(0)

    def submit_wait(self, op: IoOp) -> None:
        """Depth 1: submit and wait in one system call (nothing else can be in flight).

        The lean path of the common case (one entry in, one completion out); anything else
        (interrupted, kernel busy, an error of the call) goes on through the general path."""
        if self.inflight or self.unsent or not self.slots_free:
            self._wait(self.inflight + len(self.unsent))
        slot = self._queue(op)
        ring = self.ring
        t0 = self.slot_t[slot] = _perf()
        r = ring._enter(_SYS_IO_URING_ENTER, ring.fd, 1, 1, _IORING_ENTER_GETEVENTS, None, 0)
        if r == 1:
            cq32 = ring.cq32
            head = cq32[ring.cq_head_i]
            if cq32[ring.cq_tail_i] == (head + 1) & 0xFFFFFFFF:
                now = _perf()
                user, res, _flags = _CQE.unpack_from(ring.cq_map, ring.cqes_off + (head & ring.cq_mask) * 16)
                cq32[ring.cq_head_i] = (head + 1) & 0xFFFFFFFF
                if user == slot:
                    self.slot_op[slot] = None
                    self.slots_free.append(slot)
                    if res < 0:
                        self.errors.append(io_error(OSError(-res, os.strerror(-res)), self.path, op=op.kind,
                                                    offset=op.offset))
                    else:
                        self.done.append(Completion(op, res, t0, now))
                    return
                cq32[ring.cq_head_i] = head          # not ours (cannot happen): general path
        err = ctypes.get_errno() if r < 0 else 0
        if ring.sq_unconsumed():
            self.unsent.append(slot)
        else:
            self.inflight += 1
        self._harvest()
        if err and err not in _RETRY_ERRNOS:
            raise self._enter_failure(err)

    def _wait(self, min_complete: int) -> None:
        """Enter the kernel: submit what is queued, wait, harvest completions into ``done``."""
        ring = self.ring
        unsent = self.unsent
        n = len(unsent)
        outstanding = self.inflight + n
        want = min(min_complete, outstanding)
        if n:
            t = time.perf_counter()
            st = self.slot_t
            for s in unsent:
                st[s] = t
        try:
            ring.enter(n, want)
        except OSError as e:
            raise self._enter_failure(e.errno or errno.EIO) from None
        finally:
            if n:
                # the kernel consumed whatever the SQ head says
                sent = n - ring.sq_unconsumed()
                self.inflight += sent
                self.unsent = unsent[sent:]
        self._harvest()

    def _harvest(self) -> None:
        ring = self.ring
        cq32 = ring.cq32
        head = cq32[ring.cq_head_i]
        tail = cq32[ring.cq_tail_i]
        if head == tail:
            return
        now = time.perf_counter()
        cq_map = ring.cq_map
        mask = ring.cq_mask
        off = ring.cqes_off
        unpack = _CQE.unpack_from
        slot_op = self.slot_op
        slot_t = self.slot_t
        free = self.slots_free
        done = self.done
        n = 0
        while head != tail:
            slot, res, _flags = unpack(cq_map, off + (head & mask) * 16)
            head = (head + 1) & 0xFFFFFFFF
            n += 1
            op = slot_op[slot]
            slot_op[slot] = None
            free.append(slot)
            if res < 0:
                # the failed operation is named (op, offset): a caller with several in flight knows which
                self.errors.append(io_error(OSError(-res, os.strerror(-res)), self.path, op=op.kind if op else None,
                                            offset=op.offset if op else None))
                continue
            done.append(Completion(op, res, slot_t[slot], now))
        cq32[ring.cq_head_i] = head
        self.inflight -= n

    def closed_loop(self, kind: str, bufs, length: int, next_offset, *, max_ops: int, duration: float,
                    latencies, fill=None) -> LoopResult:
        """The closed loop on the ring itself, one slot per buffer.

        Each slot's SQE is written once (operation, file, buffer, length, slot number); an
        operation going out again only gets a new offset and a ring entry (and, for a write
        with ``fill``, its data: ``fill(slot, offset)`` just before it is queued, the time it
        was queued taken after that). One ``io_uring_enter`` per pass hands over every
        operation queued since the last one and waits for at least one completion (fio:
        iodepth_batch_complete_min=1); the calls in between that hand refills over (two at a
        time) also collect what completed meanwhile, without waiting. Completions are read
        straight from the CQ ring, each timed when the call that posted it returned. No IoOp or
        Completion objects. The file and the buffers are registered with the ring for the loop
        (fixed file, READ/WRITE_FIXED) where the kernel allows."""
        if self.pending():
            raise UsageError("closed_loop needs an engine with nothing in flight")
        if kind != "write":
            fill = None
        ring = self.ring
        nb = min(len(bufs), self.depth, max_ops)
        spans = []
        for s in range(nb):
            ent = self._address(bufs[s])
            if not 0 < length <= ent[3]:
                raise ValueError(f"operation length {length} does not fit its {ent[3]}-byte buffer")
            spans.append((ent[2], ent[3]))
            # a Ctrl-C below keeps this frame in its traceback: no local may hold a buffer's
            # view then (closing the buffers would be a BufferError instead of the interruption)
            del ent
        # the buffers registered for the loop (READ/WRITE_FIXED, buffer s = slot s): the kernel
        # pins their pages once, not at every operation; plain reads and writes where refused
        fixed = ring.register_buffers(spans)
        opcode = (_OPCODES_FIXED if fixed else _OPCODES)[kind]
        flags, fd = (_IOSQE_FIXED_FILE, 0) if self.fixed_file else (0, self.fd)
        sqes = ring.sqes
        for s in range(nb):
            _SQE.pack_into(sqes, s << 6, opcode, flags, 0, fd, 0, spans[s][0], length, 0, s, s if fixed else 0,
                           0, 0, 0, 0)
        for s in range(nb):
            self.slots_free.remove(s)
        cqes = memoryview(ring.cq_map)[ring.cqes_off:ring.cqes_off + ring.cq_entries * _CQE.size]
        sqe_q = memoryview(sqes).cast("Q")          # the offset of slot s is sqe_q[s * 8 + 1]
        cq_q = cqes.cast("Q")                       # CQE i: user_data at cq_q[2 i]
        cq_i = cqes.cast("i")                       # and res at cq_i[4 i + 2]
        sq32 = ring.sq32
        cq32 = ring.cq32
        arr = ring.sq_array_i
        smask = ring.sq_mask
        cmask = ring.cq_mask
        sq_head_i, sq_tail_i = ring.sq_head_i, ring.sq_tail_i
        cq_head_i, cq_tail_i = ring.cq_head_i, ring.cq_tail_i
        enter = ring._enter
        rfd = ring.fd
        get_errno = ctypes.get_errno
        perf = _perf
        append = latencies.append
        queued_at = [0.0] * nb
        batch = self.submit_batch
        total = n = 0
        stopped = "size"
        error = 0
        inflight = 0
        tail = ring.sq_tail
        unsent = 0
        head = cq32[cq_head_i]
        t0 = perf()
        deadline = t0 + duration
        try:
            for s in range(nb):
                off = next_offset()
                if fill is not None:
                    fill(s, off)
                sqe_q[(s << 3) + 1] = off
                sq32[arr + (tail & smask)] = s
                tail = (tail + 1) & 0xFFFFFFFF
                queued_at[s] = t0
                unsent += 1
            sq32[sq_tail_i] = tail
            issued = nb
            stop = issued >= max_ops
            while True:
                if enter(_SYS_IO_URING_ENTER, rfd, unsent, 1, _IORING_ENTER_GETEVENTS, None, 0) < 0:
                    e = get_errno()
                    if e not in _RETRY_ERRNOS:
                        raise self._enter_failure(e)
                left = (tail - sq32[sq_head_i]) & 0xFFFFFFFF     # queued, not yet taken by the kernel
                inflight += unsent - left
                unsent = left
                head = cq32[cq_head_i]
                ctail = cq32[cq_tail_i]
                if head == ctail:
                    continue
                now = perf()
                if not stop and now >= deadline:
                    stop = True
                    stopped = "duration"
                while head != ctail:
                    i = head & cmask
                    s = cq_q[i << 1]
                    res = cq_i[(i << 2) + 2]
                    head = (head + 1) & 0xFFFFFFFF
                    inflight -= 1
                    append(now - queued_at[s])
                    if res != length:
                        if res < 0:
                            error = error or -res
                        else:
                            total += res
                            n += 1
                        if not stop:
                            stopped = "end of target"
                        stop = True
                        continue
                    total += res
                    n += 1
                    if not stop:
                        off = next_offset()
                        if fill is not None:
                            fill(s, off)
                            queued_at[s] = perf()
                        else:
                            queued_at[s] = now
                        sqe_q[(s << 3) + 1] = off
                        sq32[arr + (tail & smask)] = s
                        tail = (tail + 1) & 0xFFFFFFFF
                        unsent += 1
                        issued += 1
                        if issued >= max_ops:
                            stop = True
                        if unsent >= batch:
                            # hand these to the kernel now (see DEFAULT_SUBMIT_BATCH)
                            sq32[sq_tail_i] = tail
                            # (GETEVENTS without waiting: completions that came in meanwhile
                            # are posted now and handled in this pass, timed from this call's
                            # return; fewer passes end in a wait that puts the thread to sleep)
                            enter(_SYS_IO_URING_ENTER, rfd, unsent, 0, _IORING_ENTER_GETEVENTS, None, 0)
                            left = (tail - sq32[sq_head_i]) & 0xFFFFFFFF
                            inflight += unsent - left
                            unsent = left
                            if cq32[cq_tail_i] != ctail:
                                ctail = cq32[cq_tail_i]
                                now = perf()
                                if not stop and now >= deadline:      # (a pass can go on and on)
                                    stop = True
                                    stopped = "duration"
                cq32[cq_head_i] = head
                sq32[sq_tail_i] = tail
                if stop and not inflight and not unsent:
                    break
        except BaseException:
            # leave the rings consistent (completions seen are consumed, entries written are
            # published), then wait for everything out there before the buffers can go
            cq32[cq_head_i] = head
            sq32[sq_tail_i] = tail
            ring.sq_tail = tail
            self.inflight, self.unsent = inflight, []
            self._drain_loop(inflight + unsent)
            raise
        finally:
            ring.sq_tail = tail
            if fixed:
                ring.unregister_buffers()
            if not self.inflight:     # (a drain that gave up leaves the slots taken)
                self.slots_free.extend(range(nb))
            for view in (sqe_q, cq_q, cq_i, cqes):
                view.release()
        if error:
            raise io_error(OSError(error, os.strerror(error)), self.path)
        return LoopResult(total, n, t0, perf(), stopped)

    def _drain_loop(self, outstanding: int) -> None:
        """After a failure inside ``closed_loop``: submit what is queued and wait until nothing
        is in flight (the kernel may still be writing into the buffers); results are dropped."""
        ring = self.ring
        stuck = 0
        while outstanding > 0 and stuck < 3:
            unsent = ring.sq_unconsumed()
            ring._enter(_SYS_IO_URING_ENTER, ring.fd, unsent, outstanding, _IORING_ENTER_GETEVENTS, None, 0)
            cq32 = ring.cq32
            head, ctail = cq32[ring.cq_head_i], cq32[ring.cq_tail_i]
            got = (ctail - head) & 0xFFFFFFFF
            cq32[ring.cq_head_i] = ctail
            stuck = stuck + 1 if not got else 0
            outstanding -= got
        self.inflight = max(0, outstanding)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        if self.unsent or self.inflight:
            # always enter: with DEFER_TASKRUN completions are only posted inside io_uring_enter
            self._wait(max(0, min_complete - len(self.done)))
        if self.errors:
            # raise the first error; the good completions stay for the next reap
            raise self.errors.pop(0)
        done, self.done = self.done, []
        return done

    def pending(self) -> int:
        return self.inflight + len(self.unsent) + len(self.done)

    def wait_idle(self) -> None:
        while self.inflight or self.unsent:
            self._wait(self.inflight + len(self.unsent))

    def close(self) -> None:
        try:
            stuck = 0
            while (self.inflight or self.unsent) and stuck < 3:
                before = (self.inflight, len(self.unsent))
                try:
                    self._wait(self.inflight + len(self.unsent))
                except Exception:
                    pass   # an I/O error while draining: keep draining the rest
                stuck = stuck + 1 if (self.inflight, len(self.unsent)) == before else 0
        finally:
            self.done = []
            self.addr.clear()
            self.ring.close()
