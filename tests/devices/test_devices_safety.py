"""The rules before a raw write, on real loop devices (swap is left out: it would touch the host)."""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import io
import os

import pytest

from cardbench.devices import get_device, list_devices
from cardbench.devices.safety import (
    check_destructive,
    confirm,
    confirm_destructive,
    identity_kind,
    identity_token,
    open_exclusive,
)
from cardbench.engine.errors import open_error
from cardbench.errors import SafetyRefusal, TargetError, UsageError
from devices_helpers import (
    LAPTOP_LSBLK,
    LAPTOP_PROC,
    LAPTOP_SYS,
    loop_device,
    mounted,
    needs_loop,
)


@needs_loop
def test_an_idle_writable_device_is_allowed(loop):
    dev, _ = loop
    d = check_destructive(get_device(dev, whole_device=True))
    assert d.path == dev and d.size == 16 << 20


@needs_loop
def test_mounted_device_is_refused():
    with loop_device(32 << 20) as (dev, _), mounted(dev) as mnt:
        with pytest.raises(SafetyRefusal) as e:
            check_destructive(get_device(dev, whole_device=True))
        assert e.value.message == (f"refusing to write to {dev}: {os.path.basename(dev)} is mounted at {mnt}; "
                                   "unmount or release it first")


@needs_loop
def test_device_with_a_mounted_partition_is_refused():
    with loop_device(16 << 20, partitioned=True) as (dev, _), mounted(dev + "p1") as mnt:
        with pytest.raises(SafetyRefusal) as e:
            check_destructive(get_device(dev, whole_device=True))
        assert f"p1 is mounted at {mnt}" in e.value.message


@needs_loop
def test_partition_path_is_a_usage_error():
    with loop_device(8 << 20, partitioned=True) as (dev, _):
        with pytest.raises(UsageError):
            check_destructive(get_device(dev + "p1", whole_device=True))


@needs_loop
def test_device_held_open_exclusively_elsewhere_is_refused(loop):
    dev, _ = loop
    other = os.open(dev, os.O_RDONLY | os.O_EXCL)
    try:
        with pytest.raises(SafetyRefusal) as e:
            check_destructive(get_device(dev, whole_device=True))
        assert e.value.message.startswith(f"refusing to write to {dev}: it is in use")
    finally:
        os.close(other)
    check_destructive(get_device(dev, whole_device=True))  # and allowed again once released


@needs_loop
def test_read_only_device_is_refused():
    with loop_device(1 << 20, read_only=True) as (dev, _):
        with pytest.raises(SafetyRefusal) as e:
            check_destructive(get_device(dev, whole_device=True))
        assert "read-only" in e.value.message


@needs_loop
def test_the_system_disk_is_refused():
    st = os.stat("/")
    devno = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    system = next((d for d in list_devices() if d.devno == devno or any(p.devno == devno for p in d.partitions)), None)
    if system is None:
        pytest.skip("/ is not on a listed block device")
    with pytest.raises(SafetyRefusal) as e:
        check_destructive(get_device(system.path, whole_device=True))
    assert "holds the running system" in e.value.message


@needs_loop
def test_a_device_that_changed_since_listing_is_refused(loop):
    dev, _ = loop
    listed = get_device(dev)
    with pytest.raises(SafetyRefusal) as e:
        check_destructive(dataclasses.replace(listed, size=listed.size * 2))
    assert "size changed" in e.value.message
    with pytest.raises(SafetyRefusal):
        check_destructive(dataclasses.replace(listed, serial="ABC123"))
    assert check_destructive(listed).devno == listed.devno


@needs_loop
def test_open_exclusive_is_direct_exclusive_and_closes(loop):
    dev, _ = loop
    with open_exclusive(dev, write=True) as fd:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        assert flags & os.O_DIRECT
        assert flags & os.O_ACCMODE == os.O_RDWR
        with pytest.raises(SafetyRefusal):
            with open_exclusive(dev):
                pass
    with pytest.raises(OSError):
        os.fstat(fd)  # closed on exit
    with open_exclusive(dev) as fd2:
        assert fcntl.fcntl(fd2, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY


def test_open_exclusive_on_missing_path_is_a_target_error():
    from cardbench.errors import TargetError

    with pytest.raises(TargetError):
        with open_exclusive("/dev/does-not-exist-cardbench"):
            pass


@needs_loop
def test_device_without_serial_is_confirmed_by_its_exact_size(loop):
    dev, _ = loop
    d = get_device(dev)
    assert identity_token(d) == str(16 << 20) == "16777216"
    assert identity_kind(d) == "size in bytes"
    confirm(d, "16777216")
    confirm(d, " 16777216\n")
    for wrong in ("16777215", "16MiB", "16 777 216", "", None, d.path):
        with pytest.raises(SafetyRefusal) as e:
            confirm(d, wrong)
        assert "16777216" not in e.value.message  # the answer is not given away


@needs_loop
def test_a_destructive_write_is_asked_on_a_terminal_and_refused_without_one(loop):
    """confirm_destructive: without a terminal (and nothing given) refused with exit 4 before a
    word is asked; given, no question; on a real terminal (a pty) warned, asked, and the answer
    read from it; a wrong answer refused."""
    dev, _ = loop
    d = get_device(dev)
    will = "raw_write will overwrite parts of it"
    with open(os.devnull) as no_terminal:
        said = io.StringIO()
        with pytest.raises(SafetyRefusal) as e:
            confirm_destructive(d, None, will=will, stdin=no_terminal, stderr=said)
        assert confirm_destructive(d, " 16777216 ", will=will, stdin=no_terminal, stderr=said) == "16777216"
    line = e.value.message
    assert e.value.exit_code == 4 and said.getvalue() == ""
    assert line.startswith(f"not confirmed: {dev} (") and "16.8 MB, 16777216 bytes)" in line
    assert "pass --confirm with its size in bytes" in line and "no terminal to ask on" in line
    master, slave = os.openpty()
    try:
        with open(slave, closefd=True) as terminal:
            os.write(master, b"16777216\n")
            assert confirm_destructive(d, None, will=will, stdin=terminal, stderr=said) == "16777216"
            warning, prompt = said.getvalue().split("\n")
            assert warning == f"{dev} (unknown model, 16.8 MB, 16777216 bytes): {will}."
            assert prompt == "Type its size in bytes to go on (see `cardbench list`): "
            os.write(master, b"16777215\n")
            with pytest.raises(SafetyRefusal, match="does not match the size in bytes"):
                confirm_destructive(d, None, will=will, stdin=terminal, stderr=io.StringIO())
    finally:
        os.close(master)


@needs_loop
def test_the_rules_refuse_before_anyone_is_asked():
    with loop_device(32 << 20) as (dev, _), mounted(dev), open(os.devnull) as no_terminal:
        with pytest.raises(SafetyRefusal, match="mounted"):
            confirm_destructive(get_device(dev), None, will="x", stdin=no_terminal, stderr=io.StringIO())


def test_device_with_serial_is_confirmed_by_its_serial():
    devs = {d.name: d for d in list_devices(LAPTOP_SYS, LAPTOP_LSBLK, proc_root=LAPTOP_PROC)}
    sde = devs["sde"]
    assert identity_token(sde) == "4C530001230913117385"
    confirm(sde, "4c530001230913117385")
    with pytest.raises(SafetyRefusal):
        confirm(sde, str(sde.size))
    with pytest.raises(SafetyRefusal):
        confirm(sde, "4C53000123091311738")
    card = devs["mmcblk0"]
    assert identity_token(card) == "0x7e650771"
    confirm(card, "7E650771")
    with pytest.raises(SafetyRefusal):
        confirm(card, "0x7e650772")


@pytest.mark.parametrize("err,cls,code,words", [
    (errno.EBUSY, SafetyRefusal, 4, "refusing to write to /dev/sdz: it is in use (mounted, swap, part of "
                                    "RAID/LVM/LUKS, or opened exclusively by another program)"),
    (errno.EROFS, SafetyRefusal, 4, "refusing to write to /dev/sdz: it is read-only"),
    (errno.ENOENT, TargetError, 3, "/dev/sdz does not exist"),
    (errno.EACCES, TargetError, 3, "cannot open /dev/sdz: permission denied (raw device tests need root)"),
    (errno.EPERM, TargetError, 3, "cannot open /dev/sdz: permission denied (raw device tests need root)"),
    (errno.ENOMEDIUM, TargetError, 3, "/dev/sdz has no medium (is the card inserted?)"),
    (errno.EIO, TargetError, 3, "cannot open /dev/sdz: I/O error (the card failed or was removed)"),
])
def test_open_errors_come_from_the_one_errno_table(err, cls, code, words):
    """open_exclusive's errors are engine.errors.open_error's: one line, the documented exit code."""
    e = open_error(OSError(err, os.strerror(err)), "/dev/sdz", "write to")
    assert isinstance(e, cls) and e.exit_code == code and e.message == words


def test_open_exclusive_turns_an_os_error_into_its_refusal(monkeypatch):
    import cardbench.devices.safety as safety

    def busy(*a, **k):
        raise OSError(errno.EBUSY, "Device or resource busy")
    monkeypatch.setattr(safety, "open_raw", busy)
    with pytest.raises(SafetyRefusal, match="refusing to open /dev/sdz: it is in use"):
        with open_exclusive("/dev/sdz"):
            pass
