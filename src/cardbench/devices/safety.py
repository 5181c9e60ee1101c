"""The rules before any raw write: cardbench must never destroy data it was not told to.

A raw (block-device) write is allowed only when all of these hold, checked on the live system at the
moment of the check (``check_destructive``), not from a listing made earlier:

1. the path is a whole device (a partition is a UsageError: "give the whole device");
2. it does not hold the running system: nothing on it (or on a dm/md device built on it) is mounted
   at /, /boot, /usr, /var, /home..., and no partition is active swap (``/proc/swaps``);
3. nothing on it is mounted anywhere, and no dm/md device holds it;
4. there is a medium (an empty reader slot has size 0);
5. it is writable (sysfs ``ro`` and the ``BLKROGET`` ioctl: write-protect switch, read-only loop);
6. the kernel grants an exclusive open (``O_EXCL`` on a block device fails with EBUSY when it is
   mounted, used by the system, or held exclusively by another program) [S46 open(2)];
7. the user confirmed by typing the device's identity token (``identity_token``): its serial, or,
   for a device without a serial, its exact size in bytes.

Every refusal is a ``SafetyRefusal`` with one line naming the device and the reason.
:func:`confirm_destructive` is the one confirmation every command that writes raw asks (``run
--destructive``, ``verify --destructive``): the rules first, then the identity given (``--confirm``)
or typed at the terminal, in one wording; without a terminal to ask on it is refused (exit 4).
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from cardbench.devices.discovery import BlockDevice, get_device
from cardbench.engine.data import open_raw
from cardbench.engine.errors import open_error
from cardbench.errors import SafetyRefusal, TargetError
from cardbench.units import fmt_size

#: ioctl numbers from linux/fs.h: BLKROGET = _IO(0x12, 94).
BLKROGET = 0x125E


def _ioctl_read_only(fd: int) -> bool | None:
    """The kernel's read-only flag of an open block device, or None when the ioctl fails."""
    try:
        raw = fcntl.ioctl(fd, BLKROGET, struct.pack("i", 0))
    except OSError:
        return None
    return struct.unpack("i", raw)[0] != 0


@contextmanager
def open_exclusive(path: str, *, write: bool = False) -> Iterator[int]:
    """Open a block device ``O_DIRECT | O_EXCL`` (``O_RDWR`` with ``write=True``, else ``O_RDONLY``).

    Yields the file descriptor and closes it on exit. While it is open, the kernel refuses mounts
    and other exclusive openers (they get EBUSY). O_DIRECT needs buffers, offsets and lengths
    aligned to the logical block size [S46 open(2)]; use ``mmap`` buffers. Errors are one line:
    EBUSY -> SafetyRefusal, missing/permission -> TargetError.
    """
    try:
        fd, _direct = open_raw(path, write=write, exclusive=True)
    except OSError as e:
        raise open_error(e, path, "write to" if write else "open") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _same_identity(before: BlockDevice, now: BlockDevice) -> str | None:
    """Why ``now`` is not the device that was selected as ``before`` (None if it is)."""
    if before.devno and now.devno and before.devno != now.devno:
        return f"its device number changed ({before.devno} -> {now.devno})"
    if before.size != now.size:
        return f"its size changed ({before.size} -> {now.size} bytes); was the card swapped?"
    if (before.serial or None) != (now.serial or None):
        return "its serial changed; was the card or stick swapped?"
    return None


def check_destructive(dev: BlockDevice, *, sysfs_root: str = "/sys",
                      proc_root: str = "/proc") -> BlockDevice:
    """Refuse (SafetyRefusal, one line) unless a raw write to this whole device is allowed now.

    ``dev`` is a ``BlockDevice`` from an earlier listing (:func:`cardbench.devices.get_device`); the
    state is re-read, and a device whose size, serial or number changed since it was listed is refused. Returns the
    fresh ``BlockDevice``. Confirmation by the user is separate: see ``confirm``.
    """
    path = dev.path
    now = get_device(path, whole_device=True, sysfs_root=sysfs_root, proc_root=proc_root)
    changed = _same_identity(dev, now)
    if changed:
        raise SafetyRefusal(f"refusing to write to {path}: {changed}")
    if now.system:
        raise SafetyRefusal(f"refusing to write to {path}: it holds the running system ({now.system_reason})")
    if now.in_use_reason:
        raise SafetyRefusal(f"refusing to write to {path}: {now.in_use_reason}; unmount or release it first")
    if not now.medium_present:
        raise TargetError(f"{path} has no medium (size 0): is the card inserted?")
    if now.read_only:
        raise SafetyRefusal(f"refusing to write to {path}: it is read-only "
                            "(write-protect switch, read-only loop device or kernel setting)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as e:
        raise open_error(e, path, "write to") from None
    try:
        if _ioctl_read_only(fd):
            raise SafetyRefusal(f"refusing to write to {path}: it is read-only (BLKROGET)")
    finally:
        os.close(fd)
    return now


def identity_token(dev: BlockDevice) -> str:
    """What the user must type to confirm a destructive test: the serial, else the exact size in bytes.

    For SD cards on a native host the serial is the card's own (CID PSN); behind a USB reader it is
    the reader's or stick's USB serial, the only one the host can see.
    """
    serial = (dev.serial or "").strip()
    return serial if serial else str(dev.size)


def identity_kind(dev: BlockDevice) -> str:
    """"serial" or "size in bytes": what ``identity_token`` is, to word the prompt."""
    return "serial" if (dev.serial or "").strip() else "size in bytes"


def _normalise(value: str) -> str:
    """Compare serials without case or surrounding blanks, and hex serials with or without 0x."""
    v = value.strip().casefold()
    return v[2:] if v.startswith("0x") else v


def confirm(dev: BlockDevice, value: str | None) -> None:
    """Refuse (SafetyRefusal) unless ``value`` is the device's identity token.

    The message does not echo the expected token: the point is that the user read it off the
    device listing (``cardbench list``), not off an error message.
    """
    expected = identity_token(dev)
    if value is None or not value.strip():
        raise SafetyRefusal(f"not confirmed: type the {identity_kind(dev)} of {dev.path} to allow writing to it")
    if identity_kind(dev) == "serial":
        ok = _normalise(value) == _normalise(expected)
    else:
        ok = value.strip() == expected
    if not ok:
        raise SafetyRefusal(
            f"confirmation does not match the {identity_kind(dev)} of {dev.path}; nothing was written")


def describe_device(dev: BlockDevice) -> str:
    """The device as a confirmation names it: "/dev/sdb (Generic Flash Disk, 64.0 MB, 64000000 bytes)"."""
    what = " ".join(x for x in (dev.vendor, dev.model) if x) or "unknown model"
    return f"{dev.path} ({what}, {fmt_size(dev.size)}, {dev.size} bytes)"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):    # no such method, or closed
        return False


def confirm_destructive(dev: BlockDevice, given: str | None, *, will: str, flag: str = "--confirm",
                        stdin: TextIO | None = None, stderr: TextIO | None = None) -> str:
    """The one confirmation of a destructive write: the safety rules now (``check_destructive``,
    before anyone is asked), then the device's identity (``identity_token``): ``given`` (the
    command's ``flag``), else typed at the terminal after a warning naming the device and what
    the command ``will`` do to it. Returns the identity confirmed, for the write's own check
    (e.g. ``DeviceOptions.confirm``).

    SafetyRefusal (exit 4, one line) when a rule refuses, when nothing was given and ``stdin`` is
    no terminal (nobody to ask: the line names the device and what to pass), and when the answer
    is not the identity. ``stdin``/``stderr``: where to ask (default: this process's)."""
    dev = check_destructive(dev)
    if given is None:
        stdin = sys.stdin if stdin is None else stdin
        stderr = sys.stderr if stderr is None else stderr
        if not _is_terminal(stdin):
            raise SafetyRefusal(f"not confirmed: {describe_device(dev)} would lose data; pass {flag} with its "
                                f"{identity_kind(dev)} (see `cardbench list`): there is no terminal to ask on")
        stderr.write(f"{describe_device(dev)}: {will}.\n")
        stderr.write(f"Type its {identity_kind(dev)} to go on (see `cardbench list`): ")
        stderr.flush()
        given = stdin.readline().strip()
    confirm(dev, given)
    return given.strip()
