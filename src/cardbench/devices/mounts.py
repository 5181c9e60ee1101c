"""What the running system uses: mounts (``/proc/self/mountinfo``) and active swap (``/proc/swaps``).

mountinfo is preferred over ``/proc/mounts`` because it names the mounted block device by
``major:minor``, which stays right when the source is shown as ``/dev/root`` or through a
``/dev/disk/by-*`` symlink. btrfs reports an anonymous device number, so callers also match the
source name. Format: proc(5), "/proc/[pid]/mountinfo".
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cardbench.devices.sysfs import unescape_octal
from cardbench.engine.data import DataFile
from cardbench.engine.errors import IoFault, IoSetupError

#: Mount points that mean "this holds the running system". Anything under /boot counts too.
SYSTEM_MOUNTPOINTS: frozenset[str] = frozenset({
    "/", "/boot", "/efi", "/usr", "/var", "/home", "/opt", "/srv", "/etc", "/nix", "/root",
    "/usr/local", "/var/log", "/var/lib", "/tmp",
})


def is_system_mountpoint(mountpoint: str) -> bool:
    """True for /, /boot (and below), /usr, /var, /home and the other directories the OS lives in."""
    return mountpoint in SYSTEM_MOUNTPOINTS or mountpoint.startswith("/boot/")


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo: which device (``devno`` "major:minor"), where, what filesystem."""

    devno: str
    mountpoint: str
    fstype: str
    source: str
    root: str


def read_mountinfo(path: str = "/proc/self/mountinfo") -> list[Mount]:
    """Parse mountinfo; a missing file gives an empty list (the caller then relies on lsblk)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        rest = right.split()
        if len(fields) < 5 or len(rest) < 2:
            continue
        mounts.append(Mount(
            devno=fields[2], root=unescape_octal(fields[3]), mountpoint=unescape_octal(fields[4]),
            fstype=rest[0], source=unescape_octal(rest[1]),
        ))
    return mounts


def read_swaps(path: str = "/proc/swaps") -> list[str]:
    """Active swap areas (device paths or swap files) from /proc/swaps."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines[1:]:
        parts = line.split()
        if parts:
            out.append(unescape_octal(parts[0]))
    return out


def mount_containing(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount whose mount point is the longest prefix of ``path`` (after resolving symlinks)."""
    real = os.path.realpath(path)
    best: Mount | None = None
    for m in mounts:
        mp = m.mountpoint
        if real == mp or real.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mountpoint):
                best = m
    return best


def filesystem_on(device: str) -> str | None:
    """What a device's first sector says it holds ("exfat", "ntfs", "vfat"), for a FUSE mount whose
    mountinfo says only "fuseblk"; None when unreadable or unknown."""
    try:
        with DataFile.open(device, write=False, direct=False) as dev:
            buf = bytearray(512)
            dev.read_at(buf, 0)
    except (IoFault, IoSetupError):  # the card's I/O errors only: never Interrupted
        return None
    head = bytes(buf)
    if head[3:11] == b"EXFAT   ":
        return "exfat"
    if head[3:11] == b"NTFS    ":
        return "ntfs"
    if head[82:90] == b"FAT32   " or head[54:59] in (b"FAT12", b"FAT16"):
        return "vfat"
    return None
