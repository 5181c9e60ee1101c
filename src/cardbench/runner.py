"""A test session on a directory: ``run_directory(path, RunOptions(...)) -> Result``.

Order: open the target (:func:`cardbench.target.open_target`: checked, resolved once), take its
lock, remove files a killed run left, make the plan (:mod:`cardbench.plan`: sizes, tests,
engines, areas), then run it: the classic test (:mod:`cardbench.workloads.classic`:
``seq_write`` timed through fsync, ``cold_read`` proved cold and verified, one file's room),
the extra pattern tests in one test area, and ``sustained_write``. Then plausibility checks;
every test file removed, also on error, Ctrl-C and SIGTERM. On failure the exception carries the
partial result (``exc.result``, ``complete=False``) so it can be stored as such.

A whole block device is :func:`cardbench.device_run.run_device` (re-exported here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cardbench.device_run import DeviceOptions, run_device
from cardbench.devices.identity import identify
from cardbench.devices.lock import target_lock
from cardbench.engine.registry import engine_info
from cardbench.errors import CardbenchError, Interrupted, UsageError
from cardbench.plan import (
    APP_AREA,
    FAT_FILE_LIMIT,
    FAT_TYPES,
    FIT_SHARE,
    FIT_SLACK,
    MAX_AUTO_SIZE,
    MIN_AUTO_SIZE,
    MIN_RUN_SECONDS,
    PROBE_RUN_SECONDS,
    PROFILES,
    READ_RUN_SECONDS,
    TARGET_RUN_SECONDS,
    Plan,
    cap_size,
    check_size,
    extra_engine,
    file_limit,
    largest_fit,
    make_plan,
    parse_pattern,
    room_needed,
    wanted_extra_tests,
)
from cardbench.progress import NullProgress, ProgressReporter, set_total, timed_task
from cardbench.result import Card, Reader, Result, now_iso
from cardbench.session import fail, judge, mark_incomplete
from cardbench.target import DirTarget, sweep_leftovers
from cardbench.workloads.classic import run_classic as _run_tests
from cardbench.workloads.classic import unlink_quietly
from cardbench.workloads.files import BLOCK
from cardbench.workloads.random import measure_pattern, open_area
from cardbench.workloads.sustained import sustained_write

__all__ = ["APP_AREA", "FAT_FILE_LIMIT", "FAT_TYPES", "FIT_SHARE", "FIT_SLACK", "MAX_AUTO_SIZE", "MIN_AUTO_SIZE",
           "MIN_RUN_SECONDS", "PROBE_RUN_SECONDS", "PROFILES", "READ_RUN_SECONDS", "TARGET_RUN_SECONDS",
           "DeviceOptions", "RunOptions", "cap_size", "check_size", "file_limit", "largest_fit", "room_needed",
           "run_device", "run_directory", "wanted_extra_tests"]


@dataclass
class RunOptions:
    """What `cardbench run DIRECTORY` does; every CLI flag has its field here."""

    size: int | None = None          # bytes per file; None: adapt to the card
    runs: int = 3
    warmup: int = 1
    block: int = BLOCK
    direct: bool = True
    card: Card = field(default_factory=Card)
    reader: Reader = field(default_factory=Reader)
    label: str | None = None
    progress: ProgressReporter = field(default_factory=NullProgress)
    #: more tests after seq_write and cold_read: pattern names such as rand_read_4k_q32t1
    #: (cardbench.workloads.random), see PROFILES; A1/A2 in the label adds the "app" set
    extra_tests: list[str] = field(default_factory=list)
    #: the engine (cardbench.engine.registry): None is sync for seq_write/cold_read and queued
    #: for the extra tests; a name runs every test on it (a QD>1 test on sync runs on queued)
    engine: str | None = None
    duration: float = 3.0            # seconds per run of an extra test (time-based: wraps within its area)
    area: int | None = None          # bytes of the random-I/O test area (default: APP_AREA, capped by free space)
    sustained: bool = False          # also sustained_write over the free space (fills the card!)

    @property
    def classic_engine(self) -> str:
        """The engine of seq_write and cold_read."""
        return self.engine or "sync"

    def extra_engine_for(self, name: str) -> str:
        """The engine of the extra test ``name`` (cardbench.plan.extra_engine)."""
        return extra_engine(name, self.engine)

    def validate(self) -> None:
        if self.engine is not None:
            engine_info(self.engine)
        if not (0 < self.duration <= 3600):
            raise UsageError(f"--duration must be between 0 and 3600 s, got {self.duration}")
        if self.extra_tests:
            for name in self.extra_tests:
                parse_pattern(name)
        if self.runs < 1:
            raise UsageError(f"--runs must be at least 1, got {self.runs}")
        if self.runs > 1000:
            raise UsageError(f"--runs must be at most 1000, got {self.runs}")
        if self.warmup < 0:
            raise UsageError(f"warm-up runs cannot be negative, got {self.warmup}")
        if self.size is not None and self.size < 4096:
            raise UsageError(f"--size must be at least 4 kB, got {self.size} B")
        if self.block < 4096 or self.block % 4096:
            raise UsageError("the block size must be a multiple of 4 KiB")


def run_directory(target: DirTarget, opts: RunOptions | None = None) -> Result:
    """Run seq_write and cold_read (and the extra tests the options and label ask for) on a
    directory of a mounted card and return the result. ``target``: a directory target
    (:meth:`cardbench.target.DirTarget.open`)."""
    opts = opts or RunOptions()
    opts.validate()
    if not isinstance(target, DirTarget):
        raise UsageError(f"{target.path}: run_directory needs a directory target")
    result = Result(target=target.to_dict(), card=opts.card, reader=opts.reader)
    if opts.label and not result.card.label:
        result.card.label = opts.label
    _identify(target, result)
    files: list[str] = []
    try:
        with target_lock(target.lock_key, wait=False, label=target.path):
            removed = sweep_leftovers(target.path)
            if removed:
                result.warnings.append(f"removed {len(removed)} test file(s) left by an interrupted run")
            plan = make_plan(target, opts)
            _run_tests(target, result, opts, plan, files)
            _run_extra(target, result, opts, plan)
    except BaseException as e:
        mark_incomplete(result, opts.runs)
        left = _remove_all(files)   # before the message: it must say whether files stayed
        if isinstance(e, KeyboardInterrupt):
            err: BaseException = Interrupted("interrupted" + ("" if left else "; test files removed"))
        else:
            err = e
        if left and isinstance(err, CardbenchError):
            err.message = (f"{err.message}; {left} test file(s) could not be removed: the next "
                           "`cardbench run` on this filesystem removes them")
        fail(result, err, e, target)
    finally:
        _remove_all(files)
    result.finished_at = now_iso()
    judge(result)
    return result


def _run_extra(target: DirTarget, result: Result, opts: RunOptions, plan: Plan) -> None:
    """The plan's pattern tests in one test area (a file of ours, removed after), then sustained_write."""
    if plan.extra:
        assert plan.area is not None        # make_plan sizes an area whenever there are extra tests
        # filled at about the rate seq_write just measured: that is the time shown
        written = result.test("seq_write")
        rate = written.median_bytes_per_s if written is not None else None
        with timed_task(opts.progress, "preparing the random-I/O area", plan.area / rate if rate else 0):
            area = open_area(target, plan.area, fill=True, write=True, allow_write=True, margin=0)
        try:
            for job in plan.extra:
                with timed_task(opts.progress, f"{job.name} ({job.engine})", opts.duration * (opts.runs + opts.warmup)):
                    t = measure_pattern(area, job.name, job.engine, runs=opts.runs, duration=opts.duration,
                                    warmup=opts.warmup, allow_write=True)
                if job.why:
                    t.method["why"] = job.why
                result.tests.append(t)
        finally:
            area.close()
    if plan.job("sustained_write") is not None:
        with opts.progress.task("sustained_write", None) as advance:
            done = [0]

            def on_slice(written: int, total: int, rate: float) -> None:
                set_total(advance, total)
                advance(written - done[0])
                done[0] = written
            result.tests.append(sustained_write(target, allow_write=True, progress=on_slice))


def _identify(target: DirTarget, result: Result) -> None:
    """Fill card and reader identity from the block device under the directory, where known
    (a partition's parent device: the card). Nothing found is not an error: the user's names stand."""
    try:
        dev = target.block_device()
        if dev is not None:
            identify(dev, result.card, result.reader, result.target)
    except Interrupted:
        raise
    except (CardbenchError, OSError):
        pass


def _remove_all(files: list[str]) -> int:
    """Remove test files (best effort); returns how many are still there."""
    left = 0
    for f in files:
        unlink_quietly(f)
        left += os.path.lexists(f)
    return left
