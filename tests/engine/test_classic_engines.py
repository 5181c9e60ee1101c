"""The classic test (seq_write + cold_read) on every engine of the I/O layer: sync, queued and
fio agree within 3% on an emulated card of known speed, through the library and `run --engine`."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from cardbench.engine import engine_names
from cardbench.runner import RunOptions, run_directory
from cardbench.target import DirTarget
from cardbench.units import MB, MiB
from realparts import ROOT, call_cli

pytestmark = [pytest.mark.skipif(not ROOT or not os.path.exists("/dev/fuse") or not shutil.which("fio"),
                                 reason="needs root, FUSE and fio"), pytest.mark.timing]

WRITE, READ = 10 * MB, 20 * MB


@pytest.mark.slow
def test_classic_tests_agree_across_engines(tmp_path):
    from cardbench.emulate import CardSpec, EmulatedCard
    assert engine_names() == ("sync", "queued", "fio")
    spec = CardSpec(size=128 * MiB, write_rate=WRITE, read_rate=READ, name="engines")
    rates: dict[str, tuple[float, float]] = {}
    with EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
        for engine in engine_names():
            r = run_directory(DirTarget.open(mnt), RunOptions(size=8 * MiB, runs=2, warmup=0, engine=engine))
            w, rd = r.test("seq_write"), r.test("cold_read")
            assert w.method["engine"] == rd.method["engine"] == engine
            rates[engine] = (w.median_bytes_per_s, rd.median_bytes_per_s)
            if engine == "fio":
                assert "fio_command" in w.method and rd.method["verified"] is False
            else:
                assert rd.method["verified"] is True
                assert not [x for t in r.tests for x in t.warnings if "read back wrong" in x]
        # the command line takes the same choice (and lists the registry's engines)
        db = tmp_path / "r.sqlite3"
        p = call_cli("run", mnt, "--engine", "queued", "--size", "4MiB", "--runs", "1", "--json", "--db", str(db))
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert {t["method"]["engine"] for t in doc["tests"]} == {"queued"}
        p = call_cli("run", mnt, "--engine", "nope", "--db", str(db))
        assert p.returncode == 2 and "'sync', 'queued', 'fio'" in p.stderr.replace('"', "'")
    ref_w, ref_r = rates["sync"]
    for engine, (w, rd) in rates.items():
        assert w == pytest.approx(ref_w, rel=0.03), f"seq_write {engine} {w / MB:.3f} vs sync {ref_w / MB:.3f} MB/s"
        assert rd == pytest.approx(ref_r, rel=0.03), f"cold_read {engine} {rd / MB:.3f} vs sync {ref_r / MB:.3f} MB/s"
        assert w == pytest.approx(WRITE, rel=0.03) and rd == pytest.approx(READ, rel=0.03)
