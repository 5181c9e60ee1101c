"""Fixtures for the emulated-card tests: real FUSE servers, real loop devices, fio.

Every emulator made here lives under one session temp dir ($CARDBENCH_EMULATE_TMPDIR), so a
leak check can look for loop devices, mounts and server processes of *our* emulators only
(other people may run their own loop devices on the same machine at the same time).
"""

from __future__ import annotations

import pytest

from realparts import emulators_under


@pytest.fixture(scope="session", autouse=True)
def emu_tmp(tmp_path_factory):
    """All emulators of this session live under this directory; checked for leaks at the end."""
    with emulators_under(tmp_path_factory.mktemp("emu")) as d:
        yield d


