"""Issue 25: every kind of stored record (runs, imported and own verify documents, reader probes,
drawer sessions) comes out whole (`results --json`, `export`, `report --json`) and goes back in
identically (`import`), between SQLite and PostgreSQL both ways; bad exports are refused whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cardbench import kinds
from cardbench.evidence import probe_document, session_document
from cardbench.result import Card, Reader
from cardbench.store import open_store
from cardbench.store.core import Store
from cardbench.store.schema import MIGRATIONS
from cardbench.verdicts.readers import judge_shared
from cardbench.verify.doc import new_doc
from cardbench_factories import cli, key_paths, make_result, mangled
from cardbench_factories import cli_ok as _ok

PEERS = Path(__file__).resolve().parents[1] / "importers" / "data" / "peers"
MB = 1_000_000


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path_factory, monkeypatch):
    """These tests' outbox and preserve journals are their own (not the shared user data dir)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
    monkeypatch.delenv("CARDBENCH_DB", raising=False)






READER = Reader(name="Quad slot", vendor_id="05e3", product_id="0747", serial="000000001")
CARDS = [Card(brand="Lexar", capacity_bytes=48 * MB, label="4X", serial="0x1a2b3c"),
         Card(brand="SanDisk", capacity_bytes=64 * MB, serial="0x99aa")]


def _measured(together: float) -> dict:
    rows = [{"device": "/dev/sdb", "sample_bytes": 4 << 20, "alone_bytes_per_s": 20 * MB,
             "together_bytes_per_s": together / 2},
            {"device": "/dev/sdc", "sample_bytes": 4 << 20, "alone_bytes_per_s": 19 * MB,
             "together_bytes_per_s": together / 2}]
    return {"devices": rows, "alone_sum_bytes_per_s": 39 * MB, "alone_max_bytes_per_s": 20 * MB,
            "together_bytes_per_s": together, "together_seconds": 2.1,
            "method": {"engine": "sync", "io": "O_DIRECT", "block_size": 1 << 20, "positions": 4,
                       "read_only": True, "seconds_alone": 2.0}}


def _fill(capsys, db) -> None:
    """A store with runs, imported f3probe/H2testw verdicts, an own verify document, a probe and
    a drawer session (the probe and the session saved as the drawer saves them: record())."""
    from cardbench.record import record
    runs = [make_result(brand=c.brand, capacity=c.capacity_bytes, label=c.label, serial=c.serial,
                        reader=READER.name, started_at=f"2024-05-0{i + 1}T10:00:00+00:00")
            for i, c in enumerate(CARDS)]
    for r in runs:
        r.reader = READER
    runs.append(make_result(brand="Bolt", reader="other", started_at="2024-04-01T10:00:00+00:00"))
    own = new_doc("quick")
    own.update(verdict="genuine", complete=True, card=CARDS[0].to_dict(), reader=READER.to_dict(),
               announced_bytes=48 * MB, usable_bytes=48 * MB, finished_at="2024-05-01T10:05:00+00:00")
    assert record([*runs, own], db).stored
    for name in ("f3probe_8.0_limbo.txt", "h2testw_1.4_fake.txt", "h2testw_1.4_ok.txt"):
        _ok(capsys, "import", PEERS / name, "--db", db)
    finding = judge_shared(_measured(20.5 * MB))
    probe = probe_document(finding, reader=READER, cards={"/dev/sdb": CARDS[0], "/dev/sdc": CARDS[1]},
                           session_id="s1", created_at="2024-05-02T11:00:00+00:00")
    outcomes = [SimpleNamespace(device=d, result=r, verify=v, mode="device", complete=True, error=None)
                for d, r, v in (("/dev/sdb", runs[0], own), ("/dev/sdc", runs[1], None))]
    session = session_document(outcomes, [probe], [], started_at="2024-05-02T10:00:00+00:00", session_id="s1")
    assert record([probe, session], db).stored


def _counts(db) -> dict:
    with open_store(db) as s:
        return {k: s.backend.execute(f"SELECT COUNT(*) FROM {k}")[0][0]
                for k in ("runs", "tests", "samples", "verify_results", "probes", "sessions", "record_cards", "cards")}


def test_everything_round_trips_sqlite_postgres_and_back(tmp_path, capsys, pg_url):
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    _fill(capsys, a)
    before = _ok(capsys, "results", "--db", a, "--json")
    doc = json.loads(before)
    assert doc["schema"] == "cardbench.export/2"
    assert [len(doc[k]) for k in ("results", "verify", "probes", "sessions")] == [3, 4, 1, 1]
    assert sorted(d["verdict"] for d in doc["verify"]) == ["counterfeit", "counterfeit", "genuine", "genuine"]
    assert json.loads(_ok(capsys, "report", "--db", a, "--json")) == doc
    out = tmp_path / "all.json"
    _ok(capsys, "export", "--db", a, "-o", out)
    assert json.loads(out.read_text()) == doc
    # into an empty SQLite store, twice: same ids, nothing doubled
    assert "saved 3 results, 4 verify documents, 1 probe and 1 session" in _ok(capsys, "import", out, "--db", b)
    first = _counts(b)
    _ok(capsys, "import", out, "--db", b)
    assert _counts(b) == first == _counts(a)
    assert _ok(capsys, "results", "--db", b, "--json") == before
    # into PostgreSQL, and from there back into SQLite
    _ok(capsys, "import", out, "--db", pg_url)
    assert _ok(capsys, "results", "--db", pg_url, "--json") == before
    back = tmp_path / "back.json"
    _ok(capsys, "export", "--db", pg_url, "-o", back)
    _ok(capsys, "import", back, "--db", c)
    assert _ok(capsys, "results", "--db", c, "--json") == before
    # the tables as shown are the same too
    assert _ok(capsys, "results", "--db", c) == _ok(capsys, "results", "--db", a)


def test_filters_apply_to_every_kind(tmp_path, capsys):
    db = tmp_path / "a.db"
    _fill(capsys, db)
    doc = json.loads(_ok(capsys, "export", "--db", db, "--card", "sandisk"))
    assert [r["card"]["brand"] for r in doc["results"]] == ["SanDisk"]
    assert doc["verify"] == [] and len(doc["probes"]) == 1 and len(doc["sessions"]) == 1
    doc = json.loads(_ok(capsys, "export", "--db", db, "--reader", "quad slot"))
    assert len(doc["results"]) == 2 and len(doc["probes"]) == 1 and len(doc["sessions"]) == 1
    assert [v["verdict"] for v in doc["verify"]] == ["genuine"]
    doc = json.loads(_ok(capsys, "results", "--db", db, "--json", "--since", "2024-05-02T10:30"))
    assert doc["results"] == [] and len(doc["probes"]) == 1 and doc["sessions"] == []
    empty = json.loads(_ok(capsys, "results", "--db", db, "--json", "--card", "nonesuch"))
    # every kind the registry holds has its section, empty (run results, verify, probes, sessions,
    # pull tests, geometry, and any kind declared later)
    assert empty == {"schema": "cardbench.export/2", "cards": [], **{k.section: [] for k in kinds.kinds()}}
    assert {"results", "verify", "probes", "sessions", "pulltest", "geometry"} <= set(empty)


def test_bad_exports_are_refused_whole(tmp_path, capsys):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _fill(capsys, a)
    good = json.loads(_ok(capsys, "export", "--db", a))
    _ok(capsys, "import", PEERS / "h2testw_1.4_ok.txt", "--db", b)
    start = _counts(b)

    def refused(doc_or_text, *words):
        p = tmp_path / "bad.json"
        p.write_text(doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text))
        code, out, err = cli(capsys, "import", p, "--db", b)
        assert code == 2, (out, err)
        assert len(err.strip().splitlines()) == 1 and all(w in err for w in words), err
        assert _counts(b) == start          # nothing half-imported

    refused(dict(good, schema="cardbench.export/3"), "newer cardbench", "cardbench.export/3")
    text = json.dumps(good, indent=2)
    refused(text[: len(text) * 2 // 3], "bad.json", "cannot be parsed (cut short?)")
    missing = json.loads(json.dumps(good))
    own = next(v for v in missing["verify"] if v["verdict"] == "genuine" and v.get("mode") == "quick")
    missing["cards"] = [c for c in missing["cards"] if c["identity"] != own["card"]["identity"]]
    missing["results"] = [r for r in missing["results"] if r["card"]["identity"] != own["card"]["identity"]]
    refused(missing, "verify document", own["id"], "names card")
    clash = json.loads(json.dumps(good))
    h2 = next(v for v in clash["verify"] if v["verdict"] == "genuine" and v.get("mode") != "quick")
    h2["usable_bytes"] = 1
    clash["results"], clash["probes"], clash["sessions"] = [], [], []
    refused(clash, h2["id"], "different content")
    twice = json.loads(json.dumps(good))
    twice["probes"].append(dict(twice["probes"][0], created_at="2020-01-01T00:00:00+00:00"))
    refused(twice, "two probes with id", "different content")


def test_the_old_export_is_still_read(tmp_path, capsys):
    p = tmp_path / "v1.json"
    p.write_text(json.dumps({"schema": "cardbench.results/1", "results": [make_result().to_dict()]}))
    assert "saved 1 result" in _ok(capsys, "import", p, "--db", tmp_path / "x.db")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_old_database_is_migrated_and_keeps_its_records(tmp_path, request, kind):
    db = tmp_path / "old.db" if kind == "sqlite" else request.getfixturevalue("pg_url")
    with Store(db, _migrations=MIGRATIONS[:2]) as st:
        st.save(make_result())
        assert st.schema_version == 2
    with open_store(db) as st:
        assert st.schema_version == len(MIGRATIONS) >= 3
        assert st.count() == 1
        pid = st.save_probe(probe_document(judge_shared(_measured(20 * MB)), reader=READER))
        assert [p["id"] for p in st.probes(reader="quad")] == [pid]


def test_readers_shows_stored_probe_and_session_from_a_fresh_process(tmp_path, capsys):
    db = tmp_path / "a.db"
    _fill(capsys, db)
    src = str(Path(__file__).resolve().parents[2] / "src")      # this worktree's cardbench, a fresh process
    p = subprocess.run([sys.executable, "-m", "cardbench", "readers", "--db", str(db)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": src, "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "cards read at once" in text and "stored probe of 2024-05-02 11:00" in text
    assert "Drawer session 2024-05-02 10:00: 2 cards (Lexar 4X, SanDisk), 1 probe" in text
    rows = json.loads(_ok(capsys, "readers", "--db", db, "--json"))
    quad = next(r for r in rows if r["name"] == "Quad slot")
    assert quad["kind"] == "probe" and quad["confidence"] == "likely"
    assert quad["ceiling_bytes_per_s"] == pytest.approx(20.5 * MB)


def test_a_drawer_session_stores_its_probe_and_itself(tmp_path, capsys):
    """The drawer's own save path: results per card (save_card), the probe when two cards behind
    one reader were read at once (add_probe), the session at its end (save_session); a fresh
    `readers` shows them, and the session's verdict is in the stored session."""
    from cardbench.drawer import CardOutcome, DrawerOptions, DrawerSession, save_card
    db = str(tmp_path / "drawer.db")
    session = DrawerSession(DrawerOptions(db=db))
    for i, (dev, card) in enumerate(zip(("/dev/sdb", "/dev/sdc"), CARDS, strict=True)):
        r = make_result(brand=card.brand, capacity=card.capacity_bytes, label=card.label, serial=card.serial,
                        started_at=f"2024-06-01T10:0{i}:00+00:00")
        r.reader = READER
        outcome = CardOutcome(device=dev, result=r)
        assert save_card(outcome, db).stored
        session.outcomes.append(outcome)
    session.add_probe(judge_shared(_measured(20.5 * MB)), READER, {o.device: o.result.card for o in session.outcomes})
    doc = session.save_session()
    assert not session.not_stored and not session.evidence_not_stored
    verdict = {v["name"]: v for v in doc["reader_verdict"]}
    assert verdict["Quad slot"]["kind"] == "probe" and verdict["Quad slot"]["confidence"] == "likely"
    with open_store(db) as st:
        assert st.sessions() == [doc]
        [probe] = st.probes(card="lexar")
    assert probe["session_id"] == doc["id"] == session.session_id and doc["probes"] == [probe["id"]]
    assert [c["result_id"] for c in doc["cards"]] == [o.result.id for o in session.outcomes]
    # judged again later, with the stored probe counted once
    again = DrawerSession(DrawerOptions(db=db))
    again.outcomes = session.outcomes
    assert len([p for v in again.reader_verdict() for p in v["direct"] if p["kind"] == "probe"]) == 1
    text = " ".join(_ok(capsys, "readers", "--db", db).split())
    assert "Lexar 4X (/dev/sdb) 20 MB/s" in text
    assert "its verdict then: Quad slot: caps reads at 20.5 MB/s (likely, cards read at once" in text


def test_a_document_of_the_wrong_shape_is_named(tmp_path, capsys):
    db = tmp_path / "a.db"
    _fill(capsys, db)
    good = json.loads(_ok(capsys, "export", "--db", db))
    empty = tmp_path / "b.db"
    for mangle, words in (
            (lambda d: d["probes"][0]["measured"]["devices"][0]["card"].update(capacity_bytes="big"),
             ("probe", "capacity_bytes' must be a number")),
            (lambda d: d["sessions"][0].update(cards="all"), ("session", "'cards' must be a list")),
            (lambda d: d["verify"][0].update(created_at=5), ("verify document", "'created_at' must be text")),
            (lambda d: d.update(probes={}), ("'probes' must be a list",))):
        doc = json.loads(json.dumps(good))
        mangle(doc)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(doc))
        code, out, err = cli(capsys, "import", p, "--db", empty)
        assert code == 2 and len(err.strip().splitlines()) == 1 and all(w in err for w in words), err
        assert not empty.exists() or _counts(empty)["runs"] == 0


def test_a_probe_the_store_cannot_take_waits_in_the_outbox(tmp_path, monkeypatch):
    """The one save path: a probe (like a result) that the store cannot take (locked past the
    timeout) is kept in the outbox and stored once by sync."""
    from cardbench.record import record, sync
    from test_store_outbox import locked
    db = tmp_path / "r.db"
    with open_store(db):
        pass
    doc = probe_document(judge_shared(_measured(20 * MB)), reader=READER)
    holder = locked(db, monkeypatch)
    try:
        rec = record(doc, db)
    finally:
        holder.rollback()
        holder.close()
    assert not rec.stored and rec.kept and "not stored" in rec.problem().message
    assert "1 reader probe" in " ".join(sync(db).lines())
    sync(db)
    with open_store(db) as st:
        assert [p["id"] for p in st.probes()] == [doc["id"]]


def test_one_verify_document_as_verify_json_printed_it_is_imported(tmp_path, capsys):
    own = new_doc("quick")
    own.update(verdict="counterfeit", complete=True, card=CARDS[1].to_dict(), usable_bytes=8 * MB)
    p = tmp_path / "v.json"
    p.write_text(json.dumps(own))
    db = tmp_path / "v.db"
    assert "saved 1 verify document to" in _ok(capsys, "import", p, "--db", db)
    _ok(capsys, "import", p, "--db", db)
    assert json.loads(_ok(capsys, "results", "--db", db, "--json"))["verify"] == [own]


def test_mangled_exports_are_imported_whole_or_refused_in_one_line(tmp_path_factory, capsys):
    """Generated damage to a real export (a value replaced by another type, a key dropped, the
    text cut): exit 0 or 2 with one line, never an internal error, never half a file stored."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    base = tmp_path_factory.mktemp("mangle")
    _fill(capsys, base / "a.db")
    good = json.loads(_ok(capsys, "export", "--db", base / "a.db"))
    paths = key_paths(good)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(paths[1:]), st.sampled_from([None, 7, -1.5, "x", [], {}, True, "drop"]),
           st.integers(0, 100))
    def case(path, value, cut):
        text = json.dumps(mangled(good, path, value))
        if cut < 10:
            text = text[: len(text) * (cut + 1) // 11]
        d = base / "case"
        d.mkdir(exist_ok=True)
        (d / "x.json").write_text(text)
        db = d / "x.db"
        if db.exists():
            db.unlink()
        code, out, err = cli(capsys, "import", d / "x.json", "--db", db)
        assert code in (0, 2), (path, value, cut, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and err.startswith("cardbench:"), err
            assert not db.exists() or _counts(db)["runs"] == _counts(db)["verify_results"] == 0
    case()
