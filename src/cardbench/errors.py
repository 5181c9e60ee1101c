"""Errors a user sees: one line on stderr and an exit code per failure class.

Every failure cardbench expects is raised as a CardbenchError subclass; the CLI prints
``cardbench: <message>`` and exits with ``exit_code``. Exit codes are documented in README.md.
"""

from __future__ import annotations

from typing import Any


class CardbenchError(Exception):
    """Base class: a failure with a one-line message meant for the user.

    ``partial`` is what was measured before the failure, for the caller to store as incomplete:
    a :class:`cardbench.result.Result` (``run``) or a ``cardbench.verify/1`` document
    (``verify``); None when nothing was. ``result`` and ``doc`` read it by what it is."""

    exit_code = 1

    def __init__(self, message: str, *, partial: Any = None):
        super().__init__(message)
        self.message = message
        self.partial = partial

    @property
    def result(self) -> Any:
        """The partial Result of a run (None if there is none, or the partial is a document)."""
        return None if isinstance(self.partial, dict) else self.partial

    @property
    def doc(self) -> dict | None:
        """The partial verify document (None if there is none)."""
        return self.partial if isinstance(self.partial, dict) else None


class UsageError(CardbenchError):
    """Bad arguments or input (sizes, labels, paths of the wrong kind)."""

    exit_code = 2


class TargetError(CardbenchError):
    """The target cannot be tested: missing, not a directory, read-only, too little space, no permission."""

    exit_code = 3


class SafetyRefusal(CardbenchError):
    """A destructive action refused by the safety rules (mounted, system disk, in use, not confirmed)."""

    exit_code = 4


class DeviceFault(CardbenchError):
    """The card failed during a test: I/O error, removed, filesystem full or remounted read-only."""

    exit_code = 5


class StoreError(CardbenchError):
    """The results database cannot be opened, read or written."""

    exit_code = 6


class Busy(CardbenchError):
    """Another cardbench process is testing the same target."""

    exit_code = 7


class EnvironmentMissing(CardbenchError):
    """Something the host lacks: root, FUSE, loop devices, fio."""

    exit_code = 8


class NotStored(CardbenchError):
    """Measured, shown, but not stored yet: the store failed and the result waits in the outbox
    (`cardbench sync`, or the next save to that store, stores it)."""

    exit_code = 9


class Interrupted(CardbenchError):
    """Stopped by SIGINT or SIGTERM; cleanup has run."""

    exit_code = 130
