"""What a CompactFlash card's transfer mode caps: ratings, the ceiling, the label's UDMA, readers."""

from __future__ import annotations

import pytest

from ata_blocks import OLD_PIO_CARD, UDMA_CARD, build_identify
from cardbench.devices.ata import decode_identify
from cardbench.result import Card, Reader
from cardbench.target import open_target
from cardbench.verdicts import check_result, reader_ceilings
from cardbench.verdicts.ceiling import interface_mode_ceiling, mode_rate
from cardbench.verdicts.ratings import ratings
from realparts import can_emulate, emulators_under
from verdicts_helpers import make_test, result_with

M = 1_000_000
USB2 = Reader(name="CF reader", vendor_id="058f", product_id="6362", link_speed_mbit=480, driver="usb-storage")


def ata(**fields) -> dict:
    return decode_identify(build_identify(**fields)).summary()


def card(**fields) -> Card:
    return Card(name=f"card {fields.get('serial', '')}", ata=ata(**fields))


@pytest.mark.parametrize("kind,numbers,expected", [
    ("PIO", range(5), [3.3, 5.2, 8.3, 11.1, 16.7]),
    ("MDMA", range(3), [4.2, 13.3, 16.7]),
    ("UDMA", range(8), [16.7, 25, 33.3, 44.4, 66.7, 100, 133, 167]),
])
def test_mode_rates_are_the_published_ones(kind, numbers, expected):
    assert [round(mode_rate(kind, n) / M, 1) for n in numbers] == expected


@pytest.mark.parametrize("kind,number", [("PIO", 5), ("PIO", 6), ("MDMA", 3), ("MDMA", 4), ("UDMA", 8)])
def test_unverified_cf_modes_have_no_rate(kind, number):
    assert mode_rate(kind, number) is None
    entry = ratings()[{"PIO": "cf_pio", "MDMA": "cf_mdma", "UDMA": "cf_udma"}[kind]].get(f"{kind}{number}")
    assert entry is None or (entry["verified"] is False and "not verified" in entry["note"])


def test_the_ceiling_is_the_mode_in_use():
    old = interface_mode_ceiling(ata(**OLD_PIO_CARD))
    assert old.typical_bytes_per_s == old.physical_bytes_per_s == mode_rate("PIO", 4)
    assert old.basis == "card-mode" and "no DMA selected" in old.label
    fast = interface_mode_ceiling(ata(**UDMA_CARD))
    assert fast.typical_bytes_per_s == mode_rate("UDMA", 4) and fast.label == "card mode UDMA 4"
    assert interface_mode_ceiling(ata(adv_pio=2, adv_pio_sel=2)) is None       # PIO 6: no verified rate
    assert interface_mode_ceiling(None) is None


def test_a_rate_at_the_mode_is_limited_by_the_cards_interface_mode():
    r = result_with(make_test("cold_read", [15.9 * M, 16.0 * M, 16.1 * M]), card=card(**OLD_PIO_CARD))
    check_result(r)
    t = r.test("cold_read")
    assert t.limited_by.startswith("limited by the card's interface mode (card mode PIO 4")
    assert any("the card's interface mode, not its flash, sets this figure" in w for w in t.warnings)


def test_a_rate_below_ninety_percent_of_the_mode_is_left_alone():
    r = result_with(make_test("cold_read", [14.0 * M] * 3), card=card(**OLD_PIO_CARD))
    check_result(r)
    assert r.test("cold_read").limited_by is None and r.test("cold_read").warnings == []


def test_a_rate_above_the_mode_is_a_cache():
    r = result_with(make_test("cold_read", [30 * M] * 3), card=card(**OLD_PIO_CARD))
    check_result(r)
    t = r.test("cold_read")
    assert t.limited_by is None
    assert any("implausible: faster than card mode PIO 4" in w and "cache" in w for w in t.warnings)


def test_behind_usb2_the_lower_line_of_each_kind_wins():
    udma3 = dict(UDMA_CARD, udma=3, udma_sel=3)
    # 48 MB/s: under USB 2.0's 53.2 MB/s physical line, but above UDMA 3's 44.4: a cache
    r = result_with(make_test("cold_read", [48 * M] * 3), card=card(**udma3), reader=USB2)
    check_result(r)
    assert any("faster than card mode UDMA 3 can carry" in w for w in r.test("cold_read").warnings)
    # 33 MB/s: the USB link's typical line (35 MB/s) is the lower one: the reader or bus limits it
    r = result_with(make_test("cold_read", [33 * M] * 3), card=card(**udma3), reader=USB2)
    check_result(r)
    assert r.test("cold_read").limited_by.startswith("limited by the reader or bus (USB 2.0")


def test_a_udma_label_is_checked_against_what_the_card_announces():
    more = result_with(make_test("cold_read", [30 * M] * 3), card=Card(label="UDMA6", ata=ata(**UDMA_CARD)))
    check_result(more)
    assert "label/card mismatch: the label says UDMA6, but the card itself does not announce UDMA 6 " \
           "(IDENTIFY word 88: UDMA 0-4)" in more.warnings
    same = result_with(make_test("cold_read", [30 * M] * 3), card=Card(label="UDMA4", ata=ata(**UDMA_CARD)))
    check_result(same)
    assert not [w for w in same.warnings if "mismatch" in w]
    assert "the card itself announces UDMA 4" in same.claims[0]["reason"]
    slower = result_with(make_test("cold_read", [30 * M] * 3),
                         card=Card(label="UDMA4", ata=ata(**dict(UDMA_CARD, udma_sel=2))))
    check_result(slower)
    assert "the reader uses UDMA 2, so it, not the card, caps the transfer mode" in slower.claims[0]["reason"]
    no_ata = result_with(make_test("cold_read", [30 * M] * 3), card=Card(label="UDMA6"))
    check_result(no_ata)
    assert not [w for w in no_ata.warnings if "mismatch" in w]


def _drawer(reads: list[float], writes: list[float], **fields):
    return [result_with(make_test("cold_read", [rd] * 3), make_test("seq_write", [wr] * 3), reader=USB2,
                        card=card(**dict(fields, serial=f"S{i}")))
            for i, (rd, wr) in enumerate(zip(reads, writes, strict=True))]


def test_reader_evidence_names_the_mode_that_explains_a_ceiling():
    found = reader_ceilings(_drawer([16.1 * M, 16.3 * M, 16.2 * M], [4 * M, 9 * M, 14 * M], **OLD_PIO_CARD))[0]
    read = found["findings"][0]
    assert found["confidence"] == "likely" and read["explained_by"] == "interface mode PIO 4"
    assert "the cards at it talk PIO 4 to the reader (16.7 MB/s at most" in found["evidence"]


def test_reader_evidence_says_when_the_mode_allows_more():
    found = reader_ceilings(_drawer([16.1 * M, 16.3 * M, 16.2 * M], [4 * M, 9 * M, 14 * M], **UDMA_CARD))[0]
    read = found["findings"][0]
    assert "explained_by" not in read and read["interface_modes"] == ["UDMA 4"]
    assert "which allows more: the transfer mode does not explain the ceiling" in found["evidence"]


@pytest.mark.slow
@pytest.mark.timing     # 16.2 MB/s measured against PIO 4's 16.7: a busy machine read it 8% low
@pytest.mark.needs_root
@pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE and loop devices (emulated cards)")
def test_measured_on_emulated_cards_at_and_above_the_mode(tmp_path):
    """Real raw reads of emulated cards, judged with the modes a PIO-only CF card announces: a card
    reading at 16 MB/s is limited by its interface mode; one reading 40 MB/s through PIO 4 is a cache."""
    from cardbench.emulate import EmulatedCard
    from cardbench.emulate.spec import CardSpec
    from cardbench.runner import DeviceOptions, run_device
    MiB = 1 << 20
    got = {}
    with emulators_under(tmp_path):
        for name, rate in (("at", 16.2 * M), ("above", 40 * M)):
            with EmulatedCard(CardSpec(size=32 * MiB, write_rate=10 * M, read_rate=rate, name=name)) as emu:
                opts = DeviceOptions(runs=1, warmup=0, positions=4, sample=2 * MiB, access_seconds=0.1,
                                     card=card(**dict(OLD_PIO_CARD, serial=name)))
                got[name] = run_device(open_target(emu.device, kinds=("device",), whole_device=True), opts).test("raw_read")
    assert got["at"].limited_by.startswith("limited by the card's interface mode")
    assert any("implausible: faster than card mode PIO 4" in w for w in got["above"].warnings)
