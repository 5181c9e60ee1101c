"""`cardbench endure` on emulated cards: the JSON document, a line per round, each round stored
under the run's one record id (a real SQLite file), a plain run on a card with a saved run goes on
with it, --resume without a state, a card that refuses every write."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading

import pytest

from cardbench.emulate import EmulatedCard
from cardbench.endure import EndureOptions, run_endurance
from cardbench.record import record
from cardbench.target import open_device_target
from endure_helpers import SIZE, needs_emulator, spec
from realparts import call_cli

pytestmark = [needs_emulator, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.delenv("CARDBENCH_DB", raising=False)
    monkeypatch.delenv("CARDBENCH_SHARE", raising=False)


def _stored(db) -> list[dict]:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT document FROM records WHERE kind = 'endurance'").fetchall()
    return [json.loads(r[0]) for r in rows]


def test_json_and_each_round_stored_once(tmp_path):
    db = str(tmp_path / "store.sqlite3")
    with EmulatedCard(spec()) as card:
        p = call_cli("endure", card.device, "--rounds", "3", "--confirm", str(SIZE), "--json", "--db", db)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "cardbench.endurance/1" and doc["ended"] == "rounds" and len(doc["rounds"]) == 3
    stored = _stored(db)
    assert len(stored) == 1 and stored[0]["id"] == doc["id"] and len(stored[0]["rounds"]) == 3
    assert stored[0]["complete"]


def test_a_growing_record_replaces_its_older_self(tmp_path):
    """Stored at each round's end (store.save_record replaces by id): one row, the newest document."""
    db = str(tmp_path / "store.sqlite3")
    seen = []

    def ev(name, details):
        if name == "round":
            rec = record(details["document"], db)
            assert rec.stored, rec.problem()
            seen.append([len(d["rounds"]) for d in _stored(db)])
    with EmulatedCard(spec()) as card:
        doc = run_endurance(open_device_target(card.device, whole_device=True),
                            EndureOptions(rounds=3, events=ev, probe=False, state_dir=str(tmp_path / "s")))
    assert seen == [[1], [2], [3]]
    record(doc, db)
    assert [(d["id"], len(d["rounds"]), d["complete"]) for d in _stored(db)] == [(doc["id"], 3, True)]


def test_table_lines_and_a_plain_run_goes_on_with_a_saved_one(tmp_path):
    stop = threading.Event()

    def ev(name, details):
        if name == "round":
            stop.set()
    with EmulatedCard(spec()) as card:
        first = run_endurance(open_device_target(card.device, whole_device=True),
                              EndureOptions(rounds=2, events=ev, stop=stop, probe=False))
        assert first["ended"] == "interrupted" and len(first["rounds"]) == 1
        p = call_cli("endure", card.device, "--no-save")
    assert p.returncode == 0, p.stderr
    assert "going on with it (--restart starts over)" in p.stderr
    assert "round    2: write" in p.stderr and all(len(line) <= 80 for line in p.stderr.splitlines()
                                                     if line.startswith("round"))
    assert p.stdout.startswith("19.9 MB card: 2 full writes (39.8 MB) with no error")
    assert "ended: rounds" in p.stdout


def test_resume_without_a_state_is_one_line(tmp_path):
    p = call_cli("endure", "--resume", "--no-save")
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "cardbench: no endurance run to resume: this host has no saved state"]


def test_a_card_refusing_every_write(tmp_path):
    with EmulatedCard(spec()) as card:
        card.set(errors=[(0, SIZE, "write")])
        p = call_cli("endure", card.device, "--rounds", "2", "--confirm", str(SIZE), "--no-save")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "19.9 MB card: read-only before the first round ended; nothing could be worn"


def test_a_mounted_card_is_refused(tmp_path):
    with EmulatedCard(spec()) as card, card.filesystem("ext4"):
        p = call_cli("endure", card.device, "--rounds", "1", "--confirm", str(SIZE), "--no-save")
    assert p.returncode == 4 and len(p.stderr.strip().splitlines()) == 1 and "mounted" in p.stderr


def test_ctrl_c_keeps_the_rounds_and_resume_goes_on(tmp_path):
    """SIGINT mid-round: exit 130, the document so far stored (ended interrupted), the state kept;
    `endure --resume` ends the run with every round there."""
    db = str(tmp_path / "store.sqlite3")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.getcwd(), "src"))
    with EmulatedCard(spec()) as card:
        card.set(write_rate=40e6, read_rate=80e6)
        proc = subprocess.Popen([sys.executable, "-m", "cardbench", "endure", card.device, "--rounds", "3",
                                 "--confirm", str(SIZE), "--db", db], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)
        try:
            for line in proc.stderr:          # type: ignore[union-attr]
                if line.startswith("round    1:"):
                    break
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err
        stored = _stored(db)
        assert len(stored) == 1 and stored[0]["ended"] == "interrupted" and len(stored[0]["rounds"]) >= 1
        card.set(write_rate=10e9, read_rate=10e9)
        p = call_cli("endure", "--resume", "--db", db, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["id"] == stored[0]["id"] and len(doc["rounds"]) == 3 and doc["bytes_written"] == 3 * SIZE
    assert [(d["id"], len(d["rounds"]), d["ended"]) for d in _stored(db)] == [(doc["id"], 3, "rounds")]
