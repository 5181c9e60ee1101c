"""Small, forgiving readers for sysfs and procfs files.

sysfs attributes are one value per file, usually followed by a newline. A missing or unreadable
attribute is normal (a SCSI disk has no ``cid``, an empty reader slot no ``size``), so every reader
here returns ``None`` instead of raising. Nothing in this module writes.

Everything takes a path, so the same code runs against the live ``/sys`` and against the fixture
trees under ``tests/devices/fixtures/`` that copy real layouts.
"""

from __future__ import annotations

import os
import re


def read_text(path: str) -> str | None:
    """The stripped text of a sysfs/procfs attribute, or None when it is missing or unreadable.

    Reading can fail for many normal reasons (attribute absent, EACCES, ENODEV for a removed
    device, EIO from a dying card's ``vpd_pg80``); all of them mean "unknown" here.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(65536)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace").strip()


def read_int(path: str, base: int = 10) -> int | None:
    """An integer attribute (``size``, ``ro``, ``removable``...), or None when missing or malformed.

    ``base=0`` accepts ``0x``-prefixed values such as the mmc ``manfid`` attribute.
    """
    text = read_text(path)
    if text is None or text == "":
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def read_bytes(path: str) -> bytes | None:
    """The raw bytes of a binary attribute such as SCSI ``vpd_pg80``, or None."""
    try:
        with open(path, "rb") as f:
            return f.read(65536)
    except OSError:
        return None


def list_dir(path: str) -> list[str]:
    """Sorted entries of a directory, or an empty list when it does not exist."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def link_name(path: str) -> str | None:
    """The last component of a symlink's target (``driver`` -> ``usb-storage``), or None."""
    try:
        return os.path.basename(os.readlink(path).rstrip("/")) or None
    except OSError:
        return None


def natural_key(name: str) -> list[object]:
    """Sort key that orders ``sda, sdb, ..., sdz, sdaa`` and ``loop2, loop10`` the way people expect."""
    return [(len(p), p) if not p.isdigit() else (0, int(p)) for p in re.split(r"(\d+)", name)]


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape_octal(text: str) -> str:
    r"""Undo the kernel's seq_file escaping (``\040`` for a space) used in mountinfo and swaps."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)
