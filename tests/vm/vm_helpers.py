"""Skip-or-fail and boot helpers of the VM tier (a unique module name: every tests/ directory
has a conftest.py, so test modules import these from here)."""

from __future__ import annotations

import os

import pytest

from vmharness import Guest, missing


def require_vm() -> None:
    lacking = missing()
    if lacking:
        message = "the VM tier cannot run here; missing: " + "; ".join(lacking)
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: a skipped VM tier is a failure)", pytrace=False)
        pytest.skip(message)


def boot(request, **kw) -> Guest:
    """A booted guest, closed (QEMU killed, files removed) when the requesting scope ends."""
    require_vm()
    guest = Guest(**kw)
    request.addfinalizer(guest.close)
    guest.start()
    return guest


def pull_in_the_middle(guest: Guest, command: str, dev: str, pull, field: int = 3, past: int = 16384,
                       timeout: float = 300.0):
    """Start shell line ``command`` in the background in the guest, wait until the block device
    ``dev`` (e.g. "sda") has moved ``past`` more sectors in /sys/block/<dev>/stat ``field`` (3:
    read, 7: written) than before, call ``pull()`` and wait for the command's end. A command
    that ended before that fails the check at once (its stderr said). Returns (rc, stdout,
    stderr, seconds until the pull, seconds in all)."""
    import time
    base = int(guest.run("sh", "-c", f"rm -f /tmp/pull.end; cat /sys/block/{dev}/stat").stdout.split()[field - 1])
    t0 = time.monotonic()
    job = guest.run("sh", "-c", f"{command} >/tmp/pull.out 2>/tmp/pull.err; rc=$?; touch /tmp/pull.end; exit $rc",
                    background=True).stdout
    under_way = f"test $(awk '{{print ${field}}}' /sys/block/{dev}/stat) -gt {base + past}"
    r = guest.wait_for(f"{under_way} || test -e /tmp/pull.end", timeout)
    began = time.monotonic() - t0
    assert r.rc == 0 and guest.run("test", "-e", "/tmp/pull.end").rc != 0, \
        "ended before the pull: " + guest.run("cat", "/tmp/pull.err").stdout[-2000:]
    pull()
    done = guest.wait_job(job, timeout)
    out = guest.run("sh", "-c", "cat /tmp/pull.out; echo '<<>>'; cat /tmp/pull.err").stdout
    stdout, _, stderr = out.partition("<<>>\n")
    return done.rc, stdout, stderr, began, done.seconds


def plug_stick(guest: Guest, name: str, serial: str, size: int, group: str | None = None,
               timeout: float = 60.0) -> str:
    """``device_add`` a usb-storage stick ``name`` (serial ``serial``, a sparse image of ``size``
    bytes behind throttle group ``group``) on ``xhci.0``; returns its block device name ("sdb")
    once the guest lists it. Unplug with ``guest.unplug(name, name)``."""
    before = set(guest.run("ls", "/sys/block").stdout.split())
    guest.add_node(name, guest.image_path(name, size), group)
    guest.plug(name, "usb-storage", name, bus="xhci.0", serial=serial)
    r = guest.wait_for(f"test $(ls /sys/block | wc -l) -gt {len(before)}", timeout)
    assert r.rc == 0, f"stick {serial} not seen by the guest"
    return (set(guest.run("ls", "/sys/block").stdout.split()) - before).pop()
