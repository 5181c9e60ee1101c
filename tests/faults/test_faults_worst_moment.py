"""Ctrl-C at the worst moment, made certain instead of hoped for: inside the data generator,
while a slice of an O_DIRECT buffer is alive. Found by the random-signal scenarios (an internal
error "BufferError: cannot close exported pointers exist" instead of exit 130); these pin it.

In-process library calls on emulated cards: ``Pattern.fill`` raises KeyboardInterrupt on its
n-th call. Expected: ``Interrupted`` (never BufferError or another exception), the partial result
or document attached, the card restored (sha256 before == after), nothing left.
"""

from __future__ import annotations

import pytest

from cardbench.errors import Interrupted
from cardbench.patterns import Pattern
from cardbench.target import open_target
from cardbench.units import MB, MiB
from faults_helpers import (
    VERIFY_FILE_RE,
    card,
    files_in,
    journals,
    leftovers,
    needs_emulator,
    scribble,
    sha256_device,
)

pytestmark = [needs_emulator, pytest.mark.needs_root]


def interrupt_fill_at(monkeypatch, call: int) -> None:
    real = Pattern.fill
    seen = {"n": 0}

    def fill(self, buf, pos):
        seen["n"] += 1
        if seen["n"] == call:
            raise KeyboardInterrupt
        return real(self, buf, pos)
    monkeypatch.setattr(Pattern, "fill", fill)


@pytest.mark.scenario("Ctrl-C inside the data generator: run --destructive --preserve",
                      "Interrupted (not BufferError), result attached, device restored")
def test_raw_write_interrupted_inside_fill(row, monkeypatch, tmp_path, emu_dir):
    from cardbench.runner import DeviceOptions, run_device
    with card(size=32 * MiB, write_rate=400 * MB, read_rate=800 * MB) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        interrupt_fill_at(monkeypatch, 3)
        opts = DeviceOptions(runs=1, positions=2, sample=2 * MiB, access_seconds=0.05, destructive=True,
                             preserve=True, confirm=str(c.size), journal_dir=str(tmp_path / "journal"))
        with pytest.raises(Interrupted) as e:
            run_device(open_target(c.device, kinds=("device",), whole_device=True), opts)
        r = e.value.result
        assert r.complete is False and r.error and "interrupted" in r.error
        assert journals(tmp_path / "journal") == []
        assert sha256_device(c.device, c) == before
        row.saw(f"Interrupted: {e.value.message}; sha256 before == after")
    assert leftovers(emu_dir) == []


@pytest.mark.slow
@pytest.mark.scenario("Ctrl-C inside the data generator: verify --full DIR",
                      "Interrupted (not BufferError), partial doc attached, files kept for --resume")
def test_verify_full_interrupted_inside_fill(row, monkeypatch, tmp_path, emu_dir):
    from cardbench.verify.full import verify_full
    with card(size=32 * MiB, write_rate=400 * MB, read_rate=800 * MB) as c, c.filesystem("ext4") as mnt:
        interrupt_fill_at(monkeypatch, 3)
        with pytest.raises(Interrupted) as e:
            verify_full(open_target(mnt, write=True), file_bytes=MiB, state_dir=str(tmp_path / "state"))
        doc = e.value.doc
        assert doc["complete"] is False and "interrupted" in doc["error"]
        row.saw(f"Interrupted: {doc['error'][:60]}...; {len(files_in(mnt, VERIFY_FILE_RE))} file(s) kept")
        monkeypatch.undo()
        verify_full(open_target(mnt, write=True), file_bytes=MiB, state_dir=str(tmp_path / "state"))   # the next run cleans up
        assert files_in(mnt, VERIFY_FILE_RE) == []
        row.saw("next verify removed them")
    assert leftovers(emu_dir) == []


@pytest.mark.slow
@pytest.mark.scenario("Ctrl-C inside the data generator: verify DEVICE (quick)",
                      "Interrupted (not BufferError), partial doc attached, card restored")
def test_verify_quick_interrupted_inside_fill(row, monkeypatch, tmp_path, emu_dir):
    from cardbench.verify.quick import verify_device
    with card(size=128 * MiB, write_rate=400 * MB, read_rate=800 * MB) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        interrupt_fill_at(monkeypatch, 5)
        with pytest.raises(Interrupted) as e:
            verify_device(open_target(c.device, kinds=("device",), whole_device=True), journal_dir=str(tmp_path / "journal"))
        doc = e.value.doc
        assert doc["complete"] is False and doc["error"]
        assert journals(tmp_path / "journal") == []
        assert sha256_device(c.device, c) == before
        row.saw(f"Interrupted: {e.value.message}; sha256 before == after")
    assert leftovers(emu_dir) == []
