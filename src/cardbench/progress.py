"""Progress reporting, decoupled from the terminal.

A workload asks for ``progress.task(description, total_bytes)`` and calls the returned function
with each chunk done. The CLI passes a rich-backed reporter (cli.RichProgress); library users
pass nothing (``NullProgress``) or their own object with the same ``task`` method.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Protocol


class ProgressReporter(Protocol):
    def task(self, description: str, total: int | None) -> "contextmanager[Callable[[int], None]]": ...


class NullProgress:
    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        yield lambda n: None
