"""The VM tier (issue 24): cardbench on a booted Debian kernel with emulated SD, USB and ATA
hardware under the kernel's own drivers. See vmharness.py for the design.

Where it cannot run (no QEMU, no kernel image, no busybox, not root) every test skips with a
reason naming what is missing; with ``CI=true`` that is a failure instead, so CI cannot pass
without running it. Each test module boots one guest (module-scoped fixture) and runs several
checks on it; QEMU is killed and its temporary files removed by the fixture's finalizer, also
when a test fails.
"""

from __future__ import annotations

import os

import pytest
from vmharness import Guest, missing


def require_vm() -> None:
    lacking = missing()
    if lacking:
        message = "the VM tier cannot run here; missing: " + "; ".join(lacking)
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: a skipped VM tier is a failure)", pytrace=False)
        pytest.skip(message)


def boot(request, **kw) -> Guest:
    """A booted guest, closed (QEMU killed, files removed) when the requesting scope ends."""
    require_vm()
    guest = Guest(**kw)
    request.addfinalizer(guest.close)
    guest.start()
    return guest
