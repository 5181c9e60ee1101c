"""Targets: what is tested. A directory on a mounted filesystem, a block device or an image file.

:class:`Target` (``Target.at(path)``) is any of the three: its kind, its size, its free space,
the areas a test may address on it, and the names of the files a test makes on it (test files
``cardbench-test-<run>-<what>.tmp``, scratch files ``.cardbench-<what>-<pid>-<random>.tmp``).
:meth:`Target.owns` says whether a name is one of those, so :func:`sweep_leftovers` (which
removes what a killed run left) never has to know who made which file.

``DirTarget.open(path)`` checks everything a file test needs before a byte is written (exists, is
a directory, writable, not read-only, free space) and finds the filesystem and the block device
under it, so results carry the identity of the card.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass

from cardbench.devices.mounts import Mount, mount_containing, read_mountinfo
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


def free_space(directory: str) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding ``directory``."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def default_margin(free: int) -> int:
    """Space a test leaves free on a filesystem: 2% of the free space, at least 64 MiB."""
    return max(64 << 20, free // 50)


class Target:
    """What is tested: ``path`` and its ``kind`` ("directory", "device" or "image")."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind

    @classmethod
    def at(cls, path: str) -> "Target":
        """The target at ``path`` (TargetError if it is missing or of another kind)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise TargetError(f"{path}: no such file or directory") from None
        except OSError as e:
            from cardbench.engine.errors import io_error
            raise io_error(e, path) from None
        if stat.S_ISDIR(st.st_mode):
            return cls(path, "directory")
        if stat.S_ISBLK(st.st_mode):
            return cls(path, "device")
        if stat.S_ISREG(st.st_mode):
            return cls(path, "image")
        raise TargetError(f"{path}: not a directory, block device or image file")

    @property
    def is_directory(self) -> bool:
        return self.kind == "directory"

    def size(self) -> int:
        """Bytes of a device or image; of a directory, its filesystem's size."""
        if self.is_directory:
            v = os.statvfs(self.path)
            return v.f_blocks * v.f_frsize
        from cardbench.engine.data import size_of
        return size_of(self.path)

    def free_now(self) -> int:
        """Bytes a test may write: a directory's free space; a device's or image's whole size."""
        return free_space(self.path) if self.is_directory else self.size()

    def area(self, size: int | None, *, offset: int = 0, default: int | None = None,
             share: float = 1.0, align: int = AREA_ALIGN) -> tuple[int, int]:
        """(offset, bytes) a test may address, whole ``align`` units. A directory: ``size``
        (default ``default``, at most ``share`` of the free space), leaving the margin free; a
        device or image: from ``offset`` to its end, or ``size`` bytes. TargetError if less
        than one unit fits."""
        if self.is_directory:
            free = free_space(self.path)
            want = size if size is not None else min(default or free, int(free * share))
            want = min(want, max(0, free - default_margin(free)))
            offset = 0
            why = f"too little free space ({free} B free)"
        else:
            total = self.size()
            avail = max(0, total - offset)
            want = avail if size is None else min(size, avail)
            why = f"too small ({total} B)"
        want -= want % align
        if want < align:
            raise TargetError(f"{self.path}: {why}")
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


def mount_of(path: str) -> Mount | None:
    """The mount holding ``path`` (the longest matching mount point of /proc/self/mountinfo)."""
    return mount_containing(path, read_mountinfo())


def block_device_of(mount: Mount | None) -> str | None:
    """/dev path of the block device behind a mount, when there is one (not for tmpfs...). A FUSE
    filesystem over a device: ``fuseblk`` mounts carry the device's own number; a ``fuse`` mount
    (a driver run without blkdev, e.g. by a user) names it only as its source."""
    if mount is None:
        return None
    sys_dev = f"/sys/dev/block/{mount.devno}"
    if not os.path.exists(sys_dev):
        if mount.fstype.startswith("fuse") and mount.source.startswith("/dev/"):
            try:
                if stat.S_ISBLK(os.stat(mount.source).st_mode):
                    return os.path.realpath(mount.source)
            except OSError:
                pass
        return None
    name = os.path.basename(os.path.realpath(sys_dev))
    dev = f"/dev/{name}"
    return dev if os.path.exists(dev) else None


@dataclass
class DirTarget(Target):
    """A directory on a mounted filesystem, checked and ready for file tests."""

    path: str
    fstype: str | None
    mountpoint: str | None
    device: str | None
    free_bytes: int
    block_size: int

    @classmethod
    def open(cls, path: str) -> "DirTarget":
        """Check ``path`` and describe it; raises TargetError/UsageError with one line."""
        if not path:
            raise UsageError("no target given")
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise TargetError(f"{path}: no such directory") from None
        except PermissionError:
            raise TargetError(f"{path}: permission denied") from None
        except OSError as e:
            raise TargetError(f"{path}: {e.strerror}") from None
        if stat.S_ISBLK(st.st_mode):
            raise UsageError(f"{path} is a block device; file tests need a directory on a mounted filesystem")
        if not stat.S_ISDIR(st.st_mode):
            raise TargetError(f"{path} is not a directory (give a directory on the mounted card)")
        vfs = os.statvfs(path)
        if vfs.f_flag & os.ST_RDONLY:
            raise TargetError(f"{path}: the filesystem is mounted read-only")
        if not os.access(path, os.W_OK | os.X_OK):
            raise TargetError(f"{path}: no permission to write here")
        # a real probe: permissions can lie (root on a read-only bind, ACLs, full inode table)
        # a name known before the file exists, so the finally below removes it whenever a signal
        # lands (mkstemp's name is only known once it returns)
        probe = os.path.join(path, f"{TEST_FILE_PREFIX}00000000-probe{os.getpid()}-{os.urandom(4).hex()}.tmp")
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise TargetError(f"{path}: the filesystem is full") from None
            if e.errno == errno.EROFS:
                raise TargetError(f"{path}: the filesystem is read-only") from None
            raise TargetError(f"{path}: cannot create a test file ({e.strerror})") from None
        finally:
            try:
                os.unlink(probe)
            except OSError:
                pass
        m = mount_of(path)
        return cls(path=os.path.abspath(path), fstype=m.fstype if m else None,
                   mountpoint=m.mountpoint if m else None, device=block_device_of(m),
                   free_bytes=vfs.f_bavail * vfs.f_frsize, block_size=vfs.f_bsize)

    kind = "directory"

    def to_dict(self) -> dict:
        return {"kind": "directory", "path": self.path, "filesystem": self.fstype, "mountpoint": self.mountpoint,
                "device": self.device, "free_bytes": self.free_bytes}


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
