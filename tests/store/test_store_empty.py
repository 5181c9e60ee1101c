"""Issue 30: `cardbench results` on a store with nothing in it says so, and which command fills
it, in the words `cardbench readers` uses (report.terminal.nothing_yet), instead of an empty
11-column table; real SQLite stores, the default one under $XDG_DATA_HOME and one named by --db."""

from __future__ import annotations

import sqlite3

from cardbench.cli.results_cmd import NO_MATCH, NO_RESULTS
from cardbench.report.readers import NO_READER
from cardbench.report.terminal import nothing_yet
from cardbench.store import open_store
from cardbench_factories import make_result
from realparts import call_cli


def test_an_empty_default_store_says_nothing_yet_and_the_command_that_fills_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("CARDBENCH_DB", raising=False)
    for fmt in ("table", "md"):
        p = call_cli("results", "--format", fmt)
        assert p.returncode == 0, p.stderr
        assert p.stdout == NO_RESULTS + "\n"
        assert "Write (MB/s)" not in p.stdout and "Card" not in p.stdout
    assert p.stdout.startswith("No result stored yet: nothing to show. `cardbench run DIRECTORY`")
    # the store is a real, empty SQLite file, and `readers` answers it in the same words
    db = tmp_path / "data" / "cardbench" / "results.sqlite3"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    r = call_cli("readers")
    assert r.returncode == 0 and r.stdout == NO_READER + "\n"
    shared = nothing_yet("X", "Y.")
    for said in (p.stdout, r.stdout):
        assert said.split(" yet: nothing to show. ")[1].startswith("`cardbench run DIRECTORY`")
    assert shared == "X yet: nothing to show. Y."


def test_a_named_empty_store_too_and_csv_and_json_stay_data(tmp_path):
    db = str(tmp_path / "empty.sqlite3")
    with open_store(db):
        pass
    assert call_cli("results", "--db", db).stdout == NO_RESULTS + "\n"
    csv = call_cli("results", "--db", db, "--format", "csv").stdout.splitlines()
    assert len(csv) == 1 and csv[0].startswith("result_id,")           # the header row: no rows
    assert '"results": []' in call_cli("results", "--db", db, "--json").stdout


def test_filters_that_match_nothing_are_not_an_empty_store(tmp_path):
    db = str(tmp_path / "one.sqlite3")
    with open_store(db) as store:
        store.save(make_result())
    p = call_cli("results", "--db", db, "--card", "nonesuch")
    assert p.returncode == 0 and p.stdout == NO_MATCH + "\n"
    p = call_cli("results", "--db", db)
    assert "Lexar" in p.stdout and "Write (MB/s)" in p.stdout and "nothing to show" not in p.stdout
