"""The sync engine: one pread/pwrite at a time, O_DIRECT on page-aligned buffers (queue depth 1)."""

from __future__ import annotations

import os
import time

from cardbench.engine.base import Completion, IoOp, LoopResult, open_fd, os_error, pio_loop


class SyncEngine:
    name = "sync"
    queue_depth = 1

    def __init__(self) -> None:
        self.fd: int | None = None
        self.path = ""
        self.direct = False
        self._done: list[Completion] = []

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None:
        self.path = path
        self.fd, self.direct = open_fd(path, write=write, direct=direct, create=create)

    def submit(self, op: IoOp) -> None:
        """Do the operation now (this engine has no queue); its completion waits in ``reap``."""
        assert self.fd is not None
        mv = memoryview(op.buf)[: op.length]
        t0 = time.perf_counter()
        try:
            if op.kind == "write":
                n = os.pwritev(self.fd, [mv], op.offset)
            else:
                n = os.preadv(self.fd, [mv], op.offset)
        except OSError as e:
            raise os_error(e, self.path) from None
        finally:
            mv.release()
        self._done.append(Completion(op, n, t0, time.perf_counter()))

    def closed_loop(self, kind: str, bufs, length: int, next_offset, *, max_ops: int, duration: float,
                    latencies) -> LoopResult:
        """See :func:`cardbench.engine.base.closed_loop` (depth 1: the first buffer only)."""
        assert self.fd is not None
        return pio_loop(self.fd, self.path, kind, bufs[0], length, next_offset, max_ops=max_ops,
                        duration=duration, latencies=latencies)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        done, self._done = self._done, []
        return done

    def pending(self) -> int:
        return len(self._done)

    def sync(self) -> None:
        assert self.fd is not None
        try:
            os.fsync(self.fd)
        except OSError as e:
            raise os_error(e, self.path) from None

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
