"""`cardbench geometry` on emulated cards with a set geometry: real loop devices, real O_DIRECT
timing through FUSE, the real CLI. Load on the machine only lengthens the emulated delays
(minima are taken), so each card's set geometry must be found."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import time

import pytest

from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.engine.buffers import aligned_buffer
from cardbench.engine.data import DataFile
from cardbench.errors import Interrupted
from cardbench.geometry import GeometryOptions, find_geometry, writes
from cardbench.geometry.doc import SCHEMA, check_doc
from cardbench.report.geometry import render_geometry
from cardbench.target import open_device_target
from cardbench.units import MB
from realparts import call_cli, can_emulate, loop_device, mounted

KiB, MiB = 1 << 10, 1 << 20
pytestmark = [pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE and loop devices"),
              pytest.mark.needs_root]
#: a card like flashbench's README example: ~165 us more across a page, ~300 us across an AU
FLASH = dict(write_rate=20 * MB, read_rate=20 * MB, page_bytes=16 * KiB, au_cross=0.3e-3, page_cross=0.15e-3,
             gc_seconds=0.02)


def geometry_json(*args: str) -> dict:
    p = call_cli("geometry", *args, "--json", "--seed", "3")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == SCHEMA and check_doc(doc) == [] and doc["complete"]
    return doc


def write_mbr(device: str, start_sector: int, sectors: int) -> None:
    """One FAT32 (LBA) partition from ``start_sector``, written through the I/O layer."""
    buf = aligned_buffer(512)
    entry = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x0C, b"\0\0\0", start_sector, sectors)
    buf[446:462] = entry
    buf[510:512] = b"\x55\xaa"
    with DataFile.open(device, write=True) as f:
        f.write_exact(buf, 0)
    buf.close()


def sha_head(device: str, n: int) -> str:
    with open(device, "rb") as f:
        return hashlib.sha256(f.read(n)).hexdigest()


@pytest.mark.timing
@pytest.mark.slow
def test_4_mib_au_2_open_1_in_random_order_fat_tuned_and_a_partition_at_1_mib():
    spec = CardSpec(size=1 << 30, au_bytes=4 * MiB, open_aus=2, open_aus_random=1, fat_aus=2, name="au4", **FLASH)
    with EmulatedCard(spec) as card:
        with card.unpaced():
            write_mbr(card.device, 2048, (spec.size >> 9) - 2048)
        doc = geometry_json(card.device, "--write", "--confirm", str(spec.size))
        counters = card.status()["counters"]
    assert doc["allocation_unit_bytes"] == 4 * MiB and doc["allocation_unit_confidence"] in ("high", "low")
    assert doc["page_bytes"] == 16 * KiB and doc["page_confidence"] != "none"
    assert doc["open_units"] == {"linear": 2, "random": 1}      # out of order, it keeps only one open
    assert "none" not in doc["open_units_confidence"].values()
    assert "it keeps 2 AUs open (1 when written in random order)" in doc["message"]
    assert doc["fat_units"] == 2 and doc["fat_units_confidence"] != "none"
    assert doc["declared_au_bytes"] is None and doc["declared_au_confidence"] == "none"
    assert counters["garbage_collections"] > 0
    # the advice: partition 1 at 1 MiB is not on the 4 MiB AU, and the command that fixes it
    part = doc["advice"]["partitions"][0]
    assert part["start_bytes"] == 1 * MiB and part["aligned"] is False
    assert "start=8192" in part["fix"] and card.device in part["fix"]
    text = " ".join(doc["advice"]["lines"])
    assert "starts at 1 MiB" in text and "not on a 4 MiB AU boundary" in text and "start=8192" in text
    assert "keeps 2 AUs open: a camera or a filesystem writing 3 files at once will be slow" in text
    assert "mount -o active_logs=2" in doc["advice"]["commands"]["f2fs"]
    assert "stripe_width=1024" in doc["advice"]["commands"]["ext4"]


@pytest.mark.timing
@pytest.mark.slow
def test_12_mib_au_6_open_on_a_32_gb_card_preserved():
    """Not a power of two (flashbench shows it as 4 MiB); the read pass on a 32 GB card within 60 s;
    --preserve puts back every byte it wrote."""
    spec = CardSpec(size=32 * 10**9 // 512 * 512, au_bytes=12 * MiB, open_aus=6, name="au12", **FLASH)
    with EmulatedCard(spec) as card:
        with card.unpaced():
            with DataFile.open(card.device, write=True) as f:
                buf = aligned_buffer(16 * MiB)
                buf[:] = os.urandom(16 * MiB)
                for off in range(0, 8 * 12 * MiB, 16 * MiB):
                    f.write_exact(buf, off)
                buf.close()
            before = sha_head(card.device, 8 * 12 * MiB)
        t = time.monotonic()
        doc = geometry_json(card.device, "--write", "--preserve", "--journal", os.path.join(card.reader.workdir,
                                                                                            "journal"))
        print(f"12 MiB / 6 open, 32 GB: read pass {doc['method']['read_seconds']} s, all {time.monotonic() - t:.1f} s")
        with card.unpaced():
            after = sha_head(card.device, 8 * 12 * MiB)
    assert doc["method"]["read_seconds"] <= 60
    assert doc["allocation_unit_bytes"] == 12 * MiB and doc["allocation_unit_confidence"] != "none", doc["notes"]
    assert doc["open_units"] == {"linear": 6, "random": 6}
    assert doc["fat_units"] == 0
    assert doc["write"]["restore"]["status"] == "restored" and after == before


@pytest.mark.timing
@pytest.mark.slow
def test_a_card_without_geometry_has_no_boundary_stored_and_listed(tmp_path):
    db = str(tmp_path / "results.sqlite3")
    spec = CardSpec(size=256 * MiB, write_rate=20 * MB, read_rate=20 * MB, name="plain")
    with EmulatedCard(spec) as card:
        doc = geometry_json(card.device, "--db", db)
    text = render_geometry(doc)
    listed = call_cli("results", "--db", db)
    assert listed.returncode == 0 and "geometry: no boundary found" in listed.stdout, listed.stdout
    exported = json.loads(call_cli("results", "--db", db, "--json").stdout)
    assert [d["id"] for d in exported["geometry"]] == [doc["id"]]
    html = tmp_path / "report.html"
    p = call_cli("report", "--db", db, "--html", str(html), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["geometry_results"] == 1
    page = html.read_text()
    assert '<section id="geometry">' in page and "no boundary found" in page and 'class="chart geometry-chart"' in page
    assert doc["allocation_unit_bytes"] is None and doc["allocation_unit_confidence"] == "none"
    assert doc["page_bytes"] is None and doc["page_confidence"] == "none"
    assert doc["open_units"] == {"linear": None, "random": None} and doc["fat_units"] is None
    assert doc["message"].startswith("no boundary found")
    assert "no boundary found" in text and "flat" in text and "declares no AU" in text


# -- bad input: one line each -----------------------------------------------------------------

def one_line_error(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode != 0 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_too_small_for_the_largest_au():
    with loop_device(100 * MiB) as dev:
        one_line_error(call_cli("geometry", dev), "too small", "64 MiB", "--max-au")


def test_write_on_a_read_only_device_is_refused():
    with loop_device(256 * MiB) as dev:
        subprocess.run(["blockdev", "--setro", dev], check=True)
        try:
            one_line_error(call_cli("geometry", dev, "--write", "--preserve"), "read-only")
        finally:
            subprocess.run(["blockdev", "--setrw", dev], check=False)


def test_write_on_a_mounted_card_is_refused_but_timing_it_is_allowed():
    with loop_device(256 * MiB) as dev, mounted(dev):
        one_line_error(call_cli("geometry", dev, "--write", "--confirm", str(256 * MiB)), "refusing", "mounted")
        p = call_cli("geometry", dev, "--repeats", "2", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["allocation_unit_confidence"] in ("high", "low", "none")


def test_preserve_without_write_is_a_usage_error():
    p = call_cli("geometry", "/dev/null", "--preserve")
    assert p.returncode == 2 and "--preserve is for --write" in p.stderr


def test_write_without_confirmation_and_no_terminal_is_refused():
    with loop_device(256 * MiB) as dev:
        one_line_error(call_cli("geometry", dev, "--write"), "not confirmed", "--confirm", "would lose data")


def _system_disk() -> str | None:
    src = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "/"], capture_output=True, text=True).stdout.strip()
    if not src.startswith("/dev/"):
        return None
    parent = subprocess.run(["lsblk", "-n", "-d", "-o", "PKNAME", src], capture_output=True, text=True).stdout.strip()
    return f"/dev/{parent}" if parent else src


def test_write_on_the_system_disk_is_refused():
    disk = _system_disk()
    if disk is None or not os.path.exists(disk):
        pytest.skip("the root filesystem is not on a block device here")
    one_line_error(call_cli("geometry", disk, "--write", "--preserve"), "refusing", "running system")


@pytest.mark.timing
@pytest.mark.slow
def test_run_device_with_geometry_stores_both(tmp_path):
    db = str(tmp_path / "results.sqlite3")
    spec = CardSpec(size=512 * MiB, au_bytes=4 * MiB, name="run4", **FLASH)
    with EmulatedCard(spec) as card:
        p = call_cli("run", card.device, "--geometry", "--runs", "1", "--warmup", "0", "--db", db)
    assert p.returncode == 0, p.stderr
    assert "This card, tested at" in p.stdout and "AU 4 MiB" in p.stdout
    exported = json.loads(call_cli("results", "--db", db, "--json").stdout)
    assert len(exported["results"]) == 1 and exported["geometry"][0]["allocation_unit_bytes"] == 4 * MiB


def test_run_geometry_is_for_a_block_device(tmp_path):
    p = call_cli("run", str(tmp_path), "--geometry", "--no-save")
    assert p.returncode == 2 and "--geometry is for a block device" in p.stderr


@pytest.mark.slow
def test_ctrl_c_in_the_write_pass_puts_every_byte_back(tmp_path, monkeypatch):
    """Interrupted after the open-AU test wrote (the FAT test starting), --preserve restores."""
    spec = CardSpec(size=512 * MiB, au_bytes=4 * MiB, open_aus=2, name="intr", **FLASH)
    span = 48 * 4 * MiB
    with EmulatedCard(spec) as card:
        with card.unpaced():
            with DataFile.open(card.device, write=True) as f:
                buf = aligned_buffer(16 * MiB)
                buf[:] = os.urandom(16 * MiB)
                for off in range(0, span, 16 * MiB):
                    f.write_exact(buf, off)
                buf.close()
            before = sha_head(card.device, span)
        scribbled = card.status()["counters"]["bytes_written"]

        def interrupt(*a, **k):
            raise KeyboardInterrupt
        monkeypatch.setattr(writes, "fat_units", interrupt)
        with pytest.raises(Interrupted, match="restored"):
            find_geometry(open_device_target(card.device, whole_device=True), GeometryOptions(write=True, preserve=True, journal_dir=str(tmp_path / "j"),
                                                       max_au=16 * MiB, seed=2))
        written = card.status()["counters"]["bytes_written"] - scribbled
        with card.unpaced():
            after = sha_head(card.device, span)
    assert written >= 2 * 6 * 64 * 1024 * 3      # the open-AU test wrote (3 AUs at least), the restore as much
    assert after == before
    assert not any((tmp_path / "j").glob("*/regions.jsonl"))
