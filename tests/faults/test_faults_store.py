"""Store faults: the results store fails while a card is being measured, and nothing is lost.

A real SQLite file on a small loop-mounted ext4 that fills up or goes read-only during a real
`cardbench run`/`verify --full` of an emulated card; a real PostgreSQL server (this module's own,
on its own port) killed mid-save, down at the end of a run, and two stations saving while it
restarts. Each time: the result is printed, kept in the outbox (one file, in the user data dir of
this suite) with one line saying where and how it will be stored, exit 9; once the store is back,
`cardbench sync` (or the next save) stores it, exactly once; each row says what was lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from faults_helpers import (
    card,
    counters,
    nothing_left,
    one_error_line,
    run_cli,
    start_cli,
    stored,
    stored_verify,
    wait_until,
    when_written,
)
from realparts import loop_device, mounted

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))
from cardbench.units import MB, MiB  # noqa: E402
from cardbench_factories import make_result, running_postgres  # noqa: E402

pytestmark = [pytest.mark.needs_root]


def outbox_for(db) -> list[dict]:
    """The outbox files (as JSON) meant for this store."""
    from cardbench.store.core import store_key
    from cardbench.store.outbox import entries
    return [e.document for e in entries() if e.store == store_key(str(db))]


def fill(mnt: str) -> None:
    """Take every free block of the filesystem (one big file, then small ones until ENOSPC)."""
    fd = os.open(os.path.join(mnt, "filler.bin"), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        v = os.statvfs(mnt)
        os.posix_fallocate(fd, 0, v.f_bavail * v.f_frsize)
    except OSError:
        pass
    finally:
        os.close(fd)
    for i in range(10_000):
        try:
            with open(os.path.join(mnt, f"filler-{i}"), "wb") as f:
                f.write(b"\xff" * 4096)
                os.fsync(f.fileno())
        except OSError:
            break
    assert os.statvfs(mnt).f_bavail == 0


def free(mnt: str) -> None:
    for n in os.listdir(mnt):
        if n.startswith("filler"):
            os.unlink(os.path.join(mnt, n))


def integrity(db) -> str:
    import sqlite3
    con = sqlite3.connect(str(db))
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


@contextlib.contextmanager
def small_store(earlier: int):
    """(its mountpoint, the SQLite file, the ids of ``earlier`` results stored) on a 16 MiB ext4."""
    from cardbench.store import open_store
    with loop_device(16 * MiB) as dev, mounted(dev) as dbfs:
        db = Path(dbfs) / "results.sqlite3"
        with open_store(str(db)) as s:
            ids = [s.save(make_result(brand=f"Earlier{i}", reader="Station reader")) for i in range(earlier)]
        yield dbfs, db, ids


def listed_ids(q) -> list[str]:
    """The run ids `cardbench results --format json` printed."""
    data = json.loads(q.stdout)
    return [r["id"] for r in (data["results"] if isinstance(data, dict) else data)]


def ids_once(results) -> list[str]:
    ids = [r.id for r in results]
    assert len(ids) == len(set(ids)), f"a result stored twice: {ids}"
    return ids


RUN_ARGS = ("--size", "4MB", "--runs", "1", "--json")


def run_with_store_fault(row, tmp_path, db, fault, what: str, after=None) -> dict:
    """`cardbench run --json` of an emulated card into ``db``; ``fault()`` once the card has taken
    its first MB. The run must print its result, exit 9, say in one line where it is kept, and the
    outbox must hold exactly what it printed. ``after(mnt)`` runs while the card is still there.
    Returns the printed result."""
    with card(size=64 * MiB, write_rate=10 * MB, read_rate=20 * MB) as c, c.filesystem("ext4") as mnt:
        base = counters(c)
        p = start_cli("run", mnt, *RUN_ARGS, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1 * MB, base), 30, "the run's first MB", p)
        fault()
        row.saw(what)
        p.wait(90)
        assert p.returncode == 9, (p.returncode, p.stderr)
        printed = json.loads(p.stdout)
        line = one_error_line(p, "kept in")
        assert "outbox" in line and "cardbench sync" in line, line
        row.saw(f"exit 9: {line[11:75]}...")
        kept = outbox_for(db)
        assert [d["id"] for d in kept] == [printed["id"]] and kept[0] == printed, "the outbox is not what was printed"
        if after is not None:
            after(mnt)
    return printed


@pytest.mark.slow
@pytest.mark.scenario("store full: results DB's filesystem fills during `cardbench run`",
                      "result printed, exit 9, kept in the outbox; `sync` after freeing space stores it once")
def test_store_fills_during_run(row, tmp_path, emu_dir):
    with small_store(2) as (dbfs, db, before):
        printed = run_with_store_fault(row, tmp_path, db, lambda: fill(dbfs),
                                       "DB filesystem filled while the card was written")
        q = run_cli("results", "--db", str(db), "--format", "json", workdir=tmp_path)   # while still full
        assert q.returncode == 0 and "1 result in the outbox" in q.stderr and "cardbench sync" in q.stderr, q.stderr
        assert sorted(listed_ids(q)) == sorted(before)
        s = run_cli("sync", "--db", str(db), workdir=tmp_path)
        assert s.returncode == 6 and "1 result stay in the outbox" in s.stderr, (s.returncode, s.stderr)
        row.saw("still full: `results` lists the 2 earlier runs and names the outbox; `sync` refuses, keeps it")
        free(dbfs)
        assert integrity(db) == "ok"
        assert sorted(r.id for r in stored(db)) == sorted(before)
        row.saw("space freed: integrity_check ok")
        for attempt in range(2):     # twice: the second finds nothing to do
            s = run_cli("sync", "--db", str(db), workdir=tmp_path)
            assert s.returncode == 0, s.stderr
            assert ("stored 1 result" if attempt == 0 else "holds nothing") in s.stdout, s.stdout
        q = run_cli("results", "--db", str(db), "--format", "json", workdir=tmp_path)
        assert q.returncode == 0 and "outbox" not in q.stderr, q.stderr
        assert sorted(listed_ids(q)) == sorted(before + [printed["id"]])
        assert ids_once(stored(db)) and outbox_for(db) == []
        row.saw("after sync: `results` lists it beside the 2 earlier runs; a second sync stores nothing")
        row.lost("nothing")
    nothing_left(row, emu_dir)


@pytest.mark.slow
@pytest.mark.scenario("store read-only: results DB's filesystem remounted ro during `cardbench run`",
                      "result printed, exit 9, kept; the next save (another run) stores both, once")
def test_store_read_only_during_run(row, tmp_path, emu_dir):
    with small_store(1) as (dbfs, db, before):
        second = {}

        def next_run(mnt):
            subprocess.run(["mount", "-o", "remount,rw", dbfs], check=True, capture_output=True)
            q = run_cli("run", mnt, *RUN_ARGS, "--db", str(db), workdir=tmp_path)
            assert q.returncode == 0, q.stderr
            second.update(json.loads(q.stdout))

        first = run_with_store_fault(
            row, tmp_path, db, lambda: subprocess.run(["mount", "-o", "remount,ro", dbfs], check=True,
                                                      capture_output=True),
            "DB filesystem remounted read-only mid-run", after=next_run)
        assert integrity(db) == "ok"
        ids = ids_once(stored(db))
        assert sorted(ids) == sorted(before + [first["id"], second["id"]]), ids
        assert outbox_for(db) == []
        row.saw("remounted rw: the next run moved the kept one in first; 3 stored, each once")
        row.lost("nothing")
    nothing_left(row, emu_dir)


@pytest.mark.slow
@pytest.mark.scenario("store full: `verify --full` interrupted while the store is full, then --resume",
                      "partial kept in the outbox (exit 130); --resume stores one complete document")
def test_verify_full_resume_after_store_failure(row, tmp_path, emu_dir):
    with small_store(1) as (dbfs, db, _):
        with card(size=48 * MiB, write_rate=20 * MB, read_rate=40 * MB) as c, c.filesystem("ext4") as mnt:
            base = counters(c)
            p = start_cli("verify", "--full", mnt, "--db", str(db), workdir=tmp_path)
            wait_until(when_written(c, 4 * MB, base), 30, "the fill's first MBs", p)
            fill(dbfs)
            p.signal(signal.SIGINT)
            p.wait(60)
            assert p.returncode == 130, (p.returncode, p.stderr)
            assert "Traceback" not in p.stderr
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            assert len(lines) == 2 and "kept in" in lines[0] and "--resume" in lines[1], lines
            kept = outbox_for(db)
            assert len(kept) == 1 and kept[0]["complete"] is False, kept
            row.saw("SIGINT with the store full: exit 130; the partial document kept, --resume named")
            free(dbfs)
            c.set(write_rate=200 * MB, read_rate=400 * MB)
            q = run_cli("verify", "--full", "--resume", mnt, "--db", str(db), workdir=tmp_path)
            assert q.returncode == 0, q.stderr
        docs = stored_verify(db)
        assert len(docs) == 1 and docs[0]["complete"] and docs[0]["id"] == kept[0]["id"], \
            [(d["id"], d["complete"]) for d in docs]
        assert outbox_for(db) == [] and integrity(db) == "ok"
        row.saw("--resume: the partial moved in, then replaced by the finished document (same id): one, complete")
        row.lost("nothing")
    nothing_left(row, emu_dir)


@pytest.mark.slow
@pytest.mark.timing   # a 0.5 s timer races card 3's setup and run
@pytest.mark.scenario("demo drawer: store read-only for card 2, Ctrl-C during card 3",
                      "every finished card kept: card 1 stored, card 2 in the outbox; sync stores it")
def test_drawer_interrupted_keeps_every_finished_card(row, emu_dir):
    import _thread

    from cardbench.demo import DRAWER, run_demo
    from cardbench.errors import Interrupted
    from cardbench.record import record, sync
    with small_store(0) as (dbfs, db, _):
        recs = []

        def remount(mode):
            subprocess.run(["mount", "-o", f"remount,{mode}", dbfs], check=True, capture_output=True)

        def keep(c, measure):                # each card recorded as it finishes
            result = measure()
            if len(recs) == 1:
                remount("ro")
            recs.append(record(result, str(db)))
            if len(recs) == 2:
                remount("rw")
                threading.Timer(0.5, _thread.interrupt_main).start()   # Ctrl-C while card 3 is set up and run
            return result

        with pytest.raises((KeyboardInterrupt, Interrupted)):
            run_demo(cards=DRAWER[:3], factor=10, file_bytes=2 * MB, runs=1, keep=keep)
        assert [r.stored for r in recs] == [True, False] and len(recs[1].kept) == 1
        row.saw("card 1 stored; card 2 kept in the outbox (store read-only); Ctrl-C during card 3")
        assert len(stored(db)) == 1 and len(outbox_for(db)) == 1
        assert sync(str(db)).saved
        assert sorted(r.card.brand for r in stored(db)) == sorted(c.brand for c in DRAWER[:2])
        assert outbox_for(db) == []
        row.saw("sync: both finished cards stored, once each")
        row.saw("card 3 was cut short before it finished (nothing of it to keep)")
        row.lost("nothing")
    nothing_left(row, emu_dir)


# -- PostgreSQL ---------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pg():
    """This module's own server (its own port and directory): killing it disturbs no other test;
    durable, so a commit it answered survives the kill."""
    with running_postgres(durable=True) as server:
        yield server


@pytest.fixture
def pg_db(pg):
    if not pg.started or not _answers(pg):
        pg.restart()
    return pg.new_database()


def _answers(pg) -> bool:
    import psycopg
    try:
        psycopg.connect(pg.url, connect_timeout=2).close()
        return True
    except psycopg.Error:
        return False


def stored_pg(url) -> list:
    from cardbench.store import open_store
    with open_store(url) as s:
        assert s.check() == []
        return s.results()


@pytest.mark.slow
@pytest.mark.scenario("PostgreSQL killed mid-save (inside the transaction)",
                      "no partial run; kept in the outbox; after a restart the next save stores both, once")
def test_postgres_killed_mid_save(row, pg, pg_db):
    import psycopg

    from cardbench.record import record
    from cardbench.store import open_store
    open_store(pg_db).close()                     # the schema first
    blocker = psycopg.connect(pg_db)              # a transaction that holds `tests` until the server dies
    blocker.execute("LOCK TABLE tests IN ACCESS EXCLUSIVE MODE")
    r = make_result(brand="MidSave")
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("rec", record(r, pg_db)))
    t.start()
    with psycopg.connect(pg_db, autocommit=True) as watch:
        wait_until(lambda: watch.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                         ).fetchone()[0] > 0, 20, "the save waiting inside its transaction")
    row.saw("save blocked inside its transaction (runs row written, tests locked)")
    pg.kill()
    t.join(60)
    rec = out["rec"]
    assert not rec.stored and len(rec.kept) == 1, rec
    assert "kept in" in rec.problem().message and rec.problem().exit_code == 9
    row.saw(f"killed: {rec.error[:70]}...; kept in the outbox")
    pg.restart()
    assert [x.id for x in stored_pg(pg_db)] == [], "a partial run survived the crash"
    r2 = make_result(brand="AfterRestart")
    rec2 = record(r2, pg_db)
    assert rec2.stored
    assert sorted(ids_once(stored_pg(pg_db))) == sorted([r.id, r2.id]) and outbox_for(pg_db) == []
    row.saw("restarted: no partial run; the next save moved the kept one in first; both stored once")
    row.lost("nothing")


@pytest.mark.slow
@pytest.mark.scenario("PostgreSQL down at the end of `cardbench run`",
                      "result printed, exit 9, kept; after a restart `sync` stores it once (twice: no duplicate)")
def test_postgres_down_at_end_of_run(row, tmp_path, emu_dir, pg, pg_db):
    printed = run_with_store_fault(row, tmp_path, pg_db, pg.kill, "server stopped mid-run")
    pg.restart()
    for attempt in range(2):
        s = run_cli("sync", "--db", pg_db, workdir=tmp_path)
        assert s.returncode == 0, s.stderr
        assert ("stored 1 result" if attempt == 0 else "holds nothing") in s.stdout, s.stdout
    assert ids_once(stored_pg(pg_db)) == [printed["id"]] and outbox_for(pg_db) == []
    row.saw("restarted: sync stored it; a second sync stored nothing; one row")
    row.lost("nothing")
    nothing_left(row, emu_dir)


STATION = """
import os, sys, time
sys.path.insert(0, {store_tests!r})
from cardbench_factories import make_result
from cardbench.record import record, sync
url, go, n, who = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.005)
for i in range(n):
    r = make_result(brand="Shared", reader="Lab reader " + who, write_times=(40 + i, 41 + i))
    rec = record(r, url)
    print(r.id, "stored" if rec.stored else "kept", flush=True)
    time.sleep(0.15)
print("sync", sync(url).lines()[0], flush=True)
"""


@pytest.mark.slow
@pytest.mark.scenario("two stations at once on PostgreSQL, server restarted mid-way",
                      "every result of both stations stored exactly once (outbox, then the next save or sync)")
def test_two_stations_at_once(row, tmp_path, pg, pg_db):
    script = tmp_path / "station.py"
    script.write_text(STATION.format(store_tests=str(Path(__file__).resolve().parent.parent / "store")))
    go = tmp_path / "go"
    import cardbench
    procs = []
    for who in ("A", "B"):
        env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / f"station-{who}"),   # each its own machine
                   PYTHONPATH=str(Path(cardbench.__file__).resolve().parent.parent))
        procs.append(subprocess.Popen([sys.executable, str(script), pg_db, str(go), "16", who], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        go.touch()
        wait_until(lambda: len(_ids_in(pg_db)) >= 4, 30, "both stations saving")
        pg.kill()
        row.saw(f"server killed after {len(_ids_in_cached)} saves")
        time.sleep(5.0)      # longer than a save waits for the server (CONNECT_ATTEMPTS with backoff)
        pg.restart()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-800:]
    lines = [ln.split() for out, _ in outs for ln in out.splitlines() if not ln.startswith("sync")]
    made = [ln[0] for ln in lines]
    kept = sum(1 for ln in lines if ln[1] == "kept")
    assert len(made) == 32 and kept > 0, (len(made), kept)
    ids = ids_once(stored_pg(pg_db))
    assert sorted(ids) == sorted(made), (len(ids), len(made))
    for who in ("A", "B"):
        assert not list((tmp_path / f"station-{who}" / "cardbench" / "outbox").glob("*.json"))
    row.saw(f"32 results by two stations, {kept} kept in an outbox while the server was down; "
            "all 32 stored, each once; both outboxes empty")
    row.lost("nothing")


_ids_in_cached: list = []


def _ids_in(url) -> list:
    import psycopg
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as c:
            ids = [r[0] for r in c.execute("SELECT result_id FROM runs").fetchall()]
    except psycopg.Error:
        return []
    _ids_in_cached[:] = ids
    return ids
