"""`cardbench readers`: the command over a real (temporary SQLite) store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cardbench.cli.readers_cmd import readers
from cardbench.store import open_store
from test_verdicts_readers import SURVEY, survey


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "results.db")
    with open_store(path) as store:
        for result in survey():
            store.save(result)
    return path


def test_readers_json(db):
    out = CliRunner().invoke(readers, ["--db", db, "--format", "json"])
    assert out.exit_code == 0, out.output
    (entry,) = json.loads(out.output)
    assert entry["name"] == "USB 2.0 reader" and entry["cards"] == len(SURVEY)
    assert entry["ceiling_bytes_per_s"] == pytest.approx(3.8e6)
    assert entry["confidence"] == "possible" and entry["cards_at_ceiling"] == 5


def test_readers_table(db):
    out = CliRunner().invoke(readers, ["--db", db])
    assert out.exit_code == 0, out.output
    assert "USB 2.0 reader" in out.output and "3.8 MB/s" in out.output and "possible" in out.output
    assert "5 of 9" in out.output


def test_readers_empty_store(tmp_path):
    with open_store(tmp_path / "empty.db"):     # a store with nothing in it (a missing one is refused)
        pass
    out = CliRunner().invoke(readers, ["--db", str(tmp_path / "empty.db")])
    assert out.exit_code == 0 and out.output.startswith("No card measured through a reader yet")
    out = CliRunner().invoke(readers, ["--db", str(tmp_path / "empty.db"), "--format", "json"])
    assert json.loads(out.output) == []


def test_readers_rejects_unknown_format(db):
    out = CliRunner().invoke(readers, ["--db", db, "--format", "xml"])
    assert out.exit_code == 2


def test_readers_table_shows_names_verbatim(tmp_path):
    from cardbench.result import Reader
    path = str(tmp_path / "odd.db")
    with open_store(path) as store:
        for result in survey(reader=Reader(name="[bold] reader")):
            store.save(result)
    out = CliRunner().invoke(readers, ["--db", path])
    assert out.exit_code == 0 and "[bold] reader" in out.output
