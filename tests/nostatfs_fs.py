"""A passthrough FUSE filesystem that does not implement statfs (it reports 0 blocks, 0 free),
like some FUSE drivers do. ``python nostatfs_fs.py BACKING_DIR MOUNTPOINT [SOURCE]`` serves BACKING_DIR
at MOUNTPOINT in the foreground until unmounted (fusermount3 -u); SOURCE is the name mountinfo
shows (a FUSE driver over a card names its device there, as a ``fuse`` mount)."""

from __future__ import annotations

import errno
import os
import sys

from cardbench.emulate.system import load_mfusepy

fuse = load_mfusepy()


class NoStatfs(fuse.Operations):
    use_ns = True

    def __init__(self, root: str) -> None:
        self.root = root

    def _p(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._p(path))
        except FileNotFoundError:
            raise fuse.FuseOSError(errno.ENOENT) from None
        return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid",
                                            "st_atime", "st_mtime", "st_ctime")}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._p(path))]

    def access(self, path, amode):
        return 0

    def create(self, path, mode, fi=None):
        return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def open(self, path, flags):
        return os.open(self._p(path), flags & ~(os.O_CREAT | os.O_EXCL | os.O_DIRECT))

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(self._p(path), length)

    def unlink(self, path):
        os.unlink(self._p(path))

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        os.fsync(fh)
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0

    def utimens(self, path, times=None):
        return 0

    def chmod(self, path, mode):
        return 0

    def chown(self, path, uid, gid):
        return 0
    # no statfs: mfusepy's default answers an empty statvfs (0 blocks, 0 free)


if __name__ == "__main__":
    extra = {"fsname": sys.argv[3]} if len(sys.argv) > 3 else {}
    fuse.FUSE(NoStatfs(sys.argv[1]), sys.argv[2], foreground=True, nothreads=True, **extra)
