"""devices.watch: a card is noticed when its medium comes (a loop device getting a backing file,
size 0 -> N, the same "change" uevent a card pushed into a reader gives), by netlink uevents and
by sysfs polling; devices with a medium at start, other people's loop devices and, without
include_loop, all loop devices are left alone."""

from __future__ import annotations

import time

import pytest

from cardbench.devices.watch import Watcher, parse_uevent, watched
from realparts import ROOT, loop_device

pytestmark = pytest.mark.skipif(not ROOT, reason="needs root for loop devices")


def _until(w: Watcher, dev: str, inserted: bool, timeout: float = 5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in w.wait(end - time.monotonic()):
            if c.path == dev and c.inserted == inserted:
                return c
    return None


@pytest.mark.parametrize("method", ["netlink", "poll"])
def test_a_loop_device_getting_its_medium_is_noticed(tmp_path, method):
    mine = tmp_path / "cards"
    mine.mkdir()
    with loop_device(4 << 20, directory=str(tmp_path)) as present:      # medium at start: ignored
        with Watcher(include_loop=True, loop_under=str(mine), method=method, poll_interval=0.1) as w:
            assert w.method == method
            with loop_device(2 << 20, directory=str(tmp_path)) as elsewhere:  # not under loop_under
                with loop_device(8 << 20, directory=str(mine)) as dev:
                    t = time.monotonic()
                    c = _until(w, dev, True)
                    assert c is not None and c.size == 8 << 20 and c.before == 0
                    assert time.monotonic() - t < (0.5 if method == "netlink" else 1.5)
                    assert not watched(elsewhere[5:], include_loop=True, loop_under=str(mine))
                    assert watched(dev[5:], include_loop=True, loop_under=str(mine))
                    assert not watched(dev[5:], include_loop=False)
                gone = _until(w, dev, False)
                assert gone is not None and gone.size == 0
            assert all(c.path not in (present, elsewhere) or not c.inserted for c in w.scan())


def test_loop_devices_are_not_cards_without_include_loop(tmp_path):
    with Watcher(include_loop=False, poll_interval=0.1) as w:
        with loop_device(4 << 20, directory=str(tmp_path)) as dev:
            assert _until(w, dev, True, timeout=1.0) is None


def test_uevent_parsing():
    ev = parse_uevent(b"change@/devices/virtual/block/loop3\0ACTION=change\0DEVNAME=loop3\0SUBSYSTEM=block\0"
                      b"DEVTYPE=disk\0DISK_MEDIA_CHANGE=1\0")
    assert ev == {"ACTION": "change", "DEVNAME": "loop3", "SUBSYSTEM": "block", "DEVTYPE": "disk",
                  "DISK_MEDIA_CHANGE": "1"}


def test_a_card_swapped_for_one_of_the_same_size_while_busy_is_a_new_card(tmp_path):
    """Out and in again while the watcher was not looking (the drawer was testing): the kernel's
    disk sequence number tells the new medium from the old one."""
    with Watcher(include_loop=True, loop_under=str(tmp_path), method="netlink") as w:
        with loop_device(4 << 20, directory=str(tmp_path)) as first:
            assert _until(w, first, True) is not None
        with loop_device(4 << 20, directory=str(tmp_path)) as second:
            if second != first:
                pytest.skip(f"losetup took {second}, not {first} again (another process took it)")
            c = _until(w, second, True)
            assert c is not None and c.size == 4 << 20
