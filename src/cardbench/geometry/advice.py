"""The advice, in words and commands, from what the geometry pass found (pure: no I/O).

Rules (sources in the project's reference notes: standards.md §2.2 [S12], peers.md §6.3):
* a partition should start on an AU boundary; the SD spec wants recording to start on the first
  whole AU after the filesystem area, so an AU that straddles a partition start costs every write
  near it twice;
* FAT32/exFAT clusters of at least 32 KiB and at least a page;
* ext4: ``stripe_width`` = the AU in 4 KiB blocks, ``stride`` = the page in blocks;
* f2fs: a section (segments of 2 MiB x ``-s``) as large as the AU, and ``active_logs`` (2, 4
  or 6) no larger than the number of AUs the card keeps open.
When no AU was found (or declared), partitions are aligned to the largest AU the SD spec allows
for the card's capacity [S12 §4.13: 512 KB up to 64 MB, ... 4 MB up to 32 GB, 64 MB for SDXC],
which is a multiple of every smaller power-of-two AU.
"""

from __future__ import annotations

from typing import Any

from cardbench.geometry.doc import size_text
from cardbench.geometry.partitions import PartitionInfo, partition_path

KiB, MiB = 1 << 10, 1 << 20
SECTOR = 512
#: the SD spec's maximum AU by capacity: (capacity up to, in bytes; AU in bytes) [S12 §4.13]
MAX_AU_BY_CAPACITY: tuple[tuple[int, int], ...] = (
    (64 * 10**6, 512 * KiB), (256 * 10**6, 1 * MiB), (512 * 10**6, 2 * MiB), (32 * 10**9, 4 * MiB),
    (2 * 10**12, 64 * MiB),
)
#: clusters of at least this (peers.md §6.3: "FAT clusters of 32 KiB or more, at least a page")
MIN_CLUSTER = 32 * KiB
#: mkfs.vfat -s takes at most 128 sectors per cluster (64 KiB)
FAT32_MAX_CLUSTER = 64 * KiB
#: an f2fs segment
F2FS_SEGMENT = 2 * MiB
#: the active_logs values f2fs accepts
F2FS_LOGS = (2, 4, 6)
#: SDHC (FAT32) up to here; SDXC (exFAT) above [S12 p21]
FAT32_LIMIT = 34_359_738_368



def spec_alignment(size: int) -> int:
    """The largest AU the SD spec allows for a card of ``size`` bytes."""
    for limit, au in MAX_AU_BY_CAPACITY:
        if size <= limit:
            return au
    return MAX_AU_BY_CAPACITY[-1][1]


def advise(device: str, size: int, *, au: int | None, au_basis: str | None, page: int | None,
           open_linear: int | None, partitions: list[PartitionInfo]) -> dict[str, Any]:
    """The advice document: alignment of each partition, cluster size, mkfs commands, sentences."""
    align = au or spec_alignment(size)
    basis = au_basis if au else "the SD spec's largest AU for this capacity (no AU found)"
    lines: list[str] = []
    fat32 = size <= FAT32_LIMIT
    first = next((p for p in partitions if p.number == 1), partitions[0] if partitions else None)
    target = partition_path(device, first.number if first else 1)
    start = align
    ptype = "c" if fat32 else "7"
    repartition = (f"printf 'label: dos\\nstart={start // SECTOR}, type={ptype}\\n' | sfdisk {device}")
    parts = []
    for p in partitions:
        aligned = p.start_bytes % align == 0
        entry = {"number": p.number, "path": p.path, "start_bytes": p.start_bytes, "aligned": aligned, "fix": None}
        if not aligned:
            nxt = -(-p.start_bytes // align) * align
            entry["fix"] = repartition if len(partitions) == 1 else (
                f"move partition {p.number} to start at sector {nxt // SECTOR} ({size_text(nxt)})")
            lines.append(f"partition {p.number} ({p.path}) starts at {size_text(p.start_bytes)} (sector "
                         f"{p.start_bytes // SECTOR}), not on a {size_text(align)} AU boundary: the card's AUs straddle "
                         f"it, so writes near its start cost two AUs. Fix (erases the card; copy its files off "
                         f"first): {entry['fix']}, then make the filesystem again (below).")
        else:
            lines.append(f"partition {p.number} ({p.path}) starts at {size_text(p.start_bytes)}, on a {size_text(align)} "
                         f"AU boundary: good.")
        parts.append(entry)
    if not partitions:
        lines.append(f"no partition table: to make one on an AU boundary: {repartition}")
    cluster = max(MIN_CLUSTER, page or 0)
    if au:
        cluster = min(cluster, au)
    fat_cluster = min(cluster, FAT32_MAX_CLUSTER)
    ext_stripe = max(1, align // 4096)
    ext_stride = max(1, (page or 4096) // 4096)
    segs = max(1, align // F2FS_SEGMENT)
    logs = max([n for n in F2FS_LOGS if open_linear is None or n <= open_linear] or [2])
    commands = {
        "partition": repartition,
        "vfat": f"mkfs.vfat -F 32 -s {fat_cluster // SECTOR} {target}",
        "exfat": f"mkfs.exfat -c {cluster // KiB}K -b {align // KiB}K {target}",
        "ext4": f"mkfs.ext4 -b 4096 -E stride={ext_stride},stripe_width={ext_stripe} {target}",
        "f2fs": f"mkfs.f2fs -s {segs} {target} && mount -o active_logs={logs} {target} /mnt",
    }
    lines.append(f"clusters: {size_text(fat_cluster)} for FAT32 ({commands['vfat']}), {size_text(cluster)} for exFAT "
                 f"({commands['exfat']}): at least 32 KiB" + (f" and a page ({size_text(page)})" if page else "") + ".")
    lines.append(f"ext4: {commands['ext4']} (stripe_width = the {size_text(align)} AU in 4 KiB blocks).")
    f2fs = f"f2fs: {commands['f2fs']} (a section of {segs} x 2 MiB segments"
    f2fs += " = the AU)" if align % F2FS_SEGMENT == 0 else f"; the {size_text(align)} AU is not a multiple of 2 MiB)"
    if open_linear is None:
        f2fs += "; active_logs=2 is safe, --write finds how many AUs the card keeps open"
    elif open_linear < 2:
        f2fs += f"; even 2 logs are more than the {open_linear} AU it keeps open"
    lines.append(f2fs + ".")
    if open_linear is not None:
        lines.append(f"this card keeps {open_linear} AU{'s' if open_linear != 1 else ''} open: a camera or a "
                     f"filesystem writing {open_linear + 1} files at once will be slow on it.")
    return {"alignment_bytes": align, "alignment_basis": basis, "partitions": parts, "cluster_bytes": cluster,
            "fat32_cluster_bytes": fat_cluster, "commands": commands, "lines": lines}
