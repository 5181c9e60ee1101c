"""The queued engine's thread-pool backend: ``depth`` threads each doing one blocking
preadv/pwritev (they release the GIL); used where io_uring is missing or not safe to drive."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque

from cardbench.engine.base import Completion, IoOp
from cardbench.engine.errors import io_error
from cardbench.signals import start_thread


class _ThreadImpl:
    """``depth`` threads each doing one blocking preadv/pwritev at a time."""


    def __init__(self, fd: int, path: str, queue_depth: int) -> None:
        self.fd = fd
        self.path = path
        self.depth = queue_depth
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.results: deque = deque()
        self.cond = threading.Condition(threading.Lock())
        self.outstanding = 0           # submitted, not reaped
        self.running = 0               # submitted, not completed
        self.threads = [threading.Thread(target=self._worker, name=f"cardbench-io-{i}", daemon=True)
                        for i in range(queue_depth)]
        for t in self.threads:
            start_thread(t)

    def _worker(self) -> None:
        fd = self.fd
        jobs = self.jobs
        results = self.results
        cond = self.cond
        perf = time.perf_counter
        while True:
            op = jobs.get()
            if op is None:
                return
            mv = memoryview(op.buf)[: op.length]
            t0 = perf()
            item: Completion | Exception
            try:
                if op.kind == "write":
                    n = os.pwritev(fd, [mv], op.offset)
                else:
                    n = os.preadv(fd, [mv], op.offset)
                item = Completion(op, n, t0, perf())
            except OSError as e:
                item = io_error(e, self.path, op=op.kind, offset=op.offset)
            finally:
                mv.release()
            with cond:
                results.append(item)
                self.running -= 1
                cond.notify()

    def submit(self, op: IoOp) -> None:
        if op.kind not in ("read", "write"):
            raise ValueError(f"unknown operation {op.kind!r}")
        with self.cond:
            self.outstanding += 1
            self.running += 1
        self.jobs.put(op)

    def reap(self, min_complete: int = 1) -> list[Completion]:
        with self.cond:
            want = min(min_complete, self.outstanding)
            while len(self.results) < want:
                self.cond.wait()
            items = list(self.results)
            self.results.clear()
            errors = [it for it in items if isinstance(it, Exception)]
            if errors:
                # raise the first error; the good completions stay for the next reap
                self.results.extend(it for it in items if not isinstance(it, Exception))
                self.outstanding -= len(errors)
                raise errors[0]
            self.outstanding -= len(items)
        return items

    def pending(self) -> int:
        return self.outstanding

    def wait_idle(self) -> None:
        with self.cond:
            while self.running:
                self.cond.wait()

    def close(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        for t in self.threads:
            t.join()
