"""Full mode (fill and check every sector) on emulated cards: through ext4, and on a whole device."""

from __future__ import annotations

import os

import pytest

from cardbench.errors import Interrupted, UsageError
from cardbench.target import open_target
from cardbench.verify.full import FILE_RE, STATE_NAME, verify_full
from verify_helpers import Trigger, card, needs_emulator

MiB = 1 << 20
pytestmark = [needs_emulator, pytest.mark.needs_root]
# no journal: mke2fs puts it mid-disk, where a wraparound card would lay it over the superblock
EXT4 = ("-O", "^has_journal")


STATE = ""


@pytest.fixture(autouse=True)
def _state_dir(tmp_path):
    """Keep the state mirror out of the user's state dir."""
    global STATE
    STATE = str(tmp_path / "state")
    yield


def ours(d: str) -> list[str]:
    return [n for n in os.listdir(d) if FILE_RE.match(n) or n == STATE_NAME]


@pytest.mark.slow
def test_ext4_on_a_wraparound_card():
    with card(512 * MiB, 256 * MiB, "wraparound") as c, c.filesystem("ext4", mkfs_args=EXT4) as mnt:
        doc = verify_full(open_target(mnt, write=True), seed=1, state_dir=STATE)
        left = ours(mnt)
    assert doc["mode"] == "full" and doc["complete"]
    assert (doc["verdict"], doc["kind"]) == ("counterfeit", "wraparound")
    assert doc["sectors"]["overwritten"] > 0
    assert doc["method"]["physical_mapping"] is True
    assert doc["usable_bytes"] == 256 * MiB            # from the wrap distance on the device (FIEMAP)
    assert doc["bad_ranges"][-1] == [256 * MiB, 512 * MiB]
    assert doc["fix"]["alternatives"]["f3fix"].startswith(f"f3fix --last-sec={256 * MiB // 512 - 1} ")
    # what could be stored at all is about the real size (minus filesystem overhead)
    assert 0.8 * 256 * MiB < doc["ok_bytes"] <= 256 * MiB
    files = doc["files"]
    assert len(files) >= 16 and all(f["write_bytes_per_s"] and f["read_bytes_per_s"] for f in files)
    assert left == []
    assert os.listdir(STATE) == []


@pytest.mark.slow
def test_ext4_on_a_drop_card_and_files_kept():
    with card(256 * MiB, 100 * MiB, "drop") as c, c.filesystem("ext4", mkfs_args=EXT4) as mnt:
        doc = verify_full(open_target(mnt, write=True), seed=2, keep_files=True, state_dir=STATE)
        left = ours(mnt)
    assert (doc["verdict"], doc["kind"]) == ("counterfeit", "dropped")
    assert doc["sectors"]["zero"] > 0
    assert abs(doc["usable_bytes"] - 100 * MiB) <= MiB
    assert doc["files_kept"] and len([n for n in left if n != STATE_NAME]) == len(doc["files"])


@pytest.mark.slow
def test_genuine_ext4():
    with card(128 * MiB) as c, c.filesystem("ext4") as mnt:
        doc = verify_full(open_target(mnt, write=True), seed=3, state_dir=STATE)
        left = ours(mnt)
    assert (doc["verdict"], doc["kind"], doc["lost_bytes"]) == ("genuine", None, 0)
    assert doc["usable_bytes"] == 128 * MiB and doc["written_bytes"] > 100 * MiB
    assert doc["timings"]["write_bytes_per_s"] > 0 and doc["timings"]["read_bytes_per_s"] > 0
    assert left == []


def test_interrupted_then_resumed():
    with card(128 * MiB) as c, c.filesystem("ext4") as mnt:
        def stop():
            raise KeyboardInterrupt
        with pytest.raises(Interrupted) as ei:
            verify_full(open_target(mnt, write=True), seed=4, file_bytes=8 * MiB, progress=Trigger(40 * MiB, stop), state_dir=STATE)
        assert "--resume" in str(ei.value)
        kept = ours(mnt)
        assert STATE_NAME in kept and len(kept) >= 5
        doc = verify_full(open_target(mnt, write=True), resume=True, state_dir=STATE)
        left = ours(mnt)
    assert doc["id"] == ei.value.doc["id"]
    assert doc["method"]["resumed"] and doc["verdict"] == "genuine" and doc["complete"]
    assert doc["written_bytes"] > 100 * MiB
    assert left == []


def test_resume_without_a_run():
    with card(64 * MiB) as c, c.filesystem("ext4") as mnt:
        with pytest.raises(UsageError, match="nothing to resume"):
            verify_full(open_target(mnt, write=True), resume=True, state_dir=STATE)


@pytest.mark.slow
def test_whole_device_destructive(journal):
    with card(256 * MiB, 100 * MiB + 4096, "drop") as c:
        with pytest.raises(UsageError, match="--destructive"):
            verify_full(open_target(c.device, write=True))
        doc = verify_full(open_target(c.device, write=True), destructive=True, seed=5, state_dir=journal)
    assert (doc["verdict"], doc["kind"]) == ("counterfeit", "dropped")
    assert doc["usable_bytes"] == 100 * MiB + 4096
    assert doc["bad_ranges"] == [[100 * MiB + 4096, 256 * MiB]]
    assert os.listdir(journal) == []


@pytest.mark.slow
def test_whole_device_wraparound(journal):
    with card(256 * MiB, 96 * MiB, "wraparound") as c:
        doc = verify_full(open_target(c.device, write=True), destructive=True, seed=6, state_dir=journal)
    assert (doc["verdict"], doc["kind"], doc["usable_bytes"]) == ("counterfeit", "wraparound", 96 * MiB)
    assert doc["wrap_bytes"] == 96 * MiB


def test_card_removed_while_filling():
    with card(256 * MiB) as c, c.filesystem("ext4") as mnt:
        doc = verify_full(open_target(mnt, write=True), seed=7, file_bytes=8 * MiB, progress=Trigger(60 * MiB, c.yank), state_dir=STATE)
    assert doc["verdict"] == "damaged" and doc["complete"] is False
    assert "stopped answering" in doc["error"] and doc["usable_bytes"] is None
