#!/usr/bin/env python3
"""The endurance round against fio, the sectors' speed, and memory over 100 rounds (issue 31).

1. A round's write and read (``cardbench.endure``: 16 slices in a shuffled order, 1 MiB requests
   through io_uring at depth 4, O_DIRECT, an fsync after each slice; every sector made and then
   checked) against fio writing and reading the same bytes of the same device with the same
   request size and depth (``--ioengine=io_uring --iodepth=4 --bs=1M --direct=1``, ``end_fsync=1``
   for the write, fio's own buffers refilled each write, ``--refill_buffers``), alternating, on:
   * an emulated card (a loop device paced by the FUSE server, 64 MiB at 60/90 MB/s), and
   * a loop device over a file on this machine's disk (``losetup --direct-io=on``, 256 MiB).
   Prints the medians and the ratio cardbench/fio (goal: at least 0.95).
2. Tagging (``RoundSectors.fill``) and checking (``RoundSectors.classify``) of 1 GiB in 1 MiB
   buffers on one core, apart from any I/O (goal: at least 1 GB/s each).
3. RSS of this process at each round's end over a 100-round run on a 16 MiB emulated card that is
   not throttled (goal: flat).

Usage: sudo python3 bench/endure_speed.py [REPEATS]     (default 3 alternations per target)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from cardbench.emulate import CardSpec, EmulatedCard  # noqa: E402
from cardbench.endure import EndureOptions, RoundSectors, run_endurance  # noqa: E402
from cardbench.endure.sectors import new_card_uuid  # noqa: E402
from cardbench.engine.buffers import aligned_buffer  # noqa: E402
from cardbench.target import open_device_target  # noqa: E402
from cardbench.units import MiB  # noqa: E402

REQ = 1 << 20
DEPTH = 4


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def fio(path: str, size: int, rw: str) -> float:
    """fio's rate (bytes/s) writing or reading ``size`` bytes of ``path`` as a round does."""
    extra = ["--end_fsync=1", "--refill_buffers"] if rw == "write" else ["--invalidate=1"]
    out = sh("fio", "--name=round", f"--filename={path}", f"--rw={rw}", f"--bs={REQ}", f"--size={size}",
             "--direct=1", "--ioengine=io_uring", f"--iodepth={DEPTH}", *extra, "--output-format=json").stdout
    job = json.loads(out)["jobs"][0]
    return job[rw]["io_bytes"] / (job["job_runtime"] / 1000.0)


def ours(path: str) -> tuple[float, float]:
    """One round of cardbench endure: (write, read) bytes/s."""
    with tempfile.TemporaryDirectory() as d:
        doc = run_endurance(open_device_target(path, whole_device=True),
                            EndureOptions(rounds=1, probe=False, state_dir=d, depth=DEPTH, request_bytes=REQ))
    r = doc["rounds"][0]
    return r["write_bytes_per_s"], r["read_bytes_per_s"]


def compare(name: str, path: str, size: int, repeats: int) -> None:
    ow, orr, fw, fr = [], [], [], []
    for _ in range(repeats):
        w, r = ours(path)
        ow.append(w)
        orr.append(r)
        fw.append(fio(path, size, "write"))
        fr.append(fio(path, size, "read"))
    mw, mr, fmw, fmr = (statistics.median(x) for x in (ow, orr, fw, fr))
    print(f"{name}: write {mw / 1e6:.1f} MB/s vs fio {fmw / 1e6:.1f} ({mw / fmw:.3f}x); "
          f"read {mr / 1e6:.1f} MB/s vs fio {fmr / 1e6:.1f} ({mr / fmr:.3f}x)")
    pw = [a / b for a, b in zip(ow, fw, strict=True)]
    pr = [a / b for a, b in zip(orr, fr, strict=True)]
    print(f"  pairs: write {[round(x, 3) for x in pw]} (median {statistics.median(pw):.3f}), "
          f"read {[round(x, 3) for x in pr]} (median {statistics.median(pr):.3f})")


def sectors_speed(total: int = 1 << 30) -> None:
    """GB/s of making and of checking sectors: by the CPU time this process used (what one core
    does, whatever else the machine runs) and by the wall clock."""
    s = RoundSectors(new_card_uuid())
    buf = aligned_buffer(REQ)
    n = total // REQ
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        s.fill(buf, i * REQ, 7)
    c1, t1 = time.process_time(), time.perf_counter()
    for _ in range(n):
        counts = s.classify(buf, (n - 1) * REQ, 7)
    c2, t2 = time.process_time(), time.perf_counter()
    assert counts[0] == REQ // 512
    print(f"sectors, one core (CPU time): tagging {total / (c1 - c0) / 1e9:.2f} GB/s, checking "
          f"{total / (c2 - c1) / 1e9:.2f} GB/s; by the wall clock {total / (t1 - t0) / 1e9:.2f} and "
          f"{total / (t2 - t1) / 1e9:.2f} GB/s")


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_over_rounds(rounds: int = 100) -> None:
    seen: list[int] = []
    with EmulatedCard(CardSpec(size=16 * MiB, write_rate=10e9, read_rate=10e9, name="rss")) as card, \
            tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        run_endurance(open_device_target(card.device, whole_device=True),
                      EndureOptions(rounds=rounds, probe=False, state_dir=d,
                                    events=lambda n, _d: seen.append(rss_kib()) if n == "round" else None))
        took = time.monotonic() - t0
    marks = {k: seen[k - 1] for k in (1, 10, 50, rounds)}
    print(f"RSS over {rounds} rounds of a 16 MiB card ({took:.0f} s): "
          + ", ".join(f"round {k}: {v / 1024:.1f} MiB" for k, v in marks.items())
          + f"; growth after round 10: {(seen[-1] - seen[9]) / 1024:.2f} MiB")


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    sectors_speed()
    with EmulatedCard(CardSpec(size=64 * MiB, write_rate=60e6, read_rate=90e6, name="fast")) as card:
        compare("emulated card 64 MiB, 60/90 MB/s", card.device, 64 * MiB, repeats)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        img = os.path.join(d, "disk.img")
        with open(img, "wb") as f:
            f.truncate(256 * MiB)
        sh("dd", "if=/dev/zero", f"of={img}", "bs=1M", "count=256", "conv=fsync")
        dev = sh("losetup", "-f", "--show", "--direct-io=on", img).stdout.strip()
        try:
            compare("loop device over a file on disk, 256 MiB", dev, 256 * MiB, repeats)
        finally:
            sh("losetup", "-d", dev, check=False)
    rss_over_rounds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
