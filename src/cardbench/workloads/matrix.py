"""The ``--profile matrix`` set: CrystalDiskMark's default four tests, read and write, tuned for flash.

SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1 (the default of CrystalDiskMark and KDiskMark),
each read and write. For cards and sticks each test is short (3 s, like CrystalDiskMark's
"Flash Memory" preset measures 1 s): one warm-up run kept apart and 3 measured runs, so the
whole matrix takes about 8 x 4 x 3 s plus the fill.

The size adapts to the card: on a filesystem the test area is 1 GiB (at most a quarter of the
free space) but filling it stops after ``max_fill_seconds`` (60 s), so a slow card gets a
smaller area instead of a long wait; every run also stops at its duration. On a block device
the area is the device (nothing is filled; writes only with ``allow_write=True``, else the
write tests are reported as skipped).

Reads run first, on the freshly filled area, then writes (which overwrite the same area).
"""

from __future__ import annotations

from typing import Callable

from cardbench.engine.registry import check_depth, engine_info
from cardbench.errors import UsageError
from cardbench.result import Run, TestResult
from cardbench.signals import sigterm_raises
from cardbench.target import Target
from cardbench.workloads.random import (
    DEFAULT_MAX_FILL_SECONDS,
    TestArea,
    measure_pattern,
    open_area,
    parse_pattern,
)

#: The matrix, in the order it runs.
MATRIX_TESTS = (
    "seq_read_1m_q8t1",
    "seq_read_1m_q1t1",
    "rand_read_4k_q32t1",
    "rand_read_4k_q1t1",
    "seq_write_1m_q8t1",
    "seq_write_1m_q1t1",
    "rand_write_4k_q32t1",
    "rand_write_4k_q1t1",
)

#: What CrystalDiskMark calls them, for reports.
CDM_LABELS = {
    "seq_read_1m_q8t1": "SEQ1M Q8T1 Read",
    "seq_read_1m_q1t1": "SEQ1M Q1T1 Read",
    "rand_read_4k_q32t1": "RND4K Q32T1 Read",
    "rand_read_4k_q1t1": "RND4K Q1T1 Read",
    "seq_write_1m_q8t1": "SEQ1M Q8T1 Write",
    "seq_write_1m_q1t1": "SEQ1M Q1T1 Write",
    "rand_write_4k_q32t1": "RND4K Q32T1 Write",
    "rand_write_4k_q1t1": "RND4K Q1T1 Write",
}

DEFAULT_DURATION = 3.0
DEFAULT_RUNS = 3
DEFAULT_WARMUP = 1


def run_matrix(target: Target, engine: str = "queued", *, runs: int = DEFAULT_RUNS, warmup: int = DEFAULT_WARMUP,
               duration: float = DEFAULT_DURATION, size: int | None = None, allow_write: bool = False,
               tests: tuple[str, ...] | list[str] = MATRIX_TESTS, interval: float = 0.0,
               max_fill_seconds: float | None = DEFAULT_MAX_FILL_SECONDS, backend: str = "auto",
               progress: Callable[[str, int, Run], None] | None = None) -> list[TestResult]:
    """Run the matrix on ``target`` (a directory, block device or image file); one TestResult per test.

    ``engine``: queued (default; io_uring), fio, or sync (QD1 tests only: the QD8/QD32 tests
    are then reported as skipped). ``size``: the test area (default: adapts, see the module).
    """
    engine_info(engine)      # an unknown engine is refused before anything is written
    specs = [parse_pattern(t) for t in tests]
    with sigterm_raises():
        area = open_area(target, size, fill=True, write=False, max_fill_seconds=max_fill_seconds)
        try:
            results: list[TestResult] = []
            for spec in specs:
                skip = _skip_reason(spec, engine, area, allow_write)
                if skip:
                    results.append(TestResult(name=spec.name, method={"engine": engine, "block_size": spec.block_size,
                                                                      "queue_depth": spec.queue_depth,
                                                                      "threads": spec.threads, **area.describe()},
                                              complete=False, warnings=[f"skipped: {skip}"]))
                    continue
                res = measure_pattern(area, spec.name, engine, runs=runs, duration=duration, warmup=warmup,
                                      allow_write=allow_write, interval=interval, backend=backend, progress=progress)
                res.extra["label"] = CDM_LABELS.get(spec.name, spec.name)
                res.method["profile"] = "matrix"
                results.append(res)
            return results
        finally:
            area.close()


def _skip_reason(spec, engine: str, area: TestArea, allow_write: bool) -> str | None:
    if spec.is_write and area.kind in ("device", "image") and not allow_write:
        return f"writing to {area.path} was not allowed (allow_write=False)"
    try:
        check_depth(engine, spec.queue_depth)
    except UsageError as e:
        return e.message
    return None
