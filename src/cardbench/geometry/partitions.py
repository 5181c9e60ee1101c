"""The partitions on a device, for the alignment advice: from sysfs when the kernel shows them,
else read from the device's own partition table (MBR, or GPT behind a protective MBR), through
the I/O layer. Read-only."""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.errors import CardbenchError

SECTOR = 512
#: MBR partition types that say nothing is there / that a GPT follows
EMPTY, GPT_PROTECTIVE = 0x00, 0xEE
#: how many GPT entries are read at most (128 is the usual table)
GPT_MAX_ENTRIES = 128


@dataclass
class PartitionInfo:
    number: int
    path: str | None
    start_bytes: int
    size_bytes: int
    fstype: str | None = None
    source: str = "sysfs"

    def to_dict(self) -> dict:
        return asdict(self)


def partition_path(device: str, number: int) -> str:
    """/dev/sdb + 1 -> /dev/sdb1; /dev/mmcblk0 or /dev/loop3 + 1 -> ...p1 (the kernel's naming)."""
    return f"{device}p{number}" if device[-1:].isdigit() else f"{device}{number}"


def from_sysfs(dev) -> list[PartitionInfo]:
    """From a :class:`cardbench.devices.discovery.BlockDevice` (its partitions, start from sysfs)."""
    out = []
    for p in getattr(dev, "partitions", None) or []:
        if p.start_bytes is None:
            continue
        out.append(PartitionInfo(p.number or 0, p.path, p.start_bytes, p.size, p.fstype, "sysfs"))
    return out


def parse_mbr(sector0: bytes) -> list[tuple[int, int, int, int]] | None:
    """(number, type, first LBA, sectors) of the used primary entries; None without a boot signature."""
    if len(sector0) < SECTOR or sector0[510:512] != b"\x55\xaa":
        return None
    out = []
    for i in range(4):
        entry = sector0[446 + 16 * i:462 + 16 * i]
        ptype = entry[4]
        first, count = struct.unpack_from("<II", entry, 8)
        if ptype != EMPTY and count:
            out.append((i + 1, ptype, first, count))
    return out


def parse_gpt(header: bytes, entries: bytes) -> list[tuple[int, int, int]]:
    """(number, first LBA, last LBA) of the used GPT entries (``header`` is LBA 1)."""
    if header[:8] != b"EFI PART":
        return []
    count, size = struct.unpack_from("<II", header, 80)
    out = []
    for i in range(min(count, GPT_MAX_ENTRIES, len(entries) // max(size, 1))):
        e = entries[i * size:(i + 1) * size]
        if e[:16] == bytes(16):
            continue
        first, last = struct.unpack_from("<QQ", e, 32)
        out.append((i + 1, first, last))
    return out


def from_table(data: DataFile, device: str) -> list[PartitionInfo]:
    """Read the partition table from the device itself (first sectors); [] when there is none."""
    buf = aligned_buffer(64 * SECTOR)
    try:
        data.read_exact(buf, 0)
        raw = bytes(buf)
        mbr = parse_mbr(raw[:SECTOR])
        if not mbr:
            return []
        if any(t == GPT_PROTECTIVE for _, t, _, _ in mbr):
            header = raw[SECTOR:2 * SECTOR]
            if header[:8] != b"EFI PART":
                return []
            lba = struct.unpack_from("<Q", header, 72)[0]
            if lba * SECTOR + 32 * SECTOR > 64 * SECTOR:
                data.read_exact(buf, lba * SECTOR)
                entries = bytes(buf)
            else:
                entries = raw[lba * SECTOR:]
            return [PartitionInfo(n, partition_path(device, n), first * SECTOR, (last - first + 1) * SECTOR, None, "gpt")
                    for n, first, last in parse_gpt(header, entries)]
        return [PartitionInfo(n, partition_path(device, n), first * SECTOR, count * SECTOR, None, "mbr")
                for n, _, first, count in mbr]
    except CardbenchError:
        return []
    finally:
        release(buf)


def partitions_of(dev, data: DataFile, device: str) -> list[PartitionInfo]:
    """sysfs first (with filesystem types from lsblk), else the device's own table."""
    return from_sysfs(dev) or from_table(data, device)
