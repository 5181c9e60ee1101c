"""Where a full verify's units are: :class:`DirRun`, files ``cardbench-verify-NNNN.cbv`` in
the free space of a mounted filesystem (mapped to the card by FIEMAP where the filesystem
answers), and :class:`DeviceRun`, segments of a whole block device (destructive)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cardbench.devices import resolve_device
from cardbench.devices.lock import key_of_stat, target_lock
from cardbench.devices.safety import check_destructive, open_exclusive
from cardbench.engine.fiemap import path_extents
from cardbench.errors import CardbenchError, Interrupted, TargetError, UsageError
from cardbench.patterns import SECTOR, merge_ranges
from cardbench.verify.doc import fix_for, identity
from cardbench.verify.full_run import FillRun, open_fill_file
from cardbench.verify.full_state import (
    FILE_PREFIX,
    FILE_RE,
    FILE_SUFFIX,
    STATE_NAME,
    GiB,
    MiB,
    default_file_bytes,
    read_json,
    write_json,
)
from cardbench.verify.full_state import state_dir as default_state_dir
from cardbench.workloads.files import drop_cache


class DirRun(FillRun):
    mode_target = "directory"

    def __init__(self, target, *, progress, seed, file_bytes, resume, keep_files, max_bytes, state_dir=None):
        """``target``: a directory target (:meth:`cardbench.target.DirTarget.open`)."""
        super().__init__(progress, seed, file_bytes, resume, max_bytes)
        self.state_root = Path(state_dir) if state_dir is not None else default_state_dir()
        self.target = target
        self.dir = Path(self.target.path)
        self.keep_files = keep_files
        self.state_path = self.dir / STATE_NAME
        self.extents: dict[int, Any] = {}
        self.device_path: str | None = None
        self.part_offset = 0
        self.whole_size: int | None = None
        self.physical_ok = False
        self._describe_device()

    def _describe_device(self) -> None:
        dev = self.target.device
        self.doc["target"] = self.target.to_dict()
        self.doc["device"] = dev
        if not dev:
            return
        try:
            whole, part = resolve_device(dev, devno=self.target.device_devno)
        except CardbenchError:
            return
        self.device_path = whole.path
        self.whole_size = whole.size
        self.part_offset = part.start_bytes if part is not None and part.start_bytes else 0
        card, reader = identity(whole)
        self.doc["card"] = card.to_dict() if card else None
        self.doc["reader"] = reader.to_dict() if reader else None
        self.doc["device"] = whole.path

    # -- state -------------------------------------------------------------------------------
    def save_state(self) -> None:
        try:
            write_json(self.state_path, self.state)
        except OSError as e:
            note = f"the state file could not be written on the card ({e.strerror}); a copy is kept in {self.state_root}"
            if note not in self.notes:
                self.notes.append(note)
        try:
            self.state_root.mkdir(parents=True, exist_ok=True)
            write_json(self.state_root / self._mirror_name(), self.state, durable=False)
        except OSError:
            pass

    def _mirror_name(self) -> str:
        if getattr(self, "_mirror", None) is None:
            st = self.target._st
            self._mirror = (f"{key_of_stat(st)}.json" if st is not None
                            else f"dir-{self.target.lock_key}.json")
        return self._mirror

    def _leftovers(self) -> list[Path]:
        try:
            return sorted(p for p in self.dir.iterdir() if FILE_RE.match(p.name))
        except OSError:
            return []

    def _drop_mirror(self) -> None:
        try:
            (self.state_root / self._mirror_name()).unlink()
        except OSError:
            pass

    # -- units -------------------------------------------------------------------------------------
    def _free(self) -> int:
        try:
            return self.target.free_now()
        except OSError:
            return 0

    def planned_total(self) -> int:
        done = sum(u.get("written", 0) for u in self.state["units"] if u.get("complete"))
        free = self._free()
        total = done + free
        if self.max_bytes:
            total = min(total, self.max_bytes)
        return total

    def next_unit(self) -> dict | None:
        moved = self.target.moved()
        if moved:      # never fill the filesystem below an unmounted card's mount point
            self.gone = True
            self.stopped = f"{self.dir}: {moved}"
            return None
        units = self.state["units"]
        done = sum(u.get("written", 0) for u in units if u.get("complete"))
        if self.max_bytes is not None and done >= self.max_bytes:
            self.stopped = "limit"
            return None
        fb = self.state["file_bytes"]
        free = self._free()
        if free < SECTOR * 8:
            self.stopped = "full"
            return None
        k = len(units)
        planned = fb
        if self.max_bytes is not None:
            planned = min(planned, self.max_bytes - done)
        planned = max(MiB, planned // MiB * MiB) if planned >= MiB else planned // SECTOR * SECTOR
        unit = {"index": k + 1, "name": f"{FILE_PREFIX}{k + 1:04d}{FILE_SUFFIX}", "base": k * fb,
                "planned": planned, "written": 0, "complete": False}
        units.append(unit)
        return unit

    def open_unit_write(self, unit: dict) -> tuple[int, bool]:
        path = self.dir / unit["name"]
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return open_fill_file(str(path), write=True)

    def write_unit(self, unit: dict, adv) -> None:
        super().write_unit(unit, adv)
        if not unit.get("written"):
            try:
                (self.dir / unit["name"]).unlink()   # nothing fitted: no empty file left behind
            except OSError:
                pass

    def open_unit_read(self, unit: dict) -> tuple[int, bool]:
        path = str(self.dir / unit["name"])
        fd, direct = open_fill_file(path, write=False)
        if not direct:
            left = drop_cache(path)
            if left > 0:
                self.notes.append(f"{unit['name']}: {left:.0%} still in the page cache when read back")
        return fd, direct

    def close_unit(self, fd: int) -> None:
        os.close(fd)

    def unit_offset(self, unit: dict) -> int:
        return 0

    def physical(self, virtual: int, length: int = SECTOR) -> list[tuple[int, int]] | None:
        fb = self.state["file_bytes"]
        k = virtual // fb
        off = virtual % fb
        if k not in self.extents:
            units = self.state["units"]
            if k >= len(units):
                self.extents[k] = None
            else:
                self.extents[k] = path_extents(str(self.dir / units[k]["name"]))
        ext = self.extents[k]
        if ext is None:
            return None
        pieces = ext.pieces(off, length)
        return pieces or None

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> dict:
        # the card, not the directory (as `cardbench run` locks it): never two tests on one card at once
        with target_lock(self.target.lock_key, label=str(self.dir)):
            self._prepare()
            try:
                if self.state["phase"] == "write":
                    self.write_pass()
                if self.state["phase"] in ("read", "done") or self.gone or self.stopped:
                    self.read_pass()
                self.physical_ok = bool(self.state["units"]) and self.device_path is not None and all(
                    self.physical(u["base"]) is not None for u in self.state["units"][:1])
                self._finish()
            except (KeyboardInterrupt, Interrupted):
                self._interrupted()
            self._cleanup()
        return self.doc

    def _prepare(self) -> None:
        old = read_json(self.state_path)
        if old is None and self.resume:
            # the card may have lost the state file (a fake card can overwrite it): use the copy
            try:
                old = read_json(self.state_root / self._mirror_name())
            except OSError:
                old = None
        if self.resume:
            if old is None:
                raise UsageError(f"nothing to resume in {self.dir} (no {STATE_NAME})")
            self.state = old
            self.state["resumed"] = True
            self.doc["id"] = old.get("doc_id", self.doc["id"])
            self.doc["started_at"] = old.get("started_at", self.doc["started_at"])
            for u in self.state["units"]:
                if not u.get("complete"):
                    u["written"] = 0   # written again from the start
                elif u.get("written") and not (self.dir / u["name"]).exists():
                    raise TargetError(f"cannot resume: {u['name']} is missing from {self.dir}")
            self.state["units"] = [u for u in self.state["units"] if u.get("complete")]
            self.notes.append(f"resumed a run started at {self.doc['started_at']}")
        else:
            left = self._leftovers()
            if left:
                for p in left:
                    try:
                        p.unlink()
                    except OSError:
                        pass
                self.notes.append(f"removed {len(left)} file(s) of an earlier unfinished verify")
            fb = self.file_bytes_opt or default_file_bytes(self.target.free_now())
            self.new_state({"file_bytes": fb, "target": str(self.dir)})
            self.save_state()
        self.load_pattern()

    def _finish(self) -> None:
        announced = self.whole_size
        if announced is None:
            try:
                announced = self.target.size()
            except CardbenchError:
                announced = 0
        self.doc["method"]["free_bytes_at_start"] = self.target.free_bytes
        self.finish(announced=announced, device=self.device_path, offset_on_device=self.part_offset,
                    physical_ok=self.physical_ok, whole_size=self.whole_size)
        if self.physical_ok is False and self.device_path is None:
            self.notes.append("no block device under this directory: capacities are of the filesystem")

    def _interrupted(self) -> None:
        self.interrupted(f"{len(self._leftovers())} file(s) and {STATE_NAME} kept in {self.dir}: "
                         f"continue with `cardbench verify --full --resume {self.dir}`")

    def _cleanup(self) -> None:
        files = [] if self.keep_files else self._leftovers()
        if self.keep_files:
            self.doc["files_kept"] = True
        failed = 0
        for p in files + [self.state_path]:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                failed += 1
        self._drop_mirror()
        if failed:
            self.doc["notes"].append(f"{failed} file(s) could not be removed from {self.dir}")


class DeviceRun(FillRun):
    mode_target = "device"

    def __init__(self, target, *, progress, seed, file_bytes, resume, check_safety, max_bytes, state_dir):
        """``target``: a whole device's target (cardbench.target.open_target)."""
        super().__init__(progress, seed, file_bytes, resume, max_bytes)
        self.target = target
        self.path = self.target.path
        self.check_safety = check_safety
        self.state_root = Path(state_dir) if state_dir is not None else default_state_dir()
        self.fd: int | None = None
        self.size = 0
        self.dev = None

    def planned_total(self) -> int:
        return min(self.size, self.max_bytes or self.size)

    def save_state(self) -> None:
        self.state_root.mkdir(parents=True, exist_ok=True)
        write_json(self.state_root / self._state_name(), self.state)

    def _state_name(self) -> str:
        serial = (getattr(self.dev, "serial", None) or "noserial").replace("/", "_")
        return f"device-{os.path.basename(self.path)}-{serial}-{self.size}.json"

    def next_unit(self) -> dict | None:
        units = self.state["units"]
        fb = self.state["file_bytes"]
        k = len(units)
        base = k * fb
        limit = min(self.size, self.max_bytes or self.size)
        if base >= limit:
            return None
        unit = {"index": k + 1, "name": f"segment {k + 1}", "base": base,
                "planned": min(fb, limit - base) // SECTOR * SECTOR, "written": 0, "complete": False}
        units.append(unit)
        return unit

    def open_unit_write(self, unit: dict) -> tuple[int, bool]:
        assert self.fd is not None
        return self.fd, True

    def open_unit_read(self, unit: dict) -> tuple[int, bool]:
        assert self.fd is not None
        return self.fd, True

    def close_unit(self, fd: int) -> None:
        pass

    def unit_offset(self, unit: dict) -> int:
        return unit["base"]

    def physical(self, virtual: int, length: int = SECTOR) -> list[tuple[int, int]] | None:
        return [(virtual, length)]

    def run(self) -> dict:
        try:
            self.dev = self.target.block_device()
        except CardbenchError:
            if self.check_safety:
                raise
            self.dev = None
        if self.check_safety:
            self.dev = check_destructive(self.dev)   # the state read again, now, and the identity compared
        card, reader = identity(self.dev)
        self.doc["card"] = card.to_dict() if card else None
        self.doc["reader"] = reader.to_dict() if reader else None
        self.doc["device"] = self.path
        with target_lock(self.target.lock_key, label=self.path), open_exclusive(self.path, write=True) as fd:
            self.fd = fd
            self.size = os.lseek(fd, 0, os.SEEK_END)
            self._prepare()
            try:
                if self.state["phase"] == "write":
                    self.write_pass()
                self.read_pass()
                self.finish(announced=self.size, device=self.path, offset_on_device=0, physical_ok=True,
                            whole_size=self.size)
                self._device_tail()
            except (KeyboardInterrupt, Interrupted):
                self.interrupted(f"continue with `cardbench verify --full --destructive --resume {self.path}`")
        if self.doc.get("complete"):
            try:
                (self.state_root / self._state_name()).unlink()
            except OSError:
                pass
        return self.doc

    def _device_tail(self) -> None:
        """On a whole device, lost data that runs to the end is a short card; earlier damage is damage."""
        d = self.doc
        if d["kind"] == "wraparound":
            return
        ranges = merge_ranges(self.bad_phys)
        if not ranges:
            return
        last = ranges[-1]
        written_end = max((u["base"] + u["written"] for u in self.state["units"] if u.get("written")), default=0)
        if last[1] >= written_end and d["kind"] == "dropped":
            d["usable_bytes"] = last[0]
            d["usable_basis"] = "first byte of the lost tail"
            d["bad_ranges"] = merge_ranges([r for r in d["bad_ranges"] if r[0] < last[0]] + [(last[0], self.size)])
            fix = fix_for(self.path, self.size, last[0])
            d["fix"] = fix
            d["fix_command"] = fix["command"] if fix else None

    def _prepare(self) -> None:
        old = read_json(self.state_root / self._state_name()) if self.resume else None
        if self.resume and old is None:
            raise UsageError(f"nothing to resume for {self.path}")
        if old is not None:
            self.state = old
            self.state["resumed"] = True
            self.state["units"] = [u for u in self.state["units"] if u.get("complete")]
            self.doc["id"] = old.get("doc_id", self.doc["id"])
        else:
            fb = self.file_bytes_opt or max(64 * MiB, min(GiB, default_file_bytes(self.size)))
            self.new_state({"file_bytes": fb, "target": self.path})
            self.save_state()
        self.load_pattern()
