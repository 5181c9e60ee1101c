"""fio measures the emulator at the set rates (O_DIRECT, 1 MiB, psync)."""

from __future__ import annotations

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.units import MB, MiB
from emulate_helpers import fio, needs_emulator, needs_fio

pytestmark = [needs_emulator, needs_fio, pytest.mark.timing]

SECONDS = 3.0  # of I/O per measurement


@pytest.fixture(scope="module")
def card():
    with EmulatedCard(CardSpec(size=128 * MiB, write_rate=10 * MB, read_rate=10 * MB, name="rates")) as c:
        yield c


def _size(rate: float) -> int:
    return max(1, round(rate * SECONDS / MiB)) * MiB


@pytest.mark.slow
@pytest.mark.parametrize("write_mb, read_mb", [(1.0, 3.6), (4.9, 4.9), (20, 40)])
def test_fio_measures_the_set_rates(card, write_mb, read_mb):
    card.set(write_rate=write_mb * MB, read_rate=read_mb * MB)
    w = fio(card.device, "write", _size(write_mb * MB))
    r = fio(card.device, "read", _size(read_mb * MB))
    w_rate, r_rate = w["bw_bytes"], r["bw_bytes"]
    print(f"\nset {write_mb}/{read_mb} MB/s  fio write {w_rate / MB:.4f} MB/s ({w_rate / (write_mb * MB) - 1:+.2%}) "
          f"read {r_rate / MB:.4f} MB/s ({r_rate / (read_mb * MB) - 1:+.2%})")
    assert w_rate == pytest.approx(write_mb * MB, rel=0.01)
    assert r_rate == pytest.approx(read_mb * MB, rel=0.01)


def test_latency_per_request(card):
    """QD1 4 KiB random reads: one request per latency + 4 KiB/rate."""
    card.set(read_rate=20 * MB, latency=0.004)
    try:
        r = fio(card.device, "randread", 4 * MiB, bs="4k", extra=("--runtime=1.5", "--time_based"))
    finally:
        card.set(latency=0.0)
    expected_iops = 1 / (0.004 + 4096 / (20 * MB))
    print(f"\nlatency 4 ms: {r['iops']:.1f} IOPS (expected {expected_iops:.1f})")
    assert r["iops"] == pytest.approx(expected_iops, rel=0.02)
