"""`cardbench emulate status` as text (report/emulate.py), on status models: no emulator needed."""

from __future__ import annotations

from cardbench.report.emulate import emulate_status_lines, render_emulate_status, render_wear

MiB = 1 << 20


def test_status_lines_say_settings_then_counters():
    st = {"name": "demo1", "device": "/dev/loop7", "size": 32 * MiB, "write_rate": 4.9e6, "read_rate": 20e6,
          "latency": 0.001, "real_size": 16 * MiB, "fake_mode": "drop", "cache_bytes": 1_000_000,
          "cache_rate": 40e6, "cache_idle": 1.0, "ceiling": 30e6, "errors": [[0, 4096, "read"]],
          "counters": {"writes": 3, "bytes_written": 12288, "reads": 1, "bytes_read": 4096, "eio": 1}}
    first, second = emulate_status_lines(st)
    assert first.startswith("demo1: /dev/loop7, size 32.0 MiB (33.6 MB), write 4.900 MB/s, read 20.000 MB/s")
    assert "latency 1 ms" in first and "fake: keeps 16.0 MiB (drop)" in first and "EIO on [0, 4096) read" in first
    assert "reader ceiling 30.000 MB/s" in first and "cache 1.0 MB at 40.000 MB/s after 1 s idle" in first
    assert second == "  3 writes (12.3 kB), 1 reads (4.1 kB), 1 EIO"


def test_stale_and_none():
    assert emulate_status_lines({"name": "x", "running": False, "workdir": "/run/x"}) == [
        "x: not running (stale state in /run/x; run: cardbench emulate stop x)"]
    assert render_emulate_status([]) == "no emulated cards\n"
    two = render_emulate_status([{"name": "a", "size": 4096}, {"name": "b", "size": 4096, "yanked": True}])
    assert two.count("\n") == 2 and "YANKED" in two.splitlines()[1]


def test_wear_line_and_the_wear_truth():
    st = {"name": "old", "size": 32 * MiB, "write_rate": 1e9, "read_rate": 1e9, "wear_cycles": 100,
          "wear_spread": 0.1, "wear_mode": "stale", "counters": {"writes": 1},
          "wear": {"block": 65536, "blocks": 512, "worn": 7, "read_only": True, "passes": 101.0}}
    assert emulate_status_lines(st)[2] == ("  wear: 100 writes ±10% per 64.0 KiB block, stale; 101.0 whole-card "
                                           "writes, 7 of 512 blocks worn, READ-ONLY")
    w = {"blocks": 512, "block": 65536, "cycles": 100, "spread": 0.1, "seed": 3, "mode": "stale",
         "readonly_after": 16, "passes": 101.0, "cycles_min": 101, "cycles_max": 101, "worn": 7, "read_only": True,
         "limits": [[90 + i, 10] for i in range(20)], "first_block": 41}
    lines = render_wear("old", w).splitlines()
    assert lines[0] == "old: 512 wear blocks of 64.0 KiB, 100 writes each ±10% (seed 3), worn blocks: stale"
    assert lines[1] == "  turns read-only at 16 worn block(s)"
    assert lines[2] == "  101.00 whole-card writes so far (per block 101 to 101); 7 blocks worn; READ-ONLY"
    assert lines[3] == ("  first worn: block 41 in pass 91; worn blocks: 10 by pass 91, 20 by pass 92, 30 by pass 93, "
                        "40 by pass 94, 50 by pass 95, 60 by pass 96, ...")
