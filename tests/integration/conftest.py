"""Shared by the integration tests that run emulated cards behind emulated readers."""

from __future__ import annotations

import pytest

from realparts import emulators_under


@pytest.fixture
def emu_dir(tmp_path):
    """A folder of this test's own for emulated cards; every emulator under it is stopped after."""
    d = tmp_path / "emu"
    d.mkdir()
    with emulators_under(d):
        yield d
