import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cardbench_factories import make_result, running_postgres  # noqa: E402


@pytest.fixture(scope="session")
def pg_server():
    with running_postgres() as server:
        yield server


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server."""
    return pg_server.new_database()


@pytest.fixture
def result_factory():
    return make_result
