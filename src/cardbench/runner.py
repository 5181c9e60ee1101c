"""The classic card test on a directory: ``run_directory(path, RunOptions(...)) -> Result``.

Order: check the target, take its lock, remove files a killed run left, choose the size,
``seq_write`` (one warm-up file, then ``runs`` fresh files, each timed through fsync),
``cold_read`` (the warm-up file, then each run's file, cold and verified), plausibility checks,
and every test file removed, also on error, Ctrl-C and SIGTERM. On failure the exception
carries the partial result (``exc.result``, ``complete=False``) so it can be stored as such.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from cardbench.errors import CardbenchError, DeviceFault, Interrupted, TargetError, UsageError
from cardbench.patterns import Pattern
from cardbench.progress import NullProgress, ProgressReporter
from cardbench.result import Card, Reader, Result, TestResult, now_iso
from cardbench.target import DirTarget, sweep_leftovers
from cardbench.units import MiB, fmt_size
from cardbench.workloads.files import BLOCK, read_file, write_file

#: one timed run should last about this long when the size is chosen automatically
TARGET_RUN_SECONDS = 3.0
MIN_AUTO_SIZE = 1 * MiB
MAX_AUTO_SIZE = 1024 * MiB
#: never fill more than this fraction of the free space
FREE_SPACE_SHARE = 0.8

#: named sets of extra tests. "app": the SD Application Performance Class figures (4 KiB random
#: read and write IOPS) at queue depth 1 and 32 (Raspberry Pi's agnostics uses 32 since 2024 "to
#: exercise A2 cards ... deep IO queues" [S43]); "matrix": CrystalDiskMark's/KDiskMark's default set.
PROFILES = {
    "classic": [],
    "app": ["rand_read_4k_q1t1", "rand_write_4k_q1t1", "rand_read_4k_q32t1", "rand_write_4k_q32t1"],
    "matrix": ["seq_read_1m_q8t1", "seq_read_1m_q1t1", "rand_read_4k_q32t1", "rand_read_4k_q1t1",
               "seq_write_1m_q8t1", "seq_write_1m_q1t1", "rand_write_4k_q32t1", "rand_write_4k_q1t1"],
}
#: the random-I/O test area: 256 MiB, the size agnostics' A-class sniff test uses [S43]
APP_AREA = 256 * MiB


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
    duration: float = 3.0            # seconds per run of an extra test (time-based: slow flash ends in time)
    area: int | None = None          # bytes of the random-I/O test area (default: APP_AREA, capped by free space)
    sustained: bool = False          # also sustained_write over the free space (fills the card!)

    @property
    def classic_engine(self) -> str:
        """The engine of seq_write and cold_read."""
        return self.engine or "sync"

    def extra_engine_for(self, name: str) -> str:
        """The engine of the extra test ``name``: the one asked for where it can keep the
        test's queue depth in flight, else queued."""
        from cardbench.engine.registry import engine_info
        from cardbench.workloads.random import parse_pattern
        engine = self.engine or "queued"
        if parse_pattern(name).queue_depth > engine_info(engine).caps.max_queue_depth:
            engine = "queued"
        return engine

    def validate(self) -> None:
        if self.engine is not None:
            from cardbench.engine.registry import engine_info
            engine_info(self.engine)
        if not (0 < self.duration <= 3600):
            raise UsageError(f"--duration must be between 0 and 3600 s, got {self.duration}")
        if self.extra_tests:
            from cardbench.workloads.random import parse_pattern
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


def _tag() -> int:
    return random.getrandbits(63) | 1


def choose_size(target: DirTarget, run_id: str, opts: RunOptions) -> tuple[int, dict]:
    """Start small and grow until a probe write lasts >= 0.5 s; size one run to ~3 s of the
    measured rate, capped by free space. Returns (size, how it was chosen)."""
    files = opts.runs + opts.warmup
    cap = int(target.free_now() * FREE_SPACE_SHARE / files) // MiB * MiB
    if cap < MIN_AUTO_SIZE:
        raise TargetError(f"{target.path}: too little free space ({fmt_size(target.free_now())}) "
                          f"for {files} test files of at least {fmt_size(MIN_AUTO_SIZE)}")
    probe = MIN_AUTO_SIZE
    rate = None
    probes = []
    while True:
        path = target.test_file(run_id, f"probe{len(probes)}")
        try:
            run, _ = write_file(path, probe, Pattern(_tag()), block=min(opts.block, probe), direct=opts.direct,
                                engine=opts.classic_engine)
        finally:
            _unlink(path)
        probes.append({"bytes": run.bytes, "seconds": run.seconds})
        rate = run.bytes_per_s
        if run.seconds >= 0.5 or probe * 4 > min(cap, MAX_AUTO_SIZE):
            break
        probe *= 4
    size = int(rate * TARGET_RUN_SECONDS) // MiB * MiB
    size = max(MIN_AUTO_SIZE, min(size, MAX_AUTO_SIZE, cap))
    return size, {"auto": True, "probes": probes, "target_seconds": TARGET_RUN_SECONDS}


def _mark_incomplete(result: Result, runs: int) -> None:
    """A run that stopped: the result and every test short of its timed runs are incomplete."""
    result.complete = False
    for t in result.tests:
        if len(t.runs) < runs:   # also a test stopped in its warm-up (no timed run yet)
            t.complete = False


def _fail(result: Result, err: BaseException, cause: BaseException):
    """Attach the partial result to the error that ends the run (the CLI stores it as incomplete)
    and raise it."""
    result.error = err.message if isinstance(err, CardbenchError) else f"{type(err).__name__}: {err}"
    result.finished_at = now_iso()
    if isinstance(err, CardbenchError):
        err.partial = result
    if err is cause:
        raise cause
    raise err from None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        pass


def _remove_all(files: list[str]) -> int:
    """Remove test files (best effort); returns how many are still there."""
    left = 0
    for f in files:
        _unlink(f)
        left += os.path.lexists(f)
    return left


def _remove(path: str) -> None:
    """Remove a test file that was read back; a file that cannot be removed (the filesystem went
    read-only midway) is a fault of the run, never a silent leftover."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        from cardbench.engine.errors import io_error
        err = io_error(e, path)
        raise type(err)(f"{err}: cannot remove this test file; the next `cardbench run` on this "
                        "filesystem removes it") from None


def _lock(target: DirTarget):
    """The target's lock (another cardbench on the same filesystem refuses)."""
    from cardbench.devices.lock import lock_key, target_lock
    # the card, not the directory: two runs in two folders of one card, or a raw test of the
    # device under it, would measure over each other
    key = lock_key(target.device) if target.device else f"fs-{os.stat(target.path).st_dev}"
    return target_lock(key, wait=False, label=target.path)


def run_directory(path: str, opts: RunOptions | None = None) -> Result:
    """Run seq_write and cold_read on a directory of a mounted card and return the result."""
    opts = opts or RunOptions()
    opts.validate()
    target = DirTarget.open(path)
    result = Result(target=target.to_dict(), card=opts.card, reader=opts.reader)
    if opts.label and not result.card.label:
        result.card.label = opts.label
    _identify(target, result)
    files: list[str] = []
    try:
        with _lock(target):
            removed = sweep_leftovers(target.path)
            if removed:
                result.warnings.append(f"removed {len(removed)} test file(s) left by an interrupted run")
            _run_tests(target, result, opts, files)
            _run_extra(target, result, opts)
    except BaseException as e:
        _mark_incomplete(result, opts.runs)
        left = _remove_all(files)   # before the message: it must say whether files stayed
        if isinstance(e, KeyboardInterrupt):
            err: BaseException = Interrupted("interrupted" + ("" if left else "; test files removed"))
        else:
            err = e
        if left and isinstance(err, CardbenchError):
            err.message = (f"{err.message}; {left} test file(s) could not be removed: the next "
                           "`cardbench run` on this filesystem removes them")
        _fail(result, err, e)
    finally:
        _remove_all(files)
    result.finished_at = now_iso()
    _check(result)
    return result


def _run_tests(target: DirTarget, result: Result, opts: RunOptions, files: list[str]) -> None:
    if opts.size is None:
        size, how = choose_size(target, result.id, opts)
    else:
        size, how = opts.size, {"auto": False}
        need = size * (opts.runs + opts.warmup)
        free = target.free_now()
        if need > free * FREE_SPACE_SHARE:
            raise TargetError(f"{target.path}: too little free space: {opts.runs + opts.warmup} files of "
                              f"{fmt_size(size)} need {fmt_size(need)}, {fmt_size(free)} free "
                              f"(at most {FREE_SPACE_SHARE:.0%} is used)")
    common = {"engine": opts.classic_engine, "file_bytes": size, "size_choice": how, "runs": opts.runs,
              "warmup_runs": opts.warmup, "filesystem": target.fstype, "data": "incompressible (PCG64 pool), "
              "each 512 B sector tagged with run and position"}
    wtest = TestResult(name="seq_write", method=dict(common))
    result.tests.append(wtest)
    written: list[tuple[str, Pattern, bool]] = []
    for i in range(opts.warmup + opts.runs):
        warm = i < opts.warmup
        path = target.test_file(result.id, f"w{i}")
        files.append(path)
        pattern = Pattern(_tag())
        label = "seq_write warm-up" if warm else f"seq_write run {i - opts.warmup + 1}/{opts.runs}"
        with opts.progress.task(label, size) as advance:
            run, method = write_file(path, size, pattern, block=opts.block, direct=opts.direct,
                                     engine=opts.classic_engine, progress=advance)
        wtest.method.update(method)
        (wtest.warmup if warm else wtest.runs).append(run)
        written.append((path, pattern, warm))
    rtest = TestResult(name="cold_read", method=dict(common))
    result.tests.append(rtest)
    bad_sectors = 0
    for n, (path, pattern, warm) in enumerate(written):
        label = "cold_read warm-up" if warm else f"cold_read run {n - opts.warmup + 1}/{opts.runs}"
        with opts.progress.task(label, size) as advance:
            run, method, counts = read_file(path, pattern, block=opts.block, direct=opts.direct,
                                            engine=opts.classic_engine, progress=advance)
        rtest.method.update({k: v for k, v in method.items() if k != "resident_fraction_before"})
        rtest.method.setdefault("resident_fraction_before", [])
        rtest.method["resident_fraction_before"].append(method["resident_fraction_before"])
        if method["resident_fraction_before"] > 0:
            rtest.warnings.append(f"{method['resident_fraction_before']:.0%} of a test file was still in the page "
                                  "cache before reading; O_DIRECT reads bypass it, but say so")
        (rtest.warmup if warm else rtest.runs).append(run)
        bad = sum(v for k, v in counts.items() if k != "ok")
        bad_sectors += bad
        if bad:
            lost = counts["zero"] + counts["foreign"] + counts["garbage"]
            rtest.warnings.append(
                f"{bad} of {bad + counts['ok']} sectors read back wrong in {'warm-up' if warm else 'run'} file "
                f"({lost} lost writes, {counts['overwritten']} overwritten by other positions, "
                f"{counts['changed']} changed): the card loses data")
        _remove(path)
    if bad_sectors:
        result.warnings.append(f"data integrity: {bad_sectors} sectors read back wrong; see cold_read warnings")


def wanted_extra_tests(opts: RunOptions) -> tuple[list[str], str | None]:
    """The extra tests to run, and why the app set was added (an A-class label), if it was."""
    names = list(opts.extra_tests)
    why = None
    if opts.label:
        from cardbench.verdicts.labels import parse_label
        if any(c.name in ("A1", "A2") for c in parse_label(opts.label)):
            missing = [n for n in PROFILES["app"] if n not in names]
            if missing:
                names += missing
                why = "the label claims an application performance class (A1/A2)"
    return names, why


def _run_extra(target: DirTarget, result: Result, opts: RunOptions) -> None:
    """Random/queued tests in one test area (a file of ours, removed after), then sustained_write."""
    names, why = wanted_extra_tests(opts)
    if names:
        from cardbench.workloads.random import open_area, run_pattern
        area_size = opts.area or min(APP_AREA, int(target.free_now() * 0.5) // MiB * MiB)
        if area_size < MiB:
            raise TargetError(f"{target.path}: too little free space for a random-I/O test area")
        with opts.progress.task("preparing the random-I/O test area", None):
            area = open_area(target.path, area_size, fill=True, write=True, allow_write=True)
        try:
            for name in names:
                engine = opts.extra_engine_for(name)
                with opts.progress.task(f"{name} ({engine})", None):
                    t = run_pattern(area, name, engine, runs=opts.runs, duration=opts.duration,
                                    warmup=opts.warmup, allow_write=True)
                if why and name in PROFILES["app"]:
                    t.method["why"] = why
                result.tests.append(t)
        finally:
            area.close()
    if opts.sustained:
        from cardbench.workloads.sustained import sustained_write
        with opts.progress.task("sustained_write over the free space", None):
            result.tests.append(sustained_write(target.path, allow_write=True))


def _identify(target: DirTarget, result: Result) -> None:
    """Fill card and reader identity from the block device under the directory, where known
    (a partition's parent device: the card). Nothing found is not an error: the user's names stand."""
    if not target.device:
        return
    from cardbench.devices.identity import identify
    try:
        identify(target.device, result.card, result.reader, result.target)
    except Interrupted:
        raise
    except (CardbenchError, OSError):
        pass


def _check(result: Result) -> None:
    """Plausibility, path ceilings and label verdicts (cardbench.verdicts)."""
    from cardbench.verdicts import check_result
    check_result(result, ssr=result.target.get("ssr_classes"))


# --- block devices --------------------------------------------------------------------------

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


def run_device(path: str, opts: DeviceOptions | None = None) -> Result:
    """raw_read (sampled over the whole device), raw_access (4 KiB random reads, QD1) and, only
    with ``destructive`` and the safety rules passed, raw_write (sampled like raw_read)."""
    from cardbench.devices import get_device
    from cardbench.devices.lock import lock_key, target_lock
    from cardbench.workloads import raw

    opts = opts or DeviceOptions()
    opts.validate()
    dev = get_device(path, whole_device=True)
    result = Result(target={"kind": "device", "path": dev.path, "size_bytes": dev.size,
                            "transport": dev.transport, "model": dev.model}, card=opts.card, reader=opts.reader)
    if opts.label and not result.card.label:
        result.card.label = opts.label
    _identify_device(dev, result)
    preserver = None
    try:
        if opts.destructive:
            from cardbench.devices.safety import check_destructive, confirm
            check_destructive(dev)
            confirm(dev, opts.confirm)
        with target_lock(lock_key(dev.path), wait=False, label=dev.path):
            sample = opts.sample or raw.auto_sample(dev.path, opts.positions)
            common = {"engine": "sync", "io": "O_DIRECT", "block_size": raw.BLOCK, "queue_depth": 1,
                      "positions": opts.positions, "sample_bytes": sample, "runs": opts.runs,
                      "warmup_runs": opts.warmup}
            rtest = TestResult(name="raw_read", method=dict(common))
            result.tests.append(rtest)
            for i in range(opts.warmup + opts.runs):
                with opts.progress.task(f"raw_read sweep {i + 1}/{opts.warmup + opts.runs}",
                                        sample * opts.positions) as adv:
                    run = raw.sampled_sweep(dev.path, "read", count=opts.positions, sample=sample, progress=adv)
                (rtest.warmup if i < opts.warmup else rtest.runs).append(run)
            atest = TestResult(name="raw_access", method={"engine": "sync", "io": "O_DIRECT", "block_size": 4096,
                                                         "queue_depth": 1, "pattern": "uniform random over the device",
                                                         "duration_s": opts.access_seconds, "runs": opts.runs})
            result.tests.append(atest)
            for i in range(opts.warmup + opts.runs):
                run = raw.random_access(dev.path, duration=opts.access_seconds)
                (atest.warmup if i < opts.warmup else atest.runs).append(run)
            if opts.destructive:
                wtest = TestResult(name="raw_write", method=dict(common, preserve=opts.preserve,
                                                                 sync="fsync after each sample"))
                result.tests.append(wtest)
                if opts.preserve:
                    from cardbench.devices.preserve import Preserver
                    preserver = Preserver(dev.path, opts.journal_dir)
                for i in range(opts.warmup + opts.runs):
                    with opts.progress.task(f"raw_write sweep {i + 1}/{opts.warmup + opts.runs}",
                                            sample * opts.positions) as adv:
                        run = raw.sampled_sweep(dev.path, "write", count=opts.positions, sample=sample,
                                                pattern=Pattern(_tag()), preserve=preserver, progress=adv)
                    (wtest.warmup if i < opts.warmup else wtest.runs).append(run)
    except BaseException as e:
        _mark_incomplete(result, opts.runs)
        err: BaseException = Interrupted("interrupted; the device was left as it was" if not preserver else
                                         "interrupted; preserved regions restored") \
            if isinstance(e, KeyboardInterrupt) else e
        # a failed write-back must not replace the error that stopped the run (nor lose its result)
        kept, _ = _restore_preserved(preserver)
        preserver = None
        if kept and isinstance(err, CardbenchError):
            err.message = f"{err.message.replace('; preserved regions restored', '')}; {kept}"
        _fail(result, err, e)
    finally:
        if preserver is not None:
            kept, signalled = _restore_preserved(preserver)
            if kept or signalled:
                result.complete = False
                fault = DeviceFault(kept) if kept else Interrupted("interrupted; preserved regions restored")
                _fail(result, fault, fault)
    result.finished_at = now_iso()
    _check(result)
    return result


def _restore_preserved(preserver) -> tuple[str | None, bool]:
    """Write the preserved regions back, with SIGINT/SIGTERM held meanwhile (a second Ctrl-C must
    not cut the write-back short). Returns (None when done, else one line saying what was kept;
    whether a signal came meanwhile)."""
    if preserver is None:
        return None, False
    from cardbench.signals import signals_held
    with signals_held() as signals:
        try:
            preserver.restore()
            kept = None
        except (CardbenchError, OSError) as e:
            journal = getattr(preserver, "path", None)
            preserver.close()
            why = e.message if isinstance(e, CardbenchError) else (e.strerror or str(e))
            kept = (f"writing the preserved regions back failed ({why}); they are kept in {journal} and written "
                    "back by the next cardbench command (or `cardbench recover`) once the card answers")
    return kept, bool(signals)


def _identify_device(dev, result: Result) -> None:
    from cardbench.devices.identity import identify
    identify(dev, result.card, result.reader, result.target)
