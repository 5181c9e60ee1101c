"""Two real `cardbench serve` processes (uvicorn children) on one real PostgreSQL: stations split
between them, records stored once, every live page complete on both (headless Chromium), 120
simulated endurance cards' progress seen on the other server, and PostgreSQL restarting under
load (the servers' LISTEN reconnects and the pages catch up; the stations' outboxes keep
every record, each stored once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from cardbench.store.core import open_store
from live_sim import EventStream, _conn, body, post_live, simulate
from serve_helpers import HERE, ServeProcess, child_env, cli, make_result, running_postgres, token_for
from test_server_real import upload


@pytest.fixture(scope="module")
def pg():
    # durable: a commit answered before PostgreSQL is killed is kept, as in production
    with running_postgres(durable=True) as server:
        yield server


@pytest.fixture(scope="module")
def pair(pg):
    db = pg.new_database()
    a, b = ServeProcess(db).start(), ServeProcess(db).start()
    try:
        yield a, b, db
    finally:
        a.stop()
        b.stop()


def stored(db) -> Counter:
    with open_store(db) as s:
        return Counter(r[0] for r in s._db.execute("SELECT result_id FROM runs"))


def all_stations(db) -> list[str]:
    with open_store(db) as s:
        return sorted(r[0] for r in s._db.execute("SELECT station FROM record_stations UNION SELECT station FROM "
                                                  "live_cards"))


def run_stations(servers: dict[str, ServeProcess], toks: dict[str, str], n: int, tmp_path) -> dict:
    procs = {}
    for st, srv in servers.items():
        home = tmp_path / st
        home.mkdir(exist_ok=True)
        env = child_env(home)
        env.update(CARDBENCH_SHARE=srv.url, CARDBENCH_TOKEN=toks[st])
        procs[st] = (home, subprocess.Popen([sys.executable, str(HERE / "station.py"), st, str(n),
                                             str(home / "local.sqlite3")], env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True))
    return procs


def finish(procs) -> dict[str, list[str]]:
    ids = {}
    for st, (_, p) in procs.items():
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
        ids[st] = json.loads(out)
    return ids


def _said(srv: ServeProcess) -> str:
    """What a server wrote to its log so far (its stderr, set non-blocking)."""
    try:
        return os.read(srv.proc.stderr.fileno(), 1 << 16).decode(errors="replace")
    except BlockingIOError:
        return ""


@pytest.fixture(scope="module")
def browser():
    from cdp import Browser, find_chromium
    if not find_chromium():
        pytest.skip("chromium is not installed")
    b = Browser()
    yield b
    b.close()


def test_two_servers_store_each_record_once_and_both_live_pages_show_every_station(pair, browser, tmp_path):
    a, b, db = pair
    names = ["north-1", "north-2", "south-1", "south-2"]
    toks = {st: token_for(db, st) for st in names}
    via = {"north-1": a, "north-2": a, "south-1": b, "south-2": b}
    ids = finish(run_stations(via, toks, 8, tmp_path))
    counts = stored(db)
    assert all(counts[i] == 1 for st in names for i in ids[st])          # every record, exactly once
    assert sum(counts.values()) == sum(len(v) for v in ids.values())
    announced = {}
    for st in names:      # each station announces one card through its own server
        conn = _conn(via[st].url)
        announced[st] = body(st, 0, 0, announce=True)
        assert post_live(conn, toks[st], announced[st]) == 200
        conn.close()
    for srv in (a, b):    # the index of each server: every station, every card
        s = browser.open(srv.url + "/live", width=1000)
        got = browser.evaluate(s, "Array.from(document.querySelectorAll('#live-stations li.station'))"
                                  ".map(li => li.getAttribute('data-station'))")
        assert set(names) <= set(got) and sorted(got) == all_stations(db), got     # other tests' too
        keys = browser.evaluate(s, "Array.from(document.querySelectorAll('#live-stations li[data-key]'))"
                                   ".map(li => li.getAttribute('data-key'))")
        assert {d["card"]["key"] for d in announced.values()} <= set(keys)
    # a station's page on the server it does NOT share with, updated without a reload
    for srv, other, st in ((b, a, "north-1"), (a, b, "south-2")):
        s = browser.open(srv.url + f"/live/{st}", width=1000)
        browser.evaluate(s, "window.__same_page = 1")
        assert browser.evaluate(s, "document.querySelectorAll('#live-table tr[id^=\"run-\"]').length") == 8
        assert browser.wait_for(s, "document.querySelectorAll('#live-cards tr[data-key]').length === 1")
        time.sleep(0.5)                      # its event stream is open
        new = make_result(brand=f"Late <i>{st}</i>", serial=f"late-{st}")
        assert upload(other, toks[st], new.to_dict())[0] == 200
        conn = _conn(other.url)
        assert post_live(conn, toks[st], body(st, 7, 0, announce=True)) == 200        # a second card
        assert post_live(conn, toks[st], body(st, 0, 4, announce=False)) == 200       # the first one, further
        conn.close()
        assert browser.wait_for(s, f"!!document.getElementById('run-{new.id}')", timeout=10)
        assert browser.wait_for(s, "document.querySelectorAll('#live-cards tr[data-key]').length === 2", timeout=10)
        assert browser.wait_for(s, f"document.querySelector('#live-cards tr[data-key=\"{st}/card-0\"]')"
                                   ".getAttribute('data-done') === '500000000'", timeout=10)
        assert browser.evaluate(s, "window.__same_page") == 1
        dom = browser.dom(s)
        assert f"Late &lt;i&gt;{st}&lt;/i&gt;" in dom and "<i>" not in dom
    assert stored(db)[new.id] == 1


def test_progress_for_a_card_never_announced_is_409_and_a_big_identity_travels_by_key(pair):
    a, b, db = pair
    tok = token_for(db, "keys")
    conn = _conn(a.url)
    doc = body("keys", 3, 2, announce=False)
    data = json.dumps(doc).encode()
    conn.request("POST", "/api/v1/live", body=data, headers={"Authorization": f"Bearer {tok}"})
    resp = conn.getresponse()
    err = json.loads(resp.read())
    assert resp.status == 409 and set(err) == {"error"} and "never announced" in err["error"]
    stream = EventStream(b.url, "keys")
    try:
        assert stream.connected.wait(20)
        big = body("keys", 3, 0, announce=True)
        big["card"]["identity"]["extra"] = "x" * 40_000        # far past NOTIFY's 8,000 bytes: only the key goes
        assert post_live(conn, tok, big) == 200
        end = time.monotonic() + 10
        while time.monotonic() < end and not [d for _, d in stream.seen("card") if d["key"] == "keys/card-3"]:
            time.sleep(0.05)
        got = [d for _, d in stream.seen("card") if d["key"] == "keys/card-3"]
        assert got and got[-1]["done"] == 100_000_000
    finally:
        stream.close()
        conn.close()
    with open_store(db) as s:
        (n, size), = s._db.execute("SELECT COUNT(*), MAX(LENGTH(identity)) FROM live_cards WHERE station = 'keys'")
    assert n == 1 and size > 40_000


def test_a_listener_cut_off_connects_again_and_its_pages_catch_up_on_what_it_missed(pair):
    """The LISTEN connections of both servers are ended by PostgreSQL (as a restart or a network
    cut does); an event written while they are away reaches no listener by NOTIFY, and is on the
    other server's open stream all the same: sent again when its listener connects again."""
    from cardbench.server.live import LISTENER_NAME
    a, b, db = pair
    tok = token_for(db, "cut")
    os.set_blocking(b.proc.stderr.fileno(), False)
    _said(b)
    conn = _conn(a.url)
    assert post_live(conn, tok, body("cut", 0, 0, announce=True)) == 200
    stream = EventStream(b.url, "cut")
    try:
        assert stream.connected.wait(20)
        with open_store(db) as s:
            ended = s._db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?",
                                  (LISTENER_NAME,))
        assert len(ended) == 2, ended                   # one listener per server
        time.sleep(0.2)
        assert post_live(conn, tok, body("cut", 0, 6, announce=False)) == 200      # while nobody listens
        end = time.monotonic() + 15
        while time.monotonic() < end and not [d for _, d in stream.seen("card") if d["done"] == 700_000_000]:
            time.sleep(0.05)
        assert [d for _, d in stream.seen("card") if d["done"] == 700_000_000], stream.events[-3:]
        assert "live updates paused" in _said(b)
    finally:
        stream.close()
        conn.close()


# not `timing`: two servers, PostgreSQL and 120 simulated cards busy both cores, and the timing pass
# runs it beside the paced emulated cards whose measured rates it then disturbs (a fresh-clone CI
# saw ext4 write+fsync at 7.5-7.7 MB/s for a set 8 beside it, three tries). Its 2 s limit is 18x
# the lag seen in CI-sized runs here (105-113 ms).
@pytest.mark.slow
def test_120_cards_every_5_s_on_two_servers_are_current_within_2_s(pair):
    """The CI-sized run: 120 cards, an event every 5 s each, for 15 s (bench/live_load.py runs the
    full 2 minutes)."""
    a, b, db = pair
    toks = {f"lab-{i:02d}": token_for(db, f"lab-{i:02d}") for i in range(12)}
    out = simulate([a.url, b.url], toks, cards=120, every=5.0, seconds=15.0, settle=4.0)
    f = out.figures()
    print("live lag:", f)
    assert f["events"] == 120 * 3 and not out.failed, out.failed[:3]
    assert not out.unseen, out.unseen[:3]                     # nothing dropped
    assert f["lag_max_s"] <= 2.0, f
    with open_store(db) as s:                                 # one row per card, the last event's
        rows = dict(((st, k), d) for st, k, d in s._db.execute(
            "SELECT station, card_key, done FROM live_cards WHERE station LIKE 'lab-%'"))
    assert len(rows) == 120 and set(rows.values()) == {300_000_000}


def test_postgresql_restarting_under_load_loses_nothing_and_the_pages_catch_up(pg, pair, tmp_path):
    a, b, db = pair
    toks = {st: token_for(db, st) for st in ("r-a", "r-b")}
    before = stored(db)
    os.set_blocking(b.proc.stderr.fileno(), False)
    os.set_blocking(a.proc.stderr.fileno(), False)
    stream = EventStream(b.url, "r-a")             # r-a's page on the server r-a does not share with
    assert stream.connected.wait(20)
    progress = {"k": 0, "stop": False, "last_ok": None}

    def sender():
        conn = _conn(a.url, timeout=10)
        while not progress["stop"]:
            k = progress["k"]
            try:
                status = post_live(conn, toks["r-a"], body("r-a", 0, k, announce=True))
            except OSError:
                conn.close()
                conn = _conn(a.url, timeout=10)
                status = 0
            if status == 200:
                progress["last_ok"] = k
            progress["k"] = k + 1
            time.sleep(0.1)
        conn.close()
    t = threading.Thread(target=sender, daemon=True)
    t.start()
    procs = run_stations({"r-a": a, "r-b": b}, toks, 40, tmp_path)
    try:
        time.sleep(1.0)
        pg.kill()                                  # PostgreSQL goes away under load...
        time.sleep(2.0)
        pg.restart()                               # ...and comes back on the same port
        ids = finish(procs)
    finally:
        for _, p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        end = time.monotonic() + 30
        while progress["last_ok"] is None or progress["k"] - progress["last_ok"] > 1:
            if time.monotonic() > end:
                break
            time.sleep(0.1)
        progress["stop"] = True
        t.join(timeout=20)
    last = progress["last_ok"]
    assert last is not None
    for st, (home, _) in procs.items():            # what waited in the outbox goes now
        r = cli("sync", "--share", (a if st == "r-a" else b).url, "--token", toks[st], home=home)
        assert r.returncode == 0, r.stderr
    counts = stored(db)
    new = [i for i in counts if i not in before]
    assert sorted(new) == sorted(ids["r-a"] + ids["r-b"]) and all(counts[i] == 1 for i in new)
    # the other server's page caught up with the last event, on the stream it kept open
    want = body("r-a", 0, last, announce=False)["done"]
    end = time.monotonic() + 20
    while time.monotonic() < end and not [d for _, d in stream.seen("card") if d["done"] == want]:
        time.sleep(0.1)
    stream.close()
    assert [d for _, d in stream.seen("card") if d["done"] == want], stream.seen("card")[-3:]
    said = _said(b)          # its LISTEN was lost, then made again
    assert "live updates paused" in said and "connecting again" in said, said
    new_run = make_result(serial="after-restart")          # and new rows reach it again
    s2 = EventStream(b.url, "r-a")
    try:
        assert s2.connected.wait(20)
        assert upload(a, toks["r-a"], new_run.to_dict())[0] == 200
        end = time.monotonic() + 10
        while time.monotonic() < end and not [d for _, d in s2.seen("row") if d["id"] == new_run.id]:
            time.sleep(0.05)
        assert [d for _, d in s2.seen("row") if d["id"] == new_run.id], (s2.events, _said(a), _said(b))
    finally:
        s2.close()


def test_one_server_on_sqlite_streams_progress_and_rows_in_process(tmp_path):
    db = str(tmp_path / "one.sqlite3")
    srv = ServeProcess(db).start()
    tok = token_for(db, "solo")
    stream = EventStream(srv.url, "solo")
    try:
        assert stream.connected.wait(20)
        conn = _conn(srv.url)
        assert post_live(conn, tok, body("solo", 1, 0, announce=True)) == 200
        assert post_live(conn, tok, body("solo", 1, 1, announce=False)) == 200
        conn.close()
        r = make_result(serial="solo-1")
        assert upload(srv, tok, r.to_dict())[0] == 200
        end = time.monotonic() + 10
        while time.monotonic() < end and not (stream.seen("row") and
                                              [d for _, d in stream.seen("card") if d["done"] == 200_000_000]):
            time.sleep(0.05)
        assert [d["id"] for _, d in stream.seen("row")] == [r.id]
        assert [d for _, d in stream.seen("card") if d["key"] == "solo/card-1" and d["done"] == 200_000_000]
        r2 = make_result(serial="solo-2")
        assert upload(srv, tok, r2.to_dict())[0] == 200
        # a page rendered with r only, whose stream opens after r2 landed: it is sent r2 first
        late = EventStream(srv.url, "solo", f"?after={r.id}")
        try:
            assert late.connected.wait(20)
            end = time.monotonic() + 10
            while time.monotonic() < end and not late.seen("now"):
                time.sleep(0.05)
            assert [d["id"] for _, d in late.seen("row")] == [r2.id]
            assert [d["key"] for _, d in late.seen("card")] == ["solo/card-1"]        # the cards as they are
        finally:
            late.close()
    finally:
        stream.close()
        srv.stop()
