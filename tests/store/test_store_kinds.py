"""Issue 30, item 5: a record kind is declared in one place. A throwaway kind, declared in this
file alone, is stored (SQLite and PostgreSQL), kept in the outbox and synced, listed by
`cardbench results`, exported, imported, refused when mangled, shared with a real station server
(uvicorn in this process, over HTTP) and served by it, with no other change to cardbench."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from cardbench import kinds
from cardbench.errors import UsageError
from cardbench.kinds import Kind, register, unregister
from cardbench.kinds.shapes import common_problem, fields_problem, one_card
from cardbench.record import record, sync
from cardbench.result import Card, Reader
from cardbench.share import share_items, share_store, sync_share
from cardbench.store import open_store
from cardbench.store.export import read_export
from cardbench_factories import cli, key_paths, make_endurance, make_result, mangled
from cardbench_factories import cli_ok as ok

SCHEMA = "cardbench.scratch/1"
CARD = Card(brand="Lexar", capacity_bytes=48_000_000, label="4X", serial="0x1a2b3c")
OTHER = Card(brand="SanDisk", capacity_bytes=64_000_000, serial="0x99aa")
READER = Reader(name="Quad slot", vendor_id="05e3", product_id="0747", serial="000000001")


def _problem(doc: dict) -> str | None:
    return common_problem(doc) or fields_problem(doc, (("answer", "text"), ("cycles", "number")))


def _summary(doc: dict) -> str:
    return f"scratch: {doc.get('answer')} after {doc.get('cycles')} cycles"


@pytest.fixture(autouse=True)
def scratch(tmp_path_factory, monkeypatch):
    """The throwaway kind (this file's only declaration of it), and an outbox of these tests' own."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
    for v in ("CARDBENCH_DB", "CARDBENCH_SHARE", "CARDBENCH_TOKEN"):
        monkeypatch.delenv(v, raising=False)
    kind = register(Kind(name="scratch", schema=SCHEMA, section="scratch", noun="scratch run", title="scratch run",
                         problem=_problem, cards=one_card, summary=_summary))
    yield kind
    unregister("scratch")


def doc(card: Card = CARD, answer: str = "held", cycles: int = 3, created: str = "2024-06-01T10:00:00+00:00") -> dict:
    return {"schema": SCHEMA, "id": uuid.uuid4().hex, "created_at": created, "card": card.to_dict(),
            "reader": READER.to_dict(), "answer": answer, "cycles": cycles}






@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_kind_declared_here_is_stored_listed_exported_and_imported(tmp_path, capsys, request, backend):
    db = str(tmp_path / "a.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    run = make_result(brand="Lexar", capacity=48_000_000, label="4X", serial="0x1a2b3c",
                      started_at="2024-05-01T10:00:00+00:00")
    first, second = doc(), doc(OTHER, answer="failed", cycles=1200, created="2024-06-02T10:00:00+00:00")
    rec = record([run, first, second], db)                      # the one save path
    assert rec.stored, rec.error
    with open_store(db) as st:
        assert st.records("scratch") == [first, second]
        assert st.records("scratch", card="sandisk") == [second]
        assert st.records("scratch", reader="quad slot", since="2024-06-02") == [second]
        assert st.stored_document("scratch", first["id"]) == first
        rows = st.backend.execute("SELECT kind, record_id, created_at, summary, schema FROM records ORDER BY id")
        assert [tuple(r) for r in rows] == [
            ("scratch", first["id"], first["created_at"], "scratch: held after 3 cycles", SCHEMA),
            ("scratch", second["id"], second["created_at"], "scratch: failed after 1200 cycles", SCHEMA)]
        links = st.backend.execute("SELECT c.serial FROM record_cards l JOIN cards c ON c.id = l.card_id "
                                   "WHERE l.kind = 'scratch' ORDER BY c.serial")
        assert [r[0] for r in links] == ["0x1a2b3c", "0x99aa"]
    # listed: the table shows each record's answer in words; --json is the export, with its list
    table = " ".join(ok(capsys, "results", "--db", db).split())
    assert "scratch runs (2)" in table and "scratch: failed after 1200 cycles" in table and "SanDisk" in table
    exported = json.loads(ok(capsys, "results", "--db", db, "--json"))
    assert exported["scratch"] == [first, second] and len(exported["results"]) == 1
    assert {c["identity"] for c in exported["cards"]} == {CARD.identity(), OTHER.identity()}
    assert json.loads(ok(capsys, "results", "--db", db, "--json", "--card", "lexar"))["scratch"] == [first]
    # exported and imported into a new SQLite store, twice: the same records, the same ids
    path = tmp_path / "all.json"
    ok(capsys, "export", "--db", db, "-o", path)
    b = tmp_path / "b.db"
    assert "saved 1 result and 2 scratch runs to" in ok(capsys, "import", path, "--db", b)
    ok(capsys, "import", path, "--db", b)
    assert json.loads(ok(capsys, "results", "--db", b, "--json")) == exported
    # one document alone is read too, and a newer version of the kind is told apart
    alone = tmp_path / "one.json"
    alone.write_text(json.dumps(first))
    assert "saved 1 scratch run to" in ok(capsys, "import", alone, "--db", tmp_path / "c.db")
    alone.write_text(json.dumps(dict(first, schema="cardbench.scratch/2")))
    code, _, err = cli(capsys, "import", alone, "--db", tmp_path / "c.db")
    assert code == 2 and "newer cardbench" in err and len(err.strip().splitlines()) == 1


def test_a_mangled_document_of_the_kind_is_refused_by_its_own_check(tmp_path, capsys):
    a = tmp_path / "a.db"
    good = doc()
    assert record(good, a).stored
    exported = json.loads(ok(capsys, "export", "--db", a))
    for mangle, words in ((lambda d: d["scratch"][0].update(cycles="many"), "'cycles' must be a number"),
                          (lambda d: d["scratch"][0]["card"].update(capacity_bytes="big"),
                           "'card.capacity_bytes' must be a number"),
                          (lambda d: d["scratch"][0].update(schema="cardbench.verify/1"), "is not a cardbench.scratch/1"),
                          (lambda d: d.update(scratch={}), "'scratch' must be a list"),
                          (lambda d: d.update(cards=[]), "names card")):
        bad = json.loads(json.dumps(exported))
        mangle(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        code, out, err = cli(capsys, "import", p, "--db", tmp_path / "b.db")
        assert code == 2 and words in err and "scratch" in err and len(err.strip().splitlines()) == 1, err
    with open_store(tmp_path / "b.db") as st:
        assert st.records("scratch") == []


def test_a_record_the_store_cannot_take_waits_in_the_outbox_then_syncs_once(tmp_path, monkeypatch):
    from test_store_outbox import locked
    db = str(tmp_path / "r.db")
    with open_store(db):
        pass
    d = doc()
    holder = locked(db, monkeypatch)
    try:
        rec = record(d, db)
    finally:
        holder.rollback()
        holder.close()
    assert not rec.stored and len(rec.kept) == 1 and json.loads(rec.kept[0].read_text())["kind"] == "scratch"
    assert sync(db).lines()[0] == f"stored 1 scratch run from the outbox in {db}"
    assert sync(db).lines()[0].startswith("the outbox holds nothing")
    with open_store(db) as st:
        assert st.records("scratch") == [d]


class InProcessServer:
    """`cardbench serve`'s app (create_app) under uvicorn in a thread of this process, which has
    the throwaway kind registered."""

    def __init__(self, db: str, port: int = 0):
        import uvicorn  # noqa: PLC0415 - optional dependency (cardbench[server])

        from cardbench.server.app import create_app
        from cardbench.server.tokens import add
        self.db = db
        app = create_app(db)
        with open_store(db) as st:
            self.token = add(st, "station-a")
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "InProcessServer":
        self.thread.start()
        end = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < end and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)

    def text(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return resp.read().decode()

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.loads(resp.read())


def test_a_kind_declared_here_is_shared_with_a_station_server_and_served(tmp_path):
    local = str(tmp_path / "local.db")
    d, other = doc(), doc(OTHER, answer="failed", cycles=9)
    assert record([d, other], local).stored
    with InProcessServer(str(tmp_path / "station.db")) as srv:
        # --share: sent as it is recorded
        shared = share_items([d], srv.url, srv.token)
        assert shared.sent == 1 and not shared.kept and not shared.refused
        # `cardbench share`: what the local store holds (d again: stored once)
        assert share_store(local, srv.url, srv.token).sent == 2
        with open_store(srv.db) as st:
            assert st.records("scratch") == [d, other]
            owners = st.backend.execute("SELECT kind, station FROM record_stations ORDER BY record_id")
            # the records, and the card and reader they name (the station that names them: server.tokens)
            assert {tuple(r) for r in owners} == {("scratch", "station-a"), ("card", "station-a"),
                                                  ("reader", "station-a")}
        # served: its own list, one record by id, and the export
        assert srv.get("/api/v1/records/scratch")["records"] == [d, other]
        assert srv.get(f"/api/v1/records/scratch/{d['id']}") == d
        assert srv.get("/api/v1/export?card=sandisk")["scratch"] == [other]
        page = srv.text("/card/" + urllib.parse.quote(CARD.identity(), safe=""))
        assert "Scratch runs" in page and "scratch: held after 3 cycles" in page and "failed" not in page
        with pytest.raises(urllib.error.HTTPError) as e:
            srv.get("/api/v1/records/nonesuch")
        assert e.value.code == 400 and "scratch" in json.loads(e.value.read())["error"]
    # the server gone: kept in the outbox for it, sent by `cardbench sync --share` once it is back
    late = doc(answer="late", cycles=1)
    shared = share_items([late], srv.url, srv.token)
    assert shared.sent == 0 and len(shared.kept) == 1 and "not shared with" in shared.warnings(srv.url)[0]
    with InProcessServer(str(tmp_path / "station.db"), port=srv.port) as again:
        assert again.url == srv.url
        assert sync_share(again.url, again.token) == [f"shared 1 scratch run from the outbox with {again.url}"]
        assert sync_share(again.url, again.token) == [f"the outbox holds nothing for {again.url}"]
        assert again.get(f"/api/v1/records/scratch/{late['id']}") == late


def test_the_registry_refuses_a_second_kind_of_the_same_schema_or_list():
    for clash in ({"schema": SCHEMA}, {"section": "results"}, {"section": "cards"}):
        fields = dict(name="other", schema="cardbench.other/1", section="other", noun="other", title="other",
                      problem=_problem, cards=one_card, summary=_summary)
        fields.update(clash)
        with pytest.raises(ValueError):
            register(Kind(**fields))
    assert "other" not in kinds.kind_names() and kinds.kind_names()[:4] == ("result", "verify", "probe", "session")
    with pytest.raises(UsageError, match="unknown record kind 'nonesuch'"):
        kinds.kind_named("nonesuch")


def samples() -> dict[str, dict]:
    """One good document of every kind."""
    from types import SimpleNamespace

    from cardbench.evidence import probe_document, session_document
    from cardbench.geometry.doc import new_doc as new_geometry
    from cardbench.pulltest.doc import build_doc, pull_result
    from cardbench.pulltest.hostlog import Rec, State
    from cardbench.verdicts.readers import judge_shared
    from cardbench.verify.doc import new_doc

    measured = {"devices": [{"device": "/dev/sdb", "sample_bytes": 4 << 20, "alone_bytes_per_s": 2e7,
                             "together_bytes_per_s": 1e7}],
                "alone_sum_bytes_per_s": 2e7, "alone_max_bytes_per_s": 2e7, "together_bytes_per_s": 1e7,
                "together_seconds": 2.0}
    probe = probe_document(judge_shared(measured), reader=READER, cards={"/dev/sdb": CARD})
    verify = dict(new_doc("quick"), verdict="genuine", card=CARD.to_dict(), announced_bytes=1, usable_bytes=1)
    run = make_result()
    session = session_document([SimpleNamespace(device="/dev/sdb", result=run, verify=None, mode="device",
                                                complete=True, error=None)], [probe], [],
                               started_at="2024-01-01T00:00:00+00:00")
    pulls = State({"e": "start", "uuid": "ab" * 16, "layout": {}, "t": 0.0, "cycles": 1})
    pulls.add_rec(Rec(1, 0, 0, 4096, "old", 0.0, 1.0))
    pulls.add_rec(Rec(2, 1, 0, 4096, "small", 2.0, 3.0))
    pulls.verified[1] = {"result": pull_result(pulls, 1, 4.0, {0: [1]})[0]}     # lost: the old record is there
    pulltest = dict(build_doc(pulls, None), card=CARD.to_dict())
    geometry = dict(new_geometry(), card=CARD.to_dict(), device="/dev/sdb", size_bytes=1 << 30,
                    allocation_unit_bytes=4 << 20, allocation_unit_confidence="high",
                    open_units={"linear": 2, "random": None}, open_units_confidence={"linear": "low", "random": "none"},
                    message="AU 4 MiB", complete=True)
    endurance = make_endurance(rounds=8, first_error=5, growth=20.0, rated_tbw=0.001)
    return {"result": run.to_dict(), "verify": verify, "probe": probe, "session": session, "pulltest": pulltest,
            "geometry": geometry, "endurance": endurance, "scratch": doc()}


def test_the_fuzz_below_has_a_document_of_every_kind():
    assert set(samples()) == set(kinds.kind_names())
    for name, good in samples().items():
        assert [(k.name, rid) for k, rid, _ in read_export(good, path="x.json").records()] == [(name, good["id"])]


@pytest.mark.slow
@pytest.mark.parametrize("name", [*kinds.kind_names(), "scratch"])   # every registered kind, by itself
def test_every_kind_refuses_mangled_documents_in_one_line_never_an_internal_error(name):
    """2,000 generated documents of each kind (this file's among them): a value of another type
    anywhere, a key dropped. read_export reads it or raises UsageError (one line), and what it
    reads, its kind's summary and cards can read."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    good = samples()[name]
    values = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=5),
                       st.just([]), st.just({}), st.just([[1, "x"]]), st.just({"a": "b"}), st.just("drop"))
    paths = key_paths(good)

    @settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.sampled_from(paths[1:]), values)
    def case(path, value):
        d = mangled(good, path, value)
        try:
            contents = read_export(d, path="x.json")
        except UsageError as e:
            assert "\n" not in e.message and e.message.startswith("x.json: ")
            return
        for k, rid, stored in contents.records():
            assert isinstance(rid, str) and k.name == name
            json.dumps(stored)
            k.summary(stored)
            k.cards(stored)
    case()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_store_of_schema_4_keeps_its_probes_links_and_takes_a_new_kind(tmp_path, request, backend):
    """Migration 5 rebuilds record_cards (any kind may link its cards now) and keeps its rows."""
    from cardbench.evidence import probe_document
    from cardbench.store.core import Store
    from cardbench.store.schema import MIGRATIONS
    from cardbench.verdicts.readers import judge_shared

    db = str(tmp_path / "old.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    measured = {"devices": [{"device": "/dev/sdb", "sample_bytes": 4 << 20, "alone_bytes_per_s": 2e7,
                             "together_bytes_per_s": 1e7}],
                "alone_sum_bytes_per_s": 2e7, "alone_max_bytes_per_s": 2e7, "together_bytes_per_s": 1e7,
                "together_seconds": 2.0}
    probe = probe_document(judge_shared(measured), reader=READER, cards={"/dev/sdb": CARD})
    with Store(db, _migrations=MIGRATIONS[:4]) as st:
        st.save_probe(probe)
        with pytest.raises(st.backend.error_types):     # the CHECK of schema 4: only probes and sessions link cards
            st.backend.execute("INSERT INTO record_cards (kind, record_id, position) VALUES ('scratch', 'x', 0)")
    with open_store(db) as st:
        assert st.schema_version == len(MIGRATIONS) >= 5
        assert st.records("probe", card="lexar") == [probe] and st.records("probe", card="sandisk") == []
        d = doc()
        st.save_record(d)
        assert st.records("scratch", card="lexar 4x") == [d]


def test_a_run_of_1e276_seconds_is_refused_in_one_line(tmp_path, capsys):
    """The fuzz above found it: such a run's statistics overflow (was: internal error, OverflowError)."""
    d = make_result().to_dict()
    d["tests"][0]["runs"][0]["seconds"] = 1.3860058559946086e+276
    p = tmp_path / "r.json"
    p.write_text(json.dumps(d))
    code, out, err = cli(capsys, "import", p, "--db", tmp_path / "a.db")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "result #1 cannot be read: a figure too large to compute with" in err and "nothing imported" in err
