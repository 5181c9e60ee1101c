"""Named I/O patterns: name parsing, test areas, runs on real files and loop devices."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardbench.errors import SafetyRefusal, UsageError
from cardbench.plan import parse_pattern, pattern_name
from cardbench.target import open_target
from cardbench.workloads.random import (
    TestArea,
    measure_pattern,
    open_area,
    run_once,
    run_pattern,
)

MiB = 1 << 20
ROOT = os.geteuid() == 0
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
LAT_KEYS = {"p50", "p90", "p99", "p99.9", "max"}


def _direct_ok(d: str) -> bool:
    try:
        fd = os.open(os.path.join(d, ".probe"), os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return False
        raise
    os.close(fd)
    os.unlink(os.path.join(d, ".probe"))
    return True


@pytest.fixture
def ddir(tmp_path):
    """A directory where O_DIRECT works (tmp_path unless it is on tmpfs)."""
    if _direct_ok(str(tmp_path)):
        yield str(tmp_path)
        return
    d = tempfile.mkdtemp(prefix="cardbench-test-", dir="/var/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def loopdev():
    if not ROOT:
        pytest.skip("needs root for loop devices")
    from realparts import loop_device
    with loop_device(16 * MiB, directory="/var/tmp", direct_io=True) as dev:
        yield dev


# --- names ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name,seq,op,bs,q,t", [
    ("rand_read_4k_q32t1", False, "read", 4096, 32, 1),
    ("seq_write_1m_q8t1", True, "write", MiB, 8, 1),
    ("seq_read_128k_q32t1", True, "read", 128 * 1024, 32, 1),
    ("rand_write_512_q1t4", False, "write", 512, 1, 4),
    ("RAND_READ_4K_Q1T1", False, "read", 4096, 1, 1),
])
def test_parse_names(name, seq, op, bs, q, t):
    s = parse_pattern(name)
    assert (s.sequential, s.op, s.block_size, s.queue_depth, s.threads) == (seq, op, bs, q, t)
    assert s.fio_rw == ("" if seq else "rand") + op


@pytest.mark.parametrize("bad", [
    "rand_read_4k_q32", "rand_read_4k", "random_read_4k_q1t1", "rand_rw_4k_q1t1", "rand_read_4x_q1t1",
    "rand_read_100_q1t1", "rand_read_4k_q0t1", "rand_read_4k_q257t1", "rand_read_4k_q1t0", "rand_read_4k_q1t65",
    "rand_read_128m_q1t1", "", "seq_read_1m_q8t1 extra", 42,
])
def test_bad_names_are_usage_errors(bad):
    with pytest.raises(UsageError, match="bad test name|a test name"):
        parse_pattern(bad)


@given(seq=st.booleans(), op=st.sampled_from(["read", "write"]), sectors=st.integers(1, 8192),
       q=st.integers(1, 256), t=st.integers(1, 64))
def test_name_round_trip(seq, op, sectors, q, t):
    bs = sectors * 512
    s = parse_pattern(pattern_name(seq, op, bs, q, t))
    assert (s.sequential, s.op, s.block_size, s.queue_depth, s.threads) == (seq, op, bs, q, t)


# --- runs ----------------------------------------------------------------------------------

def test_random_reads_on_a_directory(ddir):
    before = set(os.listdir(ddir))
    res = run_pattern(open_target(ddir), "rand_read_4k_q8t1", "queued", runs=2, duration=0.3, size=8 * MiB)
    assert set(os.listdir(ddir)) == before            # the test area is gone
    assert res.name == "rand_read_4k_q8t1"
    assert len(res.runs) == 2 and len(res.warmup) == 1
    for run in res.runs + res.warmup:
        assert run.ops > 0 and run.bytes == run.ops * 4096
        assert set(run.latency_s) == LAT_KEYS
        assert run.latency_s["p50"] <= run.latency_s["p99"] <= run.latency_s["max"]
    m = res.method
    assert (m["engine"], m["block_size"], m["queue_depth"], m["threads"]) == ("queued", 4096, 8, 1)
    assert m["direct"] is True and m["duration"] == 0.3 and m["area_bytes"] == 8 * MiB
    assert m["target_kind"] == "file" and m["area_filled_bytes"] == 8 * MiB
    assert m["backend"] in ("io_uring", "threads")
    d = res.to_dict()
    assert d["median_iops"] > 0


def test_run_stops_at_the_size_cap(ddir):
    with open_area(open_target(ddir), 4 * MiB) as area:
        run = run_once(parse_pattern("seq_read_1m_q4t1"), area, "queued", duration=30, size=4 * MiB)
        assert os.path.exists(area.path)
    assert not os.path.exists(area.path)
    assert run.bytes == 4 * MiB and run.ops == 4 and run.seconds < 5
    assert run.extra["stopped"] == "size"


def test_run_stops_at_the_duration(ddir):
    with open_area(open_target(ddir), 4 * MiB) as area:
        run = run_once(parse_pattern("rand_read_4k_q1t1"), area, "sync", duration=0.2, size=1 << 40)
    assert run.extra["stopped"] == "duration"
    assert 0.2 <= run.seconds < 0.5


def test_writes_and_threads(ddir):
    res = run_pattern(open_target(ddir), "rand_write_4k_q4t2", "queued", runs=1, warmup=0, duration=0.3, size=8 * MiB)
    assert res.runs[0].ops > 0 and res.method["threads"] == 2 and res.method["sync_end"] is True


def test_sync_engine_refuses_a_queue(ddir):
    with pytest.raises(UsageError, match="one operation at a time"):
        run_pattern(open_target(ddir), "rand_read_4k_q32t1", "sync")
    with pytest.raises(UsageError, match="unknown engine"):
        run_pattern(open_target(ddir), "rand_read_4k_q1t1", "magic")


@needs_fio
def test_fio_engine_through_the_workload(ddir):
    res = run_pattern(open_target(ddir), "rand_read_4k_q4t1", "fio", runs=1, warmup=1, duration=0.5, size=8 * MiB)
    run = res.runs[0]
    assert run.ops > 0 and set(run.latency_s) == LAT_KEYS
    assert res.method["engine"] == "fio" and "--iodepth=4" in res.method["fio_command"]


def test_block_device_writes_need_allow_write(loopdev):
    with pytest.raises(SafetyRefusal, match="allow_write"):
        run_pattern(open_target(loopdev), "rand_write_4k_q1t1", "sync", runs=1, warmup=0, duration=0.1)
    area = TestArea(path=loopdev, offset=0, size=16 * MiB, kind="device")
    with pytest.raises(SafetyRefusal):
        measure_pattern(area, "seq_write_1m_q1t1", "sync", runs=1, warmup=0, duration=0.1)
    res = run_pattern(open_target(loopdev), "rand_write_4k_q4t1", "queued", runs=1, warmup=0, duration=0.2, allow_write=True)
    assert res.runs[0].ops > 0 and res.method["target_kind"] == "device"
    reads = run_pattern(open_target(loopdev), "seq_read_1m_q2t1", "queued", runs=1, warmup=0, duration=5, time_based=False)
    assert reads.runs[0].bytes == 16 * MiB          # the whole device, once (not time-based)
    assert reads.method["area_bytes"] == 16 * MiB


@pytest.mark.parametrize("engine", ["sync", "queued"])
def test_a_timed_sequential_read_wraps_within_its_area(loopdev, engine):
    """fio's time_based: a sequential test with a duration lasts its duration, wrapping to the
    area's start at its end, instead of stopping at the end of a small area (which made a fast
    disk's matrix figures 2.8-3.1x fio's over 3 s)."""
    res = run_pattern(open_target(loopdev), "seq_read_1m_q1t1" if engine == "sync" else "seq_read_1m_q4t1", engine,
                      runs=1, warmup=0, duration=0.4, size=4 * MiB)
    run = res.runs[0]
    assert res.method["area_bytes"] == 4 * MiB
    assert 0.4 <= run.seconds < 1.5 and run.extra["stopped"] == "duration"
    assert run.bytes > 4 * MiB                      # past the area's end: wrapped, still timed
    assert "time-based" in res.method["stop"]


def test_missing_target_is_a_target_error(tmp_path):
    from cardbench.errors import TargetError
    with pytest.raises(TargetError):
        run_pattern(open_target(str(tmp_path / "nope")), "rand_read_4k_q1t1", "sync")


def test_sigterm_removes_the_test_area(ddir):
    """A run stopped by SIGTERM leaves no file behind (and says why it stopped)."""
    import signal
    import subprocess
    import sys
    import time
    code = ("import sys; from cardbench.workloads.random import run_pattern; "
            "from cardbench.target import open_target; "
            "run_pattern(open_target(sys.argv[1]), 'rand_read_4k_q1t1', 'sync', runs=100, duration=1.0, size=8 << 20)")
    from realparts import child_env
    p = subprocess.Popen([sys.executable, "-c", code, ddir], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=child_env())
    try:
        deadline = time.monotonic() + 30
        while not any(n.startswith(".cardbench-area-") for n in os.listdir(ddir)):
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() else "no area"
            time.sleep(0.02)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode != 0 and "Interrupted" in err
    assert [n for n in os.listdir(ddir) if n.startswith(".cardbench-")] == []
