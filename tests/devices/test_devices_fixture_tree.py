"""Discovery on a fixture tree that copies real sysfs layouts (USB readers, SD on native hosts...)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from rich.console import Console

from cardbench.cli.list_cmd import devices_document, render_table
from cardbench.devices import SCHEMA, get_device, list_devices, resolve_device
from cardbench.devices.discovery import _vpd_serial
from cardbench.errors import TargetError, UsageError
from devices_helpers import LAPTOP_LSBLK, LAPTOP_PROC, LAPTOP_SYS


@pytest.fixture(scope="module")
def devs():
    """The fixture laptop's devices, with lsblk's view merged in."""
    return {d.name: d for d in list_devices(LAPTOP_SYS, LAPTOP_LSBLK, proc_root=LAPTOP_PROC)}


def test_every_block_device_is_listed_but_unbound_loops(devs):
    assert sorted(devs) == sorted(["dm-0", "loop0", "mmcblk0", "mmcblk1", "nvme0n1",
                                   "sdb", "sdc", "sdd", "sde", "sdf"])


def test_usb_storage_reader(devs):
    sdb = devs["sdb"]
    assert sdb.path == "/dev/sdb"
    assert sdb.transport == "usb"
    assert sdb.size == 62_333_952 * 512
    assert sdb.removable is True
    assert (sdb.vendor, sdb.model, sdb.revision) == ("Generic", "SD/MMC", "1536")
    u = sdb.usb
    assert (u.id, u.manufacturer, u.product, u.serial) == ("05e3:0749", "Generic", "USB3.0 Card Reader", "000000001536")
    assert (u.speed, u.speed_name, u.link_ceiling_bytes_per_s) == ("5000", "SuperSpeed (USB 3.x Gen 1)", 500_000_000)
    assert (u.driver, u.protocol, u.interface_protocol) == ("usb-storage", "BOT", "50")
    assert (u.bus, u.port_path, u.lun, u.usb_version, u.root_hub_speed) == (2, "2-1", 0, "3.00", "10000")
    assert u.sysfs_path == "/sys/devices/pci0000:00/0000:00:14.0/usb2/2-1"
    assert u.same_reader == ["/dev/sdc"]
    assert u.shares_bus_with == ["/dev/sdc", "/dev/sdd"]
    assert u.note is None


def test_empty_slot_of_a_two_slot_reader(devs):
    sdc = devs["sdc"]
    assert sdc.size == 0 and sdc.medium_present is False
    assert sdc.usb.lun == 1
    assert sdc.usb.same_reader == ["/dev/sdb"]


def test_uas_reader(devs):
    u = devs["sdd"].usb
    assert (u.driver, u.protocol, u.interface_protocol) == ("uas", "UAS", "62")
    assert (u.id, u.speed, u.usb_version) == ("152d:0583", "10000", "3.20")
    assert u.link_ceiling_bytes_per_s == 1_212_000_000
    assert u.same_reader == []


def test_bus_sharing_and_usb3_stick_on_a_usb2_link(devs):
    assert devs["sde"].usb.shares_bus_with == ["/dev/sdf"]
    assert devs["sdf"].usb.shares_bus_with == ["/dev/sde"]
    assert devs["sde"].usb.note is None
    note = devs["sdf"].usb.note
    assert "3.20" in note and "480" in note


def test_native_sd_card_registers_decoded(devs):
    m = devs["mmcblk0"]
    assert m.transport == "mmc"
    assert m.removable is True            # the mmc driver leaves ``removable`` at 0 for SD cards
    assert (m.model, m.serial, m.vendor) == ("SN64G", "0x7e650771", "SanDisk")
    c = m.card
    assert (c.type, c.host, c.address) == ("SD", "mmc0", "aaaa")
    assert c.cid.manufacturer_id == 3 and c.cid.oem_id == "SD" and c.cid.manufactured == "2022-11"
    assert c.attributes["date"] == "11/2022"
    assert c.csd.capacity_bytes == m.size == 63_864_569_856   # the kernel's size comes from the CSD
    assert c.declared_classes == ["C10", "U3", "V30", "A2"]
    assert c.status.au_size_bytes == 4 << 20
    assert c.preferred_erase_size == 4_194_304
    assert c.erase_size == 512
    assert (c.bus_timing, c.bus_clock_hz, c.bus_width_bits) == ("sd uhs SDR104", 200_000_000, 4)
    assert c.decode_errors == []


def test_sdsc_card_with_csd_v1(devs):
    c = devs["mmcblk1"].card
    assert c.csd.version == 1
    assert c.csd.capacity_bytes == devs["mmcblk1"].size == 2_000_683_008
    assert c.cid.oem_id == "TM" and c.cid.manufactured == "2009-03"
    assert c.declared_classes == ["C4"]
    assert c.bus_timing is None           # no debugfs ios for this host


def test_system_disk_root_boot_and_swap(devs):
    nvme = devs["nvme0n1"]
    assert nvme.system is True
    assert nvme.system_reason == "nvme0n1p2 is mounted at /"
    parts = {p.name: p for p in nvme.partitions}
    assert parts["nvme0n1p1"].mountpoints == ["/boot/efi"]
    assert parts["nvme0n1p2"].mountpoints == ["/"]
    assert parts["nvme0n1p3"].swap is True and parts["nvme0n1p3"].mountpoints == []
    assert parts["nvme0n1p2"].start_bytes == 1_050_624 * 512
    assert nvme.transport == "nvme" and nvme.serial == "S4EVNX0N123456X"


def test_mounted_card_is_in_use_not_system(devs):
    sdb = devs["sdb"]
    assert sdb.system is False and sdb.system_reason is None
    assert sdb.partitions[0].mountpoints == ["/media/user/SD CARD"]   # \040 in mountinfo
    assert sdb.in_use_reason == "sdb1 is mounted at /media/user/SD CARD"
    assert sdb.all_mountpoints() == ["/media/user/SD CARD"]
    assert devs["sde"].in_use_reason is None


def test_holders_are_followed(devs):
    sdf = devs["sdf"]
    assert sdf.partitions[0].holders == ["dm-0"]
    assert sdf.in_use_reason == "sdf1 is held by dm-0; dm-0 is mounted at /media/user/secret"
    assert sdf.system is False
    assert devs["dm-0"].transport == "dm"


def test_loop_backing_file(devs):
    loop = devs["loop0"]
    assert loop.transport == "loop"
    assert loop.loop_backing_file == "/home/user/images/raspios lite.img"
    assert loop.size == 7_954_432 * 512


def test_lsblk_only_facts_are_merged(devs):
    assert devs["sdb"].partitions[0].fstype == "exfat"
    assert devs["sdb"].partitions[0].label == "SD CARD"
    assert devs["dm-0"].fstype == "ext4"


def test_sysfs_alone_is_enough(tmp_path):
    """No lsblk: the facts the kernel has are all still there; only udev's (fstype, label) are gone."""
    devs = {d.name: d for d in list_devices(LAPTOP_SYS, None, proc_root=LAPTOP_PROC)}
    assert devs["sdb"].serial == "000000001536"          # the USB serial, as udev would say
    assert devs["sdb"].partitions[0].mountpoints == ["/media/user/SD CARD"]
    assert devs["sdb"].partitions[0].fstype is None
    assert devs["nvme0n1"].system is True
    assert devs["mmcblk0"].card.declared_classes == ["C10", "U3", "V30", "A2"]


def test_lsblk_json_as_text_or_dict():
    with open(LAPTOP_LSBLK) as f:
        text = f.read()
    a = list_devices(LAPTOP_SYS, text, proc_root=LAPTOP_PROC)
    b = list_devices(LAPTOP_SYS, json.loads(text), proc_root=LAPTOP_PROC)
    assert [d.to_dict() for d in a] == [d.to_dict() for d in b]


def test_scsi_vpd_serial():
    assert _vpd_serial(os.path.join(LAPTOP_SYS, "block", "sdd", "device")) == "DD564198838AB"


def _proc(tmp_path, mountinfo: list[str], swaps: list[str]) -> str:
    """A proc root with the given mountinfo lines and swap devices."""
    (tmp_path / "self").mkdir(parents=True)
    (tmp_path / "self" / "mountinfo").write_text("\n".join(mountinfo) + "\n")
    (tmp_path / "swaps").write_text("Filename Type Size Used Priority\n" +
                                    "".join(f"{s} partition 100 0 -2\n" for s in swaps))
    return str(tmp_path)


def test_swap_alone_makes_a_system_disk(tmp_path):
    proc = _proc(tmp_path, [], ["/dev/nvme0n1p3"])
    devs = {d.name: d for d in list_devices(LAPTOP_SYS, None, proc_root=proc)}
    assert devs["nvme0n1"].system is True
    assert devs["nvme0n1"].system_reason == "nvme0n1p3 is active swap"


def test_root_on_luks_marks_the_stick_as_system(tmp_path):
    """Root mounted from /dev/mapper/... (dm-0 on sdf1): the stick under it holds the system."""
    proc = _proc(tmp_path, ["22 1 252:0 / / rw - ext4 /dev/mapper/luks-2f6c1d3e rw"], [])
    devs = {d.name: d for d in list_devices(LAPTOP_SYS, None, proc_root=proc)}
    assert devs["dm-0"].system is True
    assert devs["sdf"].system is True
    assert devs["sdf"].system_reason == "sdf1 is held by dm-0; dm-0 is mounted at /"
    assert devs["nvme0n1"].system is False


def test_btrfs_style_anonymous_devno_matched_by_source(tmp_path):
    proc = _proc(tmp_path, ["22 1 0:31 / / rw - btrfs /dev/sde1 rw"], [])
    devs = {d.name: d for d in list_devices(LAPTOP_SYS, None, proc_root=proc)}
    assert devs["sde"].system is True and devs["sde"].partitions[0].mountpoints == ["/"]


def test_get_device_resolves_partitions_to_their_parent():
    kw = {"sysfs_root": LAPTOP_SYS, "lsblk_json": LAPTOP_LSBLK, "proc_root": LAPTOP_PROC}
    assert get_device("/dev/nvme0n1p2", **kw).name == "nvme0n1"
    dev, part = resolve_device("/dev/sdb1", **kw)
    assert (dev.name, part.name) == ("sdb", "sdb1")
    assert get_device("/dev/sdb", whole_device=True, **kw).name == "sdb"
    with pytest.raises(UsageError) as e:
        get_device("/dev/sdb1", whole_device=True, **kw)
    assert e.value.message == "/dev/sdb1 is a partition of /dev/sdb; give the whole device"
    with pytest.raises(TargetError):
        get_device("/dev/sdz", **kw)


def test_to_dict_is_json_and_complete(devs):
    doc = devices_document(list(devs.values()))
    back = json.loads(json.dumps(doc))
    assert back["schema"] == SCHEMA == "cardbench.devices/1"
    by = {d["name"]: d for d in back["devices"]}
    assert by["sdb"]["usb"]["speed"] == "5000"
    assert by["mmcblk0"]["card"]["status"]["video_speed_class"] == "V30"
    assert by["sdc"]["medium_present"] is False
    assert by["nvme0n1"]["all_mountpoints"] == ["/boot/efi", "/"]


def test_table_shows_what_matters(devs):
    console = Console(record=True, width=260)
    console.print(render_table(list(devs.values())))
    text = console.export_text()
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith(" /dev/")}
    assert "SYSTEM" in lines["/dev/nvme0n1"]
    assert "SYSTEM" not in lines["/dev/sdb"]
    assert "05e3:0749" in lines["/dev/sdb"] and "31.9 GB" in lines["/dev/sdb"] and "29.7 GiB" in text
    assert "no medium" in lines["/dev/sdc"]
    assert "declares C10 U3 V30 A2" in text
    assert "480 Mbit/s usb-storage" in text and "10000 Mbit/s uas" in text


def test_fixture_tree_is_current(tmp_path):
    """The checked-in tree is what build_fixtures.py writes (so nobody edits one and not the other)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("build_fixtures", os.path.join(here, "fixtures", "build_fixtures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.OUT = str(tmp_path / "laptop")
    mod.SYS = os.path.join(mod.OUT, "sys")
    mod.build()

    def snapshot(root: str) -> dict[str, str]:
        """Every file's bytes and every link's target under ``root``."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                rel = os.path.relpath(p, root)
                if os.path.islink(p):
                    out[rel] = "-> " + os.readlink(p)
                elif os.path.isfile(p):
                    with open(p, "rb") as f:
                        out[rel] = f.read().hex()
        return out

    assert snapshot(mod.OUT) == snapshot(os.path.dirname(LAPTOP_SYS))
    shutil.rmtree(mod.OUT)
