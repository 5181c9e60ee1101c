"""fio's default human output, 2.x and 3.x, at its true units.

The fixtures in data/peers/fio_real are real runs of fio 2.1.11, 2.2.10, 2.18 and 3.1 (built from
their tags) and 3.33 (Debian's), each with ``--output-format=normal,json`` where the version has
it (2.18 and later): the JSON and the human output of the same run, split into two files. The
same job file ran under ``kb_base=1000`` too. See data/peers/SOURCES.md. A real fio run of this
machine's fio is made here as well."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cardbench.errors import UsageError
from cardbench.importers import detect_format, import_file, import_text

REAL = Path(__file__).resolve().parent / "data" / "peers" / "fio_real"
TWINS = ["2.18", "3.1", "3.33", "3.33-kb1000", "3.33-more"]   # JSON and normal output of one run
ONLY_NORMAL = ["2.1.11", "2.2.10", "2.2.10-kb1000"]     # before --output-format=normal,json


def _normal(version: str):
    return import_file(REAL / f"fio-{version}.normal.txt")


@pytest.mark.parametrize("version", [v for v in TWINS if v != "3.33-more"] + ONLY_NORMAL)
def test_recognised_and_every_figure_agrees(version):
    text = (REAL / f"fio-{version}.normal.txt").read_text()
    assert detect_format(text) == "fio-normal"
    rep = _normal(version)
    assert rep.format == "fio-normal" and len(rep.results) == 1
    assert rep.flags == [], [str(f) for f in rep.flags]
    tests = rep.results[0].tests
    assert len(tests) == 5, [t.name for t in tests]
    for t in tests:
        assert t.method["io_from"] == "issued I/Os x block size", t.name
        assert t.runs[0].ops and t.runs[0].bytes % t.runs[0].ops == 0
        assert t.method["fio_output"] == "normal" and t.extra["raw"].startswith(t.method["jobname"] + ": (groupid=")
        assert t.runs[0].latency_s and t.runs[0].latency_s["mean"] > 0 and "p50" in t.runs[0].latency_s


@pytest.mark.parametrize("version", TWINS)
def test_the_same_run_as_json_stores_the_same_rates(version):
    """One run's JSON and human output: the same tests, bytes, seconds and operations."""
    js = import_file(REAL / f"fio-{version}.json").results[0]
    hu = _normal(version).results[0]
    assert [t.name for t in hu.tests] == [t.name for t in js.tests]
    for a, b in zip(js.tests, hu.tests, strict=True):
        ra, rb = a.runs[0], b.runs[0]
        assert (rb.seconds, rb.ops) == (ra.seconds, ra.ops), a.name
        if b.method["io_from"] == "issued I/Os x block size":
            assert rb.bytes == ra.bytes and b.median_bytes_per_s == a.median_bytes_per_s, a.name
        else:   # bsrange: no one block size, so the printed io= (4 significant figures)
            assert version == "3.33-more" and a.name == "rand_read_24k_q1t1"
            assert rb.bytes == pytest.approx(ra.bytes, rel=0.001)
        assert b.method["block_size"] == a.method["block_size"] and b.method["numjobs"] == a.method["numjobs"]
        # latencies: the human output prints them rounded, in its own unit
        assert rb.latency_s["mean"] == pytest.approx(ra.latency_s["mean"], rel=0.01, abs=2e-8), a.name


def test_unified_clones_ranges_and_depth():
    """fio 3.33: unified_rw_reporting (one "mixed" line), numjobs=2 without group_reporting (a
    section per clone), bsrange=4k-64k (no one block size) and libaio at iodepth 16, named as the
    JSON of the same run names them."""
    rep = _normal("3.33-more")
    assert rep.flags == []
    assert [t.name for t in rep.results[0].tests] == ["rand_readwrite_4k_q1t1_mixed", "seq_read_64k_q1t2",
                                                      "seq_read_64k_q1t2_2", "rand_read_24k_q1t1",
                                                      "rand_read_4k_q16t1"]
    assert any("ranged read" in n and "printed, rounded io=" in n for n in rep.notes)


def _printed_bw(line: str) -> tuple[float, str]:
    m = re.search(r"bw=([0-9.]+)([KMG]?)B/s", line)
    return float(m.group(1)), m.group(2)


@pytest.mark.parametrize("version,base", [("2.1.11", 1024), ("2.2.10", 1024), ("2.2.10-kb1000", 1000)])
def test_2x_kb_is_decided_by_the_files_own_io_counts(version, base):
    """2.16 and earlier print "KB/s" whatever the kb_base: KiB by default, kB under kb_base=1000.
    The file's own issued I/Os x block size decide which, and the stored rate is the one fio's
    printed bw stands for in that base (not 2.4% or 4.9% off in the other)."""
    rep = _normal(version)
    assert ("1000-based" in rep.convention) == (base == 1000), rep.convention
    for t in rep.results[0].tests:
        side = "write" if "_write_" in t.name else "read"
        value, prefix = _printed_bw(next(ln for ln in t.extra["raw"].splitlines()
                                         if re.match(rf"\s+{side}\s*: io=", ln)))
        printed = value * base ** {"": 0, "K": 1, "M": 2, "G": 3}[prefix]
        whole_unit = base ** {"": 0, "K": 1, "M": 2, "G": 3}[prefix]
        assert abs(t.median_bytes_per_s - printed) <= 1.5 * whole_unit, (t.name, t.median_bytes_per_s, printed)
        other = 1000 if base == 1024 else 1024
        assert abs(t.median_bytes_per_s - value * other ** {"": 0, "K": 1, "M": 2, "G": 3}[prefix]) > whole_unit


def test_kb_base_1000_block_sizes_name_the_tests():
    """Under kb_base=1000, the job's bs=4k is 4000 B: fio 3.x's job line says "4000B", 2.x's
    "4000" (and 128k is 128,000 B, printed "125K" by 2.x): the names carry the true block."""
    for version in ("2.2.10-kb1000", "3.33-kb1000"):
        names = [t.name for t in _normal(version).results[0].tests]
        blocks = [t.method["block_size"] for t in _normal(version).results[0].tests]
        assert blocks == [1_000_000, 4000, 4000, 4000, 128_000], (version, names)


def _swap(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_a_figure_that_disagrees_is_flagged_and_the_exact_counts_win():
    text = (REAL / "fio-3.33.normal.txt").read_text()
    line = next(ln for ln in text.splitlines() if ln.lstrip().startswith("read: IOPS=") and "MiB/s" in ln)
    bw = re.search(r"BW=([0-9.]+)MiB/s", line).group(1)
    wrong = f"{float(bw) * 1.024:.0f}" if "." not in bw else f"{float(bw) * 1.024:.1f}"
    rep = import_text(_swap(text, f"BW={bw}MiB/s", f"BW={wrong}MiB/s"), path="edited.txt")
    assert [f.figure for f in rep.flags] == ["bw"], [str(f) for f in rep.flags]
    good = _normal("3.33").results[0]
    assert [t.median_bytes_per_s for t in rep.results[0].tests] == [t.median_bytes_per_s for t in good.tests]
    flagged = [t for t in rep.results[0].tests if t.warnings]
    assert len(flagged) == 1 and "disagrees with its raw data" in flagged[0].warnings[0]


def test_without_issued_counts_the_printed_io_is_used_and_said():
    text = (REAL / "fio-2.2.10.normal.txt").read_text()
    cut = "\n".join(ln for ln in text.splitlines() if "issued" not in ln)
    rep = import_text(cut, path="pasted.txt")
    assert rep.flags == []
    assert any("printed, rounded io=" in n for n in rep.notes)
    assert "no exact I/O count" in rep.convention
    good = _normal("2.2.10").results[0]
    for a, b in zip(good.tests, rep.results[0].tests, strict=True):
        assert b.method["io_from"] == "the printed io= (rounded)"
        assert b.median_bytes_per_s == pytest.approx(a.median_bytes_per_s, rel=0.002), a.name


def test_pasted_with_an_indent_and_progress_lines():
    """As people paste it: indented (a Markdown code block), with fio's progress line left in
    front of a job's section by a carriage return."""
    text = (REAL / "fio-3.1.normal.txt").read_text()
    text = text.replace("rand_read_4k: (groupid=", "Jobs: 1 (f=1): [r(1)][100.0%][r=1119MiB/s][eta 00m:00s]\r"
                        "rand_read_4k: (groupid=", 1)
    pasted = "\n".join("    " + ln for ln in text.split("\n"))
    assert detect_format(pasted) == "fio-normal"
    got = import_text(pasted, path="pasted.txt").results[0]
    want = _normal("3.1").results[0]
    assert [(t.name, t.median_bytes_per_s) for t in got.tests] == [(t.name, t.median_bytes_per_s) for t in want.tests]


def test_normal_and_json_in_one_file():
    """``--output-format=normal,json`` prints the JSON after the job lines and the normal output
    after it: read as JSON; with a progress line printed into the JSON (as in a terminal capture),
    the normal output beside it is read instead, and that is said."""
    normal = (REAL / "fio-3.33.normal.txt").read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(normal) if ln.startswith("Starting")) + 1
    js = (REAL / "fio-3.33.json").read_text()
    both = "".join(normal[:cut]) + js + "".join(normal[cut:])
    want = [(t.name, t.median_bytes_per_s) for t in _normal("3.33").results[0].tests]
    rep = import_text(both, path="both.txt")
    assert rep.format == "fio" and [(t.name, t.median_bytes_per_s) for t in rep.results[0].tests] == want
    mangled = both.replace("{\n", "{obs: 1 (f=1): [R(1)][100.0%][r=1388MiB/s][eta 00m:00s]\n", 1)
    rep = import_text(mangled, path="both.txt")
    assert rep.format == "fio-normal" and any("fio JSON in this file is not valid" in n for n in rep.notes)
    assert [(t.name, t.median_bytes_per_s) for t in rep.results[0].tests] == want
    with pytest.raises(UsageError, match="not valid JSON"):
        import_text(mangled, path="both.txt", fmt="fio")      # forced: the JSON or nothing


def test_truncated_or_mangled_output_is_one_line_or_what_is_there():
    text = (REAL / "fio-3.1.normal.txt").read_text()
    lines = text.splitlines(keepends=True)
    for n in range(1, len(lines), 3):
        part = "".join(lines[:n])
        try:
            rep = import_text(part, path="cut.txt", fmt="fio-normal")
        except UsageError as e:
            assert "\n" not in str(e)
            continue
        assert rep.results and all(t.runs[0].bytes > 0 for t in rep.results[0].tests)
    with pytest.raises(UsageError, match=r"mangled.txt: line \d+, issued I/O counts: expected a whole number, got .x."):
        import_text(_swap(text, "total=0,", "total=x,"), path="mangled.txt")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_real_fio_normal_and_json_of_one_run(tmp_path):
    """This machine's fio, one run printed both ways: the human output stores what the JSON does."""
    data = tmp_path / "data.bin"
    job = tmp_path / "job.fio"
    job.write_text(f"[global]\nfilename={data}\nsize=8m\nioengine=psync\nruntime=1\ntime_based\n"
                   "[w]\nrw=write\nbs=64k\nend_fsync=1\n[r]\nstonewall\nrw=randread\nbs=4k\niodepth=4\n"
                   "ioengine=libaio\ndirect=1\n[m]\nstonewall\nrw=randrw\nbs=8k\nnumjobs=2\ngroup_reporting\n")
    out = tmp_path / "both.txt"
    subprocess.run(["fio", "--output-format=normal,json", f"--output={out}", str(job)], check=True,
                   capture_output=True, timeout=60)
    lines = out.read_text().splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("{"))
    end = max(i for i, ln in enumerate(lines) if ln.startswith("}"))
    (tmp_path / "run.json").write_text("".join(lines[start:end + 1]))
    (tmp_path / "run.txt").write_text("".join(lines[:start] + lines[end + 1:]))
    js = import_file(tmp_path / "run.json").results[0]
    rep = import_file(tmp_path / "run.txt")
    assert rep.format == "fio-normal" and rep.flags == [], [str(f) for f in rep.flags]
    hu = rep.results[0]
    assert [t.name for t in hu.tests] == [t.name for t in js.tests] == [
        "seq_write_64k_q1t1", "rand_read_4k_q4t1", "rand_read_8k_q1t2_mixed", "rand_write_8k_q1t2_mixed"]
    for a, b in zip(js.tests, hu.tests, strict=True):
        assert (b.runs[0].bytes, b.runs[0].seconds, b.runs[0].ops) == (a.runs[0].bytes, a.runs[0].seconds,
                                                                       a.runs[0].ops), a.name
    os.remove(data)


@pytest.mark.parametrize("first, second, line", [("2.2.10", "3.1", 112 + 10), ("3.1", "2.2.10", 119 + 10)])
def test_two_fio_versions_in_one_log_are_refused_in_one_line(tmp_path, first, second, line):
    # two real runs appended to one log: 2.x's sides had no byte multiplier until its K/M/G base
    # was decided, which only happened for a file read as 2.x: the 2.x sides of a file that also
    # held 3.x lines ended in "internal error: TypeError" (found by mypy: None arithmetic)
    both = tmp_path / "both.txt"
    both.write_text((REAL / f"fio-{first}.normal.txt").read_text() + (REAL / f"fio-{second}.normal.txt").read_text())
    with pytest.raises(UsageError) as e:
        import_file(both)
    assert str(e.value) == (f"{both}: line {line}: a fio {second[0]}.x read/write line after fio {first[0]}.x "
                            "ones: the output of two fio versions in one file; import each run's output alone; "
                            "nothing imported")
