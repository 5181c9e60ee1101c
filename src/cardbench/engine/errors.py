"""The one errno-to-error table of cardbench: what an OSError met while moving card data means.

Every module that moves card bytes turns its OSError into a user's error here, so one fault
reaches the user as the same words and the same exit code whichever command met it:

* :func:`describe` is the phrase for an errno ("I/O error (the card failed or was removed)");
* :func:`io_error` is the one-line :class:`~cardbench.errors.CardbenchError` for it: an
  :class:`IoSetupError` (a :class:`TargetError`, exit 3) for what is the user's setup
  (permissions, a missing path), an :class:`IoFault` (a :class:`DeviceFault`, exit 5) for what
  the card did; both carry the errno, the operation and the byte offset as typed fields;
* :func:`open_error` is the one-line error for a failed exclusive open of a block device
  (busy or read-only: a :class:`~cardbench.errors.SafetyRefusal`, exit 4; else exit 3);
* :data:`GONE` are the errnos that mean the card itself went away (not one bad spot;
  :meth:`cardbench.target.Target.gone` is the whole rule, :data:`GONE_WORDS` its words),
  :data:`FULL` those that mean the filesystem filled up, :data:`DENIED` those that need root
  (or a permission), :data:`BUSY` those of a device someone else holds.
"""

from __future__ import annotations

import errno
import os
import stat

from cardbench.errors import DeviceFault, SafetyRefusal, TargetError, UsageError

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
    errno.EBUSY: "it is in use (mounted, swap, part of RAID/LVM/LUKS, or opened exclusively by another program)",
}
#: the card itself stopped answering (the errnos that say so; a pulled device may also fail with
#: EIO, ENOSPC or a short transfer first: cardbench.target.Target.gone is the rule that looks)
GONE = frozenset({errno.ENODEV, errno.ENXIO, errno.ENOMEDIUM, errno.ESHUTDOWN})
#: the words for a card that went away, whichever errno its last request failed with
GONE_WORDS = REASONS[errno.ENODEV]
#: the filesystem (or the user's quota) is full
FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
#: not allowed to this user (root needed, or a permission)
DENIED = frozenset({errno.EACCES, errno.EPERM})
#: someone else holds the device (mounted, swap, RAID/LVM/LUKS, another exclusive opener)
BUSY = frozenset({errno.EBUSY})
#: the user's setup, not the card: exit 3 (TargetError)
_SETUP = DENIED | {errno.ENOENT}


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
        return REASONS[err]
    if fallback:
        return fallback
    return os.strerror(err) if err else "I/O error"


def fault_errno(e: BaseException) -> int:
    """The errno an error carries (an OSError, :class:`IoFault`...), EIO when it carries none."""
    return getattr(e, "errno", None) or errno.EIO


#: what :func:`io_error` returns (catch these to handle any error of moving card bytes)
IO_ERRORS = (IoFault, IoSetupError)


def io_error(e: OSError, path: str, *, op: str | None = None, offset: int | None = None) -> IoSetupError | IoFault:
    """Turn an OSError met on card data into its one-line cardbench error (see the module)."""
    msg = f"{path}: {describe(e.errno, e.strerror or str(e))}"
    cls = IoSetupError if e.errno in _SETUP else IoFault
    return cls(msg, errno=e.errno, op=op, offset=offset)


def open_error(e: OSError, path: str, action: str = "open") -> SafetyRefusal | IoSetupError:
    """The one-line error for a failed exclusive open of the block device ``path`` to ``action``
    ("open", "write to"): a device in use or read-only is refused by the safety rules
    (:class:`SafetyRefusal`, exit 4); a missing one, a permission, no medium or any other errno
    is an :class:`IoSetupError` (exit 3) carrying the errno."""
    err = e.errno
    if err in BUSY:
        return SafetyRefusal(f"refusing to {action} {path}: {REASONS[errno.EBUSY]}")
    if err == errno.EROFS:
        return SafetyRefusal(f"refusing to {action} {path}: it is read-only")
    if err == errno.ENOENT:
        msg = f"{path} does not exist"
    elif err in DENIED:
        msg = f"cannot open {path}: permission denied (raw device tests need root)"
    elif err == errno.ENOMEDIUM:
        msg = f"{path} has no medium (is the card inserted?)"
    else:
        msg = f"cannot open {path}: {describe(err, e.strerror or str(e))}"
    return IoSetupError(msg, errno=err, op="open")


def short_transfer(path: str, op: str, offset: int, got: int, want: int, why: str = "the device ended early") -> IoFault:
    """The error for a read or write that moved fewer bytes than asked."""
    return IoFault(f"{path}: short {op} at byte {offset} ({got} of {want} bytes): {why}", op=op, offset=offset)


# -- what a path is: the one wording (cardbench.target.open_target and the device functions that
# take a path use it, so a missing path or a path of another kind reads the same everywhere)

#: what each kind is called in an error: what a path is, and what a command takes
_IS_WORDS = {"directory": "a directory", "device": "a block device", "image": "a regular file"}
_TAKES_WORDS = {"directory": "a directory on the mounted card", "device": "a block device", "image": "an image file"}


def shown(path: str) -> str:
    """``path`` as an error line shows it: as given, with bytes that are not UTF-8 as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def cannot_use(e: OSError, path: str) -> TargetError:
    """The one error for a path that cannot be tested because of ``e`` (stat, statvfs, open or a
    probe write): ``<path>: <the errno table's words>``, exit 3."""
    return TargetError(f"{shown(path)}: {describe(e.errno, e.strerror)}")


def wrong_kind(path: str, what: str, kinds: tuple[str, ...]) -> TargetError:
    """The one error for a path of another kind than the command takes (exit 3)."""
    want = " or ".join(_TAKES_WORDS[k] for k in kinds)
    return TargetError(f"{shown(path)} is {what}, not {want}")


def stat_path(path: str, kinds: tuple[str, ...] = ("directory", "device", "image")) -> tuple[os.stat_result, str]:
    """(stat, kind) of ``path``, where kind is "directory", "device" (a block device) or "image" (a
    regular file) and must be one of ``kinds``: the one place that asks what a path is. A path that
    cannot be stat()ed is :func:`cannot_use`, another kind :func:`wrong_kind` (exit 3)."""
    if not path:
        raise UsageError("no target given")
    try:
        st = os.stat(path)
    except OSError as e:
        raise cannot_use(e, path) from None
    mode = st.st_mode
    kind = ("directory" if stat.S_ISDIR(mode) else "device" if stat.S_ISBLK(mode)
            else "image" if stat.S_ISREG(mode) else None)
    if kind not in kinds:
        what = _IS_WORDS.get(kind or "", "a character device" if stat.S_ISCHR(mode) else "a special file")
        raise wrong_kind(path, what, kinds)
    return st, kind
