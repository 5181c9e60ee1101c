"""`cardbench run DEVICE` on a loop device (issue: know the device, part 2): raw_read agrees with
fio's sequential O_DIRECT read of the same device in the same run, raw_access gives latency
percentiles, and the device is read-only unless --destructive."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cardbench.engine.fio import run_fio
from cardbench.runner import DeviceOptions, run_device
from cardbench.target import open_target
from cardbench.units import MB, MiB
from realparts import ROOT, call_cli, child_env, loop_device, mounted, sha256_device

pytestmark = pytest.mark.skipif(not ROOT, reason="needs root for loop devices")


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="needs FUSE for an emulated card")
def test_raw_read_matches_fio_on_the_same_device():
    from cardbench.emulate import CardSpec, EmulatedCard
    with EmulatedCard(CardSpec(size=64 * MiB, write_rate=10 * MB, read_rate=20 * MB, name="raw")) as card:
        r = run_device(open_target(card.device, kinds=("device",), whole_device=True), DeviceOptions(runs=3, warmup=0, positions=8, sample=4 * MiB, access_seconds=0.5))
        fio = run_fio(card.device, "read", MiB, size=24 * MiB)
    raw = r.test("raw_read")
    ratio = raw.median_bytes_per_s / fio.bytes_per_s
    assert ratio == pytest.approx(1.0, abs=0.03), f"raw_read / fio = {ratio:.4f}"
    assert raw.median_bytes_per_s == pytest.approx(20 * MB, rel=0.03)
    positions = raw.runs[0].extra["positions"]
    assert len(positions) == 8 and positions[0][0] == 0 and positions[-1][0] == 60 * MiB
    access = r.test("raw_access")
    assert set(access.runs[0].latency_s) >= {"p50", "p90", "p99", "p99.9", "max"}


@pytest.mark.slow
def test_device_run_is_read_only_and_destructive_needs_rules(tmp_path):
    with loop_device(32 << 20) as dev:
        with open(dev, "r+b") as f:
            f.write(os.urandom(1 << 20) * 32)
        before = sha256_device(dev)
        p = call_cli("run", dev, "--runs", "1", "--positions", "4", "--json", "--no-save")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert [t["name"] for t in doc["tests"]] == ["raw_read", "raw_access"]
        assert doc["target"]["kind"] == "device" and doc["target"]["transport"] == "loop"
        assert sha256_device(dev) == before
        # wrong confirmation: refused, untouched
        p = call_cli("run", dev, "--destructive", "--confirm", "12345", "--no-save")
        assert p.returncode == 4 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert sha256_device(dev) == before
        # --preserve with the right identity (no serial: the exact size): written, then restored
        p = call_cli("run", dev, "--destructive", "--preserve", "--confirm", str(32 << 20), "--runs", "1",
                    "--positions", "4", "--json", "--no-save")
        assert p.returncode == 0, p.stderr
        assert "raw_write" in [t["name"] for t in json.loads(p.stdout)["tests"]]
        assert sha256_device(dev) == before
        with mounted(dev) as mnt:
            assert os.path.isdir(mnt)
            mounted_sum = sha256_device(dev)
            p = call_cli("run", dev, "--destructive", "--confirm", str(32 << 20), "--no-save")
            assert p.returncode == 4 and "mounted" in p.stderr and "Traceback" not in p.stderr
            assert sha256_device(dev) == mounted_sum


def test_partition_and_missing_paths_are_one_line():
    for args, needle in [(["run", "/dev/nonexistent-card"], "no such"), (["run", "/dev/null"], "")]:
        p = call_cli(*args, "--no-save")
        assert p.returncode != 0 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr.lower()


def test_destructive_run_asks_on_the_terminal(tmp_path):
    """`run --destructive` without --confirm on a terminal (a pty): the warning names the device,
    the identity typed is checked; a wrong one refuses (exit 4), the right one runs raw_write
    (here with --preserve: the device is as it was)."""
    with loop_device(32 << 20) as dev:
        with open(dev, "r+b") as f:
            f.write(os.urandom(1 << 20) * 32)
        before = sha256_device(dev)
        for answer, code in (("12345", 4), (str(32 << 20), 0)):
            master, slave = os.openpty()
            try:
                os.write(master, answer.encode() + b"\n")
                p = subprocess.run([sys.executable, "-m", "cardbench", "run", dev, "--destructive", "--preserve",
                                    "--runs", "1", "--warmup", "0", "--positions", "4", "--json", "--no-save"],
                                   stdin=slave, capture_output=True, text=True, env=child_env(), timeout=120)
            finally:
                os.close(slave)
                os.close(master)
            assert p.returncode == code, p.stderr
            assert f"{dev} (unknown model, 33.6 MB, {32 << 20} bytes): raw_write will overwrite parts of it" in p.stderr
            assert "Type its size in bytes to go on" in p.stderr and "Traceback" not in p.stderr
            if code:
                # the answer's newline is echoed on the terminal, not into stderr's pipe
                assert p.stderr.rstrip().endswith(f"cardbench: confirmation does not match the size in bytes of "
                                                  f"{dev}; nothing was written")
            else:
                assert "raw_write" in [t["name"] for t in json.loads(p.stdout)["tests"]]
            assert sha256_device(dev) == before
