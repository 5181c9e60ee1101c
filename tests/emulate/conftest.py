"""Fixtures for the emulated-card tests: real FUSE servers, real loop devices, fio.

Every emulator made here lives under one session temp dir ($CARDBENCH_EMULATE_TMPDIR), so a
leak check can look for loop devices, mounts and server processes of *our* emulators only
(other people may run their own loop devices on the same machine at the same time).
"""

from __future__ import annotations

import os

import pytest
from emulate_helpers import leftovers


@pytest.fixture(scope="session", autouse=True)
def emu_tmp(tmp_path_factory):
    """All emulators of this session live under this directory; checked for leaks at the end."""
    d = tmp_path_factory.mktemp("emu")
    old = os.environ.get("CARDBENCH_EMULATE_TMPDIR")
    os.environ["CARDBENCH_EMULATE_TMPDIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("CARDBENCH_EMULATE_TMPDIR", None)
    else:
        os.environ["CARDBENCH_EMULATE_TMPDIR"] = old
    assert leftovers(d) == [], "emulator leftovers after the session"


