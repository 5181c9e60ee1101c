"""Real processes: a save killed with SIGKILL leaves no partial run; two writers both succeed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cardbench.store import SCHEMA_VERSION, open_store
from cardbench_factories import make_result

HERE = Path(__file__).resolve().parent
#: the cardbench the tests import (this checkout's src/), so a child runs the same code and schema
SRC = Path(__import__("cardbench").__file__).resolve().parents[1]

CHILD_PRELUDE = f"""
import os, sys, time
sys.path.insert(0, {str(HERE)!r})
sys.path.insert(0, {str(SRC)!r})
from cardbench_factories import make_result
from cardbench.store import open_store
from cardbench.store.core import Store
"""

# Saves one result, but stops for good in the middle of the transaction: after the run row and the
# tests' samples are written (one statement for the batch since issue 26), before the commit. The parent then kills it with SIGKILL.
HANG_MID_SAVE = CHILD_PRELUDE + """
url, marker, rid = sys.argv[1], sys.argv[2], sys.argv[3]
calls = []
orig = Store._insert_samples
def hang(self, rows):
    orig(self, rows)
    calls.append(1)
    if len(calls) == 1:
        # inside the open transaction: this connection sees its own uncommitted run row
        n = self.backend.execute("SELECT COUNT(*) FROM runs WHERE result_id = ?", (rid,))[0][0]
        open(marker, "w").write(f"uncommitted runs: {n}")
        time.sleep(600)
Store._insert_samples = hang
r = make_result(curves=True)
r.id = rid
st = open_store(url)
st.save(r)
print("should not get here")
"""

# Saves big results in a loop until killed.
SAVE_LOOP = CHILD_PRELUDE + """
url, marker = sys.argv[1], sys.argv[2]
st = open_store(url)
n = 0
while True:
    r = make_result(curves=True)
    r.tests[0].runs = r.tests[0].runs * 2000
    st.save(r)
    n += 1
    if n == 1:
        open(marker, "w").write("one saved")
"""

WRITER = CHILD_PRELUDE + """
url, go, who = sys.argv[1], sys.argv[2], sys.argv[3]
st = open_store(url)
while not os.path.exists(go):
    time.sleep(0.005)
for i in range(20):
    r = make_result(brand="Lexar", reader="Shared reader", write_times=(40 + i, 41 + i))
    r.warnings = [f"writer {who} save {i}"]
    st.save(r)
st.close()
print("ok", who)
"""


def _spawn(tmp_path, code: str, *args: str) -> subprocess.Popen:
    script = tmp_path / f"child_{abs(hash(code))}.py"
    script.write_text(code)
    return subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("child never reached the point to kill it at")
        time.sleep(0.01)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "results.sqlite3")
    return request.getfixturevalue("pg_url")


@pytest.mark.slow
def test_sigkill_mid_save_leaves_no_partial_run(url, tmp_path):
    before = make_result()
    with open_store(url) as st:
        st.save(before)
    marker = tmp_path / "marker"
    rid = "feedfacefeedfacefeedfacefeedface"
    proc = _spawn(tmp_path, HANG_MID_SAVE, url, str(marker), rid)
    try:
        _wait_for(marker, proc)
        time.sleep(0.05)
        assert marker.read_text() == "uncommitted runs: 1"      # killed mid-save, not before or after
        # While the child sits inside its transaction, other readers see nothing of it.
        with open_store(url) as st:
            assert [r.id for r in st.results()] == [before.id]
    finally:
        _kill(proc)
    assert proc.returncode == -signal.SIGKILL
    with open_store(url) as st:
        assert [r.id for r in st.results()] == [before.id]
        assert st.check() == []
        assert st.backend.execute("SELECT COUNT(*) FROM runs WHERE result_id = ?", (rid,))[0][0] == 0
        assert st.backend.execute("SELECT COUNT(*) FROM tests")[0][0] == len(before.tests)
        n_samples = sum(len(t.runs) for t in before.tests)
        assert st.backend.execute("SELECT COUNT(*) FROM samples")[0][0] == n_samples
        st.save(make_result())        # the store still takes writes
        assert st.count() == 2


@pytest.mark.slow
def test_sigkill_at_random_moments_sqlite(tmp_path):
    url = str(tmp_path / "loop.sqlite3")
    open_store(url).close()
    for delay in (0.05, 0.23, 0.41):
        marker = tmp_path / f"m{delay}"
        proc = _spawn(tmp_path, SAVE_LOOP, url, str(marker))
        try:
            _wait_for(marker, proc)
            time.sleep(delay)
        finally:
            _kill(proc)
        with open_store(url) as st:
            assert st.check() == []
            for r in st.results():
                assert len(r.tests[0].runs) == 6000


def test_two_writers_lose_nothing(url, tmp_path):
    open_store(url).close()         # schema in place; the writers race on saves only
    go = tmp_path / "go"
    procs = [_spawn(tmp_path, WRITER, url, str(go), who) for who in ("a", "b")]
    try:
        time.sleep(0.3)
        go.write_text("go")
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
            outs.append(out.strip())
    finally:
        for p in procs:
            if p.poll() is None:
                _kill(p)
    assert sorted(outs) == ["ok a", "ok b"]
    with open_store(url) as st:
        results = st.results()
        assert len(results) == 40
        assert len({r.id for r in results}) == 40
        assert sorted(r.warnings[0] for r in results) == sorted(
            f"writer {w} save {i}" for w in "ab" for i in range(20))
        assert len(st.cards()) == 1 and len(st.readers()) == 1
        assert st.check() == []


@pytest.mark.slow
def test_two_processes_migrating_a_fresh_database(url, tmp_path):
    """Both open (and so create) the schema at once; both then save."""
    go = tmp_path / "go"
    code = CHILD_PRELUDE + """
url, go = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.002)
st = open_store(url)
st.save(make_result())
print(st.schema_version)
"""
    procs = [_spawn(tmp_path, code, url, str(go)) for _ in range(2)]
    try:
        time.sleep(0.3)
        go.write_text("go")
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err[-2000:]
            assert out.strip() == str(SCHEMA_VERSION)
    finally:
        for p in procs:
            if p.poll() is None:
                _kill(p)
    with open_store(url) as st:
        assert st.count() == 2
        rows = st.backend.execute("SELECT version FROM schema_version ORDER BY version")
        assert [v for (v,) in rows] == list(range(1, SCHEMA_VERSION + 1))
