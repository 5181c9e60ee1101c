"""`cardbench run` on emulated cards that fail midway: files (a directory on the card) and raw
(the block device), with and without ``--destructive --preserve``.

Each scenario starts the real command line in a child process, waits until the card itself has
seen the I/O of the phase to hit (its own counters: "midway" is reliable), makes the fault,
and then checks what a user is promised: one error line naming what happened, the documented
exit code, a partial result stored as incomplete, no test file left where the card still
answers, every preserved byte back (sha256 of the whole device before == after), the store
intact, and no loop device, mount or process left.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cardbench.units import MB, MiB
from faults_helpers import (
    assert_partial_stored,
    card,
    counters,
    files_in,
    journals,
    needs_emulator,
    nothing_left,
    one_error_line,
    run_cli,
    scribble,
    sha256_device,
    start_cli,
    stored,
    wait_until,
    when_read,
    when_written,
)

pytestmark = [needs_emulator, pytest.mark.needs_root]

SEED = int(os.environ.get("CARDBENCH_FAULT_SEED") or random.SystemRandom().randrange(10**6))
RNG = random.Random(SEED)

# a file run: --size 8MB --runs 1 = one warm-up file and one timed file, written at 10 MB/s
# (1.6 s) and read at 20 MB/s (0.8 s)
SIZE = 8 * MB
RUN_ARGS = ("--size", "8MB", "--runs", "1")
WRITTEN = 2 * SIZE
ALL_IO = 2.4   # seconds of card time in such a run


def writable(mnt: str) -> bool:
    """Can a file be made here? (ext4's emergency read-only mode does not show in statvfs)"""
    probe = os.path.join(mnt, ".cardbench-fault-probe")
    try:
        with open(probe, "w"):
            pass
        os.unlink(probe)
        return True
    except OSError:
        return False


def make_writable(c, mnt: str) -> None:
    """The card answers again and its filesystem is writable (remounted if it went read-only)."""
    c.set(errors=[])
    if not writable(mnt):
        subprocess.run(["mount", "-o", "remount,rw", mnt], capture_output=True)
    if not writable(mnt):
        c.remount()
    assert writable(mnt)


def next_run_cleans(row, mnt: str, workdir: Path, left: list[str]) -> None:
    """The next `cardbench run` on the filesystem removes what a stopped run left, and says so."""
    p = run_cli("run", mnt, "--size", "1MB", "--runs", "1", "--no-save", "--json", workdir=workdir)
    assert p.returncode == 0, p.stderr
    warnings = json.loads(p.stdout)["warnings"]
    if left:
        assert any(f"removed {len(left)} test file(s)" in w for w in warnings), warnings
    assert files_in(mnt) == []
    row.saw(f"next run removed {len(left)} leftover file(s)")


# -- faults of the card or its filesystem during a file run ----------------------------------------------

def _yank(c, mnt):
    c.yank()


def _eio_reads(c, mnt):
    c.set(errors=[(0, c.size, "read")])


def _eio_writes(c, mnt):
    # the card's back two thirds refuse writes: the data (and maybe the journal) hit it
    c.set(errors=[(c.size // 3, c.size, "write")])


def _fill(c, mnt):
    v = os.statvfs(mnt)
    fd = os.open(os.path.join(mnt, "filler.bin"), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.posix_fallocate(fd, 0, max(4096, v.f_bavail * v.f_frsize - 64 * 1024))
    except OSError:
        pass   # full before the end: what we want
    finally:
        os.close(fd)


def _fs_error(c, mnt):
    Path(f"/sys/fs/ext4/{os.path.basename(c.device)}/trigger_fs_error").write_text("cardbench fault test\n")


def _remount_ro(c, mnt):
    deadline = time.monotonic() + 2
    while True:
        p = subprocess.run(["mount", "-o", "remount,ro", mnt], capture_output=True, text=True)
        if p.returncode == 0:
            return
        assert time.monotonic() < deadline, f"remount,ro failed: {p.stderr}"
        time.sleep(0.02)


# each run writes its file, reads it back and removes it before the next (one file's room)
MID_WRITE = ("write", SIZE + SIZE // 2)    # in the timed file, after the warm-up
MID_READ = ("read", SIZE + SIZE // 2)      # in the cold read of the timed file

DIR_FAULTS = [
    pytest.param(_yank, MID_WRITE, {}, ("I/O error", "removed", "read-only"), "gone",
                 marks=pytest.mark.scenario("run DIR: card yanked mid-write",
                                            "exit 5 'I/O error', partial stored incomplete"), id="yank-write"),
    pytest.param(_yank, MID_READ, {}, ("I/O error", "removed"), "gone",
                 marks=pytest.mark.scenario("run DIR: card yanked mid-read (cold_read)",
                                            "exit 5 'I/O error', partial stored incomplete"), id="yank-read"),
    pytest.param(_eio_writes, ("write", 1 * MB), {}, ("I/O error", "read-only"), "ro",
                 marks=pytest.mark.scenario("run DIR: EIO on writes in a range",
                                            "exit 5, partial stored, files gone once the card answers"),
                 id="eio-write"),
    pytest.param(_eio_reads, MID_READ, {}, ("I/O error",), "rw",
                 marks=pytest.mark.scenario("run DIR: EIO on reads midway",
                                            "exit 5 'I/O error', partial stored, files removed"), id="eio-read"),
    # early in the timed file: the warm-up's file is removed before it (a fill during the warm-up
    # leaves the timed file the warm-up's room), and ext4 preallocates a few MiB ahead of a file
    pytest.param(_fill, ("write", SIZE + 256 * 1024), {}, ("filesystem is full",), "rw",
                 marks=pytest.mark.scenario("run DIR: filesystem full midway (another file fills it)",
                                            "exit 5 'the filesystem is full', partial stored, files removed"),
                 id="enospc"),
    pytest.param(_fs_error, MID_WRITE, {"mount_options": "errors=remount-ro"}, ("read-only",), "ro",
                 marks=pytest.mark.scenario("run DIR: fs goes read-only mid-write (ext4 error)",
                                            "exit 5 'read-only', partial stored; next run removes files"),
                 id="ro-error"),
    pytest.param(_remount_ro, MID_READ, {}, ("read-only",), "ro",
                 marks=pytest.mark.scenario("run DIR: mount -o remount,ro midway",
                                            "exit 5 'read-only' (not a silent leftover); next run removes files"),
                 id="ro-remount"),
]


@pytest.mark.slow
@pytest.mark.parametrize("fault, when, fs_opts, words, after", DIR_FAULTS)
def test_run_directory_fault(row, tmp_path, emu_dir, fault, when, fs_opts, words, after):
    """``after``: "gone" (the card no longer answers), "rw" (it answers, the filesystem stays
    writable: no file may be left), "ro" (the filesystem went read-only: files may stay, but the
    error line must say so, and the next run removes them)."""
    db = tmp_path / "results.sqlite3"
    with card(size=96 * MiB) as c, c.filesystem("ext4", **fs_opts) as mnt:
        base = counters(c)
        p = start_cli("run", mnt, *RUN_ARGS, "--db", str(db), workdir=tmp_path)
        phase, nbytes = when
        cond = when_written(c, nbytes, base) if phase == "write" else when_read(c, nbytes, base, WRITTEN)
        wait_until(cond, 30, f"{nbytes} B {phase} by the run", p)
        fault(c, mnt)
        p.wait(60)
        assert p.returncode == 5, (p.returncode, p.stderr)
        line = one_error_line(p, *words)
        row.saw(f"exit 5: {line[11:]}")
        r = assert_partial_stored(db)
        row.saw(f"partial stored: complete={r.complete}, tests={[(t.name, len(t.runs), t.complete) for t in r.tests]}")
        left = files_in(mnt)
        if after == "gone":
            row.saw(f"card gone; listing shows {len(left)} test file(s)")
        else:
            if os.path.exists(os.path.join(mnt, "filler.bin")):
                os.unlink(os.path.join(mnt, "filler.bin"))
            if after == "rw":
                assert left == [], f"test files left behind: {left}"
                row.saw("test files removed")
            elif left:
                assert f"{len(left)} test file(s) could not be removed" in line, line
                row.saw(f"{len(left)} file(s) left on the read-only fs, and the error line says so")
            make_writable(c, mnt)   # after a remount, what the aborted journal never committed is gone
            next_run_cleans(row, mnt, tmp_path, files_in(mnt))
    nothing_left(row, emu_dir, db)


# -- signals during a file run ---------------------------------------------------------------------------------

@pytest.mark.parametrize("sig, words", [
    pytest.param(signal.SIGINT, ("interrupted",), id="SIGINT",
                 marks=pytest.mark.scenario("run DIR: SIGINT at a random point",
                                            "exit 130 'interrupted', partial stored, files removed")),
    pytest.param(signal.SIGTERM, ("SIGTERM",), id="SIGTERM",
                 marks=pytest.mark.scenario("run DIR: SIGTERM at a random point",
                                            "exit 130 'stopped by SIGTERM', partial stored, files removed")),
])
@pytest.mark.slow
def test_run_directory_signal(row, tmp_path, emu_dir, sig, words):
    db = tmp_path / "results.sqlite3"
    delay = RNG.uniform(0.0, 0.8) * ALL_IO
    row.saw(f"seed {SEED}: signal {delay:.2f} s after the first byte")
    with card(size=96 * MiB) as c, c.filesystem("ext4") as mnt:
        base = counters(c)
        p = start_cli("run", mnt, *RUN_ARGS, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1, base), 30, "the run's first write", p)
        time.sleep(delay)
        assert p.alive(), "the run ended before the signal"
        p.signal(sig)
        p.wait(60)
        assert p.returncode == 130, (p.returncode, p.stderr)
        line = one_error_line(p, *words)
        row.saw(f"exit 130: {line[11:]}")
        assert_partial_stored(db, "interrupted", "SIGTERM")
        assert files_in(mnt) == [], files_in(mnt)
        row.saw("partial stored incomplete; test files removed")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("run DIR: SIGKILL at a random point", "next run removes the files; store intact")
def test_run_directory_sigkill(row, tmp_path, emu_dir):
    db = tmp_path / "results.sqlite3"
    delay = RNG.uniform(0.0, 0.9) * ALL_IO
    row.saw(f"seed {SEED}: SIGKILL {delay:.2f} s after the first byte")
    with card(size=96 * MiB) as c, c.filesystem("ext4") as mnt:
        base = counters(c)
        p = start_cli("run", mnt, *RUN_ARGS, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1, base), 30, "the run's first write", p)
        time.sleep(delay)
        assert p.alive(), "the run ended before the signal"
        p.signal(signal.SIGKILL)
        p.wait(30)
        assert p.returncode == -signal.SIGKILL
        left = files_in(mnt)
        row.saw(f"killed; {len(left)} test file(s) left")
        assert all(r.complete is False for r in stored(db)), "a killed run stored as complete"
        next_run_cleans(row, mnt, tmp_path, left)
    nothing_left(row, emu_dir, db)


# -- raw (block device) runs -----------------------------------------------------------------------------------

RAW_RATES = dict(write_rate=20 * MB, read_rate=40 * MB)
#: raw_read first sizes its samples with probe reads of 1, 4 and 16 MiB (at 40 MB/s)
PROBE = 21 * MiB


@pytest.mark.parametrize("fault, words", [
    pytest.param("yank", ("I/O error",), id="yank",
                 marks=pytest.mark.scenario("run DEVICE: card yanked mid raw_read",
                                            "exit 5 'I/O error', partial stored incomplete")),
    pytest.param("eio", ("I/O error",), id="eio",
                 marks=pytest.mark.scenario("run DEVICE: EIO in a range (the last MiB)",
                                            "exit 5 names the byte, partial stored incomplete")),
    pytest.param("SIGINT", ("interrupted",), id="sigint",
                 marks=pytest.mark.scenario("run DEVICE: SIGINT mid raw_read",
                                            "exit 130 'interrupted', partial stored incomplete")),
    pytest.param("SIGTERM", ("SIGTERM",), id="sigterm",
                 marks=pytest.mark.scenario("run DEVICE: SIGTERM mid raw_access",
                                            "exit 130 'SIGTERM', partial stored incomplete")),
])
@pytest.mark.slow
def test_run_device_fault(row, tmp_path, emu_dir, fault, words):
    db = tmp_path / "results.sqlite3"
    with card(size=64 * MiB, **RAW_RATES) as c:
        base = counters(c)
        if fault == "eio":
            c.set(errors=[(c.size - MiB, c.size, "read")])
        p = start_cli("run", c.device, "--runs", "1", "--db", str(db), workdir=tmp_path)
        if fault == "SIGTERM":   # raw_access: after two sweeps of raw_read (64 MiB each)
            wait_until(when_read(c, PROBE + 2 * 64 * MiB + MiB, base), 60, "raw_access", p)
        elif fault != "eio":
            wait_until(when_read(c, PROBE + 20 * MiB, base), 60, "mid raw_read", p)
        if fault == "yank":
            c.yank()
        elif fault.startswith("SIG"):
            p.signal(getattr(signal, fault))
        p.wait(60)
        code = 130 if fault.startswith("SIG") else 5
        assert p.returncode == code, (p.returncode, p.stderr)
        line = one_error_line(p, *words)
        row.saw(f"exit {code}: {line[11:]}")
        r = assert_partial_stored(db)
        assert all(not t.complete for t in r.tests if len(t.runs) < 1), [(t.name, t.complete) for t in r.tests]
        row.saw(f"partial stored: {[(t.name, len(t.runs), t.complete) for t in r.tests]}")
    nothing_left(row, emu_dir, db)


# -- --destructive --preserve ------------------------------------------------------------------------------------

PRESERVE_RATES = dict(write_rate=20 * MB, read_rate=200 * MB)
PRESERVE_ARGS = ("--runs", "1", "--positions", "4", "--destructive", "--preserve")


def _preserve_run(c, db, tmp_path):
    return start_cli("run", c.device, *PRESERVE_ARGS, "--confirm", str(c.size), "--db", str(db), workdir=tmp_path)


@pytest.mark.parametrize("sig, words", [
    pytest.param(signal.SIGINT, ("interrupted",), id="SIGINT",
                 marks=pytest.mark.scenario("run --destructive --preserve: SIGINT mid raw_write",
                                            "exit 130, every region restored (sha256 equal), no journal")),
    pytest.param(signal.SIGTERM, ("SIGTERM",), id="SIGTERM",
                 marks=pytest.mark.scenario("run --destructive --preserve: SIGTERM mid raw_write",
                                            "exit 130, every region restored (sha256 equal), no journal")),
])
@pytest.mark.slow
def test_preserve_signal(row, tmp_path, emu_dir, journal_root, sig, words):
    db = tmp_path / "results.sqlite3"
    with card(size=64 * MiB, **PRESERVE_RATES) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        base = counters(c)
        p = _preserve_run(c, db, tmp_path)
        wait_until(when_written(c, 2 * MiB, base), 60, "raw_write", p)
        p.signal(sig)
        p.wait(60)
        assert p.returncode == 130, (p.returncode, p.stderr)
        line = one_error_line(p, *words)
        row.saw(f"exit 130: {line[11:]}")
        assert_partial_stored(db)
        assert journals(journal_root) == [], journals(journal_root)
        assert sha256_device(c.device, c) == before, "the device changed: a preserved region was not restored"
        row.saw("sha256 before == after; no journal left")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("run --destructive --preserve: SIGKILL at a random point of raw_write",
                      "journal kept; next invocation restores it (sha256 equal)")
def test_preserve_sigkill(row, tmp_path, emu_dir, journal_root):
    db = tmp_path / "results.sqlite3"
    delay = RNG.uniform(0.0, 3.0)   # raw_write: 2 sweeps of 4 x 16 MiB at 20 MB/s = 6.7 s
    row.saw(f"seed {SEED}: SIGKILL {delay:.2f} s into raw_write")
    with card(size=64 * MiB, **PRESERVE_RATES) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        base = counters(c)
        p = _preserve_run(c, db, tmp_path)
        wait_until(when_written(c, 1, base), 60, "raw_write", p)
        time.sleep(delay)
        assert p.alive(), "the run ended before the signal"
        p.signal(signal.SIGKILL)
        p.wait(30)
        left = journals(journal_root)
        row.saw(f"killed; {len(left)} journal(s) left")
        q = run_cli("results", "--db", str(db), workdir=tmp_path)   # any next command recovers first
        assert q.returncode == 0, q.stderr
        assert "Traceback" not in q.stderr
        if left:
            assert "recovered:" in q.stderr and "restored" in q.stderr, q.stderr
        assert journals(journal_root) == []
        assert sha256_device(c.device, c) == before, "the device changed: a preserved region was not restored"
        row.saw("next command restored it: sha256 before == after; journal removed")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("run --destructive --preserve: card pulled mid raw_write, then put back",
                      "exit 5 says the journal is kept; next invocation restores (sha256 equal)")
def test_preserve_card_pulled_and_back(row, tmp_path, emu_dir, journal_root):
    db = tmp_path / "results.sqlite3"
    with card(size=64 * MiB, **PRESERVE_RATES) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        base = counters(c)
        p = _preserve_run(c, db, tmp_path)
        wait_until(when_written(c, 2 * MiB, base), 60, "raw_write", p)
        c.set(errors=[(0, c.size, "both")])   # pulled: every I/O fails
        p.wait(60)
        assert p.returncode == 5, (p.returncode, p.stderr)
        line = one_error_line(p, "I/O error")
        assert "kept" in line and "back" in line, line
        row.saw(f"exit 5: {line[11:]}")
        assert_partial_stored(db, "kept")
        assert len(journals(journal_root)) == 1
        c.set(errors=[])                       # put back
        q = run_cli("recover", workdir=tmp_path)
        assert q.returncode == 0 and "restored" in q.stdout, (q.stdout, q.stderr)
        assert journals(journal_root) == []
        assert sha256_device(c.device, c) == before, "the device changed: a preserved region was not restored"
        row.saw("card back: `cardbench recover` restored it, sha256 before == after")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("run --destructive --preserve: card yanked for good mid raw_write",
                      "exit 5 says the journal is kept; journal stays while the card is gone")
def test_preserve_card_yanked_for_good(row, tmp_path, emu_dir, journal_root):
    db = tmp_path / "results.sqlite3"
    try:
        with card(size=64 * MiB, **PRESERVE_RATES) as c:
            base = counters(c)
            p = _preserve_run(c, db, tmp_path)
            wait_until(when_written(c, 2 * MiB, base), 60, "raw_write", p)
            c.yank()
            p.wait(60)
            assert p.returncode == 5, (p.returncode, p.stderr)
            line = one_error_line(p, "I/O error")
            assert "kept" in line, line
            row.saw(f"exit 5: {line[11:]}")
            assert_partial_stored(db)
            assert len(journals(journal_root)) == 1
            q = run_cli("recover", workdir=tmp_path)   # the card does not answer: kept, never lost
            assert q.returncode == 0 and "Traceback" not in q.stderr
            assert len(journals(journal_root)) == 1, q.stdout
            row.saw(f"recover while gone: {q.stdout.strip()[:80]}; journal kept")
        nothing_left(row, emu_dir, db)
    finally:
        import shutil
        for j in journals(journal_root):   # the card is gone for good: its journal is ours to drop
            shutil.rmtree(journal_root / j, ignore_errors=True)
