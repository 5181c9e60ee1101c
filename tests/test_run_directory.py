"""`cardbench run DIRECTORY` end to end on a real loop-backed ext4 (issue: the classic card test)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from cardbench.result import SCHEMA, Result
from cardbench.runner import RunOptions, largest_fit, run_directory
from cardbench.target import DirTarget
from cardbench.units import MB
from realparts import call_cli, loop_device, mounted, sh


def leftovers(mnt: str) -> list[str]:
    return [n for n in os.listdir(mnt) if n.startswith("cardbench-")]


def test_run_json_document(loop_ext4):
    p = call_cli("run", loop_ext4, "--size", "4MB", "--runs", "3", "--json", "--no-save",
                "--brand", "Lexar", "--capacity", "48MB", "--label", "4X")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == SCHEMA and doc["complete"] is True
    assert [t["name"] for t in doc["tests"]] == ["seq_write", "cold_read"]
    for t in doc["tests"]:
        assert len(t["runs"]) == 3 and len(t["warmup"]) == 1
        assert all(r["bytes"] == 4_000_000 and r["seconds"] > 0 for r in t["runs"])
        rates = sorted(r["bytes"] / r["seconds"] for r in t["runs"])
        assert t["median_bytes_per_s"] == pytest.approx(rates[1])
        assert t["x_rating"] == pytest.approx(t["median_bytes_per_s"] / 150_000)
        assert t["min_bytes_per_s"] <= t["median_bytes_per_s"] <= t["max_bytes_per_s"]
        lo, hi = t["ci95_bytes_per_s"]
        assert lo <= t["mean_bytes_per_s"] <= hi
        assert isinstance(t["warnings"], list)
        assert t["method"]["io"].startswith("O_DIRECT")
    assert doc["card"]["brand"] == "Lexar" and doc["card"]["capacity_bytes"] == 48_000_000
    assert doc["card"]["label"] == "4X"
    assert doc["target"]["filesystem"] == "ext4"
    assert Result.from_dict(doc).to_dict()["tests"] == doc["tests"]
    assert leftovers(loop_ext4) == []


def test_library_call_and_cold_read_checked(loop_ext4):
    r = run_directory(DirTarget.open(loop_ext4), RunOptions(size=2 * MB, runs=2))
    read = r.test("cold_read")
    assert read.method["cache"].startswith("dropped")
    assert all(f == 0 for f in read.method["resident_fraction_before"])
    assert r.complete and leftovers(loop_ext4) == []


@pytest.mark.slow
def test_auto_size_grows_with_the_card(loop_ext4):
    r = run_directory(DirTarget.open(loop_ext4), RunOptions(runs=1))
    how = r.test("seq_write").method["size_choice"]
    assert how["auto"] is True and len(how["probes"]) >= 1
    # capped by free space: one file's room (free space less 1% + 1 MiB) in a 256 MiB filesystem
    assert r.test("seq_write").method["file_bytes"] <= largest_fit(256 * 2**20)
    assert leftovers(loop_ext4) == []


def test_stored_and_listed(loop_ext4, db_path):
    p = call_cli("run", loop_ext4, "--size", "2MB", "--runs", "3", "--db", db_path, "--brand", "PNY",
                "--capacity", "128MB")
    assert p.returncode == 0, p.stderr
    assert "MB/s" in p.stdout and "X" in p.stdout
    p = call_cli("results", "--db", db_path, "--format", "csv")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 2 and "PNY" in lines[1]


@pytest.mark.slow
def test_db_from_the_environment(loop_ext4, tmp_path, monkeypatch):
    # $CARDBENCH_DB is the default of `run` as of `results`: what one stores the other lists
    station = str(tmp_path / "station.sqlite3")
    monkeypatch.setenv("CARDBENCH_DB", station)
    p = call_cli("run", loop_ext4, "--size", "1MB", "--runs", "1", "--brand", "Lexar", "--capacity", "48MB")
    assert p.returncode == 0, p.stderr
    p = call_cli("results", "--format", "csv")
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.strip().splitlines()) == 2 and "Lexar" in p.stdout
    monkeypatch.delenv("CARDBENCH_DB")
    p = call_cli("results", "--db", station, "--format", "csv")
    assert "Lexar" in p.stdout


@pytest.mark.parametrize("args,needle", [
    (["run", "/nonexistent/dir"], "no such file or directory"),
    (["run", "/etc/hostname"], "not a directory"),
    (["run", "{mnt}", "--size", "0"], "size"),
    (["run", "{mnt}", "--size", "banana"], "not a size"),
    (["run", "{mnt}", "--runs", "-1"], "--runs"),
    (["run", "{mnt}", "--size", "500MB", "--no-save"], "too little free space"),
    (["run", "{mnt}", "--size", "1MB", "--db", "/proc/nope/results.sqlite3"], "database"),
])
def test_bad_input_one_line(shared_ext4, args, needle, tmp_path, monkeypatch):
    # a store of its own: the user's default one may be another cardbench's (a newer schema)
    monkeypatch.setenv("CARDBENCH_DB", str(tmp_path / "results.sqlite3"))
    args = [a.replace("{mnt}", shared_ext4) for a in args]
    p = call_cli(*args)
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    assert needle.lower() in lines[0].lower()
    assert leftovers(shared_ext4) == []


def test_read_only_filesystem_refused():
    with loop_device(64 << 20) as dev, mounted(dev) as mnt:
        sh("mount", "-o", "remount,ro", mnt)
        p = call_cli("run", mnt, "--size", "1MB", "--no-save")
        assert p.returncode == 3 and "read-only" in p.stderr and "Traceback" not in p.stderr


def test_no_permission_refused(loop_ext4):
    """An immutable directory refuses even root (EPERM): the nearest to 'no permission' a root
    test can get without a second user able to import the package."""
    d = os.path.join(loop_ext4, "locked")
    os.mkdir(d)
    sh("chattr", "+i", d)
    try:
        p = call_cli("run", d, "--size", "1MB", "--no-save")
    finally:
        sh("chattr", "-i", d)
    assert p.returncode == 3 and "permission" in p.stderr.lower() and "Traceback" not in p.stderr
    assert os.listdir(d) == []


def _start_run(mnt: str) -> subprocess.Popen:
    from realparts import child_env
    return subprocess.Popen([sys.executable, "-m", "cardbench", "run", mnt, "--size", "80MB", "--runs", "1",
                             "--no-save"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())


def _wait_for_file(mnt: str, timeout: float = 20, *, written: bool = False) -> None:
    """Until a cardbench file appears (``written``: a seq_write file, not the brief writability probe)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if [n for n in leftovers(mnt) if not written or "-w" in n]:
            return
        time.sleep(0.005)
    raise AssertionError("the run never created a test file")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_removes_files(loop_ext4, sig):
    p = _start_run(loop_ext4)
    try:
        _wait_for_file(loop_ext4)
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert leftovers(loop_ext4) == []


def test_killed_run_cleaned_by_next_run(loop_ext4):
    p = _start_run(loop_ext4)
    try:
        _wait_for_file(loop_ext4, written=True)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        p.kill()
    assert leftovers(loop_ext4), "SIGKILL should leave the file behind"
    r = run_directory(DirTarget.open(loop_ext4), RunOptions(size=1 * MB, runs=1))
    assert any("left by an interrupted run" in w for w in r.warnings)
    assert leftovers(loop_ext4) == []


def test_sweep_removes_only_our_leftovers(loop_ext4):
    ours = [".cardbench-area-4242-0badcafe.tmp", ".cardbench-sustained-4242-0badcafe.tmp",
            "cardbench-test-0123456789abcdef-w0.tmp"]
    theirs = ["photo.jpg", "cardbench-notes.txt", "cardbench-verify-0001.cbv"]
    for n in ours + theirs:
        with open(os.path.join(loop_ext4, n), "wb") as f:
            f.write(b"x" * 100)
    r = run_directory(DirTarget.open(loop_ext4), RunOptions(size=1 * MB, runs=1))
    assert any("3 test file(s)" in w for w in r.warnings)
    assert sorted(n for n in os.listdir(loop_ext4) if n != "lost+found") == sorted(theirs)


def test_the_plan_runs_extra_tests_time_based_and_the_sustained_write(loop_ext4):
    """An A2 label adds the app tests; a sequential test over a small area lasts its duration,
    wrapping within the area (fio's time_based); the sustained write runs on the same target
    object; every scratch file is gone afterwards."""
    from cardbench.target import open_target
    target = open_target(loop_ext4, kinds=("directory",), write=True)
    r = run_directory(target, RunOptions(size=2 * MB, runs=1, warmup=0, label="A2", duration=0.3, area=2 * 2**20,
                                         extra_tests=["seq_read_1m_q1t1"], sustained=True))
    names = [t.name for t in r.tests]
    assert names[:3] == ["seq_write", "cold_read", "seq_read_1m_q1t1"] and names[-1] == "sustained_write"
    assert set(names) >= {"rand_read_4k_q1t1", "rand_write_4k_q32t1"}
    seq = r.test("seq_read_1m_q1t1")
    assert seq.method["area_bytes"] == 2 * 2**20 and "time-based" in seq.method["stop"]
    assert seq.runs[0].seconds >= 0.3 and seq.runs[0].bytes > 2 * 2**20
    assert "A1/A2" in r.test("rand_read_4k_q32t1").method["why"]
    assert r.complete and os.listdir(loop_ext4) == ["lost+found"]
