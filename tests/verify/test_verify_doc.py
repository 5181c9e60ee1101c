"""The document's shared pieces: the fix command and identity."""

from __future__ import annotations

from cardbench.verify.doc import SCHEMA, fix_for, new_doc


def test_fix_for():
    f = fix_for("/dev/sdx", 64 << 30, 8 << 30)
    assert f["last_sector"] == (8 << 30) // 512 - 1
    assert f["alternatives"]["f3fix"] == f"f3fix --last-sec={(8 << 30) // 512 - 1} /dev/sdx"
    assert "sfdisk /dev/sdx" in f["alternatives"]["sfdisk"] and "start=2048" in f["alternatives"]["sfdisk"]
    assert f["command"] == f["alternatives"][f["tool"]]
    assert "mkfs.vfat /dev/sdx1" in f["note"]
    assert fix_for("/dev/mmcblk0", 64 << 30, 8 << 30)["note"].endswith("mkfs.vfat /dev/mmcblk0p1")
    assert fix_for("/dev/sdx", 1 << 30, 1 << 30) is None
    assert fix_for("/dev/sdx", 1 << 30, 1 << 20)["command"] is None


def test_new_doc():
    d = new_doc("quick")
    assert d["schema"] == SCHEMA and d["mode"] == "quick" and d["complete"] is False
    for k in ("verdict", "announced_bytes", "usable_bytes", "kind", "bad_ranges", "fix_command", "method", "timings",
              "device", "card", "reader", "error"):
        assert k in d
