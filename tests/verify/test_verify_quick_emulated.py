"""Quick mode on emulated cards: real loop devices, real O_DIRECT I/O, the real preserve journal."""

from __future__ import annotations

import os
import subprocess

import pytest

from cardbench.errors import Interrupted, SafetyRefusal
from cardbench.target import open_target
from cardbench.verify.doc import SCHEMA
from cardbench.verify.quick import verify_device
from verify_helpers import Trigger, card, needs_emulator, scribble, sha256_device

MiB = 1 << 20
pytestmark = [needs_emulator, pytest.mark.needs_root]


def check_doc(doc: dict) -> None:
    assert doc["schema"] == SCHEMA
    for key in ("verdict", "announced_bytes", "usable_bytes", "kind", "bad_ranges", "fix_command", "method",
                "timings", "device", "complete", "error"):
        assert key in doc
    for key in ("seconds", "write_seconds", "read_seconds"):
        assert doc["timings"][key] >= 0
    assert doc["method"]["positions_sampled"] > 0 and doc["method"]["sample_bytes"] > 0


@pytest.mark.parametrize("size,real,mode,cache", [
    (512 * MiB, 128 * MiB, "wraparound", 0),
    (512 * MiB, 200 * MiB + 3584, "wraparound", 0),
    (1024 * MiB, 300 * MiB, "drop", 0),
    (256 * MiB, 250 * MiB, "drop", 0),
    # a write cache bigger than a naive probe writes (64 MiB at 4x the card's rate)
    (512 * MiB, 96 * MiB, "drop", 64 * MiB),
    (512 * MiB, 300 * MiB, "wraparound", 64 * MiB),
])
@pytest.mark.slow
def test_counterfeit_destructive(size, real, mode, cache, journal):
    kw = dict(cache_bytes=cache, cache_rate=1600e6) if cache else {}
    with card(size, real, mode, **kw) as c:
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), destructive=True, journal_dir=journal, seed=11)
    check_doc(doc)
    assert doc["verdict"] == "counterfeit" and doc["complete"] and doc["error"] is None
    assert doc["kind"] == ("wraparound" if mode == "wraparound" else "dropped")
    assert doc["announced_bytes"] == size
    assert abs(doc["usable_bytes"] - real) <= real // 100
    assert doc["usable_bytes"] <= real
    assert doc["bad_ranges"][-1] == [doc["usable_bytes"], size]
    assert f"--last-sec={doc['usable_bytes'] // 512 - 1}" in doc["fix"]["alternatives"]["f3fix"]


@pytest.mark.slow
@pytest.mark.parametrize("size,cache", [(256 * MiB, 0), (512 * MiB, 64 * MiB)])
def test_genuine_is_genuine_and_untouched(size, cache, journal):
    kw = dict(cache_bytes=cache, cache_rate=1600e6) if cache else {}
    with card(size, **kw) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal, seed=5)
        after = sha256_device(c.device, c)
    check_doc(doc)
    assert (doc["verdict"], doc["kind"], doc["usable_bytes"], doc["bad_ranges"]) == ("genuine", None, size, [])
    assert doc["fix_command"] is None and doc["complete"]
    assert doc["preserve"]["status"] == "restored" and doc["preserve"]["saved_bytes"] > 0
    assert before == after
    assert os.listdir(journal) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["wraparound", "drop"])
def test_counterfeit_untouched_after_non_destructive(mode, journal):
    """Writes past the real end land on real data (wraparound): the journal is restored in
    reverse order of saving, so every byte is back."""
    with card(512 * MiB, 160 * MiB, mode) as c:
        scribble(c.device, c, seed=2)
        before = sha256_device(c.device, c)
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal, seed=9)
        after = sha256_device(c.device, c)
    assert doc["verdict"] == "counterfeit" and doc["usable_bytes"] == 160 * MiB
    assert before == after


@pytest.mark.slow
def test_io_error_ranges_make_it_damaged(journal):
    errors = [(100 * MiB, 116 * MiB, "both"), (300 * MiB, 301 * MiB + 512, "write")]
    with card(512 * MiB, errors=errors) as c:
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal, seed=4)
    check_doc(doc)
    assert doc["verdict"] == "damaged" and doc["kind"] is None
    assert doc["bad_ranges"] == [[100 * MiB, 116 * MiB], [300 * MiB, 301 * MiB + 512]]
    assert doc["usable_bytes"] == 100 * MiB


@pytest.mark.slow
def test_removed_midway(journal):
    with card(512 * MiB) as c:
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal, seed=4, progress=Trigger(512 * 1024, c.yank))
    assert doc["verdict"] == "damaged" and doc["complete"] is False
    assert "removed" in doc["error"] and "at byte" in doc["error"]
    assert doc["removed_at"] >= 0
    assert doc["preserve"]["status"] == "kept"       # restored later by recover_pending


@pytest.mark.slow
def test_interrupted_restores_then_raises(journal):
    with card(256 * MiB, 100 * MiB, "wraparound") as c:
        scribble(c.device, c, seed=3)
        before = sha256_device(c.device, c)

        def stop():
            raise KeyboardInterrupt

        with pytest.raises(Interrupted) as ei:
            verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal, seed=4, progress=Trigger(1 << 20, stop))
        after = sha256_device(c.device, c)
    assert before == after
    assert ei.value.doc["complete"] is False and "interrupted" in ei.value.doc["error"]


def test_read_only_is_one_clear_error(journal):
    with card(64 * MiB) as c:
        subprocess.run(["blockdev", "--setro", c.device], check=True)
        try:
            with pytest.raises(SafetyRefusal, match="read-only"):
                verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal)
        finally:
            subprocess.run(["blockdev", "--setrw", c.device], check=False)


def test_mounted_is_refused(journal):
    with card(64 * MiB) as c, c.filesystem("ext4"):
        with pytest.raises(SafetyRefusal, match="mounted"):
            verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=journal)


def test_time_budget(journal):
    with card(1024 * MiB, 700 * MiB, "drop", write_rate=40e6, read_rate=80e6) as c:
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), destructive=True, journal_dir=journal, time_budget=1.0, seed=1)
    assert doc["verdict"] == "counterfeit" and doc["usable_bytes"] <= 700 * MiB
    assert doc["timings"]["seconds"] < 5
    assert "statement" in doc["confidence"]


@pytest.mark.slow
@pytest.mark.parametrize("destructive", [True, False])
def test_reads_past_the_real_end_fail(destructive, journal):
    """A card smaller than it says, whose controller fails every I/O past its real end."""
    with card(512 * MiB, errors=[(300 * MiB + 4096, 512 * MiB, "both")]) as c:
        doc = verify_device(open_target(c.device, kinds=("device",), whole_device=True), destructive=destructive, journal_dir=journal, seed=2)
    assert (doc["verdict"], doc["kind"]) == ("counterfeit", "other")
    assert doc["usable_bytes"] == 300 * MiB + 4096
    assert doc["bad_ranges"] == [[300 * MiB + 4096, 512 * MiB]]
    assert doc["fix_command"] is not None
