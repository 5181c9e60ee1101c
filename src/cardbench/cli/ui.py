"""What a person sees: rich progress bars on stderr and the one-line error format."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from cardbench.errors import DeviceFault
from cardbench.progress import Advance

stderr = Console(stderr=True)


class RichProgress:
    """Progress bars for anything that lasts longer than a second (shown on a terminal only).

    ``task(description, total_bytes)`` shows bytes done, the rate and the time left; the
    function it yields takes the bytes done since the last call, and ``.set_total(n)`` when the
    total is learnt late. ``timed(description, seconds)`` is for work whose length is known in
    time (a random-I/O test of so many runs of so many seconds): it advances by itself. The bar
    appears after ``delay`` seconds, whether or not the work has reported anything yet, and goes
    when the work is done.
    """

    def __init__(self, enabled: bool | None = None, delay: float = 1.0):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.delay = delay

    @contextmanager
    def _shown(self, columns, description: str, total: float | None):
        progress = Progress(*columns, console=stderr, transient=True, auto_refresh=True, refresh_per_second=4)
        task_id = progress.add_task(description, total=total)
        timer = threading.Timer(self.delay, progress.start)
        timer.daemon = True
        timer.start()
        try:
            yield progress, task_id
        finally:
            timer.cancel()
            if timer.is_alive():
                timer.join()
            if progress.live.is_started:
                progress.stop()

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        if not self.enabled:
            yield Advance(lambda n: None)
            return
        # fits 80 columns: the bar takes what the figures leave
        columns = (TextColumn("{task.description}"), BarColumn(bar_width=None), DownloadColumn(binary_units=False),
                   TransferSpeedColumn(), TimeRemainingColumn(), TextColumn("left"))
        with self._shown(columns, description, total) as (progress, task_id):
            yield Advance(lambda n: progress.advance(task_id, n),
                          lambda total: progress.update(task_id, total=total))

    @contextmanager
    def timed(self, description: str, seconds: float) -> Iterator[None]:
        if not self.enabled or not seconds or seconds <= 0:
            with self.task(description, None):
                yield
            return
        columns = (TextColumn("{task.description}"), BarColumn(bar_width=None), TimeElapsedColumn(),
                   TextColumn(f"of ~{seconds:.0f} s,"), TimeRemainingColumn(), TextColumn("left"))
        with self._shown(columns, description, seconds) as (progress, task_id):
            started = time.monotonic()
            done = threading.Event()

            def tick() -> None:
                while not done.wait(0.25):
                    progress.update(task_id, completed=min(seconds, time.monotonic() - started))
            ticker = threading.Thread(target=tick, daemon=True)
            ticker.start()
            try:
                yield
            finally:
                done.set()
                ticker.join()


def error_line(message: str) -> None:
    print(f"cardbench: {message}", file=sys.stderr)


def said(rec, *, saved_line: bool = True, end: bool = True) -> None:
    """The one place a command says what became of what it measured (a ``cardbench.record.Recorded``):
    its warnings, "saved to X" (``saved_line``), and when the store failed the line that says where it
    is kept and how it will be stored: raised as the command's error when ``end`` (exit 9), else printed."""
    for w in rec.warnings:
        error_line(f"warning: {w}")
    problem = rec.problem()
    if problem is None:
        if saved_line:
            print(f"saved to {rec.location}", file=sys.stderr)
        return
    if end:
        raise problem
    error_line(problem.message)


def end_of_document(rec, error: str | None, *, saved_line: bool = True) -> None:
    """The end of a command that measured a document (verify, pulltest, endure): the error that
    stopped it, the document kept all the same (stored, or in the outbox), as the command's one
    line (DeviceFault: the exit code of a card that failed during the test); else :func:`said`."""
    if error:
        fault = DeviceFault(error)
        fault.recorded = rec
        raise fault
    if rec is not None:
        said(rec, saved_line=saved_line)
