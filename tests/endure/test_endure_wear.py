"""Endurance runs on emulated cards that wear out (the emulator's wear model, its truth from the
control socket): each failure mode is named, its first round is within one round of the model's
setting, and the milestones come in order."""

from __future__ import annotations

import pytest

from cardbench.emulate import EmulatedCard
from cardbench.endure import EndureOptions, run_endurance
from cardbench.target import open_device_target
from endure_helpers import needs_emulator, spec

pytestmark = [needs_emulator, pytest.mark.slow]

#: the class each mode shows, and what else it may
NAMED = {"stale": ("stale", set()), "eio": ("unreadable", set()), "ff": ("erased", set()),
         "misplace": ("stale", {"misplaced"})}


def _run(tmp_path, mode: str, **kw):
    with EmulatedCard(spec(wear_cycles=4, wear_spread=0.5, wear_seed=3, wear_mode=mode)) as card:
        doc = run_endurance(open_device_target(card.device, whole_device=True),
                            EndureOptions(rounds=12, probe=False, state_dir=str(tmp_path / "s"), **kw))
        truth = card.wear()
    return doc, truth


def _milestones_in_order(doc) -> None:
    ms = doc["milestones"]
    assert ms and ms[0]["what"] == "first error" and ms[0]["round"] == doc["first_error_round"]
    assert [m["bad_fraction"] for m in ms] == sorted(m["bad_fraction"] for m in ms)
    assert [m["round"] for m in ms] == sorted(m["round"] for m in ms)
    assert [m["bytes_written"] for m in ms] == sorted(m["bytes_written"] for m in ms)


@pytest.mark.parametrize("mode", sorted(NAMED))
def test_each_mode_is_named_at_its_round(tmp_path, mode):
    doc, truth = _run(tmp_path, mode)
    expected = min(limit for limit, _ in truth["limits"]) + 1        # the pass that wears the first block
    assert abs(doc["first_error_round"] - expected) <= 1, (doc["first_error_round"], truth["limits"])
    first = doc["rounds"][doc["first_error_round"] - 1]["bad_sectors"]
    named, also = NAMED[mode]
    assert first[named] > 0
    assert {k for k, v in first.items() if v} <= {named} | also
    assert doc["verdict"] == "worn" and doc["ended"] == "bad_limit"
    _milestones_in_order(doc)
    assert [m["what"] for m in doc["milestones"]] == ["first error", "0.1% bad", "1% bad", "10% bad", "25% bad",
                                                      "50% bad"]
    if mode == "stale":
        assert "stale data in" in doc["answer"] and "(lost writes)" in doc["answer"]


def test_misplace_shows_misplaced_sectors(tmp_path):
    doc, _ = _run(tmp_path, "misplace")
    assert sum(r["bad_sectors"]["misplaced"] for r in doc["rounds"]) > 0


def test_read_only_ends_it_with_that_finding(tmp_path):
    doc, truth = _run(tmp_path, "readonly")
    expected = min(limit for limit, _ in truth["limits"]) + 1
    assert truth["read_only"] and doc["ended"] == "read_only" and doc["verdict"] == "read-only"
    # the round that turned it read-only does not end: the rounds before it are all there, clean
    assert abs(len(doc["rounds"]) + 1 - expected) <= 1
    assert all(r["bad_total"] == 0 for r in doc["rounds"][:-1])
    assert "turned read-only" in doc["answer"]
