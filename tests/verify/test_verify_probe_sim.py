"""The quick probe's logic on a simulated card (milliseconds per case), including what the FUSE
emulator cannot do: a data cache that hides dropped writes, old data read back, unreadable tails."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardbench.verify.probe import ProbeOptions, Prober
from cardbench.verify.sim import SimCard, SimSaver, SimSpec

MiB = 1 << 20
GiB = 1 << 30


def probe(spec: SimSpec, saver: bool = False, **opts):
    card = SimCard(spec)
    sv = SimSaver(card) if saver else None
    r = Prober(card, saver=sv, options=ProbeOptions(seed=7, **opts)).run()
    return card, sv, r


@pytest.mark.parametrize("size,real", [(GiB, None), (64 * MiB, None), (8 * MiB, None)])
def test_genuine(size, real):
    _, _, r = probe(SimSpec(size=size))
    assert (r.verdict, r.kind, r.usable_bytes, r.bad_ranges) == ("genuine", None, size, [])
    assert r.complete and r.error is None


@pytest.mark.parametrize("real", [256 * MiB, 300 * MiB, 1000 * MiB + 512, GiB - 4096, 5 * MiB])
def test_wraparound_any_size_exact(real):
    _, _, r = probe(SimSpec(size=GiB, real_size=real, fake_mode="wraparound"))
    assert (r.verdict, r.kind, r.usable_bytes, r.wrap_bytes) == ("counterfeit", "wraparound", real, real)
    assert r.bad_ranges == [[real, GiB]]


@pytest.mark.parametrize("reads", ["zero", "old", "ff"])
@pytest.mark.parametrize("real", [256 * MiB, 300 * MiB + 512, GiB - 64 * 1024])
def test_dropped_exact(real, reads):
    spec = SimSpec(size=GiB, real_size=real, fake_mode="drop", dropped_reads=reads,
                   initial=lambda p: bytes([p // 512 % 251 + 1]) * 512)
    _, _, r = probe(spec)
    assert (r.verdict, r.kind, r.usable_bytes) == ("counterfeit", "dropped", real)
    assert r.cache_bytes == 0


def test_a_data_cache_does_not_fool_it():
    """The card answers reads of its last 4 MiB of writes from RAM, also for dropped blocks:
    a read-back straight after writing looks perfect. The comb's flush exposes it, the cache is
    measured on the lost area, and the boundary is narrowed with flushes of twice that."""
    _, _, r = probe(SimSpec(size=GiB, real_size=300 * MiB + 512, fake_mode="drop", cache_bytes=4 * MiB))
    assert (r.verdict, r.kind, r.usable_bytes) == ("counterfeit", "dropped", 300 * MiB + 512)
    assert r.cache_bytes is not None and 4 * MiB <= r.cache_bytes <= 8 * MiB


def test_a_naive_probe_is_fooled_by_that_cache():
    """The same card read back without the flush: nothing is wrong. (Why the flush matters.)"""
    from cardbench.patterns import Pattern
    card = SimCard(SimSpec(size=GiB, real_size=300 * MiB, fake_mode="drop", cache_bytes=4 * MiB))
    sp = Pattern(5)
    positions = [(600 + 16 * i) * MiB for i in range(16)]
    for p in positions:
        card.write_pattern(p, 4096, sp)
    assert all(sp.judge(card.read(p, 4096), p).ok for p in positions)


def test_wraparound_behind_a_cache():
    _, _, r = probe(SimSpec(size=GiB, real_size=300 * MiB, fake_mode="wraparound", cache_bytes=4 * MiB))
    assert (r.verdict, r.kind, r.usable_bytes) == ("counterfeit", "wraparound", 300 * MiB)


def test_reads_past_the_real_end_fail():
    _, _, r = probe(SimSpec(size=GiB, real_size=700 * MiB, fake_mode="unreadable"))
    assert (r.verdict, r.usable_bytes) == ("counterfeit", 700 * MiB)
    assert r.bad_ranges == [[700 * MiB, GiB]]


def test_io_error_ranges_are_found_exactly():
    errors = [(100 * MiB, 120 * MiB, "both"), (600 * MiB + 4096, 612 * MiB, "write")]
    _, _, r = probe(SimSpec(size=GiB, errors=errors))
    assert r.verdict == "damaged" and r.kind is None
    assert r.bad_ranges == [[100 * MiB, 120 * MiB], [600 * MiB + 4096, 612 * MiB]]
    assert r.usable_bytes == 100 * MiB


def test_removed_midway():
    """The card went away (every request fails with ENODEV, one of engine.errors.GONE): the probe
    is incomplete and draws no verdict from what it could not read or write."""
    _, _, r = probe(SimSpec(size=GiB, yank_after=200))
    assert r.verdict is None and r.kind is None and not r.complete and r.bad_ranges == []
    assert r.removed_at is not None and "removed" in r.error and r.usable_bytes is None


def test_a_card_gone_after_a_wraparound_was_seen_is_still_counterfeit():
    """What was read back before the card went away still counts: a wraparound is a counterfeit."""
    card, _, whole = probe(SimSpec(size=GiB, real_size=256 * MiB, fake_mode="wraparound"))
    assert whole.verdict == "counterfeit"
    _, _, r = probe(SimSpec(size=GiB, real_size=256 * MiB, fake_mode="wraparound", yank_after=card.ops - 5))
    assert not r.complete and r.removed_at is not None
    assert r.verdict == "counterfeit" and r.kind == "wraparound"


def test_time_budget_still_gives_a_safe_verdict():
    _, _, r = probe(SimSpec(size=GiB, real_size=300 * MiB + 512, fake_mode="drop"), time_budget=1e-6)
    assert r.verdict == "counterfeit"
    assert r.usable_bytes <= 300 * MiB + 512          # never more than the truth
    assert r.confidence["boundary_uncertainty_bytes"] > 0
    assert "budget" in " ".join(r.notes)


@pytest.mark.parametrize("mode", ["wraparound", "drop"])
def test_saver_restores_everything_in_reverse(mode):
    """On a wraparound card a write past the end lands on data saved earlier: restoring in
    reverse order of saving puts the original back anyway."""
    spec = SimSpec(size=256 * MiB, real_size=100 * MiB, fake_mode=mode,
                   initial=lambda p: (p // 512).to_bytes(8, "little") * 64)
    card = SimCard(spec)
    for p in range(0, 100 * MiB, 8 * MiB):     # some "user data" where the probe will write
        card.write_bytes(p, bytes([p // MiB % 256]) * 4 * MiB)
    before = card.snapshot()
    sv = SimSaver(card)
    r = Prober(card, saver=sv, options=ProbeOptions(seed=3)).run()
    assert r.verdict == "counterfeit"
    sv.restore()
    after = card.snapshot()
    changed = [k for k in set(before) | set(after)
               if before.get(k, card._initial(k)) != after.get(k, card._initial(k))]
    assert changed == []


@settings(max_examples=12, deadline=None)
@given(real_mib=st.integers(2, 250), extra=st.integers(0, 2047), mode=st.sampled_from(["wraparound", "drop"]))
def test_any_fake_size_within_a_sector(real_mib, extra, mode):
    real = real_mib * MiB + extra * 512
    _, _, r = probe(SimSpec(size=256 * MiB, real_size=real, fake_mode=mode))
    assert r.verdict == "counterfeit"
    assert r.usable_bytes == real


@pytest.mark.slow
def test_a_cache_bigger_than_assumed_needs_a_bigger_assumption():
    """The limit of any probe: a cache larger than what is written after a block hides its loss.
    The default assumption (size/64, >= 8 MiB) is stated in the result; a larger one catches it."""
    spec = SimSpec(size=GiB, real_size=300 * MiB, fake_mode="drop", cache_bytes=32 * MiB)
    _, _, r = probe(spec)
    assert r.verdict == "genuine" and r.confidence["cache_assumption_bytes"] < 32 * MiB
    _, _, r = probe(spec, assume_cache_bytes=64 * MiB)
    assert (r.verdict, r.usable_bytes) == ("counterfeit", 300 * MiB)
    assert 32 * MiB <= r.cache_bytes <= 64 * MiB
