"""Two cardbench processes on the same card: the second refuses at once (exit 7, "another
cardbench (pid N) is testing ..."), and the first measures undisturbed and stores a complete
result. Whatever the second names -- the same directory, another folder of the same filesystem,
the block device under it, or `verify` of it -- it is the same card."""

from __future__ import annotations

import os

import pytest

from cardbench.units import MB, MiB
from faults_helpers import (
    card,
    counters,
    files_in,
    needs_emulator,
    nothing_left,
    one_error_line,
    run_cli,
    start_cli,
    stored,
    stored_verify,
    wait_until,
    when_written,
)

pytestmark = [needs_emulator, pytest.mark.needs_root]


def refused(q, first_pid: int) -> str:
    assert q.returncode == 7, (q.args, q.returncode, q.stderr[-400:])
    line = one_error_line(q, "another cardbench")
    assert f"(pid {first_pid})" in line, line
    return line


@pytest.mark.slow
@pytest.mark.scenario("two processes: `run DIR` holds the card, a second run/verify of it",
                      "each second one exits 7 'another cardbench (pid N)'; the first completes")
def test_run_directory_holds_the_card(row, tmp_path, emu_dir):
    db = tmp_path / "results.sqlite3"
    with card(size=96 * MiB, write_rate=10 * MB, read_rate=20 * MB) as c, c.filesystem("ext4") as mnt:
        other = os.path.join(mnt, "photos")
        os.mkdir(other)
        base = counters(c)
        # long enough (3 files of 24 MB at 10 MB/s write + 20 MB/s read: about 11 s) that the four
        # refused commands (each a Python start-up, slower on a loaded machine) all land inside it
        first = start_cli("run", mnt, "--size", "24MB", "--runs", "2", "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1 * MB, base), 30, "the first run's writes", first)
        seconds = []
        for args in (("run", mnt, "--size", "4MB", "--runs", "1", "--db", str(db)),
                     ("run", other, "--size", "4MB", "--runs", "1", "--db", str(db)),
                     ("run", c.device, "--runs", "1", "--db", str(db)),
                     ("verify", "--full", mnt, "--db", str(db))):
            assert first.alive(), "the first run ended before the second was tried"
            q = run_cli(*args, workdir=tmp_path, timeout=60)
            refused(q, first.proc.pid)
            seconds.append(args[0] + " " + ("device" if args[1] == c.device else
                                            "other folder" if args[1] == other else "same dir"))
        row.saw(f"refused with exit 7: {', '.join(seconds)}")
        first.wait(60)
        assert first.returncode == 0, first.stderr
        results = stored(db)
        assert len(results) == 1 and results[0].complete, [(r.complete, r.error) for r in results]
        assert stored_verify(db) == []
        assert files_in(mnt) == [] and os.listdir(other) == []
        row.saw("first run complete and stored; nothing else stored; no file left")
    nothing_left(row, emu_dir, db)


@pytest.mark.parametrize("mode", [
    pytest.param("quick", marks=pytest.mark.scenario("two processes: `verify DEVICE` (quick) holds it, a `run DEVICE`",
                                                     "the run exits 7; the verify completes, genuine, stored")),
    pytest.param("full", marks=pytest.mark.scenario("two processes: `verify --full DIR` holds it, a `run DIR`",
                                                    "the run exits 7; the verify completes, its files removed")),
])
@pytest.mark.slow
def test_verify_holds_the_card(row, tmp_path, emu_dir, mode):
    db = tmp_path / "results.sqlite3"
    with card(size=128 * MiB if mode == "quick" else 64 * MiB, write_rate=20 * MB, read_rate=40 * MB) as c:
        if mode == "quick":
            base = counters(c)
            first = start_cli("verify", c.device, "--db", str(db), workdir=tmp_path)
            wait_until(when_written(c, 1, base), 30, "the probe's writes", first)
            q = run_cli("run", c.device, "--runs", "1", "--db", str(db), workdir=tmp_path, timeout=60)
            refused(q, first.proc.pid)
            first.wait(60)
            row.saw("quick verify held the device: run DEVICE refused with exit 7")
        else:
            with c.filesystem("ext4") as mnt:
                base = counters(c)
                first = start_cli("verify", "--full", mnt, "--db", str(db), workdir=tmp_path)
                wait_until(when_written(c, 1 * MB, base), 30, "the fill's writes", first)
                q = run_cli("run", mnt, "--size", "1MB", "--runs", "1", "--db", str(db), workdir=tmp_path,
                            timeout=60)
                refused(q, first.proc.pid)
                first.wait(60)
                assert files_in(mnt) == [] and os.listdir(mnt) == ["lost+found"], os.listdir(mnt)
            row.saw("full verify held the directory: run DIR refused with exit 7")
        assert first.returncode == 0, first.stderr
        docs = stored_verify(db)
        assert len(docs) == 1 and docs[0]["complete"] and docs[0]["verdict"] == "genuine", docs
        assert stored(db) == []
        row.saw("verify complete and genuine; the refused run stored nothing")
    nothing_left(row, emu_dir, db)
