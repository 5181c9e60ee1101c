"""Targets: what is tested. A directory on a mounted filesystem, or a block device.

``DirTarget.open(path)`` checks everything a file test needs before a byte is written (exists, is
a directory, writable, not read-only, free space) and finds the filesystem and the block device
under it, so results carry the identity of the card. Test files carry the recognisable name
``cardbench-test-<run>-<what>.tmp``; ``sweep_leftovers`` removes those left by a killed run.
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
#: every file a run creates on a card: seq_write/cold_read files (and the writability probe), the
#: random-I/O test area (workloads.random) and the sustained-write file (workloads.sustained).
#: Not verify's resumable fill files (cardbench-verify-NNNN.cbv): those are kept for --resume.
TEST_FILE_RE = re.compile(r"^(cardbench-test-[0-9a-f]{8,32}-[a-z0-9_.-]+|\.cardbench-(area|sustained)-\d+-[0-9a-f]+)\.tmp$")


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
class DirTarget:
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

    def free_now(self) -> int:
        vfs = os.statvfs(self.path)
        return vfs.f_bavail * vfs.f_frsize

    def test_file(self, run_id: str, what: str) -> str:
        return os.path.join(self.path, f"{TEST_FILE_PREFIX}{run_id[:16]}-{what}.tmp")

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
        if TEST_FILE_RE.match(name):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(name)
            except FileNotFoundError:
                pass
            except OSError:
                continue
    return removed
