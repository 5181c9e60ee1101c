"""One cardbench per target: two runs measuring the same card at once would spoil both.

``target_lock(key)`` takes an ``flock`` on ``<lock dir>/<key>.lock``. The kernel drops the lock when
the holder exits, however it exits (even SIGKILL), so there are no stale locks to clean up. The
holder writes its pid and what it is testing into the file, so a second run can say
"another cardbench (pid N) is testing /dev/sdb".

Lock dir: ``/run/cardbench/locks`` when it can be created and written (root), else
``<tmp>/cardbench-locks-<uid>``. Keys come from ``lock_key(path)``: a block device by the
``major:minor`` of its *whole* device (testing sdb1 and sdb conflict), a directory by its
filesystem's ``st_dev`` and its inode, an image file likewise.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cardbench.devices.sysfs import read_text
from cardbench.engine.errors import stat_path
from cardbench.errors import Busy, TargetError, UsageError

RUN_LOCK_DIR = Path("/run/cardbench/locks")


def default_lock_dir() -> Path:
    """``/run/cardbench/locks`` if usable, else a per-user directory under the temp dir."""
    for candidate in (RUN_LOCK_DIR, Path(tempfile.gettempdir()) / f"cardbench-locks-{os.getuid()}"):
        try:
            candidate.mkdir(parents=True, exist_ok=True, mode=0o755)
        except OSError:
            continue
        if os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    raise TargetError("no writable directory for cardbench lock files (/run/cardbench/locks or the temp dir)")


def _whole_disk_devno(rdev: int, sysfs_root: str = "/sys") -> tuple[int, int]:
    """(major, minor) of the whole disk a block device belongs to (a partition maps to its parent)."""
    major, minor = os.major(rdev), os.minor(rdev)
    node = os.path.join(sysfs_root, "dev", "block", f"{major}:{minor}")
    if os.path.exists(os.path.join(node, "partition")):
        parent = read_text(os.path.join(os.path.realpath(node), "..", "dev"))
        if parent and re.fullmatch(r"\d+:\d+", parent):
            a, b = parent.split(":")
            return int(a), int(b)
    return major, minor


def lock_key(path: str, *, sysfs_root: str = "/sys") -> str:
    """A lock key for a target path (a target from :func:`cardbench.target.open_target` has its
    own, ``target.lock_key``, made by the functions below without asking the path again).

    Block device -> ``blk-<major>-<minor>`` of the whole disk; directory -> ``dir-<st_dev major>-
    <minor>-<inode>``; regular file (image) -> ``file-<major>-<minor>-<inode>``. Symlinks are followed.
    """
    return key_of_stat(stat_path(path)[0], sysfs_root=sysfs_root, path=path)


def key_of_devno(devno: str, *, sysfs_root: str = "/sys") -> str:
    """The lock key of the block device ``devno`` ("major:minor"): its whole disk's."""
    a, b = devno.split(":")
    major, minor = _whole_disk_devno(os.makedev(int(a), int(b)), sysfs_root)
    return f"blk-{major}-{minor}"


def key_of_stat(st: os.stat_result, *, sysfs_root: str = "/sys", path: str = "") -> str:
    """The lock key of what ``st`` (a stat result) describes (see :func:`lock_key`)."""
    if stat.S_ISBLK(st.st_mode):
        major, minor = _whole_disk_devno(st.st_rdev, sysfs_root)
        return f"blk-{major}-{minor}"
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else None
    if kind is None:
        raise UsageError(f"{path} is neither a block device, a directory nor a file")
    return f"{kind}-{os.major(st.st_dev)}-{os.minor(st.st_dev)}-{st.st_ino}"


def _safe_name(key: str) -> str:
    """A key usable as a file name (anything outside [A-Za-z0-9._-] becomes "_")."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", key).lstrip(".")
    if not name:
        raise UsageError(f"invalid lock key {key!r}")
    return name


@dataclass
class LockHolder:
    """Who holds a lock, as written in its lock file (pid None when unreadable)."""

    pid: int | None
    target: str | None


def _read_holder(fd: int) -> LockHolder:
    """Parse "pid\\ntarget\\n" from a lock file."""
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace")
    except OSError:
        return LockHolder(None, None)
    lines = text.splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    target = lines[1].strip() if len(lines) > 1 and lines[1].strip() else None
    return LockHolder(pid, target)


def _busy(key: str, label: str | None, holder: LockHolder) -> Busy:
    """The one-line Busy error for a held lock."""
    who = f"another cardbench (pid {holder.pid})" if holder.pid else "another cardbench"
    return Busy(f"{who} is testing {holder.target or label or key}")


@contextmanager
def target_lock(key: str, *, wait: bool = False, timeout: float | None = None, label: str | None = None,
                lock_dir: str | Path | None = None) -> Iterator[Path]:
    """Hold the lock for ``key`` for the duration of the ``with`` block; yields the lock file path.

    ``wait=False`` raises ``Busy("another cardbench (pid N) is testing X")`` at once when the lock
    is held; ``wait=True`` blocks until it is free (or raises Busy after ``timeout`` seconds).
    ``label`` is what this run tests, shown to others (default: the key).
    """
    directory = Path(lock_dir) if lock_dir is not None else default_lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_safe_name(key)}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise TargetError(f"cannot open lock file {path}: {e.strerror}") from None
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                if wait and deadline is None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                else:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if not wait or (deadline is not None and time.monotonic() >= deadline):
                    raise _busy(key, label, _read_holder(fd)) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        # a path as given: bytes that are not UTF-8 (surrogates in a str) go in as they were
        os.pwrite(fd, f"{os.getpid()}\n{label or key}\n".encode("utf-8", "surrogateescape"), 0)
        try:
            yield path
        finally:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
    finally:
        os.close(fd)  # closing the descriptor releases the flock
