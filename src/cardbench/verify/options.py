"""What a verify may be asked, checked in one place: :class:`VerifyOptions` and its rules.

``VerifyOptions(...).validate(target)`` says which test an opened target
(:func:`cardbench.target.open_target`, which refuses a missing or unusable path in its one
wording) gets ("quick" or "full"), or refuses in one line with a
:class:`~cardbench.errors.UsageError` (exit 2). The command line only parses its
options into a ``VerifyOptions``; :func:`cardbench.verify.verify_target` (what ``cardbench verify`` runs after the
user confirmed a destructive test) and :func:`cardbench.verify.verify_full` check the same rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from cardbench.errors import UsageError

MiB = 1 << 20
TargetKind = Literal["directory", "device", "other"]


def target_kind(target) -> TargetKind:
    """What an opened target (:func:`cardbench.target.open_target`, or a model of one) is:
    "directory", "device" (a block device) or "other"."""
    kind = getattr(target, "kind", None)
    return kind if kind in ("directory", "device") else "other"


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

    def validate(self, target) -> Literal["quick", "full"]:
        """The test ``target`` (an opened target) gets, after every rule (UsageError)."""
        return self.check(target_kind(target), target.path)

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
