"""Block device discovery: a sysfs walk, completed by ``lsblk -J -b`` and the kernel's mount tables.

sysfs is the primary source (it is always there and it is what the kernel itself says); lsblk adds
what only udev knows (filesystem type, label, UUID, and serials the kernel does not export) and
fills gaps. Mount points come from ``/proc/self/mountinfo`` matched by ``major:minor``, plus
lsblk's view. Every function takes the roots as parameters so the same code runs on the live
system and on fixture trees that copy real sysfs layouts.

Reference for the sysfs attributes: standards.md §4.2-4.3, [S33] ``Documentation/ABI/stable/sysfs-block``
(``size`` is in 512-byte sectors whatever the logical block size), [S34] mmc-dev-attrs, [S35].
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from cardbench.devices.ata import DEFAULT_TIMEOUT, AtaProbe, read_identify
from cardbench.devices.holder import classify_holder
from cardbench.devices.mounts import (
    Mount,
    is_system_mountpoint,
    read_mountinfo,
    read_swaps,
)
from cardbench.devices.registers import (
    Cid,
    Csd,
    SdStatus,
    decode_cid,
    decode_csd,
    decode_ssr,
)
from cardbench.devices.sysfs import (
    list_dir,
    natural_key,
    read_bytes,
    read_int,
    read_text,
)
from cardbench.devices.usb import UsbInfo, read_usb_info
from cardbench.engine.errors import stat_path
from cardbench.errors import TargetError, UsageError

SECTOR = 512  # sysfs ``size`` and ``start`` unit [S33]

#: Transports of devices that are not hardware; listed after the real disks.
VIRTUAL_TRANSPORTS = frozenset({"loop", "dm", "md", "zram", "nbd"})

#: Columns asked of lsblk (util-linux >= 2.37 for MOUNTPOINTS; older ones get MOUNTPOINT).
LSBLK_COLUMNS = ("NAME,KNAME,PATH,MAJ:MIN,TYPE,SIZE,TRAN,MOUNTPOINTS,PKNAME,SERIAL,MODEL,VENDOR,REV,"
                 "RM,RO,HOTPLUG,LOG-SEC,PHY-SEC,FSTYPE,LABEL,UUID,HCTL,WWN")


# --- data -------------------------------------------------------------------------------------


@dataclass
class Partition:
    """A partition of a block device, with what uses it."""

    name: str
    path: str
    devno: str | None
    number: int | None
    start_bytes: int | None
    size: int
    read_only: bool
    mountpoints: list[str] = field(default_factory=list)
    swap: bool = False
    holders: list[str] = field(default_factory=list)
    fstype: str | None = None
    label: str | None = None
    uuid: str | None = None


@dataclass
class CardInfo:
    """An SD/MMC card on a native host: its registers decoded, as the card itself declares them.

    ``attributes`` keeps the kernel's own decoded attributes (``name``, ``manfid``, ``oemid``,
    ``date``, ``serial``, ``hwrev``, ``fwrev``) next to our decoding of the raw ``cid``. The bus
    fields come from debugfs ``mmcN/ios`` when it is readable (root, debugfs mounted), else None.
    """

    type: str | None
    host: str | None
    address: str | None
    attributes: dict[str, str | None]
    raw: dict[str, str | None]
    cid: Cid | None
    csd: Csd | None
    status: SdStatus | None
    declared_classes: list[str]
    preferred_erase_size: int | None
    erase_size: int | None
    bus_timing: str | None = None
    bus_clock_hz: int | None = None
    bus_width_bits: int | None = None
    decode_errors: list[str] = field(default_factory=list)


@dataclass
class BlockDevice:
    """One whole block device (disk, card, stick, loop, dm...), JSON-able through ``to_dict()``.

    Sizes are bytes. ``system`` is True when the device holds the running system (/, /boot, /usr,
    /var, /home..., active swap, or backs a dm/md device that does); ``system_reason`` says which
    partition and why. ``in_use_reason`` names the first use of any kind (a mount anywhere, swap,
    a holder such as LUKS or LVM), or None when nothing on the device is in use.
    """

    path: str
    name: str
    devno: str | None
    size: int
    vendor: str | None
    model: str | None
    revision: str | None
    serial: str | None
    transport: str | None
    removable: bool
    read_only: bool
    rotational: bool | None
    logical_block_size: int | None
    physical_block_size: int | None
    partitions: list[Partition] = field(default_factory=list)
    mountpoints: list[str] = field(default_factory=list)
    swap: bool = False
    holders: list[str] = field(default_factory=list)
    loop_backing_file: str | None = None
    loop_offset: int | None = None
    fstype: str | None = None
    label: str | None = None
    system: bool = False
    system_reason: str | None = None
    in_use_reason: str | None = None
    sysfs_path: str | None = None
    usb: UsbInfo | None = None
    card: CardInfo | None = None
    #: what the device said to ATA IDENTIFY DEVICE (a CF card behind a SAT reader), when asked
    ata: AtaProbe | None = None

    @property
    def medium_present(self) -> bool:
        """False for an empty reader slot (the kernel reports size 0)."""
        return self.size > 0

    def holder(self) -> dict[str, Any] | None:
        """For a USB device: whether it is a reader, a stick (the USB device is the card) or
        unsure, and why (:func:`cardbench.devices.holder.classify_holder`); else None."""
        if self.usb is None:
            return None
        kind, evidence = classify_holder(self)
        return {"kind": kind, "evidence": evidence}

    def all_mountpoints(self) -> list[str]:
        """Mount points of the device itself and of all its partitions."""
        out = list(self.mountpoints)
        for p in self.partitions:
            out.extend(p.mountpoints)
        return out

    def partition(self, name_or_path: str) -> Partition | None:
        """The partition with this name (``sdb1``) or path (``/dev/sdb1``), if any."""
        for p in self.partitions:
            if name_or_path in (p.name, p.path):
                return p
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (dataclass fields plus ``medium_present`` and ``all_mountpoints``)."""
        d = asdict(self)
        d["ata"] = self.ata.to_dict() if self.ata is not None else None
        d["holder"] = self.holder()
        d["medium_present"] = self.medium_present
        d["all_mountpoints"] = self.all_mountpoints()
        return d


# --- lsblk --------------------------------------------------------------------------------------


def run_lsblk(timeout: float = 10.0) -> dict | None:
    """``lsblk -J -b -o <columns>`` parsed, or None when lsblk is missing or fails (sysfs suffices)."""
    for cols in (LSBLK_COLUMNS, LSBLK_COLUMNS.replace("MOUNTPOINTS", "MOUNTPOINT")):
        try:
            proc = subprocess.run(["lsblk", "-J", "-b", "-o", cols], capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode == 0:
            try:
                return json.loads(proc.stdout)
            except ValueError:
                return None
    return None


def _load_lsblk(lsblk_json: Any) -> dict | None:
    """Accept lsblk output as a dict, a JSON string, or a path to a JSON file."""
    if lsblk_json is None or isinstance(lsblk_json, dict):
        return lsblk_json
    if isinstance(lsblk_json, (bytes, str)) and str(lsblk_json).lstrip().startswith("{"):
        return json.loads(lsblk_json)
    with open(os.fspath(lsblk_json), encoding="utf-8") as f:
        return json.load(f)


def _flatten_lsblk(data: dict | None) -> dict[str, dict]:
    """lsblk's nested tree as ``{kernel name: entry}`` (dm devices appear under several parents)."""
    out: dict[str, dict] = {}

    def walk(entries: list) -> None:
        """Index entries and their children."""
        for e in entries or []:
            key = e.get("kname") or e.get("name")
            if key and key not in out:
                out[key] = e
            walk(e.get("children") or [])

    if data:
        walk(data.get("blockdevices") or [])
    return out


def _lsblk_mountpoints(entry: dict | None) -> tuple[list[str], bool]:
    """(mount points, is swap) from an lsblk entry (``mountpoints`` list or old ``mountpoint``)."""
    if not entry:
        return [], False
    raw = entry.get("mountpoints")
    if raw is None:
        raw = [entry.get("mountpoint")]
    mps = [m for m in raw if m]
    swap = "[SWAP]" in mps
    return [m for m in mps if m != "[SWAP]"], swap


def _lsblk_str(entry: dict | None, key: str) -> str | None:
    """A stripped string value from an lsblk entry, None for null/empty."""
    if not entry:
        return None
    v = entry.get(key)
    if v is None:
        return None
    v = str(v).strip()
    return v or None


# --- sysfs walk ---------------------------------------------------------------------------------


def _as_sys_path(path: str, sysfs_root: str) -> str:
    """Show a path inside a (possibly fixture) sysfs root as the kernel would: ``/sys/...``."""
    root = os.path.realpath(sysfs_root)
    if path == root:
        return "/sys"
    if path.startswith(root + os.sep):
        return "/sys" + path[len(root):]
    return path


def _devname(block_dir: str, name: str) -> str:
    """``/dev/<DEVNAME>`` from the uevent file, else the kernel name (``!`` stands for ``/``)."""
    uevent = read_text(os.path.join(block_dir, "uevent")) or ""
    for line in uevent.splitlines():
        if line.startswith("DEVNAME="):
            return "/dev/" + line.split("=", 1)[1]
    return "/dev/" + name.replace("!", "/")


def _vpd_serial(device_dir: str) -> str | None:
    """Unit serial number from SCSI VPD page 0x80 (byte 3 = length, ASCII from byte 4)."""
    raw = read_bytes(os.path.join(device_dir, "vpd_pg80"))
    if not raw or len(raw) < 4:
        return None
    text = raw[4:4 + raw[3]].decode("ascii", errors="replace").strip()
    return text or None


def _transport(name: str, real_dir: str, usb: UsbInfo | None, lsblk_tran: str | None) -> str | None:
    """usb, mmc, loop, nvme, sata, virtio, scsi, dm, md, zram... from the device path and name."""
    parts = real_dir.split(os.sep)
    if usb is not None:
        return "usb"
    if name.startswith("loop"):
        return "loop"
    if "mmc_host" in parts or name.startswith("mmcblk"):
        return "mmc"
    if lsblk_tran:
        return lsblk_tran
    if name.startswith("nvme") or "nvme" in parts:
        return "nvme"
    if any(re.fullmatch(r"ata\d+", p) for p in parts):
        return "sata"
    if any(re.fullmatch(r"virtio\d+", p) for p in parts):
        return "virtio"
    for prefix, tran in (("dm-", "dm"), ("md", "md"), ("zram", "zram"), ("nbd", "nbd"), ("sr", "scsi")):
        if name.startswith(prefix):
            return tran
    if any(re.fullmatch(r"host\d+", p) for p in parts):
        return "scsi"
    return None


def _read_ios(sysfs_root: str, host: str) -> tuple[str | None, int | None, int | None]:
    """(timing spec, actual clock Hz, bus width bits) from debugfs ``mmcN/ios``, when readable."""
    text = read_text(os.path.join(sysfs_root, "kernel", "debug", host, "ios"))
    if not text:
        return None, None, None
    timing = clock = width = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "timing spec":
            m = re.search(r"\((.*)\)", value)
            timing = m.group(1) if m else value
        elif key in ("actual clock", "clock") and (clock is None or key == "actual clock"):
            m = re.match(r"(\d+)", value)
            if m:
                clock = int(m.group(1))
        elif key == "bus width":
            m = re.search(r"\((\d+) bits?\)", value)
            if m:
                width = int(m.group(1))
    return timing, clock, width


def _read_card(sysfs_root: str, device_dir: str) -> CardInfo | None:
    """Decode the card behind ``/sys/block/mmcblkN/device`` (None when it is not an mmc card)."""
    if not (os.path.exists(os.path.join(device_dir, "cid")) or os.path.exists(os.path.join(device_dir, "type"))):
        return None

    def attr(name: str) -> str | None:
        """One attribute of the card directory (None when missing or empty)."""
        return read_text(os.path.join(device_dir, name)) or None

    ctype = attr("type")
    base = os.path.basename(device_dir)
    host, _, address = base.partition(":")
    raw = {k: attr(k) for k in ("cid", "csd", "scr", "ssr")}
    errors: list[str] = []
    cid = csd = status = None
    kind = "MMC" if (ctype or "").upper() == "MMC" else "SD"
    if raw["cid"]:
        try:
            cid = decode_cid(raw["cid"], kind)
        except ValueError as e:
            errors.append(f"cid: {e}")
    if raw["csd"]:
        try:
            csd = decode_csd(raw["csd"], kind)
        except ValueError as e:
            errors.append(f"csd: {e}")
    if raw["ssr"] and kind == "SD":
        try:
            status = decode_ssr(raw["ssr"])
        except ValueError as e:
            errors.append(f"ssr: {e}")
    attributes = {k: attr(k) for k in ("name", "manfid", "oemid", "date", "serial", "hwrev", "fwrev")}
    if cid and kind == "MMC" and attributes["date"]:
        m = re.match(r"^(\d{1,2})/(\d{4})$", attributes["date"])
        if m:  # the kernel resolves the MMC year ambiguity from EXT_CSD
            cid.manufactured = f"{int(m.group(2)):04d}-{int(m.group(1)):02d}"
    timing, clock, width = _read_ios(sysfs_root, host) if host else (None, None, None)
    return CardInfo(
        type=ctype, host=host or None, address=address or None, attributes=attributes, raw=raw,
        cid=cid, csd=csd, status=status, declared_classes=list(status.declared) if status else [],
        preferred_erase_size=read_int(os.path.join(device_dir, "preferred_erase_size")),
        erase_size=read_int(os.path.join(device_dir, "erase_size")),
        bus_timing=timing, bus_clock_hz=clock, bus_width_bits=width, decode_errors=errors,
    )


def _read_partition(block_dir: str, pname: str, lsblk: dict[str, dict]) -> Partition:
    """One partition sub-directory of a block device in sysfs."""
    pdir = os.path.join(block_dir, pname)
    entry = lsblk.get(pname)
    mps, swap = _lsblk_mountpoints(entry)
    return Partition(
        name=pname, path=_devname(pdir, pname), devno=read_text(os.path.join(pdir, "dev")),
        number=read_int(os.path.join(pdir, "partition")),
        start_bytes=(lambda s: s * SECTOR if s is not None else None)(read_int(os.path.join(pdir, "start"))),
        size=(read_int(os.path.join(pdir, "size")) or 0) * SECTOR,
        read_only=read_int(os.path.join(pdir, "ro")) == 1,
        mountpoints=mps, swap=swap, holders=list_dir(os.path.join(pdir, "holders")),
        fstype=_lsblk_str(entry, "fstype"), label=_lsblk_str(entry, "label"), uuid=_lsblk_str(entry, "uuid"),
    )


def _read_device(sysfs_root: str, name: str, lsblk: dict[str, dict]) -> BlockDevice | None:
    """Everything sysfs (and lsblk, as a fallback) says about one ``/sys/block/<name>`` entry."""
    link = os.path.join(sysfs_root, "block", name)
    block_dir = os.path.realpath(link)
    devno = read_text(os.path.join(block_dir, "dev"))
    if name.startswith("loop") and not os.path.isdir(os.path.join(block_dir, "loop")):
        return None  # an unbound loop device: nothing behind it (lsblk hides them too)
    if devno and devno.split(":")[0] == "1":
        return None  # RAM disks (major 1), hidden by lsblk by default as well
    entry = lsblk.get(name)
    dev_link = os.path.join(block_dir, "device")
    device_dir = os.path.realpath(dev_link) if os.path.exists(dev_link) else None

    usb = read_usb_info(block_dir, sysfs_root)
    if usb:
        usb.sysfs_path = _as_sys_path(usb.sysfs_path, sysfs_root)
    card = _read_card(sysfs_root, device_dir) if device_dir and name.startswith("mmcblk") else None

    def dattr(attr: str) -> str | None:
        """One attribute of the ``device`` directory (SCSI, NVMe, virtio...)."""
        return (read_text(os.path.join(device_dir, attr)) or None) if device_dir else None

    if card is not None:
        model = card.attributes.get("name") or (card.cid.product_name if card.cid else None)
        vendor = card.cid.manufacturer_hint if card.cid else None
        serial = card.attributes.get("serial") or (card.cid.serial_hex if card.cid else None)
        revision = card.cid.revision if card.cid else None
    else:
        model = dattr("model") or _lsblk_str(entry, "model")
        vendor = dattr("vendor") or _lsblk_str(entry, "vendor")
        revision = dattr("rev") or dattr("firmware_rev") or _lsblk_str(entry, "rev")
        vpd = _vpd_serial(device_dir) if device_dir else None
        if usb is not None:
            # udev (hence lsblk) names a USB disk by the USB iSerial; do the same without lsblk so the
            # serial, which is also the confirmation token, does not depend on lsblk being present.
            serial = _lsblk_str(entry, "serial") or usb.serial or vpd
        else:
            serial = (read_text(os.path.join(block_dir, "serial")) or dattr("serial")
                      or _lsblk_str(entry, "serial") or vpd)

    size_sectors = read_int(os.path.join(block_dir, "size"))
    size = size_sectors * SECTOR if size_sectors is not None else int((entry or {}).get("size") or 0)
    removable = read_int(os.path.join(block_dir, "removable")) == 1
    if card is not None and (card.type or "").upper() == "SD":
        removable = True  # the mmc block driver never sets ``removable`` for SD cards [S63]

    mps, swap = _lsblk_mountpoints(entry)
    loop_dir = os.path.join(block_dir, "loop")
    lbs = read_int(os.path.join(block_dir, "queue", "logical_block_size"))
    pbs = read_int(os.path.join(block_dir, "queue", "physical_block_size"))
    rot = read_int(os.path.join(block_dir, "queue", "rotational"))
    parts = [p for p in list_dir(block_dir) if os.path.exists(os.path.join(block_dir, p, "partition"))]
    parts.sort(key=natural_key)
    return BlockDevice(
        path=_devname(block_dir, name), name=name, devno=devno, size=size,
        vendor=vendor, model=model, revision=revision, serial=serial,
        transport=_transport(name, block_dir, usb, _lsblk_str(entry, "tran")),
        removable=removable, read_only=read_int(os.path.join(block_dir, "ro")) == 1,
        rotational=None if rot is None else rot == 1,
        logical_block_size=lbs if lbs is not None else (entry or {}).get("log-sec"),
        physical_block_size=pbs if pbs is not None else (entry or {}).get("phy-sec"),
        partitions=[_read_partition(block_dir, p, lsblk) for p in parts],
        mountpoints=mps, swap=swap, holders=list_dir(os.path.join(block_dir, "holders")),
        loop_backing_file=read_text(os.path.join(loop_dir, "backing_file")),
        loop_offset=read_int(os.path.join(loop_dir, "offset")),
        fstype=_lsblk_str(entry, "fstype"), label=_lsblk_str(entry, "label"),
        sysfs_path=_as_sys_path(block_dir, sysfs_root), usb=usb, card=card,
    )


# --- who uses what --------------------------------------------------------------------------------


def _apply_mounts(devices: list[BlockDevice], mounts: list[Mount], swaps: list[str],
                  sysfs_root: str, live: bool) -> None:
    """Attach mountinfo mounts and active swap to devices and partitions (by devno, then by name)."""
    by_devno: dict[str, Any] = {}
    by_alias: dict[str, Any] = {}
    for d in devices:
        nodes: list[Any] = [d, *d.partitions]
        dm_name = read_text(os.path.join(sysfs_root, "block", d.name, "dm", "name"))
        if dm_name:
            by_alias["mapper/" + dm_name] = d
        for n in nodes:
            if n.devno:
                by_devno[n.devno] = n
            by_alias[n.name] = n
            by_alias[n.path.removeprefix("/dev/")] = n

    def lookup(source: str) -> Any:
        """The device or partition a ``/dev/...`` path names (by name, mapper alias, or stat)."""
        if not source.startswith("/dev/"):
            return None
        node = by_alias.get(source[5:])
        if node is None and live:
            try:
                st = os.stat(source)
                if stat.S_ISBLK(st.st_mode):
                    node = by_devno.get(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
            except OSError:
                pass
        return node

    for m in mounts:
        node = by_devno.get(m.devno) or lookup(m.source)
        if node is not None and m.mountpoint not in node.mountpoints:
            node.mountpoints.append(m.mountpoint)
    for s in swaps:
        node = lookup(s)
        if node is not None:
            node.swap = True
    for d in devices:
        d.mountpoints.sort()
        for p in d.partitions:
            p.mountpoints.sort()


def _uses(node: Any, by_name: dict[str, BlockDevice], seen: frozenset[str]) -> list[tuple[int, str]]:
    """Every use of a device or partition as (priority, text); lower priority = more serious.

    0 = mounted at /, 1 = another system mount point, 2 = active swap, 3 = mounted elsewhere,
    4 = held by a dm/md/loop device that is not itself in use. Holders are followed recursively, so
    a partition under LUKS+LVM mounted at / is found.
    """
    out: list[tuple[int, str]] = []
    for mp in node.mountpoints:
        prio = 0 if mp == "/" else 1 if is_system_mountpoint(mp) else 3
        out.append((prio, f"{node.name} is mounted at {mp}"))
    if node.swap:
        out.append((2, f"{node.name} is active swap"))
    for h in node.holders:
        holder = by_name.get(h)
        sub = _uses(holder, by_name, seen | {node.name}) if holder is not None and h not in seen else []
        if sub:
            out.extend((p, f"{node.name} is held by {h}; {t}") for p, t in sub)
        else:
            out.append((4, f"{node.name} is held by {h}"))
    return out


def _apply_usage(devices: list[BlockDevice]) -> None:
    """Set ``system``, ``system_reason`` and ``in_use_reason`` from mounts, swap and holders."""
    by_name = {d.name: d for d in devices}
    for d in devices:
        uses: list[tuple[int, str]] = []
        for node in (d, *d.partitions):
            uses.extend(_uses(node, by_name, frozenset({d.name})))
        uses.sort(key=lambda u: u[0])
        if uses:
            d.in_use_reason = uses[0][1]
            if uses[0][0] <= 2:
                d.system = True
                d.system_reason = uses[0][1]


def _link_usb(devices: list[BlockDevice]) -> None:
    """Fill ``same_reader`` (LUNs of one USB device) and ``shares_bus_with`` (same USB bus)."""
    usb_devs = [d for d in devices if d.usb is not None]
    for d in usb_devs:
        assert d.usb is not None
        d.usb.same_reader = [o.path for o in usb_devs if o is not d and o.usb and o.usb.sysfs_path == d.usb.sysfs_path]
        d.usb.shares_bus_with = [o.path for o in usb_devs
                                 if o is not d and o.usb and d.usb.bus is not None and o.usb.bus == d.usb.bus]


# --- public -----------------------------------------------------------------------------------------


def may_speak_ata(dev: BlockDevice) -> bool:
    """Whether asking ``dev`` for ATA IDENTIFY makes sense: a real disk with a medium, not an SD card
    on a native host (its registers say who it is) nor a virtual device (loop, dm, md...)."""
    return dev.medium_present and dev.card is None and dev.transport not in VIRTUAL_TRANSPORTS


def _is_live(sysfs_root: str) -> bool:
    """True when ``sysfs_root`` is the running kernel's /sys (then lsblk and stat() make sense)."""
    return os.path.realpath(sysfs_root) == "/sys"


def list_devices(sysfs_root: str = "/sys", lsblk_json: Any = None, *, proc_root: str = "/proc",
                 probe_ata: bool = False, ata_timeout: float = DEFAULT_TIMEOUT) -> list[BlockDevice]:
    """Every block device the kernel lists in ``<sysfs_root>/block``, as ``BlockDevice`` records.

    ``lsblk_json`` is lsblk's JSON output (dict, string or file path); when None and ``sysfs_root`` is
    the live ``/sys``, ``lsblk`` is run (and silently skipped if missing). Mounts and swap are read
    from ``<proc_root>/self/mountinfo`` and ``<proc_root>/swaps``. Unbound loop devices and RAM disks
    are left out, as lsblk does; empty reader slots (size 0) are kept.

    ``probe_ata``: on the live system, ask every device that may be an ATA card (:func:`may_speak_ata`)
    for its IDENTIFY data (root only, read-only, ``ata_timeout`` seconds at most each); the answer,
    or why there is none, is ``BlockDevice.ata``.
    """
    sysfs_root = os.fspath(sysfs_root)
    proc_root = os.fspath(proc_root)
    live = _is_live(sysfs_root)
    data = run_lsblk() if (lsblk_json is None and live) else _load_lsblk(lsblk_json)
    lsblk = _flatten_lsblk(data)
    devices = [d for name in list_dir(os.path.join(sysfs_root, "block"))
               if (d := _read_device(sysfs_root, name, lsblk)) is not None]
    devices.sort(key=lambda d: (d.transport in VIRTUAL_TRANSPORTS, natural_key(d.name)))
    _apply_mounts(devices, read_mountinfo(os.path.join(proc_root, "self", "mountinfo")),
                  read_swaps(os.path.join(proc_root, "swaps")), sysfs_root, live)
    _apply_usage(devices)
    _link_usb(devices)
    if probe_ata and live:
        for d in devices:
            if may_speak_ata(d):
                d.ata = read_identify(d.path, ata_timeout)
    return devices


def _stat_block(path: str) -> os.stat_result:
    """stat() a path that must be a block device (:func:`cardbench.engine.errors.stat_path`: the
    one wording for a missing path or another kind)."""
    return stat_path(path, ("device",))[0]


def resolve_device(path: str, *, sysfs_root: str = "/sys", lsblk_json: Any = None,
                   proc_root: str = "/proc", devno: str | None = None) -> tuple[BlockDevice, Partition | None]:
    """The whole device for ``path`` and, if ``path`` is a partition, that partition.

    On the live system the path is stat()ed and matched by ``major:minor`` (so symlinks such as
    ``/dev/disk/by-id/...`` work). With a fixture ``sysfs_root`` the path cannot be stat()ed and is
    matched by name (``/dev/sdb1``) instead. ``devno`` ("major:minor", from a target already
    resolved by :func:`cardbench.target.open_target`) spares the stat.
    """
    path = os.fspath(path)
    live = _is_live(sysfs_root)
    if live and devno is None:
        st = _stat_block(path)
        devno = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    devices = list_devices(sysfs_root, lsblk_json, proc_root=proc_root)
    for d in devices:
        if (devno and d.devno == devno) or (not live and path in (d.path, d.name)):
            return d, None
        for p in d.partitions:
            if (devno and p.devno == devno) or (not live and path in (p.path, p.name)):
                return d, p
    if not live:
        raise TargetError(f"{path} does not exist")
    raise TargetError(f"{path} is a block device ({devno}) that {sysfs_root}/block does not list")


def get_device(path: str, *, whole_device: bool = False, sysfs_root: str = "/sys", lsblk_json: Any = None,
               proc_root: str = "/proc", devno: str | None = None) -> BlockDevice:
    """The ``BlockDevice`` for ``path``; a partition resolves to its parent device.

    With ``whole_device=True`` a partition is refused with
    ``UsageError("/dev/sdb1 is a partition of /dev/sdb; give the whole device")``. Non-existent paths
    raise TargetError, and so do character devices, regular files and directories (the one wording
    of cardbench.target for a path of another kind).
    """
    dev, part = resolve_device(path, sysfs_root=sysfs_root, lsblk_json=lsblk_json, proc_root=proc_root,
                               devno=devno)
    if part is not None and whole_device:
        raise UsageError(f"{path} is a partition of {dev.path}; give the whole device")
    return dev
