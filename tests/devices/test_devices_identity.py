"""The one identity rule (issue 24) on the fixture laptop's sysfs: a stick is a card with its USB
identity, a reader a USB device that outlives its media; run, verify and the drawer name a card
and its reader alike; the SD registers travel with the card."""

from __future__ import annotations

import os
import shutil

import pytest

from cardbench.devices import list_devices
from cardbench.devices.ata import AtaProbe
from cardbench.devices.holder import SessionHint, classify_holder
from cardbench.devices.identity import identify
from cardbench.result import Card, Reader, Result, Run, TestResult
from cardbench.verify.doc import identity as verify_identity
from devices_helpers import LAPTOP_LSBLK, LAPTOP_PROC, LAPTOP_SYS


def devices(sys_root=LAPTOP_SYS):
    out = {}
    for d in list_devices(sys_root, LAPTOP_LSBLK, proc_root=LAPTOP_PROC):
        d.ata = AtaProbe(device=d.path, status="not available", reason="fixture")   # never ask the host
        out[d.name] = d
    return out


@pytest.fixture(scope="module")
def devs():
    return devices()


def ident(dev, hint=None):
    card, reader, target = Card(), Reader(), {}
    identify(dev, card, reader, target, hint=hint)
    return card, reader, target


def test_a_two_slot_reader_is_a_reader_and_its_card_is_anonymous(devs):
    card, reader, target = ident(devs["sdb"])
    assert reader.kind == "reader" and "2 LUNs on one USB device" in reader.kind_evidence
    assert card.serial is None and not card.own_identity()
    assert card.identity() == f"user:||{devs['sdb'].size}|"
    # readers of one make are told apart by their serial, in the name every table shows
    assert reader.name == "Generic USB3.0 Card Reader #000000001536"
    assert target["holder"]["kind"] == "reader"


def test_an_empty_slot_is_a_reader(devs):
    kind, evidence = classify_holder(devs["sdc"])
    assert kind == "reader" and "an empty slot (size 0)" in evidence


def test_a_stick_whose_medium_is_fixed_is_a_card_with_its_usb_identity(tmp_path):
    root = tmp_path / "laptop"
    shutil.copytree(os.path.dirname(LAPTOP_SYS), root, symlinks=True)
    sysfs = str(root / "sys")
    with open(os.path.join(os.path.realpath(os.path.join(sysfs, "block", "sde")), "removable"), "w") as f:
        f.write("0\n")
    dev = devices(sysfs)["sde"]
    card, reader, _ = ident(dev)
    assert reader.kind == "stick"
    assert card.serial == "4C530001230913117385" and card.serial_source == "usb" and card.own_identity()
    assert card.identity() == f"serial:4C530001230913117385:{dev.size}"
    assert reader.name.startswith("none: a USB stick")


def test_a_removable_stick_on_one_lun_is_unsure_and_said_so(devs):
    card, reader, target = ident(devs["sde"])
    assert reader.kind == "unsure" and "single-slot reader" in reader.kind_evidence[0]
    assert card.identity() == f"serial:4C530001230913117385:{devs['sde'].size}"
    assert target["holder"] == {"kind": "unsure", "evidence": reader.kind_evidence}


def test_what_the_session_saw_decides(devs):
    _, reader, _ = ident(devs["sde"], SessionHint(arrived_with_medium=True))
    assert reader.kind == "stick"
    card, reader, _ = ident(devs["sde"], SessionHint(arrived_with_medium=True, medium_changed=True))
    assert reader.kind == "reader" and card.serial is None


def test_two_sticks_are_two_cards_and_name_no_reader_ceiling(devs):
    """The trial's false verdict: two sticks of one size read at 4 and 8 MB/s, each taken for a
    reader holding one anonymous card (`user:||134217728|`): 'the same card through two readers'."""
    from cardbench.verdicts.readers import reader_ceilings
    results = []
    for name, rate in (("sde", 8e6), ("sdf", 4e6)):
        card, reader, _ = ident(devs[name])
        results.append(Result(target={"kind": "device"}, card=card, reader=reader,
                              tests=[TestResult("raw_read", {}, [Run(int(rate), 1.0)] * 3)]))
    assert results[0].card.identity() != results[1].card.identity()
    rows = reader_ceilings(results)
    assert not any(e["ceiling_bytes_per_s"] for e in rows)
    assert not any("same card" in e["evidence"] for e in rows)


@pytest.mark.parametrize("name", ["sdb", "sdd", "sde", "sdf", "mmcblk0", "mmcblk1"])
def test_run_and_verify_name_the_same_card_and_reader(devs, name):
    card, reader, _ = ident(devs[name])
    vcard, vreader = verify_identity(devs[name])
    assert vcard.identity() == card.identity()
    assert vreader is not None and vreader.identity() == reader.identity() and vreader.name == reader.name


def test_the_sd_card_is_known_by_its_cid_and_carries_its_registers(devs):
    card, reader, _ = ident(devs["mmcblk0"])
    assert card.serial_source == "cid" and card.own_identity()
    assert card.identity().startswith("serial:") and card.serial.endswith("0x7e650771")
    sd = card.sd
    assert sd["raw"]["cid"] and sd["raw"]["csd"] and sd["manufactured"] and sd["serial"] == "0x7e650771"
    assert {"hwrev", "fwrev", "revision", "oem_id", "product_name"} <= set(sd)
    assert reader.kind == "native"
    # stored with every record: the result document carries it and reads it back
    back = Result.from_dict(Result(target={}, card=card, reader=reader).to_dict())
    assert back.card.sd == sd and back.card.identity() == card.identity() and back.reader.kind == "native"


def test_an_sd_card_stored_before_serial_source_keeps_its_own_identity():
    old = Card.from_dict({"serial": "03-SD-0x7e650771", "capacity_bytes": 64 << 30})
    assert old.serial_source is None and old.own_identity()
    assert not Card.from_dict({"serial": "S1", "capacity_bytes": 1}).own_identity()


def test_list_says_which_usb_devices_are_readers_and_which_may_be_sticks(devs):
    from cardbench.report.devices import reader_text
    assert devs["sdb"].to_dict()["holder"]["kind"] == "reader"
    assert devs["sde"].to_dict()["holder"]["kind"] == "unsure"
    assert devs["mmcblk0"].to_dict()["holder"] is None
    assert "a card reader" in reader_text(devs["sdb"], markup=False)
    assert "cannot tell" in reader_text(devs["sde"], markup=False)
