"""``find_geometry(target, GeometryOptions(...)) -> dict``: the geometry pass of one device.

Read-only by default (a mounted card may be timed: nothing is written). ``write=True`` adds the
open-AU and FAT tests, only on a device the safety rules allow writing to
(:func:`cardbench.devices.safety.check_destructive`: not mounted, not the system, writable),
either confirmed as destructive (the device's identity token, as ``run --destructive``) or with
``preserve`` (every region saved to a journal first and written back after, as the quick verify).
"""

from __future__ import annotations

import os
import random
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from cardbench.devices.identity import identify
from cardbench.devices.lock import target_lock
from cardbench.devices.preserve import Preserver, restore_held
from cardbench.devices.safety import check_destructive, confirm, open_exclusive
from cardbench.engine.data import DataFile
from cardbench.errors import Interrupted, TargetError, UsageError
from cardbench.geometry import writes
from cardbench.geometry.advice import advise
from cardbench.geometry.doc import new_doc, size_text
from cardbench.geometry.partitions import partitions_of
from cardbench.geometry.timing import MAX_AU, REPEATS, ReadPass, read_pass, scan_reads
from cardbench.progress import NullProgress, ProgressReporter
from cardbench.result import Card, Reader, now_iso
from cardbench.target import DeviceTarget


@dataclass
class GeometryOptions:
    """What ``cardbench geometry`` does. ``au``: the AU the write pass uses when the read pass
    found none (and the card declares none)."""

    write: bool = False
    preserve: bool = False
    confirm: str | None = None
    max_au: int = MAX_AU
    repeats: int = REPEATS
    max_open: int = writes.MAX_OPEN
    au: int | None = None
    journal_dir: str | None = None
    seed: int | None = None
    progress: ProgressReporter = field(default_factory=NullProgress)

    def validate(self) -> None:
        if self.preserve and not self.write:
            raise UsageError("--preserve is for --write (the read pass writes nothing)")
        if self.confirm is not None and not self.write:
            raise UsageError("--confirm is for --write (the read pass writes nothing)")
        if not 2 <= self.repeats <= 100:
            raise UsageError(f"--repeats must be between 2 and 100, got {self.repeats}")
        if not 2 <= self.max_open <= 64:
            raise UsageError(f"--max-open must be between 2 and 64, got {self.max_open}")
        if self.au is not None and (self.au <= 0 or self.au % 512):
            raise UsageError(f"--au must be a positive multiple of 512 bytes, got {self.au}")



#: ``declared_au_source`` of a card whose SD Status was read and declares no AU (AU_SIZE 0)
NO_AU_SIZE = "SD Status AU_SIZE 0"


def declared_au(dev) -> tuple[int | None, str | None]:
    """(bytes, source) of the AU the card declares: SD Status AU_SIZE, else sysfs
    preferred_erase_size (an SD card on a native host where the SD Status cannot be read);
    (None, None) behind a USB reader. (None, NO_AU_SIZE) when the SD Status was read and its
    AU_SIZE is 0: the kernel's preferred_erase_size is then its own guess from the capacity
    (512 KiB under 128 MiB, 1 MiB, 2 MiB, 4 MiB from 1 GiB: mmc_init_erase), not the card's."""
    card = getattr(dev, "card", None)
    if card is None:
        return None, None
    status = card.status
    if status is not None:
        return (status.au_size_bytes, "SD Status AU_SIZE") if status.au_size_bytes else (None, NO_AU_SIZE)
    if card.preferred_erase_size:
        return card.preferred_erase_size, "sysfs preferred_erase_size"
    return None, None


def _answer(doc: dict, rp: ReadPass) -> str:
    au, page = doc["allocation_unit_bytes"], doc["page_bytes"]
    if au is None:
        text = (f"no boundary found: small reads take {rp.read_floor * 1e6:.0f} us at every boundary tried, "
                f"flat; the card shows no AU in its read timing, or the reader does not pass small reads "
                f"through (its timing is flat at its own overhead)")
    else:
        text = f"AU {size_text(au)} ({doc['allocation_unit_confidence']} confidence)"
        text += f", page {size_text(page)} ({doc['page_confidence']})" if page else ", no page step found"
    declared = doc["declared_au_bytes"]
    if declared is None and doc["declared_au_source"] == NO_AU_SIZE:
        text += "; the card declares no AU (its SD Status AU_SIZE is 0)"
    elif declared is None:
        text += "; the card declares no AU (only a native SD slot shows it)"
    else:
        text += f"; the card declares {size_text(declared)} ({doc['declared_au_source']})"
        if doc["timing_agrees"] is not None:
            text += ", the timing agrees" if doc["timing_agrees"] else ", the timing disagrees"
    units = doc["open_units"]
    if units["linear"] is not None:
        text += f"; it keeps {units['linear']} AUs open"
        if units["random"] is not None and units["random"] != units["linear"]:
            text += f" ({units['random']} when written in random order)"
    if doc["fat_units"]:
        text += f"; its first {doc['fat_units']} AU{'s are' if doc['fat_units'] > 1 else ' is'} FAT-tuned"
    return text + "."


def find_geometry(target: DeviceTarget, opts: GeometryOptions | None = None) -> dict:
    """The geometry document of a whole block device (``open_device_target(path,
    whole_device=True)``; see :mod:`cardbench.geometry.doc`)."""
    opts = opts or GeometryOptions()
    opts.validate()
    path = target.path
    dev = target.block_device()
    if not os.access(path, os.R_OK):
        raise TargetError(f"cannot open {path}: permission denied (timing raw reads needs root)")
    if opts.write:
        dev = check_destructive(dev)     # the state read again, now: never mounted, system or read-only
        if not opts.preserve:
            confirm(dev, opts.confirm)
    doc = new_doc()
    doc["device"] = path
    card, reader = Card(), Reader()
    identify(dev, card, reader, ata_timeout=None)
    doc["card"] = card.to_dict()
    doc["reader"] = reader.to_dict() if (reader.vendor_id or reader.name or reader.transport) else None
    rng = random.Random(opts.seed)
    t0 = time.perf_counter()
    with ExitStack() as stack:
        stack.enter_context(target_lock(target.lock_key, wait=False, label=path))
        if opts.write:
            data = DataFile(stack.enter_context(open_exclusive(path, write=True)), path)
        else:
            data = stack.enter_context(DataFile.open(path, write=False))
        sector, size = data.geometry()
        doc["size_bytes"] = size
        with opts.progress.task("geometry: timing reads", scan_reads(size, opts.max_au, opts.repeats)) as adv:
            rp = read_pass(data, size, sector, max_au=opts.max_au, repeats=opts.repeats,
                           seed=rng.randrange(1 << 30), progress=adv)
        _fill_read(doc, rp, dev)
        doc["method"]["io"] = "O_DIRECT" if data.direct else "buffered (O_DIRECT refused)"
        parts = partitions_of(dev, data, path)
        if opts.write:
            _write_pass(doc, data, size, target, opts, rng)
    doc["seconds"] = round(time.perf_counter() - t0, 3)
    doc["advice"] = advise(path, size, au=doc["allocation_unit_bytes"] or doc["declared_au_bytes"],
                           au_basis="the AU found" if doc["allocation_unit_bytes"] else doc["declared_au_source"],
                           page=doc["page_bytes"], open_linear=doc["open_units"]["linear"], partitions=parts)
    doc["advice"]["partitions_source"] = parts[0].source if parts else None
    doc["message"] = _answer(doc, rp)
    doc["finished_at"] = now_iso()
    doc["complete"] = doc["error"] is None
    return doc


def _fill_read(doc: dict, rp: ReadPass, dev) -> None:
    doc["allocation_unit_bytes"] = rp.au.unit
    doc["allocation_unit_confidence"] = rp.au.confidence
    doc["page_bytes"] = rp.page.unit
    doc["page_confidence"] = rp.page.confidence
    declared, source = declared_au(dev)
    doc["declared_au_bytes"] = declared
    doc["declared_au_confidence"] = "high" if declared else "none"
    doc["declared_au_source"] = source
    if declared and rp.au.unit:
        doc["timing_agrees"] = declared == rp.au.unit
    guess = getattr(getattr(dev, "card", None), "preferred_erase_size", None)
    if source == NO_AU_SIZE and guess:
        doc["notes"].append(f"declared AU: none (SD Status AU_SIZE 0); the kernel's preferred_erase_size "
                            f"({size_text(guess)}) is its guess from the capacity, not the card's")
    for finding, what in ((rp.au, "AU"), (rp.page, "page")):
        if finding.reason:
            doc["notes"].append(f"{what}: {finding.reason}")
    doc["method"] = {"engine": "sync", "read_bytes": rp.read_bytes, "repeats": rp.repeats, "statistic": "minimum per read",
                     "cost": "straddling - (before + after) / 2", "au_candidates": "multiples of 512 KiB up to "
                     + size_text(rp.max_au), "au_boundaries": len(rp.au_scan.offsets),
                     "page_candidates": "multiples of 2 KiB from 4 KiB to 256 KiB",
                     "page_boundaries": len(rp.page_scan.offsets), "read_seconds": round(rp.seconds, 3),
                     "read_floor_seconds": round(rp.read_floor, 9)}
    doc["timing"] = {"au": {**rp.au_scan.to_dict(), "finding": rp.au.to_dict()},
                     "page": {**rp.page_scan.to_dict(), "finding": rp.page.to_dict()}}


def _write_pass(doc: dict, data: DataFile, size: int, target, opts: GeometryOptions, rng: random.Random) -> None:
    au = doc["allocation_unit_bytes"] or doc["declared_au_bytes"] or opts.au
    basis = ("found" if doc["allocation_unit_bytes"] else "declared" if doc["declared_au_bytes"]
             else "given" if opts.au else None)
    if au is None:
        doc["write"] = {"skipped": "no AU found or declared: give --au SIZE to test open AUs with it"}
        doc["notes"].append("write pass skipped: no AU found or declared (give --au SIZE)")
        return
    saver = Preserver(target.block_device(), opts.journal_dir) if opts.preserve else None
    w = writes.Writer(data, saver)
    out: dict = {"au_bytes": au, "au_basis": basis, "preserve": bool(saver)}
    interrupted: BaseException | None = None
    lin = ran = None
    fat = None
    try:
        with opts.progress.task("geometry: open AUs and FAT AUs", None):
            lin = writes.open_units(w, size, au, "linear", max_open=opts.max_open, rng=rng)
            ran = writes.open_units(w, size, au, "random", max_open=opts.max_open, rng=rng)
            fat = writes.fat_units(w, size, au, lin.count, rng=rng)
    except (KeyboardInterrupt, Interrupted) as e:
        interrupted = e
    finally:
        w.close()
        if saver is not None:
            done = restore_held(saver, opts.progress, "geometry: restoring saved bytes", gone=target.gone)
            out["restore"] = {"status": "restored" if done.kept is None else "kept",
                              "message": done.kept or f"restored {done.restored_bytes} bytes",
                              "seconds": round(done.seconds, 3)}
            if done.kept is not None:
                doc["error"] = done.kept
    if interrupted is not None:
        raise Interrupted("interrupted; " + (out.get("restore", {}).get("message") or "the device was left as it was"))
    assert lin is not None and ran is not None and fat is not None
    out.update(linear=lin.to_dict(), random=ran.to_dict(), fat=fat.to_dict())
    doc["write"] = out
    doc["open_units"] = {"linear": lin.count, "random": ran.count}
    doc["open_units_confidence"] = {"linear": lin.confidence, "random": ran.confidence}
    doc["fat_units"] = fat.count
    doc["fat_units_confidence"] = fat.confidence if fat.count is not None else "none"
    for r, what in ((lin, "open AUs (linear)"), (ran, "open AUs (random)"), (fat, "FAT AUs")):
        if r.reason:
            doc["notes"].append(f"{what}: {r.reason}")
    if lin.at_least:
        doc["open_units_at_least"] = {"linear": lin.at_least, "random": ran.at_least}
