"""The classic test: ``seq_write`` and ``cold_read`` on a directory target, run by run.

Each run (one warm-up, then ``runs``) writes a fresh file (timed through fsync,
:func:`cardbench.workloads.files.write_file`), reads it back cold (every cache on the path
dropped, coldness proved, content verified: :mod:`cardbench.workloads.coldness`) and removes it
before the next, so a run needs one file's room. The size is the plan's
(:mod:`cardbench.plan`), or chosen here by probe files whose I/O this module does and whose
arithmetic the plan does (:func:`choose_size`).
"""

from __future__ import annotations

import os
from typing import cast

from cardbench.engine.errors import io_error, shown
from cardbench.errors import CardbenchError, DeviceFault
from cardbench.patterns import Pattern
from cardbench.plan import MIN_RUN_SECONDS, Plan, next_probe, size_from_probes
from cardbench.result import Result, Run, TestResult
from cardbench.session import new_tag
from cardbench.target import FAT_TYPES, DirTarget
from cardbench.verdicts.ceiling import ceilings_for, pick
from cardbench.workloads.coldness import ColdReads
from cardbench.workloads.files import read_file, write_file


def choose_size(target: DirTarget, run_id: str, opts, cap: int, cold: ColdReads | None = None) -> tuple[int, dict]:
    """Probe files, small and growing (cardbench.plan.next_probe), each written and read back
    cold; the size from their rates (cardbench.plan.size_from_probes), at most ``cap``. Returns
    (size, how it was chosen)."""
    probes: list[dict] = []
    while True:
        probe = next_probe(probes, cap)
        if probe is None:
            break
        path = target.test_file(run_id, f"probe{len(probes)}")
        try:
            pattern = Pattern(new_tag())
            w, _ = write_file(path, probe, pattern, block=min(opts.block, probe), direct=opts.direct,
                              engine=opts.classic_engine)
            if cold is not None:
                cold.drop(path)
            r, _, _ = read_file(path, pattern, block=min(opts.block, probe), direct=opts.direct,
                                engine=opts.classic_engine)
        finally:
            unlink_quietly(path)
        probes.append({"bytes": probe, "write_seconds": w.seconds, "read_seconds": r.seconds})
    return size_from_probes(probes, cap, target.free_now())


def run_classic(target: DirTarget, result: Result, opts, plan: Plan, files: list[str]) -> None:
    """seq_write and cold_read into ``result`` (``files``: the test files now on the card, for
    the caller's cleanup)."""
    cold = ColdReads.of(target, _path_ceiling(result))
    if plan.size is None:
        assert plan.auto_cap is not None     # make_plan caps every automatic size
        size, how = choose_size(target, result.id, opts, plan.auto_cap, cold)
        if how.get("short"):
            result.warnings.append(how["short"])
    else:
        size, how = plan.size, {"auto": False}
        result.warnings.extend(plan.warnings)
    common = {"engine": opts.classic_engine, "file_bytes": size, "size_choice": how, "runs": opts.runs,
              "warmup_runs": opts.warmup, "filesystem": target.filesystem.describe(),
              "order": "each run: write its file, read it back cold, remove it (one file's room)",
              "data": "unique per write: incompressible (PCG64 pool), each 512 B sector tagged with run and "
                      "position, each position written once per run", **plan.notes}
    wtest = TestResult(name="seq_write", method=dict(common))
    rtest = TestResult(name="cold_read", method=dict(common))
    result.tests += [wtest, rtest]
    direct_note = _direct_note(target)
    bad_sectors = 0
    for i in range(opts.warmup + opts.runs):
        warm = i < opts.warmup
        which = "warm-up" if warm else f"run {i - opts.warmup + 1}/{opts.runs}"
        moved = target.moved()
        if moved:     # a card unmounted midway: its test files would land on the filesystem below
            raise DeviceFault(f"{shown(target.path)}: {moved}")
        path = target.test_file(result.id, f"w{i}")
        files.append(path)
        pattern = Pattern(new_tag())
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
        got, is_cold, resident = cold.read(path, read_once)
        # what read_once returned (ColdReads.read hands it back as an object)
        run, method, counts = cast(tuple[Run, dict, dict[str, int]], got)
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
        remove_test_file(path)
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
    """What O_DIRECT means on this filesystem when it is not plain (the kernel's source, and
    measured on a booted 6.1 kernel: docs/testing.md)."""
    if target.fstype in FAT_TYPES or target.fstype == "exfat":
        return (f" (the kernel's {target.fstype} driver writes a request that extends the file buffered and "
                "flushes it before the call returns: fs/fat/inode.c, fs/exfat/inode.c direct_IO)")
    return ""


def _short_runs(test: TestResult) -> str | None:
    """A warning for runs shorter than MIN_RUN_SECONDS, or None."""
    short = [r.seconds for r in test.runs if r.seconds < MIN_RUN_SECONDS]
    if not short:
        return None
    return (f"{test.name}: {len(short)} of {len(test.runs)} runs lasted less than {MIN_RUN_SECONDS:g} s (shortest "
            f"{min(short):.3f} s): too short to time well; use a larger --size")


def _path_ceiling(result: Result) -> float | None:
    """The physical read ceiling of the path (USB link, SD bus), where known."""
    try:
        c = pick(ceilings_for(result), "cold_read", "read")
    except (CardbenchError, ValueError, KeyError, TypeError):
        return None
    return c.physical_bytes_per_s if c is not None else None


def unlink_quietly(path: str) -> None:
    """Remove a file if it is there (best effort)."""
    try:
        os.unlink(path)
    except OSError:
        pass


def remove_test_file(path: str) -> None:
    """Remove a test file that was read back; a file that cannot be removed (the filesystem went
    read-only midway) is a fault of the run, never a silent leftover."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        err = io_error(e, path)
        raise type(err)(f"{err}: cannot remove this test file; the next `cardbench run` on this "
                        "filesystem removes it") from None
