"""Discovery on the live system with real loop devices and real ext4 mounts."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from cardbench.cli.list_cmd import list_cmd
from cardbench.devices import get_device, list_devices, run_lsblk
from cardbench.errors import TargetError, UsageError
from devices_helpers import loop_device, mounted, needs_loop


def _find(path: str):
    """The listed device with this path, or None."""
    return next((d for d in list_devices() if d.path == path), None)


@needs_loop
def test_loop_device_size_transport_and_backing_file(loop):
    dev, img = loop
    d = _find(dev)
    assert d is not None, f"{dev} not listed"
    assert d.size == 16 << 20
    assert d.transport == "loop"
    assert d.loop_backing_file == img
    assert d.mountpoints == [] and d.system is False and d.in_use_reason is None
    assert d.logical_block_size == 512
    assert d.read_only is False
    assert get_device(dev).devno == d.devno


@needs_loop
def test_mounted_loop_device_has_its_mount_point_and_is_not_system():
    with loop_device(32 << 20) as (dev, _), mounted(dev) as mnt:
        d = _find(dev)
        assert d.mountpoints == [mnt]
        assert d.all_mountpoints() == [mnt]
        assert d.system is False
        assert d.in_use_reason == f"{os.path.basename(dev)} is mounted at {mnt}"


@needs_loop
def test_read_only_loop_is_read_only():
    with loop_device(1 << 20, read_only=True) as (dev, _):
        assert get_device(dev).read_only is True


def test_the_device_holding_root_is_system():
    st = os.stat("/")
    devno = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for d in list_devices():
        if d.devno == devno or any(p.devno == devno for p in d.partitions):
            assert d.system is True
            assert d.system_reason.endswith("is mounted at /")
            return
    pytest.skip(f"/ is on {devno}, which is not a listed block device (overlay, btrfs subvolume...)")


@needs_loop
def test_partition_resolves_to_its_parent():
    with loop_device(8 << 20, partitioned=True) as (dev, _):
        part = dev + "p1"
        d = get_device(part)
        assert d.path == dev
        assert [p.path for p in d.partitions] == [part]
        p = d.partitions[0]
        assert (p.number, p.start_bytes, p.size) == (1, 2048 * 512, (8 << 20) - 2048 * 512)
        with pytest.raises(UsageError) as e:
            get_device(part, whole_device=True)
        assert e.value.message == f"{part} is a partition of {dev}; give the whole device"


@needs_loop
def test_mounted_partition_is_reported_on_the_partition():
    with loop_device(16 << 20, partitioned=True) as (dev, _), mounted(dev + "p1") as mnt:
        d = get_device(dev)
        assert d.mountpoints == []
        assert d.partitions[0].mountpoints == [mnt]
        assert d.in_use_reason == f"{os.path.basename(dev)}p1 is mounted at {mnt}"


@pytest.mark.parametrize("path,error,text", [
    ("/dev/null", TargetError, "/dev/null is a character device, not a block device"),
    ("/nonexistent/disk", TargetError, "/nonexistent/disk: no such file or directory"),
    ("/", TargetError, "/ is a directory, not a block device"),
])
def test_wrong_kinds_of_path_are_refused_in_one_line(path, error, text):
    with pytest.raises(error) as e:
        get_device(path)
    assert e.value.message == text


def test_regular_file_is_refused(tmp_path):
    f = tmp_path / "image.img"
    f.write_bytes(b"\0" * 512)
    with pytest.raises(TargetError) as e:
        get_device(str(f))
    assert e.value.message == f"{f} is a regular file, not a block device"


def test_lsblk_runs_here():
    if not run_lsblk():
        pytest.skip("lsblk not available")
    assert "blockdevices" in run_lsblk()


@needs_loop
def test_list_command_json(loop):
    dev, img = loop
    result = CliRunner().invoke(list_cmd, ["--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == "cardbench.devices/1"
    mine = [d for d in doc["devices"] if d["path"] == dev]
    assert len(mine) == 1 and mine[0]["loop_backing_file"] == img and mine[0]["size"] == 16 << 20


@needs_loop
def test_list_command_table(loop):
    dev, _ = loop
    result = CliRunner().invoke(list_cmd, [], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert dev in result.output
    assert "16.8 MB" in result.output and "16.0 MiB" in result.output
