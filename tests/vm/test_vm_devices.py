"""One boot, the kernel's own drivers: `list --json` sees an SD card's CID/CSD through mmc, sticks
on usb-storage (xHCI and EHCI, 480 Mbit/s) and a disk on uas, an ATA disk through libata
(IDENTIFY answered); run and verify name each card and reader alike; `readers --probe` on two
sticks in one throttle group names their shared ceiling on the controller they share. The
filesystem runs are in test_vm_filesystems.py."""

from __future__ import annotations

import textwrap

import pytest

from vm_helpers import boot
from vmharness import Drive

MB = 1_000_000
#: the throttle group two sticks share (QEMU's throttle: bytes/s both ways; every drive of a
#: group gives the same limits, the last one given is the group's)
GROUP = 8 * MB


@pytest.fixture(scope="module")
def guest(request):
    return boot(request, drives=[
        Drive("sd", 64 << 20), Drive("st1", 64 << 20), Drive("uas1", 64 << 20),
        Drive("st2", 64 << 20), Drive("ata1", 64 << 20),
        Drive("q1", 64 << 20, read_bps=GROUP, write_bps=GROUP, group="tg8"),
        Drive("q2", 64 << 20, read_bps=GROUP, write_bps=GROUP, group="tg8")],
        devices=["sdhci-pci", "sd-card,drive=sd",
                 "qemu-xhci,id=xhci", "usb-storage,bus=xhci.0,drive=st1,serial=S1",
                 "usb-uas,bus=xhci.0,id=uas", "scsi-hd,bus=uas.0,scsi-id=0,lun=0,drive=uas1,serial=U1",
                 "ich9-usb-ehci1,id=ehci", "usb-storage,bus=ehci.0,drive=st2,serial=S2",
                 "ahci,id=ahci", "ide-hd,bus=ahci.0,drive=ata1,serial=ATA-SERIAL-1,model=CF-like ATA disk",
                 "usb-storage,bus=xhci.0,drive=q1,serial=Q1", "usb-storage,bus=xhci.0,drive=q2,serial=Q2"])


@pytest.fixture(scope="module")
def listed(guest):
    r = guest.cardbench("list", "--json", timeout=180)
    assert r.rc == 0, r.stderr
    return {d["name"]: d for d in r.json()["devices"]}


def by_serial(listed, serial):
    return next(d for d in listed.values() if d.get("serial") == serial or (d.get("usb") or {}).get("serial") == serial)


def test_sd_card_registers_through_mmc(listed):
    sd = listed["mmcblk0"]
    card = sd["card"]
    assert sd["transport"] == "mmc" and card["type"] == "SD"
    assert card["raw"]["cid"] and card["raw"]["csd"]
    assert card["cid"]["serial_hex"] == "0xdeadbeef" and card["cid"]["oem_id"] == "XY"
    assert card["csd"]["capacity_bytes"] == 64 << 20


def test_sticks_and_uas_under_their_drivers_and_links(listed):
    s1, s2 = by_serial(listed, "S1"), by_serial(listed, "S2")
    u1 = next(d for d in listed.values() if (d.get("usb") or {}).get("driver") == "uas")
    assert (s1["usb"]["driver"], s1["usb"]["speed"]) == ("usb-storage", "5000")
    assert (s2["usb"]["driver"], s2["usb"]["speed"]) == ("usb-storage", "480")
    assert s2["usb"]["link_ceiling_bytes_per_s"] == 53_248_000
    assert u1["usb"]["driver"] == "uas" and u1["usb"]["protocol"] == "UAS"
    # QEMU's disks are not removable (RMB 0): each USB device is its card, said by `list`
    assert [d["holder"]["kind"] for d in (s1, s2, u1)] == ["stick"] * 3
    assert listed["mmcblk0"]["holder"] is None


def test_ata_disk_through_libata_answers_identify(listed):
    ata = by_serial(listed, "ATA-SERIAL-1")
    assert ata["transport"] == "sata"
    ident = ata["ata"]["identify"]
    assert ata["ata"]["status"] == "answered" and ident["serial"] == "ATA-SERIAL-1"


IDENTITIES = textwrap.dedent("""
    import json
    from cardbench.devices import list_devices
    from cardbench.devices.identity import identify
    from cardbench.result import Card, Reader
    from cardbench.verify.doc import identity
    out = {}
    for d in list_devices():
        if d.transport in ("usb", "mmc", "sata"):
            card, reader = Card(), Reader()
            identify(d, card, reader)
            vcard, vreader = identity(d)
            out[d.name] = {"run": [card.identity(), reader.identity(), reader.name, reader.kind],
                           "verify": [vcard.identity(), vreader.identity(), vreader.name, vreader.kind],
                           "own": card.own_identity(), "sd": card.sd}
    print(json.dumps(out))
""")


def test_run_and_verify_name_each_card_and_reader_alike(guest, listed):
    r = guest.run("python3", "-c", IDENTITIES, timeout=120)
    assert r.rc == 0, r.stderr
    got = r.json()
    for name, v in got.items():
        assert v["run"] == v["verify"], name
    s1 = got[by_serial(listed, "S1")["name"]]
    # QEMU's usb-storage: the medium is not removable, so the stick is the card (issue 24)
    assert s1["run"][0] == f"serial:S1:{64 << 20}" and s1["run"][3] == "stick" and s1["own"]
    assert got["mmcblk0"]["run"][0] == f"serial:aa-XY-0xdeadbeef:{64 << 20}"
    assert got["mmcblk0"]["sd"]["manufactured"] == "2006-02" and got["mmcblk0"]["sd"]["raw"]["cid"]


def test_probe_of_two_sticks_in_one_throttle_group_names_their_shared_ceiling(guest, listed):
    """Two sticks (serials Q1, Q2) whose drives share one QEMU throttle group of 8 MB/s are two
    slots of one path with a ceiling: `readers --probe` names it, within 5%, on the USB host
    controller both are behind (not on one of the sticks: each is a card), and a later `readers`
    weighs the stored probe under that controller."""
    q1, q2 = by_serial(listed, "Q1"), by_serial(listed, "Q2")
    db = "/tmp/home/probe.sqlite"
    # 6 s alone each; at once 2 x 48 MB at 8 MB/s: >= 10 s (QEMU lets ~0.1 s through unthrottled)
    r = guest.cardbench("readers", "--probe", q1["path"], q2["path"], "--seconds", "6", "--json", "--db", db,
                        timeout=400)
    assert r.rc == 0, r.stderr[-2000:]
    f = r.json()
    m = f["measured"]
    print(f"probe: together {m['together_bytes_per_s'] / MB:.3f} MB/s over {m['together_seconds']:.1f} s, "
          f"alone {[round(d['alone_bytes_per_s'] / MB, 3) for d in m['devices']]} MB/s; "
          f"ceiling {f['ceiling_bytes_per_s'] / GROUP:.3f} of the group's; reader {f['reader']!r}")
    assert m["together_seconds"] >= 10
    assert f["confidence"] == "likely" and abs(f["ceiling_bytes_per_s"] / GROUP - 1) <= 0.05, f["evidence"]
    # the path they share: the xHCI controller (QEMU's PCI ids 1b36:000d) at its PCI address, not stick Q1
    assert f["reader_identity"].startswith("usb:1b36:000d:0000:"), f["reader_identity"]
    assert f["reader"].startswith("USB host controller 0000:"), f["reader"]
    r = guest.cardbench("readers", "--json", "--db", db, timeout=120)
    assert r.rc == 0, r.stderr
    [row] = r.json()
    assert row["identity"] == f["reader_identity"] and row["kind"] == "probe" and row["confidence"] == "likely"
    assert row["ceiling_bytes_per_s"] == pytest.approx(f["ceiling_bytes_per_s"])
