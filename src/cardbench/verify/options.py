"""What a verify may be asked, checked in one place: :class:`VerifyOptions` and its rules.

``VerifyOptions(...).validate(target)`` says which test a target gets ("quick" or "full") or
refuses in one line: a missing target is a :class:`~cardbench.errors.TargetError` (exit 3), every
other rule a :class:`~cardbench.errors.UsageError` (exit 2). The command line only parses its
options into a ``VerifyOptions``; :func:`verify_target` (what ``cardbench verify`` runs after the
user confirmed a destructive test) and :func:`cardbench.verify.verify_full` check the same rules.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any, Literal

from cardbench.errors import TargetError, UsageError

MiB = 1 << 20
TargetKind = Literal["directory", "device", "other"]


def target_kind(target: str) -> TargetKind:
    """What ``target`` is: "directory", "device" (a block device) or "other"; TargetError when it
    cannot be looked at (missing, no permission)."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise TargetError(f"{target}: no such file, directory or device") from None
    except OSError as e:
        raise TargetError(f"{target}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    return "device" if stat.S_ISBLK(st.st_mode) else "other"


@dataclass(frozen=True)
class VerifyOptions:
    """A verify's options, as ``cardbench verify`` takes them (see its ``--help``)."""

    full: bool = False
    destructive: bool = False
    time_budget: float | None = None          #: seconds (quick mode)
    resume: bool = False                       #: full mode
    keep_files: bool = False                   #: full mode on a directory
    file_bytes: int | None = None              #: full mode: bytes per file or segment
    journal_dir: str | os.PathLike | None = None   #: quick mode, non-destructive
    assume_cache_bytes: int | None = None     #: quick mode
    seed: int | None = None

    def validate(self, target: str) -> Literal["quick", "full"]:
        """The test ``target`` gets, after every rule (TargetError for a missing target, else UsageError)."""
        return self.check(target_kind(target), target)

    def check(self, kind: TargetKind, target: str) -> Literal["quick", "full"]:
        """The rules for a target of this ``kind`` (no look at the system: a model can be checked)."""
        if kind == "other":
            raise UsageError(f"{target} is neither a block device nor a directory")
        directory = kind == "directory"
        full = self.full or directory
        if directory and self.destructive:
            raise UsageError("--destructive is for block devices; full mode on a directory only uses free space")
        if self.time_budget is not None and full:
            raise UsageError("--time-budget is for the quick probe; full mode always checks everything")
        if self.time_budget is not None and not self.time_budget > 0:
            raise UsageError("the time budget must be a positive number of seconds")
        if self.resume and not full:
            raise UsageError("--resume is for full mode (--full)")
        if not directory and full and not self.destructive:
            raise UsageError(f"full mode on the block device {target} overwrites all of it: add --destructive "
                             "(and confirm), or give a directory on the mounted card")
        if self.file_bytes is not None and (self.file_bytes < MiB or self.file_bytes % MiB):
            raise UsageError("the file size must be a whole number of MiB (at least 1 MiB)")
        return "full" if full else "quick"


def verify_target(target: str, options: VerifyOptions, *, progress=None, check_safety: bool = True) -> dict[str, Any]:
    """Verify ``target`` (a block device: the quick probe, or with ``full`` a destructive fill; a
    directory: full mode) after :meth:`VerifyOptions.validate`; a ``cardbench.verify/1`` document.
    A destructive test must have been confirmed by the caller (``cardbench verify`` asks)."""
    o = options
    if o.validate(target) == "full":
        from cardbench.verify.full import verify_full
        return verify_full(target, destructive=o.destructive, resume=o.resume, keep_files=o.keep_files,
                           file_bytes=o.file_bytes, progress=progress, seed=o.seed, check_safety=check_safety)
    from cardbench.verify.quick import verify_device
    return verify_device(target, destructive=o.destructive, journal_dir=o.journal_dir, time_budget=o.time_budget,
                         progress=progress, seed=o.seed, assume_cache_bytes=o.assume_cache_bytes,
                         check_safety=check_safety)
