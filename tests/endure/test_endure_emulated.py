"""Endurance runs on emulated cards (real loop devices behind a FUSE server, not throttled):
clean rounds, each class of bad sector put there by hand and named, the stop rules, a card that
refuses writes, the host's disk filling up."""

from __future__ import annotations

import os
import subprocess

import pytest

from cardbench.emulate import EmulatedCard
from cardbench.endure import EndureOptions, StateError, run_endurance
from cardbench.endure.sectors import new_card_uuid
from cardbench.kinds.endurance import problem
from cardbench.target import open_device_target
from endure_helpers import SECTORS, SIZE, garbage, needs_emulator, put, sectors_of, spec

pytestmark = [needs_emulator, pytest.mark.slow]


def _opts(tmp_path, **kw) -> EndureOptions:
    events: list[tuple[str, dict]] = []
    lines: list[str] = []
    user_events = kw.pop("events", None)

    def ev(name: str, details: dict) -> None:
        events.append((name, details))
        if user_events is not None:
            user_events(name, details)

    opts = EndureOptions(state_dir=str(tmp_path / "state"), say=lines.append, events=ev, **kw)
    opts.seen = events        # type: ignore[attr-defined]
    opts.lines = lines        # type: ignore[attr-defined]
    return opts


def test_clean_rounds(tmp_path):
    with EmulatedCard(spec()) as card:
        opts = _opts(tmp_path, rounds=3)
        doc = run_endurance(open_device_target(card.device, whole_device=True), opts)
    assert doc["ended"] == "rounds" and doc["complete"] and doc["verdict"] == "no error"
    assert [r["round"] for r in doc["rounds"]] == [1, 2, 3]
    assert doc["bytes_written"] == 3 * SIZE and doc["full_writes"] == 3.0
    assert all(r["bad_total"] == 0 and r["write_bytes_per_s"] > 0 and r["read_bytes_per_s"] > 0
               for r in doc["rounds"])
    assert doc["first_error_round"] is None and doc["milestones"] == []
    assert doc["method"]["fake_check"]["verdict"] == "genuine"
    assert "3 full writes (59.8 MB) with no error" in doc["answer"]
    assert problem(doc) is None                # the record kind takes it as it is
    # a round event per round, each with the document so far under the run's one id
    rounds = [d for n, d in opts.seen if n == "round"]
    assert [len(d["document"]["rounds"]) for d in rounds] == [1, 2, 3]
    assert {d["document"]["id"] for d in rounds} == {doc["id"]}
    assert all(not d["document"]["complete"] and d["document"]["ended"] is None for d in rounds)


def test_each_class_named(tmp_path):
    """Round 3's read-back meets, at known places, each class; round 4 writes them over again."""
    other = new_card_uuid()
    at = {k: (k + 1) * MB1 for k in range(7)}

    with EmulatedCard(spec()) as card:
        def damage(name: str, details: dict) -> None:
            if name == "reading" and details["round"] == 3:
                me = run["uuid"]
                put(card.device, at[0], bytes(4096))                              # erased (00)
                put(card.device, at[1], b"\xff" * 4096)                           # erased (FF)
                put(card.device, at[2], sectors_of(me, at[2], 2))                 # stale (round 2)
                put(card.device, at[3], sectors_of(me, at[3] + MB1, 3))           # misplaced
                put(card.device, at[4], sectors_of(other, at[4], 3))              # foreign
                put(card.device, at[5], garbage())                                # corrupt
                card.set(errors=[(at[6], at[6] + 4096, "read")])                  # unreadable
            elif name == "round" and details["round"]["round"] == 3:
                card.set(errors=[])

        run: dict = {}
        opts = _opts(tmp_path, rounds=4, events=damage)
        orig = opts.events

        def first(name, details):
            if name == "reading" and "uuid" not in run:
                run["uuid"] = _uuid_of(tmp_path)
            orig(name, details)
        opts.events = first
        doc = run_endurance(open_device_target(card.device, whole_device=True), opts)
    r3 = doc["rounds"][2]
    assert r3["bad_sectors"] == {"erased": 16, "stale": 8, "misplaced": 8, "foreign": 8, "corrupt": 8,
                                 "unreadable": 8}
    assert r3["bad_total"] == 56 and r3["bad_fraction"] == pytest.approx(56 / SECTORS)
    assert [r["bad_total"] for r in doc["rounds"]] == [0, 0, 56, 0]
    assert doc["first_error_round"] == 3 and doc["verdict"] == "worn"
    assert [(m["what"], m["round"]) for m in doc["milestones"]] == [("first error", 3), ("0.1% bad", 3)]
    assert doc["milestones"][0]["bytes_written"] == 3 * SIZE
    assert doc["answer"].startswith("19.9 MB card: first error after 3 full writes (59.8 MB): erased sectors")
    assert problem(doc) is None


MB1 = 1 << 20


def _uuid_of(tmp_path) -> str:
    names = [n for n in os.listdir(tmp_path / "state") if n.endswith(".json")]
    assert len(names) == 1
    return names[0][:-5]


def test_bad_limit_ends_it(tmp_path):
    """A nineteenth of the card unreadable: --until-bad 5% ends the run at round 1."""
    with EmulatedCard(spec()) as card:
        card.set(errors=[(4 * MB1, 5 * MB1, "read")])
        doc = run_endurance(open_device_target(card.device, whole_device=True),
                            _opts(tmp_path, rounds=5, until_bad=0.05, probe=False))
    assert doc["ended"] == "bad_limit" and len(doc["rounds"]) == 1
    assert doc["rounds"][0]["bad_sectors"]["unreadable"] == MB1 // 512
    assert [m["what"] for m in doc["milestones"]] == ["first error", "0.1% bad", "1% bad"]


def test_stop_event_interrupts(tmp_path):
    import threading
    stop = threading.Event()

    def ev(name, details):
        if name == "round" and details["round"]["round"] == 2:
            stop.set()
    with EmulatedCard(spec()) as card:
        doc = run_endurance(open_device_target(card.device, whole_device=True),
                            _opts(tmp_path, stop=stop, events=ev))
    assert doc["ended"] == "interrupted" and not doc["complete"] and len(doc["rounds"]) == 2
    assert doc["verdict"] == "interrupted" and "so far" in doc["answer"]


def test_writes_refused_everywhere_is_read_only(tmp_path):
    """Every write fails (a card that went read-only) in round 1: the finding, in one line."""
    with EmulatedCard(spec()) as card:
        card.set(errors=[(0, SIZE, "write")])
        doc = run_endurance(open_device_target(card.device, whole_device=True), _opts(tmp_path, rounds=3, probe=False))
    assert doc["ended"] == "read_only" and doc["verdict"] == "read-only" and doc["rounds"] == []
    assert doc["answer"] == "19.9 MB card: read-only before the first round ended; nothing could be worn"


def test_host_disk_full(tmp_path):
    """The state cannot be saved (a full tmpfs): one line, the rounds measured kept in ``partial``."""
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", str(d)], check=True)
    try:
        with EmulatedCard(spec()) as card:
            with pytest.raises(StateError) as e:
                run_endurance(open_device_target(card.device, whole_device=True),
                              EndureOptions(rounds=200, state_dir=str(d), probe=False))
        assert "the host's disk is full" in e.value.message and "\n" not in e.value.message
        doc = e.value.partial
        assert doc["rounds"] and doc["error"] == e.value.message and not doc["complete"]
    finally:
        subprocess.run(["umount", str(d)], check=False)


def test_hours_end_it_and_progress_says_how_far(tmp_path):
    """--hours ends the run at the end of the round that passed it; progress events on the way,
    at most every 0.5 s, with the contract's fields."""
    with EmulatedCard(spec()) as card:
        card.set(write_rate=40e6, read_rate=80e6)       # a round of ~0.75 s
        opts = _opts(tmp_path, hours=1.0 / 3600, probe=False)
        doc = run_endurance(open_device_target(card.device, whole_device=True), opts)
    assert doc["ended"] == "hours" and 1 <= len(doc["rounds"]) <= 3 and doc["complete"]
    progress = [d for n, d in opts.seen if n == "progress"]
    assert progress and set(progress[0]) == {"round", "phase", "done_bytes", "round_bytes", "bytes_written",
                                             "rate_bytes_per_s", "bad_fraction", "eta_s"}
    assert all(0 < p["done_bytes"] <= SIZE and p["round_bytes"] == SIZE for p in progress)
    assert all(p["eta_s"] is not None and p["eta_s"] <= 1.0 for p in progress)
