"""Targets: what is tested, resolved once. A directory on a mounted filesystem, a block device or
an image file.

:func:`open_target` is the one place that asks what a path is: it stats it once, classifies it,
checks what the command needs (a directory is writable and not read-only; a device is a whole
device) and returns a :class:`Target` carrying everything later steps need, so nothing
below the CLI stats, classifies or measures the path again:

* ``kind`` ("directory", "device" or "image") and ``path``;
* :meth:`Target.space` (free and total bytes; a model fixes it, see :func:`target_model`);
* ``filesystem`` (a directory's: its type, whether FUSE serves it, the filesystem on the device
  under a FUSE mount, read once, and its largest file, e.g. FAT32's 4 GiB - 1 B);
* ``device`` (the block device: the target itself, or the one under a directory), its identity
  (``block_device()``: lsblk + sysfs, resolved on first use and cached) and ``lock_key``;
* the areas a test may address (:meth:`Target.area`), the names of the files a test makes on it
  (test files ``cardbench-test-<run>-<what>.tmp``, scratch files
  ``.cardbench-<what>-<pid>-<random>.tmp``; :meth:`Target.owns` says whether a name is one, so
  :func:`sweep_leftovers` never has to know who made which file);
* :meth:`Target.open_data`: its bytes, through the I/O layer (:mod:`cardbench.engine.data`).

Every "what is this path" error is worded here, once: :func:`cannot_use` (an errno, through the
one errno table of :mod:`cardbench.engine.errors`) and :func:`wrong_kind`, exit 3 (the target
cannot be tested); a partition where a whole device is needed is exit 2.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from dataclasses import dataclass
from functools import cached_property

from cardbench.devices import get_device
from cardbench.devices.lock import key_of_devno, key_of_stat
from cardbench.devices.mounts import (
    Mount,
    filesystem_on,
    mount_containing,
    read_mountinfo,
)
from cardbench.engine.data import DataFile, size_of
from cardbench.engine.errors import GONE, cannot_use, describe, shown, stat_path
from cardbench.errors import TargetError, UsageError

TEST_FILE_PREFIX = "cardbench-test-"
#: what scratch files are for (the ``<what>`` of ``.cardbench-<what>-<pid>-<random>.tmp``): the
#: random-I/O test area (workloads.random) and the sustained-write file (workloads.sustained)
SCRATCH_KINDS = ("area", "sustained")
#: every file a run creates on a card: seq_write/cold_read files (and the writability probe) and
#: the scratch files. Not verify's resumable fill files (cardbench-verify-NNNN.cbv): those are
#: kept for --resume.
TEST_FILE_RE = re.compile(r"^(" + re.escape(TEST_FILE_PREFIX) + r"[0-9a-f]{8,32}-[a-z0-9_.-]+|\.cardbench-("
                          + "|".join(SCRATCH_KINDS) + r")-\d+-[0-9a-f]+)\.tmp$")
#: a test area is whole MiB, so every block size up to 1 MiB divides it
AREA_ALIGN = 1 << 20
#: FAT32's largest file: 4 GiB - 1 byte (Documentation/filesystems/vfat.rst, fs/fat: i_size is 32 bits)
FAT_FILE_LIMIT = (4 << 30) - 1
FAT_TYPES = ("vfat", "msdos", "fat", "umsdos")
#: filesystems served by a process in user space (their reads pass the device's page cache)
FUSE_TYPES = ("fuse", "fuseblk")
KINDS = ("directory", "device", "image")
#: where the kernel lists block devices by number (Target.gone reads it)
SYS_DEV_BLOCK = "/sys/dev/block"
#: seconds a pulled disk may stay listed after its last requests failed (the kernel removes it
#: from sysfs a moment later): how long Target.gone looks once a card stopped answering
GONE_WAIT = 3.0


def is_fuse(fstype: str | None) -> bool:
    """Whether a mount's type is a FUSE filesystem."""
    return bool(fstype) and (fstype in FUSE_TYPES or fstype.startswith(("fuse.", "fuseblk.")))


def default_margin(free: int) -> int:
    """Space a test leaves free on a filesystem: 2% of the free space, at least 64 MiB."""
    return max(64 << 20, free // 50)


@dataclass(frozen=True)
class Space:
    """Bytes a test may write (``free``: f_bavail, what an unprivileged writer may use) and the
    whole size (``total``). A filesystem that reports no blocks at all (a FUSE driver without
    statfs) has ``reported`` False: its free space is unknown, not zero."""

    free: int
    total: int

    @property
    def reported(self) -> bool:
        return self.total > 0


@dataclass(frozen=True)
class Filesystem:
    """A directory's filesystem: ``type`` as mounted ("ext4", "vfat", "fuseblk"), ``on`` the
    filesystem the device's first sector names under a FUSE mount ("vfat", "exfat"; None if
    unknown or not FUSE), and its ``largest_file`` where it is small enough to matter."""

    type: str | None
    on: str | None = None

    @property
    def fuse(self) -> bool:
        return is_fuse(self.type)

    @property
    def fat(self) -> bool:
        """FAT12/16/32: the kernel's vfat/msdos, or a FAT under FUSE."""
        return self.type in FAT_TYPES or (self.fuse and self.on == "vfat")

    @property
    def largest_file(self) -> int | None:
        """The largest file it holds (FAT32: 4 GiB - 1 B); None where no test file reaches it."""
        return FAT_FILE_LIMIT if self.fat else None

    @property
    def limit_name(self) -> str | None:
        return "FAT32" if self.fat else None

    def describe(self) -> str | None:
        """For a result's method: "ext4", or "vfat (FUSE: fuseblk)"."""
        if self.fuse and self.on:
            return f"{self.on} (FUSE: {self.type})"
        return self.type


class Target:
    """What is tested: ``path`` and its ``kind`` ("directory", "device" or "image"), from
    :func:`open_target`. ``space`` fixes :meth:`space` (a model: see :func:`target_model`)."""

    filesystem: Filesystem | None = None
    device: str | None = None

    def __init__(self, path: str, kind: str, *, st: os.stat_result | None = None, space: Space | None = None) -> None:
        self.path = path
        self.kind = kind
        self._st = st
        self._space = space

    @classmethod
    def at(cls, path: str) -> "Target":
        """The target at ``path``, of any kind (:func:`open_target` without checks)."""
        return open_target(path)

    @property
    def is_directory(self) -> bool:
        return self.kind == "directory"

    def moved(self) -> str | None:
        """None while the path still names what was opened (the same filesystem and inode); else
        why not, in words. A card's filesystem unmounted mid-run leaves its mount point on the
        filesystem below, where a test must not go on writing (it would fill the host's disk)."""
        if self._st is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError as e:
            return describe(e.errno, e.strerror)
        if (st.st_dev, st.st_ino) != (self._st.st_dev, self._st.st_ino):
            return "it is no longer on the filesystem that was opened (unmounted, or the card removed?)"
        return None

    def gone(self, err: int | None = None, *, wait: float = 0.0) -> bool:
        """Whether the card went away: the one rule for "the device is gone" after a failed
        request. True when ``err`` (the errno met on the card's bytes) is one of
        :data:`cardbench.engine.errors.GONE`, or the block device under the target is no longer
        there: its ``/sys/dev/block/MAJ:MIN`` entry vanished or its size reads 0 (a pulled USB
        stick, an SD card taken out, a LUN with no medium, a detached loop device). On the real
        kernel a pulled device fails its last requests with EIO, a write past its now-zero size
        with ENOSPC and a read with a short read, and the disk leaves sysfs a moment later:
        ``wait`` is how many seconds to keep looking. An image file or a model has no device: False
        unless ``err`` says so. The words: :data:`cardbench.engine.errors.GONE_WORDS`."""
        if err in GONE:
            return True
        devno = getattr(self, "device_devno", None)
        if not devno or self._st is None:
            return False
        deadline = time.monotonic() + wait
        while True:
            try:
                with open(f"{SYS_DEV_BLOCK}/{devno}/size") as f:
                    if int(f.read().strip() or 0) == 0:
                        return True
            except (OSError, ValueError):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    @property
    def st(self) -> os.stat_result | None:
        """The stat of the path, taken once by :func:`open_target` (None for a model)."""
        return self._st

    @cached_property
    def _bytes(self) -> int:
        return size_of(self.path)

    def space(self) -> Space:
        """Free and total bytes now: a directory's filesystem (statvfs); a device's or image's
        whole size, both."""
        if self._space is not None:
            return self._space
        if self.is_directory:
            try:
                v = os.statvfs(self.path)
            except OSError as e:
                raise cannot_use(e, self.path) from None
            return Space(free=v.f_bavail * v.f_frsize, total=v.f_blocks * v.f_frsize)
        return Space(free=self._bytes, total=self._bytes)

    def size(self) -> int:
        """Bytes of a device or image; of a directory, its filesystem's size."""
        return self.space().total

    def free_now(self) -> int:
        """Bytes a test may write: a directory's free space; a device's or image's whole size."""
        return self.space().free

    @property
    def largest_file(self) -> int | None:
        """The largest file a test may make here (FAT32: 4 GiB - 1 B), None where unlimited."""
        return self.filesystem.largest_file if self.filesystem is not None else None

    def area(self, size: int | None, *, offset: int = 0, default: int | None = None,
             share: float = 1.0, align: int = AREA_ALIGN, margin: int | None = None) -> tuple[int, int]:
        """(offset, bytes) a test may address, whole ``align`` units. A directory: ``size``
        (default ``default``, at most ``share`` of the free space and the largest file), leaving
        ``margin`` free (default: default_margin; a size cardbench.plan sized leaves its own); a
        device or image: from ``offset`` to its end, or ``size`` bytes. TargetError if less than
        one unit fits."""
        if self.is_directory:
            free = self.free_now()
            want = size if size is not None else min(default or free, int(free * share))
            want = min(want, max(0, free - (default_margin(free) if margin is None else margin)))
            if self.largest_file is not None:
                want = min(want, self.largest_file)
            offset = 0
            why = f"too little free space ({free} B free)"
        else:
            total = self.size()
            avail = max(0, total - offset)
            want = avail if size is None else min(size, avail)
            why = f"too small ({total} B)"
        want -= want % align
        if want < align:
            raise TargetError(f"{shown(self.path)}: {why}")
        return offset, want

    def scratch_file(self, what: str) -> str:
        """A fresh name for a scratch file of ``what`` (one of SCRATCH_KINDS) in this directory."""
        if what not in SCRATCH_KINDS:
            raise ValueError(f"unknown scratch file kind {what!r}")
        return os.path.join(self.path, f".cardbench-{what}-{os.getpid()}-{os.urandom(4).hex()}.tmp")

    def test_file(self, run_id: str, what: str) -> str:
        """The name of test file ``what`` of run ``run_id`` in this directory."""
        return os.path.join(self.path, f"{TEST_FILE_PREFIX}{run_id[:16]}-{what}.tmp")

    @staticmethod
    def owns(name: str) -> bool:
        """Whether ``name`` (a file name) is one a test makes on a target (a leftover, if found
        while no run holds the target's lock)."""
        return TEST_FILE_RE.match(name) is not None

    def open_data(self, path: str | None = None, *, write: bool, direct: bool = True,
                  create: bool = False):
        """The target's bytes (or a file ``path`` in a directory target) as an open
        :class:`cardbench.engine.data.DataFile`: the I/O layer's one way to open card data."""
        return DataFile.open(path or self.path, write=write, direct=direct, create=create)

    @cached_property
    def lock_key(self) -> str:
        """The key of this target's lock (cardbench.devices.lock): the whole card where one is
        known (two runs in two folders of one card, or a raw test of the device under it, would
        measure over each other), else the filesystem, else the image file."""
        if self.device is not None and getattr(self, "device_devno", None):
            return key_of_devno(self.device_devno)       # type: ignore[attr-defined]
        if self._st is None:
            return f"model-{self.path}"
        return key_of_stat(self._st)

    def block_device(self):
        """The whole block device under the target (:class:`cardbench.devices.BlockDevice`:
        lsblk + sysfs, resolved on first use and kept; a partition's parent), None without one."""
        if "_block" not in self.__dict__:
            self.__dict__["_block"] = None
            if self.device is not None:
                self.__dict__["_block"] = get_device(self.device, devno=getattr(self, "device_devno", None))
        return self.__dict__["_block"]

    def to_dict(self) -> dict:
        """For a result document (text a store and JSON take: bytes that are not UTF-8 as \\xNN)."""
        return {"kind": self.kind, "path": shown(self.path)}


class DeviceTarget(Target):
    """A block device (``device`` is its path; ``partition_of`` the whole device when it is a
    partition)."""

    def __init__(self, path: str, st: os.stat_result, *, space: Space | None = None) -> None:
        super().__init__(path, "device", st=st, space=space)
        self.device = path
        self.device_devno = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"

    @cached_property
    def partition_of(self) -> str | None:
        """The whole device's /dev path when this is a partition, else None (sysfs)."""
        node = f"/sys/dev/block/{self.device_devno}"
        if not os.path.exists(os.path.join(node, "partition")):
            return None
        return "/dev/" + os.path.basename(os.path.dirname(os.path.realpath(node)))


class ImageTarget(Target):
    """An image file (a card's dump, or a file standing in for a card)."""

    def __init__(self, path: str, st: os.stat_result | None = None, *, space: Space | None = None) -> None:
        super().__init__(path, "image", st=st, space=space)


def mount_of(path: str) -> Mount | None:
    """The mount holding ``path`` (the longest matching mount point of /proc/self/mountinfo)."""
    return mount_containing(path, read_mountinfo())


def block_device_of(mount: Mount | None) -> tuple[str | None, str | None]:
    """(/dev path, "major:minor") of the block device behind a mount, when there is one (not for
    tmpfs...). A FUSE filesystem over a device: ``fuseblk`` mounts carry the device's own number;
    a ``fuse`` mount (a driver run without blkdev, e.g. by a user) names it only as its source."""
    if mount is None:
        return None, None
    sys_dev = f"/sys/dev/block/{mount.devno}"
    if not os.path.exists(sys_dev):
        if is_fuse(mount.fstype) and mount.source.startswith("/dev/"):
            try:
                st = os.stat(mount.source)
                if stat.S_ISBLK(st.st_mode):
                    return os.path.realpath(mount.source), f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
            except OSError:
                pass
        return None, None
    name = os.path.basename(os.path.realpath(sys_dev))
    dev = f"/dev/{name}"
    return (dev, mount.devno) if os.path.exists(dev) else (None, None)


class DirTarget(Target):
    """A directory on a mounted filesystem: ``fstype``, ``mountpoint``, the block ``device``
    under it (FUSE included) and ``free_bytes`` when it was opened."""

    def __init__(self, path: str, *, fstype: str | None, mountpoint: str | None = None, device: str | None = None,
                 device_devno: str | None = None, free_bytes: int = 0, block_size: int = 4096,
                 st: os.stat_result | None = None, space: Space | None = None,
                 filesystem: Filesystem | None = None) -> None:
        super().__init__(path, "directory", st=st, space=space)
        self.fstype = fstype
        self.mountpoint = mountpoint
        self.device = device
        self.device_devno = device_devno
        self.free_bytes = free_bytes
        self.block_size = block_size
        if filesystem is not None:
            self.__dict__["filesystem"] = filesystem

    @classmethod
    def open(cls, path: str) -> "DirTarget":
        """A directory a test writes files in (:func:`open_target` with ``kinds=("directory",)``)."""
        return open_target(path, kinds=("directory",), write=True)  # type: ignore[return-value]

    @cached_property
    def filesystem(self) -> Filesystem:  # type: ignore[override]
        """The filesystem (under FUSE, the device's first sector read once for what it holds)."""
        on = None
        if is_fuse(self.fstype) and self.device:
            on = filesystem_on(self.device)
        return Filesystem(self.fstype, on)

    @cached_property
    def lock_key(self) -> str:
        if self.device_devno:
            return key_of_devno(self.device_devno)
        if self._st is None:
            return f"model-{self.path}"
        return f"fs-{self._st.st_dev}"

    def to_dict(self) -> dict:
        return {"kind": "directory", "path": shown(self.path), "filesystem": self.fstype,
                "mountpoint": shown(self.mountpoint) if self.mountpoint else None, "device": self.device,
                "free_bytes": self.free_bytes}


def open_target(path: str, *, kinds: tuple[str, ...] = KINDS, write: bool = False,
                whole_device: bool = False) -> Target:
    """What ``path`` is, resolved once (see the module). ``kinds``: what the command takes (another
    kind is one line, exit 3); ``write``: a directory will get test files, so it must be writable
    and not read-only (a real probe file is made and removed; whether the free space holds what a
    command writes is the plan's question, cardbench.plan); ``whole_device``: a
    partition is refused (exit 2). Raises TargetError/UsageError with one line."""
    st, kind = stat_path(path, kinds)
    if kind == "device":
        dev = DeviceTarget(path, st)
        if whole_device and dev.partition_of:
            raise UsageError(f"{shown(path)} is a partition of {dev.partition_of}; give the whole device")
        return dev
    if kind == "image":
        return ImageTarget(path, st)
    return _open_directory(path, st, write=write)


def _open_directory(path: str, st: os.stat_result, *, write: bool) -> DirTarget:
    try:
        vfs = os.statvfs(path)
    except OSError as e:
        raise cannot_use(e, path) from None
    space = Space(free=vfs.f_bavail * vfs.f_frsize, total=vfs.f_blocks * vfs.f_frsize)
    if write:
        if vfs.f_flag & os.ST_RDONLY:
            raise cannot_use(OSError(errno.EROFS, ""), path)
        if not os.access(path, os.W_OK | os.X_OK):
            raise cannot_use(OSError(errno.EACCES, ""), path)
        _probe_write(path)
    m = mount_of(path)
    device, devno = block_device_of(m)
    return DirTarget(os.path.abspath(path), fstype=m.fstype if m else None, mountpoint=m.mountpoint if m else None,
                     device=device, device_devno=devno, free_bytes=space.free, block_size=vfs.f_bsize, st=st)


def _probe_write(path: str) -> None:
    """Make and remove one file: permissions can lie (root on a read-only bind, ACLs, a full
    inode table). Its name is known before it exists, so the finally removes it whenever a
    signal lands."""
    probe = os.path.join(path, f"{TEST_FILE_PREFIX}00000000-probe{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except OSError as e:
        raise cannot_use(e, path) from None
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass


def target_model(kind: str = "directory", *, free: int, total: int | None = None, fstype: str | None = "ext4",
                 on: str | None = None, path: str = "/model", device: str | None = None) -> Target:
    """A target that touches nothing: its space, filesystem and device are what is given (plan
    rules and sizing are tested on these, in milliseconds)."""
    space = Space(free=free, total=free if total is None else total)
    if kind == "directory":
        return DirTarget(path, fstype=fstype, device=device, free_bytes=free, space=space,
                         filesystem=Filesystem(fstype, on))
    if kind == "image":
        return ImageTarget(path, space=space)
    raise ValueError(f"no model for a {kind}")


def sweep_leftovers(directory: str) -> list[str]:
    """Remove test files a killed run left in ``directory``; returns the names removed.

    Call it only while holding the target's lock (cardbench.devices.lock), so that the files of
    a run still in progress are never touched.
    """
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if Target.owns(name):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(name)
            except FileNotFoundError:
                pass
            except OSError:
                continue
    return removed
