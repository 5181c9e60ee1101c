#!/usr/bin/env python3
"""cardbench's engines against fio, same targets, same parameters, same run; prints ratios.

Targets (both made here and removed afterwards, also on Ctrl-C):
  file   a file on this machine's disk (default /var/tmp), opened with O_DIRECT
  loop   a loop device over a file in the same directory, ``losetup --direct-io=on`` (needs root)

Cases and goals (cardbench / fio, bytes/s):
  seq 1 MiB read and write, QD8 and QD1   >= 0.98
  rand 4 KiB QD1 read and write           >= 0.95
  rand 4 KiB QD32 read and write          >= 0.90

Every round runs each engine once per case, in an order that alternates between rounds
(ABC, CBA, ...) so drift and neighbours' load spread evenly; the ratio is the median of the
per-round ratios (each cardbench run against the fio run of the same round), and the table
also gives the median figures. Runs are time-based (``--seconds``), on a 1 GiB area.
A second fio run per round ("fio again (A/A)") is compared with the first the same way: its
ratio and range are the noise floor of the machine at that moment (a shared disk, other
people's jobs), against which the other ratios should be read.

    python bench/engine_vs_fio.py                  # everything, 5 rounds of 2 s
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

from cardbench.workloads.random import TestArea, open_area, parse_pattern, run_once

CASES = [
    # name, engines of cardbench to compare, goal
    ("seq_read_1m_q8t1", ["queued"], 0.98),
    ("seq_write_1m_q8t1", ["queued"], 0.98),
    ("seq_read_1m_q1t1", ["sync", "queued"], 0.98),
    ("seq_write_1m_q1t1", ["sync", "queued"], 0.98),
    ("rand_read_4k_q1t1", ["sync", "queued"], 0.95),
    ("rand_write_4k_q1t1", ["sync", "queued"], 0.95),
    ("rand_read_4k_q32t1", ["queued", "queued/threads"], 0.90),
    ("rand_write_4k_q32t1", ["queued", "queued/threads"], 0.90),
]

AREA = 1 << 30
#: fio against itself: the noise floor of a ratio on this machine at this time
AA = "fio again (A/A)"


def fmt_rate(b: float) -> str:
    return f"{b / 1e6:8.1f}"


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


def one(area: TestArea, case: str, engine: str, seconds: float, prof: cProfile.Profile | None):
    spec = parse_pattern(case)
    backend = "auto"
    if engine == "queued/threads":
        engine, backend = "queued", "threads"
    if engine == AA:
        engine = "fio"
    if prof is not None and engine != "fio":
        prof.enable()
    c0 = os.times()
    try:
        # a size cap far above what the time allows: every run is bounded by time (sequential wraps)
        run = run_once(spec, area, engine, duration=seconds, size=1 << 40, backend=backend, seed=None)
    finally:
        if prof is not None and engine != "fio":
            prof.disable()
    c1 = os.times()
    if engine != "fio":   # this process's CPU time (user + system) for the run; fio reports its own
        run.extra["cpu_s"] = (c1.user - c0.user) + (c1.system - c0.system)
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp", help="where the file and the loop device's backing file go")
    ap.add_argument("--targets", default="file,loop")
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--profile", action="store_true", help="cProfile the cardbench runs, print the top entries")
    ap.add_argument("--no-control", dest="control", action="store_false",
                    help="skip the fio-against-fio (A/A) row that shows the noise floor of each ratio")
    args = ap.parse_args()
    if not shutil.which("fio"):
        print("fio is not installed", file=sys.stderr)
        return 2
    wanted = set(args.cases.split(","))
    cases = [c for c in CASES if c[0] in wanted]
    targets = args.targets.split(",")
    areas: list[tuple[str, TestArea]] = []
    cleanup: list = []
    rows = []
    try:
        if "file" in targets:
            a = open_area(args.dir, AREA, max_fill_seconds=None)
            cleanup.append(a.close)
            areas.append(("file", a))
        if "loop" in targets:
            dev, img = make_loop(args.dir, AREA)
            cleanup.append(lambda: os.path.exists(img) and os.unlink(img))
            cleanup.append(lambda: subprocess.run(["losetup", "-d", dev], check=False))
            areas.append(("loop", TestArea(path=dev, offset=0, size=AREA, kind="device")))
        print(f"fio: {subprocess.run(['fio', '--version'], capture_output=True, text=True).stdout.strip()}, "
              f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {args.rounds} rounds x {args.seconds:g} s, "
              f"load {os.getloadavg()[0]:.1f}")
        t_start = time.time()
        for tname, area in areas:
            for case, engines, goal in cases:
                order = engines + (["fio", AA] if args.control else ["fio"])
                res: dict[str, list] = {e: [] for e in order}
                prof = cProfile.Profile() if args.profile else None
                for r in range(args.rounds):
                    seq = order if r % 2 == 0 else list(reversed(order))
                    for e in seq:
                        res[e].append(one(area, case, e, args.seconds, prof))
                fio_rates = [run.bytes_per_s for run in res["fio"]]
                for e in engines + ([AA] if args.control else []):
                    rates = [run.bytes_per_s for run in res[e]]
                    ratios = [a / b for a, b in zip(rates, fio_rates)]
                    ratio = statistics.median(ratios)
                    p50 = statistics.median(run.latency_s["p50"] for run in res[e])
                    fp50 = statistics.median(run.latency_s["p50"] for run in res["fio"])
                    if e == AA:
                        goal = 1.0
                    cpu = statistics.median(run.extra["cpu_s"] / run.ops for run in res[e])
                    fcpu = statistics.median(run.extra["cpu_s"] / run.ops for run in res["fio"])
                    rows.append((tname, case, e, statistics.median(rates), statistics.median(fio_rates),
                                 ratio, min(ratios), max(ratios), goal, p50, fp50, cpu, fcpu))
                    r = rows[-1]
                    print(f"  {tname:4} {case:20} {e:15} {fmt_rate(r[3])} MB/s  fio {fmt_rate(r[4])} MB/s  "
                          f"ratio {r[5]:.3f} [{r[6]:.2f}-{r[7]:.2f}]  goal {goal:.2f} "
                          f"{'ok' if r[5] >= goal else 'MISSED'}  cpu/op {cpu * 1e6:.1f} us (fio {fcpu * 1e6:.1f})",
                          flush=True)
                if prof is not None:
                    s = io.StringIO()
                    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(8)
                    print("\n".join(s.getvalue().splitlines()[:22]))
        print(f"\n{'target':6} {'case':20} {'engine':15} {'cardbench MB/s':>14} {'fio MB/s':>9} {'ratio':>6} "
              f"{'range':>11} {'goal':>5}  {'p50 us':>7} {'fio p50':>7} {'cpu/op us':>9} {'fio cpu':>7}")
        for t, case, e, ours, fio, ratio, lo, hi, goal, p50, fp50, cpu, fcpu in rows:
            print(f"{t:6} {case:20} {e:15} {ours / 1e6:14.1f} {fio / 1e6:9.1f} {ratio:6.3f} "
                  f"{lo:5.2f}-{hi:<5.2f} {goal:5.2f}  {p50 * 1e6:7.0f} {fp50 * 1e6:7.0f} {cpu * 1e6:9.1f} {fcpu * 1e6:7.1f}"
                  f"{'' if ratio >= goal else '  MISSED'}")
        print("p50: cardbench times an operation from before the submitting call (fio's 'lat'); fio's p50 is "
              "its 'clat' (after the submitting call). cpu/op: user + system CPU time per operation "
              "(the cost of the tool itself, robust to a busy disk).")
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
