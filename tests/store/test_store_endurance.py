"""Issue 31: the record kind cardbench.endurance/1 (kinds/endurance.py), on real SQLite files with
hand-built documents that follow the contract: checked, stored in the shared records table,
listed by `cardbench results` with its answer in words, exported in its own section, imported back,
and served by a station server at /api/v1/records/endurance[/id]."""

from __future__ import annotations

import json
import math
import urllib.parse

import pytest

from cardbench.kinds import ENDURANCE, kind_for_schema, kind_named
from cardbench.kinds.endurance import CLASSES, ENDINGS, SCHEMA, problem, summary
from cardbench.record import record
from cardbench.report.records import render_records
from cardbench.result import Card
from cardbench.store import open_store
from cardbench_factories import cli, make_endurance, make_result
from cardbench_factories import cli_ok as ok


@pytest.fixture(autouse=True)
def own_outbox(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
    for v in ("CARDBENCH_DB", "CARDBENCH_SHARE", "CARDBENCH_TOKEN"):
        monkeypatch.delenv(v, raising=False)


def test_the_kind_is_registered_once_by_its_schema():
    assert kind_named("endurance") is ENDURANCE and kind_for_schema(SCHEMA) is ENDURANCE
    assert ENDURANCE.section == "endurance" and ENDURANCE.listed and ENDURANCE.shared
    assert CLASSES == ("erased", "stale", "misplaced", "foreign", "corrupt", "unreadable")
    assert ENDINGS == ("rounds", "hours", "bad_limit", "read_only", "dead", "counterfeit", "interrupted")


def test_a_document_of_the_contract_passes_and_each_wrong_field_is_named():
    good = make_endurance(rounds=20, first_error=6, growth=6.0)
    assert problem(good) is None
    assert problem(make_endurance()) is None                        # no error at all
    assert problem(dict(make_endurance(), ended=None, complete=False)) is None   # still running
    cases = [
        (lambda d: d.update(rounds={}), "'rounds' must be a list"),
        (lambda d: d.update(rounds=None), "'rounds' must be a list"),
        (lambda d: d["rounds"].append(7), "'rounds[20]' must be an object"),
        (lambda d: d["rounds"][3].update(write_bytes_per_s="fast"), "'rounds[3].write_bytes_per_s' must be a number"),
        (lambda d: d["rounds"][3].update(read_bytes_per_s=-1.0), "'rounds[3].read_bytes_per_s' must not be negative"),
        (lambda d: d["rounds"][3].update(round=0), "'rounds[3].round' must be a whole number from 1"),
        (lambda d: d["rounds"][3].update(round=2.5), "'rounds[3].round' must be a whole number from 1"),
        (lambda d: d["rounds"][3].pop("round"), "'rounds[3].round' must be a whole number from 1"),
        (lambda d: d["rounds"][3].update(bad_fraction=1.5), "'rounds[3].bad_fraction' must be a fraction"),
        (lambda d: d["rounds"][3].pop("bad_sectors"), "'rounds[3].bad_sectors' must be an object of the classes"),
        (lambda d: d["rounds"][9]["bad_sectors"].update(stale="many"), "'rounds[9].bad_sectors.stale' must be a count"),
        (lambda d: d["rounds"][9]["bad_sectors"].update(corrupt=-3), "'rounds[9].bad_sectors.corrupt' must be a count"),
        (lambda d: d["rounds"][9].update(write_seconds=math.inf), "rounds[9].write_seconds"),
        (lambda d: d["rounds"][9].update(bytes_written=2 ** 70), "beyond a 64-bit integer"),
        (lambda d: d.update(milestones={}), "'milestones' must be a list"),
        (lambda d: d["milestones"][1].update(round="x"), "'milestones[1].round' must be a number"),
        (lambda d: d["milestones"].append("first error"), "'milestones[6]' must be an object"),
        (lambda d: d.update(ended="bored"), "'ended' must be one of rounds, hours, bad_limit"),
        (lambda d: d.update(first_error_round="six"), "'first_error_round' must be a number"),
        (lambda d: d.update(bytes_written=-1), "'bytes_written' must not be negative"),
        (lambda d: d.update(rated=3), "'rated' must be an object"),
        (lambda d: d.update(rated={"tbw": "lots"}), "'rated.tbw' must be a number"),
        (lambda d: d.update(complete="yes"), "'complete' must be true or false"),
        (lambda d: d["card"].update(capacity_bytes="big"), "'card.capacity_bytes' must be a number"),
    ]
    for mangle, words in cases:
        bad = json.loads(json.dumps(good))
        mangle(bad)
        found = problem(bad)
        assert found and words in found and "\n" not in found, (words, found)
    # reads got faster: a negative slowdown is a finding, not a mistake
    assert problem(dict(good, read_slowdown=-0.05)) is None


def test_the_summary_is_the_answer_in_words_and_says_how_it_ended():
    fine = make_endurance(brand="SanDisk", capacity=32_000_000, rounds=40, read_fade=0.003)
    assert summary(fine) == ("endurance: SanDisk 0.032 GB: 40 full writes (1.28 GB) with no error; "
                             "reads slowed 11% since round 1")
    worn = make_endurance(rounds=14, first_error=5, growth=8.0, ended="bad_limit")
    line = summary(worn)
    assert line.startswith("endurance: first error after 4 full writes: stale data in 1 sectors; 0.1% bad after")
    assert line.endswith("(ended: bad limit)")
    assert summary(dict(fine, ended=None)).endswith("(running)")
    # no answer written (a run cut short before it made one): one from its figures
    bare = dict(worn, answer=None)
    assert summary(bare) == "endurance: SanDisk 32.0 MB Endurance: 14 rounds, 448.0 MB written, first error in round 5 " \
                            "(ended: bad limit)"


def test_stored_listed_exported_imported_and_filtered_on_a_real_sqlite_file(tmp_path, capsys):
    db = str(tmp_path / "a.db")
    a = make_endurance(brand="SanDisk", rounds=30, serial="0x01", created="2024-07-01T10:00:00+00:00")
    b = make_endurance(brand="Lenovo", rounds=12, first_error=3, growth=10.0, ended="bad_limit", serial="0x02",
                       created="2024-07-02T10:00:00+00:00")
    run = make_result(brand="SanDisk", capacity=32_000_000, label="Endurance", serial="0x01")
    rec = record([run, a, b], db)
    assert rec.stored, rec.error
    with open_store(db) as st:
        assert st.records("endurance") == [a, b]
        assert st.records("endurance", card="lenovo") == [b]
        assert st.records("endurance", since="2024-07-02") == [b]
        assert st.stored_document("endurance", a["id"]) == a
        rows = st.backend.execute("SELECT kind, record_id, summary, schema FROM records ORDER BY id")
        assert [tuple(r) for r in rows] == [("endurance", a["id"], summary(a), SCHEMA),
                                            ("endurance", b["id"], summary(b), SCHEMA)]
    # cardbench results: the runs, then the endurance runs, each its answer in words (80 columns)
    table = ok(capsys, "results", "--db", db)
    words = " ".join(table.split())
    assert "endurance runs (2)" in words and "with no error" in words and "Lenovo" in words
    assert "first error after 2 full writes" in words
    narrow = render_records(ENDURANCE, [a, b], width=80)          # as a terminal of 80 columns shows it
    assert max(len(x) for x in narrow.splitlines()) <= 80 and "first error after 2 full" in " ".join(narrow.split())
    md = ok(capsys, "results", "--db", db, "--format", "md")
    assert "endurance runs (2):" in md and "| Lenovo" in md
    # --json and export: the section, whole; import into a new store gives the same
    exported = json.loads(ok(capsys, "results", "--db", db, "--json"))
    assert exported["endurance"] == [a, b]
    path = tmp_path / "all.json"
    ok(capsys, "export", "--db", db, "-o", path)
    other = tmp_path / "b.db"
    assert "saved 1 result and 2 endurance runs to" in ok(capsys, "import", path, "--db", other)
    assert json.loads(ok(capsys, "results", "--db", other, "--json")) == exported
    # one document alone (as `endure --json` prints it) is imported too
    alone = tmp_path / "one.json"
    alone.write_text(json.dumps(a))
    assert "saved 1 endurance run to" in ok(capsys, "import", alone, "--db", tmp_path / "c.db")


def test_a_mangled_export_is_refused_in_one_line_and_nothing_is_stored(tmp_path, capsys):
    db = tmp_path / "a.db"
    assert record(make_endurance(first_error=4, rounds=9), db).stored
    exported = json.loads(ok(capsys, "export", "--db", db))
    for mangle, words in ((lambda d: d["endurance"][0]["rounds"][2]["bad_sectors"].update(stale="x"),
                           "'rounds[2].bad_sectors.stale' must be a count"),
                          (lambda d: d["endurance"][0].update(ended="tired"), "'ended' must be one of"),
                          (lambda d: d["endurance"][0]["rounds"][0].update(read_bytes_per_s=float("nan")),
                           "read_bytes_per_s")):
        bad = json.loads(json.dumps(exported))
        mangle(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        code, out, err = cli(capsys, "import", p, "--db", tmp_path / "b.db")
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    with open_store(tmp_path / "b.db") as st:
        assert st.records("endurance") == []


def test_served_by_a_station_server(tmp_path):
    from cardbench.share import share_items
    from test_store_kinds import InProcessServer

    a, b = make_endurance(serial="0x01"), make_endurance(brand="Lenovo", serial="0x02", first_error=2, rounds=6)
    with InProcessServer(str(tmp_path / "station.db")) as srv:
        assert share_items([a, b], srv.url, srv.token).sent == 2
        assert srv.get("/api/v1/records/endurance")["records"] == [a, b]
        assert srv.get(f"/api/v1/records/endurance/{b['id']}") == b
        assert srv.get("/api/v1/export?card=lenovo")["endurance"] == [b]
        # the card's page: its endurance runs, the answer in words and the chart
        page = srv.text("/card/" + urllib.parse.quote(Card.from_dict(b["card"]).identity(), safe=""))
        assert "<h2>Endurance runs</h2>" in page and b["answer"] in page and a["answer"] not in page
        assert page.count('class="chart endurance-chart"') == 1 and 'class="milestone"' in page
