"""Real fio runs across versions, as JSON and terse: the stored rate is the one fio itself
measured, whatever the version's units. Fixtures: data/peers/fio_real (see SOURCES.md): one job
file (1 MiB sequential write, 4 KiB random read, 70/30 4 KiB randrw, 128 KiB read with
numjobs=2 and group_reporting) run by fio 2.1.11, 2.2.10, 2.18, 3.1 and 3.33."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardbench.errors import UsageError
from cardbench.importers import import_file, import_text
from cardbench.units import KiB

REAL = Path(__file__).resolve().parent / "data" / "peers" / "fio_real"
BLOCKS = [1 << 20, 4096, 4096, 4096, 128 * KiB]
JSONS = ["2.1.11", "2.2.10", "2.18", "3.1", "3.33"]


def _own_figures(version: str) -> list[tuple[int, float, float]]:
    """Each side with data, as the JSON itself gives it: (io bytes, runtime s, bw KiB/s)."""
    doc = json.loads((REAL / f"fio-{version}.json").read_text())
    out = []
    for job in doc["jobs"]:
        for side in ("read", "write"):
            d = job[side]
            io = d["io_kbytes"] * KiB if "io_kbytes" in d else d["io_bytes"] * (KiB if "clat" in d else 1)
            if io:
                out.append((io, d["runtime"] / 1000.0, d["bw"]))
    return out


@pytest.mark.parametrize("version", JSONS)
def test_real_json_stores_what_fio_measured(version):
    rep = import_file(REAL / f"fio-{version}.json")
    assert rep.flags == [], [str(f) for f in rep.flags]
    tests = rep.results[0].tests
    assert [t.method["block_size"] for t in tests] == BLOCKS, [t.name for t in tests]
    for t, (io, secs, bw) in zip(tests, _own_figures(version), strict=True):
        assert t.runs[0].bytes == io and t.runs[0].seconds == secs, t.name
        # fio's bw: whole KiB/s of the same io / runtime
        assert abs(t.median_bytes_per_s / KiB - bw) <= 1.0 + KiB / secs / KiB, (t.name, t.median_bytes_per_s, bw)
    if version == "2.1.11":
        # no job options and no operation count in 2.1's JSON: the block from io / (IOPS x runtime)
        assert all("IOPS x runtime" in " ".join(t.method["inferred"]) for t in tests)


@pytest.mark.parametrize("version", JSONS)
def test_real_terse_stores_what_fio_measured(version):
    rep = import_file(REAL / f"fio-{version}.terse.txt")
    assert rep.format == "fio-terse" and rep.flags == [], [str(f) for f in rep.flags]
    tests = rep.results[0].tests
    assert [t.method["block_size"] for t in tests] == BLOCKS, [t.name for t in tests]
    for t in tests:
        f = t.extra["raw"].split(";")
        side = 5 if "write" not in t.name else 5 + 41
        kib, bw, ms = float(f[side]), float(f[side + 1]), float(f[side + 3])
        assert t.runs[0].bytes == kib * KiB and t.runs[0].seconds == ms / 1000.0, t.name
        assert abs(t.median_bytes_per_s / KiB - bw) <= 1.0 + 1000.0 / ms, (t.name, t.median_bytes_per_s, bw)


def test_a_mangled_terse_depth_field_is_one_line():
    """Found by the import fuzzer (seeded from these files): a broken I/O-depth percentage was an
    internal error; it is bad input naming the line and the field."""
    lines = (REAL / "fio-2.1.11.terse.txt").read_text().splitlines()
    f = lines[1].split(";")
    f[92] = "100.:0%"                  # field 93: the share of I/O at depth 1
    lines[1] = ";".join(f)
    with pytest.raises(UsageError, match=r"line 2: field 93 \(I/O depth distribution\)"):
        import_text("\n".join(lines))
