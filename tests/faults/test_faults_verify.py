"""`cardbench verify` on emulated cards that fail midway: quick mode (a block device, every
overwritten byte saved in the preserve journal first) and full mode (a directory: its free space
filled with files and read back).

Expected each time: one error line naming what happened, the documented exit code (5: the card
failed during the test; 130: interrupted), the verify document stored and marked incomplete
(complete false, error set), every saved byte back on the card (sha256 of the whole device
before == after, also after SIGKILL: by the next invocation), the store intact, nothing left
running or attached. Full mode keeps its files after an interruption on purpose (``--resume``
continues); the next verify of that directory removes them.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from cardbench.units import MB, MiB
from faults_helpers import (
    VERIFY_FILE_RE,
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
    stored_verify,
    wait_until,
    when_read,
    when_written,
)

pytestmark = [needs_emulator, pytest.mark.needs_root]

SEED = int(os.environ.get("CARDBENCH_FAULT_SEED") or random.SystemRandom().randrange(10**6))
RNG = random.Random(SEED + 1)

QUICK = dict(size=128 * MiB, write_rate=20 * MB, read_rate=40 * MB)
FULL = dict(size=64 * MiB, write_rate=20 * MB, read_rate=40 * MB)


def incomplete_doc(db, *words) -> dict:
    docs = stored_verify(db)
    assert len(docs) == 1, f"expected one stored (partial) verify document, got {len(docs)}"
    d = docs[0]
    assert d["complete"] is False, "a partial verify stored as complete"
    assert d.get("error"), "an incomplete verify document without its error"
    if words:
        assert any(w.lower() in d["error"].lower() for w in words), d["error"]
    return d


# -- quick mode ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig, words", [
    pytest.param(signal.SIGINT, ("interrupted",), id="SIGINT",
                 marks=pytest.mark.scenario("verify quick: SIGINT at a random point",
                                            "exit 130, card restored (sha256 equal), partial doc stored")),
    pytest.param(signal.SIGTERM, ("interrupted", "SIGTERM"), id="SIGTERM",
                 marks=pytest.mark.scenario("verify quick: SIGTERM at a random point",
                                            "exit 130, card restored (sha256 equal), partial doc stored")),
])
@pytest.mark.slow
def test_quick_signal(row, tmp_path, emu_dir, journal_root, sig, words):
    db = tmp_path / "results.sqlite3"
    delay = RNG.uniform(0.0, 1.5)
    row.saw(f"seed {SEED}: signal {delay:.2f} s after the first write")
    with card(**QUICK) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        base = counters(c)
        p = start_cli("verify", c.device, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1, base), 60, "the probe's first write", p)
        time.sleep(delay)
        assert p.alive(), "verify ended before the signal"
        p.signal(sig)
        p.wait(60)
        assert p.returncode == 130, (p.returncode, p.stderr)
        line = one_error_line(p, *words)
        row.saw(f"exit 130: {line[11:]}")
        if "after the measurement had finished" in line:
            # the signal came while the finished result was being stored and shown: kept whole
            docs = stored_verify(db)
            assert len(docs) == 1 and docs[0]["complete"] is True, docs
            kept = "complete doc stored"
        else:
            incomplete_doc(db, "interrupted")
            kept = "partial doc stored"
        assert journals(journal_root) == []
        assert sha256_device(c.device, c) == before, "the card changed: saved bytes were not written back"
        row.saw(f"{kept}; sha256 before == after; no journal")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("verify quick: SIGKILL at a random point",
                      "journal kept; next invocation restores the card (sha256 equal)")
def test_quick_sigkill(row, tmp_path, emu_dir, journal_root):
    db = tmp_path / "results.sqlite3"
    delay = RNG.uniform(0.0, 1.5)
    row.saw(f"seed {SEED}: SIGKILL {delay:.2f} s after the first write")
    with card(**QUICK) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        base = counters(c)
        p = start_cli("verify", c.device, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1, base), 60, "the probe's first write", p)
        time.sleep(delay)
        assert p.alive(), "verify ended before the signal"
        p.signal(signal.SIGKILL)
        p.wait(30)
        left = journals(journal_root)
        row.saw(f"killed; {len(left)} journal(s) left")
        q = run_cli("results", "--db", str(db), workdir=tmp_path)
        assert q.returncode == 0 and "Traceback" not in q.stderr, q.stderr
        if left:
            assert "recovered:" in q.stderr and "restored" in q.stderr, q.stderr
        assert journals(journal_root) == []
        assert sha256_device(c.device, c) == before, "the card changed: saved bytes were not written back"
        assert all(d["complete"] is False for d in stored_verify(db))
        row.saw("next command restored it: sha256 before == after; journal removed")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("verify quick: card pulled mid-verify, then put back",
                      "exit 5, doc stored incomplete; journal kept, restored once back (sha256 equal)")
def test_quick_card_pulled(row, tmp_path, emu_dir, journal_root):
    db = tmp_path / "results.sqlite3"
    with card(**QUICK) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        base = counters(c)
        p = start_cli("verify", c.device, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 4 * MB, base), 60, "4 MB written by the probe", p)
        c.set(errors=[(0, c.size, "both")])   # pulled: every I/O fails
        p.wait(60)
        assert p.returncode == 5, (p.returncode, p.stderr)
        line = one_error_line(p, "stopped answering", "removed", "I/O error")
        row.saw(f"exit 5: {line[11:]}")
        d = incomplete_doc(db)
        row.saw(f"doc stored: complete={d['complete']}, verdict={d['verdict']}")
        assert len(journals(journal_root)) == 1, "the saved bytes must stay in the journal while the card is out"
        c.set(errors=[])                       # put back
        q = run_cli("recover", workdir=tmp_path)
        assert q.returncode == 0 and "restored" in q.stdout, (q.stdout, q.stderr)
        assert journals(journal_root) == []
        assert sha256_device(c.device, c) == before, "the card changed: saved bytes were not written back"
        row.saw("card back: restored, sha256 before == after")
    nothing_left(row, emu_dir, db)


# -- full mode on a directory --------------------------------------------------------------------------------------

def _verify_files(mnt) -> list[str]:
    return files_in(mnt, VERIFY_FILE_RE)


@pytest.mark.parametrize("fault, words", [
    pytest.param("yank-write", ("stopped answering", "removed", "I/O error", "write error"), id="yank-write",
                 marks=pytest.mark.scenario("verify --full DIR: card yanked mid-write",
                                            "exit 5, doc stored incomplete with its error")),
    pytest.param("yank-read", ("stopped answering", "removed", "I/O error", "read"), id="yank-read",
                 marks=pytest.mark.scenario("verify --full DIR: card yanked mid-read",
                                            "exit 5, doc stored incomplete with its error")),
    pytest.param("ro", ("read-only",), id="read-only",
                 marks=pytest.mark.scenario("verify --full DIR: fs goes read-only mid-write (ext4 error)",
                                            "exit 5 'read-only', doc stored incomplete")),
])
@pytest.mark.slow
def test_full_fault(row, tmp_path, emu_dir, fault, words):
    db = tmp_path / "results.sqlite3"
    opts = {"mount_options": "errors=remount-ro"} if fault == "ro" else {}
    with card(**FULL) as c, c.filesystem("ext4", **opts) as mnt:
        base = counters(c)
        p = start_cli("verify", "--full", mnt, "--db", str(db), workdir=tmp_path)
        if fault == "yank-read":
            wait_until(when_read(c, 8 * MB, base, 40 * MB), 60, "the read-back pass", p)
        else:
            wait_until(when_written(c, 12 * MB, base), 60, "12 MB of the fill", p)
        if fault == "ro":
            Path(f"/sys/fs/ext4/{os.path.basename(c.device)}/trigger_fs_error").write_text("cardbench fault\n")
        else:
            c.yank()
        p.wait(60)
        assert p.returncode == 5, (p.returncode, p.stderr[-500:])
        line = one_error_line(p, *words)
        row.saw(f"exit 5: {line[11:]}")
        d = incomplete_doc(db)
        row.saw(f"doc stored: complete={d['complete']}, verdict={d['verdict']}, error set")
        row.saw(f"{len(_verify_files(mnt))} verify file(s) listed afterwards")
    nothing_left(row, emu_dir, db)


@pytest.mark.parametrize("sig", [
    pytest.param(signal.SIGINT, id="SIGINT",
                 marks=pytest.mark.scenario("verify --full DIR: SIGINT at a random point",
                                            "exit 130 names --resume; files kept on purpose; next verify removes them")),
    pytest.param(signal.SIGKILL, id="SIGKILL",
                 marks=pytest.mark.scenario("verify --full DIR: SIGKILL at a random point",
                                            "next verify removes the killed run's files and finishes clean")),
])
@pytest.mark.slow
def test_full_interrupted(row, tmp_path, emu_dir, sig):
    db = tmp_path / "results.sqlite3"
    delay = RNG.uniform(0.0, 3.0)   # the fill lasts ~2.8 s, the read-back ~1.4 s
    row.saw(f"seed {SEED}: signal {delay:.2f} s after the first write")
    with card(**FULL) as c, c.filesystem("ext4") as mnt:
        base = counters(c)
        p = start_cli("verify", "--full", mnt, "--db", str(db), workdir=tmp_path)
        wait_until(when_written(c, 1, base), 60, "the fill's first write", p)
        time.sleep(delay)
        assert p.alive(), "verify ended before the signal"
        p.signal(sig)
        p.wait(60)
        kept = _verify_files(mnt)
        if sig == signal.SIGINT:
            assert p.returncode == 130, (p.returncode, p.stderr)
            line = one_error_line(p, "interrupted")
            assert "--resume" in line, line
            incomplete_doc(db, "interrupted")
            row.saw(f"exit 130: {len(kept)} file(s) kept for --resume, said in the line")
        else:
            assert p.returncode == -signal.SIGKILL
            row.saw(f"killed: {len(kept)} file(s) left")
        c.set(write_rate=400 * MB, read_rate=800 * MB)   # the clean-up run need not be slow
        q = run_cli("verify", "--full", mnt, "--no-save", "--json", workdir=tmp_path)
        assert q.returncode == 0, q.stderr
        assert _verify_files(mnt) == [], _verify_files(mnt)
        assert files_in(mnt) == []
        row.saw("next verify removed them and finished; no file left")
    nothing_left(row, emu_dir, db)


# -- bad areas: a result, or a fault of the run ---------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.scenario("verify quick: EIO on writes in a range (the last quarter)",
                      "exit 5: saved bytes there cannot go back, journal kept; restored once it heals")
def test_quick_write_errors_in_a_range(row, tmp_path, emu_dir, journal_root):
    db = tmp_path / "results.sqlite3"
    with card(**QUICK) as c:
        scribble(c.device, c)
        before = sha256_device(c.device, c)
        c.set(errors=[(c.size * 3 // 4, c.size, "write")])
        p = run_cli("verify", c.device, "--db", str(db), workdir=tmp_path)
        assert p.returncode == 5, (p.returncode, p.stderr)
        line = one_error_line(p, "kept")
        row.saw(f"exit 5: {line[11:]}")
        d = incomplete_doc(db, "kept")
        row.saw(f"doc: verdict {d['verdict']} ({d['kind']}), usable {d['usable_bytes']}, bad ranges {d['bad_ranges']}")
        assert d["usable_bytes"] is not None and d["usable_bytes"] <= c.size * 3 // 4
        assert len(journals(journal_root)) == 1
        c.set(errors=[])
        q = run_cli("recover", workdir=tmp_path)
        assert q.returncode == 0 and "restored" in q.stdout, (q.stdout, q.stderr)
        assert journals(journal_root) == []
        assert sha256_device(c.device, c) == before, "the card changed: saved bytes were not written back"
        row.saw("healed: recover restored it, sha256 before == after")
    nothing_left(row, emu_dir, db)


@pytest.mark.slow
@pytest.mark.scenario("verify --full DIR: EIO on reads in a range",
                      "a result, not a fault: exit 0, verdict damaged, usable < announced, files removed")
def test_full_read_errors_in_a_range(row, tmp_path, emu_dir):
    db = tmp_path / "results.sqlite3"
    with card(size=64 * MiB, write_rate=100 * MB, read_rate=200 * MB) as c, c.filesystem("ext4") as mnt:
        c.set(errors=[(40 * MiB, 48 * MiB, "read")])
        p = run_cli("verify", "--full", mnt, "--db", str(db), workdir=tmp_path)
        assert p.returncode == 0, (p.returncode, p.stderr)
        assert "Traceback" not in p.stderr
        docs = stored_verify(db)
        assert len(docs) == 1
        d = docs[0]
        assert d["verdict"] == "damaged" and d["usable_bytes"] < d["announced_bytes"], (d["verdict"], d["usable_bytes"])
        row.saw(f"exit 0: verdict {d['verdict']}, usable {d['usable_bytes']} of {d['announced_bytes']}, "
                f"bad ranges {d['bad_ranges']}, complete {d['complete']}")
        assert _verify_files(mnt) == []
        row.saw("files removed")
    nothing_left(row, emu_dir, db)
