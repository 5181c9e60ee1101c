"""Shared fixtures over tests/realparts.py."""

from __future__ import annotations

import pytest

from realparts import ROOT, loop_device, mounted


@pytest.fixture
def loop_ext4():
    """A mounted ext4 on a 256 MiB loop device."""
    if not ROOT:
        pytest.skip("needs root for loop devices")
    with loop_device(256 << 20) as dev, mounted(dev) as mnt:
        yield mnt


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "results.sqlite3")
