"""The classic card test on a directory: ``run_directory(path, RunOptions(...)) -> Result``.

Order: check the target, take its lock, remove files a killed run left, choose the size (one
file's room: free space less 1% + 1 MiB), then per run (one warm-up, then ``runs``): write a
fresh file (``seq_write``, timed through fsync), read it back cold (``cold_read``: every cache on
the path dropped, coldness proved, content verified; workloads.coldness), remove it. Then
plausibility checks; every test file removed, also on error, Ctrl-C and SIGTERM. On failure the exception
carries the partial result (``exc.result``, ``complete=False``) so it can be stored as such.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from cardbench.errors import CardbenchError, DeviceFault, Interrupted, TargetError, UsageError
from cardbench.patterns import Pattern
from cardbench.progress import NullProgress, ProgressReporter, set_total, timed_task
from cardbench.result import Card, Reader, Result, TestResult, now_iso
from cardbench.target import DirTarget, sweep_leftovers
from cardbench.units import MiB, fmt_size
from cardbench.workloads.coldness import ColdReads, filesystem_on, is_fuse
from cardbench.workloads.files import BLOCK, read_file, write_file

#: the automatic size: a write run should last about this long, and a read run at least
#: READ_RUN_SECONDS (a card reads faster than it writes; both must time well)
TARGET_RUN_SECONDS = 3.0
READ_RUN_SECONDS = 1.0
#: a run shorter than this is too short to time well (timer, request and cache granularity): warned
#: about, and the automatic size never makes one where the free space allows a longer one
MIN_RUN_SECONDS = 0.5
#: the automatic size probes until a probe write and read each last this long
PROBE_RUN_SECONDS = 0.25
MIN_AUTO_SIZE = 1 * MiB
MAX_AUTO_SIZE = 1024 * MiB
#: room kept free beside the one test file a run needs: 1% of the file plus 1 MiB. The file
#: needs more room than its bytes: ext2/3 indirect blocks (0.1% with 4 KiB blocks, 0.4% with
#: the 1 KiB blocks mkfs gives a small card), ext4 extent blocks, FAT/exFAT cluster rounding
#: (at most one 32 KiB cluster), a journal commit; reserved blocks (ext's 5% for root) are
#: already outside the free space counted (f_bavail).
FIT_SHARE = 0.01
FIT_SLACK = 1 * MiB
#: FAT32's largest file: 4 GiB - 1 byte (Documentation/filesystems/vfat.rst, fs/fat: i_size is
#: 32 bits); a larger --size is capped to the largest whole MiB below it
FAT_FILE_LIMIT = 4 * 1024 * MiB - 1
FAT_TYPES = ("vfat", "msdos", "fat", "umsdos")

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


def room_needed(size: int) -> int:
    """Free space one test file of ``size`` bytes needs (its bytes plus the margin FIT_SHARE/FIT_SLACK)."""
    return size + int(size * FIT_SHARE) + FIT_SLACK


def largest_fit(free: int) -> int:
    """The largest test file that fits in ``free`` bytes of free space (see room_needed)."""
    return max(0, int((free - FIT_SLACK) / (1 + FIT_SHARE)))


def file_limit(target: DirTarget) -> tuple[int | None, str | None]:
    """The filesystem's largest file, where it is small enough to matter: FAT32's 4 GiB - 1 B
    (the kernel's vfat/msdos, or a FAT under FUSE); (None, None) elsewhere."""
    fs = target.fstype or ""
    if fs in FAT_TYPES or (is_fuse(fs) and target.device and filesystem_on(target.device) == "vfat"):
        return FAT_FILE_LIMIT, "FAT32"
    return None, None


def _statfs_unimplemented(path: str) -> bool:
    """A filesystem that reports no blocks at all (some FUSE drivers do not implement statfs)."""
    vfs = os.statvfs(path)
    return vfs.f_blocks == 0


def _too_little_room(target: DirTarget, size: int, free: int) -> TargetError:
    fit = largest_fit(free)
    largest = f"the largest test file that fits is {fmt_size(fit)}" if fit >= 4096 else "no test file fits"
    return TargetError(f"{target.path}: too little free space for a {fmt_size(size)} test file: {fmt_size(free)} "
                       f"free, {largest} (1% + 1 MiB is kept for the filesystem's own blocks)")


def check_size(target: DirTarget, size: int) -> dict:
    """Check an explicit --size against the free space (one file's room: every run writes,
    reads and removes its file before the next) and the filesystem's file limit; returns what the
    method records about the size (a cap, an unknown free space). Raises TargetError."""
    note: dict = {}
    free = target.free_now()
    if free == 0 and _statfs_unimplemented(target.path):
        note["free_space"] = "unknown: the filesystem reports 0 bytes free (its driver does not implement statfs)"
    elif room_needed(size) > free:
        raise _too_little_room(target, size, free)
    return note


def cap_size(target: DirTarget, size: int) -> tuple[int, str | None]:
    """``size`` capped by the filesystem's file limit (FAT32); returns (size, what was done or None)."""
    limit, name = file_limit(target)
    if limit is None or size <= limit:
        return size, None
    capped = limit // MiB * MiB
    return capped, (f"{name} holds files up to 4 GiB - 1 B: each test file capped to {fmt_size(capped)} "
                    f"instead of {fmt_size(size)}")


def choose_size(target: DirTarget, run_id: str, opts: RunOptions, cold: "ColdReads | None" = None) -> tuple[int, dict]:
    """Start small and grow until a probe write and its cold read each last PROBE_RUN_SECONDS;
    size one run so that a write lasts ~TARGET_RUN_SECONDS and a read at least READ_RUN_SECONDS,
    capped by one file's room in the free space (never more: every run removes its file before
    the next). Returns (size, how it was chosen)."""
    free = target.free_now()
    if free == 0 and _statfs_unimplemented(target.path):
        raise TargetError(f"{target.path}: the filesystem reports 0 bytes free (its driver may not implement "
                          "statfs), so no size can be chosen: give one with --size")
    cap = min(largest_fit(free) // MiB * MiB, MAX_AUTO_SIZE)
    limit, _ = file_limit(target)
    if limit is not None:
        cap = min(cap, limit // MiB * MiB)
    if cap < MIN_AUTO_SIZE:
        raise TargetError(f"{target.path}: too little free space ({fmt_size(free)}) for a test file of at least "
                          f"{fmt_size(MIN_AUTO_SIZE)} (1% + 1 MiB is kept for the filesystem's own blocks)")
    probe = MIN_AUTO_SIZE
    probes = []
    while True:
        path = target.test_file(run_id, f"probe{len(probes)}")
        try:
            pattern = Pattern(_tag())
            w, _ = write_file(path, probe, pattern, block=min(opts.block, probe), direct=opts.direct,
                              engine=opts.classic_engine)
            if cold is not None:
                cold.drop(path)
            r, _, _ = read_file(path, pattern, block=min(opts.block, probe), direct=opts.direct,
                                engine=opts.classic_engine)
        finally:
            _unlink(path)
        probes.append({"bytes": probe, "write_seconds": w.seconds, "read_seconds": r.seconds})
        if min(w.seconds, r.seconds) >= PROBE_RUN_SECONDS or probe >= cap:
            break
        probe = min(probe * 4, cap)
    size = int(max(w.bytes_per_s * TARGET_RUN_SECONDS, r.bytes_per_s * READ_RUN_SECONDS)) // MiB * MiB
    size = max(MIN_AUTO_SIZE, min(size, cap))
    how = {"auto": True, "probes": probes, "target_seconds": TARGET_RUN_SECONDS,
           "read_target_seconds": READ_RUN_SECONDS, "largest_fit": cap}
    shortest = min(size / w.bytes_per_s, size / r.bytes_per_s)
    if shortest < MIN_RUN_SECONDS:
        how["short"] = (f"the free space ({fmt_size(free)}) holds a test file of {fmt_size(size)} at most, which this "
                        f"card moves in about {shortest:.2f} s: shorter than {MIN_RUN_SECONDS:g} s to time well; free "
                        "some space on the card for a better figure")
    return size, how


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


def _short_runs(test: TestResult) -> str | None:
    """A warning for runs shorter than MIN_RUN_SECONDS, or None."""
    short = [r.seconds for r in test.runs if r.seconds < MIN_RUN_SECONDS]
    if not short:
        return None
    return (f"{test.name}: {len(short)} of {len(test.runs)} runs lasted less than {MIN_RUN_SECONDS:g} s (shortest "
            f"{min(short):.3f} s): too short to time well; use a larger --size")


def _path_ceiling(result: Result) -> float | None:
    """The physical read ceiling of the path (USB link, SD bus), where known."""
    from cardbench.verdicts.ceiling import ceilings_for, pick
    try:
        c = pick(ceilings_for(result), "cold_read", "read")
    except (CardbenchError, ValueError, KeyError, TypeError):
        return None
    return c.physical_bytes_per_s if c is not None else None


def _run_tests(target: DirTarget, result: Result, opts: RunOptions, files: list[str]) -> None:
    """seq_write and cold_read: each run writes its own file, reads it back cold (proved cold,
    workloads.coldness) and removes it before the next run, so a run needs one file's room."""
    cold = ColdReads(device=target.device, fstype=target.fstype, ceiling=_path_ceiling(result))
    notes: dict = {}
    if opts.size is None:
        size, how = choose_size(target, result.id, opts, cold)
        if how.get("short"):
            result.warnings.append(how["short"])
    else:
        size, how = opts.size, {"auto": False}
        size, capped = cap_size(target, size)
        if capped:
            notes["size_cap"] = capped
            result.warnings.append(capped)
        notes.update(check_size(target, size))
    common = {"engine": opts.classic_engine, "file_bytes": size, "size_choice": how, "runs": opts.runs,
              "warmup_runs": opts.warmup, "filesystem": target.fstype,
              "order": "each run: write its file, read it back cold, remove it (one file's room)",
              "data": "incompressible (PCG64 pool), each 512 B sector tagged with run and position", **notes}
    if is_fuse(target.fstype) and target.device:
        on = filesystem_on(target.device)
        if on:
            common["filesystem"] = f"{on} (FUSE: {target.fstype})"
    wtest = TestResult(name="seq_write", method=dict(common))
    rtest = TestResult(name="cold_read", method=dict(common))
    result.tests += [wtest, rtest]
    direct_note = _direct_note(target)
    bad_sectors = 0
    for i in range(opts.warmup + opts.runs):
        warm = i < opts.warmup
        which = "warm-up" if warm else f"run {i - opts.warmup + 1}/{opts.runs}"
        path = target.test_file(result.id, f"w{i}")
        files.append(path)
        pattern = Pattern(_tag())
        with opts.progress.task(f"seq_write {which}", size) as advance:
            run, method = write_file(path, size, pattern, block=opts.block, direct=opts.direct,
                                     engine=opts.classic_engine, progress=advance)
        if direct_note and method["io"].startswith("O_DIRECT"):
            method["io"] = method["io"] + direct_note
        wtest.method.update(method)
        (wtest.warmup if warm else wtest.runs).append(run)

        def read_once(path=path, pattern=pattern, which=which, tries=[]):  # noqa: B006 - one list per run
            label = f"cold_read {which}" + (" again, every cache dropped" if tries else "")
            tries.append(1)
            with opts.progress.task(label, size) as adv:
                got = read_file(path, pattern, block=opts.block, direct=opts.direct,
                                engine=opts.classic_engine, progress=adv)
            return got[0].bytes_per_s, got
        (run, method, counts), is_cold, resident = cold.read(path, read_once)
        method = dict(method, resident_fraction_before=resident)
        rtest.method.update({k: v for k, v in method.items() if k != "resident_fraction_before"})
        rtest.method.setdefault("resident_fraction_before", [])
        rtest.method["resident_fraction_before"].append(resident)
        if resident > 0:
            rtest.warnings.append(f"{resident:.0%} of a test file was still in the page "
                                  "cache before reading; O_DIRECT reads bypass it, but say so")
        if is_cold:
            (rtest.warmup if warm else rtest.runs).append(run)
        else:
            rtest.extra.setdefault("cached_runs", []).append(run.to_dict())
        bad = sum(v for k, v in counts.items() if k != "ok")
        bad_sectors += bad
        if bad:
            lost = counts["zero"] + counts["foreign"] + counts["garbage"]
            rtest.warnings.append(
                f"{bad} of {bad + counts['ok']} sectors read back wrong in {'warm-up' if warm else 'run'} file "
                f"({lost} lost writes, {counts['overwritten']} overwritten by other positions, "
                f"{counts['changed']} changed): the card loses data")
        _remove(path)
        files.remove(path)
    rtest.method.update(cold.method())
    rtest.warnings += [w for w in cold.warnings() if w not in rtest.warnings]
    if not rtest.runs:
        rtest.complete = False
    for t in (wtest, rtest):
        short = _short_runs(t)
        if short:
            t.warnings.append(short)
    if bad_sectors:
        result.warnings.append(f"data integrity: {bad_sectors} sectors read back wrong; see cold_read warnings")


def _direct_note(target: DirTarget) -> str:
    """What O_DIRECT means on this filesystem when it is not plain (by the kernel's source and
    documentation; not measured here: this machine's kernel has no vfat or exfat)."""
    if target.fstype in FAT_TYPES or target.fstype == "exfat":
        return (f" (the kernel's {target.fstype} driver writes a request that extends the file buffered and "
                "flushes it before the call returns: fs/fat/inode.c, fs/exfat/inode.c direct_IO)")
    return ""


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
        # filled at about the rate seq_write just measured: that is the time shown
        written = result.test("seq_write")
        rate = written.median_bytes_per_s if written is not None else None
        with timed_task(opts.progress, "preparing the random-I/O area", area_size / rate if rate else 0):
            area = open_area(target.path, area_size, fill=True, write=True, allow_write=True)
        try:
            for name in names:
                engine = opts.extra_engine_for(name)
                with timed_task(opts.progress, f"{name} ({engine})", opts.duration * (opts.runs + opts.warmup)):
                    t = run_pattern(area, name, engine, runs=opts.runs, duration=opts.duration,
                                    warmup=opts.warmup, allow_write=True)
                if why and name in PROFILES["app"]:
                    t.method["why"] = why
                result.tests.append(t)
        finally:
            area.close()
    if opts.sustained:
        from cardbench.workloads.sustained import sustained_write
        with opts.progress.task("sustained_write", None) as advance:
            done = [0]

            def on_slice(written: int, total: int, rate: float) -> None:
                set_total(advance, total)
                advance(written - done[0])
                done[0] = written
            result.tests.append(sustained_write(target.path, allow_write=True, progress=on_slice))


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
    if not os.access(dev.path, os.R_OK):
        raise TargetError(f"cannot open {dev.path}: permission denied (raw device tests need root)")
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
