"""The pacing model and the spec, without FUSE (fast, no root)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardbench.emulate.pacing import CardModel, ReaderModel
from cardbench.emulate.spec import CardSpec, ErrorRange, parse_errors, validate_settings
from cardbench.errors import UsageError
from cardbench.units import MB, MiB

KiB = 1024


def card(**kw) -> CardModel:
    reader = ReaderModel(kw.pop("ceiling", None), turnaround=kw.pop("turnaround", 0.010))
    spec = CardSpec(**{"size": 16 * MiB, "write_rate": 10 * MB, "read_rate": 20 * MB, **kw})
    return reader.add(spec)


@settings(max_examples=300, deadline=None)
@given(real_blocks=st.integers(1, 64), extra_blocks=st.integers(1, 64), offset=st.integers(0, 200_000),
       length=st.integers(0, 300_000), mode=st.sampled_from(["wraparound", "drop"]))
def test_map_wraps_or_drops_every_byte(real_blocks, extra_blocks, offset, length, mode):
    real = real_blocks * 4096
    size = max(64 * KiB, real + extra_blocks * 512)
    size -= size % 512
    c = card(size=size, real_size=real, fake_mode=mode)
    pieces = c.map(offset, length)
    assert sum(n for _, n in pieces) == length
    pos = offset
    for where, n in pieces:
        assert n > 0
        if pos >= real and mode == "drop":
            assert where is None
        else:
            assert where == pos % real
            assert where + n <= real  # never past the backing file
        pos += n


def test_map_genuine_card_is_identity():
    c = card()
    assert c.map(12345, 1000) == [(12345, 1000)]


def test_back_to_back_requests_give_the_exact_rate():
    c = card(write_rate=10 * MB)
    now, finish = 100.0, 0.0
    for _ in range(100):
        v = c.request("write", 0, MiB, now)
        finish = v.finish
        now = finish + 0.002  # host turnaround after each answer, below the allowance
    assert finish - 100.0 == pytest.approx(100 * MiB / (10 * MB), rel=1e-9)


def test_late_answers_are_not_idle_time():
    """A server sleep that overshoots (loaded machine) must not lower the rate."""
    c = card(write_rate=10 * MB)
    v = c.request("write", 0, MiB, 0.0)
    c.answered(v.finish + 0.050)  # answered 50 ms late
    v2 = c.request("write", 0, MiB, v.finish + 0.052)  # host turnaround 2 ms after the answer
    assert v2.finish == pytest.approx(2 * MiB / (10 * MB))
    c.answered(v2.finish + 0.052)
    v3 = c.request("write", 0, MiB, v2.finish + 0.052 + 0.5)  # a real pause: the bus was idle
    assert v3.finish == pytest.approx(v2.finish + 0.552 + MiB / (10 * MB))


def test_small_request_after_think_time_keeps_half_its_time():
    c = card(latency=0.001, read_rate=20 * MB)
    v = c.request("read", 0, 4096, 1.0)
    c.answered(v.finish)
    t = v.finish + 0.005  # 5 ms think time: within the allowance, but more than the request takes
    v2 = c.request("read", 0, 4096, t)
    duration = 0.001 + 4096 / (20 * MB)
    assert v2.finish - t == pytest.approx(duration / 2)


def test_isolated_request_sees_full_latency():
    c = card(latency=0.005, read_rate=10 * MB)
    c.request("read", 0, 4096, 10.0)
    v = c.request("read", 0, 4096, 11.0)  # long after the bus was free
    assert v.finish - 11.0 == pytest.approx(0.005 + 4096 / (10 * MB))


def test_queued_requests_share_one_bus_for_reads_and_writes():
    c = card(write_rate=10 * MB, read_rate=20 * MB)
    a = c.request("write", 0, MiB, 5.0)
    b = c.request("read", 0, MiB, 5.0)
    assert a.finish == pytest.approx(5.0 + MiB / (10 * MB))
    assert b.finish == pytest.approx(a.finish + MiB / (20 * MB))


def test_write_cache_fast_then_slow_and_refills_after_idle():
    c = card(write_rate=2 * MB, cache_bytes=4 * MiB, cache_rate=40 * MB, cache_idle=1.0)
    t = 0.0
    v = c.request("write", 0, 4 * MiB, t)
    assert v.finish - t == pytest.approx(4 * MiB / (40 * MB))
    t2 = v.finish
    v = c.request("write", 0, MiB, t2)
    assert v.finish - t2 == pytest.approx(MiB / (2 * MB))  # cache used up
    t4 = v.finish + 0.5  # short pause: no refill
    v = c.request("write", 0, MiB, t4)
    assert v.finish - t4 == pytest.approx(MiB / (2 * MB))
    t3 = v.finish + 1.5  # idle long enough
    v = c.request("write", 0, MiB, t3)
    assert v.finish - t3 == pytest.approx(MiB / (40 * MB))
    assert c.counters.bytes_cached == 5 * MiB


def test_reader_ceiling_is_shared():
    reader = ReaderModel(ceiling=10 * MB)
    a = reader.add(CardSpec(size=16 * MiB, write_rate=100 * MB, read_rate=100 * MB, name="a"))
    b = reader.add(CardSpec(size=16 * MiB, write_rate=100 * MB, read_rate=100 * MB, name="b"))
    va = a.request("read", 0, MiB, 0.0)
    vb = b.request("read", 0, MiB, 0.0)
    assert va.finish == pytest.approx(MiB / (10 * MB))
    assert vb.finish == pytest.approx(2 * MiB / (10 * MB))


def test_errors_and_yank():
    c = card(errors=[(MiB, 2 * MiB, "read"), (3 * MiB, 4 * MiB, "write")])
    assert c.request("read", MiB - 512, 1024, 0).error
    assert not c.request("write", MiB, 4096, 0).error
    assert c.request("write", 3 * MiB + 4096, 4096, 0).error
    assert not c.request("read", 2 * MiB, 4096, 0).error
    c.yanked = True
    assert c.request("read", 0, 512, 0).error
    assert c.counters.eio == 3


def test_unpaced_answers_at_once():
    c = card(write_rate=1 * MB)
    c.apply(validate_settings({"paced": False}))
    assert c.request("write", 0, 8 * MiB, 3.0).finish == 3.0


@pytest.mark.parametrize("kw", [
    {"size": 1000},                                    # not a multiple of 512
    {"size": 16 * MiB, "real_size": 16 * MiB},        # not smaller
    {"write_rate": 0},
    {"read_rate": -1},
    {"latency": -0.1},
    {"fake_mode": "mirror"},
    {"cache_bytes": MiB},                              # no cache rate
    {"errors": [(5, 1, "read")]},
    {"errors": [(0, 10, "sideways")]},
    {"name": "../x"},
])
def test_bad_specs_are_usage_errors(kw):
    with pytest.raises(UsageError):
        CardSpec(**{"size": 16 * MiB, "write_rate": MB, "read_rate": MB, **kw})


def test_spec_json_round_trip():
    spec = CardSpec(size=16 * MiB, write_rate=MB, read_rate=2 * MB, real_size=4 * MiB, fake_mode="drop",
                    cache_bytes=MiB, cache_rate=10 * MB, errors=[(0, 512, "both")], name="x")
    assert CardSpec.from_json(spec.to_json()) == spec
    assert parse_errors([ErrorRange(1, 2, "read")]) == (ErrorRange(1, 2, "read"),)
