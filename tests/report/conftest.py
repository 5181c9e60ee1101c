import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chromium_helpers import Chromium, find_chromium  # noqa: E402


@pytest.fixture(scope="session")
def chromium():
    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("headless Chromium must run in CI: apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return Chromium(binary)


