"""fio JSON output (a stored fixture and a real fio run) and cardbench's own export."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cardbench.errors import UsageError
from cardbench.importers import import_file, import_text
from cardbench.importers.fio import fio_size
from cardbench.plan import pattern_name
from cardbench.report import render
from cardbench.result import Card
from cardbench_factories import make_result


def test_fio_fixture(data_dir):
    rep = import_file(data_dir / "fio_card.json", card=Card(name="Extreme", label="U3"), reader="Anker 2-in-1")
    assert rep.format == "fio" and len(rep.results) == 1
    r = rep.results[0]
    assert r.source == "import-fio"
    assert r.started_at == "2024-05-01T10:00:00+00:00"
    assert (r.card.name, r.card.label, r.reader.name) == ("Extreme", "U3", "Anker 2-in-1")
    assert r.target["directory"] == "/mnt/card"
    assert [t.name for t in r.tests] == ["seq_read_1m_q1t1", "seq_write_1m_q1t1", "rand_read_4k_q32t1",
                                         "rand_write_4k_q1t1", "rand_read_4k_q4t1_mixed", "rand_write_4k_q4t1_mixed"]
    seq = r.test("seq_read_1m_q1t1")
    run = seq.runs[0]
    assert (run.bytes, run.seconds, run.ops) == (67108864, 2.871, 64)
    assert seq.median_bytes_per_s == pytest.approx(67108864 / 2.871)
    assert seq.method["bw_bytes"] == 67108864 * 1000 // 2871
    assert seq.method["block_size"] == 1 << 20 and seq.method["engine"] == "fio"
    assert seq.method["ioengine"] == "libaio" and seq.method["direct"] == "1"
    rand = r.test("rand_read_4k_q32t1")
    assert rand.method["iodepth"] == 32 and rand.runs[0].ops == 10240
    lat = rand.runs[0].latency_s
    assert set(lat) >= {"p1", "p50", "p90", "p99", "p99.9", "max", "mean"}
    assert 0 < lat["p50"] < lat["p99"] < lat["p99.9"] < 1
    assert rand.iops_values()[0] == pytest.approx(1024.0)


def test_fio_sizes_and_names():
    assert fio_size("4k") == 4096 and fio_size("1M") == 1 << 20 and fio_size("128KiB") == 131072
    assert fio_size("4k", kb_base=1000) == 4000 and fio_size("4KiB", kb_base=1000) == 4096
    assert fio_size("4096") == 4096 and fio_size("junk") is None
    assert [pattern_name(True, "read", b, 1, 1) for b in (512, 4096, 131072, 1 << 20)] == \
        ["seq_read_512_q1t1", "seq_read_4k_q1t1", "seq_read_128k_q1t1", "seq_read_1m_q1t1"]


def test_fio_without_data():
    doc = {"fio version": "fio-3.33", "jobs": [{"jobname": "t", "job options": {"rw": "trim"}}]}
    with pytest.raises(UsageError, match="no read or write job"):
        import_text(json.dumps(doc))
    with pytest.raises(UsageError, match="not fio JSON"):
        import_text('{"fio version": "x", "jobs": 3}', fmt="fio")


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_real_fio_run(tmp_path):
    out = tmp_path / "fio.json"
    cmd = ["fio", "--output-format=json", f"--output={out}", f"--directory={tmp_path}", "--ioengine=psync",
           "--size=2M", "--bs=64k", "--name=w", "--rw=write", "--name=r", "--rw=randread", "--bs=4k",
           "--iodepth=1", "--numjobs=1"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    r = import_file(out).results[0]
    names = [t.name for t in r.tests]
    assert names == ["seq_write_64k_q1t1", "rand_read_4k_q1t1"]
    for t in r.tests:
        assert t.runs[0].bytes == 2 * 1024 * 1024
        assert t.runs[0].seconds > 0 and t.median_bytes_per_s > 0
    assert r.test("rand_read_4k_q1t1").runs[0].ops == 512


def test_native_export_reads_back_identically(tmp_path):
    rs = [make_result(curves=True), make_result(brand="SanDisk", complete=False)]
    rs[0].claims = [{"claim": "4X", "verdict": "meets"}]
    p = tmp_path / "export.json"
    p.write_text(render(rs, "json"))
    rep = import_file(p)
    assert rep.format == "cardbench" and rep.results == rs
    assert [r.source for r in rep.results] == ["run", "run"]
    single = tmp_path / "one.json"
    single.write_text(json.dumps(rs[0].to_dict()))
    assert import_file(single).results == [rs[0]]
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([r.to_dict() for r in rs]))
    assert import_file(listed).results == rs
