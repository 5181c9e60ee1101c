#!/usr/bin/env python3
"""How fast cardbench makes and checks its verification data, and how much memory that takes.

Making and checking data must never be what limits a verification: the goal is at least 1 GB/s
per core for each (a card or reader is at most a few hundred MB/s). Measured on one core:

* ``Pattern.fill`` / ``Pattern.judge`` (cardbench.patterns: per-sector data, so any sector can be
  regenerated from its position whatever request wrote it; used by every test that writes and
  by verify),

* ``FreshWrites.fill`` (the data of each write of a pattern test's closed loop, made just before
  it goes out: one per write, into a queue of 32 aligned buffers): microseconds per write for
  4 KiB (what costs there is the call, not the bytes) and GB/s for 1 MiB,

over a simulated device: the requests (1 MiB and 4 MiB, the sizes the tools use) walk positions
spread over the whole device, so a 1 TiB "device" costs no more memory than a 1 GiB one. Also the
worst case of judging: every sector overwritten (a wraparound card read back in full mode), where
each sector's true position must be looked up and its body compared.

Peak memory is reported two ways: tracemalloc's peak (Python and numpy allocations) and the
process's peak RSS (getrusage), measured for each device size; "flat" means they do not grow
with the size.

Usage: python3 bench/patterns_speed.py [GIB_OF_DATA_PER_MEASUREMENT]   (default 2)
"""

from __future__ import annotations

import os
import resource
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from cardbench.engine.buffers import AlignedBuffers  # noqa: E402
from cardbench.patterns import FreshWrites, Pattern  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20
TAG = 0x5EED_CAFE_F00D_0001


def positions(device: int, chunk: int, count: int) -> list[int]:
    step = max(chunk, (device - chunk) // max(1, count - 1)) // chunk * chunk
    return [min(i * step, device - chunk) for i in range(count)]


def rate(fn, buf, poss) -> float:
    t0 = time.perf_counter()
    for p in poss:
        fn(buf, p)
    return len(poss) * len(buf) / (time.perf_counter() - t0)


def measure(device: int, chunk: int, data_bytes: int) -> dict:
    count = max(8, data_bytes // chunk)
    poss = positions(device, chunk, count)
    out = {}
    sp = Pattern(TAG)
    buf = np.empty(chunk, dtype=np.uint8)
    # warm-up (page faults of the buffers, numpy's first calls)
    sp.fill(buf, 0)
    sp.judge(buf, 0)
    out["Pattern.fill"] = rate(sp.fill, buf, poss)
    goods = []
    t_judge = 0.0
    for p in poss:
        sp.fill(buf, p)
        t0 = time.perf_counter()
        goods.append(sp.judge(buf, p).ok)
        t_judge += time.perf_counter() - t0
    assert all(goods)
    out["Pattern.judge"] = len(poss) * chunk / t_judge

    # worst case: every sector of the request is the data of a position 3 GiB further on
    wrapped = np.empty(chunk, dtype=np.uint8)
    few = poss[: max(4, len(poss) // 8)]
    t_judge = 0.0
    for p in few:
        far = (p + 3 * GiB) % max(device, 4 * GiB)
        far -= far % 512
        sp.fill(wrapped, far)
        t0 = time.perf_counter()
        j = sp.judge(wrapped, p)
        t_judge += time.perf_counter() - t0
        assert j.counts["overwritten"] == chunk // 512
    out["Pattern.judge (all overwritten)"] = len(few) * chunk / t_judge
    return out


def fresh_writes(size: int, writes: int) -> float:
    """Seconds per ``FreshWrites.fill`` of ``size`` bytes (best of three passes of ``writes``)."""
    bufs = AlignedBuffers(32, size)
    fresh = FreshWrites(Pattern(TAG), bufs, size)
    try:
        fill = fresh.fill
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for i in range(writes):
                fill(i & 31, (i * 7919 % 65536) * size)
            best = min(best, (time.perf_counter() - t0) / writes)
        return best
    finally:
        fresh.close()
        bufs.close()


def main() -> None:
    data = int(float(sys.argv[1]) * GiB) if len(sys.argv) > 1 else 2 * GiB
    print(f"one core; {data / GiB:g} GiB of data per figure; GB = 10^9 bytes")
    print(f"{'device':>8} {'request':>8} " + " ".join(f"{k:>22}" for k in (
        "Pattern.fill", "Pattern.judge", "judge, all wrapped")) +
        f" {'tracemalloc peak':>17} {'peak RSS':>9}")
    worst = {}
    for device in (GiB, 64 * GiB, 1 << 40):
        for chunk in (MiB, 4 * MiB):
            tracemalloc.start()
            r = measure(device, chunk, data)
            _cur, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            for k, v in r.items():
                worst[k] = min(worst.get(k, v), v)
            name = f"{device // GiB} GiB" if device < (1 << 40) else "1 TiB"
            print(f"{name:>8} {chunk // MiB:>6} Mi " + " ".join(f"{v / 1e9:>17.2f} GB/s" for v in r.values()) +
                  f" {peak / MiB:>13.1f} MiB {rss / MiB:>5.0f} MiB")
    small = fresh_writes(4096, 100_000)
    big = fresh_writes(MiB, 2000)
    worst["FreshWrites.fill, 1 MiB writes"] = MiB / big
    print(f"\nFreshWrites.fill (per write, into 32 buffers): 4 KiB {small * 1e6:.2f} us "
          f"({4096 / small / 1e9:.2f} GB/s), 1 MiB {big * 1e6:.0f} us ({MiB / big / 1e9:.2f} GB/s)")
    print()
    print("slowest figure of each (goal >= 1 GB/s per core):")
    for k, v in worst.items():
        flag = "ok" if v >= 1e9 else "BELOW GOAL"
        print(f"  {k:<40} {v / 1e9:6.2f} GB/s  {flag}")


if __name__ == "__main__":
    main()
