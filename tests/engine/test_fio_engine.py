"""The fio engine: real fio runs, its JSON read into Runs, and the command it builds."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cardbench.engine import engine_info, engine_names, get_engine
from cardbench.engine.fio import fio_command, parse_fio_json, run_fio
from cardbench.engine.jobs import Job, run_job
from cardbench.errors import DeviceFault, UsageError
from engine_helpers import data_file, needs_fio, odirect_dir

MiB = 1 << 20
pytestmark = needs_fio


@pytest.fixture
def ddir(tmp_path):
    with odirect_dir(str(tmp_path)) as d:
        yield d


def test_run_fio_random_reads(ddir):
    path, _ = data_file(ddir, 8 * MiB)
    run = run_fio(path, "randread", 4096, iodepth=4, size=2 * MiB, runtime=5, area=8 * MiB)
    assert run.bytes == 2 * MiB                      # stopped at the size, well before 5 s
    assert run.ops == 512
    assert 0 < run.seconds < 5
    assert set(run.latency_s) == {"p50", "p90", "p99", "p99.9", "max"}
    assert 0 < run.latency_s["p50"] <= run.latency_s["p90"] <= run.latency_s["p99"] <= run.latency_s["max"]
    assert set(run.extra["lat_s"]) == {"p50", "p90", "p99", "p99.9", "max"}
    assert run.extra["fio_version"].startswith("fio-")
    assert "--direct=1" in run.extra["fio_command"]
    assert run.bytes_per_s == pytest.approx(run.extra["fio_bw_bytes"], rel=0.01)


def test_run_fio_sequential_write_time_based(ddir):
    path, _ = data_file(ddir, 4 * MiB)
    run = run_fio(path, "write", 1 * MiB, iodepth=2, size=4 * MiB, runtime=0.3, time_based=True, end_fsync=True)
    assert run.seconds == pytest.approx(0.3, abs=0.1)
    assert run.bytes >= 4 * MiB                       # time-based: wraps the 4 MiB area
    assert run.bytes % MiB == 0
    assert os.path.getsize(path) == 4 * MiB           # never grows the file


def test_parse_real_fio_json_with_leading_notes(ddir):
    """fio prints notes before the JSON at times; the parser skips them."""
    path, _ = data_file(ddir, 1 * MiB)
    cmd = fio_command(path, "read", 65536, 1, 2, size=1 * MiB)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    doc = json.loads(out[out.index("{"):])
    run = parse_fio_json("fio: some note\n" + out + "\nfio: a note after\n", "read")
    assert run.bytes == 2 * MiB                        # two jobs, 1 MiB each, added up
    assert run.ops == 32
    assert run.bytes == sum(j["read"]["io_bytes"] for j in doc["jobs"])
    assert run.latency_s["max"] == pytest.approx(doc["jobs"][0]["read"]["clat_ns"]["max"] / 1e9)
    # the side is found without being told
    assert parse_fio_json(doc).bytes == 2 * MiB
    assert parse_fio_json(doc, "write").bytes == 0


def test_fio_failures_are_one_line_errors(ddir):
    with pytest.raises(DeviceFault, match="fio failed"):
        run_fio(os.path.join(ddir, "missing.bin"), "read", 4096, size=1 * MiB, runtime=1)
    with pytest.raises(UsageError):
        fio_command("/dev/null", "readwrite", 4096, size=1 * MiB)
    with pytest.raises(UsageError):
        fio_command("/dev/null", "read", 4096, size=6000)          # not a multiple of the block
    with pytest.raises(UsageError):
        fio_command("/dev/null", "read", 4096, iodepth=0, size=1 * MiB)
    with pytest.raises(ValueError):
        parse_fio_json("no json here")


def test_fio_is_registered_as_a_job_runner():
    """fio declares that it runs whole jobs (no single operations): asking it for an operation
    engine is refused in one line, and it is among the registered names the CLI offers."""
    assert "fio" in engine_names() and engine_names()[:2] == ("sync", "queued")
    info = engine_info("fio")
    assert not info.caps.operations and info.run_job is not None
    with pytest.raises(UsageError, match="whole workloads"):
        get_engine("fio", 8)
    with pytest.raises(UsageError, match="choose sync, queued, fio"):
        get_engine("nope")


def _distinct_blocks(path: str, block: int) -> tuple[int, int]:
    with open(path, "rb") as f:
        data = f.read()
    blocks = {data[i:i + block] for i in range(0, len(data), block)}
    return len(blocks), len(data) // block


def test_a_write_job_through_fio_writes_fresh_data_each_time(ddir):
    """A workload's write job run by fio asks it for --refill_buffers: every 4 KiB block of the
    file differs, though the sequential job wrapped the area four times; fio reusing its buffer
    (--scramble_buffers=0, shown beside it in bench/engine_vs_fio.py) writes a few blocks only."""
    path, _ = data_file(ddir, 1 * MiB)
    run = run_job("fio", Job(path=path, op="write", block_size=4096, area=1 * MiB, time_based=True, duration=0.2))
    assert run.bytes >= 2 * MiB and run.extra["data"].startswith("unique per write")
    assert "--refill_buffers" in run.extra["fio_command"]
    distinct, total = _distinct_blocks(path, 4096)
    assert distinct == total
    run_fio(path, "write", 4096, size=1 * MiB, buffers="reuse")
    distinct, total = _distinct_blocks(path, 4096)
    assert distinct < total // 4
    with pytest.raises(UsageError):
        fio_command(path, "write", 4096, size=1 * MiB, buffers="fresh")
