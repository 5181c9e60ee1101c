"""The plan's rules on target models (cardbench.target.target_model): no I/O, milliseconds.

Sizing (one file's room, the FAT32 limit, the automatic bounds and probes), profiles, tests a
label adds, engines per test, and the areas of the random-I/O test and the sustained write."""

from __future__ import annotations

import pytest

from cardbench.errors import TargetError
from cardbench.plan import (
    APP_AREA,
    FAT_FILE_LIMIT,
    MAX_AUTO_SIZE,
    MIN_AUTO_SIZE,
    PROFILES,
    area_size,
    auto_cap,
    extra_engine,
    file_limit,
    largest_fit,
    make_plan,
    next_probe,
    room_needed,
    size_from_probes,
    sustained_size,
)
from cardbench.runner import RunOptions
from cardbench.target import target_model

MB = 10**6
GB = 10**9
MiB = 1 << 20


def card_48mb():
    """A 48 MB card with 44 MB free (ext4)."""
    return target_model(free=44 * MB, total=48 * MB)


def fat32_60gb():
    return target_model(free=60 * GB, total=64 * GB, fstype="vfat")


def test_one_files_room_is_free_less_one_percent_and_one_mib():
    for free in (44 * MB, 2 * GB, 60 * GB):
        fit = largest_fit(free)
        assert room_needed(fit) <= free < room_needed(fit + 4096)
    assert largest_fit(MiB // 2) == 0


def test_a_48mb_card_with_44mb_free():
    card = card_48mb()
    plan = make_plan(card, RunOptions())
    assert plan.size is None and plan.auto_cap == largest_fit(44 * MB) // MiB * MiB
    assert room_needed(plan.auto_cap) <= 44 * MB and plan.auto_cap % MiB == 0
    assert [j.name for j in plan.jobs] == ["seq_write", "cold_read"] and plan.area is None
    plan = make_plan(card, RunOptions(size=16 * MB))
    assert plan.size == 16 * MB and plan.notes == {} and plan.warnings == []
    with pytest.raises(TargetError, match="too little free space for a 50.0 MB test file: 44.0 MB free"):
        make_plan(card, RunOptions(size=50 * MB))
    # the app tests' area: half the free space, whole MiB
    plan = make_plan(card, RunOptions(extra_tests=list(PROFILES["app"])))
    assert plan.area == 22 * MB // MiB * MiB
    assert all(j.bytes == plan.area for j in plan.extra)


def test_fat32_with_60gb_free_caps_every_file_a_test_writes():
    fat = fat32_60gb()
    assert file_limit(fat) == (FAT_FILE_LIMIT, "FAT32")
    plan = make_plan(fat, RunOptions(size=8 * GB, extra_tests=list(PROFILES["matrix"]), area=8 * GB,
                                     sustained=True))
    assert FAT_FILE_LIMIT - MiB < plan.size <= FAT_FILE_LIMIT and plan.size % MiB == 0
    assert "FAT32" in plan.notes["size_cap"] and plan.warnings == [plan.notes["size_cap"]]
    writing = [j for j in plan.jobs if j.writes]
    assert {j.name for j in writing} >= {"seq_write", "sustained_write", "seq_write_1m_q8t1", "rand_write_4k_q1t1"}
    assert all(j.bytes is not None and j.bytes <= FAT_FILE_LIMIT for j in writing), plan.jobs
    assert plan.area <= FAT_FILE_LIMIT
    # the sustained write's one file: under 4 GiB, and it says why it is not the free space
    total, warnings = sustained_size(fat)
    assert total <= FAT_FILE_LIMIT and total % (4 * MiB) == 0 and "FAT32" in warnings[0]
    # a workload's own area on the target (workloads.random.open_area asks target.area): capped too
    assert fat.area(None, default=16 << 30, share=0.25)[1] <= FAT_FILE_LIMIT
    assert fat.area(8 * GB)[1] <= FAT_FILE_LIMIT
    # the automatic size stays within its bounds (and the FAT limit)
    assert auto_cap(fat) == MAX_AUTO_SIZE
    assert make_plan(fat, RunOptions(size=2 * GB)).warnings == []


def test_the_plan_in_words_on_fat32():
    """`run --plan` as a person reads it (report.plan): the room, the FAT32 file limit, how often
    each test runs, each file's bytes, the warning, and that nothing was written."""
    from cardbench.report.plan import plan_document, render_plan
    fat = fat32_60gb()
    opts = RunOptions(size=8 * GB, extra_tests=["rand_write_4k_q1t1"], sustained=True, runs=5, warmup=0)
    doc = plan_document(fat, make_plan(fat, opts), opts)
    assert (doc["runs"], doc["warmup"], doc["duration_s"]) == (5, 0, 3.0)
    assert doc["largest_file"] == FAT_FILE_LIMIT and doc["largest_file_by"] == "FAT32"
    lines = render_plan(doc).splitlines()
    assert lines[0] == "/model: 60.0 GB free; FAT32 holds files up to 4.3 GB", lines
    assert lines[1] == "Each test: 5 timed runs, no warm-up run."
    assert lines[2] == f"  seq_write (sync), {doc['jobs'][0]['bytes'] / GB:.1f} GB in one file"
    assert any(x.startswith("  rand_write_4k_q1t1 (queued), ") and x.endswith("in one file, 3 s a run") for x in lines)
    assert any(x.startswith("  sustained_write (sync), 4.3 GB in one file, one pass") for x in lines)
    assert any(x.startswith("  warning: ") and "FAT32" in x for x in lines)
    assert lines[-1] == "Nothing was written (--plan)." and max(map(len, lines[:-2])) <= 80


def test_other_filesystems_are_not_capped():
    ext = target_model(free=60 * GB, fstype="exfat")
    assert file_limit(ext) == (None, None)
    assert sustained_size(ext)[0] > FAT_FILE_LIMIT
    assert make_plan(ext, RunOptions(size=8 * GB)).size == 8 * GB


def test_a_fuse_filesystem_reporting_no_free_space():
    fuse = target_model(free=0, total=0, fstype="fuse.nostatfs")
    with pytest.raises(TargetError, match="reports 0 bytes free .* give one with --size"):
        make_plan(fuse, RunOptions())
    plan = make_plan(fuse, RunOptions(size=4 * MB))
    assert plan.size == 4 * MB and plan.notes["free_space"].startswith("unknown: the filesystem reports 0 bytes")
    with pytest.raises(TargetError, match="too little free space for a random-I/O test area"):
        make_plan(fuse, RunOptions(size=4 * MB, extra_tests=["rand_read_4k_q1t1"]))
    # a filesystem that reports its blocks and has none free is full, not unknown
    full = target_model(free=0, total=48 * MB)
    with pytest.raises(TargetError, match="too little free space"):
        make_plan(full, RunOptions(size=4 * MB))


def test_a_fat_under_fuse_has_the_fat32_limit():
    fat_fuse = target_model(free=60 * GB, fstype="fuseblk", on="vfat")
    assert file_limit(fat_fuse) == (FAT_FILE_LIMIT, "FAT32")
    assert fat_fuse.filesystem.describe() == "vfat (FUSE: fuseblk)"
    assert make_plan(fat_fuse, RunOptions(size=8 * GB)).size <= FAT_FILE_LIMIT
    assert file_limit(target_model(free=60 * GB, fstype="fuseblk", on="exfat")) == (None, None)
    assert file_limit(target_model(free=60 * GB, fstype="fuseblk")) == (None, None)


def test_an_a2_label_adds_the_app_tests():
    plan = make_plan(card_48mb(), RunOptions(label="C10 U3 V30 A2"))
    assert [j.name for j in plan.extra] == PROFILES["app"]
    assert all(j.why and "A1/A2" in j.why for j in plan.extra)
    # asked for already: nothing added, nothing said
    plan = make_plan(card_48mb(), RunOptions(label="A1", extra_tests=list(PROFILES["app"])))
    assert [j.name for j in plan.extra] == PROFILES["app"] and plan.why_app is None
    assert make_plan(card_48mb(), RunOptions(label="C10 U1")).extra == []


def test_engines_per_test():
    assert extra_engine("rand_read_4k_q32t1", "sync") == "queued"      # sync keeps one in flight
    assert extra_engine("rand_read_4k_q1t1", "sync") == "sync"
    assert extra_engine("rand_read_4k_q32t1", None) == "queued"
    plan = make_plan(card_48mb(), RunOptions(engine="sync", extra_tests=["rand_read_4k_q32t1", "rand_read_4k_q1t1"]))
    assert [(j.name, j.engine) for j in plan.jobs] == [("seq_write", "sync"), ("cold_read", "sync"),
                                                       ("rand_read_4k_q32t1", "queued"), ("rand_read_4k_q1t1", "sync")]


def test_area_sizes():
    assert area_size(target_model(free=60 * GB), None) == APP_AREA
    assert area_size(target_model(free=60 * GB), 8192 * MiB) == 8192 * MiB    # asked for: the free space allows it
    assert area_size(target_model(free=60 * GB), 8 * GB) == 8 * GB // MiB * MiB
    assert area_size(target_model(free=1 * GB), 8 * GB) == largest_fit(GB) // MiB * MiB   # one file's room
    assert area_size(fat32_60gb(), 8 * GB) == FAT_FILE_LIMIT // MiB * MiB
    with pytest.raises(TargetError):
        area_size(target_model(free=MiB), None)


def test_the_automatic_size_from_probes():
    cap = 512 * MiB
    assert next_probe([], cap) == MIN_AUTO_SIZE
    fast = [{"bytes": MIN_AUTO_SIZE, "write_seconds": 0.01, "read_seconds": 0.005}]
    assert next_probe(fast, cap) == 4 * MIN_AUTO_SIZE                       # too short to judge: 4x
    done = [{"bytes": 16 * MiB, "write_seconds": 0.8, "read_seconds": 0.3}]    # 20 MiB/s write, 53 MiB/s read
    assert next_probe(done, cap) is None
    size, how = size_from_probes(done, cap, 60 * GB)
    assert size == 60 * MiB and how["auto"] and how["largest_fit"] == cap and "short" not in how
    # a card faster than the free space allows: the cap, and a warning that the runs are short
    size, how = size_from_probes([{"bytes": 32 * MiB, "write_seconds": 0.25, "read_seconds": 0.25}], 32 * MiB,
                                 40 * MiB)
    assert size == 32 * MiB and "shorter than 0.5 s" in how["short"]
    assert next_probe([{"bytes": 32 * MiB, "write_seconds": 0.01, "read_seconds": 0.01}], 32 * MiB) is None


def test_run_plan_says_each_file_and_writes_nothing(tmp_path):
    """`run DIR --plan --json`: the plan on the directory as it is now (make_plan), nothing written;
    on a block device it is refused in one line."""
    import json

    from click.testing import CliRunner

    from cardbench.cli import cli
    r = CliRunner().invoke(cli, ["run", str(tmp_path), "--plan", "--json", "--size", "16MB", "--tests",
                                 "rand_write_4k_q1t1", "--sustained"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert jobs["seq_write"]["bytes"] == 16_000_000 and jobs["seq_write"]["writes"]
    assert jobs["rand_write_4k_q1t1"]["bytes"] == doc["area"] and jobs["sustained_write"]["bytes"] > 0
    assert doc["free_bytes"] > 0 and doc["largest_file"] is None and list(tmp_path.iterdir()) == []
    r = CliRunner().invoke(cli, ["run", str(tmp_path), "--plan"])
    assert r.exit_code == 0 and "seq_write (sync), up to" in r.output, r.output
