"""`cardbench run` against cards of known speed: seq_write and cold_read within 3% of the set
rates on ext4 on emulated cards, slow and fast (issue: emulated cards, part 3); and the demo."""

from __future__ import annotations

import os
import re

import pytest

from cardbench.result import Card
from cardbench.runner import RunOptions, run_directory
from cardbench.target import DirTarget
from cardbench.units import MB, MiB
from realparts import ROOT, call_cli

pytestmark = pytest.mark.skipif(not ROOT or not os.path.exists("/dev/fuse"), reason="needs root and FUSE")


@pytest.mark.timing
@pytest.mark.parametrize("write,read,size", [
    (1.0 * MB, 3.6 * MB, 2 * MB),     # a slow 2006 CF card ("4X" Lexar class)
    (4.9 * MB, 4.9 * MB, 6 * MB),     # SanDisk Ultra II
    (20 * MB, 40 * MB, 24 * MB),      # a modern card behind USB 2.0
])
@pytest.mark.slow
def test_run_matches_set_rates(write, read, size):
    from cardbench.emulate import CardSpec, EmulatedCard
    spec = CardSpec(size=256 * MiB, write_rate=write, read_rate=read, name="acc")
    with EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
        r = run_directory(DirTarget.open(mnt), RunOptions(size=size, runs=3, warmup=0, card=Card(name="acc")))
    w = r.test("seq_write").median_bytes_per_s
    rd = r.test("cold_read").median_bytes_per_s
    assert w == pytest.approx(write, rel=0.03), f"seq_write {w / MB:.3f} MB/s vs set {write / MB:.3f}"
    assert rd == pytest.approx(read, rel=0.03), f"cold_read {rd / MB:.3f} MB/s vs set {read / MB:.3f}"
    assert not [w for t in r.tests for w in t.warnings if "read back wrong" in w]


@pytest.mark.slow
def test_demo_prints_measured_rows(tmp_path):
    db = str(tmp_path / "demo.sqlite3")
    p = call_cli("demo", "--cards", "3", "--db", db, timeout=180)
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if re.match(r"\s*(Lexar|SanDisk|PNY|Crucial)\b.* \d+\.\d{3} ", line)]
    assert len(rows) >= 3
    assert "Lexar 48M" in p.stdout and "SanDisk 64M" in p.stdout
    p = call_cli("results", "--db", db, "--format", "csv")
    assert p.returncode == 0 and len(p.stdout.strip().splitlines()) == 4
    # every file sized so that no run is too short to time well (issue 30: 6 MB files made runs of 0.41 s)
    p = call_cli("results", "--db", db, "--json")
    assert p.returncode == 0 and "cold_read" in p.stdout and "too short to time well" not in p.stdout
    out = os.popen("losetup -a").read()
    assert "demo" not in out
