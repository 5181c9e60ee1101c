"""Errors a user sees: one line on stderr and an exit code per failure class.

Every failure cardbench expects is raised as a CardbenchError subclass; the CLI prints
``cardbench: <message>`` and exits with ``exit_code``. Exit codes are documented in README.md.
"""

from __future__ import annotations


class CardbenchError(Exception):
    """Base class: a failure with a one-line message meant for the user."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


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
