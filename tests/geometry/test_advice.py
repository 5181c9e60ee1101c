"""The advice and the partition table reader on models (rules tier: no device, no mkfs)."""

from __future__ import annotations

import struct

from cardbench.geometry.advice import advise, spec_alignment
from cardbench.geometry.partitions import (
    PartitionInfo,
    parse_gpt,
    parse_mbr,
    partition_path,
)

KiB, MiB = 1 << 10, 1 << 20


def part(start, number=1, path="/dev/sdb1"):
    return PartitionInfo(number, path, start, 30 << 30, "vfat", "sysfs")


def test_a_partition_at_1_mib_on_a_4_mib_au_is_misaligned_and_the_fix_is_given():
    a = advise("/dev/sdb", 31_914_983_424, au=4 * MiB, au_basis="the AU found", page=16 * KiB, open_linear=2,
               partitions=[part(1 * MiB)])
    p = a["partitions"][0]
    assert p["aligned"] is False
    assert p["fix"] == "printf 'label: dos\\nstart=8192, type=c\\n' | sfdisk /dev/sdb"
    first = a["lines"][0]
    assert "partition 1 (/dev/sdb1) starts at 1 MiB (sector 2048), not on a 4 MiB AU boundary" in first
    assert p["fix"] in first
    assert a["commands"]["vfat"] == "mkfs.vfat -F 32 -s 64 /dev/sdb1"
    assert a["commands"]["exfat"] == "mkfs.exfat -c 32K -b 4096K /dev/sdb1"
    assert a["commands"]["ext4"] == "mkfs.ext4 -b 4096 -E stride=4,stripe_width=1024 /dev/sdb1"
    assert a["commands"]["f2fs"] == "mkfs.f2fs -s 2 /dev/sdb1 && mount -o active_logs=2 /dev/sdb1 /mnt"
    assert a["lines"][-1] == ("this card keeps 2 AUs open: a camera or a filesystem writing 3 files at once "
                              "will be slow on it.")


def test_an_aligned_partition_is_said_good_and_12_mib_sections_are_six_segments():
    a = advise("/dev/mmcblk0", 64 * 10**9, au=12 * MiB, au_basis="the AU found", page=None, open_linear=6,
               partitions=[part(12 * MiB, path="/dev/mmcblk0p1")])
    assert a["partitions"][0]["aligned"] is True and "good" in a["lines"][0]
    assert a["commands"]["f2fs"].startswith("mkfs.f2fs -s 6 /dev/mmcblk0p1") and "active_logs=6" in a["commands"]["f2fs"]
    assert "type=7" in a["commands"]["partition"]          # SDXC: exFAT


def test_without_an_au_the_spec_largest_for_the_capacity_is_used():
    assert spec_alignment(16 * 10**9) == 4 * MiB and spec_alignment(128 * 10**9) == 64 * MiB
    assert spec_alignment(48 * 10**6) == 512 * KiB
    a = advise("/dev/sdc", 16 * 10**9, au=None, au_basis=None, page=None, open_linear=None,
               partitions=[part(2 * MiB, path="/dev/sdc1")])
    assert a["alignment_bytes"] == 4 * MiB and "no AU found" in a["alignment_basis"]
    assert a["partitions"][0]["aligned"] is False
    assert not any("a camera" in line for line in a["lines"])


def test_one_au_open_is_said_and_f2fs_warned():
    a = advise("/dev/sdb", 8 * 10**9, au=4 * MiB, au_basis="x", page=None, open_linear=1, partitions=[])
    assert "no partition table" in a["lines"][0]
    assert "keeps 1 AU open" in a["lines"][-1] and "writing 2 files" in a["lines"][-1]
    assert any("more than the 1 AU it keeps open" in line for line in a["lines"])


def test_partition_names():
    assert partition_path("/dev/sdb", 1) == "/dev/sdb1"
    assert partition_path("/dev/mmcblk0", 2) == "/dev/mmcblk0p2"
    assert partition_path("/dev/loop7", 1) == "/dev/loop7p1"


def test_mbr_and_gpt_tables_are_read():
    mbr = bytearray(512)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, bytes(3), 0x0C, bytes(3), 2048, 100000)
    mbr[462:478] = struct.pack("<B3sB3sII", 0, bytes(3), 0x83, bytes(3), 102400, 5000)
    mbr[510:512] = b"\x55\xaa"
    assert parse_mbr(bytes(mbr)) == [(1, 0x0C, 2048, 100000), (2, 0x83, 102400, 5000)]
    assert parse_mbr(bytes(512)) is None
    header = bytearray(512)
    header[:8] = b"EFI PART"
    struct.pack_into("<QII", header, 72, 2, 128, 128)
    entries = bytearray(128 * 128)
    entries[0:16] = b"\x01" * 16
    struct.pack_into("<QQ", entries, 32, 8192, 8192 * 2 - 1)
    assert parse_gpt(bytes(header), bytes(entries)) == [(1, 8192, 16383)]
