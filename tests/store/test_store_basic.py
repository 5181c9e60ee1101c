"""Store behaviour on both backends: round trip, filters, replace, verify docs, migrations."""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest

from cardbench.errors import StoreError, UsageError
from cardbench.result import Card, Reader, Result, Run, TestResult
from cardbench.store import SCHEMA_VERSION, Store, open_store
from cardbench.store.schema import MIGRATIONS, Migration
from cardbench_factories import make_result


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "results.sqlite3")
    return request.getfixturevalue("pg_url")


def _rich_result() -> Result:
    r = make_result(curves=True, serial="0xDEADBEEF", warnings=["run 2 slower than the others"],
                    limited_by="reader USB 2.0 ceiling 40 MB/s")
    r.tests[0].warmup = [Run(42_000_000, 40.9, ops=40, latency_s={"p50": 0.001, "max": 0.5}, extra={"note": "w"})]
    r.claims = [{"label": "4X", "test": "seq_write", "verdict": "met", "claimed_bytes_per_s": 600000},
                {"label": "Class 10", "verdict": "not met", "details": {"short_by": 0.2}}]
    r.warnings = ["clock jump", "ünïcode ✓"]
    return r


@pytest.mark.slow
def test_round_trip_exact(url):
    r = _rich_result()
    with open_store(url) as st:
        assert st.save(r) == r.id
        back = st.get(r.id)
        assert back == r
        assert back.to_dict() == r.to_dict()
        assert st.check() == []
        assert st.schema_version == SCHEMA_VERSION


def test_incomplete_result_is_stored_and_marked(url):
    partial = make_result(complete=False, started_at="2024-05-02T10:00:00+00:00")
    partial.tests[1].complete = False
    done = make_result()
    with open_store(url) as st:
        st.save(partial)
        st.save(done)
        assert [r.id for r in st.results(complete=False)] == [partial.id]
        assert [r.id for r in st.results(complete=True)] == [done.id]
        got = st.get(partial.id)
        assert got.complete is False and got.error == "interrupted" and got.tests[1].complete is False


def test_resave_replaces_by_id(url):
    r = make_result()
    with open_store(url) as st:
        st.save(r)
        r.tests[0].runs.append(Run(42_000_000, 50.0))
        r.complete = False
        st.save(r)
        assert st.count() == 1
        assert st.get(r.id) == r
        assert st.check() == []


def test_filters_and_order(url):
    a = make_result(brand="Lexar", capacity=48_000_000, label="4X", write_times=(41.2, 41.5, 41.6),
                    started_at="2024-05-01T10:00:00+00:00", reader="Kingston FCR-HS4")
    b = make_result(brand="SanDisk", capacity=64_000_000, label=None, write_times=(47.6, 47.8, 47.6),
                    read_rate=1.9e6, started_at="2024-06-01T10:00:00+00:00", reader="Transcend RDF5")
    c = make_result(brand="SanDisk", capacity=31_900_000_000, label="Class 10", write_times=(4.0, 4.1),
                    read_rate=None, started_at="2024-07-01T10:00:00+00:00", reader="Transcend RDF5",
                    serial="0x1234")
    with open_store(url) as st:
        for r in (c, a, b):
            st.save(r)
        ids = lambda rs: [r.id for r in rs]  # noqa: E731
        assert ids(st.results()) == [a.id, b.id, c.id]                    # started ascending by default
        assert ids(st.results(order_by="-started")) == [c.id, b.id, a.id]
        assert ids(st.results(card="sandisk")) == [b.id, c.id]
        assert ids(st.results(card="SanDisk 64M")) == [b.id]
        assert ids(st.results(card="32GB")) == [c.id]                       # 31.9 GB card, labelled 32 GB
        assert ids(st.results(card=c.card.identity())) == [c.id]
        assert ids(st.results(card="kingston")) == []
        assert ids(st.results(reader="transcend")) == [b.id, c.id]
        assert ids(st.results(since="2024-05-15")) == [b.id, c.id]
        assert ids(st.results(until="2024-06-15T00:00")) == [a.id, b.id]
        assert ids(st.results(since=dt.date(2024, 5, 15), until=dt.datetime(2024, 6, 15))) == [b.id]
        assert ids(st.results(test="cold_read")) == [a.id, b.id]
        assert ids(st.results(test="cold_*")) == [a.id, b.id]
        assert ids(st.results(test="seq_write", order_by="-write")) == [c.id, a.id, b.id]
        assert ids(st.results(order_by="read")) == [b.id, a.id, c.id]      # no read figure sorts last
        assert ids(st.results(order_by="-read")) == [a.id, b.id, c.id]
        assert ids(st.results(order_by="card")) == [a.id, b.id, c.id]
        assert ids(st.results(limit=1)) == [a.id]
        assert ids(st.results(source="import")) == []
        with pytest.raises(UsageError, match="cannot sort by"):
            st.results(order_by="colour")
        with pytest.raises(UsageError, match="--since"):
            st.results(since="last tuesday")


def test_relative_since(tmp_path):
    now = dt.datetime.now(dt.timezone.utc)
    old = make_result(started_at=(now - dt.timedelta(days=10)).isoformat())
    new = make_result(started_at=(now - dt.timedelta(hours=1)).isoformat())
    with open_store(tmp_path / "r.db") as st:
        st.save(old)
        st.save(new)
        assert [r.id for r in st.results(since="2d")] == [new.id]
        assert [r.id for r in st.results(until="1w")] == [old.id]


def test_get_by_prefix_and_errors(url):
    r = make_result()
    with open_store(url) as st:
        st.save(r)
        assert st.get(r.id[:8]) == r
        with pytest.raises(UsageError, match="no run with id"):
            st.get("ffffffffffff")
        r2 = make_result()
        r2.id = r.id[:6] + "0" * 26
        r3 = make_result()
        r3.id = r.id[:6] + "1" * 26
        st.save(r2)
        st.save(r3)
        with pytest.raises(UsageError, match="matches 2 runs|matches 3 runs"):
            st.get(r.id[:6])
        st.delete(r2.id)
        assert st.count() == 2
        with pytest.raises(UsageError):
            st.delete(r2.id)


def test_cards_readers_and_verify(url):
    r = make_result(serial="0xCAFE")
    doc = {"schema": "cardbench.verify/1", "card": r.card.to_dict(), "reader": r.reader.to_dict(),
           "verdict": "fake", "claimed_bytes": 64_000_000_000, "usable_bytes": 7_900_000_000,
           "finished_at": "2024-05-03T10:00:00+00:00"}
    with open_store(url) as st:
        st.save(r)
        vid = st.save_verify(doc)
        assert "id" not in doc                      # caller's dict untouched
        assert [c["identity"] for c in st.cards()] == [r.card.identity()]   # verify doc reused the card row
        assert [x["identity"] for x in st.readers()] == [r.reader.identity()]
        got = st.verify_results()
        assert len(got) == 1 and got[0]["id"] == vid and got[0]["verdict"] == "fake"
        assert st.verify_results(card="0xcafe")[0]["usable_bytes"] == 7_900_000_000
        assert st.verify_results(card="nonesuch") == []
        st.save_verify(dict(doc, id=vid, verdict="genuine"))       # same id replaces
        assert [d["verdict"] for d in st.verify_results()] == ["genuine"]
        with pytest.raises(UsageError, match="cardbench.verify/1"):
            st.save_verify({"schema": "something/else"})


def test_migrations_upgrade_in_order(url):
    with Store(url, _migrations=MIGRATIONS[:1]) as st:
        assert st.schema_version == 1
        st.save(make_result())
    with open_store(url) as st:
        assert st.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
        assert st.count() == 1
        rows = st.backend.execute("SELECT version, description FROM schema_version ORDER BY version")
        assert [v for v, _ in rows] == list(range(1, SCHEMA_VERSION + 1))
    broken = MIGRATIONS + (Migration(SCHEMA_VERSION + 1, "broken", ("CREATE TABLE extra_table (x INTEGER)", "THIS IS NOT SQL")),)
    with pytest.raises(StoreError, match="preparing the schema"):
        Store(url, _migrations=broken)
    with open_store(url) as st:          # the failed migration left nothing behind
        assert st.schema_version == SCHEMA_VERSION
        assert "extra_table" not in st.backend.table_names()
        assert st.count() == 1


def test_newer_database_is_refused(url):
    newer = MIGRATIONS + (Migration(SCHEMA_VERSION + 1, "from the future", ("CREATE TABLE future_table (x INTEGER)",)),)
    with Store(url, _migrations=newer) as st:
        assert st.schema_version == SCHEMA_VERSION + 1
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer than this cardbench knows "
                                         f"\\({SCHEMA_VERSION}\\)"):
        open_store(url)


def test_closed_store_and_bad_urls(tmp_path):
    st = open_store(tmp_path / "a.db")
    st.close()
    with pytest.raises(StoreError, match="closed"):
        st.results()
    with pytest.raises(UsageError, match="unknown database URL"):
        open_store("mysql://localhost/x")
    with pytest.raises(UsageError):
        open_store("sqlite://host/x")


def test_sqlite_url_and_wal(tmp_path):
    p = tmp_path / "u.sqlite3"
    with open_store(f"sqlite:///{p}") as st:
        st.save(make_result())
    assert p.exists()
    con = sqlite3.connect(p)
    try:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("PRAGMA application_id").fetchone()[0] == 0x43424E43
    finally:
        con.close()


def test_default_path_is_created(tmp_path, monkeypatch):
    import platformdirs

    target = tmp_path / "data" / "cardbench"
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda appname=None, *a, **k: str(target))
    with open_store() as st:
        st.save(make_result())
        assert st.url == str(target / "results.sqlite3")
    assert (target / "results.sqlite3").is_file()


def test_save_rejects_non_results(tmp_path):
    with open_store(tmp_path / "a.db") as st:
        with pytest.raises(UsageError):
            st.save({"schema": "cardbench.result/1"})  # type: ignore[arg-type]
        bad = make_result()
        bad.target = {"obj": object()}
        with pytest.raises(UsageError, match="cannot be stored as JSON"):
            st.save(bad)
        assert st.count() == 0


def test_minimal_result_and_unicode_identity(url):
    r = Result(target={}, card=Card(name="ça\x00va"), reader=Reader(), tests=[
        TestResult("seq_write", {}, runs=[]), TestResult("rand_read_4k_q1t1", {"bs": 4096},
                                                         runs=[Run(4096 * 100, 0.5, ops=100)])])
    with open_store(url) as st:
        st.save(r)
        assert st.get(r.id) == r
