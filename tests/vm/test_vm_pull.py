"""Bad input on the real kernel (issue 24): a device pulled in the middle of each step. One boot:
a USB stick pulled (QMP ``device_del``) during a raw read, a file run on kernel vfat, the quick
verify of the raw stick, the full verify of a vfat directory on it and of the raw stick; an SD
card whose medium is taken out of the native slot (``blockdev-remove-medium``) during a raw run.
Each: one line on stderr, the partial record stored incomplete with its error (a verify: no verdict drawn from what
it could not read or write), no cardbench process left, nothing mounted by cardbench. And a
stick pulled mid test in a drawer session: that card stored incomplete, the session going on to
the next stick. And `cardbench pulltest` (issue 32) across a real unplug and replug of the same
stick: found again by the UUID on it, each acknowledged write judged once (checked against the
host's log), the verdict as the counts say."""

from __future__ import annotations

import json

import pytest

from vm_helpers import boot, plug_stick, pull_in_the_middle

STICK = 32 << 20
CARD = 64 << 20
GONE = "the device is gone (removed?)"

#: step -> (serial, the command after `python3 -m cardbench`, /sys/block stat field watched (3:
#: sectors read, 7: written), sectors past which it is pulled, on kernel vfat?, words in the error)
STEPS = {
    "raw read": ("P1", "run /dev/{dev} --runs 3", 3, 16384, False, GONE),
    "file run on vfat": ("P2", "run /mnt --size 16MB --runs 3", 7, 8192, True, GONE),
    "quick verify": ("P3", "verify /dev/{dev}", 7, 2048, False, GONE),
    "full verify on vfat": ("P4", "verify /mnt --full --file-size 4MiB", 7, 8192, True, GONE),
    "full verify of the raw stick": ("P5", "verify /dev/{dev} --full --destructive --confirm P5", 7, 8192, False,
                                     GONE),
}


@pytest.fixture(scope="module")
def guest(request):
    return boot(request, devices=["qemu-xhci,id=xhci", "sdhci-pci", "sd-card,id=sdcard,drive=sd0"],
                extra=["-drive", "if=none,id=sd0",      # an SD slot with no card at start
                       "-object", "throttle-group,id=tg4,x-bps-read=4000000,x-bps-write=4000000"])


def stored(guest, db: str, kind: str, identity: str) -> list[dict]:
    """The records of card ``identity`` in the guest's store ``db`` ("results" or "verify")."""
    r = guest.cardbench("results", "--json", "--db", db, timeout=120)
    assert r.rc == 0, r.stderr
    return [x for x in r.json()[kind] if (x.get("card") or {}).get("identity") == identity]


def left_alone(guest, dev: str, own_mount: bool) -> None:
    """No cardbench process left, the device gone from sysfs, no mount of it but the test's own
    /mnt (which then unmounts)."""
    assert guest.run("pgrep", "-f", "python3 -m cardbench").rc == 1
    assert guest.wait_for(f"! test -e /sys/block/{dev}", 30).rc == 0
    mounts = [x for x in guest.run("cat", "/proc/mounts").stdout.splitlines() if x.startswith(f"/dev/{dev}")]
    assert mounts == ([m for m in mounts if m.split()[1] == "/mnt"] if own_mount else []), mounts
    assert guest.run("sh", "-c", "umount /mnt 2>/dev/null; ! grep -q '^/dev/%s' /proc/mounts" % dev).rc == 0


def one_line(rc: int, err: str, words: str) -> None:
    assert rc not in (0, 70) and err.startswith("cardbench: ") and err.count("\n") == 1, (rc, err)
    assert words in err and "Traceback" not in err, err


@pytest.mark.parametrize("step", list(STEPS))
def test_a_stick_pulled_in_the_middle(guest, step):
    """A stick (4 MB/s) pulled (device_del) once /sys/block/sdX/stat shows the step under way."""
    serial, command, field, past, vfat, words = STEPS[step]
    name = f"pull{serial}"
    dev = plug_stick(guest, name, serial, STICK, "tg4")
    db = "/tmp/home/pull.sqlite"
    if vfat:
        r = guest.run("sh", "-c", f"mkfs.vfat /dev/{dev} >/dev/null && mount -t vfat /dev/{dev} /mnt", timeout=120)
        assert r.rc == 0, r.stderr
    rc, out, err, began, took = pull_in_the_middle(
        guest, f"python3 -m cardbench {command.format(dev=dev)} --db {db}", dev,
        lambda: guest.unplug(name, name), field=field, past=past)
    print(f"{step}: pulled {began:.1f} s after the start, the command ended {took - began:.1f} s later "
          f"(rc {rc}): {err.strip()}")
    one_line(rc, err, words)
    if step.startswith("file run") or step.startswith("raw"):
        assert out == "", out
    left_alone(guest, dev, vfat)
    identity = f"serial:{serial}:{STICK}"
    if "verify" in step:
        docs = stored(guest, db, "verify", identity)
        assert len(docs) == 1, docs
        doc = docs[0]
        assert doc["complete"] is False and GONE in doc["error"], doc["error"]
        assert doc["verdict"] is None and doc["bad_ranges"] == [] and not doc["fix_command"], doc["verdict"]
        if step == "quick verify":       # the saved bytes cannot go back to a gone device: kept, said so
            assert doc["preserve"]["status"] == "kept" and GONE in doc["preserve"]["message"], doc["preserve"]
            assert "the filesystem is full" not in json.dumps(doc)
    else:
        results = stored(guest, db, "results", identity)
        assert len(results) == 1 and results[0]["complete"] is False and results[0]["error"], results
        assert results[0]["target"]["kind"] == ("directory" if vfat else "device")
        assert not all(t["complete"] for t in results[0]["tests"])


def test_an_sd_card_taken_out_in_the_middle_of_a_raw_run(guest):
    """The SD card's medium taken out of the native slot (blockdev-remove-medium) while `run
    /dev/mmcblk0` reads it: the same one line, incomplete record, nothing left."""
    guest.add_node("sdpull", guest.image_path("sdpull", CARD), "tg4")
    guest.qmp.cmd("blockdev-insert-medium", id="sdcard", **{"node-name": "sdpull"})
    assert guest.wait_for("test -e /sys/block/mmcblk0", 60).rc == 0
    db = "/tmp/home/pull.sqlite"

    def take_out():
        guest.qmp.cmd("blockdev-remove-medium", id="sdcard")
        guest.qmp.cmd("blockdev-del", **{"node-name": "sdpull"})

    rc, out, err, began, took = pull_in_the_middle(
        guest, f"python3 -m cardbench run /dev/mmcblk0 --runs 3 --db {db}", "mmcblk0", take_out, field=3, past=16384)
    print(f"SD taken out {began:.1f} s after the start, the command ended {took - began:.1f} s later "
          f"(rc {rc}): {err.strip()}")
    one_line(rc, err, GONE)
    assert out == "", out
    left_alone(guest, "mmcblk0", False)
    results = stored(guest, db, "results", f"serial:aa-XY-0xdeadbeef:{CARD}")
    assert len(results) == 1 and results[0]["complete"] is False and results[0]["error"], results
    assert results[0]["target"]["kind"] == "device" and results[0]["reader"]["kind"] == "native"


def test_a_stick_pulled_in_a_drawer_session_and_the_session_goes_on(guest):
    """A drawer session on the kernel's hotplug: a stick (4 MB/s) pulled while its raw read is under
    way is one card stored incomplete with the device gone, and the session goes on to test the
    next stick plugged in, whole."""
    db = "/tmp/home/drawer-pull.sqlite"
    guest.run("sh", "-c", "cd /tmp && nohup python3 -m cardbench drawer --json --no-prompt --no-verify --runs 3 "
                          f"--settle 0 --cards 2 --db {db} >/tmp/dpull.out 2>/tmp/dpull.err &")
    assert guest.wait_for("grep -q Watching /tmp/dpull.err", 120).rc == 0, guest.run("cat", "/tmp/dpull.err").stdout
    dev = plug_stick(guest, "pullD1", "D1", STICK, "tg4")
    # a new stick's reads start at 0: past 8 MiB it is the raw read, not the kernel's partition scan
    r = guest.wait_for(f"test $(awk '{{print $3}}' /sys/block/{dev}/stat) -gt 16384", 180)
    assert r.rc == 0 and guest.run("grep", "-q", "cardbench.drawer", "/tmp/dpull.out").rc != 0, \
        guest.run("cat", "/tmp/dpull.err").stdout[-2000:]
    guest.unplug("pullD1", "pullD1")
    r = guest.wait_for("grep -q cardbench.drawer /tmp/dpull.out", 120)
    assert r.rc == 0, guest.run("cat", "/tmp/dpull.err").stdout[-2000:]
    assert guest.wait_for(f"! test -e /sys/block/{dev}", 30).rc == 0
    dev2 = plug_stick(guest, "pullD2", "D2", 16 << 20)
    try:
        r = guest.wait_for("! pgrep -f '[c]ardbench drawer' >/dev/null", 240)   # [c]: not this shell itself
        err = guest.run("cat", "/tmp/dpull.err").stdout
        assert r.rc == 0, err[-2000:]
        lines = [json.loads(x) for x in guest.run("cat", "/tmp/dpull.out").stdout.splitlines() if x.startswith("{")]
        print("drawer with a pull:", [(x["device"], x["result"]["card"]["identity"], x["result"]["complete"])
                                      for x in lines])
        assert len(lines) == 2, err[-3000:]
        pulled, nxt = (x["result"] for x in lines)
        assert pulled["card"]["identity"] == f"serial:D1:{STICK}" and pulled["complete"] is False
        assert GONE in pulled["error"], pulled["error"]
        assert nxt["card"]["identity"] == f"serial:D2:{16 << 20}" and nxt["complete"] is True, nxt.get("error")
        assert "Traceback" not in err and "Testing card 2" in err and "No results stored" not in err
        assert [x["complete"] for x in stored(guest, db, "results", f"serial:D1:{STICK}")] == [False]
        assert [x["complete"] for x in stored(guest, db, "results", f"serial:D2:{16 << 20}")] == [True]
        assert guest.run("pgrep", "-f", "python3 -m cardbench").rc == 1
        assert not [x for x in guest.run("cat", "/proc/mounts").stdout.splitlines()
                    if x.startswith((f"/dev/{dev}", f"/dev/{dev2}"))]
    finally:
        guest.unplug("pullD2", "pullD2")


def test_a_pull_test_across_a_real_unplug_and_replug(guest):
    """`cardbench pulltest` on a stick (32 MiB, 4 MB/s) pulled (device_del) once the records are
    being written, and the same stick (the same image, serial) plugged back (device_add): the
    card found again by the UUID written on it, on whatever name it comes back as; one pull in the
    document with acknowledged writes, each judged once (the counts checked against the host's log),
    the verdict agreeing with the counts, the log kept on the guest's own disk, the record stored,
    nothing left running or mounted. QEMU writes every write it completes to the image file
    (cache.direct, no cache of its own): the stick cannot lie, but the test does not assume it; it
    prints what it saw."""
    serial, name = "PT1", "pullPT1"
    db = "/tmp/home/pulltest.sqlite"
    dev = plug_stick(guest, name, serial, STICK, "tg4")
    kernel = guest.run("sh", "-c", f"cat /sys/block/{dev}/queue/write_cache /sys/block/{dev}/device/scsi_disk/*/"
                                   "cache_type; dmesg | grep -i 'drive cache' | tail -1").stdout
    back: list[str] = []

    def pull_and_put_back():
        guest.unplug(name, name)
        assert guest.wait_for(f"! test -e /sys/block/{dev}", 60).rc == 0
        back.append(plug_stick(guest, name, serial, STICK, "tg4", timeout=120))

    # the setup writes ~12 MiB (label, old region, every slot): past it by 4 MiB the records go on
    setup = (2 + 2 + 8) << 11
    rc, out, err, began, took = pull_in_the_middle(
        guest, f"python3 -m cardbench pulltest /dev/{dev} --no-prompt --cycles 1 --timeout 120 "
               f"--confirm {serial} --json --db {db}", dev, pull_and_put_back, field=7, past=setup + 8192,
        timeout=600)
    print(f"pulltest: kernel {kernel.split()}; pulled {began:.1f} s after the start, ended {took - began:.1f} s "
          f"later (rc {rc}), back as {back}; stderr: {err.strip()[-600:]}")
    assert rc == 0 and "Traceback" not in err, err[-3000:]
    doc = json.loads(out)
    assert doc["schema"] == "cardbench.pulltest/1" and doc["complete"] is True and doc["error"] is None
    # found again by its UUID, on the name it came back as (the label read there says the same UUID)
    assert back and doc["device"] == f"/dev/{back[0]}", (doc["device"], back)
    label = guest.run("python3", "-c", "import sys; from cardbench.pulltest.layout import read_label; "
                      f"f = open('/dev/{back[0]}', 'rb'); print(read_label(f.read(4096))[0])").stdout.strip()
    assert label == doc["card_uuid"], (label, doc["card_uuid"])
    # one pull, acknowledged writes, the counts adding up
    assert len(doc["pulls"]) == 1, doc["pulls"]
    p = doc["pulls"][0]
    print("pulltest figures:", {k: p[k] for k in ("acknowledged", "written", "intact", "lost", "torn", "in_flight",
                                                   "in_flight_torn", "old_damaged", "pull_window_s")},
          "oldest lost:", p["lost_ages_s"][:1], "verdict:", doc["verdict"], "-", doc["answer"])
    assert p["acknowledged"] > 0 and p["intact"] + p["lost"] + p["torn"] == p["acknowledged"], p
    assert len(p["lost_ages_s"]) == p["lost"] + p["torn"] and p["in_flight"] <= 1, p
    for k in ("acknowledged", "intact", "lost", "torn", "in_flight", "in_flight_torn", "old_damaged"):
        assert doc[k] == p[k], k
    # each acknowledged write counted once: the slots whose last record of the cycle was
    # acknowledged, from the host's log (kept on the guest's disk, not on the card)
    path = f"/tmp/home/.local/state/cardbench/pulltest/{doc['card_uuid']}.log"
    lines = [json.loads(x) for x in guest.run("cat", path).stdout.splitlines()]
    assert lines and lines[0]["e"] == "start" and lines[-1]["e"] == "end", path
    recs = {x["n"]: x for x in lines if x["e"] == "rec"}
    acked = {x["n"] for x in lines if x["e"] == "ack"}
    last: dict[int, int] = {}
    for n in sorted(recs):
        last[recs[n]["addr"]] = n
    assert len([n for n in acked if recs[n]["gen"] == 1]) == p["written"] >= p["acknowledged"]
    assert sum(1 for n in last.values() if recs[n]["gen"] == 1 and n in acked) == p["acknowledged"]
    assert sum(1 for n in last.values() if recs[n]["gen"] == 1 and n not in acked) == p["in_flight"]
    # the verdict, as the counts say (QEMU's image cannot lose a completed write; not assumed)
    lost = p["lost"] + p["torn"] + p["old_damaged"]
    assert doc["verdict"] == ("loses" if lost else "keeps"), doc["answer"]
    assert doc["answer"].startswith("Loses" if lost else
                                    f"Keeps what it acknowledges: 0 of {p['acknowledged']:,} acknowledged"), doc["answer"]
    assert doc["kernel"]["write_cache"] in ("write back", "write through"), doc["kernel"]
    assert doc["kernel"]["write_cache"] == kernel.split("\n")[0].strip(), (doc["kernel"], kernel)
    # stored; nothing left running or mounted
    assert [x["card_uuid"] for x in stored(guest, db, "pulltest", f"serial:{serial}:{STICK}")] == [doc["card_uuid"]]
    assert guest.run("pgrep", "-f", "python3 -m cardbench").rc == 1
    assert not [x for x in guest.run("cat", "/proc/mounts").stdout.splitlines()
                if x.startswith((f"/dev/{dev}", f"/dev/{back[0]}"))]
    guest.unplug(name, name)
