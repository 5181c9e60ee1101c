"""The write cache: after an idle pause the first K bytes go fast, then the slow rate."""

from __future__ import annotations

import mmap
import os
import time

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.units import MB, MiB
from emulate_helpers import needs_emulator

pytestmark = [needs_emulator, pytest.mark.timing]

K = 3 * MB
SLOW = 4 * MB
FAST = 40 * MB
CHUNK = 64 * 1024


def timed_writes(device: str, total: int, offset: int = 0) -> list[tuple[int, float]]:
    """O_DIRECT writes of CHUNK bytes; returns (bytes written before, seconds) per chunk."""
    buf = mmap.mmap(-1, CHUNK)
    buf.write(os.urandom(CHUNK))
    fd = os.open(device, os.O_WRONLY | os.O_DIRECT)
    out = []
    try:
        for i in range(total // CHUNK):
            t = time.perf_counter()
            os.pwritev(fd, [buf], offset + i * CHUNK)
            out.append((i * CHUNK, time.perf_counter() - t))
    finally:
        os.close(fd)
    return out


def cache_end_and_slow_rate(samples: list[tuple[int, float]]) -> tuple[int, float]:
    fast_t, slow_t = CHUNK / FAST, CHUNK / SLOW
    threshold = (fast_t + slow_t) / 2
    slow = [t > threshold for _, t in samples]
    # The cache ends at the first chunk from which on the next eight are slow (a fast chunk
    # delayed by a busy machine does not count as the end).
    first_slow = next(i for i in range(len(slow)) if all(slow[i:i + 8]))
    end = samples[first_slow][0]
    tail = samples[first_slow + 1:]
    rate = len(tail) * CHUNK / sum(t for _, t in tail)
    return end, rate


@pytest.mark.slow
def test_cache_then_slow_rate_and_refill_after_idle():
    spec = CardSpec(size=64 * MiB, write_rate=SLOW, read_rate=20 * MB, cache_bytes=K, cache_rate=FAST,
                    cache_idle=0.5, name="slc")
    with EmulatedCard(spec) as card:
        time.sleep(0.6)
        samples = timed_writes(card.device, K + int(2.5 * SLOW) // CHUNK * CHUNK)
        end, rate = cache_end_and_slow_rate(samples)
        print(f"\ncache end {end / MB:.3f} MB (set {K / MB:.3f}), slow rate {rate / MB:.4f} MB/s (set {SLOW / MB})")
        assert abs(end - K) <= 0.05 * K
        assert abs(rate - SLOW) <= 0.03 * SLOW
        # Writing on without a pause: no cache.
        again = timed_writes(card.device, 8 * CHUNK, offset=32 * MiB)
        assert sum(t for _, t in again) > 0.9 * 8 * CHUNK / SLOW
        # After an idle pause the cache is back.
        time.sleep(0.6)
        refill = timed_writes(card.device, 8 * CHUNK, offset=40 * MiB)
        assert sum(t for _, t in refill) < 8 * CHUNK / SLOW / 2
        assert card.status()["counters"]["bytes_cached"] >= K + 8 * CHUNK
