"""Errors a user sees: one line on stderr and an exit code per failure class.

Every failure cardbench expects is raised as a CardbenchError subclass; the CLI prints
``cardbench: <message>`` and exits with ``exit_code``, one of :class:`ExitCode` (README.md lists them).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Every exit status of the ``cardbench`` command (README.md, "Exit codes", lists the same)."""

    OK = 0               #: success
    FAILURE = 1          #: other failure
    USAGE = 2            #: bad arguments or input
    TARGET = 3           #: the target cannot be tested
    SAFETY = 4           #: refused by the safety rules
    DEVICE_FAULT = 5     #: the card failed during the test
    STORE = 6            #: the results database cannot be opened or written
    BUSY = 7             #: another cardbench is testing the same target
    ENVIRONMENT = 8      #: the host lacks something (root, FUSE, loop devices, fio)
    NOT_STORED = 9       #: measured but not stored yet (kept in the outbox)
    INTERNAL = 70        #: internal error (a bug)
    INTERRUPTED = 130    #: Ctrl-C or SIGTERM; cleanup has run


class CardbenchError(Exception):
    """Base class: a failure with a one-line message meant for the user.

    ``partial`` is what was measured before the failure, for the caller to store as incomplete:
    a :class:`cardbench.result.Result` (``run``) or a ``cardbench.verify/1`` document
    (``verify``); None when nothing was. ``result`` and ``doc`` read it by what it is.
    ``recorded`` is what became of it (a :class:`cardbench.record.Recorded`, set by
    :func:`cardbench.measured.keep_measured`; the command line says it before the error's line)."""

    exit_code = ExitCode.FAILURE

    def __init__(self, message: str, *, partial: Any = None):
        super().__init__(message)
        self.message = message
        self.partial = partial
        self.recorded: Any = None

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

    exit_code = ExitCode.USAGE


class NotFound(UsageError):
    """A record asked for by its id that is not there (the station server's 404)."""


class TargetError(CardbenchError):
    """The target cannot be tested: missing, not a directory, read-only, too little space, no permission."""

    exit_code = ExitCode.TARGET


class SafetyRefusal(CardbenchError):
    """A destructive action refused by the safety rules (mounted, system disk, in use, not confirmed)."""

    exit_code = ExitCode.SAFETY


class DeviceFault(CardbenchError):
    """The card failed during a test: I/O error, removed, filesystem full or remounted read-only."""

    exit_code = ExitCode.DEVICE_FAULT


class StoreError(CardbenchError):
    """The results database cannot be opened, read or written."""

    exit_code = ExitCode.STORE


class Busy(CardbenchError):
    """Another cardbench process is testing the same target."""

    exit_code = ExitCode.BUSY


class EnvironmentMissing(CardbenchError):
    """Something the host lacks: root, FUSE, loop devices, fio."""

    exit_code = ExitCode.ENVIRONMENT


class NotStored(CardbenchError):
    """Measured, shown, but not stored yet: the store failed and the result waits in the outbox
    (`cardbench sync`, or the next save to that store, stores it)."""

    exit_code = ExitCode.NOT_STORED


class Interrupted(CardbenchError):
    """Stopped by SIGINT or SIGTERM; cleanup has run."""

    exit_code = ExitCode.INTERRUPTED
