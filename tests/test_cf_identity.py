"""A CompactFlash card that answered ATA IDENTIFY is known by model + serial + sectors: in the
result and verify documents, in the store, and in ``results --card`` and ``compare``. Where it did
not answer, the result says so and the old identity stands."""

from __future__ import annotations

import json

import pytest

from ata_blocks import build_identify
from cardbench.devices.ata import AtaProbe, decode_identify, read_identify
from cardbench.devices.identity import apply_ata
from cardbench.result import Card, Reader, Result, Run, TestResult
from cardbench.store import open_store
from realparts import ROOT, call_cli, loop_device

MB = 1_000_000


def answered(**fields) -> AtaProbe:
    """What read_identify gives for a card that answered: the block decoded as the probe does."""
    ident = decode_identify(build_identify(**fields))
    return AtaProbe("/dev/sdz", "answered", "answered IDENTIFY DEVICE", ident, "ATA PASS-THROUGH (16)")


def cf_result(serial: str, read_rate: float, *, model: str = "SanDisk SDCFB-256", label: str | None = None) -> Result:
    card, target = Card(label=label, capacity_bytes=256_376_832), {"kind": "device", "path": "/dev/sdz"}
    apply_ata(card, answered(model=model, serial=serial, sectors=500_736, mdma=-1, udma=-1), target)
    runs = [Run(16 * MB, 16 * MB / (read_rate * (1 + 0.01 * i))) for i in range(3)]
    return Result(target=target, card=card, reader=Reader(name="Generic CF reader", vendor_id="058f",
                                                          product_id="6362", serial="058F63626376"),
                  tests=[TestResult("raw_read", {"engine": "sync"}, runs=runs)])


def test_two_cards_of_one_make_and_size_in_one_reader_are_two_cards():
    a, b = cf_result("111AAA", 3.6 * MB), cf_result("222BBB", 3.7 * MB)
    assert a.card.identity() == "ata:SanDisk SDCFB-256|111AAA|500736"
    assert a.card.identity() != b.card.identity()
    assert a.reader.identity() == b.reader.identity()
    # what the card said is kept, and the user's own fields stand
    assert a.card.model == "SanDisk SDCFB-256" and a.card.serial == "111AAA"
    assert a.card.ata["mode"] == {"kind": "PIO", "number": 4, "selected": False, "name": "PIO 4"}
    assert a.target["ata_identify"]["status"] == "answered"


def test_the_users_names_are_not_overwritten():
    card = Card(model="my own name", serial="typed-serial")
    apply_ata(card, answered(serial="X1"))
    assert card.model == "my own name" and card.serial == "typed-serial"
    assert card.identity().startswith("ata:SanDisk SDCFB-256|X1|")


def test_result_json_round_trip_and_old_documents_keep_their_identity():
    r = cf_result("111AAA", 3.6 * MB)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["card"]["ata"]["serial"] == "111AAA" and doc["card"]["identity"].startswith("ata:")
    assert Result.from_dict(doc).to_dict() == doc
    old = {"name": None, "brand": "Lexar", "capacity_bytes": 48_000_000, "label": "4X", "serial": None,
           "model": None, "identity": "user:Lexar||48000000|4X"}     # a card of a document without "ata"
    assert Card.from_dict(old).identity() == old["identity"] and Card.from_dict(old).ata is None


@pytest.mark.skipif(not ROOT, reason="needs root for loop devices")
def test_a_card_that_does_not_answer_is_said_so_and_keeps_the_old_identity():
    with loop_device(8 << 20) as dev:
        probe = read_identify(dev)
    card, target = Card(brand="Lexar", capacity_bytes=8 << 20, label="4X"), {}
    before = card.identity()
    apply_ata(card, probe, target)
    assert target["ata_identify"]["status"] == "not available"
    assert target["ata_identify"]["reason"].startswith("not ATA: ")
    assert card.ata is None and card.identity() == before == "user:Lexar||8388608|4X"


def test_store_results_card_and_compare_tell_the_two_cards_apart(db_path):
    a1, a2, b = cf_result("111AAA", 3.6 * MB), cf_result("111AAA", 3.65 * MB), cf_result("222BBB", 5.0 * MB)
    with open_store(db_path) as store:
        for r in (a1, a2, b):
            store.save(r)
        identities = sorted(c["identity"] for c in store.cards())
        assert identities == ["ata:SanDisk SDCFB-256|111AAA|500736", "ata:SanDisk SDCFB-256|222BBB|500736"]
        assert {r.id for r in store.results(card="111AAA")} == {a1.id, a2.id}
        assert [r.id for r in store.results(card="ata:SanDisk SDCFB-256|222BBB|500736")] == [b.id]
        again = store.get(b.id)
        assert again.card.ata == b.card.ata and again.card.identity() == b.card.identity()
    proc = call_cli("results", "--card", "222BBB", "--db", db_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    shown = shown["results"] if isinstance(shown, dict) else shown
    assert [r["id"] for r in shown] == [b.id]
    proc = call_cli("compare", "111AAA", "222BBB", "--db", db_path, "--by", "card")
    assert proc.returncode == 0, proc.stderr
    assert "2 runs, 1 card" in proc.stdout and "1 run, 1 card" in proc.stdout
