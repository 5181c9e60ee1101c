"""Fixtures for the device tests (helpers live in devices_helpers.py, a unique module name)."""

from __future__ import annotations

import pytest

from devices_helpers import CAN_LOOP, loop_device

# The fixture sysfs tree has symlink cycles, as real sysfs does (sdf1/holders/dm-0 <-> dm-0/slaves/sdf1):
# keep pytest's collector out of it.
collect_ignore = ["fixtures"]

@pytest.fixture
def loop():
    """A 16 MiB zeroed loop device: (device, image)."""
    if not CAN_LOOP:
        pytest.skip("needs root and loop devices")
    with loop_device(16 << 20) as pair:
        yield pair
