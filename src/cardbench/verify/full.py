"""Full mode: fill the card and check every 512-byte sector (H2testw, f3write + f3read).

On a mounted filesystem (a directory): the free space is filled with files
``cardbench-verify-0001.cbv``, ``-0002`` ... of ``file_bytes`` each (1 GiB, or 1/16 of the free
space on small cards), written with O_DIRECT and fdatasync'ed one by one (the time of each is its
write rate); then every file is read back with O_DIRECT, page cache dropped, and every sector
judged (:mod:`cardbench.patterns`): ok, overwritten (the data of another position of the fill:
the card wrapped around), changed (damaged), or lost (zeros, old data). The data of file k at
byte x belongs at fill position ``k * file_bytes + x``, so an overwritten sector names where it
was written. Where the filesystem answers FIEMAP, fill positions are mapped to bytes of the card,
so the report names the real capacity on the device and the f3fix line, as quick mode does.

On a block device (destructive only): the same over the whole device, in segments.

Resumable: a small state file beside the files (``cardbench-verify.json``; for a block device in
the user state dir) records the run's tag and what was written and checked; ``resume=True``
continues an interrupted run (the file being written when it stopped is written again). The files
are removed at the end unless ``keep_files``; after an interruption they stay for ``--resume``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import Any

from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile, open_raw
from cardbench.engine.errors import FULL, GONE, IO_ERRORS, describe
from cardbench.errors import CardbenchError, Interrupted, TargetError, UsageError
from cardbench.progress import NullProgress
from cardbench.patterns import CLASSES, DROPPED_CLASSES, SECTOR, Pattern, bad_runs, merge_ranges
from cardbench.verify.doc import fix_for, identity, new_doc, now_iso

MiB = 1 << 20
GiB = 1 << 30
CHUNK = 4 * MiB
STATE_NAME = "cardbench-verify.json"
STATE_SCHEMA = "cardbench.verify-state/1"
FILE_PREFIX = "cardbench-verify-"
FILE_SUFFIX = ".cbv"
FILE_RE = re.compile(r"^cardbench-verify-\d{4,}\.cbv$")
MAX_RANGES = 256
_DROPPED = {CLASSES[c] for c in DROPPED_CLASSES}


def default_file_bytes(free: int) -> int:
    """1 GiB files (like H2testw and f3write) when there is room for 16 of them, else smaller ones
    (a power of two >= 1 MiB) so that the rate over the card still has ~16 points."""
    if free >= 16 * GiB:
        return GiB
    f = MiB
    while f * 2 * 16 <= free and f < GiB:
        f *= 2
    return f


def _state_dir() -> Path:
    import platformdirs
    return Path(platformdirs.user_state_dir("cardbench")) / "verify"


def _write_json(path: Path, data: dict, durable: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if not durable:
        return
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def _read_json(path: Path) -> dict | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("schema") == STATE_SCHEMA else None


def verify_full(target: str, *, destructive: bool = False, resume: bool = False, keep_files: bool = False,
                file_bytes: int | None = None, progress=None, seed: int | None = None,
                check_safety: bool = True, max_bytes: int | None = None,
                state_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Fill and check a mounted filesystem (``target`` a directory) or a whole block device
    (``destructive=True`` required). Returns a ``cardbench.verify/1`` document (mode "full").

    ``resume``: continue the interrupted run found at ``target``. ``keep_files``: leave the
    files (directory mode). ``state_dir``: where the state is kept (a block device) or mirrored
    (a directory; the state file proper sits beside the files); default the user state dir. ``file_bytes``: bytes per file/segment (default: see
    ``default_file_bytes``). ``max_bytes``: fill at most this much (a partial test, like
    H2testw's "only N MB"). Ctrl-C raises ``Interrupted`` (``.doc`` is the partial document; the
    files and state stay for ``resume``).
    """
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise TargetError(f"{target}: no such file, directory or device") from None
    except OSError as e:
        raise TargetError(f"{target}: {e.strerror}") from None
    if file_bytes is not None and (file_bytes < MiB or file_bytes % MiB):
        raise UsageError("the file size must be a whole number of MiB (at least 1 MiB)")
    if stat.S_ISDIR(st.st_mode):
        run = _DirRun(target, progress=progress, seed=seed, file_bytes=file_bytes, resume=resume,
                      keep_files=keep_files, max_bytes=max_bytes, state_dir=state_dir)
    elif stat.S_ISBLK(st.st_mode):
        if not destructive:
            raise UsageError(f"full mode on the block device {target} overwrites all of it: add --destructive "
                             "(and confirm), or give a directory on the mounted card instead")
        run = _DeviceRun(target, progress=progress, seed=seed, file_bytes=file_bytes, resume=resume,
                         check_safety=check_safety, max_bytes=max_bytes, state_dir=state_dir)
    else:
        raise UsageError(f"{target} is neither a directory nor a block device")
    return run.run()


class _Run:
    """What directory and device runs share: the write pass, the read pass, the verdict."""

    mode_target = "directory"

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
        self.gone = False
        self.distances: list[int] = []
        self.phys_pairs = 0
        self.dropped_phys: list[tuple[int, int]] = []
        self.bad_phys: list[tuple[int, int]] = []
        self.bad_virtual: list[list[int]] = []
        self.overwritten_phys = 0

    # -- to be provided ---------------------------------------------------------------------------
    def save_state(self) -> None: ...
    def open_unit_write(self, unit: dict) -> tuple[int, bool]: ...
    def open_unit_read(self, unit: dict) -> tuple[int, bool]: ...
    def close_unit(self, fd: int) -> None: ...
    def unit_offset(self, unit: dict) -> int: ...   # where the unit's byte 0 is in its fd
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
        base_fd = self.unit_offset(unit)
        data = DataFile(fd, unit["name"])
        buf = aligned_buffer(CHUNK)
        mv = memoryview(buf)
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

    def write_failed(self, unit: dict, done: int, err: int | None) -> None:
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
        base_fd = self.unit_offset(unit)
        data = DataFile(fd, unit["name"])
        buf = aligned_buffer(CHUNK)
        mv = memoryview(buf)
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
                if got >= SECTOR:
                    m = got // SECTOR * SECTOR
                    j = self.pattern.judge(view[:m], unit["base"] + done, keep_classes=True, max_misplaced=16)
                    for k, v in j.counts.items():
                        res["counts"][k] += v
                    if j.first_bad is not None:
                        if res["first_bad"] is None:
                            res["first_bad"] = j.first_bad
                        for s, e, c in bad_runs(j.classes, unit["base"] + done):
                            res["bad_runs"].append([s, e, CLASSES[c]])
                        if len(res["bad_runs"]) > MAX_RANGES:
                            res["bad_runs"] = _coarsen(res["bad_runs"])
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
        if err in GONE or (err == errno.EIO and not self.alive()):
            self.gone = True
            if self.stopped in (None, "full", "limit"):   # a fill that ended normally is no excuse
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

    def planned_total(self) -> int: ...

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
            for d in self.distances:
                g = math.gcd(g, d)
            wrap = g if g >= MiB and g % SECTOR == 0 else None
        kind = None
        verdict = "genuine"
        usable: int | None = announced
        basis = "announced (every byte written read back right)"
        tail_start = None
        if overwritten:
            verdict, kind = "counterfeit", "wraparound"
        elif dropped and (dropped >= written // 100 or self.mode_target == "device"):
            verdict, kind = "counterfeit", "dropped"
        elif dropped or changed or read_err or write_errors:
            verdict = "damaged"
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
        elif verdict == "damaged":
            if self.bad_phys and physical_ok:
                usable = offset_on_device + min(s for s, _ in self.bad_phys)
                basis = "first bad byte on the device"
            else:
                usable, basis = ok_bytes, "bytes that read back right"
        if self.gone or (self.stopped and self.stopped not in ("full", "limit")):
            if verdict == "genuine":
                verdict = "damaged"
            if self.gone and verdict != "counterfeit":
                usable, basis = None, "unknown: the card stopped answering"
        if physical_ok:
            ranges = merge_ranges([(offset_on_device + s, offset_on_device + e) for s, e in self.bad_phys], gap=MiB)
            if tail_start is not None and whole_size:
                ranges = merge_ranges([r for r in ranges if r[0] < tail_start] + [(tail_start, whole_size)])
            space = "device"
        else:
            ranges = merge_ranges(self.bad_virtual, gap=MiB)
            space = "fill"
        if len(ranges) > MAX_RANGES:
            ranges = _coarsen([[s, e, ""] for s, e in ranges])
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
        fix = fix_for(device, whole_size or announced, usable) if (verdict != "genuine" and physical_ok
                                                                    and device) else None
        d["fix"] = fix
        d["fix_command"] = fix["command"] if fix else None
        if verdict != "genuine" and not (physical_ok and device):
            d["fix"] = {"tool": None, "command": None,
                        "note": "the filesystem did not say where its files lie on the card; run "
                                "`cardbench verify DEVICE` (quick mode) on the unmounted card for the exact size "
                                "and the f3fix line"}


def _open_file(path: str, *, write: bool) -> tuple[int, bool]:
    """Open a fill file (a new one to write) through the I/O layer: O_DIRECT, buffered where the
    filesystem refuses it; OSError with its errno otherwise."""
    return open_raw(path, write=write, create=write)


def _coarsen(runs: list[list]) -> list[list]:
    """Halve a list of ranges by merging each with its neighbour (keeps memory flat)."""
    runs = sorted(runs)
    out = []
    for i in range(0, len(runs), 2):
        pair = runs[i:i + 2]
        out.append([pair[0][0], pair[-1][1], pair[0][2] if len(pair) == 1 or pair[0][2] == pair[-1][2] else "mixed"])
    return out


class _DirRun(_Run):
    mode_target = "directory"

    def __init__(self, target: str, *, progress, seed, file_bytes, resume, keep_files, max_bytes, state_dir=None):
        super().__init__(progress, seed, file_bytes, resume, max_bytes)
        self.state_root = Path(state_dir) if state_dir is not None else _state_dir()
        from cardbench.target import DirTarget
        self.target = DirTarget.open(target)
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
            from cardbench.devices import resolve_device
            whole, part = resolve_device(dev)
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
            _write_json(self.state_path, self.state)
        except OSError as e:
            note = f"the state file could not be written on the card ({e.strerror}); a copy is kept in {self.state_root}"
            if note not in self.notes:
                self.notes.append(note)
        try:
            self.state_root.mkdir(parents=True, exist_ok=True)
            _write_json(self.state_root / self._mirror_name(), self.state, durable=False)
        except OSError:
            pass

    def _mirror_name(self) -> str:
        if getattr(self, "_mirror", None) is None:
            st = os.stat(self.dir)
            self._mirror = f"dir-{os.major(st.st_dev)}-{os.minor(st.st_dev)}-{st.st_ino}.json"
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
        return _open_file(str(path), write=True)

    def write_unit(self, unit: dict, adv) -> None:
        super().write_unit(unit, adv)
        if not unit.get("written"):
            try:
                (self.dir / unit["name"]).unlink()   # nothing fitted: no empty file left behind
            except OSError:
                pass

    def open_unit_read(self, unit: dict) -> tuple[int, bool]:
        path = str(self.dir / unit["name"])
        fd, direct = _open_file(path, write=False)
        if not direct:
            from cardbench.workloads.files import drop_cache
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
                from cardbench.verify.fiemap import path_extents
                self.extents[k] = path_extents(str(self.dir / units[k]["name"]))
        ext = self.extents[k]
        if ext is None:
            return None
        pieces = ext.pieces(off, length)
        return pieces or None

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> dict:
        from cardbench.devices.lock import lock_key, target_lock
        # the card, not the directory (as `cardbench run` locks it): never two tests on one card at once
        with target_lock(lock_key(self.target.device or str(self.dir)), label=str(self.dir)):
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
        old = _read_json(self.state_path)
        if old is None and self.resume:
            # the card may have lost the state file (a fake card can overwrite it): use the copy
            try:
                old = _read_json(self.state_root / self._mirror_name())
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
                v = os.statvfs(self.dir)
                announced = v.f_blocks * v.f_frsize
            except OSError:
                announced = 0
        self.doc["method"]["free_bytes_at_start"] = self.target.free_bytes
        self.finish(announced=announced, device=self.device_path, offset_on_device=self.part_offset,
                    physical_ok=self.physical_ok, whole_size=self.whole_size)
        if self.physical_ok is False and self.device_path is None:
            self.notes.append("no block device under this directory: capacities are of the filesystem")

    def _interrupted(self) -> None:
        try:
            self.save_state()
        except OSError:
            pass
        self.doc["complete"] = False
        self.doc["error"] = (f"interrupted; {len(self._leftovers())} file(s) and {STATE_NAME} kept in {self.dir}: "
                             f"continue with `cardbench verify --full --resume {self.dir}`")
        err = Interrupted(self.doc["error"])
        err.doc = self.doc  # type: ignore[attr-defined]
        raise err

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


class _DeviceRun(_Run):
    mode_target = "device"

    def __init__(self, path: str, *, progress, seed, file_bytes, resume, check_safety, max_bytes, state_dir):
        super().__init__(progress, seed, file_bytes, resume, max_bytes)
        self.path = path
        self.check_safety = check_safety
        self.state_root = Path(state_dir) if state_dir is not None else _state_dir()
        self.fd: int | None = None
        self.size = 0
        self.dev = None

    def planned_total(self) -> int:
        return min(self.size, self.max_bytes or self.size)

    def save_state(self) -> None:
        self.state_root.mkdir(parents=True, exist_ok=True)
        _write_json(self.state_root / self._state_name(), self.state)

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
        from cardbench.devices.lock import lock_key, target_lock
        from cardbench.devices.safety import check_destructive, open_exclusive
        if self.check_safety:
            self.dev = check_destructive(self.path)
        else:
            try:
                from cardbench.devices import get_device
                self.dev = get_device(self.path, whole_device=True)
            except CardbenchError:
                self.dev = None
        card, reader = identity(self.dev)
        self.doc["card"] = card.to_dict() if card else None
        self.doc["reader"] = reader.to_dict() if reader else None
        self.doc["device"] = self.path
        with target_lock(lock_key(self.path), label=self.path), open_exclusive(self.path, write=True) as fd:
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
                try:
                    self.save_state()
                except OSError:
                    pass
                self.doc["complete"] = False
                self.doc["error"] = (f"interrupted; continue with `cardbench verify --full --destructive --resume "
                                     f"{self.path}`")
                err = Interrupted(self.doc["error"])
                err.doc = self.doc  # type: ignore[attr-defined]
                raise err
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
        old = _read_json(self.state_root / self._state_name()) if self.resume else None
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
