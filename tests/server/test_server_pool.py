"""The station server's connections and transactions, on a real PostgreSQL and a real SQLite file:
the pool reuses a few connections and gets each back after an error, it recovers when PostgreSQL
restarts under load (every record stored once), and a request is one transaction: a record the
database refuses stores nothing of its request."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from starlette.testclient import TestClient

from cardbench.errors import StoreError
from cardbench.server import tokens
from cardbench.server.app import create_app
from cardbench.store.backends import POOL_MIN
from cardbench.store.core import StorePool, open_store
from cardbench.store.export import EXPORT_SCHEMA
from serve_helpers import ServeProcess, cli, make_result, running_postgres, token_for


def backend_pid(store) -> int:
    return int(store._run("asking", store._db.execute, "SELECT pg_backend_pid()")[0][0])


def test_the_pool_reuses_a_few_connections_and_gets_each_back_after_an_error(pg_server):
    stores = StorePool(pg_server.new_database(), pool_size=3)
    try:
        def call(fn):
            with stores.store() as st:
                return fn(st)
        with ThreadPoolExecutor(8) as ex:
            pids = set(ex.map(lambda _: call(backend_pid), range(200)))
        assert 1 <= len(pids) <= 3, pids             # 200 calls from 8 threads on at most 3 connections

        def refused(db, kinds_and_ids):
            raise tokens.Forbidden("refused inside the transaction")
        r = make_result(serial="pool-refused")
        with pytest.raises(tokens.Forbidden):           # raised after the saving transaction began
            call(lambda st: st.save_all([r], before=refused))
        with pytest.raises(StoreError, match="division by zero"):      # an error of the database itself
            call(lambda st: st._run("dividing", st._db.execute, "SELECT 1/0"))
        stats = stores.pool.stats()
        assert stats["pool_size"] <= 3 and stats["pool_available"] == stats["pool_size"], stats   # all back
        # the connections given back work, outside any transaction, and nothing of the refused save is there
        assert len({call(backend_pid) for _ in range(20)}) <= 3
        assert call(lambda st: st._db.conn.info.transaction_status.name) == "IDLE"
        assert call(lambda st: st.stored_document("result", r.id)) is None
        assert call(lambda st: st.save_all([r])) == [r.id]
    finally:
        stores.close()


def test_a_pooled_connection_keeps_its_prepared_statements(pg_server):
    """psycopg prepares a query run 5 times on a connection; a pool of one connection (below the
    pool's idle minimum) carries them from request to request."""
    stores = StorePool(pg_server.new_database(), pool_size=1)
    try:
        for i in range(6):
            with stores.store() as st:
                st.save_all([make_result(serial=f"prep-{i}")], before=tokens.claimer("alpha"))
        with stores.store() as st:
            prepared = [r[0] for r in st._db.execute("SELECT statement FROM pg_prepared_statements")]
        assert any(q.startswith("INSERT INTO runs ") for q in prepared), prepared
        assert any(q.startswith("INSERT INTO samples ") for q in prepared), prepared
        assert any(q.startswith("INSERT INTO record_stations ") for q in prepared), prepared
    finally:
        stores.close()


def test_sqlite_keeps_a_store_per_thread(tmp_path):
    stores = StorePool(str(tmp_path / "lab.sqlite3"))
    seen = []
    together = threading.Barrier(3)        # the three alive at once (a finished thread's ident is reused)

    def work():
        for _ in range(3):
            with stores.store() as st:
                seen.append((threading.get_ident(), id(st)))
            together.wait(10)
    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    by_thread: dict[int, set[int]] = {}
    for tid, sid in seen:
        by_thread.setdefault(tid, set()).add(sid)
    assert len(by_thread) == 3 and all(len(s) == 1 for s in by_thread.values())
    assert len({next(iter(s)) for s in by_thread.values()}) == 3


def _post(url: str, token: str, doc) -> int:
    req = urllib.request.Request(url + "/api/v1/records", data=json.dumps(doc).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as e:
        e.read()
        return e.code
    except OSError:
        return 0


def test_postgresql_restarting_under_load_loses_nothing_and_the_pool_recovers():
    """4 stations post records one a request, each retrying a record until it is answered 200
    (as a station's outbox does); PostgreSQL is killed and started again in the middle."""
    with running_postgres(durable=True) as pg:
        db = pg.new_database()
        toks = [token_for(db, f"st{i}") for i in range(4)]
        srv = ServeProcess(db).start()
        try:
            per_station = 40
            sent: dict[int, list[str]] = {i: [] for i in range(4)}
            codes: list[tuple[float, float, int]] = []      # (sent, answered, status)
            done_before_kill = threading.Event()

            def station(i):
                for k in range(per_station):
                    r = make_result(serial=f"restart-{i}-{k}")
                    end = time.monotonic() + 90
                    while True:
                        t0 = time.monotonic()
                        code = _post(srv.url, toks[i], r.to_dict())
                        codes.append((t0, time.monotonic(), code))
                        if code == 200:
                            break
                        assert code in (0, 401, 503), code        # the store failing: never a 500
                        assert time.monotonic() < end, "not stored within 90 s"
                        time.sleep(0.1)
                    sent[i].append(r.id)
                    if k == per_station // 3:
                        done_before_kill.set()
            ts = [threading.Thread(target=station, args=(i,)) for i in range(4)]
            for t in ts:
                t.start()
            assert done_before_kill.wait(60)
            killed = time.monotonic()
            pg.kill()
            time.sleep(2.0)
            pg.restart()
            restarted = time.monotonic()
            for t in ts:
                t.join(120)
            assert not any(t.is_alive() for t in ts)
            # the outage fell in the middle of the load: requests waited through it or failed in it
            assert any(sent < restarted and answered > restarted for sent, answered, _ in codes)
            assert any(answered < killed and c == 200 for _, answered, c in codes)
            assert any(sent > restarted and c == 200 for sent, _, c in codes)
            with open_store(db) as st:
                stored = [r[0] for r in st._db.execute("SELECT result_id FROM runs")]
            want = [rid for ids in sent.values() for rid in ids]
            assert sorted(stored) == sorted(want)           # every record, each once
            # recovered: a burst right after is answered at once, every request
            t0 = time.monotonic()
            assert all(_post(srv.url, toks[0], make_result(serial=f"after-{k}").to_dict()) == 200 for k in range(30))
            assert time.monotonic() - t0 < 30
        finally:
            srv.stop()


REFUSE_SQL = {
    "sqlite": ["CREATE TRIGGER refuse BEFORE INSERT ON samples WHEN NEW.bytes = 777 "
               "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END"],
    "postgresql": ["CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN IF NEW.bytes = 777 THEN "
                   "RAISE EXCEPTION 'refused by the test trigger'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
                   "CREATE TRIGGER refuse BEFORE INSERT ON samples FOR EACH ROW EXECUTE FUNCTION refuse()"],
}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_record_the_database_refuses_stores_nothing_of_its_request(kind, tmp_path, request):
    db = str(tmp_path / "lab.sqlite3") if kind == "sqlite" else request.getfixturevalue("pg_server").new_database()
    app = create_app(db)
    with open_store(db) as st:
        token = tokens.add(st, "alpha")
        for sql in REFUSE_SQL[kind]:
            st._db.execute(sql)
    good = [make_result(serial=f"tx-{k}", brand=f"TxBrand{k}") for k in range(3)]
    bad = make_result(serial="tx-bad", brand="TxBad", write_bytes=777)        # its samples are refused

    def export(results):
        return {"schema": EXPORT_SCHEMA, "cards": [], "results": [r.to_dict() for r in results], "verify": [],
                "probes": [], "sessions": []}
    with TestClient(app, raise_server_exceptions=False) as client:
        for _ in range(3):          # again and again: the connection given back after the error works
            resp = client.post("/api/v1/records", content=json.dumps(export([good[0], bad, good[1]])),
                               headers={"Authorization": f"Bearer {token}"})
            assert resp.status_code == 503 and "nothing was stored" in resp.json()["error"], resp.text
            with open_store(db) as st:
                assert st.count() == 0
                assert st._db.execute("SELECT COUNT(*) FROM samples")[0][0] == 0
                assert st._db.execute("SELECT COUNT(*) FROM record_stations")[0][0] == 0
                assert not [c for c in st.cards() if (c["brand"] or "").startswith("Tx")]
        resp = client.post("/api/v1/records", content=json.dumps(export(good)),
                           headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 200, resp.text
    with open_store(db) as st:
        assert sorted(r.id for r in st.results()) == sorted(r.id for r in good)
        assert st.check() == []


def test_workers_serve_one_port_from_several_processes_on_postgresql(pg_server, tmp_path):
    db = pg_server.new_database()
    token = token_for(db, "st1")
    srv = ServeProcess(db, "--workers", "2").start()
    try:
        rs = [make_result(serial=f"w-{k}") for k in range(40)]
        with ThreadPoolExecutor(4) as ex:
            assert set(ex.map(lambda r: _post(srv.url, token, r.to_dict()), rs + rs)) == {200}
        with open_store(db) as st:
            assert sorted(r[0] for r in st._db.execute("SELECT result_id FROM runs")) == sorted(r.id for r in rs)
            conns = st._db.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                                   "AND pid <> pg_backend_pid()")[0][0]
        assert conns >= 2 * POOL_MIN        # each worker process its own pool, each keeping POOL_MIN open
    finally:
        srv.stop()
    r = cli("serve", "--db", str(tmp_path / "one.sqlite3"), "--workers", "2")
    assert r.returncode != 0 and "needs a PostgreSQL store" in r.stderr and "Traceback" not in r.stderr


def _where(srv, raw: bytes, work=None):
    """Server.write of ``raw`` from an event loop: (the thread ``fn`` ran on, is it the loop's)."""
    import asyncio

    def fn(store, body):
        if work is not None:
            work(store)
        return threading.current_thread()

    async def go():
        ran = await srv.write(fn, raw)
        return ran, ran is threading.current_thread()
    return asyncio.run(go())


def test_a_small_write_runs_on_the_event_loop_and_the_others_on_a_writer_thread(pg_server, tmp_path):
    """Server.write: on PostgreSQL a small body is stored on the event loop itself (no thread
    hand-off); a batch-sized body, a pool with no idle connection, and a write whose connection
    broke under it go to a writer thread, which waits and reconnects; SQLite always does."""
    from cardbench.server.app import INLINE_MAX, Server
    srv = Server(pg_server.new_database())
    try:
        ran, on_loop = _where(srv, b"x" * 100)
        assert on_loop, ran.name
        ran, on_loop = _where(srv, b"x" * (INLINE_MAX + 1))
        assert not on_loop and ran.name.startswith("cardbench-write"), ran.name

        # every connection of the pool taken: the loop does not wait for one, a writer thread does
        held = []
        with pytest.raises(StoreError):
            while True:
                held.append(srv.stores.pool.take(wait_s=1))
        assert len(held) == srv.stores.pool.pool.max_size
        threading.Timer(0.5, lambda: srv.stores.pool.give_back(held.pop())).start()
        t0 = time.monotonic()
        ran, on_loop = _where(srv, b"x" * 100)
        assert not on_loop and ran.name.startswith("cardbench-write") and time.monotonic() - t0 >= 0.4
        for c in held:
            srv.stores.pool.give_back(c)

        # the connection dies under the write on the loop: no reconnect there; done again on a thread
        tries = []

        def kill_own_connection_on_the_loop(store):
            tries.append(threading.current_thread().name)
            if len(tries) == 1:
                store._run("ending", store._db.execute, "SELECT pg_terminate_backend(pg_backend_pid())")
        ran, on_loop = _where(srv, b"x" * 100, kill_own_connection_on_the_loop)
        assert len(tries) == 2 and tries[0] == threading.current_thread().name, tries
        assert not on_loop and ran.name.startswith("cardbench-write")
        assert _where(srv, b"x" * 100)[1]          # and the next small write is on the loop again
    finally:
        srv.writers.shutdown()
        srv.stores.close()
    sqlite = Server(tmp_path / "cards.db")
    try:
        ran, on_loop = _where(sqlite, b"x" * 100)
        assert not on_loop and ran.name.startswith("cardbench-write")
    finally:
        sqlite.writers.shutdown()


def test_an_upload_done_again_on_a_writer_thread_counts_once_against_its_rate(pg_server):
    """The station's rate limit counted an upload on the event loop, then its connection was cut
    before the save: done again on a writer thread, it is stored once and counted once, so a
    limit of one upload passes it (counted twice, it was answered 429)."""
    import psycopg

    from cardbench.server.app import RateLimit
    db = pg_server.new_database()
    app = create_app(db, upload_rate=0.5)           # a burst of 1: one upload, then 429 for 2 s
    with open_store(db) as st:
        token = tokens.add(st, "alpha")
    cuts = []

    class CutAfterCounting(RateLimit):
        def check(self, key):
            super().check(key)
            if not cuts:                            # every pooled connection ended, the loop's with them
                with psycopg.connect(db, autocommit=True) as c:
                    cuts.append(c.execute("SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                          "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                                .fetchone()[0])
    srv = app.state.server
    srv.upload_limit = CutAfterCounting(0.5, "uploads")
    one, two = make_result(serial="rate-1"), make_result(serial="rate-2")
    with TestClient(app, raise_server_exceptions=False) as client:
        def post(r):
            return client.post("/api/v1/records", content=json.dumps(r.to_dict()),
                               headers={"Authorization": f"Bearer {token}"})
        resp = post(one)
        assert resp.status_code == 200, resp.text
        assert cuts and cuts[0] >= 1, cuts
        resp = post(two)                            # the limit itself still holds
        assert resp.status_code == 429 and resp.headers["Retry-After"], resp.text
    with open_store(db) as st:
        assert [r.id for r in st.results()] == [one.id]
        assert st._db.execute("SELECT station FROM record_stations WHERE kind = 'result'") == [("alpha",)]
