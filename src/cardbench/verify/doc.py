"""The ``cardbench.verify/1`` document: the pieces quick and full mode share.

Field by field (docs/formats.md, "The verify document"):

schema          "cardbench.verify/1"
id              random hex id
mode            "quick" (sampling probe of a block device) | "full" (fill and check everything)
verdict         "genuine" | "counterfeit" (holds less than it announces) | "damaged" (loses data or fails
                I/O inside its real capacity, or stopped answering) | null (the device went away
                before the test could tell: cardbench.target.Target.gone)
announced_bytes what the card says it holds
usable_bytes    what it really holds, from the start: the size to partition it to (null: unknown)
kind            how a counterfeit fails past usable_bytes: "wraparound" (writes land on earlier
                addresses), "dropped" (writes are lost: zeros or old data read back), "other"
                (I/O errors, damage); null when genuine
bad_ranges      [[start, end), ...] bytes of the device (quick, block device) that are not usable
fix_command     a command that repartitions the card to usable_bytes; ``fix.tool`` says which
method          how it was measured (positions sampled, block size, cache flush, seed, ...)
timings         seconds: wall time, time in writes, reads, journal saving and restoring
device / target what was tested; card / reader: identity, when known
complete        false when the run stopped early (card removed, interrupted)
error           null or one line saying what went wrong
"""

from __future__ import annotations

import shutil
import uuid
from typing import Any

from cardbench import __version__
from cardbench.devices import BlockDevice
from cardbench.devices.identity import identify
from cardbench.devices.safety import check_destructive
from cardbench.engine.errors import wrong_kind
from cardbench.errors import CardbenchError
from cardbench.kinds import VERIFY_SCHEMA as SCHEMA
from cardbench.result import Card, Reader, host_info, now_iso
from cardbench.target import Target
from cardbench.verify.verdict import VERDICTS  # noqa: F401  (part of the document's vocabulary)

KINDS = ("wraparound", "dropped", "other")


def new_doc(mode: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "mode": mode,
        "started_at": now_iso(),
        "finished_at": None,
        "verdict": None,
        "announced_bytes": None,
        "usable_bytes": None,
        "kind": None,
        "bad_ranges": [],
        "fix_command": None,
        "fix": None,
        "method": {},
        "timings": {},
        "device": None,
        "card": None,
        "reader": None,
        "complete": False,
        "error": None,
        "tool": {"name": "cardbench", "version": __version__},
        "host": host_info(),
    }


def fix_for(device: str | None, announced: int, usable: int | None) -> dict[str, Any] | None:
    """How to repartition a card to its usable size: f3fix when installed, else an sfdisk line.

    f3fix writes a new MBR partition table with one partition from sector 2048 to ``--last-sec``;
    the sfdisk line does the same (1 MiB-aligned end). Both erase the old partition table.
    """
    if device is None or usable is None or usable >= announced:
        return None
    first = 2048
    last = usable // 512 - 1
    if last <= first + 2048:
        return {"tool": None, "command": None, "last_sector": last,
                "note": "too little usable space to be worth a partition"}
    size = (last + 1 - first) // 2048 * 2048
    f3fix = f"f3fix --last-sec={last} {device}"
    sfdisk = f"printf 'label: dos\\nstart={first}, size={size}, type=c\\n' | sfdisk {device}"
    tool = "f3fix" if shutil.which("f3fix") else "sfdisk"
    return {
        "tool": tool,
        "command": f3fix if tool == "f3fix" else sfdisk,
        "last_sector": last,
        "alternatives": {"f3fix": f3fix, "sfdisk": sfdisk},
        "note": "rewrites the partition table (one FAT32 partition ending before the first bad byte); "
                "then format it, e.g. mkfs.vfat " + (device + "1" if device[-1:].isalpha() else device + "p1"),
    }


def device_to_write(target: Target, *, check_safety: bool = True) -> BlockDevice | None:
    """The whole block device a verify writes to (``target``: a device's, from
    :func:`cardbench.target.open_target`): its state read again now and its identity compared
    (:func:`cardbench.devices.safety.check_destructive`: SafetyRefusal unless a raw write is
    allowed); another kind of target is refused (TargetError). With ``check_safety=False``
    (tests), the device as found, None when it cannot be read."""
    if not check_safety:
        try:
            return target.block_device()
        except CardbenchError:
            return None
    dev = target.block_device() if target.kind == "device" else None
    if dev is None:
        raise wrong_kind(target.path, "a directory" if target.kind == "directory" else "a regular file", ("device",))
    return check_destructive(dev)


def identity(dev: BlockDevice | None) -> tuple[Card | None, Reader | None]:
    """Card and reader identity from a ``cardbench.devices.BlockDevice`` (None when unknown):
    the same rule as every other record (:func:`cardbench.devices.identity.identify`)."""
    if dev is None:
        return None, None
    card, reader = Card(), Reader()
    identify(dev, card, reader)
    return card, (reader if (reader.vendor_id or reader.name or reader.transport) else None)


def _num(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None
