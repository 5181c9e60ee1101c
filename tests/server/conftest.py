"""The station server's tests: a real `cardbench serve` (uvicorn, a child process) on 127.0.0.1,
started once per module, over a throwaway PostgreSQL (tests/store's PostgresServer) or SQLite."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_helpers import running_postgres  # noqa: E402


@pytest.fixture(scope="module")
def pg_server():
    with running_postgres() as server:
        yield server
