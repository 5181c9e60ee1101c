"""Engines by name: each engine module registers itself here; nothing here imports an engine.

An engine declares what it can do (:class:`Capabilities`) instead of being probed for it:

* ``max_queue_depth``: the most operations it keeps in flight (1: one at a time);
* ``own_loop``: it runs :func:`cardbench.engine.base.closed_loop` its own way (no Python
  object per operation), else the loop goes through its ``submit``/``reap``;
* ``operations``: it moves single operations (``open``/``submit``/``reap``); an engine without
  them (fio) runs whole jobs through ``run_job`` instead (:mod:`cardbench.engine.jobs` is the
  workload-level runner that hides the difference).

The built-in engines (``sync``, ``queued``, ``fio``) register when the ``cardbench.engine``
package is imported (its ``__init__``), so every list of engines -- the CLI's choices, the
validation of options -- comes from :func:`engine_names`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cardbench.errors import UsageError


@dataclass(frozen=True)
class Capabilities:
    max_queue_depth: int = 1
    own_loop: bool = False
    operations: bool = True


@dataclass(frozen=True)
class EngineInfo:
    """One registered engine: its name, one line about it, what it can do, and how to make it
    (``make(queue_depth, **options)``) or run a whole job with it (``run_job(job) -> Run``)."""

    name: str
    summary: str
    caps: Capabilities
    make: Callable[..., Any] | None = None
    run_job: Callable[..., Any] | None = None


_ENGINES: dict[str, EngineInfo] = {}


def register(info: EngineInfo) -> EngineInfo:
    """Add an engine (a second registration under the same name replaces the first)."""
    if info.make is None and info.run_job is None:
        raise ValueError(f"engine {info.name!r} can neither make an engine nor run a job")
    _ENGINES[info.name] = info
    return info


def engine_names() -> tuple[str, ...]:
    """The registered engines, in registration order."""
    return tuple(_ENGINES)


def engine_info(name: str) -> EngineInfo:
    """The registered engine ``name``, or a UsageError naming the choices."""
    try:
        return _ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r} (choose {', '.join(engine_names())})") from None


def check_depth(name: str, queue_depth: int, what: str = "") -> None:
    """UsageError if ``name`` cannot keep ``queue_depth`` operations in flight."""
    info = engine_info(name)
    if queue_depth > info.caps.max_queue_depth:
        deeper = [n for n, i in _ENGINES.items() if i.caps.max_queue_depth >= queue_depth]
        raise UsageError(f"{what + ': ' if what else ''}the {name} engine does "
                         f"{'one operation at a time' if info.caps.max_queue_depth == 1 else f'at most {info.caps.max_queue_depth} at a time'}; "
                         f"queue depth {queue_depth} needs engine {' or '.join(deeper)}")


def get_engine(name: str = "sync", queue_depth: int = 1, **options: Any):
    """A new, unopened operation engine ``name`` for ``queue_depth`` operations in flight.

    An engine that runs whole jobs only (fio) has no operations: run it through
    :func:`cardbench.engine.jobs.run_job`."""
    info = engine_info(name)
    if info.make is None or not info.caps.operations:
        raise UsageError(f"the {name} engine runs whole workloads, not single operations: run it through "
                         "cardbench.engine.jobs.run_job (workloads take engine=" f"{name!r})")
    check_depth(name, queue_depth)
    return info.make(queue_depth, **options)
