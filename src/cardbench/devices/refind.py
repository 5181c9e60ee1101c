"""Finding a card again after it went away: on any device name, by the identity written on it.

A test that writes its own identity onto a card (the pull test's label, the endurance test's
sectors) waits for the card to come back with :func:`wait_for_card`: every whole block device of
the card's size is read with the test's ``identify(path)`` (the identity it finds there, or None),
until one holds the one wanted. A device that appears (or changes) holding anything else is handed
to ``refused`` -- which raises to end the wait, or says so and lets it go on -- and is never
returned, so a different card in that slot is never written by mistake.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from cardbench.engine.errors import IO_ERRORS

SYS_BLOCK = "/sys/block"
#: how often the wait looks at the block devices
POLL = 0.2


def candidates(size_bytes: int, identify: Callable[[str], str | None]) -> dict[str, tuple[str, str | None]]:
    """Whole block devices of ``size_bytes``: name -> (devno, ``identify("/dev/NAME")``). A device
    that cannot be read (``identify`` raised an I/O error) is left out."""
    want = str(size_bytes // 512)
    out: dict[str, tuple[str, str | None]] = {}
    for name in sorted(os.listdir(SYS_BLOCK)):
        try:
            with open(f"{SYS_BLOCK}/{name}/size") as fh:
                if fh.read().strip() != want:
                    continue
            with open(f"{SYS_BLOCK}/{name}/dev") as fh:
                devno = fh.read().strip()
        except OSError:
            continue
        try:
            found = identify(f"/dev/{name}")
        except (*IO_ERRORS, OSError):
            continue
        out[name] = (devno, found)
    return out


def wait_for_card(size_bytes: int, identify: Callable[[str], str | None], want: str, *, timeout: float,
                  refused: Callable[[str, str | None], None], poll: float = POLL,
                  stop: Callable[[], bool] | None = None) -> str | None:
    """Wait up to ``timeout`` s for a device of ``size_bytes`` whose ``identify`` is ``want``;
    returns its path (``/dev/NAME``), or None on the timeout (or when ``stop()`` says so). A
    device that appears or changes holding another identity (or none) goes to ``refused(path,
    found)`` once."""
    before = candidates(size_bytes, identify)
    deadline = time.monotonic() + timeout
    while True:
        now = candidates(size_bytes, identify)
        for name, (devno, found) in now.items():
            if found == want:
                return f"/dev/{name}"
            if before.get(name) != (devno, found):
                refused(f"/dev/{name}", found)
        before = now
        if time.monotonic() > deadline or (stop is not None and stop()):
            return None
        time.sleep(poll)
