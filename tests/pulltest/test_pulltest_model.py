"""The pure parts: the emulator's volatile cache model (no FUSE, no sleeping) and the judging of
what a slot holds after a pull (a State built as a log would build it)."""

from __future__ import annotations

from cardbench.emulate.pacing import ReaderModel
from cardbench.emulate.spec import CardSpec
from cardbench.pulltest.doc import answer, build_doc, pull_result
from cardbench.pulltest.hostlog import Rec, State
from cardbench.units import MB, MiB


def _card(cache=64 * 1024, drain=1 * MB):
    reader = ReaderModel()
    return reader.add(CardSpec(size=16 * MiB, write_rate=100 * MB, read_rate=100 * MB, volatile_bytes=cache,
                               drain_rate=drain, flush="liar"))


def test_cache_waits_for_room_drains_in_order_and_a_pull_tears_the_one_draining():
    card = _card()
    t = 100.0
    for i in range(16):                                   # 16 x 4 KiB = the whole cache, at once
        assert card.accept_at(4096, t) == t
        card.cache_put([(i * 4096, 4096)], bytes([i]) * 4096, t)
    # full: the next write waits until the first entry drained (4096 B at 1 MB/s)
    assert abs(card.accept_at(4096, t) - (t + 0.004096)) < 1e-9
    assert abs(card.empty_at(t) - (t + 16 * 0.004096)) < 1e-9
    done = card.settle(t + 2.6 * 0.004096)                # two drained, the third 60% drained
    assert [off for off, _ in done] == [0, 4096]
    writes = card.cut(t + 2.6 * 0.004096)
    assert writes == [(8192, bytes([2]) * 2048)]          # the front of the third, whole sectors
    assert card.counters.bytes_lost == 14 * 4096 - 2048 and card.yanked and card.pending_bytes == 0


def test_reads_see_the_cache_over_the_store():
    card = _card()
    card.cache_put([(4096, 4096)], b"\x01" * 4096, 0.0)
    card.cache_put([(6144, 1024)], b"\x02" * 1024, 0.0)
    buf = bytearray(8192)
    card.overlay(0, buf)
    assert buf[:4096] == bytes(4096) and buf[4096:6144] == b"\x01" * 2048
    assert buf[6144:7168] == b"\x02" * 1024 and buf[7168:] == b"\x01" * 1024


def _state(slots: dict[int, list[tuple[int, int, float | None]]]) -> State:
    """slots: address -> [(record number, generation, acknowledged at or None)], in write order."""
    st = State({"e": "start", "uuid": "00" * 16, "layout": {}, "t": 0.0})
    for addr, recs in slots.items():
        for n, gen, acked in recs:
            st.add_rec(Rec(n, gen, addr, 8192, "large", 0.0, acked))
    return st


def test_judging_each_class():
    st = _state({
        0: [(1, 0, 1.0), (10, 1, 5.0)],        # acknowledged in this cycle, intact
        8192: [(2, 0, 1.0), (11, 1, 6.0)],     # acknowledged, the old record is there: lost
        16384: [(3, 0, 1.0), (12, 1, 7.0)],    # acknowledged, half new half old: torn
        24576: [(4, 0, 1.0), (13, 1, None)],   # in flight, half new half old: allowed, counted
        32768: [(5, 0, 1.0)],                  # from the setup, now garbage: old data damaged
        40960: [(6, 0, 1.0), (14, 1, None)],   # in flight, old intact: fine
    })
    found = {0: [10, 10], 8192: [2, 2], 16384: [12, 3], 24576: [13, 4], 32768: [5, None], 40960: [6, 6]}
    res, repair = pull_result(st, 1, 9.0, found)
    assert (res["acknowledged"], res["intact"], res["lost"], res["torn"]) == (3, 1, 1, 1)
    assert (res["in_flight"], res["in_flight_torn"], res["old_damaged"]) == (2, 1, 1)
    assert res["lost_ages_s"] == [3.0, 2.0]
    assert sorted(repair) == [8192, 16384, 24576, 32768, 40960]


def test_in_flight_over_a_lost_acknowledged_write():
    # record 11 (acknowledged) was overwritten by 12 (in flight); the slot holds 2 (older): 11 was lost
    st = _state({0: [(2, 0, 1.0), (11, 1, 4.0), (12, 1, None)]})
    res, _ = pull_result(st, 1, 9.0, {0: [2, 2]})
    assert (res["acknowledged"], res["lost"], res["in_flight"], res["lost_ages_s"]) == (1, 1, 1, [5.0])


def test_answers_in_words():
    st = _state({0: [(1, 0, 1.0), (10, 1, 5.0)], 8192: [(2, 0, 1.0), (11, 1, 6.0)]})
    for cycle, found in ((1, {0: [10, 10], 8192: [11, 11]}), (2, {0: [10, 10], 8192: [11, 11]})):
        res, _ = pull_result(st, cycle, 9.0, found)
        st.verified[cycle] = {"result": res}
        st.start["cycles"] = cycle
    doc = build_doc(st, None)
    assert doc["verdict"] == "keeps"
    assert doc["answer"] == "Keeps what it acknowledges: 0 of 2 acknowledged writes lost in 2 pulls"
    doc.update(lost=37, torn=0, acknowledged=1204, old_damaged=0, lost_ages_s=[1.9, 0.4, 0.1], verdict="loses",
               pulls=[{"lost": 1, "torn": 0, "old_damaged": 0}] * 3 + [{"lost": 0, "torn": 0, "old_damaged": 0}] * 7)
    assert answer(doc) == ("Loses acknowledged writes: 37 of 1,204 (up to 1.9 s old, median 0.4 s) in 3 of 10 "
                           "pulls; a flush does not make data durable on this card")

    doc["kernel"] = {"write_cache": "write through", "flush_sent": False}
    assert answer(doc).endswith("in 3 of 10 pulls; an acknowledged write is not durable on this card (the kernel "
                                'sends it no flush: write cache "write through")')
