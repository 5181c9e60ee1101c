"""Peer tools' results: fio (real 3.33 runs, 2.x layout), KDiskMark, CrystalDiskMark, f3 (real runs),
f3probe, H2testw, hdparm (real, on a loop device), dd (real), the 2006 survey table; bad input."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess

import pytest

from cardbench.errors import UsageError
from cardbench.importers import import_file, import_text
from cardbench.store import open_store
from realparts import ROOT, call_cli, loop_device, mounted

MiB = 1 << 20
PEERS = os.path.join(os.path.dirname(__file__), "data", "peers")
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
needs_root = pytest.mark.skipif(not ROOT, reason="needs root for loop devices")


def peer(name: str) -> str:
    return os.path.join(PEERS, name)


# --- fio ---------------------------------------------------------------------------------------

def _fio(tmp_path, fmt: str, *extra: str) -> str:
    data = tmp_path / "fio.dat"
    if not data.exists():
        with open(data, "wb") as f:
            f.write(os.urandom(4 * MiB))
    out = subprocess.run(["fio", f"--output-format={fmt}", f"--filename={data}", "--ioengine=psync", "--size=4M",
                          *extra, "--name=card-seq", "--rw=read", "--bs=64k", "--name=card-rand", "--new_group",
                          "--rw=randwrite", "--bs=4k", "--io_size=1M"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    return out


def to_fio2(doc: dict) -> dict:
    """The same run in fio 2.x's JSON layout (stat.c at fio-2.18): io_bytes in KiB, clat/lat/slat in µs,
    no io_kbytes / bw_bytes, percentile keys unchanged."""
    d = copy.deepcopy(doc)
    d["fio version"] = "fio-2.18"
    for job in d["jobs"]:
        for side in ("read", "write", "trim"):
            s = job.get(side)
            if not s:
                continue
            s["io_bytes"] = s.pop("io_kbytes")
            s.pop("bw_bytes", None)
            for k in ("slat", "clat", "lat"):
                v = s.pop(k + "_ns", None)
                if v is None:
                    continue
                us = {kk: (vv / 1000.0 if isinstance(vv, (int, float)) else vv) for kk, vv in v.items()
                      if kk not in ("bins", "N")}
                if "percentile" in v:
                    us["percentile"] = {p: int(x / 1000) for p, x in v["percentile"].items()}
                s[k] = us
    return d


@needs_fio
def test_fio_2x_and_3x_json_of_the_same_job_store_the_same_rate(tmp_path):
    out = _fio(tmp_path, "json")
    doc3 = json.loads(out[out.index("{"):])
    p3, p2 = tmp_path / "v3.json", tmp_path / "v2.json"
    p3.write_text(out)
    p2.write_text(json.dumps(to_fio2(doc3)))
    r3, r2 = import_file(p3), import_file(p2)
    assert "fio 3.x JSON" in r3.convention and "fio 2.x JSON" in r2.convention
    assert not r3.flags and not r2.flags
    t3, t2 = r3.results[0].tests, r2.results[0].tests
    assert [t.name for t in t3] == [t.name for t in t2] == ["seq_read_64k_q1t1", "rand_write_4k_q1t1"]
    for a, b, job in zip(t3, t2, doc3["jobs"], strict=True):
        side = job["read"] if job["read"]["io_bytes"] else job["write"]
        fio_rate = side["io_bytes"] / (side["runtime"] / 1000.0)      # what fio measured
        assert a.median_bytes_per_s == pytest.approx(fio_rate, rel=1e-9)
        assert b.median_bytes_per_s == pytest.approx(a.median_bytes_per_s, rel=0.005)
        assert a.runs[0].latency_s["p50"] == pytest.approx(b.runs[0].latency_s["p50"], rel=0.01, abs=2e-6)
        assert a.extra["raw"] and a.method["jobname"] in ("card-seq", "card-rand")
    assert r3.results[0].card.name == str(tmp_path / "fio.dat")       # named by its filename


@needs_fio
def test_fio_json_plus_group_reporting_and_terse(tmp_path):
    out = _fio(tmp_path, "json+", "--numjobs=2", "--group_reporting")
    p = tmp_path / "plus.json"
    p.write_text(out)
    rep = import_file(p)
    assert [t.name for t in rep.results[0].tests] == ["seq_read_64k_q1t2", "rand_write_4k_q1t2"]
    assert rep.results[0].tests[1].runs[0].bytes == 2 * MiB           # two jobs of 1 MiB, grouped
    terse = _fio(tmp_path, "terse")
    t = tmp_path / "terse.txt"
    t.write_text(terse)
    rep = import_file(t)
    assert rep.format == "fio-terse" and "terse" in rep.convention and not rep.flags
    tests = rep.results[0].tests
    assert [x.name for x in tests] == ["seq_read_64k_q1t1", "rand_write_4k_q1t1"]
    for line, x in zip(terse.strip().splitlines(), tests, strict=True):
        f = line.split(";")
        kib, ms = (int(f[5]), int(f[8])) if x.name.startswith("seq_read") else (int(f[46]), int(f[49]))
        assert x.median_bytes_per_s == pytest.approx(kib * 1024 / (ms / 1000.0))


def test_fio_2x_fixture_is_not_1024_times_too_slow():
    rep = import_file(peer("fio_2.18_randread.json"))
    t = rep.results[0].tests[0]
    assert t.name == "rand_read_4k_q1t1" and not rep.flags
    assert t.median_bytes_per_s == pytest.approx(40960 * 1024 / 140.0)   # ~300 kB/s, not 293 B/s
    assert t.runs[0].latency_s["p50"] == pytest.approx(12608e-6)
    assert "p0" not in t.runs[0].latency_s                              # the "0.00" filler dropped


def test_fio_figures_that_disagree_are_flagged_and_mangled_json_is_named():
    doc = json.load(open(peer("fio_2.18_randread.json")))
    doc["jobs"][0]["read"]["bw"] = 2920                                   # ten times its io_bytes / runtime
    rep = import_text(json.dumps(doc), fmt="fio")
    assert len(rep.flags) == 1 and "bw (KiB/s)" in str(rep.flags[0]) and "jobs[0].read" in str(rep.flags[0])
    del doc["jobs"][0]["read"]["runtime"]
    with pytest.raises(UsageError, match=r"jobs\[0\]\.read: no 'runtime'; nothing imported"):
        import_text(json.dumps(doc))
    text = open(peer("fio_2.18_randread.json")).read()
    with pytest.raises(UsageError, match=r"line \d+ column"):
        import_text(text[: len(text) // 2])


# --- KDiskMark, CrystalDiskMark ----------------------------------------------------------------

def test_kdiskmark_true_rate_failed_tests_not_stored_and_flags():
    rep = import_file(peer("kdiskmark_3.1.4.txt"))
    assert "1.024" in rep.convention
    r = rep.results[0]
    names = [t.name for t in r.tests]
    assert "rand_read_4k_q1t1" not in names                              # printed 0.000: not run
    assert any("0.000" in n and "not stored" in n for n in rep.notes)
    seq = r.test("seq_read_1m_q8t1")
    assert seq.median_bytes_per_s == pytest.approx(97.484 * 1.024e6)
    assert seq.median_bytes_per_s == pytest.approx(95.2 * MiB, rel=0.001)   # its IOPS x block agree
    assert seq.extra["raw"].startswith("Sequential   1 MiB (Q=  8, T= 1):")
    assert [f.line for f in rep.flags] == [17]                            # 2.400 MB/s, but 300 IOPS x 4 KiB
    assert r.card.name == "SanDisk Ultra" and r.target["target"] == "/media/card" and r.started_at == "2024-05-01T10:00:00"


def test_kdiskmark_old_and_mix():
    old = import_file(peer("kdiskmark_1.4.1.txt"))
    assert "1,048,576" in old.convention and not old.flags
    assert old.results[0].test("seq_read_1m_q8t1").median_bytes_per_s == pytest.approx(95.199 * MiB)
    mix = import_file(peer("kdiskmark_2.3.0_peak_mix.txt"))
    names = [t.name for t in mix.results[0].tests]
    assert "seq_readwrite_1m_q8t1_mix70" in names and "rand_read_4k_q32t16" in names and not mix.flags


@pytest.mark.parametrize("version, names", [
    ("5.2.1", ["seq_read_128k_q32t1", "seq_write_128k_q32t1", "rand_read_4k_q32t1", "rand_write_4k_q32t1",
               "seq_read_1m_q1t1", "seq_write_1m_q1t1", "rand_read_4k_q1t1"]),
    ("6.0.1", ["seq_read_128k_q32t1", "seq_write_128k_q32t1", "rand_read_4k_q8t8", "rand_write_4k_q8t8",
               "rand_read_4k_q32t1", "rand_write_4k_q32t1", "rand_read_4k_q1t1", "rand_write_4k_q1t1"]),
    ("7.0.0", ["seq_read_1m_q8t1", "seq_read_1m_q1t1", "rand_read_4k_q32t16", "rand_read_4k_q1t1",
               "seq_write_1m_q8t1", "seq_write_1m_q1t1", "rand_write_4k_q32t16", "rand_write_4k_q1t1"]),
    ("8.0.4", ["seq_read_1m_q8t1", "seq_read_1m_q1t1", "rand_read_4k_q32t1", "rand_read_4k_q1t1",
               "seq_write_1m_q8t1", "seq_write_1m_q1t1", "rand_write_4k_q32t1", "rand_write_4k_q1t1"]),
])
def test_crystaldiskmark_versions_stored_as_printed(version, names):
    rep = import_file(peer(f"crystaldiskmark_{version}.txt"))
    assert rep.format == "crystaldiskmark" and version in rep.convention and not rep.flags
    r = rep.results[0]
    assert [t.name for t in r.tests] == names
    first = r.tests[0]
    printed = float(first.method["printed_rate"].split()[0])
    assert first.median_bytes_per_s == pytest.approx(printed * 1e6)


def test_truncated_diskmark_exports_are_refused_in_one_line(tmp_path):
    lines = open(peer("crystaldiskmark_8.0.4.txt")).read().splitlines()
    with pytest.raises(UsageError, match="after line 18: no 'Profile:'.*footer after it: the export is truncated.*nothing imported"):
        import_text("\n".join(lines[:19]))
    kdm = open(peer("kdiskmark_3.1.4.txt")).read().replace("[     95.2 IOPS]", "[ 95.2")
    with pytest.raises(UsageError, match="line 8: not a KDiskMark result line"):
        import_text(kdm)


# --- the 2006 survey table -------------------------------------------------------------------

def test_classic_2006_layout_imports_every_row_and_flags_exactly_the_wrong_ones():
    rep = import_file(peer("classic_2006.txt"))
    assert len(rep.results) == 7
    assert rep.flagged_lines() == [5, 7, 8]                   # Dune's average, Fern's read X, Gale's rate
    assert [s.reason for s in rep.skipped] == ["a header line"]
    acme = rep.results[0]
    assert (acme.card.brand, acme.card.capacity_bytes, acme.card.label) == ("Acme", 32_000_000, "2X")
    assert acme.test("seq_write").runs[0].seconds == 20.1 and len(rep.results[1].test("seq_write").runs) == 4
    assert rep.results[1].card.label is None                               # '-': no label
    assert acme.test("seq_write").extra["raw"].startswith("Acme 32M 2X 20.100")
    other = import_file(peer("classic_2006.txt"), file_size="42MiB")       # the times refer to another file
    assert other.file_size_bytes == 42 * MiB and len(other.flagged_lines()) == 7


# --- f3, f3probe, H2testw -> verify documents ------------------------------------------------

@needs_root
@pytest.mark.skipif(shutil.which("f3write") is None, reason="f3 not installed")
def test_real_f3write_f3read_become_verify_documents(tmp_path):
    with loop_device(48 * MiB) as dev, mounted(dev) as mnt:
        w = subprocess.run(["f3write", mnt], capture_output=True, text=True, check=True, timeout=120).stdout
        r = subprocess.run(["f3read", mnt], capture_output=True, text=True, check=True, timeout=120).stdout
        good = tmp_path / "f3-good.txt"
        good.write_text(w + r)
        with open(os.path.join(mnt, "1.h2w"), "r+b") as f:        # lose 1 MiB at the end of the data
            f.seek(os.path.getsize(f.name) - MiB)
            f.write(b"\0" * MiB)
            os.fsync(f.fileno())
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
        bad = tmp_path / "f3-bad.txt"
        bad.write_text(subprocess.run(["f3read", mnt], capture_output=True, text=True, check=True,
                                      timeout=120).stdout)
    rep = import_file(good)
    assert rep.format == "f3" and "MiB" in rep.convention and not rep.results
    d = rep.verify_docs[0]
    ok = int(r.split("Data OK:")[1].split("(")[1].split()[0])
    assert d["verdict"] == "genuine" and d["usable_bytes"] == ok * 512 and d["schema"] == "cardbench.verify/1"
    assert d["files"][0]["counts"]["ok"] == ok and d["timings"]["write_bytes_per_s"] > 0
    rep2 = import_file(bad)
    d2 = rep2.verify_docs[0]
    assert d2["verdict"] in ("counterfeit", "damaged") and d2["usable_bytes"] == (ok - 2048) * 512
    assert d2["sectors"]["corrupted"] + d2["sectors"]["changed"] + d2["sectors"]["overwritten"] == 2048
    db = tmp_path / "r.db"
    with open_store(db) as s:
        rep.save_to(s)
        rep.save_to(s)                                            # idempotent: same id, replaced
        assert [v["verdict"] for v in s.verify_results()] == ["genuine"]
    with pytest.raises(UsageError, match="f3write alone has no verdict"):
        import_text(w)


def test_f3probe_limbo_and_h2testw_logs():
    p = import_file(peer("f3probe_8.0_limbo.txt")).verify_docs[0]
    assert (p["verdict"], p["kind"], p["f3_type"]) == ("counterfeit", "dropped", "limbo")
    assert p["usable_bytes"] == 16477879 * 512 and p["announced_bytes"] == 32155648 * 512
    assert p["fix_command"] == "f3fix --last-sec=16477878 /dev/sdb" and p["device"] == "/dev/sdb"
    ok = import_file(peer("h2testw_1.4_ok.txt")).verify_docs[0]
    assert ok["verdict"] == "genuine" and ok["usable_bytes"] == 15000 * MiB
    assert ok["timings"]["write_bytes_per_s"] == pytest.approx(12.3 * MiB)
    fake = import_file(peer("h2testw_1.4_fake.txt"))
    d = fake.verify_docs[0]
    assert d["verdict"] == "counterfeit" and d["usable_bytes"] == 16383999 * 512 and not fake.flags
    mangled = open(peer("h2testw_1.4_fake.txt")).read().replace("7.8 GByte OK", "7.8 GByte")
    with pytest.raises(UsageError, match="without its 'GByte OK"):
        import_text(mangled)


@needs_root
@pytest.mark.skipif(shutil.which("f3probe") is None, reason="f3 not installed")
def test_real_f3probe_on_a_loop_device(tmp_path):
    with loop_device(16 * MiB) as dev:
        out = subprocess.run(["f3probe", "--destructive", "--time-ops", dev], capture_output=True, text=True,
                             timeout=120).stdout
    p = tmp_path / "probe.txt"
    p.write_text(out)
    d = import_file(p).verify_docs[0]
    assert d["verdict"] == "genuine" and d["usable_bytes"] == 16 * MiB == d["announced_bytes"]


# --- hdparm, dd ------------------------------------------------------------------------------

@pytest.mark.slow
@needs_root
@pytest.mark.skipif(shutil.which("hdparm") is None, reason="hdparm not installed")
def test_real_hdparm_on_a_loop_device(tmp_path):
    with loop_device(32 * MiB) as dev:
        out = subprocess.run(["hdparm", "-t", "-T", dev], capture_output=True, text=True, check=True,
                             timeout=120).stdout
        out += subprocess.run(["hdparm", "-t", "--direct", dev], capture_output=True, text=True, check=True,
                              timeout=120).stdout
    p = tmp_path / "hdparm.txt"
    p.write_text(out)
    rep = import_file(p)
    assert rep.format == "hdparm" and "MiB/s" in rep.convention
    r = rep.results[0]
    assert r.card.name == dev and [t.name for t in r.tests] == ["cached_read", "raw_read", "raw_read_direct"]
    raw = r.test("raw_read")
    assert raw.runs[0].bytes % MiB == 0 and not rep.flags
    printed = float(raw.extra["raw"].split("=")[1].split()[0])
    assert raw.median_bytes_per_s == pytest.approx(printed * MiB, rel=0.001)   # hdparm's own rate, not 0.01 s steps
    assert any("not the card" in w for w in r.test("cached_read").warnings)
    bad = out.replace(raw.extra["raw"].split("=")[1].split()[0] + " MB/sec", "1.00 MB/sec", 1)
    bad_rep = import_text(bad, fmt="hdparm")
    assert len(bad_rep.flags) == 1


# what real hdparm printed for a cached loop device in CI: the seconds round to 0.00, the rate is its own
HDPARM_UNDER_5MS = ("\n/dev/loop0:\n Timing O_DIRECT disk reads:  32 MB in  0.00 seconds = 9037.00 MB/sec\n")


def test_hdparm_seconds_printed_as_zero_take_the_time_from_its_rate():
    t = import_text(HDPARM_UNDER_5MS, fmt="hdparm").results[0].test("raw_read_direct")
    assert t.median_bytes_per_s == pytest.approx(9037.00 * MiB, rel=1e-6)
    assert t.runs[0].seconds == pytest.approx(32 / 9037.00, rel=1e-6) and t.runs[0].seconds < 0.005
    assert any("0.00 seconds (under 0.005 s)" in w for w in t.warnings)
    # 32 MiB in under 0.005 s is at least 6400 MiB/s: a printed 100 MB/sec cannot be, and is flagged
    slow = import_text(HDPARM_UNDER_5MS.replace("9037.00", "100.00"), fmt="hdparm")
    assert len(slow.flags) == 1 and "under 0.005 s" in str(slow.flags[0])
    with pytest.raises(UsageError, match="line 3: zero seconds and a zero rate"):
        import_text(HDPARM_UNDER_5MS.replace("9037.00", "0.00"), fmt="hdparm")


def test_real_dd_and_every_coreutils_wording(tmp_path):
    target = tmp_path / "out.bin"
    cmd = ["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=8", "conv=fsync"]
    tail = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    p = tmp_path / "dd.txt"
    p.write_text("$ " + " ".join(cmd) + "\n" + tail)
    rep = import_file(p)
    t = rep.results[0].tests[0]
    assert t.name == "seq_write_1m_q1t1" and t.runs[0].bytes == 8 * MiB and not rep.flags
    rep = import_file(peer("dd_coreutils.txt"))
    assert [x.name for x in rep.results[0].tests] == ["seq_write_1m_q1t1", "seq_read_1m_q1t1", "seq_write_4k_q1t1",
                                                      "seq_write_100_q1t1"]
    assert rep.results[0].tests[0].median_bytes_per_s == pytest.approx(67108864 / 5.12345)
    assert rep.results[0].tests[3].runs[0].seconds == pytest.approx(0.000195547)     # decimal comma
    wrong = "67108864 bytes (67 MB, 64 MiB) copied, 5.12345 s, 31.1 MB/s\n"
    flagged = import_text(wrong)
    assert len(flagged.flags) == 1 and "rate (MB/s)" in str(flagged.flags[0])
    assert flagged.results[0].tests[0].name == "dd_copy" and flagged.notes


def test_busybox_dd_is_binary():
    """busybox dd's third status line (a real busybox 1.37 run, built with its default config:
    Debian's busybox is built without that line) prints 1024-based figures with no space before
    the unit: 330.9MB/s is 33554432 B / 0.096714 s in MiB/s. Read as coreutils' decimal units,
    each figure would be 4.9% (MB) or 7.4% (GB) off its own bytes and seconds."""
    rep = import_file(peer("dd_busybox_1.37.txt"))
    assert "busybox" in rep.convention and not rep.flags, [str(f) for f in rep.flags]
    w, r = rep.results[0].tests
    assert (w.name, r.name) == ("seq_write_1m_q1t1", "seq_read_4k_q1t1")
    assert w.median_bytes_per_s == 33554432 / 0.096714
    assert w.median_bytes_per_s / MiB == pytest.approx(330.9, abs=0.05)
    # the same figures with coreutils' space are decimal, and then they disagree with the bytes
    with open(peer("dd_busybox_1.37.txt")) as f:
        text = f.read()
    spaced = text.replace("330.9MB/s", "330.9 MB/s").replace("2.3GB/s", "2.3 GB/s")
    assert sorted(f.figure for f in import_text(spaced).flags) == ["rate (GB/s)", "rate (MB/s)", "size in MB",
                                                                   "size in MB"]


# --- detection, CLI ------------------------------------------------------------------------

def test_unknown_format_lists_what_was_tried():
    with pytest.raises(UsageError, match="tried cardbench JSON, fio JSON, fio terse, fio normal output, KDiskMark.*CSV"):
        import_text("just some words\nand nothing more\n")


@pytest.mark.slow
def test_cli_import_says_the_convention_and_is_idempotent(tmp_path):
    db = str(tmp_path / "r.db")
    for _ in range(2):
        r = call_cli("import", peer("kdiskmark_3.1.4.txt"), "--db", db)
        assert r.returncode == 0, r.stderr
    assert "units: KDiskMark 3.1.4" in r.stdout and "saved 1 result" in r.stdout
    with open_store(db) as s:
        assert s.count() == 1
    r = call_cli("import", peer("f3probe_8.0_limbo.txt"), "--db", db)
    assert r.returncode == 0 and "verify: COUNTERFEIT (dropped)" in r.stdout
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    r = call_cli("import", str(bad), "--db", db)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "tried" in r.stderr


@pytest.mark.parametrize("text, where", [
    ("67108864 bytes (67 MB, 64 MiB) copied, abc s, 13.1 MB/s\n", "line 1: a dd closing line"),
    ("/dev/sdb:\n Timing buffered disk reads: lots MB in 3 seconds\n", "line 2: an hdparm"),
    ("3;fio-3.33;job;0;0;100;200;300;400\n", "line 1: 9 fields"),
    ('{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "read": {"io_bytes": "abc", "runtime": 5}}]}',
     r"jobs\[0\]\.read\.io_bytes: 'abc' is not a number"),
    ("F3 read 8.0\n        SECTORS      ok/corrupted/changed/overwritten\n"
     "Validating file 1.h2w ...   65280/        0/      0/      0\n", "no 'Data OK:' line"),
])
def test_mangled_exports_name_the_line_or_key(text, where, tmp_path):
    with pytest.raises(UsageError, match=where + ".*nothing imported"):
        import_text(text)


#: what hypothesis generated in CI: fio terse v3 with a read runtime of 1e17 ms (field 9), so its
#: operations (IOPS x runtime) were beyond SQLite's 64-bit INTEGER and the store raised OverflowError
TERSE_HUGE_RUNTIME = "3;fio-2.2.10;rand_read_4k;1;0;1227748;1226521;306630;100100000000000000.01;0;0;0.000000;0.000000;1;4056;2.678064;10.123555;1.000000%=1;5.000000%=1;10.000000%=1;20.000000%=2;30.000000%=2;40.000000%=2;50.000000%=2;60.000000%=2;70.000000%=2;80.000000%=2;90.000000%=3;95.000000%=3;99.000000%=43;99.500000%=48;99.900000%=74;99.950000%=82;99.990000%=124;0%=0;0%=0;0%=0;1;4056;2.746277;10.135023;956936;956936;78.020352%;956936.000000;0.000000;0;0;0;0;0;0;0.000000;0.000000;0;0;0.000000;0.000000;1.000000%=0;5.000000%=0;10.000000%=0;20.000000%=0;30.000000%=0;40.000000%=0;50.000000%=0;60.000000%=0;70.000000%=0;80.000000%=0;90.000000%=0;95.000000%=0;99.000000%=0;99.500000%=0;99.900000%=0;99.950000%=0;99.990000%=0;0%=0;0%=0;0%=0;0;0;0.000000;0.000000;0;0;0.000000%;0.000000;0.000000;24.300000%;64.000000%;3702;0;7;100.0%;0.0%;0.0%;0.0%;0.0%;0.0%;0.0%;17.64%;80.47%;0.28%;0.04%;1.15%;0.41%;0.02%;0.01%;0.01%;0.01%;0.01%;0.00%;0.01%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;vda;7007;39;0;8;310;221;552;7.71%\n"


def test_a_figure_beyond_a_stores_integers_is_refused_in_one_line(tmp_path):
    from cardbench.result import Result, Run, TestResult
    with pytest.raises(UsageError, match=r"ops 3.07e\+19 is beyond any device; nothing imported"):
        import_text(TERSE_HUGE_RUNTIME)
    # an export carrying such a count (edited by hand) is refused the same way, nothing stored
    r = Result(target={"kind": "directory", "path": "/media/card"},
               tests=[TestResult("seq_write", {}, runs=[Run(2**64, 1.0)])])
    p = tmp_path / "export.json"
    p.write_text(json.dumps(r.to_dict()))
    with pytest.raises(UsageError, match=r"bytes 1.84e\+19 is beyond any device"):
        import_file(p)
