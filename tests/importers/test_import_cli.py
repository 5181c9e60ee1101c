"""`cardbench import` / `export` end to end: run -> export -> import into a fresh db -> same figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cardbench.cli.results_cmd import export, import_cmd, results
from cardbench.errors import StoreError, UsageError
from cardbench.store import open_store
from cardbench_factories import make_result
from realparts import call_cli

#: child processes run this checkout's cardbench (src/), not whichever one is installed
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}


def _ok(result):
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_real_run_export_import_round_trip(tmp_path):
    target = tmp_path / "card"
    target.mkdir()
    db1, db2 = tmp_path / "one.db", tmp_path / "two.db"
    # two runs of one card (the directory's device names the card, so one label: a card's row
    # holds the label its latest result gave it, and two runs in one second have no order)
    for runs in ("2", "3"):
        r = call_cli("run", str(target), "--size", "1MB", "--runs", runs,
                     "--brand", "Test", "--label", "4X", "--db", str(db1), "--format", "json")
        assert r.returncode == 0, r.stderr[-2000:]
    runner = CliRunner()
    out = tmp_path / "export.json"
    _ok(runner.invoke(export, ["--db", str(db1), "-o", str(out)]))
    doc = json.loads(out.read_text())
    assert doc["schema"] == "cardbench.export/2" and len(doc["results"]) == 2
    text = _ok(runner.invoke(import_cmd, [str(out), "--db", str(db2)]))
    assert "2 results read as cardbench" in text and "saved 2 results" in text
    with open_store(db1) as a, open_store(db2) as b:
        ra, rb = a.results(), b.results()
        assert ra == rb                                     # identical documents, ids and sources
        assert [r.source for r in rb] == ["run", "run"]
    for fmt in ("csv", "json", "md"):
        one = _ok(runner.invoke(results, ["--db", str(db1), "--format", fmt]))
        two = _ok(runner.invoke(results, ["--db", str(db2), "--format", fmt]))
        assert one == two


def test_export_filters_and_stdout(tmp_path):
    db = tmp_path / "r.db"
    with open_store(db) as s:
        s.save(make_result(brand="Lexar", started_at="2024-05-01T10:00:00+00:00"))
        s.save(make_result(brand="SanDisk", started_at="2024-06-01T10:00:00+00:00", complete=False))
    runner = CliRunner()
    doc = json.loads(_ok(runner.invoke(export, ["--db", str(db), "--card", "sandisk"])))
    assert [r["card"]["brand"] for r in doc["results"]] == ["SanDisk"]
    doc = json.loads(_ok(runner.invoke(export, ["--db", str(db), "--since", "2024-05-15"])))
    assert len(doc["results"]) == 1
    doc = json.loads(_ok(runner.invoke(export, ["--db", str(db), "--complete"])))
    assert [r["card"]["brand"] for r in doc["results"]] == ["Lexar"]
    bad = runner.invoke(export, ["--db", str(db), "-o", str(tmp_path / "no" / "dir" / "x.json")])
    assert isinstance(bad.exception, UsageError) and "does not exist" in bad.exception.message


def test_import_dry_run_prints_flags_and_saves_nothing(tmp_path, data_dir):
    db = tmp_path / "never.db"
    text = _ok(CliRunner().invoke(import_cmd, [str(data_dir / "drawer_classic.txt"), "--db", str(db), "--dry-run"]))
    assert "2 figures disagree" in text
    assert "line 7 (PNY 128M): write MB/s printed 1.737" in text
    assert "line 11 (Crucial 256M): read X printed 52.3" in text
    assert "dry run: nothing saved" in text
    assert not db.exists()


def test_import_saves_and_file_size_option(tmp_path, data_dir):
    db = tmp_path / "r.db"
    runner = CliRunner()
    text = _ok(runner.invoke(import_cmd, [str(data_dir / "drawer_classic.txt"), "--db", str(db),
                                          "--file-size", "42000000", "--reader", "Old USB 2.0 reader"]))
    assert "42,000,000 B (option)" in text and "saved 9 results" in text
    with open_store(db) as s:
        rs = s.results(reader="old usb")
        assert len(rs) == 9 and all(r.source == "import" for r in rs)
    bad = runner.invoke(import_cmd, [str(data_dir / "drawer_classic.txt"), "--db", str(db), "--file-size", "big"])
    assert isinstance(bad.exception, UsageError) and "bad file size" in bad.exception.message


def test_import_fio_flag(tmp_path, data_dir):
    db = tmp_path / "r.db"
    runner = CliRunner()
    text = _ok(runner.invoke(import_cmd, [str(data_dir / "fio_card.json"), "--fio", "--db", str(db),
                                          "--card", "Extreme", "--label", "133x"]))
    assert "1 result read as fio" in text
    with open_store(db) as s:
        (r,) = s.results(test="rand_read_4k_q32t1")
        assert r.source == "import-fio" and r.card.label == "133x"
    bad = runner.invoke(import_cmd, [str(data_dir / "drawer_classic.txt"), "--fio", "--db", str(db)])
    assert isinstance(bad.exception, UsageError)
    bad = runner.invoke(import_cmd, [str(data_dir / "fio_card.json"), "--fio", "--format", "csv"])
    assert isinstance(bad.exception, UsageError) and "contradict" in bad.exception.message


def test_import_into_foreign_db_is_refused(tmp_path, data_dir):
    db = tmp_path / "notes.db"
    db.write_text("shopping list\n")
    bad = CliRunner().invoke(import_cmd, [str(data_dir / "drawer_classic.txt"), "--db", str(db)])
    assert isinstance(bad.exception, StoreError)
    assert db.read_text() == "shopping list\n"


def test_main_prints_one_line_and_exit_code(tmp_path):
    """Through the real console entry point: errors are one line on stderr with the class's exit code."""
    db = tmp_path / "garbage.db"
    db.write_bytes(b"\x01\x02 not sqlite" * 64)
    r = subprocess.run([sys.executable, "-m", "cardbench", "results", "--db", str(db)], capture_output=True,
                       text=True, timeout=60, env=ENV)
    assert r.returncode == StoreError.exit_code
    assert r.stderr.startswith("cardbench: ") and r.stderr.count("\n") == 1
    r = subprocess.run([sys.executable, "-m", "cardbench", "import", str(tmp_path / "nope.txt"), "--db",
                        str(tmp_path / "x.db")], capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == UsageError.exit_code and r.stderr.count("\n") == 1
