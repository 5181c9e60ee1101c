"""One boot, the kernel's own drivers: `list --json` sees an SD card's CID/CSD through mmc, sticks
on usb-storage (xHCI and EHCI, 480 Mbit/s) and a disk on uas, an ATA disk through libata
(IDENTIFY answered); run and verify name each card and reader alike; `readers --probe` on two
sticks in one throttle group names their shared ceiling on the controller they share; `geometry`
on the SD card finds no AU in QEMU's flat read timing and none declared (AU_SIZE 0). The
filesystem runs are in test_vm_filesystems.py."""

from __future__ import annotations

import textwrap

import pytest

from cardbench.devices.registers import decode_ssr
from cardbench.geometry.doc import check_doc
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


def test_geometry_of_the_sd_card_through_mmc(guest):
    """`cardbench geometry` on the SD card behind the kernel's sdhci/mmc driver, read-only.
    QEMU 7.2's sd-card answers an all-zero SD Status: AU_SIZE 0, no AU declared. The kernel then
    sets preferred_erase_size from the capacity alone (512 KiB under 128 MiB, mmc_init_erase):
    geometry must not take that guess for the card's word. QEMU serves every read in the same
    time, so the timing finds no AU (never a false one) and says nothing of agreement. Kept
    short for a TCG guest: AUs up to 4 MiB, 2 tries of each read a round."""
    sysfs = "/sys/block/mmcblk0/device"
    r = guest.run("sh", "-c", f"cat {sysfs}/preferred_erase_size {sysfs}/ssr", timeout=60)
    assert r.rc == 0, r.stderr
    erase, ssr = r.stdout.split()
    erase, status = int(erase), decode_ssr(ssr)
    r = guest.cardbench("geometry", "/dev/mmcblk0", "--json", "--max-au", "4MiB", "--repeats", "2",
                        "--seed", "1", "--no-save", timeout=600)
    assert r.rc == 0, r.stderr[-2000:]
    doc = r.json()
    m = doc["method"]
    print(f"geometry on mmcblk0: declared {doc['declared_au_bytes']} ({doc['declared_au_source']}; sysfs "
          f"preferred_erase_size {erase} B, SSR AU_SIZE code {status.au_size_code}); "
          f"AU {doc['allocation_unit_bytes']} ({doc['allocation_unit_confidence']}), page {doc['page_bytes']} "
          f"({doc['page_confidence']}), timing_agrees {doc['timing_agrees']}; reads of {m['read_bytes']} B, "
          f"{m['repeats']} tries, floor {m['read_floor_seconds'] * 1e6:.0f} us, {m['au_boundaries']} + "
          f"{m['page_boundaries']} boundaries, read pass {m['read_seconds']:.1f} s, in all {doc['seconds']:.1f} s "
          f"({r.seconds:.1f} s with Python's start and identify)\n  {doc['message']}\n  notes: {doc['notes']}")
    assert check_doc(doc) == [] and doc["complete"] and doc["error"] is None
    assert doc["size_bytes"] == 64 << 20 and doc["card"]["serial"] == "aa-XY-0xdeadbeef"
    assert doc["card"]["sd"]["raw"]["cid"]     # the registers, kept with the record (an object)
    # what the driver gives: an SD Status with AU_SIZE 0, and the kernel's guess for 64 MiB
    assert status.au_size_code == 0 and status.au_size_bytes is None and erase == 512 << 10
    assert (doc["declared_au_bytes"], doc["declared_au_confidence"]) == (None, "none")
    assert doc["declared_au_source"] == "SD Status AU_SIZE 0"
    assert any("preferred_erase_size (512 KiB) is its guess from the capacity" in n for n in doc["notes"])
    # flat timing: no AU found, so no verdict on agreement, and the answer says both
    assert (doc["allocation_unit_bytes"], doc["allocation_unit_confidence"]) == (None, "none")
    assert doc["timing_agrees"] is None
    assert doc["message"].startswith("no boundary found") and "flat" in doc["message"]
    assert "declares no AU (its SD Status AU_SIZE is 0)" in doc["message"]
    assert "agrees" not in doc["message"] and "disagrees" not in doc["message"]
    # the advice aligns on the SD spec's AU for the capacity, not on the kernel's guess
    assert doc["advice"]["alignment_basis"].startswith("the SD spec's largest AU")
