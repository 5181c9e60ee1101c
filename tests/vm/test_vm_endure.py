"""`cardbench endure` (issue 31) on the real kernel: a USB stick (usb-storage on qemu-xhci, 32 MiB
behind a 4 MB/s throttle group, so a round takes seconds) pulled out (QMP ``device_del``) in the
middle of a round and plugged back (``device_add``, the same image: the same card, on whatever
name the kernel gives it). While the run waits, paused, a different stick of the same size is
plugged in: refused, never written (its image hashed on the host before and after), and left in,
so the stick plugged back gets another device name. Then the run goes on by itself, found again by the UUID in its own sectors, and ends as an unbroken run would:
3 rounds, 3 full writes (the slice under way at the pull done again, not counted twice), no bad
sector (QEMU writes every write it completes to the image: nothing lost, and none misjudged),
the document stored, nothing left running or mounted. And a stick that never comes back ends the
run at ``--timeout``, with one clear line."""

from __future__ import annotations

import hashlib
import json
import os
import signal

import pytest

from vm_helpers import boot, plug_stick

STICK = 32 << 20
SLICES = 16
SLICE = STICK // SLICES
DB = "/tmp/home/endure.sqlite"
#: where the run saves its state after every slice (platformdirs under the guest's HOME)
STATE = "/tmp/home/.local/state/cardbench/endure"


@pytest.fixture(scope="module")
def guest(request):
    return boot(request, devices=["qemu-xhci,id=xhci"],
                extra=["-object", "throttle-group,id=tg4,x-bps-read=4000000,x-bps-write=4000000"])


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def random_stick(guest, name: str) -> tuple[str, str]:
    """A stick image of STICK random bytes (no endurance data on it); (its path, its hash)."""
    path = guest.image_path(name, STICK)
    with open(path, "r+b") as f:
        f.write(os.urandom(STICK))
    return path, sha256(path)


def start(guest, dev: str, serial: str, args: str, tag: str) -> str:
    """`cardbench endure /dev/<dev>` in the background; its job id (stdout and stderr go to
    /tmp/<tag>.out and .err)."""
    return guest.run("sh", "-c", f"python3 -m cardbench endure /dev/{dev} --confirm {serial} --json --db {DB} "
                                 f"{args} >/tmp/{tag}.out 2>/tmp/{tag}.err", background=True).stdout


def err_of(guest, tag: str) -> str:
    return guest.run("cat", f"/tmp/{tag}.err").stdout


def in_round(guest, rnd: int, done: int, tag: str, timeout: float = 600.0) -> None:
    """Wait until the run's saved state says round ``rnd`` is writing with ``done`` slices of it
    written (the state is saved after every slice); fails if the run ended first."""
    done_re = ",".join(["[0-9]+"] * done)
    pattern = f'"current":\\{{"round":{rnd},"phase":"write","done":\\[{done_re}'
    r = guest.wait_for(f"grep -Eqs '{pattern}' {STATE}/*.json || ! pgrep -f '[c]ardbench endure' >/dev/null",
                       timeout)
    assert r.rc == 0 and guest.run("pgrep", "-f", "python3 -m cardbench endure").rc == 0, \
        f"the run ended before round {rnd} was under way: " + err_of(guest, tag)[-2000:]


def stored(guest, identity: str) -> list[dict]:
    r = guest.cardbench("results", "--json", "--db", DB, timeout=120)
    assert r.rc == 0, r.stderr
    return [x for x in r.json().get("endurance", []) if (x.get("card") or {}).get("identity") == identity]


def nothing_left(guest, *devs: str) -> None:
    assert guest.run("pgrep", "-f", "python3 -m cardbench").rc == 1
    mounts = [x for x in guest.run("cat", "/proc/mounts").stdout.splitlines()
              if x.startswith(tuple(f"/dev/{d}" for d in devs))]
    assert mounts == [], mounts


def stop(guest, job: str) -> None:
    """A run the test gave up on: killed, so the next test finds no cardbench process."""
    try:
        guest.signal_job(job, signal.SIGKILL)
        guest.wait_job(job, 30)
    except Exception:
        pass


def test_an_endurance_run_across_a_pull_a_stranger_and_a_replug(guest):
    """3 rounds on a 32 MiB stick (4 MB/s); pulled in round 2 once 3 of its 16 slices are
    written; while it waits, another stick of the same size (random bytes) plugged in (and left
    in to the end); then the stick plugged back, beside it."""
    serial, name = "E1", "endE1"
    dev = plug_stick(guest, name, serial, STICK, "tg4")
    stranger, stranger_hash = random_stick(guest, "endX1")
    job = start(guest, dev, serial, "--rounds 3 --timeout 300", "e1")
    finished, other = False, None
    try:
        in_round(guest, 2, 3, "e1")
        guest.unplug(name, name)
        r = guest.wait_for("grep -q 'paused' /tmp/e1.err", 120)
        assert r.rc == 0, err_of(guest, "e1")[-2000:]
        assert guest.wait_for(f"! test -e /sys/block/{dev}", 60).rc == 0
        # a stranger in the slot: looked at (read), refused, never written; the run keeps waiting
        other = plug_stick(guest, "endX1", "X1", STICK)
        r = guest.wait_for(f"grep -q '/dev/{other} is not the card of this run' /tmp/e1.err", 120)
        assert r.rc == 0, err_of(guest, "e1")[-2000:]
        assert guest.run("test", "-e", "/tmp/e1.out").rc == 0
        assert guest.run("pgrep", "-f", "python3 -m cardbench endure").rc == 0, err_of(guest, "e1")[-2000:]
        # the same stick (the same image) plugged back beside the stranger, so under another name
        # than it had: the run goes on by itself on that name
        back = plug_stick(guest, name, serial, STICK, "tg4", timeout=120)
        done = guest.wait_job(job, 900)
        finished = True
    finally:
        if not finished:
            stop(guest, job)
        if other is not None:
            guest.unplug("endX1", "endX1")
    # the stranger, in the guest all along, was read but never written
    assert sha256(stranger) == stranger_hash, "the stranger stick was written"
    out = guest.run("cat", "/tmp/e1.out").stdout
    err = err_of(guest, "e1")
    print(f"endure across a pull: {done.seconds:.1f} s (rc {done.rc}), {dev} -> stranger {other} -> back as "
          f"{back}; stderr:\n{err.strip()[-1500:]}")
    assert done.rc == 0 and "Traceback" not in err, err[-3000:]
    doc = json.loads(out)
    assert doc["schema"] == "cardbench.endurance/1" and doc["complete"] is True and doc["error"] is None, doc["error"]
    assert doc["ended"] == "rounds" and [r["round"] for r in doc["rounds"]] == [1, 2, 3], doc["ended"]
    # found again by its UUID, on the name it came back as (its sectors there say the same UUID)
    assert back != other and doc["device"] == f"/dev/{back}", (doc["device"], back, other)
    on_card = guest.run("python3", "-c", "from cardbench.endure.run import card_uuid_on; "
                                         f"print(card_uuid_on('/dev/{back}', {STICK}))").stdout.strip()
    assert on_card == doc["card_uuid"], (on_card, doc["card_uuid"])
    # the totals of an unbroken run: the slice under way at the pull done again, once
    assert doc["capacity_bytes"] == STICK
    assert 3 * STICK <= doc["bytes_written"] <= 3 * STICK + SLICE, doc["bytes_written"]
    assert [r["slices_redone"] for r in doc["rounds"]] == [0, 1, 0], [r["slices_redone"] for r in doc["rounds"]]
    # nothing lost, nothing misjudged: the emulated stick keeps every completed write
    print("rounds:", [(r["round"], round(r["write_bytes_per_s"] / 1e6, 2), round(r["read_bytes_per_s"] / 1e6, 2),
                       r["bad_total"]) for r in doc["rounds"]], "-", doc["answer"])
    for r in doc["rounds"]:
        assert r["bad_total"] == 0 and set(r["bad_sectors"].values()) == {0}, r
        assert r["write_bytes_per_s"] > 0 and r["read_bytes_per_s"] > 0, r
    assert doc["first_error_round"] is None and doc["milestones"] == [] and doc["verdict"] == "no error", doc["answer"]
    # the pause and the return in words, once each; the stranger refused once
    lines = err.splitlines()
    paused = [x for x in lines if "paused" in x]
    assert len(paused) == 1 and "put the card back" in paused[0], paused
    assert [x for x in lines if "refused, nothing written" in x and f"/dev/{other}" in x], err
    assert [x for x in lines if f"back as /dev/{back}" in x], err
    # stored (each round's document under the run's one id: one record), nothing left
    docs = stored(guest, f"serial:{serial}:{STICK}")
    assert [(x["card_uuid"], x["ended"], x["complete"]) for x in docs] == [(doc["card_uuid"], "rounds", True)], docs
    nothing_left(guest, dev, back, other)
    guest.unplug(name, name)


def test_a_stick_that_never_comes_back_ends_the_run_at_its_timeout(guest):
    """1 round on another 32 MiB stick, pulled once 3 of round 1's slices are written and never
    put back: the run waits --timeout 20 s and ends "dead", with one clear line."""
    serial, name = "E2", "endE2"
    dev = plug_stick(guest, name, serial, STICK, "tg4")
    job = start(guest, dev, serial, "--rounds 1 --timeout 20", "e2")
    finished = False
    try:
        in_round(guest, 1, 3, "e2")
        guest.unplug(name, name)
        done = guest.wait_job(job, 300)
        finished = True
    finally:
        if not finished:
            stop(guest, job)
    out = guest.run("cat", "/tmp/e2.out").stdout
    err = err_of(guest, "e2")
    print(f"endure, never back: {done.seconds:.1f} s (rc {done.rc}); stdout {out[:200]!r}; stderr:\n{err[-1500:]}")
    assert done.rc == 0 and "Traceback" not in err, err[-3000:]
    # the ending is the finding: one line on stderr, "dead" in the document and its answer
    ends = [x for x in err.splitlines() if "did not come back" in x]
    assert len(ends) == 1 and "did not come back within 20 s" in ends[0] and "dead" in ends[0], err
    doc = json.loads(out)
    assert doc["ended"] == "dead" and doc["verdict"] == "dead" and doc["rounds"] == [], (doc["ended"], doc["rounds"])
    # the slices written before the pull count (3 at least, not the whole card)
    assert 3 * SLICE <= doc["bytes_written"] < STICK, doc["bytes_written"]
    assert "stopped answering" in doc["answer"], doc["answer"]
    assert [(x["card_uuid"], x["ended"]) for x in stored(guest, f"serial:{serial}:{STICK}")] == \
        [(doc["card_uuid"], "dead")]
    nothing_left(guest, dev)
