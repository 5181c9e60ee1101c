"""Files that are not ours: refused with one line, never modified."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys

import pytest

from cardbench.errors import StoreError
from cardbench.store import open_store
from cardbench_factories import make_result


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _siblings(path) -> set[str]:
    return set(os.listdir(os.path.dirname(path)))


def _assert_refused(path, match: str):
    before, files = _digest(path), _siblings(path)
    with pytest.raises(StoreError, match=match) as ei:
        open_store(path)
    msg = ei.value.message
    assert "\n" not in msg and "Traceback" not in msg
    assert _digest(path) == before, "a foreign file was modified"
    assert _siblings(path) == files, "files (-wal, -shm, -journal) were created beside a foreign file"
    return msg


def test_random_bytes_file(tmp_path):
    p = tmp_path / "garbage.db"
    p.write_bytes(os.urandom(8192))
    _assert_refused(str(p), "is not a SQLite database")


def test_text_file(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("brand,capacity\nLexar,48M\n")
    _assert_refused(str(p), "is not a SQLite database")


def test_truncated_sqlite_file(tmp_path):
    good = tmp_path / "good.db"
    with open_store(good) as st:
        for _ in range(5):
            st.save(make_result(curves=True))
    bad = tmp_path / "cut.db"
    bad.write_bytes(good.read_bytes()[:100] + b"\x00" * 10 + os.urandom(3000))
    before = _digest(bad)
    with pytest.raises(StoreError) as ei:
        with open_store(bad) as st:
            st.results()
    assert "\n" not in ei.value.message
    assert _digest(bad) == before


def test_foreign_sqlite_database(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE recipes (name TEXT, minutes INTEGER)")
    con.execute("INSERT INTO recipes VALUES ('soup', 30)")
    con.commit()
    con.close()
    msg = _assert_refused(str(p), "database of another program")
    assert "recipes" in msg


def test_foreign_application_id(tmp_path):
    p = tmp_path / "app.sqlite"
    con = sqlite3.connect(p)
    con.execute("PRAGMA application_id = 1234")
    con.commit()
    con.close()
    _assert_refused(str(p), "application id 0x4d2")


def test_foreign_schema_version_table(tmp_path):
    p = tmp_path / "sv.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE schema_version (v INTEGER)")
    con.execute("INSERT INTO schema_version VALUES (7)")
    con.commit()
    con.close()
    _assert_refused(str(p), "schema_version table that is not cardbench's")


def test_schema_version_of_another_app(tmp_path):
    p = tmp_path / "sv2.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE schema_version (app TEXT, version INTEGER, description TEXT, applied_at TEXT)")
    con.execute("INSERT INTO schema_version VALUES ('someapp', 3, 'x', 'y')")
    con.commit()
    con.close()
    _assert_refused(str(p), "schema_version table of another program")


def test_empty_file_becomes_a_store(tmp_path):
    p = tmp_path / "empty.db"
    p.touch()
    with open_store(p) as st:
        st.save(make_result())
        assert st.count() == 1


def test_directory_and_missing_parent(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        open_store(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "no" / "such" / "dir.db")


def test_cli_like_message_not_traceback(tmp_path):
    """Through a real process: the message is one line, no traceback, when the caller prints errors."""
    p = tmp_path / "garbage.db"
    p.write_bytes(b"not a database at all" * 100)
    code = ("import sys\nfrom cardbench.errors import CardbenchError\nfrom cardbench.store import open_store\n"
            "try:\n    open_store(sys.argv[1])\nexcept CardbenchError as e:\n"
            "    print('cardbench:', e.message, file=sys.stderr); sys.exit(e.exit_code)\n")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 6
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_postgres_without_psycopg(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r"pip install 'cardbench\[postgres\]'"):
        open_store("postgresql://u@127.0.0.1:1/x")


@pytest.mark.slow
def test_postgres_unreachable_redacts_password():
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError) as ei:
        open_store("postgresql://alice:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in ei.value.message and "alice:***@" in ei.value.message
    assert "\n" not in ei.value.message


def test_postgres_foreign_tables(pg_url):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE runs (id INTEGER, what TEXT)")
    with pytest.raises(StoreError, match="already has tables named runs"):
        open_store(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as c:    # left as it was
        assert c.execute("SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
                         ).fetchall() == [("runs",)]


def test_postgres_other_tables_are_fine(pg_url):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE recipes (name TEXT)")
    with open_store(pg_url) as st:
        st.save(make_result())
        assert st.count() == 1
