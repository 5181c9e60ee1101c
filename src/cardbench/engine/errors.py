"""The one errno-to-error table of cardbench: what an OSError met while moving card data means.

Every module that moves card bytes turns its OSError into a user's error here, so one fault
reaches the user as the same words and the same exit code whichever command met it:

* :func:`describe` is the phrase for an errno ("I/O error (the card failed or was removed)");
* :func:`io_error` is the one-line :class:`~cardbench.errors.CardbenchError` for it: an
  :class:`IoSetupError` (a :class:`TargetError`, exit 3) for what is the user's setup
  (permissions, a missing path), an :class:`IoFault` (a :class:`DeviceFault`, exit 5) for what
  the card did; both carry the errno, the operation and the byte offset as typed fields;
* :data:`GONE` are the errnos that mean the card itself went away (not one bad spot),
  :data:`FULL` those that mean the filesystem filled up.
"""

from __future__ import annotations

import errno

from cardbench.errors import DeviceFault, TargetError

#: errno -> what it means for a card, in words
REASONS: dict[int, str] = {
    errno.ENOSPC: "the filesystem is full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the filesystem is read-only",
    errno.EIO: "I/O error (the card failed or was removed)",
    errno.ENODEV: "the device is gone (removed?)",
    errno.ENXIO: "the device is gone (removed?)",
    errno.ENOMEDIUM: "no medium (the card was removed?)",
    errno.ESHUTDOWN: "the device is gone (shut down)",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "no such file or directory",
}
#: the card itself stopped answering
GONE = frozenset({errno.ENODEV, errno.ENXIO, errno.ENOMEDIUM, errno.ESHUTDOWN})
#: the filesystem (or the user's quota) is full
FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
#: the user's setup, not the card: exit 3 (TargetError)
_SETUP = frozenset({errno.EACCES, errno.EPERM, errno.ENOENT})


class _Located:
    """Where an I/O error happened: ``errno`` (None for a short transfer), ``op`` ("read",
    "write", "sync", "open" or None) and ``offset`` (the byte, or None)."""

    errno: int | None
    op: str | None
    offset: int | None

    def _locate(self, err: int | None, op: str | None, offset: int | None) -> None:
        self.errno, self.op, self.offset = err, op, offset

    @property
    def gone(self) -> bool:
        """The card itself stopped answering."""
        return self.errno in GONE

    @property
    def full(self) -> bool:
        """The filesystem filled up."""
        return self.errno in FULL


class IoSetupError(_Located, TargetError):
    """An I/O error that is the user's setup (permission, a missing path): exit 3."""

    def __init__(self, message: str, *, errno: int | None = None, op: str | None = None,
                 offset: int | None = None):
        TargetError.__init__(self, message)
        self._locate(errno, op, offset)


class IoFault(_Located, DeviceFault):
    """The card failed while bytes moved (exit 5); see :class:`_Located` for the fields."""

    def __init__(self, message: str, *, errno: int | None = None, op: str | None = None,
                 offset: int | None = None):
        DeviceFault.__init__(self, message)
        self._locate(errno, op, offset)



def describe(err: int | None, fallback: str | None = None) -> str:
    """The words for ``err`` (an errno); ``fallback`` (else the system's text) for one not in the table."""
    if err in REASONS:
        return REASONS[err]   # type: ignore[index]
    if fallback:
        return fallback
    import os
    return os.strerror(err) if err else "I/O error"


#: what :func:`io_error` returns (catch these to handle any error of moving card bytes)
IO_ERRORS = (IoFault, IoSetupError)


def io_error(e: OSError, path: str, *, op: str | None = None, offset: int | None = None) -> IoSetupError | IoFault:
    """Turn an OSError met on card data into its one-line cardbench error (see the module)."""
    msg = f"{path}: {describe(e.errno, e.strerror or str(e))}"
    cls = IoSetupError if e.errno in _SETUP else IoFault
    return cls(msg, errno=e.errno, op=op, offset=offset)


def short_transfer(path: str, op: str, offset: int, got: int, want: int, why: str = "the device ended early") -> IoFault:
    """The error for a read or write that moved fewer bytes than asked."""
    return IoFault(f"{path}: short {op} at byte {offset} ({got} of {want} bytes): {why}", op=op, offset=offset)
