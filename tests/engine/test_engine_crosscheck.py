"""sync, queued and fio measure the same card alike (an emulated card of known speed): the
sequential rate, and the IOPS of random 4 KiB requests at QD8, read and write, where the queued
engine's own io_uring loop does the work."""

from __future__ import annotations

import statistics

import pytest

from cardbench.target import open_target
from cardbench.workloads.random import run_pattern
from engine_helpers import emulated_card, needs_emulator, needs_fio

MB = 1_000_000
MiB = 1 << 20
RATE = 20 * MB
LATENCY = 0.002


def _medians(device, name, engines, **kw):
    medians = {}
    for engine in engines:
        res = run_pattern(open_target(device), name, engine, runs=2, warmup=0, duration=1.5, **kw)
        assert res.method["engine"] == engine
        assert all(r.ops and r.latency_s for r in res.runs)
        if engine == "queued":
            assert res.method["backend"] in ("io_uring", "direct", "threads")
        medians[engine] = statistics.median(r.bytes_per_s for r in res.runs), \
            statistics.median(r.ops / r.seconds for r in res.runs)
    return medians


def _agree(values: dict, expected: float, medians) -> None:
    for engine, v in values.items():
        assert v == pytest.approx(expected, rel=0.03), (engine, medians)
    assert max(values.values()) / min(values.values()) <= 1.03, medians


@pytest.mark.slow
@pytest.mark.timing
@needs_emulator
@needs_fio
def test_engines_agree_on_sequential_1m_reads():
    with emulated_card(size=64 * MiB, write_rate=RATE, read_rate=RATE) as card:
        medians = _medians(card.device, "seq_read_1m_q1t1", ("sync", "queued", "fio"))
    _agree({e: m[0] for e, m in medians.items()}, RATE, medians)


@pytest.mark.slow
@pytest.mark.timing
@needs_emulator
@needs_fio
@pytest.mark.parametrize("name", ["rand_read_4k_q8t1", "rand_write_4k_q8t1"])
def test_queued_and_fio_agree_on_random_4k_at_depth_8(name):
    """With requests always waiting, the card serves one per latency + 4 KiB / rate: both
    engines must see that many IOPS (the queue kept full, every completion counted)."""
    iops = 1 / (LATENCY + 4096 / RATE)
    with emulated_card(size=64 * MiB, write_rate=RATE, read_rate=RATE, latency=LATENCY) as card:
        medians = _medians(card.device, name, ("queued", "fio"), allow_write=True)
    _agree({e: m[1] for e, m in medians.items()}, iops, medians)
