"""Fixtures for the endurance tests: emulated cards (real FUSE servers, real loop devices) under one
session temp dir, checked for leftovers at the end (tests/realparts.emulators_under)."""

from __future__ import annotations

import os
import sys

import pytest

from realparts import emulators_under

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="session", autouse=True)
def emu_tmp(tmp_path_factory):
    with emulators_under(tmp_path_factory.mktemp("emu")) as d:
        yield d
