"""One cardbench per target: a child process holds the lock, the parent is refused or waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cardbench.devices.lock import default_lock_dir, lock_key, target_lock
from cardbench.errors import Busy, TargetError
from devices_helpers import CAN_LOOP, loop_device, needs_loop

HOLDER = textwrap.dedent("""
    import sys, time
    from cardbench.devices.lock import target_lock
    key, lock_dir, label, hold = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    with target_lock(key, label=label, lock_dir=lock_dir):
        print("locked", flush=True)
        sys.stdin.readline()      # wait for "go"
        time.sleep(hold)
""")


def _holder(key: str, lock_dir, label: str, hold: float = 0.0) -> subprocess.Popen:
    """Start a child process that takes the lock and keeps it until told to go (+ ``hold`` s)."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, key, str(lock_dir), label, str(hold)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline()
    assert line.strip() == "locked", "child did not take the lock"
    return child


def test_second_run_is_refused_while_the_first_holds_the_lock(tmp_path):
    child = _holder("blk-8-16", tmp_path, "/dev/sdb")
    try:
        with pytest.raises(Busy) as e:
            with target_lock("blk-8-16", lock_dir=tmp_path):
                pass
        assert e.value.message == f"another cardbench (pid {child.pid}) is testing /dev/sdb"
        assert e.value.exit_code == 7
        started = time.monotonic()
        with pytest.raises(Busy):
            with target_lock("blk-8-16", wait=True, timeout=0.3, lock_dir=tmp_path):
                pass
        assert time.monotonic() - started >= 0.3
        with target_lock("blk-8-32", lock_dir=tmp_path):   # another target is free
            pass
    finally:
        child.kill()
        child.wait()


def test_wait_blocks_until_the_holder_is_done(tmp_path):
    child = _holder("dir-1-2-3", tmp_path, "/media/card", hold=0.5)
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
        started = time.monotonic()
        with target_lock("dir-1-2-3", wait=True, lock_dir=tmp_path, label="me") as path:
            waited = time.monotonic() - started
            assert path.read_text() == f"{os.getpid()}\nme\n"
        assert waited >= 0.3
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    child = _holder("k", tmp_path, "x")
    child.send_signal(signal.SIGKILL)
    child.wait()
    with target_lock("k", lock_dir=tmp_path):
        pass


def test_lock_keys_for_directories_and_files(tmp_path):
    st = os.stat(tmp_path)
    assert lock_key(str(tmp_path)) == f"dir-{os.major(st.st_dev)}-{os.minor(st.st_dev)}-{st.st_ino}"
    f = tmp_path / "card.img"
    f.write_bytes(b"x")
    assert lock_key(str(f)).startswith("file-")
    assert lock_key(str(tmp_path)) != lock_key(str(f))
    with pytest.raises(TargetError):
        lock_key(str(tmp_path / "missing"))


@needs_loop
def test_lock_key_of_a_partition_is_its_whole_device():
    with loop_device(8 << 20, partitioned=True) as (dev, _):
        rdev = os.stat(dev).st_rdev
        assert lock_key(dev) == f"blk-{os.major(rdev)}-{os.minor(rdev)}"
        assert lock_key(dev + "p1") == lock_key(dev)


def test_keys_are_safe_file_names(tmp_path):
    with target_lock("../../etc/passwd", lock_dir=tmp_path) as path:
        assert path.parent == tmp_path


@pytest.mark.skipif(not CAN_LOOP, reason="needs root")
def test_default_lock_dir_is_under_run_for_root():
    assert str(default_lock_dir()) == "/run/cardbench/locks"
