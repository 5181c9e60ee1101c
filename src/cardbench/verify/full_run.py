"""The full verify's run: the write pass (fill every unit with pattern data, O_DIRECT, timed),
the read pass (read every unit back cold and judge every sector), and the document with its
verdict (:mod:`cardbench.verify.verdict`). Where the units are -- files in a directory or
segments of a whole device -- is up to the sources (:mod:`cardbench.verify.full_sources`)."""

from __future__ import annotations

import errno
import math
import os
import secrets
import time
from typing import Any, Generic, TypeVar

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile, open_raw
from cardbench.engine.errors import FULL, GONE, GONE_WORDS, IO_ERRORS, describe
from cardbench.errors import Interrupted
from cardbench.patterns import (
    CLASSES,
    DROPPED_CLASSES,
    SECTOR,
    Pattern,
    bad_runs,
    merge_ranges,
)
from cardbench.progress import NullProgress
from cardbench.target import GONE_WAIT, Target
from cardbench.verify.doc import fix_for, new_doc, now_iso
from cardbench.verify.full_state import STATE_SCHEMA, MiB
from cardbench.verify.verdict import in_card_order, judge_fill

CHUNK = 4 * MiB
MAX_RANGES = 256
_DROPPED = {CLASSES[c] for c in DROPPED_CLASSES}

T = TypeVar("T", bound=Target)


class FillRun(Generic[T]):
    """What directory and device runs share: the write pass, the read pass, the verdict."""

    mode_target = "directory"
    # set by each kind of run (verify/full_sources.py): what is filled; a device run's device
    # path; the whole device under a directory run's directory, None when unknown
    target: T
    path: str
    device_path: str | None

    def __init__(self, progress, seed, file_bytes, resume, max_bytes):
        self.progress = progress or NullProgress()
        self.seed = seed
        self.file_bytes_opt = file_bytes
        self.resume = resume
        self.max_bytes = max_bytes
        self.doc = new_doc("full")
        self.state: dict[str, Any] = {}
        self.pattern: Pattern | None = None
        self.t0 = time.monotonic()
        self.notes: list[str] = []
        self.stopped: str | None = None
        #: the card stopped answering (pulled out, or dead)
        self.gone = False
        #: the device itself went away (the target's rule, Target.gone): no verdict from what the
        #: fill could not write or read back
        self.went_away = False
        self.distances: list[int] = []
        self.phys_pairs = 0
        self.dropped_phys: list[tuple[int, int]] = []
        self.bad_phys: list[tuple[int, int]] = []
        self.bad_virtual: list[list[int]] = []
        #: fill ranges whose data did not come back (zeros, foreign data, garbage), in fill order
        self.lost_virtual: list[list[int]] = []
        self.overwritten_phys = 0

    # -- to be provided ---------------------------------------------------------------------------
    def save_state(self) -> None: ...
    def open_unit_write(self, unit: dict) -> tuple[int, bool]:
        raise NotImplementedError
    def open_unit_read(self, unit: dict) -> tuple[int, bool]:
        raise NotImplementedError
    def close_unit(self, fd: int) -> None: ...
    def unit_offset(self, unit: dict) -> int:   # where the unit's byte 0 is in its fd
        raise NotImplementedError
    def next_unit(self) -> dict | None: ...
    def physical(self, virtual: int, length: int = SECTOR) -> list[tuple[int, int]] | None: ...

    # -- state ----------------------------------------------------------------------------------
    def new_state(self, extra: dict) -> None:
        rng = secrets.SystemRandom() if self.seed is None else __import__("random").Random(self.seed)
        tag = rng.getrandbits(64) or 1
        self.state = {"schema": STATE_SCHEMA, "doc_id": self.doc["id"], "tag": f"{tag:016x}", "seed": self.seed,
                      "started_at": self.doc["started_at"], "phase": "write", "units": [], **extra}

    def load_pattern(self) -> None:
        self.pattern = Pattern(int(self.state["tag"], 16))

    def interrupted(self, how: str) -> None:
        """Stopped by Ctrl-C or SIGTERM: keep the state for ``--resume`` and raise Interrupted
        with the partial document; ``how`` says what was kept and how to go on."""
        try:
            self.save_state()
        except OSError:
            pass
        self.doc["complete"] = False
        self.doc["error"] = f"interrupted; {how}"
        raise Interrupted(self.doc["error"], partial=self.doc)

    def _unit_io(self, fd: int, unit: dict) -> tuple[DataFile, int, Any, memoryview]:
        """(the unit's data, where its byte 0 is, a chunk buffer and a view of it)."""
        buf = aligned_buffer(CHUNK)
        return DataFile(fd, unit["name"]), self.unit_offset(unit), buf, memoryview(buf)

    # -- passes --------------------------------------------------------------------------------
    def write_pass(self) -> None:
        total = self.planned_total()
        with self.progress.task("verify: writing", total) as adv:
            for u in self.state["units"]:
                if u.get("complete"):
                    adv(u["written"])
            while not self.stopped:
                unit = self.next_unit()
                if unit is None:
                    break
                self.write_unit(unit, adv)
                self.save_state()
        self.state["phase"] = "read"
        self.save_state()

    def write_unit(self, unit: dict, adv) -> None:
        assert self.pattern is not None
        try:
            fd, direct = self.open_unit_write(unit)
        except OSError as e:
            self.write_failed(unit, 0, e.errno)
            unit.update(written=0, complete=True)
            return
        data, base_fd, buf, mv = self._unit_io(fd, unit)
        done = 0
        planned = unit["planned"]
        t0 = time.perf_counter()
        try:
            while done < planned:
                n = min(CHUNK, planned - done)
                view = mv[:n]
                self.pattern.fill(view, unit["base"] + done)
                try:
                    got = data.write_at(view, base_fd + done)
                except IO_ERRORS as e:
                    self.write_failed(unit, done, e.errno)
                    break
                finally:
                    view.release()
                done += max(0, got)
                adv(max(0, got))
                if got < n:
                    self.stopped = "full"
                    break
            try:
                data.datasync()
            except IO_ERRORS as e:
                self.write_failed(unit, done, e.errno)
        finally:
            secs = time.perf_counter() - t0
            release(mv, buf)
            self.close_unit(fd)
        unit.update(written=done, write_seconds=secs, direct_write=direct,
                    write_bytes_per_s=done / secs if secs > 0 and done else None,
                    complete=True)

    def device_went_away(self, err: int | None, wait: float = GONE_WAIT) -> bool:
        """The target's rule (:meth:`cardbench.target.Target.gone`), looked at for ``wait`` s."""
        target = getattr(self, "target", None)
        if (target.gone(err, wait=wait) if target is not None else err in GONE):
            self.went_away = self.gone = True
        return self.went_away

    def write_failed(self, unit: dict, done: int, err: int | None) -> None:
        # a pulled device fails a write past its now-zero size with ENOSPC: gone, not full
        if (err not in FULL or self.mode_target == "device") and self.device_went_away(
                err, wait=0.0 if err in FULL else GONE_WAIT):
            unit["write_error"] = f"{GONE_WORDS} at byte {done}"
            self.stopped = (f"{self.target.path}: {GONE_WORDS} while writing {unit['name']} at byte {done} "
                            f"(fill byte {unit['base'] + done})")
            return
        if err in FULL:
            self.stopped = "full"
            return
        unit["write_error"] = f"{describe(err)} at byte {done}"
        if err in (errno.EIO, errno.EROFS) and not self.alive():
            self.gone = True
            self.stopped = (f"the card stopped answering (removed?) while writing {unit['name']} at byte {done} "
                            f"(fill byte {unit['base'] + done})")
        elif err == errno.EROFS:
            self.stopped = "the filesystem went read-only (the card reported errors)"
        elif err in GONE:
            self.stopped = "the card is gone (removed?)"
            self.gone = True
        else:
            self.stopped = f"write error ({describe(err)})"

    def read_pass(self) -> None:
        units = [u for u in self.state["units"] if u.get("written")]
        total = sum(u["written"] for u in units)
        with self.progress.task("verify: reading back", total) as adv:
            for u in units:
                if u.get("read") is not None:
                    adv(u["written"])
                    self.absorb(u)
                    continue
                self.read_unit(u, adv)
                self.absorb(u)
                self.save_state()
                if self.gone:
                    break
        if not self.gone:
            self.state["phase"] = "done"
            self.save_state()

    def read_unit(self, unit: dict, adv) -> None:
        assert self.pattern is not None
        res: dict[str, Any] = {"counts": {c: 0 for c in CLASSES}, "read_error_bytes": 0, "seconds": 0.0,
                               "first_bad": None, "bad_runs": [], "misplaced": [], "error": None}
        try:
            fd, direct = self.open_unit_read(unit)
        except OSError as e:
            res["error"] = f"cannot open: {describe(e.errno)}"
            res["read_error_bytes"] = unit["written"]
            unit["read"] = res
            self.check_gone(e.errno)
            return
        data, base_fd, buf, mv = self._unit_io(fd, unit)
        done = 0
        fails = 0
        written = unit["written"]
        try:
            while done < written:
                n = min(CHUNK, written - done)
                n_io = -(-n // SECTOR) * SECTOR
                view = mv[:n_io]
                t0 = time.perf_counter()
                try:
                    got = data.read_at(view, base_fd + done)
                except IO_ERRORS as e:
                    res["seconds"] += time.perf_counter() - t0
                    view.release()
                    res["read_error_bytes"] += n
                    res["error"] = res["error"] or f"read error at byte {done}: {describe(e.errno)}"
                    fails += 1
                    if self.check_gone(e.errno) or fails >= 8:
                        if fails >= 8:
                            self.stopped = self.stopped or "reads keep failing"
                        break
                    done += n
                    adv(n)
                    continue
                res["seconds"] += time.perf_counter() - t0
                fails = 0
                got = min(got, n)
                if got < n:
                    res["read_error_bytes"] += n - got
                    res["error"] = res["error"] or f"short read at byte {done + got}"
                    if got == 0 and self.check_gone(None):      # a pulled device reads 0 bytes
                        break
                if got >= SECTOR:
                    m = got // SECTOR * SECTOR
                    j = self.pattern.judge(view[:m], unit["base"] + done, keep_classes=True, max_misplaced=16)
                    for k, v in j.counts.items():
                        res["counts"][k] += v
                    if j.first_bad is not None:
                        if res["first_bad"] is None:
                            res["first_bad"] = j.first_bad
                        assert j.classes is not None        # judged with keep_classes
                        for start, end, c in bad_runs(j.classes, unit["base"] + done):
                            res["bad_runs"].append([start, end, CLASSES[c]])
                        if len(res["bad_runs"]) > MAX_RANGES:
                            res["bad_runs"] = coarsen(res["bad_runs"])
                        for where, belongs in j.misplaced:
                            if len(res["misplaced"]) < 16:
                                res["misplaced"].append([where, belongs])
                            self.take_pair(where, belongs)
                view.release()
                done += n
                adv(n)
        finally:
            release(mv, buf)
            self.close_unit(fd)
        res["bytes_per_s"] = (done / res["seconds"]) if res["seconds"] > 0 and done else None
        res["direct"] = direct
        unit["read"] = res

    def check_gone(self, err: int | None) -> bool:
        """After a failed read (``err``) or a short one (None): did the card stop answering?"""
        if err in GONE or (err in (errno.EIO, None) and not self.alive()):
            self.gone = True
            if self.stopped in (None, "full", "limit"):   # a fill that ended normally is no excuse
                if self.device_went_away(err):
                    self.stopped = f"{self.target.path}: {GONE_WORDS} while reading back"
                else:
                    self.stopped = "the card stopped answering (removed?) while reading back"
        return self.gone

    def alive(self) -> bool:
        """Does the card still answer a read of its first sector?"""
        path = self.device_path if self.mode_target == "directory" else self.path
        if not path:
            return True
        try:
            fd, _direct = open_raw(path, write=False)
        except OSError:
            return False
        buf = aligned_buffer(4096)
        try:
            DataFile(fd, path).read_at(buf, 0)
            return True
        except IO_ERRORS:
            return False
        finally:
            buf.close()
            os.close(fd)

    def take_pair(self, where: int, belongs: int) -> None:
        pw = self.physical(where)
        pb = self.physical(belongs)
        if pw and pb:
            d = abs(pb[0][0] - pw[0][0])
            if d and d % SECTOR == 0:
                self.distances.append(d)
                self.phys_pairs += 1

    def absorb(self, unit: dict) -> None:
        """Map a checked unit's bad runs to the card (when we can)."""
        res = unit["read"]
        for s, e, cls in res.get("bad_runs", []):
            self.bad_virtual.append([s, e])
            if cls in _DROPPED or cls == "mixed":
                self.lost_virtual.append([s, e])
            pieces = self.physical(s, e - s)
            if pieces is None:
                continue
            for ps, pn in pieces:
                if cls == "overwritten":
                    # real storage that a write past the end landed on: not a bad area itself
                    self.overwritten_phys += pn
                    continue
                self.bad_phys.append((ps, ps + pn))
                if cls in _DROPPED:
                    self.dropped_phys.append((ps, ps + pn))

    def planned_total(self) -> int:
        raise NotImplementedError

    def _lost_in_card_order(self, units: list[dict], physical_ok: bool) -> list[list[int]]:
        """The lost ranges laid out in the card's order (verdict.in_card_order) when every written
        unit maps to the card, else in fill order."""
        if not (physical_ok and self.lost_virtual):
            return self.lost_virtual
        data: list[tuple[int, int]] = []
        lost: list[tuple[int, int]] = []
        for todo, out in (([(u["base"], u["written"]) for u in units], data),
                          ([(s, e - s) for s, e in self.lost_virtual], lost)):
            for start, length in todo:
                pieces = self.physical(start, length)
                if pieces is None:
                    return self.lost_virtual
                out += pieces
        return in_card_order(data, lost)

    # -- the document --------------------------------------------------------------------------------
    def finish(self, *, announced: int, device: str | None, offset_on_device: int, physical_ok: bool,
               whole_size: int | None) -> None:
        units = [u for u in self.state["units"] if u.get("written")]
        counts = {c: 0 for c in CLASSES}
        read_err = 0
        written = sum(u["written"] for u in units)
        checked = 0
        for u in units:
            r = u.get("read") or {}
            for k, v in (r.get("counts") or {}).items():
                counts[k] += v
            read_err += r.get("read_error_bytes", 0)
            if r:
                checked += u["written"]
        ok_bytes = counts["ok"] * SECTOR
        dropped = sum(counts[c] for c in _DROPPED) * SECTOR
        overwritten = counts["overwritten"] * SECTOR
        changed = counts["changed"] * SECTOR
        write_errors = [u for u in units if u.get("write_error")]
        wrap = None
        if self.distances:
            g = 0
            for dist in self.distances:
                g = math.gcd(g, dist)
            wrap = g if g >= MiB and g % SECTOR == 0 else None
        usable: int | None = announced
        basis = "announced (every byte written read back right)"
        tail_start = None
        abnormal = self.gone or bool(self.stopped and self.stopped not in ("full", "limit"))
        # the one rule (verify/verdict.py), on the lost ranges in the card's order where the fill is
        # mapped to the card (a filesystem places files where it likes), else in fill order
        # a device that went away: its read and write errors are the removal's, not the card's
        failed = not self.went_away and bool(read_err or write_errors)
        verdict, kind = judge_fill(written=written, lost=self._lost_in_card_order(units, physical_ok),
                                   wrapped=overwritten > 0, damaged=bool(changed) or failed, stopped=abnormal,
                                   gone=self.went_away)
        if verdict == "counterfeit":
            if kind == "wraparound" and wrap and physical_ok:
                usable, basis = wrap, "wraparound distance on the device"
                tail_start = usable
            elif kind == "dropped" and self.dropped_phys and physical_ok:
                usable = offset_on_device + min(s for s, _ in self.dropped_phys)
                basis = "first lost byte on the device"
                tail_start = usable
            else:
                usable, basis = ok_bytes, "bytes that read back right (position on the card unknown)"
        elif verdict == "damaged" and (dropped or changed or failed):
            if self.bad_phys and physical_ok:
                usable = offset_on_device + min(s for s, _ in self.bad_phys)
                basis = "first bad byte on the device"
            else:
                usable, basis = ok_bytes, "bytes that read back right"
        if self.gone and verdict != "counterfeit":
            usable, basis = None, "unknown: the card stopped answering"
        if physical_ok:
            ranges = merge_ranges([(offset_on_device + s, offset_on_device + e) for s, e in self.bad_phys], gap=MiB)
            if tail_start is not None and whole_size:
                ranges = merge_ranges([r for r in ranges if r[0] < tail_start] + [[tail_start, whole_size]])
            space = "device"
        else:
            ranges = merge_ranges(self.bad_virtual, gap=MiB)
            space = "fill"
        if len(ranges) > MAX_RANGES:
            ranges = coarsen([[s, e, ""] for s, e in ranges])
            ranges = [[s, e] for s, e, _ in ranges]
        per_file = []
        for u in units:
            r = u.get("read") or {}
            per_file.append({
                "name": u["name"], "index": u["index"], "fill_offset": u["base"], "bytes": u["written"],
                "write_seconds": u.get("write_seconds"), "write_bytes_per_s": u.get("write_bytes_per_s"),
                "read_seconds": r.get("seconds"), "read_bytes_per_s": r.get("bytes_per_s"),
                "ok_bytes": (r.get("counts") or {}).get("ok", 0) * SECTOR,
                "counts": r.get("counts"), "first_bad": r.get("first_bad"),
                "misplaced_examples": r.get("misplaced", [])[:4],
                "error": u.get("write_error") or r.get("error"),
            })
        wsecs = sum(u.get("write_seconds") or 0 for u in units)
        rsecs = sum((u.get("read") or {}).get("seconds") or 0 for u in units)
        complete = not self.gone and self.state.get("phase") == "done" and \
            (self.stopped in (None, "full", "limit"))
        d = self.doc
        d.update({
            "finished_at": now_iso(),
            "verdict": verdict,
            "announced_bytes": announced,
            "usable_bytes": usable,
            "usable_basis": basis,
            "kind": kind,
            "bad_ranges": ranges,
            "bad_ranges_space": space,
            "complete": complete,
            "written_bytes": written,
            "checked_bytes": checked,
            "ok_bytes": ok_bytes,
            "lost_bytes": written - ok_bytes,
            "sectors": {k: v for k, v in counts.items()},
            "read_error_bytes": read_err,
            "files": per_file,
            "rates": [[u["base"], u.get("write_bytes_per_s"), (u.get("read") or {}).get("bytes_per_s")]
                      for u in units],
            "timings": {"seconds": time.monotonic() - self.t0, "write_seconds": wsecs, "read_seconds": rsecs,
                        "write_bytes_per_s": written / wsecs if wsecs else None,
                        "read_bytes_per_s": checked / rsecs if rsecs else None},
            "notes": self.notes,
        })
        if wrap:
            d["wrap_bytes"] = wrap
        d["method"].update({
            "algorithm": "fill and check every 512-byte sector (H2testw / f3write+f3read style)",
            "pattern": "512-byte sectors: run tag, fill position, pool data chosen by position",
            "tag": self.state.get("tag"), "seed": self.state.get("seed"),
            "file_bytes": self.state.get("file_bytes"), "chunk_bytes": CHUNK,
            "units": len(units), "physical_mapping": physical_ok, "wrap_pairs_mapped": self.phys_pairs,
            "resumed": bool(self.state.get("resumed")),
            "o_direct": all(u.get("direct_write", True) for u in units),
        })
        if self.stopped and self.stopped not in ("full", "limit"):
            d["error"] = self.stopped
        judged = verdict not in ("genuine", None)
        fix = fix_for(device, whole_size or announced, usable) if (judged and physical_ok and device) else None
        d["fix"] = fix
        d["fix_command"] = fix["command"] if fix else None
        if judged and not (physical_ok and device):
            d["fix"] = {"tool": None, "command": None,
                        "note": "the filesystem did not say where its files lie on the card; run "
                                "`cardbench verify DEVICE` (quick mode) on the unmounted card for the exact size "
                                "and the f3fix line"}


def open_fill_file(path: str, *, write: bool) -> tuple[int, bool]:
    """Open a fill file (a new one to write) through the I/O layer: O_DIRECT, buffered where the
    filesystem refuses it; OSError with its errno otherwise."""
    return open_raw(path, write=write, create=write)


def coarsen(runs: list[list]) -> list[list]:
    """Halve a list of ranges by merging each with its neighbour (keeps memory flat)."""
    runs = sorted(runs)
    out = []
    for i in range(0, len(runs), 2):
        pair = runs[i:i + 2]
        out.append([pair[0][0], pair[-1][1], pair[0][2] if len(pair) == 1 or pair[0][2] == pair[-1][2] else "mixed"])
    return out
