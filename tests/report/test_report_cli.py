"""`cardbench results`, `compare` and `report` on a real SQLite file."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from cardbench.cli.results_cmd import compare, report, results
from cardbench.errors import UsageError
from cardbench.store import open_store
from cardbench_factories import make_result
from realparts import call_cli


def _ok(r):
    assert r.exit_code == 0, (r.output, r.exception)
    return r.output


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.db"
    with open_store(path) as s:
        s.save(make_result(brand="Lexar", label="4X", write_times=(41.2, 41.5, 41.6), reader="Reader One",
                           started_at="2024-05-01T10:00:00+00:00", curves=True))
        s.save(make_result(brand="Lexar", label="4X", write_times=(41.0, 41.3, 41.4), reader="Reader One",
                           started_at="2024-05-02T10:00:00+00:00"))
        s.save(make_result(brand="SanDisk", capacity=64_000_000, label=None, write_times=(47.6, 47.8, 47.6),
                           read_rate=1.9e6, reader="Reader Two", started_at="2024-06-01T10:00:00+00:00"))
        s.save(make_result(brand="PNY", capacity=128_000_000, label=None, write_times=(30.5,), read_rate=None,
                           complete=False, reader="Reader Two", started_at="2024-06-02T10:00:00+00:00"))
        s.save_verify({"schema": "cardbench.verify/1", "card": {"brand": "NoName", "capacity_bytes": 64 * 10**9},
                       "verdict": "fake", "usable_bytes": 7_800_000_000})
    return str(path)


def test_results_formats_and_filters(db):
    runner = CliRunner()
    table = _ok(runner.invoke(results, ["--db", db]))
    assert "Write (MB/s)" in table and "Lexar" in table and "INCOMPLETE" in table
    rows = list(csv.DictReader(io.StringIO(_ok(runner.invoke(results, ["--db", db, "--format", "csv"])))))
    assert [r["card_brand"] for r in rows] == ["Lexar", "Lexar", "SanDisk", "PNY"]
    rows = list(csv.DictReader(io.StringIO(_ok(runner.invoke(
        results, ["--db", db, "--format", "csv", "--sort", "-write", "--mib"])))))
    assert [r["card_brand"] for r in rows] == ["PNY", "Lexar", "Lexar", "SanDisk"]
    assert "write_MiB_per_s" in rows[0]
    md = _ok(runner.invoke(results, ["--db", db, "--format", "md", "--reader", "two", "--complete"]))
    assert "SanDisk" in md and "PNY" not in md and "Lexar" not in md
    doc = json.loads(_ok(runner.invoke(results, ["--db", db, "--format", "json", "--test", "raw_read"])))
    assert len(doc["results"]) == 1
    assert _ok(runner.invoke(results, ["--db", db, "--format", "csv", "--until", "2024-05-01T12:00"])).count("\n") == 2
    with open_store(db) as s:
        rid = s.results(card="sandisk")[0].id
    detail = _ok(runner.invoke(results, ["--db", db, "--id", rid[:8]]))
    assert "95% CI of mean" in detail and "47.6000" in detail
    bad = runner.invoke(results, ["--db", db, "--since", "yesterday-ish"])
    assert isinstance(bad.exception, UsageError) and "--since" in bad.exception.message
    bad = runner.invoke(results, ["--db", db, "--sort", "colour"])
    assert isinstance(bad.exception, UsageError)


def test_compare_cards_readers_runs(db):
    runner = CliRunner()
    out = _ok(runner.invoke(compare, ["lexar", "sandisk", "--db", db]))
    assert "card 'lexar' (2 runs, 1 card)" in out and "seq_write" in out and "Beyond spread" in out
    rows = list(csv.DictReader(io.StringIO(_ok(runner.invoke(compare, ["lexar", "sandisk", "--db", db,
                                                                         "--format", "csv"])))))
    sw = next(r for r in rows if r["test"] == "seq_write")
    assert sw["beyond_spread"] == "yes" and float(sw["diff_pct"]) < -10
    out = _ok(runner.invoke(compare, ["Reader One", "Reader Two", "--db", db, "--by", "reader", "--format", "md"]))
    assert "| seq_write |" in out
    with open_store(db) as s:
        a, b = [r.id for r in s.results(card="lexar")]
    out = json.loads(_ok(runner.invoke(compare, [a[:10], b, "--db", db, "--format", "json"])))
    assert out["a"].startswith("run ") and out["tests"][0]["test"] == "seq_write"
    bad = runner.invoke(compare, ["kingston", "lexar", "--db", db])
    assert isinstance(bad.exception, UsageError) and "neither a run id nor a card or reader" in bad.exception.message
    bad = runner.invoke(compare, ["lexar", "sandisk", "--db", db, "--by", "run"])
    assert isinstance(bad.exception, UsageError)


def test_report_html_and_md(db, tmp_path):
    runner = CliRunner()
    out = tmp_path / "report.html"
    r = runner.invoke(report, ["--db", db, "--html", str(out)])
    _ok(r)
    html = out.read_text()
    assert html.count("<svg") >= 3 and 'id="drawer-table"' in html and "Fake-capacity checks" in html
    md = _ok(runner.invoke(report, ["--db", db, "--card", "lexar"]))
    assert md.startswith("| Card |") and md.count("| Lexar") == 2


@pytest.mark.parametrize("argv", [["results"], ["compare", "lexar", "sandisk"], ["report"], ["export"], ["readers"]])
def test_reading_a_missing_db_is_refused(tmp_path, monkeypatch, argv):
    # a mistyped --db must not become a new empty database that then lists nothing
    missing = tmp_path / "reslts.sqlite3"
    p = call_cli(*argv, "--db", str(missing))
    assert p.returncode == 6, (p.stdout, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"no results database at {missing}" in lines[0], p.stderr
    assert not missing.exists()
    monkeypatch.setenv("CARDBENCH_DB", str(missing))
    p = call_cli(*argv)
    assert p.returncode == 6 and "no results database" in p.stderr
    assert not missing.exists()


def test_reading_an_existing_db_through_the_environment(db, monkeypatch):
    monkeypatch.setenv("CARDBENCH_DB", db)
    p = call_cli("readers", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert {r["name"] for r in json.loads(p.stdout)} >= {"Reader One", "Reader Two"}
