"""Issue 31, section 3: many cards at once. Four emulated cards (real loop devices behind FUSE
servers) endure at once from one call, each in its own thread; each round of each card is stored
in a real SQLite file as it ends; Ctrl-C stops all four cleanly, each document ended
"interrupted" and stored; four throttled cards each keep the speed they have alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.endure import EndureOptions, run_endurance
from cardbench.endure.many import endure_many
from cardbench.record import record
from cardbench.report.endurance import live_table
from cardbench.report.terminal import to_text
from cardbench.store import open_store
from cardbench.target import open_device_target
from endure_helpers import needs_emulator

pytestmark = [needs_emulator, pytest.mark.slow]

MiB = 1 << 20
#: an unusual size (no other test's emulated cards are 21 MiB)
SIZE = 21 * MiB
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src")


def cards(stack: ExitStack, n: int = 4, **kw) -> list[EmulatedCard]:
    rates = {"write_rate": 10e9, "read_rate": 10e9, **kw}
    return [stack.enter_context(EmulatedCard(CardSpec(size=SIZE, name=f"many{i}", **rates))) for i in range(n)]


def test_four_cards_endure_at_once_each_round_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    db = str(tmp_path / "a.db")
    saved: list[dict] = []
    shown: list[str] = []

    def save(doc: dict) -> None:
        saved.append(doc)
        assert record(doc, db).stored

    with ExitStack() as stack:
        emulated = cards(stack)
        targets = [open_device_target(c.device, whole_device=True) for c in emulated]
        opts = EndureOptions(rounds=3, state_dir=str(tmp_path / "state"))
        result = endure_many(targets, opts, save=save,
                             show=lambda rows: shown.append(to_text([live_table([r.as_dict() for r in rows])], 80)))
    assert not result.interrupted and len(result.docs) == 4
    assert [r.device for r in result.rows] == [c.device for c in emulated]
    # four cards without a serial share an identity (their size): each row's key is still its own
    assert len({r.key for r in result.rows}) == 4 and all(r.identity["capacity_bytes"] == SIZE for r in result.rows)
    for row, doc in zip(result.rows, result.docs, strict=True):
        assert row.state == "ended" and row.ended == "rounds" and row.round == 3
        assert doc["complete"] and doc["ended"] == "rounds" and doc["device"] == row.device
        assert [r["round"] for r in doc["rounds"]] == [1, 2, 3] and doc["bytes_written"] == 3 * SIZE
        assert doc["method"]["fake_check"]["verdict"] == "genuine"
    # each card's rounds were saved as they ended (3 round documents, then the last), one record each
    for doc in result.docs:
        mine = [d for d in saved if d["id"] == doc["id"]]
        assert [len(d["rounds"]) for d in mine] == [1, 2, 3, 3] and mine[-1] == doc
    assert len({d["card_uuid"] for d in result.docs}) == 4
    with open_store(db) as st:
        stored = st.records("endurance")
    assert sorted(d["id"] for d in stored) == sorted(d["id"] for d in result.docs)
    assert all(d["complete"] and len(d["rounds"]) == 3 for d in stored)
    # the live table: every card, at 80 columns
    last = shown[-1]
    assert max(len(x) for x in last.splitlines()) <= 80 and last.count("rounds") == 4, last


def test_ctrl_c_stops_every_card_cleanly_each_document_stored(tmp_path):
    """`cardbench endure` on four cards, Ctrl-C once each has stored a round: exit 130, every card
    ended "interrupted" after its slice, its document printed and stored."""
    db = str(tmp_path / "a.db")
    env = dict(os.environ, PYTHONPATH=SRC, XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "st"),
               PYTHONFAULTHANDLER="1")
    for v in ("CARDBENCH_DB", "CARDBENCH_SHARE", "CARDBENCH_TOKEN"):
        env.pop(v, None)
    with ExitStack() as stack:
        emulated = cards(stack, write_rate=40e6, read_rate=80e6)     # a round: ~0.8 s
        proc = subprocess.Popen([sys.executable, "-m", "cardbench", "endure", *[c.device for c in emulated],
                                 "--confirm", str(SIZE), "--json", "--db", db], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while True:                            # every card has stored a round
                if proc.poll() is not None or time.monotonic() >= deadline:
                    if proc.poll() is None:        # still running: its threads' stacks, then its output
                        proc.send_signal(signal.SIGABRT)
                    out, err = proc.communicate(timeout=60)
                    pytest.fail(f"not every card stored a round within 120 s (exit {proc.returncode}):\n"
                                f"{err[-6000:]}")
                if os.path.exists(db):
                    with open_store(db) as st:
                        if len(st.records("endurance")) == 4:
                            break
                time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGABRT)          # PYTHONFAULTHANDLER: every thread's stack
                out, err = proc.communicate(timeout=30)
                pytest.fail(f"Ctrl-C did not end it within 60 s:\n{err[-6000:]}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err and "--resume" in err
    docs = json.loads(out)
    assert len(docs) == 4 and {d["ended"] for d in docs} == {"interrupted"}
    assert all(len(d["rounds"]) >= 1 and not d["complete"] for d in docs)
    with open_store(db) as st:
        stored = {d["id"]: d for d in st.records("endurance")}
    assert {i: d["ended"] for i, d in stored.items()} == {d["id"]: "interrupted" for d in docs}
    assert all(stored[d["id"]]["rounds"] == d["rounds"] for d in docs)


@pytest.mark.timing
def test_four_throttled_cards_at_once_keep_their_speed_alone(tmp_path):
    """Threads are enough: each of four cards paced at 30/60 MB/s keeps (at least 80% of) the rate
    one has alone, measured the same minute (the emulator's own pace sags on a loaded machine)."""
    rates = {"write_rate": 30e6, "read_rate": 60e6}
    with ExitStack() as stack:
        emulated = cards(stack, **rates)
        alone = run_endurance(open_device_target(emulated[0].device, whole_device=True),
                              EndureOptions(rounds=2, state_dir=str(tmp_path / "s0"), probe=False))
        together = endure_many([open_device_target(c.device, whole_device=True) for c in emulated],
                               EndureOptions(rounds=2, state_dir=str(tmp_path / "s1"), probe=False))
    w0 = alone["rounds"][-1]["write_bytes_per_s"]
    r0 = alone["rounds"][-1]["read_bytes_per_s"]
    figures = [(d["rounds"][-1]["write_bytes_per_s"], d["rounds"][-1]["read_bytes_per_s"]) for d in together.docs]
    print(f"alone: write {w0 / 1e6:.1f} MB/s, read {r0 / 1e6:.1f} MB/s; four at once: "
          + ", ".join(f"{w / 1e6:.1f}/{r / 1e6:.1f}" for w, r in figures))
    assert w0 > 0.5 * rates["write_rate"] and r0 > 0.5 * rates["read_rate"]
    for w, r in figures:
        assert w >= 0.8 * w0 and r >= 0.8 * r0, (w0, r0, figures)


def _cli(tmp_path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC, XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "st"))
    for v in ("CARDBENCH_DB", "CARDBENCH_SHARE", "CARDBENCH_TOKEN", "CARDBENCH_DEBUG"):
        env.pop(v, None)
    return subprocess.run([sys.executable, "-m", "cardbench", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_one_command_four_cards_shared_with_a_station_server(tmp_path):
    """`cardbench endure DEV DEV DEV DEV --share URL`: four documents, complete, stored here and on
    the station server (each round through record(): store, else outbox; shared)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "server"))
    from serve_helpers import ServeProcess, token_for

    station = str(tmp_path / "station.db")
    token = token_for(station, "bench-1")
    srv = ServeProcess(station).start()
    try:
        with ExitStack() as stack:
            emulated = cards(stack)
            db = str(tmp_path / "a.db")
            r = _cli(tmp_path, "endure", *[c.device for c in emulated], "--rounds", "2", "--confirm", str(SIZE),
                     "--json", "--db", db, "--share", srv.url, "--token", token)
        assert r.returncode == 0, r.stderr
        docs = json.loads(r.stdout)
        assert [d["device"] for d in docs] == [c.device for c in emulated]
        assert all(d["complete"] and d["ended"] == "rounds" and len(d["rounds"]) == 2 for d in docs)
        with open_store(db) as st:
            assert sorted(x["id"] for x in st.records("endurance")) == sorted(d["id"] for d in docs)
        with urllib.request.urlopen(srv.url + "/api/v1/records/endurance", timeout=10) as resp:
            served = json.loads(resp.read())["records"]
        assert sorted((x["id"], len(x["rounds"]), x["complete"]) for x in served) == \
            sorted((d["id"], 2, True) for d in docs)
        # the station's live page was told what its cards did (the last: a card's end)
        with urllib.request.urlopen(srv.url + "/live/bench-1", timeout=10) as resp:
            page = resp.read().decode()
        assert page.count("finished: rounds") == 4, page
        assert "Last: ? " not in page and "(endurance run)" in page, page
        for d in docs:
            assert d["device"] in page, (d["device"], page)
    finally:
        srv.stop()


def test_each_card_must_be_confirmed_before_any_is_written(tmp_path):
    with ExitStack() as stack:
        a, b = cards(stack, n=2)
        before = a.status()["counters"]
        r = _cli(tmp_path, "endure", a.device, b.device, "--rounds", "1", "--confirm", "12345")
        assert r.returncode == 4 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "12345" in r.stderr or "confirm" in r.stderr
        # no --confirm and no terminal to ask on: refused, naming what to pass
        r = _cli(tmp_path, "endure", a.device, b.device, "--rounds", "1")
        assert r.returncode == 4 and "--confirm" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert a.status()["counters"]["bytes_written"] == before["bytes_written"] == 0
    r = _cli(tmp_path, "endure", "/dev/null", "--all-cards")
    assert r.returncode == 2 and "DEVICEs or --all-cards, not both" in r.stderr
