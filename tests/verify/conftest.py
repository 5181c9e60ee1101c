"""Fixtures for the verify tests: emulated cards (real loop devices), journals in tmp dirs."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture
def journal(tmp_path):
    d = tmp_path / "journal"
    d.mkdir()
    return str(d)
