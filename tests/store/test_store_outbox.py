"""The outbox and `record` / `sync` on real SQLite files: a result the store cannot take is shown
first, then kept (one whole file), and stored exactly once later, however often sync runs."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from cardbench.errors import NotStored, StoreError
from cardbench.record import check_store, record, sync, waiting_notice
from cardbench.store import open_store, outbox
from cardbench.store.core import store_key
from cardbench_factories import make_result


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path, monkeypatch):
    """The outbox of these tests is theirs alone (the user data dir points into tmp_path)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("CARDBENCH_DB", raising=False)
    return tmp_path / "data" / "cardbench" / "outbox"


def locked(db, monkeypatch):
    """Another connection holds the write lock of ``db``; writers give up after 0.2 s."""
    from cardbench.store import backends
    monkeypatch.setattr(backends, "BUSY_TIMEOUT_S", 0.2)
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    return con


@pytest.mark.slow
def test_locked_past_the_timeout_is_shown_then_kept_then_synced_once(tmp_path, monkeypatch, own_data_dir):
    db = str(tmp_path / "r.sqlite3")
    with open_store(db) as s:
        s.save(make_result(brand="Earlier"))
    holder = locked(db, monkeypatch)
    r = make_result(brand="New")
    seen = []
    rec = record(r, db, show=lambda: seen.append(list(own_data_dir.glob("*.json"))))
    assert seen == [[]], "the outbox was written before the result was shown"
    assert not rec.stored and len(rec.kept) == 1 and rec.kept[0].parent == own_data_dir
    problem = rec.problem()
    assert isinstance(problem, NotStored) and problem.exit_code == 9
    assert "locked" in problem.message and str(rec.kept[0]) in problem.message and "cardbench sync --db" in problem.message
    assert "\n" not in problem.message
    kept = json.loads(rec.kept[0].read_text())
    assert kept["document"] == r.to_dict() and kept["store"] == store_key(db)
    assert oct(rec.kept[0].stat().st_mode & 0o777) == "0o600"
    assert "1 result in the outbox" in waiting_notice(db)
    with pytest.raises(StoreError, match="1 result stay in the outbox"):
        sync(db)
    holder.close()
    assert sync(db).lines()[0].startswith("stored 1 result from the outbox")
    assert sync(db).lines()[0].startswith("the outbox holds nothing")
    with open_store(db) as s:
        assert sorted(x.card.brand for x in s.results()) == ["Earlier", "New"] and s.check() == []
    assert waiting_notice(db) is None and list(own_data_dir.glob("*.json")) == []


def test_sync_cut_short_never_stores_twice(tmp_path, own_data_dir):
    """A sync killed between the save and the removal of the file: the next one stores it again
    (replace by id), still once; a verify document too."""
    db = str(tmp_path / "r.sqlite3")
    r = make_result()
    doc = {"schema": "cardbench.verify/1", "verdict": "genuine", "complete": True, "card": {"brand": "X"}}
    files = [outbox.keep(r, store_key(db), "test"), outbox.keep(doc, store_key(db), "test")]
    copies = [f.read_bytes() for f in files]
    assert sync(db).lines()[0] == f"stored 1 result and 1 verify result from the outbox in {db}"
    for f, data in zip(files, copies, strict=True):      # as if the removal had never happened
        f.write_bytes(data)
    sync(db)
    sync(db)
    with open_store(db) as s:
        assert [x.id for x in s.results()] == [r.id] and [d["id"] for d in s.verify_results()] == [doc["id"]]


def test_each_store_gets_only_its_own(tmp_path, own_data_dir):
    a, b = str(tmp_path / "a.sqlite3"), str(tmp_path / "b.sqlite3")
    ra, rb = make_result(brand="A"), make_result(brand="B")
    outbox.keep(ra, store_key(a), "test")
    outbox.keep(rb, store_key(b), "test")
    check_store(a)                                 # a command about to write to a: moves a's in, quietly
    with open_store(a) as s:
        assert [x.id for x in s.results()] == [ra.id]
    lines = sync(a).lines()
    assert lines[0].startswith("the outbox holds nothing") and f"1 more waits for {b}" in lines[1], lines
    assert f"cardbench sync --db {b}" in lines[1]
    assert not os.path.exists(b)


def test_newest_copy_wins_and_unreadable_files_are_set_aside(tmp_path, own_data_dir):
    db = str(tmp_path / "r.sqlite3")
    doc = {"schema": "cardbench.verify/1", "verdict": None, "complete": False}
    outbox.keep(doc, store_key(db), "interrupted")
    doc = dict(doc, verdict="genuine", complete=True)     # the same check, finished later (--resume)
    outbox.keep(doc, store_key(db), "store down")
    (own_data_dir / "20000101T000000000000-result-broken-1.json").write_text("{not json")
    done = sync(db)
    assert len(done.saved) == 2 and len(done.bad) == 1 and "set aside" in done.lines()[-1]
    assert (own_data_dir / "20000101T000000000000-result-broken-1.bad").exists()
    with open_store(db) as s:
        docs = s.verify_results()
    assert [(d["id"], d["complete"]) for d in docs] == [(doc["id"], True)]


@pytest.mark.slow
def test_outbox_that_cannot_be_written_is_said(tmp_path, monkeypatch):
    """The store and the outbox both fail: exit 6, and the line says only the printed copy remains."""
    data = tmp_path / "data-is-a-file"
    data.write_text("")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    db = str(tmp_path / "r.sqlite3")
    open_store(db).close()
    holder = locked(db, monkeypatch)
    try:
        rec = record(make_result(), db, show=lambda: None)
    finally:
        holder.close()
    assert not rec.stored and rec.kept == []
    problem = rec.problem()
    assert type(problem) is StoreError and problem.exit_code == 6
    assert "could not keep it" in problem.message and "printed above" in problem.message


def test_a_stored_result_is_judged_with_its_reader(tmp_path):
    """record() saves and then judges the reader's stored results again, in one call; the caller's
    result takes its new marks (what is shown is what is stored), earlier ones are marked too."""
    db = str(tmp_path / "r.sqlite3")
    # the classic survey through one reader: different writes, five reads at 3.7-3.8 MB/s (a ceiling)
    rows = [("Lexar", 1.013, 3.6), ("SanDisk", 0.881, 1.9), ("PNY", 1.378, 3.8), ("SanDisk", 1.804, 3.8),
            ("PNY", 1.580, 3.8), ("SanDisk", 2.370, 3.7), ("Crucial", 4.348, 3.8)]
    results = []
    for i, (brand, write_mb, read_mb) in enumerate(rows):
        r = make_result(brand=brand, capacity=(i + 1) * 64_000_000, write_times=(42 / write_mb,) * 3,
                        read_rate=read_mb * 1e6, reader="Capped", label=None)
        assert record(r, db).stored
        results.append(r)
    assert "limited by the reader" in (results[-1].test("cold_read").limited_by or "")
    with open_store(db) as s:
        assert s.get(results[-1].id).to_dict() == results[-1].to_dict()
        assert "limited by the reader" in (s.get(results[2].id).test("cold_read").limited_by or "")


@pytest.mark.slow
@pytest.mark.needs_root
def test_filesystem_full_mid_save(tmp_path, own_data_dir):
    """The SQLite file's filesystem (a small real ext4) fills up while a big result is being saved:
    the transaction fails whole, integrity_check stays clean, the earlier results read back, the
    new one is kept and stored once space is freed."""
    from realparts import ROOT, loop_device, mounted
    if not ROOT:
        pytest.skip("needs root for loop devices")
    with loop_device(16 << 20) as dev, mounted(dev) as mnt:
        db = os.path.join(mnt, "results.sqlite3")
        earlier = [record(make_result(brand=f"E{i}"), db) for i in range(2)]
        assert all(e.stored for e in earlier)
        reader = open_store(db)           # an open connection: the file's -shm exists while it is full
        try:
            filler = os.path.join(mnt, "filler")
            fd = os.open(filler, os.O_CREAT | os.O_WRONLY)
            try:
                os.posix_fallocate(fd, 0, os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize)
            except OSError:
                pass
            os.close(fd)
            assert os.statvfs(mnt).f_bavail == 0
            big = make_result(brand="Big")
            big.tests[0].runs = big.tests[0].runs * 5_000   # 15,000 sample rows: pages past the WAL
            rec = record(big, db)
            assert not rec.stored and "full" in rec.error and len(rec.kept) == 1, rec.error
            assert sorted(r.card.brand for r in reader.results()) == ["E0", "E1"]
            assert reader.check() == []
        finally:
            reader.close()
        os.unlink(filler)
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        sync(db)
        with open_store(db) as s:
            assert sorted(r.card.brand for r in s.results()) == ["Big", "E0", "E1"] and s.check() == []
