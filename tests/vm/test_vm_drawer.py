"""One boot, one drawer session on the kernel's own USB drivers, driven over QMP (issue 24):
two different sticks are two cards and a stick plugged again is recalled as itself, with no
reader verdict drawn from them; a reader (usb-bot, removable scsi-hd LUN) with cards swapped in
it is one reader and each card is noticed although the guest kernel polls nothing by itself; an
SD card put into the native slot is known by its CID, its registers stored with its result. Then
two sticks of one model and size run in turn are two cards with no reader ceiling named. (The
pull-outs are test_vm_pull.py's boot.)"""

from __future__ import annotations

import json

import pytest

from vm_helpers import boot, plug_stick
from vmharness import Drive

MB = 1_000_000
# identities are judged here, not rates: small images, sticks not throttled
STICK = 16 << 20
CARD = 32 << 20
DB = "/tmp/home/drawer.sqlite"


@pytest.fixture(scope="module")
def guest(request):
    return boot(request, drives=[Drive("slot0", 48 << 20)],
                 devices=["qemu-xhci,id=xhci", "usb-bot,id=rdr,bus=xhci.0,serial=RDR1",
                          "scsi-hd,id=lunA,bus=rdr.0,lun=0,drive=slot0,removable=on",
                          "sdhci-pci", "sd-card,id=sdcard,drive=sd0"],
                 extra=["-drive", "if=none,id=sd0"])      # an SD slot with no card at start


@pytest.fixture(scope="module")
def session(guest):
    """Start a drawer session, plug S1, S2, S1 again, then swap two cards into the reader;
    hand back (drawer lines, its stderr, `readers --json`, what the kernel polled)."""
    polled_before = guest.run("cat", "/sys/module/block/parameters/events_dfl_poll_msecs").stdout.strip()
    guest.run("sh", "-c", "cd /tmp && nohup python3 -m cardbench drawer --json --no-prompt --no-verify --runs 1 "
                          f"--settle 0 --cards 6 --db {DB} >/tmp/drawer.out 2>/tmp/drawer.err &")
    assert guest.wait_for("grep -q Watching /tmp/drawer.err", 120).rc == 0, guest.run("cat", "/tmp/drawer.err").stdout
    done = 0

    def card_done(timeout=240.0):
        nonlocal done
        done += 1
        r = guest.wait_for(f"test $(grep -c cardbench.drawer /tmp/drawer.out) -ge {done}", timeout)
        assert r.rc == 0, guest.run("tail", "-20", "/tmp/drawer.err").stdout

    for n, serial in enumerate(("S1", "S2", "S1")):
        node = f"st{serial}{n}"
        image = guest.image_path(f"stick-{serial}", STICK)
        guest.add_node(node, image)
        guest.plug(f"stick{n}", "usb-storage", node, bus="xhci.0", serial=serial)
        card_done()
        guest.unplug(f"stick{n}", node)
    for n in range(2):               # two cards of one size swapped into the reader's slot
        node = f"card{n}"
        guest.add_node(node, guest.image_path(node, CARD))
        guest.swap_medium("lunA", node, old_node=f"card{n - 1}" if n else None)
        card_done()
    guest.add_node("sdcard0", guest.image_path("sdcard0", CARD))       # an SD card into the native slot
    guest.qmp.cmd("blockdev-insert-medium", id="sdcard", **{"node-name": "sdcard0"})
    card_done()
    r = guest.wait_for("! pgrep -f '[c]ardbench drawer' >/dev/null", 120)   # [c]: not this shell itself
    assert r.rc == 0, guest.run("tail", "-20", "/tmp/drawer.err").stdout
    lines = [json.loads(x) for x in guest.run("cat", "/tmp/drawer.out").stdout.splitlines() if x.startswith("{")]
    err = guest.run("cat", "/tmp/drawer.err").stdout
    print("drawer lines:", [(x.get("device"), (x.get("result") or {}).get("card", {}).get("identity")) for x in lines])
    readers = guest.cardbench("readers", "--json", "--db", DB, timeout=120)
    assert readers.rc == 0, readers.stderr
    poll = guest.run("sh", "-c", "cat /sys/block/sd*/events_poll_msecs").stdout.split()
    return lines, err, readers.json(), polled_before, poll


def story(lines, err) -> str:
    """What the session did, for a failing check: each line's device and card, and the drawer's own words."""
    return "\n".join([f"{len(lines)} lines: " + repr([(x.get("device"), (x.get("result") or {}).get("card", {})
                                                        .get("identity")) for x in lines]), err[:4000]])


def test_two_sticks_are_two_cards_and_a_stick_again_is_itself(session):
    lines, err, readers, _, _ = session
    assert len(lines) == 6, story(lines, err)
    s1, s2, s1_again = (x["result"] for x in lines[:3])
    assert s1["card"]["identity"] == f"serial:S1:{STICK}" and s2["card"]["identity"] == f"serial:S2:{STICK}"
    assert s1_again["card"]["identity"] == s1["card"]["identity"]
    assert all(r["reader"]["kind"] == "stick" for r in (s1, s2, s1_again))
    assert "Testing card 3" in err and "(recalled from the store)" in err.split("Testing card 3", 1)[1].split("\n")[0]


def test_no_reader_verdict_from_sticks(session):
    lines, err, readers, _, _ = session
    assert not any("S1" in (r.get("identity") or "") or "S2" in (r.get("identity") or "") for r in readers)
    assert not any(r.get("ceiling_bytes_per_s") for r in readers), readers
    assert "same card" not in json.dumps(readers)


def test_cards_swapped_in_a_reader_are_each_noticed_behind_one_reader(session):
    lines, err, readers, polled_before, poll = session
    assert polled_before == "0"                      # the kernel polls nothing by itself here
    # the card in the reader when the session started is named, not skipped without a word
    assert "Already in: /dev/sda; not tested" in err
    assert "1000" in poll                            # the watcher asked it to
    swapped = [x["result"] for x in lines[3:5]]
    assert len(lines) == 6 and all(r["card"]["capacity_bytes"] == CARD for r in swapped), story(lines, err)
    assert all(r["reader"]["kind"] == "reader" for r in swapped)
    assert swapped[0]["reader"]["identity"] == swapped[1]["reader"]["identity"]
    assert "#RDR1" in swapped[0]["reader"]["name"]
    assert all(r["card"]["capacity_bytes"] == CARD for r in swapped)
    assert swapped[0]["reader"]["identity"] in [r["identity"] for r in readers]


def test_an_sd_card_is_known_by_its_cid_and_its_registers_are_stored(session):
    lines, err, readers, _, _ = session
    sd = lines[5]["result"]
    assert sd["card"]["identity"] == f"serial:aa-XY-0xdeadbeef:{CARD}" and sd["card"]["serial_source"] == "cid"
    regs = sd["card"]["sd"]
    assert regs["raw"]["cid"] == "aa585951454d552101deadbeef006200" and regs["raw"]["csd"]
    assert regs["manufactured"] == "2006-02" and regs["product_name"] == "QEMU!" and regs["fwrev"] == "0x1"
    assert sd["reader"]["kind"] == "native"


def test_two_sticks_of_one_model_run_in_turn_name_no_reader_ceiling(guest):
    """`run` on one stick, then on another of the same model and size (different serials), then
    `readers`: two sticks are two cards with no reader in common, so no reader ceiling is named.
    (Identities only, no rate is judged: small sticks, not throttled.)"""
    db = "/tmp/home/pair.sqlite"
    names = [plug_stick(guest, f"pair{serial}", serial, STICK) for serial in ("Q1", "Q2")]
    try:
        for dev in names:
            r = guest.cardbench("run", f"/dev/{dev}", "--runs", "1", "--db", db, timeout=300)
            assert r.rc == 0, r.stderr[-2000:]
        r = guest.cardbench("readers", "--json", "--db", db, timeout=120)
        assert r.rc == 0, r.stderr
        readers = r.json()
        print(f"run /dev/{names[0]}, run /dev/{names[1]}, readers: {json.dumps(readers)[:300]}")
        assert not any(x.get("ceiling_bytes_per_s") for x in readers), readers
        assert "same card" not in json.dumps(readers)
        r = guest.cardbench("results", "--json", "--db", db, timeout=120)
        ids = sorted(x["card"]["identity"] for x in r.json()["results"])
        assert ids == [f"serial:Q1:{STICK}", f"serial:Q2:{STICK}"], ids
    finally:
        for serial in ("Q1", "Q2"):
            guest.unplug(f"pair{serial}", f"pair{serial}")
