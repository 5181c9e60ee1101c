#!/usr/bin/env python3
"""cardbench's engines against fio, same targets, same parameters, same run; prints ratios.

Targets (all made here and removed afterwards, also on Ctrl-C):
  file   a file on this machine's disk (default /var/tmp), opened with O_DIRECT
  loop   a loop device over a file in the same directory, ``losetup --direct-io=on`` (needs root)
  emu    a fast emulated card (cardbench.emulate, 256 MiB at 10 GB/s: as fast as its Python
         server goes; needs root and /dev/fuse): what a card that cannot cheat sees

Cases and goals (cardbench / fio, bytes/s):
  seq 1 MiB read, QD8 and QD1             >= 0.98
  rand 4 KiB QD1 read                     >= 0.95
  rand 4 KiB QD32 read                    >= 0.90
  the matrix's writes (seq 1 MiB QD8 and QD1, rand 4 KiB QD1 and QD32)
                                          >= 1.00 against fio --refill_buffers
Writes: every write cardbench makes carries data unique to it (cardbench.patterns.FreshWrites,
made just before it goes out), so the fio it is held against makes fresh data for every write
too (``--refill_buffers``). Beside it, for context, fio writing one buffer over and over
(``fio --scramble_buffers=0``, row "fio reusing"): that is what cardbench did before, and what a
card or disk that compresses or deduplicates can serve faster than real data. QD1 writes are
also run on io_uring at depth 1 (row "queued/io_uring"), fio's engine; the matrix's own QD1 way
is pwritev (rows "sync", "queued").

Every round runs each engine once per case, in an order that alternates between rounds
(ABC, CBA, ...) so drift and neighbours' load spread evenly; a row's ratio is the median of
its per-round ratios (each cardbench run against the fio run of the same round), printed with
the 95% interval of that median (distribution-free, from the ranks), and the table also gives
the median figures. Runs are time-based (``--seconds``), on a 1 GiB area.
How many rounds: this machine's disk is shared, and two runs of the same fio job a second
apart differ by 6-8% (standard deviation of the fio-against-fio ratio), whether the runs last
0.5, 1, 2 or 4 s (measured: rand 4 KiB QD1 reads, 8-24 pairs each) and whether or not the
tools are pinned. Longer runs do not help, more pairs do: the median of n pairs is uncertain
by about 1.25 x 7% / sqrt(n), 2.9% with 9 pairs, 2.2% with 16. Hence 16 rounds of 0.5 s (the
same wall time as 9 of 1 s, fio needing ~0.3 s to start). A row whose goal lies inside its
interval is "below, within noise"; "MISSED" means the whole interval is under the goal.
Each of the four goals is judged on the median of all its rows' pairs (6-8 rows, ~100 pairs,
about 1% uncertain) and on none of its rows being below beyond the noise; the lowest row is
printed beside it.
CPU placement (``--cpu``): by default neither tool is pinned, as people run them. At QD1 the
CPU a process runs on decides whether the disk's interrupt wakes it locally or from the other
CPU, worth 30% here (random 4 KiB reads, either tool: 55-58 MB/s on CPU 0, 75-85 MB/s on CPU 1,
which takes the virtio disk's interrupts), so unpinned ratios carry that luck. ``--cpu N`` (or
``last``) pins this process and the fio it starts (fio inherits it) to one CPU: the same place
for both, but then that CPU also does all the interrupt and loop-device work, the runs become
CPU-bound, and cardbench's higher CPU time per operation (Python: 1-4 us more than fio, and
more kernel time around it) shows in the rate: on this machine random 4 KiB QD1, over all its
pairs, went from 1.008-1.018 of fio unpinned (three runs) to 0.939 pinned to CPU 1, with 2-4 us
more CPU per operation than fio (24.8 against 21.2 us for the file's reads).
Each tool's buffers: cardbench puts large buffers on huge pages, so a 1 MiB request is one
piece of memory; fio gets the same with ``--mem=shmhuge`` (``--fio-mem``, default where huge
pages can be reserved; the setting is put back afterwards). With fio's default malloc buffers
(row ``fio --mem=malloc``) a 1 MiB request is 256 scattered pages, which the loop device
(max_segments 128) must split and the virtio disk (254) carries as that many pieces: fio then
reads at 0.4-0.5 of the rate it reaches with huge pages.
The queued engine's thread-pool fallback (``queued/threads``) is shown for information; the
goals are for the engines cardbench uses (sync, queued on io_uring).
A second fio run per round ("fio again (A/A)") is compared with the first the same way: its
ratio and interval are the noise floor of the machine at that moment (a shared disk, other
people's jobs), against which the other ratios should be read.

    python bench/engine_vs_fio.py                  # everything, 16 rounds of 0.5 s
    python bench/engine_vs_fio.py --rounds 3 --targets file --cases rand_read_4k_q32t1
    python bench/engine_vs_fio.py --profile        # cProfile the cardbench side of each case
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.engine.fio import run_fio
from cardbench.plan import parse_pattern
from cardbench.stats import median_ci
from cardbench.target import open_target
from cardbench.workloads.random import TestArea, open_area, run_once

AREA = 1 << 30
#: fio against itself: the noise floor of a ratio on this machine at this time
AA = "fio again (A/A)"
#: the queued engine's thread pool, used only where io_uring is missing: shown, not held to a goal
FALLBACK = "queued/threads"
#: fio with its default buffers (malloc) where the reference fio runs on huge pages: shown for 1 MiB
FIO_MALLOC = "fio --mem=malloc"
#: fio writing one buffer over and over (what cardbench's pattern runs did before): shown for writes
FIO_REUSE = "fio reusing"
#: the queued engine forced onto io_uring at depth 1 (fio's engine there; the matrix uses pwritev)
URING = "queued/io_uring"
#: huge pages reserved for fio's buffers (2 MiB each; QD8 x 1 MiB needs 4-5)
HUGE_PAGES = 16
#: the emulated card: small (its backing file), as fast as its server can go
EMU_SIZE = 256 << 20
EMU_RATE = 10e9

CASES = [
    # name, engines of cardbench to compare, goal
    ("seq_read_1m_q8t1", ["queued"], 0.98),
    ("seq_write_1m_q8t1", ["queued"], 1.00),
    ("seq_read_1m_q1t1", ["sync", "queued"], 0.98),
    ("seq_write_1m_q1t1", ["sync", "queued", URING], 1.00),
    ("rand_read_4k_q1t1", ["sync", "queued"], 0.95),
    ("rand_write_4k_q1t1", ["sync", "queued", URING], 1.00),
    ("rand_read_4k_q32t1", ["queued", FALLBACK], 0.90),
    ("rand_write_4k_q32t1", ["queued", FALLBACK], 1.00),
]
#: the issue's four goals: (label, the cases they cover, goal)
GOALS = [("sequential 1 MiB read", ("seq_read_1m_q8t1", "seq_read_1m_q1t1"), 0.98),
         ("random 4 KiB QD1 read", ("rand_read_4k_q1t1",), 0.95),
         ("random 4 KiB QD32 read", ("rand_read_4k_q32t1",), 0.90),
         ("writes vs --refill_buffers", ("seq_write_1m_q8t1", "seq_write_1m_q1t1", "rand_write_4k_q1t1",
                                         "rand_write_4k_q32t1"), 1.00)]
#: rows shown for information, held to no goal
INFO = (AA, FALLBACK, FIO_MALLOC, FIO_REUSE)


@dataclass
class Row:
    """One engine on one case and target, against the fio runs of the same rounds."""

    target: str
    case: str
    engine: str
    goal: float | None
    ratios: list[float]     # per round: this engine's rate / the reference fio run's
    ours: float             # median rates (B/s), p50 latencies (s), CPU time per operation (s)
    fio: float
    p50: float
    fio_p50: float
    cpu: float
    fio_cpu: float

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def ci(self) -> tuple[float, float] | None:
        return median_ci(self.ratios)

    @property
    def verdict(self) -> str:
        return verdict(self.ratio, self.ci, self.goal, self.engine)


def fmt_rate(b: float) -> str:
    return f"{b / 1e6:8.1f}"


def verdict(ratio: float, ci: tuple[float, float] | None, goal: float | None, engine: str) -> str:
    """A row's word: at or above its goal, below it within the noise (the goal lies inside the
    95% interval of the median ratio), or below it beyond the noise."""
    if engine == AA:
        return "noise floor"
    if engine == FIO_MALLOC:
        return "info (fio's default buffers)"
    if engine == FIO_REUSE:
        return "info (fio writing one buffer again and again)"
    if goal is None:
        return "info (fallback)"
    if ratio >= goal:
        return f"goal {goal:.2f} ok"
    if ci is None:
        return f"goal {goal:.2f} below (too few rounds to tell noise from a miss)"
    if ci[1] >= goal:
        return f"goal {goal:.2f} below, within noise"
    return f"goal {goal:.2f} MISSED"


def fmt_ci(ci: tuple[float, float] | None) -> str:
    return "n/a" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}"


def make_loop(directory: str, size: int) -> tuple[str, str]:
    img = os.path.join(directory, f".cardbench-bench-{os.getpid()}.img")
    fd = os.open(img, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        chunk = os.urandom(1 << 20)
        for _ in range(size >> 20):
            os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        dev = subprocess.run(["losetup", "--direct-io=on", "--find", "--show", img], check=True,
                             capture_output=True, text=True).stdout.strip()
    except BaseException:
        os.unlink(img)
        raise
    return dev, img


def one(area: TestArea, case: str, engine: str, seconds: float, prof: cProfile.Profile | None,
        fio_mem: str = "malloc"):
    spec = parse_pattern(case)
    backend = "auto"
    if engine == FALLBACK:
        engine, backend = "queued", "threads"
    if engine == URING:
        engine, backend = "queued", "io_uring"
    # writes: fresh data for each one, as cardbench's own (fio "reusing": one buffer over and over)
    buffers = None if not spec.is_write else "reuse" if engine == FIO_REUSE else "refill"
    if engine in (AA, FIO_MALLOC, FIO_REUSE):
        fio_mem = "malloc" if engine == FIO_MALLOC else fio_mem
        engine = "fio"
    # a size cap far above what the time allows: every run is bounded by time (sequential wraps)
    size = 1 << 40
    if engine == "fio":
        # what run_once does for engine="fio", with the buffer memory chosen here
        return run_fio(area.path, spec.fio_rw, spec.block_size, spec.queue_depth, spec.threads, size=size,
                       runtime=seconds, area=area.size - area.size % spec.block_size, offset=area.offset,
                       end_fsync=spec.is_write, mem=fio_mem, buffers=buffers)
    if prof is not None:
        prof.enable()
    c0 = os.times()
    try:
        run = run_once(spec, area, engine, duration=seconds, size=size, backend=backend, seed=None)
    finally:
        if prof is not None:
            prof.disable()
    c1 = os.times()
    # this process's CPU time (user + system) for the run; fio reports its own
    run.extra["cpu_s"] = (c1.user - c0.user) + (c1.system - c0.system)
    return run


def reserve_huge_pages(n: int) -> tuple[bool, int | None]:
    """Make sure ``n`` huge pages are reserved for fio's ``--mem=shmhuge`` (root only).
    Returns (usable, the previous setting to restore or None)."""
    path = "/proc/sys/vm/nr_hugepages"
    try:
        with open(path) as f:
            before = int(f.read())
        if before >= n:
            return True, None
        with open(path, "w") as f:
            f.write(str(n))
        with open(path) as f:
            got = int(f.read())
        if got < n:
            with open(path, "w") as f:
                f.write(str(before))
            return False, None
        return True, before
    except OSError:
        return False, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp", help="where the file and the loop device's backing file go")
    ap.add_argument("--targets", default="file,loop")
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--profile", action="store_true", help="cProfile the cardbench runs, print the top entries")
    ap.add_argument("--cpu", default="none",
                    help="pin this process and the fio it starts to one CPU: a number, 'last' or "
                         "'none' (default); see the module docstring")
    ap.add_argument("--fio-mem", default="auto",
                    help="fio's --mem: auto (shmhuge where huge pages can be reserved, else malloc), "
                         "shmhuge or malloc")
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="skip the fio-against-fio (A/A) row that shows the noise floor of each ratio")
    args = ap.parse_args()
    if args.rounds < 1 or not args.seconds > 0:
        ap.error("--rounds must be at least 1 and --seconds above 0 (6 rounds or more give a 95% interval)")
    if args.cpu not in ("none", "last") and not (args.cpu.isdigit() and int(args.cpu) in os.sched_getaffinity(0)):
        ap.error(f"--cpu must be 'none', 'last' or one of CPUs {sorted(os.sched_getaffinity(0))}")
    unknown = set(args.cases.split(",")) - {c[0] for c in CASES}
    if unknown or not set(args.targets.split(",")) <= {"file", "loop", "emu"}:
        ap.error(f"--cases from {', '.join(c[0] for c in CASES)}; --targets from file,loop,emu")
    if not shutil.which("fio"):
        print("fio is not installed", file=sys.stderr)
        return 2
    wanted = set(args.cases.split(","))
    cases = [c for c in CASES if c[0] in wanted]
    targets = args.targets.split(",")
    areas: list[tuple[str, TestArea]] = []
    cleanup: list = []
    rows: list[Row] = []
    try:
        if "file" in targets:
            a = open_area(open_target(args.dir), AREA, max_fill_seconds=None)
            cleanup.append(a.close)
            areas.append(("file", a))
        if "loop" in targets:
            dev, img = make_loop(args.dir, AREA)
            cleanup.append(lambda: os.path.exists(img) and os.unlink(img))
            cleanup.append(lambda: subprocess.run(["losetup", "-d", dev], check=False))
            areas.append(("loop", TestArea(path=dev, offset=0, size=AREA, kind="device")))
        if "emu" in targets:
            card = EmulatedCard(CardSpec(size=EMU_SIZE, write_rate=EMU_RATE, read_rate=EMU_RATE))
            card.__enter__()
            cleanup.append(lambda: card.__exit__(None, None, None))
            areas.append(("emu", TestArea(path=card.device, offset=0, size=EMU_SIZE, kind="device")))
        cpus = sorted(os.sched_getaffinity(0))
        if args.cpu != "none":
            cpu = cpus[-1] if args.cpu == "last" else int(args.cpu)
            os.sched_setaffinity(0, {cpu})     # fio, started from here, inherits it
            pinned = f"pinned to CPU {cpu}"
        else:
            pinned = "not pinned"
        fio_mem = args.fio_mem
        if fio_mem in ("auto", "shmhuge"):
            ok, before = reserve_huge_pages(HUGE_PAGES)
            if before is not None:
                cleanup.append(lambda: open("/proc/sys/vm/nr_hugepages", "w").write(str(before)))
            if not ok and fio_mem == "shmhuge":
                print("cannot reserve huge pages for fio --mem=shmhuge (needs root)", file=sys.stderr)
                return 2
            fio_mem = "shmhuge" if ok else "malloc"
        print(f"fio: {subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()} "
              f"--mem={fio_mem}, kernel {os.uname().release}, {os.cpu_count()} CPUs ({pinned}), "
              f"{args.rounds} rounds x {args.seconds:g} s, load {os.getloadavg()[0]:.1f}")
        if fio_mem == "shmhuge":
            print("fio's buffers are on huge pages like cardbench's (AlignedBuffers); for 1 MiB cases the "
                  f"'{FIO_MALLOC}' row shows fio with its default buffers")
        t_start = time.time()
        for tname, area in areas:
            for case, engines, goal in cases:
                order = engines + (["fio", AA] if args.control else ["fio"])
                if parse_pattern(case).is_write:
                    order.append(FIO_REUSE)
                if fio_mem != "malloc" and parse_pattern(case).block_size >= 1 << 20:
                    order.append(FIO_MALLOC)
                res: dict[str, list] = {e: [] for e in order}
                prof = cProfile.Profile() if args.profile else None
                for r in range(args.rounds):
                    seq = order if r % 2 == 0 else list(reversed(order))
                    for e in seq:
                        res[e].append(one(area, case, e, args.seconds, prof, fio_mem))
                for e in [e for e in order if e != "fio"]:
                    ratios = [a.bytes_per_s / b.bytes_per_s for a, b in zip(res[e], res["fio"], strict=True)]
                    row = Row(tname, case, e, None if e in INFO else goal, ratios,
                              ours=statistics.median(run.bytes_per_s for run in res[e]),
                              fio=statistics.median(run.bytes_per_s for run in res["fio"]),
                              p50=statistics.median(run.latency_s["p50"] for run in res[e]),
                              fio_p50=statistics.median(run.latency_s["p50"] for run in res["fio"]),
                              cpu=statistics.median(run.extra["cpu_s"] / run.ops for run in res[e]),
                              fio_cpu=statistics.median(run.extra["cpu_s"] / run.ops for run in res["fio"]))
                    rows.append(row)
                    print(f"  {tname:4} {case:20} {e:15} {fmt_rate(row.ours)} MB/s  fio {fmt_rate(row.fio)} MB/s  "
                          f"ratio {row.ratio:.3f} (95% {fmt_ci(row.ci)})  {row.verdict}  "
                          f"cpu/op {row.cpu * 1e6:.1f} us (fio {row.fio_cpu * 1e6:.1f})", flush=True)
                if prof is not None:
                    s = io.StringIO()
                    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(8)
                    print("\n".join(s.getvalue().splitlines()[:22]))
        print(f"\n{'target':6} {'case':20} {'engine':15} {'cardbench MB/s':>14} {'fio MB/s':>9} {'ratio':>6} "
              f"{'95% interval':>12} {'goal':>5}  {'p50 us':>7} {'fio p50':>7} {'cpu/op us':>9} {'fio cpu':>7}")
        for r in rows:
            print(f"{r.target:6} {r.case:20} {r.engine:15} {r.ours / 1e6:14.1f} {r.fio / 1e6:9.1f} {r.ratio:6.3f} "
                  f"{fmt_ci(r.ci):>12} {'-' if r.goal is None else format(r.goal, '.2f'):>5}  {r.p50 * 1e6:7.0f} "
                  f"{r.fio_p50 * 1e6:7.0f} {r.cpu * 1e6:9.1f} {r.fio_cpu * 1e6:7.1f}  {r.verdict}")
        print("ratio: the median of the per-round ratios (cardbench / the fio run of the same round); 95% "
              "interval: of that median, from the ranks of the ratios (distribution-free). p50: cardbench "
              "times an operation from before the submitting call (fio's 'lat'); fio's p50 is its 'clat' (after "
              "the submitting call). cpu/op: user + system CPU time per operation (the cost of the tool itself, "
              "robust to a busy disk).")
        print("\nThe goals: each goal's ratio is the median of all its rows' per-round ratios; it is met when "
              "that is at or above the goal and no row is below the goal beyond the noise (its whole 95% "
              "interval under the goal).")
        for label, goal_cases, goal in GOALS:
            mine = [r for r in rows if r.goal is not None and r.case in goal_cases]
            if not mine:
                continue
            pooled = [x for r in mine for x in r.ratios]
            ratio, ci = statistics.median(pooled), median_ci(pooled)
            worst = min(mine, key=lambda r: r.ratio)
            beyond = [r for r in mine if r.ci is not None and r.ci[1] < goal]
            judged = ci is not None and all(r.ci is not None for r in mine)
            met = ratio >= goal and not beyond
            aa = [x for r in rows if r.engine == AA and r.case in goal_cases for x in r.ratios]
            aa_txt = f"; fio A/A on these cases {statistics.median(aa):.3f} (95% {fmt_ci(median_ci(aa))})" if aa else ""
            print(f"  {label:22} >= {goal:.2f}: {ratio:.3f} (95% {fmt_ci(ci)}, {len(pooled)} pairs in "
                  f"{len(mine)} rows)  {('met' if met else 'MISSED') if judged else 'not judged (fewer than 6 rounds)'}"
                  f"{aa_txt}")
            print(f"  {'':22}          lowest row {worst.ratio:.3f} (95% {fmt_ci(worst.ci)}) {worst.target} "
                  f"{worst.case} {worst.engine}; rows below beyond the noise: "
                  f"{', '.join(f'{r.target} {r.case} {r.engine}' for r in beyond) or 'none'}")
        print(f"\n{time.time() - t_start:.0f} s, load {os.getloadavg()[0]:.1f} at the end")
    finally:
        for fn in reversed(cleanup):
            try:
                fn()
            except Exception as e:  # keep cleaning
                print(f"cleanup: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
