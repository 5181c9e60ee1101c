"""Real cards as people have them (issue 14): nearly full, exFAT through a FUSE driver, FAT, a
desktop user without root, never a cached read; and emulated cards on a machine with libfuse2."""

from __future__ import annotations

import contextlib
import ctypes.util
import json
import os
import subprocess
import sys
import uuid

import pytest

from cardbench.result import Card
from cardbench.runner import RunOptions, largest_fit, run_directory
from cardbench.target import DirTarget
from cardbench.units import MB, MiB
from realparts import (
    ROOT,
    call_cli,
    can_emulate,
    emulators_under,
    loop_device,
    mounted,
    run_cli_as,
    sh,
    unprivileged_user,
)

needs_emulator = pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE, loop devices and libfuse3")


def leftovers(mnt: str) -> list[str]:
    return [n for n in os.listdir(mnt) if n.startswith(("cardbench-", ".cardbench-"))]


@contextlib.contextmanager
def exfat_fuse(card):
    """mkfs.exfat on the card (unpaced), mounted with mount.exfat-fuse; unmounted afterwards."""
    import shutil
    if not shutil.which("mkfs.exfat") or not shutil.which("mount.exfat-fuse"):
        pytest.skip("needs exfatprogs and exfat-fuse (scripts/setup.sh installs them)")
    with card.unpaced():
        sh("mkfs.exfat", card.device)
    mnt = os.path.join(card.reader.workdir, "exfat")
    os.makedirs(mnt)
    sh("mount.exfat-fuse", card.device, mnt)
    try:
        yield mnt
    finally:
        if sh("umount", mnt, check=False).returncode != 0:
            sh("umount", "-l", mnt, check=False)
        os.rmdir(mnt)


# -- item 7: libfuse2 beside libfuse3 ---------------------------------------------------------

@pytest.mark.timing
@needs_emulator
def test_emulator_with_libfuse2_beside_libfuse3(tmp_path):
    """This machine has both libraries (exfat-fuse brings libfuse2): mfusepy alone would bind
    libfuse.so.2 and the server would die at start; the emulator binds libfuse3 and paces."""
    name = ctypes.util.find_library("fuse")
    if name is None or not name.startswith("libfuse.so.2"):
        pytest.skip(f"libfuse2 is not installed here (find_library('fuse') = {name!r}): nothing to prove")
    env = {k: v for k, v in os.environ.items() if k not in ("FUSE_LIBRARY_PATH", "FUSE_LIBRARY_NAME")}
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src
    bare = subprocess.run([sys.executable, "-c", "import mfusepy; print(mfusepy._libfuse_path)"],
                          capture_output=True, text=True, env=env)
    assert "libfuse.so.2" in bare.stdout, bare.stdout + bare.stderr     # the failing configuration
    env["CARDBENCH_EMULATE_TMPDIR"] = str(tmp_path)
    script = """
import os, time
from cardbench.emulate import CardSpec, EmulatedCard
from cardbench.units import MB, MiB
with EmulatedCard(CardSpec(size=16 * MiB, write_rate=8 * MB, read_rate=8 * MB)) as card:
    fd = os.open(card.device, os.O_RDONLY | os.O_DIRECT)
    import mmap
    buf = mmap.mmap(-1, 1 << 20)
    t = time.perf_counter()
    for i in range(3):
        os.preadv(fd, [buf], i << 20)
    print(3 * (1 << 20) / (time.perf_counter() - t))
    os.close(fd)
"""
    with emulators_under(tmp_path):
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert float(p.stdout.strip()) == pytest.approx(8 * MB, rel=0.03)


# -- Done when: the survey's first card --------------------------------------------------------

#: the Done-when card at its true rates takes 4 x 53 s; CI runs it 10 times faster (same card,
#: same file, same runs; 10.1 MB/s writes and 36 MB/s reads are within the emulator's 3%, see
#: test_accuracy_emulated): CARDBENCH_TRUE_RATES=1 runs the survey's own rates
SURVEY_FACTOR = 1.0 if os.environ.get("CARDBENCH_TRUE_RATES") == "1" else 10.0


@pytest.mark.slow
@pytest.mark.timing
@needs_emulator
def test_survey_card_48mb_ext2_41_99mb_file(tmp_path):
    """A 48 MB card (1.013 MB/s write, 3.6 MB/s read) on ext2 takes the survey's 41.99 MB file,
    3 runs: each run needs one file's room; figures within 3%; the 4X label holds; nothing left.
    ext2 without root-reserved blocks (-m 0, as on a removable card): 44.2 MB free, the issue's
    card; the old rule (every file on the card at once, 80% of the free space) refused it."""
    from cardbench.emulate import CardSpec, EmulatedCard
    w, r = 1.013 * MB * SURVEY_FACTOR, 3.6 * MB * SURVEY_FACTOR
    with emulators_under(tmp_path), \
            EmulatedCard(CardSpec(size=48 * MB, write_rate=w, read_rate=r, name="lexar")) as card, \
            card.filesystem("ext2", mkfs_args=["-m", "0"]) as mnt:
        assert 44.0 * MB < os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize < 44.4 * MB
        p = call_cli("run", mnt, "--size", "41.99MB", "--runs", "3", "--label", "4X", "--json", "--no-save")
        left = leftovers(mnt)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    tests = {t["name"]: t for t in doc["tests"]}
    assert tests["seq_write"]["median_bytes_per_s"] == pytest.approx(w, rel=0.03)
    assert tests["cold_read"]["median_bytes_per_s"] == pytest.approx(r, rel=0.03)
    assert all(run["bytes"] == 41_990_000 for run in tests["cold_read"]["runs"])
    assert len(tests["cold_read"]["runs"]) == 3
    assert tests["cold_read"]["method"]["cold_proof"].startswith("each cold read compared with")
    x = [c for c in doc["claims"] if c["claim"] == "4X" and c["primary"]]
    assert x and x[0]["verdict"] == "meets"
    assert left == []


# -- item 2: exFAT through FUSE, never a cached read ------------------------------------------

@pytest.mark.slow
@pytest.mark.timing
@needs_emulator
def test_exfat_fuse_cold_read_is_the_card(tmp_path):
    """The issue's failing case (cold_read ~100x the card): within 5% now. A 16 MB file: the
    device's read-ahead runs up to one request (max_sectors_kb, 1.25 MiB here) past the file's
    end while its last bytes are read, which a 4 MB file shows as up to 30% (README)."""
    from cardbench.emulate import CardSpec, EmulatedCard
    rate = 16 * MB
    with emulators_under(tmp_path), \
            EmulatedCard(CardSpec(size=64 * MiB, write_rate=rate, read_rate=rate, name="sdxc")) as card, \
            exfat_fuse(card) as mnt:
        r = run_directory(DirTarget.open(mnt), RunOptions(size=16 * MB, runs=2, warmup=0))
        left = leftovers(mnt)
    read = r.test("cold_read")
    assert read.median_bytes_per_s == pytest.approx(rate, rel=0.05), read.median_bytes_per_s / MB
    # writes through exfat-fuse: the daemon fills the device's page cache, the card writes at the
    # fsync, so the daemon's own time is not overlapped with the card's: 0.90-0.97 of the card here
    assert 0.5 * rate < r.test("seq_write").median_bytes_per_s < 1.03 * rate
    m = read.method
    assert m["filesystem"] == "exfat (FUSE: fuseblk)"
    assert m["device"] == card.device and m["device_cache"] == {"fadvise": "done", "BLKFLSBUF": "done"}
    assert m["device_read_bytes_per_s"] == pytest.approx(rate, rel=0.05) and m["cached_runs"] == 0
    assert "fuse" in m
    assert left == []


@pytest.mark.slow
@needs_emulator
def test_a_cached_read_is_never_the_cards_speed(tmp_path, monkeypatch):
    """With the cache dropping switched off, exfat-fuse answers from the device's page cache
    (~100x the card): every such run is flagged, retried, and kept out of the figures; the label
    is then not judged on it."""
    from cardbench.emulate import CardSpec, EmulatedCard
    from cardbench.workloads import coldness
    from cardbench.workloads.files import resident_fraction
    monkeypatch.setattr(coldness.ColdReads, "drop", lambda self, path, everything=False: resident_fraction(path))
    with emulators_under(tmp_path), \
            EmulatedCard(CardSpec(size=64 * MiB, write_rate=8 * MB, read_rate=4 * MB, name="sdxc")) as card, \
            exfat_fuse(card) as mnt:
        r = run_directory(DirTarget.open(mnt), RunOptions(size=4 * MB, runs=2, label="133X", card=Card(label="133X")))
        left = leftovers(mnt)
    read = r.test("cold_read")
    assert read.runs == [] and read.complete is False
    assert len(read.extra["cached_runs"]) == 3   # the warm-up too
    assert all(x["bytes_per_s"] > 10 * 4 * MB for x in read.extra["cached_runs"])
    assert read.method["retried_runs"] == 3 and read.method["cached_runs"] == 3   # warm-up too
    assert any("a cache answered" in w for w in read.warnings)
    x = [c for c in r.claims if c["claim"] == "133X" and c["primary"]][0]
    assert x["verdict"] == "inconclusive" and "not measured" in x["reason"]
    assert left == []


# -- item 1 and 5: one file's room, sizes that fit and time well -------------------------------

def _fill(mnt: str, leave: int) -> None:
    """Fill the filesystem until about ``leave`` bytes are free (the user's photos)."""
    vfs = os.statvfs(mnt)
    free = vfs.f_bavail * vfs.f_frsize
    with open(os.path.join(mnt, "photos.bin"), "wb") as f:
        f.truncate(0)
        chunk = b"\xa5" * (1 << 20)
        for _ in range(max(0, free - leave) >> 20):
            f.write(chunk)
        os.fsync(f.fileno())


@pytest.mark.skipif(not ROOT, reason="needs root for loop devices")
def test_nearly_full_card_takes_the_largest_file_that_fits():
    with loop_device(96 << 20) as dev, mounted(dev) as mnt:
        _fill(mnt, 24 << 20)
        vfs = os.statvfs(mnt)
        free = vfs.f_bavail * vfs.f_frsize
        fit = largest_fit(free)
        assert fit > 20 * MB
        p = call_cli("run", mnt, "--size", f"{fit}", "--runs", "3", "--json", "--no-save")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert all(run["bytes"] == fit for t in doc["tests"] for run in t["runs"])
        assert doc["tests"][0]["method"]["order"].startswith("each run: write its file, read it back cold, remove")
        assert leftovers(mnt) == []
        p = call_cli("run", mnt, "--size", f"{fit + MB}", "--runs", "3", "--no-save")
        assert p.returncode == 3 and "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1, p.stderr
        assert "free" in lines[0] and "the largest test file that fits is" in lines[0]
        assert f"{fit / MB:.1f} MB" in lines[0]
        assert leftovers(mnt) == [] and os.path.exists(os.path.join(mnt, "photos.bin"))


@pytest.mark.slow
@pytest.mark.timing
@needs_emulator
def test_auto_size_times_well_and_fits_a_nearly_full_card(tmp_path):
    """The automatic size makes runs of >= 0.5 s (a read too, on a card reading 4x faster than it
    writes) and needs one file's room; on a nearly full card it takes the largest file that fits
    and says that the runs are short."""
    from cardbench.emulate import CardSpec, EmulatedCard
    spec = CardSpec(size=64 * MiB, write_rate=6 * MB, read_rate=24 * MB, name="auto")
    with emulators_under(tmp_path), EmulatedCard(spec) as card, card.filesystem("ext4") as mnt:
        r = run_directory(DirTarget.open(mnt), RunOptions(runs=1, warmup=0))
        assert leftovers(mnt) == []
        for t in r.tests:
            assert all(run.seconds >= 0.5 for run in t.runs + t.warmup), t.name
            assert not [w for w in t.warnings if "less than 0.5 s" in w]
        size = r.test("seq_write").method["file_bytes"]
        assert size >= 24 * MB * 0.5
        with card.unpaced():
            _fill(mnt, 10 << 20)
        free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
        r = run_directory(DirTarget.open(mnt), RunOptions(runs=1, warmup=0))
        assert leftovers(mnt) == []
    size = r.test("seq_write").method["file_bytes"]
    assert size <= largest_fit(free) and size >= largest_fit(free) - MiB
    assert any("free some space" in w for w in r.warnings)
    assert any("less than 0.5 s" in w for w in r.test("cold_read").warnings)


@pytest.mark.skipif(not ROOT, reason="needs root for loop devices")
def test_short_runs_are_warned_about(loop_ext4):
    r = run_directory(DirTarget.open(loop_ext4), RunOptions(size=1 * MB, runs=2))
    for t in r.tests:
        assert any("less than 0.5 s" in w and "--size" in w for w in t.warnings), t.warnings


# -- item 3: FAT32 and exFAT ---------------------------------------------------------------

@pytest.mark.skipif(not ROOT, reason="needs root for loop devices")
@pytest.mark.parametrize("mkfs,expect", [(["mkfs.vfat", "-F", "32"], "vfat"), (["mkfs.exfat"], "exfat"),
                                         (["mkfs.ext4", "-q", "-F"], None)])
def test_filesystem_on_the_device(mkfs, expect):
    """What a FUSE mount's device holds (mountinfo says only "fuseblk"), from its boot sector."""
    import shutil

    from cardbench.devices.mounts import filesystem_on
    if not shutil.which(mkfs[0]):
        pytest.skip(f"needs {mkfs[0]}")
    with loop_device(64 << 20) as dev:
        sh(*mkfs, dev)
        assert filesystem_on(dev) == expect


def test_fat32_file_limit_caps_the_size():
    """FAT32 holds files up to 4 GiB - 1 B (Documentation/filesystems/vfat.rst): a larger --size
    is capped and the method says so; other filesystems are not capped. (The kernel here has no
    vfat: this follows the documentation.)"""
    from cardbench.runner import FAT_FILE_LIMIT, cap_size
    from cardbench.target import DirTarget
    fat = DirTarget(path="/media/card", fstype="vfat", mountpoint="/media/card", device=None,
                    free_bytes=16 << 30, block_size=32768)
    size, note = cap_size(fat, 8 * 10**9)
    assert size <= FAT_FILE_LIMIT and size % MiB == 0 and size > FAT_FILE_LIMIT - MiB
    assert "FAT32" in note and "4 GiB - 1 B" in note
    assert cap_size(fat, 2 * 10**9) == (2 * 10**9, None)
    ext = DirTarget(path="/media/card", fstype="exfat", mountpoint="/media/card", device=None,
                    free_bytes=16 << 30, block_size=32768)
    assert cap_size(ext, 8 * 10**9) == (8 * 10**9, None)


# -- item 4: a desktop user, not root ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="needs root to create a user and a loop-mounted filesystem")
def test_desktop_user_without_root():
    """A card mounted for a desktop user (owned by them, as udisks does under /media/$USER):
    run, results, report, list, readers and verify --full work unprivileged; what needs root
    (a raw device test, the demo) says so in one line."""
    import shutil
    if not shutil.which("useradd") or not shutil.which("runuser") or not shutil.which("unshare"):
        pytest.skip("needs useradd, runuser and unshare (util-linux, passwd)")
    with unprivileged_user() as (user, uid, gid, home), loop_device(64 << 20) as dev, mounted(dev) as mnt:
        os.chown(mnt, uid, gid)
        full = os.path.join(mnt, f"verify-{uuid.uuid4().hex[:6]}")
        os.mkdir(full)
        os.chown(full, uid, gid)
        html = os.path.join(home, "drawer.html")

        def ok(*args: str) -> str:
            p = run_cli_as(user, home, *args)
            assert p.returncode == 0, (args, p.stderr)
            assert "Traceback" not in p.stderr
            return p.stdout

        out = ok("run", mnt, "--size", "2MB", "--runs", "2", "--brand", "Lexar", "--label", "4X", "--json")
        doc = json.loads(out)
        assert doc["complete"] and [t["name"] for t in doc["tests"]] == ["seq_write", "cold_read"]
        assert "cannot be read by this user" in doc["tests"][1]["method"]["cold_proof"]
        assert os.path.exists(os.path.join(home, ".local/share/cardbench/results.sqlite3"))
        assert "Lexar" in ok("results")
        ok("report", "--html", html)
        assert os.stat(html).st_uid == uid
        assert dev in ok("list")
        ok("readers")
        assert "genuine" in ok("verify", "--full", full, "--json")
        assert leftovers(mnt) == [] and os.listdir(full) == []
        for args, code in ((["run", dev, "--no-save"], 3), (["demo"], 8)):
            p = run_cli_as(user, home, *args)
            assert p.returncode == code and "Traceback" not in p.stderr
            lines = p.stderr.strip().splitlines()
            assert len(lines) == 1 and "root" in lines[0], p.stderr


# -- Bad input: a filesystem that reports 0 bytes free -----------------------------------------

@pytest.mark.slow
@needs_emulator
def test_filesystem_reporting_no_free_space(tmp_path):
    """A FUSE driver without statfs (tests/nostatfs_fs.py) reports 0 blocks free: the automatic
    size says so in one line and asks for --size; with --size the run works and says why the
    free space was not checked. Mounted as type ``fuse`` naming a device as its source (as a
    driver run without blkdev does), that device is found under it and its cache dropped."""
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mnt.mkdir()
    with loop_device(16 << 20) as dev:
        _no_statfs_run(backing, mnt, dev)


def _no_statfs_run(backing, mnt, dev: str) -> None:
    import time
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    server = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "nostatfs_fs.py"),
                               str(backing), str(mnt), dev], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not os.path.ismount(mnt):
            assert server.poll() is None and time.monotonic() < deadline, "the no-statfs filesystem did not mount"
            time.sleep(0.05)
        assert os.statvfs(mnt).f_blocks == 0
        p = call_cli("run", str(mnt), "--runs", "1", "--no-save")
        assert p.returncode == 3 and "Traceback" not in p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "0 bytes free" in lines[0] and "--size" in lines[0], p.stderr
        p = call_cli("run", str(mnt), "--runs", "1", "--size", "2MB", "--no-save", "--json")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        read = doc["tests"][1]
        assert read["method"]["free_space"].startswith("unknown: the filesystem reports 0 bytes free")
        assert doc["target"]["device"] == dev and read["method"]["device"] == dev
        # both done; a busy machine may add drop_caches (a cold read looked faster than the card's
        # own short O_DIRECT read, so the proof dropped every cache and read again: coldness.py)
        cache = read["method"]["device_cache"]
        assert {k: cache.get(k) for k in ("fadvise", "BLKFLSBUF")} == {"fadvise": "done", "BLKFLSBUF": "done"}
        assert set(cache) <= {"fadvise", "BLKFLSBUF", "drop_caches"}, cache
        assert os.listdir(backing) == []
    finally:
        sh("fusermount3", "-u", str(mnt), check=False)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sh("fusermount3", "-uz", str(mnt), check=False)
            server.kill()
            server.wait()
