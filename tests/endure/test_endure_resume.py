"""Days without losing anything, on emulated cards: a run killed with SIGKILL mid-round and one
whose card is pulled and put back end with the totals of an uninterrupted run (give or take one
slice); another card in its place is never written; --resume without a state, or on another card."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cardbench.emulate import EmulatedCard
from cardbench.endure import EndureOptions, resume_endurance, run_endurance
from cardbench.endure.state import load_state
from cardbench.engine.buffers import aligned_buffer, release
from cardbench.engine.data import DataFile
from cardbench.errors import UsageError
from cardbench.target import open_device_target
from endure_helpers import SIZE, needs_emulator, spec

pytestmark = [needs_emulator, pytest.mark.slow]

CHILD = """
import sys
from cardbench.endure import EndureOptions, run_endurance
from cardbench.target import open_device_target
def ev(name, d):
    if name == "reading":
        print("reading", d["round"], flush=True)
run_endurance(open_device_target(sys.argv[1], whole_device=True),
              EndureOptions(rounds=4, state_dir=sys.argv[2], events=ev, probe=False))
"""


def _totals(doc):
    return len(doc["rounds"]), doc["bytes_written"], doc["ended"]


def _redone(doc):
    return sum(r["slices_redone"] for r in doc["rounds"])


def test_sigkill_mid_round_resumes(tmp_path):
    state = str(tmp_path / "state")
    with EmulatedCard(spec()) as card:
        card.set(read_rate=40e6)              # a read-back of 0.5 s: the kill lands inside it
        env = dict(os.environ, PYTHONPATH=os.path.join(os.getcwd(), "src"))
        child = subprocess.Popen([sys.executable, "-c", CHILD, card.device, state], stdout=subprocess.PIPE,
                                 text=True, env=env)
        try:
            for line in child.stdout:         # type: ignore[union-attr]
                if line.split() == ["reading", "2"]:
                    time.sleep(0.2)
                    child.send_signal(signal.SIGKILL)
                    break
            assert child.wait(timeout=30) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        card_uuid = os.listdir(state)[0][:-5]
        saved = load_state(card_uuid, state)
        assert saved["current"]["round"] == 2 and saved["current"]["phase"] == "read"
        card.set(read_rate=10e9)
        doc = resume_endurance(None, EndureOptions(state_dir=state, probe=False))
    assert _totals(doc) == (4, 4 * SIZE, "rounds") and doc["complete"]
    assert _redone(doc) == 1 and doc["rounds"][1]["slices_redone"] == 1
    assert [r["bad_total"] for r in doc["rounds"]] == [0, 0, 0, 0]


def _pull_and_put_back(card) -> None:
    card.pull()
    time.sleep(0.5)
    card.reinsert()


@pytest.mark.parametrize("when", ["before the read-back", "while it writes"])
def test_pulled_card_pauses_and_goes_on(tmp_path, when):
    seen: list[tuple[str, dict]] = []
    lines: list[str] = []
    with EmulatedCard(spec()) as card:
        if when == "while it writes":
            card.set(write_rate=20e6)           # round 2's write lasts ~1 s: pulled 0.3 s into it

        def ev(name, details):
            seen.append((name, details))
            if when == "before the read-back" and name == "reading" and details["round"] == 2:
                card.pull()
                threading.Timer(0.5, card.reinsert).start()
            elif when == "while it writes" and name == "round" and details["round"]["round"] == 1:
                threading.Timer(0.3, _pull_and_put_back, args=(card,)).start()
        doc = run_endurance(open_device_target(card.device, whole_device=True),
                            EndureOptions(rounds=3, state_dir=str(tmp_path / "s"), events=ev, say=lines.append,
                                          probe=False, timeout=30))
    names = [n for n, _ in seen]
    assert "paused" in names and "back" in names and names.index("paused") < names.index("back")
    assert _totals(doc) == (3, 3 * SIZE, "rounds") and doc["complete"]
    assert _redone(doc) == 1 and [r["bad_total"] for r in doc["rounds"]] == [0, 0, 0]
    assert any("paused" in line for line in lines)


def _digest(device: str) -> str:
    h = hashlib.sha256()
    buf = aligned_buffer(1 << 20)
    try:
        with DataFile.open(device, write=False) as f:
            for off in range(0, SIZE, 1 << 20):
                f.read_exact(buf, off)
                h.update(buf)
        return h.hexdigest()
    finally:
        release(buf)


def test_swapped_card_is_refused_then_the_right_one_resumes(tmp_path):
    state = str(tmp_path / "s")
    lines: list[str] = []
    with EmulatedCard(spec()) as card, EmulatedCard(spec(name="other")) as other:
        before = _digest(other.device)
        other.pull()                               # the other card is put in while this one is out
        def ev(name, details):
            if name == "reading" and details["round"] == 1:
                card.pull()
                threading.Timer(0.3, other.reinsert).start()
        doc = run_endurance(open_device_target(card.device, whole_device=True),
                            EndureOptions(rounds=2, state_dir=state, events=ev, say=lines.append, probe=False,
                                          timeout=3))
        assert doc["ended"] == "dead" and doc["verdict"] == "dead" and doc["rounds"] == []
        assert any("is not the card of this run" in line and "refused, nothing written" in line for line in lines)
        assert _digest(other.device) == before      # never written
        # --resume with the other card: refused in one line
        with pytest.raises(UsageError, match="is not the card of a saved endurance run"):
            resume_endurance(open_device_target(other.device, whole_device=True),
                             EndureOptions(state_dir=state, probe=False))
        card.reinsert()
        doc = resume_endurance(open_device_target(card.device, whole_device=True),
                               EndureOptions(state_dir=state, probe=False))
    assert _totals(doc) == (2, 2 * SIZE, "rounds") and _redone(doc) == 1


def test_resume_without_a_state(tmp_path):
    with pytest.raises(UsageError, match="no endurance run to resume"):
        resume_endurance(None, EndureOptions(state_dir=str(tmp_path / "none")))
