"""``--preserve``: put back every byte a raw test overwrote, even after a crash or SIGKILL.

Before a region of the device is written, ``Preserver.save(offset, length)`` copies its current
bytes into a *journal* on another filesystem and makes that copy durable; only then may the caller
write. ``restore()`` writes every saved region back (O_DIRECT, then fsync), reads it back to check
its sha256, and deletes the journal. If the process dies in between, the journal survives and
``recover_pending()`` (run at the start of the next cardbench invocation, and by
``cardbench recover``) does the restore.

Journal layout, one directory per run under the journal root
(default ``platformdirs.user_data_dir("cardbench")/journal``)::

    <root>/<UTC time>-<pid>-<random>/
        lock            flock()ed by the owning process while it runs: a live run is never "recovered"
        journal.json    schema, device identity (path, devno, size, serial, model, loop backing file)
        regions.jsonl   one line per saved region: offset, length, sha256, data file
        region-000001.bin ...

Durability order (the crash-safety argument): the data file is written and fsynced, the directory
fsynced, and only then the region's line is appended to ``regions.jsonl`` and fsynced; ``save()``
returns after that. So every recorded region has complete data, and a region whose line is missing
or torn was never overwritten by the caller. A new journal directory is prepared under a dot-name
and renamed into place only once its lock is held and its header is durable.

Overlapping saves only copy the parts not saved yet, so the journal always holds the *original*
bytes and regions never overlap. Regions are widened to the device's logical block size for O_DIRECT.

Before restoring, the device is identified again (size, serial, loop backing file): a journal is
never written onto a different card that now sits at the same path. A device found under another
path with the same serial and size (USB re-enumeration: sdb -> sdc) is used.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs

from cardbench.devices.discovery import BlockDevice, get_device, list_devices
from cardbench.devices.mounts import mount_containing, read_mountinfo
from cardbench.devices.safety import open_exclusive
from cardbench.engine.buffers import AlignedBuffers
from cardbench.engine.data import DataFile, geometry, open_raw
from cardbench.engine.errors import GONE_WORDS, IO_ERRORS, describe
from cardbench.errors import (
    CardbenchError,
    DeviceFault,
    SafetyRefusal,
    TargetError,
    UsageError,
)
from cardbench.signals import signals_held

JOURNAL_SCHEMA = "cardbench.journal/1"
CHUNK = 1 << 20  # bytes moved per O_DIRECT call; a multiple of every logical block size
FREE_SPACE_MARGIN = 16 << 20  # keep this much free on the journal's filesystem



def default_journal_root() -> Path:
    """``<user data dir>/journal``, e.g. ``~/.local/share/cardbench/journal`` (platformdirs)."""

    return Path(platformdirs.user_data_dir("cardbench")) / "journal"


@dataclass
class SavedRegion:
    """One saved region: ``length`` bytes at ``offset`` of the device, copied to ``file``."""

    index: int
    offset: int
    length: int
    sha256: str
    file: str


@dataclass
class RecoveryReport:
    """What ``recover_pending`` did with one journal.

    ``status``: "restored" (written back, verified, journal deleted), "empty" (nothing had been
    saved; journal deleted), "active" (its owner is still running; left alone), "skipped" (device
    absent, changed or in use; journal kept for a later try), "failed" (restore or verification
    failed; journal kept).
    """

    journal: str
    device: str | None
    status: str
    regions: int
    bytes: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)


# --- low level ---------------------------------------------------------------------------------


def _fsync_dir(path: str | Path) -> None:
    """fsync a directory so new, renamed or removed entries are durable [S46 fsync(2)]."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_device(fd: int, offset: int, length: int, sink: Any) -> str:
    """Read ``length`` bytes at ``offset`` (O_DIRECT), feed them to ``sink.write``; return sha256."""
    h = hashlib.sha256()
    dev = DataFile(fd, "the device")
    with AlignedBuffers(1, CHUNK) as bufs:
        done = 0
        while done < length:
            n = min(CHUNK, length - done)
            # the view must be released before the buffer closes, also when raising
            with bufs[0][:n] as view:
                try:
                    got = dev.read_at(view, offset + done)
                except IO_ERRORS as e:
                    raise DeviceFault(f"read error at byte {offset + done}: {describe(e.errno)}") from None
                if got != n:
                    raise DeviceFault(f"short read at byte {offset + done} ({got} of {n} bytes): "
                                      "device shrank or was removed")
                h.update(view)
                if sink is not None:
                    sink.write(view)
            done += n
    return h.hexdigest()


def _file_sha256(path: Path) -> str:
    """sha256 of a journal data file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _write_region(fd: int, data_file: Path, offset: int, length: int, sha256: str) -> None:
    """Write one saved region back with O_DIRECT, fsync, read it back and compare sha256.

    The journal copy is checked first, so a damaged journal file is never written to the device.
    """
    if _file_sha256(data_file) != sha256:
        raise DeviceFault(f"journal file {data_file} is damaged (sha256 mismatch); not written back")
    if data_file.stat().st_size != length:
        raise DeviceFault(f"journal file {data_file} has the wrong length; not written back")
    dev = DataFile(fd, "the device")
    with open(data_file, "rb") as f, AlignedBuffers(1, CHUNK) as bufs:
        done = 0
        while done < length:
            n = min(CHUNK, length - done)
            with bufs[0][:n] as view:
                if f.readinto(view) != n:
                    raise DeviceFault(f"journal file {data_file} ended early")
                try:
                    wrote = dev.write_at(view, offset + done)
                except IO_ERRORS as e:
                    raise DeviceFault(f"write error at byte {offset + done} while restoring: "
                                      f"{describe(e.errno)}") from None
            if wrote != n:
                raise DeviceFault(f"short write at byte {offset + done} while restoring")
            done += n
    try:
        dev.sync()
    except IO_ERRORS as e:
        raise DeviceFault(f"flushing the restored bytes failed: {describe(e.errno)}") from None
    if _read_device(fd, offset, length, None) != sha256:
        raise DeviceFault(f"restored bytes at offset {offset} (+{length}) read back differently")


def _load_regions(jdir: Path) -> list[SavedRegion]:
    """The complete lines of ``regions.jsonl`` (a torn last line is a save that never finished)."""
    out = []
    try:
        text = (jdir / "regions.jsonl").read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            out.append(SavedRegion(int(rec["index"]), int(rec["offset"]), int(rec["length"]),
                                   str(rec["sha256"]), str(rec["file"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _delete_journal(jdir: Path) -> None:
    """Remove a journal directory and make the removal durable."""
    shutil.rmtree(jdir)
    _fsync_dir(jdir.parent)


def _device_family(dev: BlockDevice, devices: list[BlockDevice]) -> set[str]:
    """devno of the device, its partitions, and everything stacked on them (dm, md), recursively."""
    by_name = {d.name: d for d in devices}
    family: set[str] = set()
    todo: list[Any] = [dev]
    seen: set[str] = set()
    while todo:
        node = todo.pop()
        if node.name in seen:
            continue
        seen.add(node.name)
        if node.devno:
            family.add(node.devno)
        todo.extend(getattr(node, "partitions", []))
        for h in node.holders:
            if h in by_name:
                todo.append(by_name[h])
    return family


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest existing ancestor."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_journal_location(journal_root: str | Path, dev: BlockDevice, *, sysfs_root: str = "/sys",
                           proc_root: str = "/proc") -> None:
    """Refuse (SafetyRefusal) a journal root whose filesystem lives on ``dev`` itself.

    Checked by the filesystem's device number (``st_dev``) and by the mount that contains the
    directory (mountinfo ``major:minor`` and source), against the device, its partitions and any
    dm/md device built on them.
    """
    devices = list_devices(sysfs_root, proc_root=proc_root)
    family = _device_family(dev, devices)
    here = _nearest_existing(Path(journal_root))
    st = os.stat(here)
    devnos = {f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"}
    m = mount_containing(str(here), read_mountinfo(os.path.join(proc_root, "self", "mountinfo")))
    if m is not None:
        devnos.add(m.devno)
        if m.source.startswith("/dev/"):
            try:
                sst = os.stat(m.source)
                devnos.add(f"{os.major(sst.st_rdev)}:{os.minor(sst.st_rdev)}")
            except OSError:
                pass
    if devnos & family:
        raise SafetyRefusal(f"refusing to keep the --preserve journal in {journal_root}: it is on "
                            f"{dev.path} itself; choose a directory on another disk")


def _identity(dev: BlockDevice) -> dict[str, Any]:
    """What identifies a device again after a crash (path and number may change, the rest must not)."""
    return {"path": dev.path, "name": dev.name, "devno": dev.devno, "size": dev.size, "serial": dev.serial,
            "model": dev.model, "loop_backing_file": dev.loop_backing_file}


def _matches(identity: dict[str, Any], dev: BlockDevice) -> bool:
    """Whether ``dev`` is the device a journal was written for."""
    if dev.size != identity.get("size"):
        return False
    if identity.get("serial") and (dev.serial or "") != identity["serial"]:
        return False
    if identity.get("loop_backing_file") and dev.loop_backing_file != identity["loop_backing_file"]:
        return False
    return True


def _locate(identity: dict[str, Any], sysfs_root: str, proc_root: str) -> tuple[str | None, str]:
    """(path of the journal's device now, or None; why not)."""
    path = identity.get("path")
    why = f"{path} is not there"
    if path:
        try:
            dev = get_device(path, whole_device=True, sysfs_root=sysfs_root, proc_root=proc_root)
            if _matches(identity, dev):
                return dev.path, ""
            why = f"{path} is now a different device (size or serial differ)"
        except CardbenchError:
            pass
    if identity.get("serial") or identity.get("loop_backing_file"):
        found = [d for d in list_devices(sysfs_root, proc_root=proc_root) if _matches(identity, d)]
        if len(found) == 1:
            return found[0].path, ""
        if len(found) > 1:
            why = "several devices match its identity"
    return None, why


# --- the journal -----------------------------------------------------------------------------------


class Preserver:
    """Save regions of a whole block device before they are overwritten; put them back on ``restore()``.

    ``Preserver(device, journal_dir)`` (``device`` a whole disk's :class:`~cardbench.devices.BlockDevice`): ``journal_dir`` is the journal *root* (default
    ``default_journal_root()``); this run's journal is a new directory inside it, locked with
    ``flock`` while the object lives. Refuses a journal root on the device itself. Use as a context
    manager to restore on exit, also when the body raises::

        with Preserver(get_device("/dev/sdb", whole_device=True), root) as keep:
            keep.save(offset, length)    # durable before it returns
            os.pwrite(fd, data, offset)  # now the caller may write
    """

    def __init__(self, device: BlockDevice, journal_dir: str | Path | None = None, *,
                 sysfs_root: str = "/sys", proc_root: str = "/proc"):
        """Check the journal location and create this run's journal for ``device`` (a whole
        disk, as listed: its identity is used as resolved)."""
        self.device_path = device.path
        self.device = device
        self.root = Path(journal_dir) if journal_dir is not None else default_journal_root()
        check_journal_location(self.root, self.device, sysfs_root=sysfs_root, proc_root=proc_root)
        self._regions: list[SavedRegion] = []
        self._saved: list[tuple[int, int]] = []
        self._fd: int | None = None
        self._lock_fd: int | None = None
        self._manifest: int | None = None
        try:
            self._fd, _direct = open_raw(self.device_path, write=True)
        except OSError as e:
            raise TargetError(f"cannot open {self.device_path} for --preserve: {describe(e.errno)}") from None
        try:
            self.block_size, self.size = geometry(self._fd)
            self.path = self._create_journal()
        except BaseException:
            self._release()
            raise

    # -- journal creation

    def _create_journal(self) -> Path:
        """Make the journal directory: prepared under a dot-name, locked, header durable, renamed."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        name = f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"
        tmp = self.root / f".new-{name}"
        tmp.mkdir(mode=0o700)
        self._lock_fd = os.open(tmp / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(self._lock_fd, f"{os.getpid()}\n".encode())
        header = {
            "schema": JOURNAL_SCHEMA, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "pid": os.getpid(), "block_size": self.block_size, "device": _identity(self.device),
        }
        with open(tmp / "journal.json", "w", encoding="utf-8") as f:
            json.dump(header, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        self._manifest = os.open(tmp / "regions.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        os.fsync(self._manifest)
        _fsync_dir(tmp)
        final = self.root / name
        os.rename(tmp, final)
        _fsync_dir(self.root)
        return final

    # -- saving

    @property
    def regions(self) -> list[SavedRegion]:
        """The regions saved so far (non-overlapping, in saving order)."""
        return list(self._regions)

    @property
    def saved_bytes(self) -> int:
        """Total bytes held in the journal."""
        return sum(r.length for r in self._regions)

    def _pieces(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) not saved yet."""
        out, cur = [], start
        for s, e in self._saved:
            if e <= cur:
                continue
            if s >= end:
                break
            if s > cur:
                out.append((cur, s))
            cur = max(cur, e)
            if cur >= end:
                break
        if cur < end:
            out.append((cur, end))
        return out

    def save(self, offset: int, length: int) -> list[SavedRegion]:
        """Copy the bytes at [offset, offset + length) to the journal, durably, before they are written.

        The region is widened to whole logical blocks. Parts already saved are skipped (their
        original bytes are in the journal already). Returns the regions newly saved.
        """
        if self._fd is None or self.path is None:
            raise UsageError("this Preserver was closed")
        if offset < 0 or length < 0 or offset + length > self.size:
            raise UsageError(f"region {offset}+{length} is outside {self.device_path} ({self.size} bytes)")
        if length == 0:
            return []
        b = self.block_size
        start = offset // b * b
        end = -(-(offset + length) // b) * b
        new = [self._save_piece(s, e) for s, e in self._pieces(start, end)]
        return new

    def _save_piece(self, start: int, end: int) -> SavedRegion:
        """Save one not-yet-saved, block-aligned piece (data, fsync, dir fsync, then its record)."""
        assert self._fd is not None and self._manifest is not None
        length = end - start
        free = shutil.disk_usage(self.path).free
        if free < length + FREE_SPACE_MARGIN:
            raise TargetError(f"not enough free space for the --preserve journal in {self.root} "
                              f"({length} bytes needed, {free} free)")
        index = len(self._regions) + 1
        fname = f"region-{index:06d}.bin"
        with open(self.path / fname, "xb") as f:
            sha = _read_device(self._fd, start, length, f)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(self.path)
        region = SavedRegion(index, start, length, sha, fname)
        os.write(self._manifest, (json.dumps(asdict(region)) + "\n").encode())
        os.fsync(self._manifest)
        self._regions.append(region)
        self._saved.append((start, end))
        self._saved.sort()
        return region

    # -- restoring

    def restore(self) -> int:
        """Write every saved region back, verify each by sha256, delete the journal; return bytes restored.

        On failure raises DeviceFault and keeps the journal so ``recover_pending`` can retry.
        """
        if self._fd is None or self.path is None:
            raise UsageError("this Preserver was closed")
        total = 0
        for r in reversed(self._regions):
            _write_region(self._fd, self.path / r.file, r.offset, r.length, r.sha256)
            total += r.length
        _delete_journal(self.path)
        self._regions.clear()
        self._saved.clear()
        self._release()
        return total

    def close(self) -> None:
        """Release the device and the journal lock *without* restoring; the journal stays for
        ``recover_pending``. Safe to call twice."""
        self._release()

    def _release(self) -> None:
        """Close the device, manifest and lock descriptors."""
        for attr in ("_manifest", "_fd", "_lock_fd"):
            fd = getattr(self, attr)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, attr, None)

    def __enter__(self) -> Preserver:
        """Context manager: ``restore()`` on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Restore on any exit; a failed restore raises (the journal is kept)."""
        if self._fd is not None:
            self.restore()


@dataclass
class Restored:
    """What :func:`restore_held` did: ``restored_bytes`` (None when it failed), ``kept`` (None,
    or the one line saying the journal keeps the bytes and what writes them back), the
    ``journal``, the signals that came meanwhile and the ``seconds`` it took."""

    restored_bytes: int | None
    kept: str | None
    journal: str
    signals: list
    seconds: float


def restore_held(preserver: Preserver, progress: Any = None, label: str = "restoring saved bytes",
                 gone: Any = None) -> Restored:
    """Write every saved region back with SIGINT/SIGTERM held meanwhile (a second Ctrl-C must not
    cut the write-back short); never raises for a failed write-back: the journal is kept and
    ``kept`` says so. ``progress``: a cardbench.progress reporter for the bytes written back.
    ``gone()``: did the device go away (the target's rule, cardbench.target.Target.gone)? Then
    nothing is written (a gone disk fails a write with ENOSPC, "full", which it is not) and
    ``kept`` says the device is gone."""

    journal = str(getattr(preserver, "path", "") or "")
    t0 = time.perf_counter()
    with signals_held() as signals:
        try:
            if gone is not None and gone():
                raise DeviceFault(GONE_WORDS)
            if progress is not None:
                with progress.task(label, preserver.saved_bytes) as advance:
                    n = preserver.restore()
                    advance(n)
            else:
                n = preserver.restore()
            kept = None
        except (CardbenchError, OSError) as e:
            n = None
            try:
                preserver.close()
            except Exception:  # noqa: BLE001 - closing must not hide the restore error
                pass
            why = e.message if isinstance(e, CardbenchError) else (e.strerror or str(e))
            if gone is not None and gone():
                kept = (f"the saved bytes were not written back ({GONE_WORDS}): they are kept in {journal} "
                        "and written back by the next cardbench command (or `cardbench recover`) once the card "
                        "is back")
            else:
                kept = (f"writing the saved bytes back failed ({why}); they are kept in {journal} and written "
                        "back by the next cardbench command (or `cardbench recover`) once the card answers")
    return Restored(n, kept, journal, list(signals or []), time.perf_counter() - t0)


# --- recovery --------------------------------------------------------------------------------------


def recover_pending(journal_root: str | Path | None = None, *, sysfs_root: str = "/sys",
                    proc_root: str = "/proc") -> list[RecoveryReport]:
    """Restore every journal left by a crashed or killed run; one report per journal found.

    Journals whose owner still runs (lock held) are left alone ("active"). The device is found
    again by identity and opened exclusively (so a mounted or busy device is "skipped", not
    overwritten). A restored journal is deleted; a failed one is kept.
    """
    root = Path(journal_root) if journal_root is not None else default_journal_root()
    if not root.is_dir():
        return []
    reports = []
    for jdir in sorted(root.iterdir()):
        if jdir.name.startswith(".") and jdir.is_dir():
            _clean_unborn(jdir)
            continue
        if jdir.is_dir():
            reports.append(_recover_one(jdir, sysfs_root, proc_root))
    return reports


def _clean_unborn(jdir: Path) -> None:
    """Remove a journal that died before it was renamed into place (it never recorded a region)."""
    try:
        fd = os.open(jdir / "lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        shutil.rmtree(jdir, ignore_errors=True)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # being created right now
    finally:
        os.close(fd)
    shutil.rmtree(jdir, ignore_errors=True)


def _recover_one(jdir: Path, sysfs_root: str, proc_root: str) -> RecoveryReport:
    """Recover one journal directory (see ``recover_pending``)."""
    def report(status: str, message: str, device: str | None = None,
               regions: list[SavedRegion] | None = None) -> RecoveryReport:
        """Build this journal's report."""
        regs = regions or []
        return RecoveryReport(str(jdir), device, status, len(regs), sum(r.length for r in regs), message)

    try:
        lock_fd = os.open(jdir / "lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        return report("failed", f"journal has no lock file ({e.strerror}); left for inspection")
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                pid = os.pread(lock_fd, 32, 0).decode(errors="replace").strip() or "?"
                return report("active", f"a running cardbench (pid {pid}) owns this journal")
            raise
        try:
            header = json.loads((jdir / "journal.json").read_text(encoding="utf-8"))
            identity = header["device"]
        except (OSError, ValueError, KeyError, TypeError):
            return report("failed", "journal.json is missing or unreadable; left for inspection")
        regions = _load_regions(jdir)
        if not regions:
            _delete_journal(jdir)
            return report("empty", "nothing had been saved; journal removed", identity.get("path"))
        path, why = _locate(identity, sysfs_root, proc_root)
        if path is None:
            return report("skipped", f"device not found: {why}; journal kept", identity.get("path"), regions)
        try:
            with open_exclusive(path, write=True) as fd:
                for r in reversed(regions):
                    _write_region(fd, jdir / r.file, r.offset, r.length, r.sha256)
        except SafetyRefusal as e:
            return report("skipped", f"{e.message}; journal kept", path, regions)
        except CardbenchError as e:
            return report("failed", f"{e.message}; journal kept", path, regions)
        _delete_journal(jdir)
        total = sum(r.length for r in regions)
        return report("restored", f"restored {len(regions)} region(s), {total} bytes, on {path}", path, regions)
    finally:
        os.close(lock_fd)
