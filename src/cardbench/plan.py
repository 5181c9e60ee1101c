"""The plan: what a run does on a target, as data. ``make_plan(target, opts) -> Plan``.

A pure module: it reads only what the target reports (:meth:`cardbench.target.Target.space`,
its ``filesystem`` and its largest file) and the options, and does no I/O of its own, so its
rules are tested in milliseconds on target models (:func:`cardbench.target.target_model`):

* **sizing** of the classic test's file (``seq_write``/``cold_read``): one file's room is the free
  space less 1% and 1 MiB (:func:`largest_fit`), at most the filesystem's largest file (FAT32:
  4 GiB - 1 B); an explicit ``--size`` is capped to that and checked against the room
  (:func:`check_size`); an automatic one lies between MIN_AUTO_SIZE and :func:`auto_cap`, grown
  by probes (:func:`next_probe`; the probing I/O is the runner's) and chosen from their rates
  (:func:`size_from_probes`);
* **profiles** (:data:`PROFILES`) and the tests a label adds (A1/A2: the app set,
  :func:`wanted_extra_tests`);
* **engines** per test (:func:`extra_engine`: a queue depth the engine asked for cannot keep
  moves to queued);
* **area sizes**: the random-I/O area (:func:`area_size`) and the sustained-write file
  (:func:`sustained_size`), both capped by the free space and by the largest file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cardbench.engine.errors import shown
from cardbench.engine.registry import engine_info
from cardbench.errors import TargetError, UsageError
from cardbench.target import FAT_FILE_LIMIT, FAT_TYPES, Target, default_margin
from cardbench.units import KiB, MiB, block_label, fmt_size
from cardbench.verdicts.labels import parse_label

__all__ = ["APP_AREA", "FAT_FILE_LIMIT", "FAT_TYPES", "PROFILES", "Plan", "PlanJob", "area_size", "auto_cap",
           "cap_size", "check_size", "extra_engine", "file_limit", "largest_fit", "make_plan", "next_probe",
           "room_needed", "size_for_rates", "size_from_probes", "sustained_size", "wanted_extra_tests"]

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
#: the sustained write's chunk (workloads.sustained.DEFAULT_CHUNK): its file is whole chunks
SUSTAINED_CHUNK = 4 * MiB


# --- sizing --------------------------------------------------------------------------------

# --- test names: a pattern test is named by what it does (parse_pattern) ----------------------

MAX_THREADS = 64
MAX_DEPTH = 256

_NAME_RE = re.compile(r"^(seq|rand)_(read|write)_([0-9]+)([km]?)_q([0-9]+)t([0-9]+)$")


@dataclass(frozen=True)
class PatternSpec:
    """What a pattern name says."""

    name: str
    sequential: bool
    op: str              # "read" | "write"
    block_size: int      # bytes
    queue_depth: int
    threads: int

    @property
    def fio_rw(self) -> str:
        return ("" if self.sequential else "rand") + self.op

    @property
    def is_write(self) -> bool:
        return self.op == "write"


def parse_pattern(name: str) -> PatternSpec:
    """Parse ``{seq|rand}_{read|write}_{block}_q{depth}t{threads}``.

    Block sizes: a number of bytes, or with ``k`` (KiB) or ``m`` (MiB): ``4k``, ``128k``, ``1m``,
    ``512``; a multiple of 512 bytes, at most 64 MiB. Depth 1..256, threads 1..64.
    """
    if not isinstance(name, str):
        raise UsageError(f"a test name is a string like rand_read_4k_q32t1, got {name!r}")
    m = _NAME_RE.match(name.strip().lower())
    if not m:
        raise UsageError(
            f"bad test name {name!r}: expected {{seq|rand}}_{{read|write}}_{{block}}_q{{depth}}t{{threads}}, "
            "e.g. rand_read_4k_q32t1 or seq_write_1m_q8t1")
    kind, op, num, unit, depth, threads = m.groups()
    bs = int(num) * {"": 1, "k": KiB, "m": MiB}[unit]
    if bs < 512 or bs % 512 or bs > 64 * MiB:
        raise UsageError(f"bad test name {name!r}: the block size must be a multiple of 512 B up to 64 MiB")
    q, t = int(depth), int(threads)
    if not 1 <= q <= MAX_DEPTH:
        raise UsageError(f"bad test name {name!r}: queue depth must be 1..{MAX_DEPTH}")
    if not 1 <= t <= MAX_THREADS:
        raise UsageError(f"bad test name {name!r}: threads must be 1..{MAX_THREADS}")
    return PatternSpec(name=m.group(0), sequential=kind == "seq", op=op, block_size=bs, queue_depth=q, threads=t)


def pattern_name(sequential: bool, op: str, block_size: int, queue_depth: int, threads: int = 1) -> str:
    """The name of a pattern (inverse of :func:`parse_pattern`)."""
    b = block_label(block_size)
    return f"{'seq' if sequential else 'rand'}_{op}_{b}_q{queue_depth}t{threads}"



def room_needed(size: int) -> int:
    """Free space one test file of ``size`` bytes needs (its bytes plus the margin FIT_SHARE/FIT_SLACK)."""
    return size + int(size * FIT_SHARE) + FIT_SLACK


def largest_fit(free: int) -> int:
    """The largest test file that fits in ``free`` bytes of free space (see room_needed)."""
    return max(0, int((free - FIT_SLACK) / (1 + FIT_SHARE)))


def file_limit(target: Target) -> tuple[int | None, str | None]:
    """The filesystem's largest file, where it is small enough to matter: FAT32's 4 GiB - 1 B
    (the kernel's vfat/msdos, or a FAT under FUSE); (None, None) elsewhere."""
    fs = target.filesystem
    if fs is None or fs.largest_file is None:
        return None, None
    return fs.largest_file, fs.limit_name


def _free_unknown(space) -> bool:
    """A filesystem that reports no blocks at all (some FUSE drivers do not implement statfs)."""
    return space.free == 0 and not space.reported


def _too_little_room(target: Target, size: int, free: int) -> TargetError:
    fit = largest_fit(free)
    largest = f"the largest test file that fits is {fmt_size(fit)}" if fit >= 4096 else "no test file fits"
    return TargetError(f"{shown(target.path)}: too little free space for a {fmt_size(size)} test file: "
                       f"{fmt_size(free)} free, {largest} (1% + 1 MiB is kept for the filesystem's own blocks)")


def check_size(target: Target, size: int) -> dict:
    """Check an explicit --size against the free space (one file's room: every run writes,
    reads and removes its file before the next); returns what the method records about the size
    (an unknown free space). Raises TargetError."""
    note: dict = {}
    space = target.space()
    free = space.free
    if _free_unknown(space):
        note["free_space"] = "unknown: the filesystem reports 0 bytes free (its driver does not implement statfs)"
    elif room_needed(size) > free:
        raise _too_little_room(target, size, free)
    return note


def cap_size(target: Target, size: int) -> tuple[int, str | None]:
    """``size`` capped by the filesystem's file limit (FAT32); returns (size, what was done or None)."""
    limit, name = file_limit(target)
    if limit is None or size <= limit:
        return size, None
    capped = limit // MiB * MiB
    return capped, (f"{name} holds files up to 4 GiB - 1 B: each test file capped to {fmt_size(capped)} "
                    f"instead of {fmt_size(size)}")


def auto_cap(target: Target) -> int:
    """The largest automatic test file: one file's room, at most MAX_AUTO_SIZE and the largest
    file, whole MiB. TargetError where the free space is unknown or too small."""
    space = target.space()
    free = space.free
    if _free_unknown(space):
        raise TargetError(f"{shown(target.path)}: the filesystem reports 0 bytes free (its driver may not implement "
                          "statfs), so no size can be chosen: give one with --size")
    cap = min(largest_fit(free) // MiB * MiB, MAX_AUTO_SIZE)
    limit, _ = file_limit(target)
    if limit is not None:
        cap = min(cap, limit // MiB * MiB)
    if cap < MIN_AUTO_SIZE:
        raise TargetError(f"{shown(target.path)}: too little free space ({fmt_size(free)}) for a test file of at "
                          f"least {fmt_size(MIN_AUTO_SIZE)} (1% + 1 MiB is kept for the filesystem's own blocks)")
    return cap


def next_probe(probes: list[dict], cap: int) -> int | None:
    """The size of the next probe file (``probes``: those done, each with bytes, write_seconds
    and read_seconds), or None when done: the first is MIN_AUTO_SIZE, each next 4x, until a
    write and its read each last PROBE_RUN_SECONDS or the cap is reached."""
    if not probes:
        return min(MIN_AUTO_SIZE, cap)
    last = probes[-1]
    if min(last["write_seconds"], last["read_seconds"]) >= PROBE_RUN_SECONDS or last["bytes"] >= cap:
        return None
    return min(last["bytes"] * 4, cap)


def size_for_rates(write_bps: float, read_bps: float, cap: int, *, write_seconds: float = TARGET_RUN_SECONDS,
                   read_seconds: float = READ_RUN_SECONDS) -> int:
    """The test file for a card that writes ``write_bps`` and reads ``read_bps`` (bytes/s): a write
    run lasts about ``write_seconds`` and a read run at least ``read_seconds``; whole MiB, within
    [MIN_AUTO_SIZE, cap]. The automatic size (:func:`size_from_probes`) with the probes' rates; the
    demo with the rates its emulated cards are set to."""
    size = int(max(write_bps * write_seconds, read_bps * read_seconds)) // MiB * MiB
    return max(MIN_AUTO_SIZE, min(size, cap))


def size_from_probes(probes: list[dict], cap: int, free: int) -> tuple[int, dict]:
    """The automatic size from the last probe: a write lasts ~TARGET_RUN_SECONDS and a read at
    least READ_RUN_SECONDS, within [MIN_AUTO_SIZE, cap]. Returns (size, how it was chosen)."""
    last = probes[-1]
    w_rate = last["bytes"] / last["write_seconds"]
    r_rate = last["bytes"] / last["read_seconds"]
    size = size_for_rates(w_rate, r_rate, cap)
    how = {"auto": True, "probes": probes, "target_seconds": TARGET_RUN_SECONDS,
           "read_target_seconds": READ_RUN_SECONDS, "largest_fit": cap}
    shortest = min(size / w_rate, size / r_rate)
    if shortest < MIN_RUN_SECONDS:
        how["short"] = (f"the free space ({fmt_size(free)}) holds a test file of {fmt_size(size)} at most, which this "
                        f"card moves in about {shortest:.2f} s: shorter than {MIN_RUN_SECONDS:g} s to time well; free "
                        "some space on the card for a better figure")
    return size, how


# --- tests and engines ---------------------------------------------------------------------

def wanted_extra_tests(extra_tests: list[str], label: str | None) -> tuple[list[str], str | None]:
    """The extra tests to run, and why the app set was added (an A-class label), if it was."""
    names = list(extra_tests)
    why = None
    if label:
        if any(c.name in ("A1", "A2") for c in parse_label(label)):
            missing = [n for n in PROFILES["app"] if n not in names]
            if missing:
                names += missing
                why = "the label claims an application performance class (A1/A2)"
    return names, why


def extra_engine(name: str, engine: str | None) -> str:
    """The engine of the extra test ``name``: ``engine`` (default queued) where it can keep the
    test's queue depth in flight, else queued."""
    chosen = engine or "queued"
    if parse_pattern(name).queue_depth > engine_info(chosen).caps.max_queue_depth:
        chosen = "queued"
    return chosen


# --- areas ---------------------------------------------------------------------------------

def area_size(target: Target, wanted: int | None) -> int:
    """The random-I/O test area: ``wanted`` (default APP_AREA, at most half the free space),
    at most one file's room (largest_fit) and the largest file, whole MiB. TargetError if less
    than 1 MiB is left."""
    free = target.free_now()
    size = wanted if wanted is not None else min(APP_AREA, int(free * 0.5))
    size = min(size, largest_fit(free))
    limit, _ = file_limit(target)
    if limit is not None:
        size = min(size, limit)
    size = size // MiB * MiB
    if size < MiB:
        raise TargetError(f"{shown(target.path)}: too little free space for a random-I/O test area")
    return size


def sustained_size(target: Target, total_bytes: int | None = None, *, margin: int | None = None,
                   chunk: int = SUSTAINED_CHUNK) -> tuple[int, list[str]]:
    """Bytes the sustained write writes into one file on a directory target: the free space
    less the margin (default_margin), at most ``total_bytes`` and the largest file, whole
    chunks. Returns (bytes, warnings); TargetError if less than one chunk fits."""
    warnings: list[str] = []
    free = target.free_now()
    m = default_margin(free) if margin is None else margin
    avail = free - m
    total = avail if total_bytes is None else min(total_bytes, avail)
    if total_bytes is not None and total_bytes > avail:
        warnings.append(f"only {avail} B free beyond the {m} B margin; wrote that much")
    limit, name = file_limit(target)
    if limit is not None and total > limit:
        total = limit
        warnings.append(f"{name} holds files up to 4 GiB - 1 B: the sustained write's file was capped to "
                        f"{fmt_size(limit // chunk * chunk)} of the {fmt_size(free)} free")
    total -= total % chunk
    if total < chunk:
        raise TargetError(f"{shown(target.path)}: too little free space for a sustained write ({free} B free)")
    return total, warnings


# --- the plan ------------------------------------------------------------------------------

@dataclass
class PlanJob:
    """One test of the plan: its ``name``, ``engine`` and the bytes it writes into one file
    (``bytes``: exact, or with ``auto`` the most the automatic size may choose; None for a test
    that writes no file of its own), and ``why`` it was added where a rule added it."""

    name: str
    engine: str
    bytes: int | None = None
    auto: bool = False
    why: str | None = None

    @property
    def writes(self) -> bool:
        return self.name == "seq_write" or self.name == "sustained_write" or "_write_" in self.name


@dataclass
class Plan:
    """What a run does: ``jobs`` in order, the classic size (None: chosen by probes up to
    ``auto_cap``), the random-I/O ``area`` (None without extra tests), and the notes and
    warnings the sizing made (they go into the result's method and warnings)."""

    jobs: list[PlanJob]
    size: int | None
    auto_cap: int | None
    area: int | None
    notes: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    why_app: str | None = None

    def to_dict(self) -> dict:
        """The plan as `run --plan --json` prints it: each job with the bytes of the one file it
        writes (``writes``), the classic size (None: automatic, at most ``auto_cap``), the area,
        the sizing notes and warnings."""
        return {"jobs": [{"name": j.name, "engine": j.engine, "bytes": j.bytes, "auto": j.auto, "writes": j.writes,
                          "why": j.why} for j in self.jobs],
                "size": self.size, "auto_cap": self.auto_cap, "area": self.area, "notes": dict(self.notes),
                "warnings": list(self.warnings), "why_app": self.why_app}

    def job(self, name: str) -> PlanJob | None:
        return next((j for j in self.jobs if j.name == name), None)

    @property
    def extra(self) -> list[PlanJob]:
        """The pattern tests (after seq_write and cold_read, before sustained_write)."""
        return [j for j in self.jobs if j.name not in ("seq_write", "cold_read", "sustained_write")]


def make_plan(target: Target, opts) -> Plan:
    """The plan of ``run`` on a directory ``target`` with ``opts`` (a
    :class:`cardbench.runner.RunOptions`). Raises TargetError where the target cannot hold it."""
    if not target.is_directory:
        raise UsageError(f"{shown(target.path)}: the file tests need a directory on the mounted card")
    classic = opts.engine or "sync"
    notes: dict = {}
    warnings: list[str] = []
    if opts.size is None:
        size, cap = None, auto_cap(target)
    else:
        size, capped = cap_size(target, opts.size)
        if capped:
            notes["size_cap"] = capped
            warnings.append(capped)
        notes.update(check_size(target, size))
        cap = None
    jobs = [PlanJob("seq_write", classic, size if size is not None else cap, auto=size is None),
            PlanJob("cold_read", classic)]
    names, why = wanted_extra_tests(opts.extra_tests, opts.label)
    area = area_size(target, opts.area) if names else None
    for name in names:
        jobs.append(PlanJob(name, extra_engine(name, opts.engine), area,
                            why=why if why and name in PROFILES["app"] else None))
    if opts.sustained:
        total, _ = sustained_size(target)
        jobs.append(PlanJob("sustained_write", "sync", total))
    return Plan(jobs=jobs, size=size, auto_cap=cap, area=area, notes=notes, warnings=warnings, why_app=why)
