"""Progress reporting, decoupled from the terminal.

A workload asks for ``progress.task(description, total_bytes)`` and calls the returned function
with each chunk done (and :func:`set_total` when it learns the total late); work measured in
time rather than bytes uses :func:`timed_task`. The CLI passes a rich-backed reporter (cli.RichProgress); library users
pass nothing (``NullProgress``) or their own object with the same ``task`` method.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager
from typing import Callable, Iterator, Protocol


class ProgressReporter(Protocol):
    def task(self, description: str, total: int | None) -> AbstractContextManager[Callable[[int], None]]: ...


class NullProgress:
    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        yield lambda n: None


@contextmanager
def timed_task(progress: ProgressReporter, description: str, seconds: float) -> Iterator[None]:
    """Work whose length is known in time, not bytes (so many runs of so many seconds): shown by
    the reporter's ``timed(description, seconds)`` when it has one (an elapsed bar with the time
    left), else as a plain ``task`` without a total."""
    timed = getattr(progress, "timed", None)
    if timed is not None:
        with timed(description, seconds):
            yield
        return
    with progress.task(description, None):
        yield


def set_total(advance: Callable[[int], None], total: int | None) -> None:
    """Tell a task's advance function the total learnt late, when the reporter can take it."""
    setter = getattr(advance, "set_total", None)
    if setter is not None and total:
        setter(total)
