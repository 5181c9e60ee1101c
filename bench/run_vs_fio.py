#!/usr/bin/env python3
"""`cardbench run` against fio on the same loop-backed ext4, in the same run.

Makes a loop device over a file on this machine's disk (losetup --direct-io=on, so the loop
device reaches the disk rather than the host page cache), formats ext4, mounts it, and (unless
--no-throttle) slows it to card speeds with cgroup-v1 blkio throttling of O_DIRECT I/O (20 MB/s
write, 40 MB/s read: this VM's disk runs at 1-2 GB/s, where a 16 MB file lasts ~10 ms and fio's
millisecond runtime alone is a 10% error). Both tools run inside the same throttled cgroup. Then
it alternates, ROUNDS times:
  * `cardbench run MOUNT --size 16MB --runs 3 --json --no-save` (seq_write, cold_read medians)
  * fio with the same parameters: O_DIRECT, 1 MiB blocks, psync (queue depth 1), a fresh 16 MB
    file per run with end_fsync=1 for writes, and a cold O_DIRECT read of it; 3 runs, median.
Prints both medians and the ratio cardbench/fio per round, and the median ratio.
The goal (issue 2): both ratios within 3% of 1.
Usage: sudo python3 bench/run_vs_fio.py [ROUNDS] [--no-throttle]
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


WRITE_BPS = 20_000_000
READ_BPS = 40_000_000
CGROUP = "/sys/fs/cgroup/blkio/cardbench-bench"


def throttle(dev: str) -> None:
    """Put this process (and so its children) in a blkio cgroup that throttles ``dev``."""
    rdev = os.stat(dev).st_rdev
    mm = f"{os.major(rdev)}:{os.minor(rdev)}"
    os.makedirs(CGROUP, exist_ok=True)
    with open(os.path.join(CGROUP, "blkio.throttle.write_bps_device"), "w") as f:
        f.write(f"{mm} {WRITE_BPS}")
    with open(os.path.join(CGROUP, "blkio.throttle.read_bps_device"), "w") as f:
        f.write(f"{mm} {READ_BPS}")
    with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def unthrottle() -> None:
    if not os.path.isdir(CGROUP):
        return
    with open("/sys/fs/cgroup/blkio/cgroup.procs", "w") as f:
        f.write(str(os.getpid()))
    os.rmdir(CGROUP)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = int(args[0]) if args else 5
    limit = "--no-throttle" not in sys.argv
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
        if limit:
            throttle(dev)
        print(f"loop-backed ext4 on {dev} (direct-io=on, image on {img}); {SIZE} files, {RUNS} runs, O_DIRECT 1 MiB;"
              + (f" blkio-throttled to {WRITE_BPS / 1e6:g} MB/s write, {READ_BPS / 1e6:g} MB/s read" if limit
                 else " unthrottled"))
        print(f"{'round':>5} {'cb write MB/s':>14} {'fio write MB/s':>15} {'ratio':>6} "
              f"{'cb read MB/s':>13} {'fio read MB/s':>14} {'ratio':>6}")
        wr, rr = [], []
        for r in range(rounds):
            cw, cr = cardbench_median(mnt)
            fw, fr = fio_median(mnt)
            wr.append(cw / fw)
            rr.append(cr / fr)
            print(f"{r + 1:>5} {cw / 1e6:>14.1f} {fw / 1e6:>15.1f} {cw / fw:>6.3f} {cr / 1e6:>13.1f} {fr / 1e6:>14.1f} "
                  f"{cr / fr:>6.3f}")
        print(f"median ratio cardbench/fio: seq_write {statistics.median(wr):.3f}, cold_read {statistics.median(rr):.3f}"
              f" (goal: within 0.97..1.03)")
    finally:
        unthrottle()
        if mounted:
            sh("umount", mnt, check=False)
        if dev:
            sh("losetup", "-d", dev, check=False)
        os.unlink(img)
        os.rmdir(mnt)
        os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
