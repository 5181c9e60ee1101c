"""Cleanup is the top rule: nothing is left behind, whatever happens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cardbench.emulate import CardSpec, EmulatedCard, EmulatedReader, system
from cardbench.errors import CardbenchError, UsageError
from cardbench.units import MB, MiB
from emulate_helpers import assert_gone, dio_read, leftovers, needs_emulator
from realparts import stop_process

pytestmark = needs_emulator


def spec(name: str = "c") -> CardSpec:
    return CardSpec(size=32 * MiB, write_rate=50 * MB, read_rate=50 * MB, name=name)


def test_exception_inside_with_leaves_nothing():
    with pytest.raises(RuntimeError, match="boom"):
        with EmulatedCard(spec()) as card:
            info = (card.reader.workdir, card.device, card.reader.pid)
            with card.filesystem("ext4") as mnt:
                with open(os.path.join(mnt, "f"), "wb") as f:
                    f.write(b"x" * 100_000)
                raise RuntimeError("boom")
    assert_gone(*info)


def test_invalid_requests_leave_nothing(emu_tmp):
    before = set(os.listdir(emu_tmp))
    with pytest.raises(UsageError):
        EmulatedCard(CardSpec(size=1000, write_rate=MB, read_rate=MB))
    with EmulatedReader() as reader:
        workdir, pid = reader.workdir, reader.pid
        reader.add_card(spec("dup"))
        with pytest.raises(UsageError):
            reader.add_card(spec("dup"))
        with pytest.raises(UsageError):
            reader.call("set", card="dup", settings={"write_rate": -1})
        assert len(reader.cards) == 1
    assert_gone(workdir, None, pid)
    assert set(os.listdir(emu_tmp)) == before


def test_failed_losetup_after_server_start_leaves_nothing(tmp_path, monkeypatch, emu_tmp):
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    (fakebin / "losetup").write_text("#!/bin/sh\necho 'losetup: no free loop device (test)' >&2\nexit 1\n")
    (fakebin / "losetup").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fakebin}:{os.environ['PATH']}")
    before = set(os.listdir(emu_tmp))
    with pytest.raises(CardbenchError, match="no free loop device"):
        with EmulatedCard(spec()):
            pass
    assert set(os.listdir(emu_tmp)) == before
    assert leftovers(emu_tmp) == []


def test_server_killed_mid_use_is_still_cleaned_up():
    with EmulatedCard(spec()) as card:
        info = (card.reader.workdir, card.device, card.reader.pid)
        with card.filesystem("ext4") as mnt:
            os.kill(card.reader.pid, signal.SIGKILL)
            time.sleep(0.2)
            with pytest.raises(OSError):
                dio_read(card.device, 0, 4096)
            assert os.path.isdir(mnt)
    assert_gone(*info)


@pytest.mark.slow
def test_hung_server_is_aborted_and_cleaned_up():
    t = time.monotonic()
    with EmulatedCard(spec()) as card:
        info = (card.reader.workdir, card.device, card.reader.pid)
        with card.filesystem("ext4") as mnt:
            with open(os.path.join(mnt, "f"), "wb") as f:
                f.write(b"x" * 100_000)
            stop_process(card.reader.pid)      # hung means stopped (see realparts.stop_process)
    assert_gone(*info)
    assert time.monotonic() - t < 30



SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from cardbench.emulate import CardSpec, EmulatedCard
    from cardbench.units import MB, MiB
    spec = CardSpec(size=32 * MiB, write_rate=50 * MB, read_rate=50 * MB, name="victim")
    try:
        with EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
            with open(os.path.join(mnt, "f"), "wb") as f:
                f.write(b"x" * 100000)
            print(json.dumps([card.reader.workdir, card.device, card.reader.pid]), flush=True)
            time.sleep(60)
    except BaseException as e:
        print("caught", type(e).__name__, flush=True)
        raise
""")


def run_victim():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return proc, json.loads(line)


@pytest.mark.parametrize("sig, caught", [(signal.SIGTERM, "Interrupted"), (signal.SIGINT, "KeyboardInterrupt")])
def test_signal_to_the_owner_cleans_up(sig, caught):
    proc, info = run_victim()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert f"caught {caught}" in out, out + err
    assert_gone(*info)


def test_sigkilled_owner_is_cleaned_up_by_the_server():
    proc, info = run_victim()
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 20
    # the server removes its directory, then exits: on a loaded machine the check came in between
    while leftovers(info[0]) or os.path.exists(info[0]) or system.is_server_process(info[2], info[0]):
        assert time.monotonic() < deadline, leftovers(info[0])
        time.sleep(0.1)
    assert_gone(*info)


def test_close_is_idempotent_and_card_removal_detaches():
    with EmulatedReader() as reader:
        a = reader.add_card(spec("a"))
        b = reader.add_card(spec("b"))
        dev_a = a.device
        a.close()
        assert dev_a not in [lo.device for lo in system.loops_under(reader.mountpoint)]
        assert set(reader.cards) == {"b"}
        assert dio_read(b.device, 0, 4096) == bytes(4096)
        info = (reader.workdir, b.device, reader.pid)
    reader.close()
    assert_gone(*info)
