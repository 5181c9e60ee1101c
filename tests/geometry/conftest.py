"""Geometry tests: emulated cards live under one session directory, checked for leaks."""

from __future__ import annotations

import pytest

from realparts import emulators_under


@pytest.fixture(scope="session", autouse=True)
def emu_tmp(tmp_path_factory):
    with emulators_under(tmp_path_factory.mktemp("emu")) as d:
        yield d
