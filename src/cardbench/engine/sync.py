"""The sync engine: one pread/pwrite at a time, O_DIRECT on page-aligned buffers (queue depth 1)."""

from __future__ import annotations

import time

from cardbench.engine.base import Completion, IoOp, LoopResult, pio_loop
from cardbench.engine.data import DataFile
from cardbench.engine.registry import Capabilities, EngineInfo, register


class SyncEngine:
    name = "sync"
    caps = Capabilities(max_queue_depth=1, own_loop=True)
    queue_depth = 1
    backend: str | None = None     # one way only

    def __init__(self) -> None:
        self.file: DataFile | None = None
        self.path = ""
        self.direct = False
        self._done: list[Completion] = []

    def open(self, path: str, *, write: bool, direct: bool = True, create: bool = False) -> None:
        self.path = path
        self.file = DataFile.open(path, write=write, direct=direct, create=create)
        self.direct = self.file.direct

    @property
    def fd(self) -> int | None:
        return self.file.fd if self.file is not None else None

    def submit(self, op: IoOp) -> None:
        """Do the operation now (this engine has no queue); its completion waits in ``reap``."""
        assert self.file is not None
        mv = memoryview(op.buf)[: op.length]
        t0 = time.perf_counter()
        try:
            n = self.file.write_at(mv, op.offset) if op.kind == "write" else self.file.read_at(mv, op.offset)
        finally:
            mv.release()
        self._done.append(Completion(op, n, t0, time.perf_counter()))

    def closed_loop(self, kind: str, bufs, length: int, next_offset, *, max_ops: int, duration: float,
                    latencies, fill=None) -> LoopResult:
        """See :func:`cardbench.engine.base.closed_loop` (depth 1: the first buffer only)."""
        assert self.file is not None
        return pio_loop(self.file.fd, self.path, kind, bufs[0], length, next_offset, max_ops=max_ops,
                        duration=duration, latencies=latencies, fill=fill)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        done, self._done = self._done, []
        return done

    def pending(self) -> int:
        return len(self._done)

    def sync(self) -> None:
        assert self.file is not None
        self.file.sync()

    def close(self) -> None:
        if self.file is not None:
            f, self.file = self.file, None
            f.close()


def _make(queue_depth: int = 1, **options) -> SyncEngine:
    return SyncEngine()


register(EngineInfo("sync", "pread/pwrite, one at a time, O_DIRECT on aligned buffers",
                    SyncEngine.caps, make=_make))
