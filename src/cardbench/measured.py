"""The end of a measurement: keep what was measured, whatever ends it.

Every command that measures (``run`` on a directory or a device, ``verify``, ``readers --probe``,
``demo``, and each card of a ``drawer`` session) ends through :func:`keep_measured`:

    kept = keep_measured(lambda: run_directory(target, opts), db=db, show=show)

* the measurement finishes: what it returned (a Result, a ``cardbench.verify/1`` or
  ``cardbench.probe/1`` document, or a list of them) is recorded (:func:`cardbench.record.record`:
  stored, or kept in the outbox) and ``show(item)`` is called in between, so it is on screen
  before anything else can go wrong;
* it fails or is interrupted (Ctrl-C, SIGTERM) with a partial result on its error
  (``CardbenchError.partial``, complete=False): that is recorded, and the error ends the call. A
  bare KeyboardInterrupt becomes :class:`~cardbench.errors.Interrupted` (exit 130);
* SIGINT and SIGTERM are held while recording and showing
  (:func:`cardbench.signals.signals_held`): a Ctrl-C then cannot lose a finished result or cut its
  table in half. One that came is honoured afterwards: ``Interrupted`` "interrupted after the
  measurement had finished; its result was saved".

An error raised here carries the :class:`~cardbench.record.Recorded` of what it kept as
``error.recorded`` (the command line says it, with the error's one line). ``tell(kept)`` is
called on both ends, signals still held, once it is recorded (the drawer reports a card with it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from cardbench.errors import CardbenchError, Interrupted
from cardbench.record import Recorded, record
from cardbench.result import Result
from cardbench.signals import signals_held

M = TypeVar("M")


@dataclass
class Kept(Generic[M]):
    """What :func:`keep_measured` kept."""

    #: what was measured: the measurement's return value, or the partial on its error
    item: M
    #: what became of it (None with ``save=False``, when nothing was measured, or a partial that
    #: holds no measurement)
    recorded: Recorded | None = None
    #: the error that ended the measurement (None when it finished)
    error: CardbenchError | None = None
    #: SIGINT/SIGTERM that came while it was recorded and shown (then Interrupted follows)
    signals: list[int] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.error is None


def holds_measurement(item: Any) -> bool:
    """Whether a partial is worth storing: a Result with at least one test, any document, or a
    list holding one of those (a run stopped before its first test measured nothing)."""
    if item is None:
        return False
    if isinstance(item, Result):
        return bool(item.tests)
    if isinstance(item, dict):
        return True
    if isinstance(item, (list, tuple)):
        return any(holds_measurement(x) for x in item)
    return False


def _storable(item: Any) -> Any:
    """A list without its Nones (the drawer's card: result and verify document, either may be missing)."""
    return [x for x in item if x is not None] if isinstance(item, (list, tuple)) else item


def keep_measured(measure: Callable[[], M], *, db: str | os.PathLike | None = None, save: bool = True,
                  show: Callable[[M], None] | None = None,
                  tell: Callable[[Kept[M]], None] | None = None) -> Kept[M]:
    """Run ``measure()`` and keep what it measured (see the module docstring). ``save=False``:
    nothing is stored, ``show`` is still called. Returns the :class:`Kept` of a finished
    measurement; raises the error that ended it (with ``recorded``), or ``Interrupted`` when a
    signal came while the finished result was recorded and shown."""
    try:
        item = measure()
    except KeyboardInterrupt:
        raise Interrupted("interrupted; cleanup has run") from None
    except CardbenchError as e:
        if e.partial is None:
            raise
        kept: Kept[M] = Kept(item=e.partial, error=e)
        with signals_held() as kept.signals:
            if save and holds_measurement(e.partial):
                kept.recorded = e.recorded = record(_storable(e.partial), db)
            if tell is not None:
                tell(kept)
        raise
    kept = Kept(item=item)
    items = _storable(item)
    with signals_held() as kept.signals:
        if save and items is not None and items != []:
            kept.recorded = record(items, db, show=(lambda: show(item)) if show is not None else None)
        elif show is not None:
            show(item)
        if tell is not None:
            tell(kept)
    if kept.signals:
        rec = kept.recorded
        err = Interrupted("interrupted after the measurement had finished; its result was "
                          + ("saved" if rec is not None and rec.stored else "kept in the outbox" if rec is not None
                             and rec.kept else "shown above"))
        err.recorded = rec
        raise err
    return kept
