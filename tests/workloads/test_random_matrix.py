"""The matrix profile (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1; read and write)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile

import pytest

from cardbench.target import open_target
from cardbench.workloads.matrix import CDM_LABELS, MATRIX_TESTS, run_matrix

MiB = 1 << 20
ROOT = os.geteuid() == 0


@pytest.fixture
def ddir(tmp_path):
    d = str(tmp_path)
    try:
        fd = os.open(os.path.join(d, ".p"), os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
        os.close(fd)
        os.unlink(os.path.join(d, ".p"))
        yield d
        return
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    d = tempfile.mkdtemp(prefix="cardbench-test-", dir="/var/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_matrix_on_a_directory(ddir):
    seen = []
    results = run_matrix(open_target(ddir), "queued", runs=1, warmup=1, duration=0.15, size=8 * MiB,
                         progress=lambda name, i, run: seen.append((name, i)))
    assert [r.name for r in results] == list(MATRIX_TESTS)
    assert os.listdir(ddir) == []
    for r in results:
        assert r.complete and len(r.runs) == 1 and len(r.warmup) == 1
        assert r.runs[0].ops > 0 and set(r.runs[0].latency_s) == {"p50", "p90", "p99", "p99.9", "max"}
        assert r.method["profile"] == "matrix" and r.method["area_bytes"] == 8 * MiB
        assert r.extra["label"] == CDM_LABELS[r.name]
    assert len(seen) == 16 and seen[0] == ("seq_read_1m_q8t1", -1)


def test_matrix_on_a_device_skips_writes_unless_allowed():
    if not ROOT:
        pytest.skip("needs root for loop devices")
    from realparts import loop_device
    with loop_device(8 * MiB, directory="/var/tmp", direct_io=True) as dev:
        results = run_matrix(open_target(dev), "queued", runs=1, warmup=0, duration=0.1)
        by = {r.name: r for r in results}
        assert all(by[n].complete for n in MATRIX_TESTS if "_read_" in n)
        for n in MATRIX_TESTS:
            if "_write_" in n:
                assert not by[n].complete and not by[n].runs
                assert "allow_write" in by[n].warnings[0]
        sync = run_matrix(open_target(dev), "sync", runs=1, warmup=0, duration=0.1, tests=["seq_read_1m_q8t1", "rand_read_4k_q1t1"])
        assert not sync[0].complete and "one operation at a time" in sync[0].warnings[0]
        assert sync[1].complete
