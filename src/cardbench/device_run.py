"""The raw test of a whole block device: ``run_device(target, DeviceOptions(...)) -> Result``.

raw_read (sampled over the whole device), raw_access (4 KiB random reads, QD1) and, only with
``destructive`` and the safety rules passed, raw_write (sampled like raw_read; with ``preserve``
every region is saved first and written back after, signals held meanwhile:
:func:`cardbench.devices.preserve.restore_held`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cardbench.devices.identity import identify
from cardbench.devices.lock import target_lock
from cardbench.devices.preserve import Preserver, restore_held
from cardbench.devices.safety import check_destructive, confirm
from cardbench.errors import (
    CardbenchError,
    DeviceFault,
    Interrupted,
    TargetError,
    UsageError,
)
from cardbench.patterns import Pattern
from cardbench.progress import NullProgress, ProgressReporter
from cardbench.result import Card, Reader, Result, TestResult, now_iso
from cardbench.session import fail, judge, mark_incomplete, new_tag
from cardbench.target import DeviceTarget
from cardbench.workloads import raw


@dataclass
class DeviceOptions:
    """What `cardbench run DEVICE` does. Read-only unless ``destructive`` (and confirmed)."""

    runs: int = 3
    warmup: int = 1
    positions: int = 16              # raw_read/raw_write samples spread over the device
    sample: int | None = None        # bytes per sample; None: a sweep lasts ~3 s
    access_seconds: float = 2.0      # raw_access duration per run
    destructive: bool = False
    preserve: bool = False
    confirm: str | None = None
    journal_dir: str | None = None
    card: Card = field(default_factory=Card)
    reader: Reader = field(default_factory=Reader)
    label: str | None = None
    progress: ProgressReporter = field(default_factory=NullProgress)

    def validate(self) -> None:
        if not 1 <= self.runs <= 1000:
            raise UsageError(f"--runs must be between 1 and 1000, got {self.runs}")
        if not 1 <= self.positions <= 1000:
            raise UsageError(f"--positions must be between 1 and 1000, got {self.positions}")
        if self.preserve and not self.destructive:
            raise UsageError("--preserve only makes sense with --destructive (read-only tests write nothing)")


def run_device(target: DeviceTarget, opts: DeviceOptions | None = None) -> Result:
    """raw_read (sampled over the whole device), raw_access (4 KiB random reads, QD1) and, only
    with ``destructive`` and the safety rules passed, raw_write (sampled like raw_read).
    ``target``: a whole device's target (``open_target(path, kinds=("device",), whole_device=True)``)."""

    opts = opts or DeviceOptions()
    opts.validate()
    dev = target.block_device()
    if not os.access(dev.path, os.R_OK):
        raise TargetError(f"cannot open {dev.path}: permission denied (raw device tests need root)")
    result = Result(target={"kind": "device", "path": dev.path, "size_bytes": dev.size,
                            "transport": dev.transport, "model": dev.model}, card=opts.card, reader=opts.reader)
    if opts.label and not result.card.label:
        result.card.label = opts.label
    identify(dev, result.card, result.reader, result.target)
    preserver = None
    try:
        if opts.destructive:
            dev = check_destructive(dev)     # the state read again, now, and the identity compared
            confirm(dev, opts.confirm)
        with target_lock(target.lock_key, wait=False, label=dev.path):
            sample = opts.sample or raw.auto_sample(target, opts.positions)
            common = {"engine": "sync", "io": "O_DIRECT", "block_size": raw.BLOCK, "queue_depth": 1,
                      "positions": opts.positions, "sample_bytes": sample, "runs": opts.runs,
                      "warmup_runs": opts.warmup}
            rtest = TestResult(name="raw_read", method=dict(common))
            result.tests.append(rtest)
            for i in range(opts.warmup + opts.runs):
                with opts.progress.task(f"raw_read sweep {i + 1}/{opts.warmup + opts.runs}",
                                        sample * opts.positions) as adv:
                    run = raw.sampled_sweep(target, "read", count=opts.positions, sample=sample, progress=adv)
                (rtest.warmup if i < opts.warmup else rtest.runs).append(run)
            atest = TestResult(name="raw_access", method={"engine": "sync", "io": "O_DIRECT", "block_size": 4096,
                                                         "queue_depth": 1, "pattern": "uniform random over the device",
                                                         "duration_s": opts.access_seconds, "runs": opts.runs})
            result.tests.append(atest)
            for i in range(opts.warmup + opts.runs):
                run = raw.random_access(target, duration=opts.access_seconds)
                (atest.warmup if i < opts.warmup else atest.runs).append(run)
            if opts.destructive:
                wtest = TestResult(name="raw_write", method=dict(common, preserve=opts.preserve,
                                                                 sync="fsync after each sample"))
                result.tests.append(wtest)
                if opts.preserve:
                    preserver = Preserver(dev, opts.journal_dir)
                for i in range(opts.warmup + opts.runs):
                    with opts.progress.task(f"raw_write sweep {i + 1}/{opts.warmup + opts.runs}",
                                            sample * opts.positions) as adv:
                        run = raw.sampled_sweep(target, "write", count=opts.positions, sample=sample,
                                                pattern=Pattern(new_tag()), preserve=preserver, progress=adv)
                    (wtest.warmup if i < opts.warmup else wtest.runs).append(run)
    except BaseException as e:
        mark_incomplete(result, opts.runs)
        err: BaseException = Interrupted("interrupted; the device was left as it was" if not preserver else
                                         "interrupted; preserved regions restored") \
            if isinstance(e, KeyboardInterrupt) else e
        # a failed write-back must not replace the error that stopped the run (nor lose its result)
        kept, _ = _restore(preserver, target)
        preserver = None
        if kept and isinstance(err, CardbenchError):
            err.message = f"{err.message.replace('; preserved regions restored', '')}; {kept}"
        fail(result, err, e, target)
    finally:
        if preserver is not None:
            kept, signalled = _restore(preserver, target)
            if kept or signalled:
                result.complete = False
                fault = DeviceFault(kept) if kept else Interrupted("interrupted; preserved regions restored")
                fail(result, fault, fault)
    result.finished_at = now_iso()
    judge(result)
    return result


def _restore(preserver, target=None) -> tuple[str | None, bool]:
    """(None when the preserved regions are back, else the line saying what was kept; whether a
    signal came meanwhile). Nothing is written to a ``target`` that went away (Target.gone)."""
    if preserver is None:
        return None, False
    done = restore_held(preserver, gone=target.gone if target is not None else None)
    return done.kept, bool(done.signals)
