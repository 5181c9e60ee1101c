#!/usr/bin/env python3
"""`cardbench run` against fio on the same loop-backed ext4, in the same run.

Targets (each a loop device with ext4 mounted on it):
  * emulated cards (cardbench.emulate: a loop device paced by a FUSE server) at 4.9/4.9 and
    20/40 MB/s write/read, so runs last long enough to time well and the true rate is known;
  * with --disk, also a loop device over a file on this machine's disk (losetup --direct-io=on).
    This VM's disk runs at 1-2 GB/s, where a 16 MB file lasts ~10 ms: both tools then measure
    noise (fio's runtime is in whole milliseconds), so it is off by default.
(cgroup-v1 blkio throttling was tried as a slower "disk" and rejected: it lets a burst through
after each idle pause, so fio, which starts idle, read 49 MB/s through a 40 MB/s throttle.)

For each target, ROUNDS times, alternating:
  * `cardbench run MOUNT --size 16MB --runs 3 --json --no-save` (seq_write, cold_read medians)
  * fio with the same parameters: O_DIRECT, 1 MiB blocks, psync (queue depth 1), a fresh 16 MB
    file per run with end_fsync=1 for writes, then an O_DIRECT read of it; 3 runs, median.
Prints both medians and the ratio cardbench/fio per round, and the median ratio per target.
The goal (issue 2): both ratios within 3% of 1.
Usage: sudo python3 bench/run_vs_fio.py [ROUNDS] [--disk]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

SIZE = "16MB"
SIZE_BYTES = 16_000_000
RUNS = 3


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def fio_once(path: str, rw: str) -> float:
    out = sh("fio", "--name=cmp", f"--filename={path}", f"--rw={rw}", "--bs=1M", f"--size={SIZE_BYTES}",
             "--direct=1", "--ioengine=psync", "--iodepth=1", "--end_fsync=1" if rw == "write" else "--invalidate=1",
             "--output-format=json").stdout
    job = json.loads(out)["jobs"][0]
    side = job["write" if rw == "write" else "read"]
    return side["bw_bytes"] if rw == "read" else side["io_bytes"] / (job["job_runtime"] / 1000.0)


def fio_median(mnt: str) -> tuple[float, float]:
    writes, reads = [], []
    for i in range(RUNS):
        path = os.path.join(mnt, f"fio-{i}.tmp")
        writes.append(fio_once(path, "write"))
        reads.append(fio_once(path, "read"))
        os.unlink(path)
    return statistics.median(writes), statistics.median(reads)


def cardbench_median(mnt: str) -> tuple[float, float]:
    out = sh(sys.executable, "-m", "cardbench", "run", mnt, "--size", SIZE, "--runs", str(RUNS), "--json",
             "--no-save").stdout
    doc = json.loads(out)
    med = {t["name"]: t["median_bytes_per_s"] for t in doc["tests"]}
    return med["seq_write"], med["cold_read"]


def compare(mnt: str, rounds: int) -> tuple[float, float]:
    print(f"{'round':>5} {'cb write MB/s':>14} {'fio write MB/s':>15} {'ratio':>6} "
          f"{'cb read MB/s':>13} {'fio read MB/s':>14} {'ratio':>6}")
    wr, rr = [], []
    for r in range(rounds):
        cw, cr = cardbench_median(mnt)
        fw, fr = fio_median(mnt)
        wr.append(cw / fw)
        rr.append(cr / fr)
        print(f"{r + 1:>5} {cw / 1e6:>14.3f} {fw / 1e6:>15.3f} {cw / fw:>6.3f} {cr / 1e6:>13.3f} {fr / 1e6:>14.3f} "
              f"{cr / fr:>6.3f}")
    w, rd = statistics.median(wr), statistics.median(rr)
    print(f"median ratio cardbench/fio: seq_write {w:.3f}, cold_read {rd:.3f} (goal: within 0.97..1.03)\n")
    return w, rd


def emulated(rounds: int, write: float, read: float) -> tuple[float, float]:
    from cardbench.emulate import CardSpec, EmulatedCard
    spec = CardSpec(size=256 << 20, write_rate=write, read_rate=read, name="bench")
    with EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
        print(f"emulated card {card.device}: set {write / 1e6:g} MB/s write, {read / 1e6:g} MB/s read; ext4; "
              f"{SIZE} files, {RUNS} runs, O_DIRECT 1 MiB")
        return compare(mnt, rounds)


def disk(rounds: int) -> tuple[float, float]:
    work = tempfile.mkdtemp(prefix="cardbench-bench-", dir="/var/tmp")
    img = os.path.join(work, "disk.img")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(512 << 20)
    dev = None
    mounted = False
    try:
        dev = sh("losetup", "-f", "--show", "--direct-io=on", img).stdout.strip()
        sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
        sh("mount", dev, mnt)
        mounted = True
        print(f"loop device {dev} over {img} (direct-io=on); ext4; {SIZE} files, {RUNS} runs, O_DIRECT 1 MiB")
        return compare(mnt, rounds)
    finally:
        if mounted:
            sh("umount", mnt, check=False)
        if dev:
            sh("losetup", "-d", dev, check=False)
        os.unlink(img)
        os.rmdir(mnt)
        os.rmdir(work)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(args[0]) if args else 3
    summary = [("emulated 4.9/4.9 MB/s", emulated(rounds, 4.9e6, 4.9e6)),
               ("emulated 20/40 MB/s", emulated(rounds, 20e6, 40e6))]
    if "--disk" in sys.argv:
        summary.append(("loop over this disk", disk(rounds)))
    print(f"{'target':<24} {'seq_write ratio':>16} {'cold_read ratio':>16}")
    for name, (w, r) in summary:
        print(f"{name:<24} {w:>16.3f} {r:>16.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
