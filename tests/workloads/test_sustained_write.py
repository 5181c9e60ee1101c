"""Sustained write: the rate curve, and the write cache found on an emulated card of known cache."""

from __future__ import annotations

import os
import random

import pytest

from cardbench.errors import SafetyRefusal, UsageError
from cardbench.target import open_target
from cardbench.workloads.sustained import analyze_curve, sustained_write

MB = 1_000_000
MiB = 1 << 20
ROOT = os.geteuid() == 0
HAVE_FUSE = os.path.exists("/dev/fuse")


def _curve(fast, slow, cache, total, slice_, noise=0.0, seed=1):
    """A synthetic curve: ``cache`` bytes at ``fast``, the rest at ``slow``, in ``slice_`` slices."""
    rng = random.Random(seed)
    pts, b = [], 0
    while b < total:
        n = min(slice_, total - b)
        fast_part = max(0, min(n, cache - b))
        t = fast_part / fast + (n - fast_part) / slow
        t *= 1 + rng.uniform(-noise, noise)
        b += n
        pts.append([b, n / t])
    return pts


@pytest.mark.parametrize("cache", [10 * MiB, 33 * MiB + 123 * 4096, 50 * MiB])
def test_analyze_finds_the_cache_end_between_slices(cache):
    res = analyze_curve(_curve(40 * MB, 10 * MB, cache, 100 * MiB, 4 * MiB, noise=0.02))
    assert res["cache_end_bytes"] == pytest.approx(cache, rel=0.03)
    assert res["fast_bytes_per_s"] == pytest.approx(40 * MB, rel=0.03)
    assert res["slow_bytes_per_s"] == pytest.approx(10 * MB, rel=0.03)


def test_analyze_level_curve_has_no_cache():
    res = analyze_curve(_curve(20 * MB, 20 * MB, 0, 100 * MiB, 1 * MiB, noise=0.05))
    assert res["cache_end_bytes"] is None and res["fast_bytes_per_s"] is None
    assert res["slow_bytes_per_s"] == pytest.approx(20 * MB, rel=0.03)
    assert "no write cache" in res["note"]


def test_analyze_cache_larger_than_the_run():
    pts = _curve(40 * MB, 10 * MB, 200 * MiB, 100 * MiB, 1 * MiB)
    pts[-1][1] = 20 * MB     # a dip at the very end is not a cache end
    res = analyze_curve(pts)
    assert res["cache_end_bytes"] is None or res["cache_end_bytes"] >= 98 * MiB


def test_analyze_tiny_curves():
    assert analyze_curve([])["slow_bytes_per_s"] is None
    assert analyze_curve([[MiB, 5e6], [2 * MiB, 5e6]])["slow_bytes_per_s"] == 5e6


def test_sustained_on_a_directory(tmp_path):
    before = set(os.listdir(tmp_path))
    seen = []
    res = sustained_write(open_target(str(tmp_path)), total_bytes=16 * MiB, chunk=1 * MiB, slice_bytes=2 * MiB,
                          progress=lambda done, total, rate: seen.append(done))
    assert set(os.listdir(tmp_path)) == before          # the file is gone
    curve = res.extra["curve"]
    assert [p[0] for p in curve] == [(i + 1) * 2 * MiB for i in range(8)]
    assert all(p[1] > 0 for p in curve)
    assert seen == [p[0] for p in curve]
    assert res.runs[0].bytes == 16 * MiB and res.runs[0].ops == 16
    assert res.method["chunk"] == MiB and res.method["target_kind"] == "file"
    assert "cache_end_bytes" in res.extra and "slow_bytes_per_s" in res.extra
    with pytest.raises(UsageError):
        sustained_write(open_target(str(tmp_path)), total_bytes=16 * MiB, chunk=1000)


def test_sustained_device_needs_allow_write():
    if not ROOT:
        pytest.skip("needs root for loop devices")
    from realparts import loop_device
    with loop_device(8 * MiB, directory="/var/tmp", direct_io=True) as dev:
        with pytest.raises(SafetyRefusal):
            sustained_write(open_target(dev))
        res = sustained_write(open_target(dev), chunk=1 * MiB, allow_write=True)
        assert res.runs[0].bytes == 8 * MiB and res.extra["curve"][-1][0] == 8 * MiB
        # queued, several chunks in flight: every sector still lands where it belongs
        res = sustained_write(open_target(dev), chunk=256 * 1024, allow_write=True, engine="queued", queue_depth=4, tag=77)
        assert res.method["backend"] in ("io_uring", "threads")
        from cardbench.patterns import Pattern
        with open(dev, "rb") as f:
            data = f.read(8 * MiB)
        pat = Pattern(77)
        assert pat.judge(data, 0).ok       # every sector where it belongs, checked in one piece


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.skipif(not (ROOT and HAVE_FUSE), reason="needs root and /dev/fuse")
def test_cache_of_an_emulated_card_is_found():
    """A card writing its first 24 MiB at 40 MB/s and then 12 MB/s: the cache end within 5%,
    the slow rate within 3%."""
    from cardbench.emulate import CardSpec, EmulatedCard
    from cardbench.errors import EnvironmentMissing
    cache = 24 * MiB
    spec = CardSpec(size=96 * MiB, write_rate=12 * MB, read_rate=20 * MB, cache_bytes=cache, cache_rate=40 * MB)
    try:
        card = EmulatedCard(spec).__enter__()
    except EnvironmentMissing as e:
        pytest.skip(f"emulated card not available: {e}")
    try:
        res = sustained_write(open_target(card.device), chunk=1 * MiB, allow_write=True)
    finally:
        card.__exit__(None, None, None)
    e = res.extra
    assert e["cache_end_bytes"] == pytest.approx(cache, rel=0.05)
    assert e["slow_bytes_per_s"] == pytest.approx(12 * MB, rel=0.03)
    assert e["fast_bytes_per_s"] == pytest.approx(40 * MB, rel=0.05)
    assert res.runs[0].bytes == 96 * MiB and res.complete


def test_sigterm_removes_the_file(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    code = ("import sys; from cardbench.workloads.sustained import sustained_write; "
            "from cardbench.target import open_target; "
            "sustained_write(open_target(sys.argv[1]), total_bytes=64 << 20, chunk=1 << 20, max_seconds=60, "
            "progress=lambda *a: __import__('time').sleep(0.05))")
    from realparts import child_env
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        deadline = time.monotonic() + 30
        while not any(n.startswith(".cardbench-sustained-") for n in os.listdir(tmp_path)):
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read() if p.poll() else "no file"
            time.sleep(0.02)
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode != 0 and "Interrupted" in err
    assert os.listdir(tmp_path) == []
