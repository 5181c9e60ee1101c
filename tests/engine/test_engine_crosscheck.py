"""sync, queued and fio measure the same card alike (an emulated card of known speed)."""

from __future__ import annotations

import statistics

import pytest
from engine_helpers import emulated_card, needs_emulator, needs_fio

from cardbench.workloads.random import run_pattern

MB = 1_000_000
MiB = 1 << 20
RATE = 20 * MB


@needs_emulator
@needs_fio
def test_engines_agree_on_sequential_1m_reads():
    with emulated_card(size=64 * MiB, write_rate=RATE, read_rate=RATE) as card:
        medians = {}
        for engine in ("sync", "queued", "fio"):
            res = run_pattern(card.device, "seq_read_1m_q1t1", engine, runs=2, warmup=0, duration=1.5)
            assert res.method["engine"] == engine
            assert all(r.ops and r.latency_s for r in res.runs)
            medians[engine] = statistics.median(r.bytes_per_s for r in res.runs)
    for engine, rate in medians.items():
        assert rate == pytest.approx(RATE, rel=0.03), medians
    lo, hi = min(medians.values()), max(medians.values())
    assert hi / lo <= 1.03, medians
