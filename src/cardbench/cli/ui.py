"""What a person sees: rich progress bars on stderr and the one-line error format."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                           TransferSpeedColumn)

stderr = Console(stderr=True)

#: width of tables when stdout is not a terminal (a file, a pipe, CI logs): wide enough for the
#: drawer table, so nothing is cut to rich's 80-column default
PIPE_WIDTH = 150


def stdout_console() -> Console:
    """The console for a command's output: the terminal's width, or PIPE_WIDTH when piped."""
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)


class RichProgress:
    """Progress bars for anything that lasts longer than a second (shown on a terminal only)."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        if not self.enabled:
            yield lambda n: None
            return
        progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=False),
                            TransferSpeedColumn(), TimeRemainingColumn(), console=stderr, transient=True,
                            auto_refresh=False)
        started = time.monotonic()
        shown = False
        task_id = progress.add_task(description, total=total)

        def advance(n: int) -> None:
            nonlocal shown
            progress.advance(task_id, n)
            if not shown and time.monotonic() - started > 1.0:
                progress.start()
                shown = True
            if shown:
                progress.refresh()

        try:
            yield advance
        finally:
            if shown:
                progress.stop()


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
