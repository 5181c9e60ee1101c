"""One boot, the kernel's own filesystems: `run` on kernel exfat and ext4 on USB sticks measures a
3 MB/s throttle: cold reads within 3%, writes never above it and at most 15% under it (the
emulated path's loss when the guest's vCPU is starved; >= 10 s per timed transfer; no warm-up
run: nothing judged here depends on it, and it halves each run); the same on kernel vfat and
on ext4 on an SD card behind SDHCI (1 MB/s: the emulated card writes only ~2.7 MB/s under TCG). On a FAT32 with more than
4 GiB free (kernel vfat) every file a run writes is sized under FAT32's 4 GiB - 1 B.

Each filesystem is made on the host in its image before the boot (the same mkfs the guest
would run; ext4 with its inode tables and journal written at once, so no lazy init competes
with the run, and no discard: an SD card's erase of the whole medium took 100 s under TCG).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from vm_helpers import boot
from vmharness import Drive

MB = 1_000_000
GiB = 1 << 30
#: the throttle the sticks' filesystem runs measure (QEMU's throttle: bytes/s both ways)
RATE = 3 * MB
#: the SD card's: its emulated write path moves ~2.7 MB/s unthrottled under TCG (dd, O_DIRECT)
SD_RATE = 1 * MB
FAT_LIMIT = (4 << 30) - 1
MKFS = {"ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard"],
        "vfat": ["mkfs.vfat"], "exfat": ["mkfs.exfat"], "fat32": ["mkfs.vfat", "-F", "32"]}
#: key -> (image size, filesystem, throttle, USB serial or None for the SD card)
IMAGES = {"sd": (128 << 20, "ext4", SD_RATE, None), "ve": (96 << 20, "ext4", RATE, "FE"),
          "vv": (96 << 20, "vfat", RATE, "FV"), "vx": (96 << 20, "exfat", RATE, "FX"),
          "big": (10 * GiB, "fat32", None, "FBIG")}
#: the kernel's name of each filesystem
KERNEL_FS = {"ext4": "ext4", "vfat": "vfat", "exfat": "exfat", "fat32": "vfat"}
SERIALS = r"""for b in /sys/block/sd*; do p=$(readlink -f $b)
while [ "$p" != / ] && [ ! -e "$p/idVendor" ]; do p=$(dirname "$p"); done
echo "${b##*/} $(cat "$p/serial" 2>/dev/null)"; done"""


def _images(tmp: str) -> list[Drive]:
    drives = []
    for key, (size, fs, rate, _) in IMAGES.items():
        path = os.path.join(tmp, f"{key}.img")
        with open(path, "wb") as f:
            f.truncate(size)
        subprocess.run(MKFS[fs] + [path], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        drives.append(Drive(key, size, read_bps=rate, write_bps=rate, path=path))
    return drives


@pytest.fixture(scope="module")
def guest(request):
    lacking = sorted({argv[0] for argv in MKFS.values() if shutil.which(argv[0]) is None})
    if lacking:
        message = f"{', '.join(lacking)} not installed (scripts/setup.sh; the guest runs the host's tools)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: a skipped VM tier is a failure)", pytrace=False)
        pytest.skip(message)
    tmp = tempfile.mkdtemp(prefix="cardbench-vm-fs-")
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    devices = ["sdhci-pci", "sd-card,drive=sd", "ich9-usb-ehci1,id=ehci", "qemu-xhci,id=xhci"]
    for key, (_, _, throttled, serial) in IMAGES.items():
        if serial:
            # the throttled sticks at 480 Mbit/s (EHCI), the big FAT32 at 5 Gbit/s
            devices.append(f"usb-storage,bus={'ehci' if throttled else 'xhci'}.0,drive={key},serial={serial}")
    g = boot(request, drives=_images(tmp), devices=devices)
    r = g.run("sh", "-c", SERIALS)
    by_serial = {line.split()[1]: "/dev/" + line.split()[0] for line in r.stdout.splitlines() if len(line.split()) == 2}
    mounts = {}
    for key, (_, fs, _, serial) in IMAGES.items():
        dev = by_serial.get(serial) if serial else "/dev/mmcblk0"
        assert dev, (serial, r.stdout)
        r = g.run("sh", "-c", f"mkdir -p /mnt/{key} && mount -t {KERNEL_FS[fs]} {dev} /mnt/{key} "
                              f"&& grep ' /mnt/{key} ' /proc/mounts", timeout=120)
        assert r.rc == 0 and f" {KERNEL_FS[fs]} " in r.stdout, r.stdout + r.stderr
        mounts[key] = (dev, f"/mnt/{key}")
    g.mounts = mounts
    return g


def run_ratios(guest, key: str, fs: str, rate: int = RATE) -> dict[str, float]:
    """`run` on /mnt/<key> (11 s of the throttle: each timed transfer lasts >= 10 s; QEMU lets
    ~0.1 s through unthrottled): seq_write's and cold_read's rate against the throttle; the
    device's own counters (/sys/block/<dev>/stat) over the run are printed beside them."""
    dev, mnt = guest.mounts[key]
    size = rate * 11 // MB
    stat = f"cat /sys/block/{dev.rsplit('/', 1)[1]}/stat"
    before = [int(x) for x in guest.run("sh", "-c", stat).stdout.split()]
    r = guest.cardbench("run", mnt, "--size", f"{size}MB", "--runs", "1", "--warmup", "0",
                        "--json", "--no-save", timeout=400)
    assert r.rc == 0, r.stderr[-2000:]
    after = [int(x) for x in guest.run("sh", "-c", stat).stdout.split()]
    d = [a - b for a, b in zip(after, before, strict=True)]
    print(f"{fs} on {dev}: the device wrote {d[6] * 512 / MB:.2f} MB in {d[4]} requests, read "
          f"{d[2] * 512 / MB:.2f} MB in {d[0]}, busy {d[9] / 1000:.1f} s")
    ratios = {}
    for t in r.json()["tests"]:
        if t["name"] not in ("seq_write", "cold_read"):
            continue
        assert t["method"]["filesystem"] == fs
        run = t["runs"][0]
        ratios[t["name"]] = t["median_bytes_per_s"] / rate
        print(f"{fs} on {dev} {t['name']}: {t['median_bytes_per_s'] / MB:.3f} MB/s over "
              f"{run['seconds']:.1f} s, ratio {ratios[t['name']]:.3f}")
        assert run["seconds"] >= 10
    return ratios


def assert_write_within_the_throttle(ratios: dict[str, float]) -> None:
    """A write timed through to the device: never above the throttle (QEMU's first 0.1 s
    burst aside; a write left in the page cache would be far above it), and under it by no more
    than the emulated path's own loss. That loss is the guest's one vCPU under TCG between
    requests: quiet, exfat 0.972-1.003, ext4 0.998-1.004, vfat 0.92-0.99 (its smaller writeback
    requests); with two busy loops beside the guest, ext4 0.905-1.001; in one CI beside another
    boot, exfat 0.952. Under 0.85 is cardbench's own time, or a vCPU starved past measuring:
    such a test is measured once more (flaky, one rerun), never passed on it."""
    assert 0.85 <= ratios["seq_write"] <= 1.03, ratios


#: a rate measured while the guest's vCPU was starved by the machine's load is measured again once
remeasure = pytest.mark.flaky(reruns=1)


@remeasure
@pytest.mark.parametrize("key,fs", [("vx", "exfat"), ("ve", "ext4")], ids=["exfat-sdX", "ext4-sdX"])
def test_run_on_a_kernel_filesystem_measures_the_throttle(guest, key, fs):
    ratios = run_ratios(guest, key, fs)
    assert abs(ratios["cold_read"] - 1) <= 0.03, ratios
    assert_write_within_the_throttle(ratios)


@remeasure
def test_run_on_ext4_on_an_sd_card_reads_at_the_throttle(guest):
    """The SD card (sdhci-pci + sd-card, /dev/mmcblk0) behind a 1 MB/s throttle: the emulated
    card writes only ~2.7 MB/s under TCG, so 1 MB/s is a throttle it can hold."""
    ratios = run_ratios(guest, "sd", "ext4", rate=SD_RATE)
    assert abs(ratios["cold_read"] - 1) <= 0.03, ratios
    assert_write_within_the_throttle(ratios)


@remeasure
def test_run_on_kernel_vfat_writes_below_the_throttle(guest):
    ratios = run_ratios(guest, "vv", "vfat")
    assert abs(ratios["cold_read"] - 1) <= 0.03, ratios
    assert_write_within_the_throttle(ratios)


SIZES_AND_SUSTAINED = """
import json, sys
from cardbench.plan import auto_cap
from cardbench.target import open_target
from cardbench.workloads.sustained import sustained_write
target = open_target(sys.argv[1], kinds=("directory",), write=True)
t = sustained_write(target, allow_write=True, max_seconds=float(sys.argv[2]))
print(json.dumps({"auto_cap": auto_cap(target), "total_bytes": t.method["total_bytes"], "written": t.runs[0].bytes,
                  "stopped": t.runs[0].extra["stopped"], "warnings": t.warnings}))
"""


def test_fat32_with_more_than_4_gib_free_sizes_every_file_under_its_limit(guest):
    """Kernel vfat on a 10 GiB FAT32 (the original bug: the sustained write's one file over the
    free space ended in "short write after 4294967295"). Bounded: `run --plan` on the real mount
    gives each file's size without writing GiBs under TCG (4 GiB at ~30 MB/s here would take
    2-3 min); the sustained write then runs for 3 s toward its planned size."""
    mnt = guest.mounts["big"][1]
    # the kernel's own limit, at once: a byte at offset 4 GiB - 1 is refused (conv=notrunc: without
    # it dd first truncates the file up to the offset, and vfat fills those 4 GiB with zeros)
    r = guest.run("sh", "-c", f"dd if=/dev/zero of={mnt}/edge bs=1 count=1 seek={FAT_LIMIT} conv=notrunc 2>&1; "
                              f"stat -c %s {mnt}/edge; rm -f {mnt}/edge")
    assert "File too large" in r.stdout and r.stdout.split()[-1] == "0", r.stdout
    r = guest.cardbench("run", mnt, "--plan", "--json", "--size", "5GB", "--profile", "app", "--sustained",
                        timeout=180)
    assert r.rc == 0, r.stderr[-2000:]
    plan = r.json()
    print({j["name"]: j["bytes"] for j in plan["jobs"]}, plan["free_bytes"], plan["warnings"])
    assert plan["filesystem"] == "vfat" and plan["largest_file"] == FAT_LIMIT and plan["free_bytes"] > 8 * GiB
    writing = {j["name"]: j["bytes"] for j in plan["jobs"] if j["writes"]}
    assert set(writing) == {"seq_write", "rand_write_4k_q1t1", "rand_write_4k_q32t1", "sustained_write"}
    assert all(0 < b <= FAT_LIMIT for b in writing.values()), writing
    assert writing["seq_write"] == FAT_LIMIT // (1 << 20) * (1 << 20)          # 5 GB capped to 4095 MiB
    assert writing["sustained_write"] == FAT_LIMIT // (4 << 20) * (4 << 20)    # whole 4 MiB chunks under it
    assert any("4 GiB - 1 B" in w for w in plan["warnings"]), plan["warnings"]
    # the sustained write itself on the kernel: its file sized as planned, 3 s of it written;
    # and the automatic size's cap
    r = guest.run("python3", "-c", SIZES_AND_SUSTAINED, mnt, "3", timeout=180)
    assert r.rc == 0, r.stderr[-2000:]
    got = r.json()
    print(got)
    assert 0 < got["auto_cap"] <= FAT_LIMIT
    assert got["total_bytes"] == writing["sustained_write"] and got["written"] > 0
    assert got["stopped"].startswith("stopped at the time limit"), got
    assert not any("short write" in w for w in got["warnings"]), got
    assert guest.run("sh", "-c", f"ls -A {mnt}").stdout.strip() == ""          # its file removed
