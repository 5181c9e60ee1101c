"""Skip-or-fail and boot helpers of the VM tier (a unique module name: every tests/ directory
has a conftest.py, so test modules import these from here)."""

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
