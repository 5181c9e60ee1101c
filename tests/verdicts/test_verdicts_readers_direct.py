"""Direct evidence of a reader's ceiling: the same card through two readers, and cards read at
once (judge_shared), beside the clustering; and the drawer's recall of a card by identity."""

from __future__ import annotations

import pytest

from cardbench.drawer import recall
from cardbench.evidence import VERDICT_KEYS
from cardbench.report.readers import render_readers
from cardbench.result import Card, Reader, Result
from cardbench.verdicts.ceiling import ceilings_for
from cardbench.verdicts.readers import judge_shared, reader_ceilings
from verdicts_helpers import make_test

M = 1_000_000
FAST, CAPPED = Reader(name="fast"), Reader(name="capped")


def res(card: Card, reader: Reader, read_mb: float, write_mb: float | None = None, source: str = "run") -> Result:
    tests = [make_test("raw_read", [read_mb * M] * 3)]
    if write_mb is not None:
        tests.append(make_test("seq_write", [write_mb * M] * 3))
    return Result(target={"kind": "device"}, card=card, reader=reader, tests=tests, source=source)


def entry(rows, name):
    return next(e for e in rows if e["name"] == name)


def own(name: str, serial: str) -> Card:
    """A card known by its own identity (an SD card's CID)."""
    return Card(name=name, serial=serial, serial_source="cid", capacity_bytes=64 * M)


def test_same_card_faster_through_another_reader_caps_the_slower_one():
    known = Card(brand="Known", name="Fast", capacity_bytes=64 * M, serial="03-SD-0x1", serial_source="cid")
    rows = reader_ceilings([res(known, FAST, 24.0, 20.0), res(known, CAPPED, 9.0, 19.8)])
    capped = entry(rows, "capped")
    assert (capped["kind"], capped["confidence"], capped["direction"]) == ("same_card", "likely", "read")
    assert capped["ceiling_bytes_per_s"] == pytest.approx(9 * M)
    assert "24 MB/s through the other reader (fast)" in capped["evidence"]
    # writes differ by 1%: no write ceiling from this card; the fast reader gets none at all
    assert [f["direction"] for f in capped["direct"]] == ["read"]
    assert entry(rows, "fast")["ceiling_bytes_per_s"] is None
    # a "likely" direct ceiling marks the capped reader's results, as a clustered one does
    c = ceilings_for(res(known, CAPPED, 9.0), rows)
    assert c["read"].typical_bytes_per_s == pytest.approx(9 * M)


def test_a_card_faster_through_the_capped_reader_makes_it_only_possible():
    known, other = own("known", "1"), own("other", "2")
    rows = reader_ceilings([res(known, FAST, 24.0), res(known, CAPPED, 9.0), res(other, CAPPED, 15.0)])
    capped = entry(rows, "capped")
    assert capped["confidence"] == "possible" and "no hard limit" in capped["evidence"]


@pytest.mark.parametrize("card,source", [
    (Card(capacity_bytes=128 * 1024 * 1024), "run"),                   # size only: `user:||134217728|`
    (Card(brand="Known", capacity_bytes=64 * M), "run"),               # a brand, no name
    (Card(brand="Known", capacity_bytes=64 * M, label="4X"), "run"),   # a brand and a label, no name
    (Card(serial="S1", capacity_bytes=64 * M), "run"),                 # a serial typed, not read from the card
    (Card(brand="Known", name="Fast", capacity_bytes=64 * M), "import"),   # a name read from an imported file
    (Card(name="Fast", capacity_bytes=64 * M), "demo"),                # a name the program gave
])
def test_the_same_card_needs_the_cards_own_identity_or_a_name_typed(card, source):
    """Issue 24: two sticks of one size, each taken for a reader holding an anonymous card, named a
    false ceiling ("the same card through two readers"). Without the card's own identity (CID,
    ATA serial, a stick's USB serial) or a name the person typed, two records are not the same card."""
    rows = reader_ceilings([res(card, FAST, 8.0, 8.0, source), res(card, CAPPED, 4.0, 4.0, source)])
    assert all(e["direct"] == [] for e in rows)
    assert all(e["ceiling_bytes_per_s"] is None for e in rows)
    assert not any("same card" in e["evidence"] for e in rows)


def test_a_name_the_person_typed_makes_the_same_card_and_the_verdict_says_so():
    """Issue 30: `run --name yardstick-1 --reader fast-reader`, then the same card, same name,
    through `--reader slow-reader` (most USB CF readers pass no ATA serial): the person's word makes
    it one card, and the verdict says it rests on that name."""
    named = Card(name="yardstick-1", capacity_bytes=256 * 1024 * 1024)
    fast, slow = Reader(name="fast-reader"), Reader(name="slow-reader")
    rows = reader_ceilings([res(named, fast, 30.0, 25.0), res(named, slow, 12.0, 11.8)])
    s = entry(rows, "slow-reader")
    assert (s["kind"], s["confidence"], s["direction"]) == ("same_card", "likely", "read")
    assert s["ceiling_bytes_per_s"] == pytest.approx(12 * M)
    assert s["rests_on"] == ["yardstick-1, as you named it"]
    assert s["evidence"].startswith("the same card through two readers: yardstick-1, as you named it, reads 30 MB/s "
                                    "through the other reader (fast-reader) but 12 MB/s here")
    assert [(f["direction"], f["cards"][0]["rests_on"]) for f in s["direct"]] == [("read", "name"), ("write", "name")]
    assert entry(rows, "fast-reader")["ceiling_bytes_per_s"] is None
    text = render_readers(rows, "table", width=200)
    assert ("slow-reader: caps reads at 12 MB/s (likely, the same card through another reader; 1 of 1 cards reach "
            "it); it rests on yardstick-1, as you named it.") in text
    assert "yardstick-1, as you named it, reads 30 MB/s through the other reader (fast-reader)" in text
    # a drawer session keeps the verdict said at its end, and says what it rested on as well
    session = {"started_at": "2026-12-03T15:00:00+00:00", "cards": [],
               "reader_verdict": [{k: e.get(k) for k in VERDICT_KEYS} for e in rows]}
    text = render_readers(rows, width=400, sessions=[session])
    assert ("; slow-reader: caps reads at 12 MB/s (likely, the same card through another reader; 1 of 1 cards reach "
            "it); it rests on yardstick-1, as you named it.") in text.splitlines()[-2]
    # another name is another card
    other = Card(name="yardstick-2", capacity_bytes=256 * 1024 * 1024)
    rows = reader_ceilings([res(named, fast, 30.0), res(other, slow, 12.0)])
    assert all(e["direct"] == [] for e in rows)
    # a card known by its own identity rests on no name
    rows = reader_ceilings([res(own("sd", "03-SD-0x1"), fast, 30.0), res(own("sd", "03-SD-0x1"), slow, 12.0)])
    slow = entry(rows, "slow-reader")
    assert slow["kind"] == "same_card" and slow["rests_on"] == [] and "as you named it" not in slow["evidence"]


def test_a_stick_is_no_reader():
    stick = Reader(name="none: a USB stick (QEMU QEMU USB HARDDRIVE #S1)", vendor_id="46f4", product_id="0001",
                   serial="S1", kind="stick")
    card = Card(serial="S1", serial_source="usb", capacity_bytes=128 << 20)
    assert reader_ceilings([res(card, stick, 4.0, 4.0)]) == []


def test_within_the_gap_is_no_evidence():
    known = Card(name="known")
    rows = reader_ceilings([res(known, FAST, 10.0), res(known, CAPPED, 9.5)])
    assert entry(rows, "capped")["direct"] == [] and entry(rows, "capped")["ceiling_bytes_per_s"] is None


def measured(alone, together):
    rows = [{"device": f"/dev/sd{c}", "alone_bytes_per_s": a * M, "together_bytes_per_s": t * M}
            for c, a, t in zip("bc", alone, together, strict=True)]
    total = sum(together)
    return {"devices": rows, "alone_sum_bytes_per_s": sum(alone) * M, "alone_max_bytes_per_s": max(alone) * M,
            "together_bytes_per_s": total * M, "together_seconds": 2.0}


@pytest.mark.parametrize("alone,together,confidence,ceiling", [
    ((20, 20), (10, 10), "likely", 20),     # together no more than one card: the shared path is the limit
    ((20, 20), (20, 20), "none", None),     # they add up: the path carries both
    ((20, 20), (14, 14), "possible", 28),   # between one and the sum
])
def test_cards_read_at_once(alone, together, confidence, ceiling):
    f = judge_shared(measured(alone, together))
    assert f["confidence"] == confidence
    assert f["ceiling_bytes_per_s"] == (ceiling * M if ceiling else None)


def test_probe_findings_join_their_reader():
    f = judge_shared(measured((20, 20), (10, 10)))
    f["reader_identity"] = CAPPED.identity()
    rows = reader_ceilings([res(Card(name="a"), CAPPED, 20.0)], probes=[f])
    assert entry(rows, "capped")["kind"] == "probe" and entry(rows, "capped")["confidence"] == "likely"


def test_recall_by_serial_and_by_model_and_size(tmp_path):
    from cardbench.store import open_store
    with open_store(str(tmp_path / "s.sqlite3")) as store:
        store.save(res(Card(brand="Lexar", name="Pro", capacity_bytes=48 * M, label="4X", serial="ab-1"), FAST, 5))
        store.save(res(Card(brand="PNY", capacity_bytes=128 * M, model="USB reader LUN"), FAST, 5))
        cards = store.cards()
    got = recall(cards, Card(serial="ab-1", capacity_bytes=48 * M))
    assert (got.brand, got.name, got.label) == ("Lexar", "Pro", "4X")
    assert recall(cards, Card(serial="zz", capacity_bytes=48 * M)) is None
    assert recall(cards, Card(model="USB reader LUN", capacity_bytes=128 * M)).brand == "PNY"
    assert recall(cards, Card(model="USB reader LUN", capacity_bytes=256 * M)) is None
