import os
import pwd
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cardbench_factories import PostgresServer, find_pg_bin, make_result  # noqa: E402


def _pg_missing_reason() -> str | None:
    if find_pg_bin() is None:
        return "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "no 'postgres' user to run the test server as"
    return None


@pytest.fixture(scope="session")
def pg_server():
    reason = _pg_missing_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL tests must run in CI: {reason}")
        pytest.skip(reason)
    server = PostgresServer(find_pg_bin())
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server."""
    return pg_server.new_database()


@pytest.fixture
def result_factory():
    return make_result
