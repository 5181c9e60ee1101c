"""USB facts about a block device: which reader, which link speed, which driver, which bus.

The walk follows standards.md §4.2 (sources [S31] [S32] [S33]): from ``/sys/block/sdX`` resolved to
``/sys/devices/.../usb2/2-1/2-1:1.0/host3/target3:0:0/3:0:0:0/block/sdX``, go up until a directory
has ``idVendor`` (the USB *device*: ``idVendor``, ``idProduct``, ``manufacturer``, ``product``,
``serial``, ``speed``, ``version``, ``busnum``, ``devnum``, ``rx_lanes``, ``tx_lanes``); the directory
just below it (``2-1:1.0``) is the *interface*, whose ``driver`` link names ``usb-storage`` (Bulk-Only
Transport, ``bInterfaceProtocol`` 50) or ``uas`` (62). The SCSI device name ``H:C:T:L`` gives the LUN:
a multi-slot reader shows one LUN per slot.

``speed`` is the negotiated link in Mbit/s as the kernel prints it ("480", "5000"...). Gotchas
[S31]: USB_SPEED_UNKNOWN also prints "12"; "10000" is Gen 2x1 *or* Gen 1x2 (see lanes).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from cardbench.devices.sysfs import link_name, read_int, read_text


@dataclass(frozen=True)
class UsbSpeed:
    """One row of the USB link table (ratings.toml ``usb.speed``, standards.md §4.1)."""

    sysfs: str
    name: str
    signalling_bits_per_s: int
    #: Payload ceiling after framing/encoding, bytes/s; None where the notes give none.
    ceiling_bytes_per_s: int | None


#: sysfs ``speed`` value -> link facts [S31] [S36] [S39]. Ceilings: full speed 19 x 64 B per 1 ms
#: frame; high speed 13 x 512 B per 125 us microframe; SuperSpeed after 8b/10b; Gen 2 after 128b/132b.
USB_SPEEDS: dict[str, UsbSpeed] = {
    "1.5": UsbSpeed("1.5", "Low Speed (USB 1.0)", 1_500_000, None),
    "12": UsbSpeed("12", "Full Speed (USB 1.1)", 12_000_000, 1_216_000),
    "480": UsbSpeed("480", "High Speed (USB 2.0)", 480_000_000, 53_248_000),
    "5000": UsbSpeed("5000", "SuperSpeed (USB 3.x Gen 1)", 5_000_000_000, 500_000_000),
    "10000": UsbSpeed("10000", "SuperSpeed+ (USB 3.x Gen 2x1 or Gen 1x2)", 10_000_000_000, 1_212_000_000),
    "20000": UsbSpeed("20000", "SuperSpeed+ Gen 2x2", 20_000_000_000, 2_424_000_000),
}

#: bInterfaceProtocol -> transport protocol name [S32] [S62].
MASS_STORAGE_PROTOCOLS = {"50": "BOT", "62": "UAS"}


@dataclass
class UsbInfo:
    """The USB reader or stick behind a block device, and the link it negotiated.

    ``shares_bus_with`` lists other block devices on the same USB bus (root hub): they compete for
    its bandwidth. ``same_reader`` lists the other LUNs (slots) of the same USB device.
    """

    vendor_id: str | None
    product_id: str | None
    id: str | None
    manufacturer: str | None
    product: str | None
    serial: str | None
    speed: str | None
    speed_name: str | None
    link_ceiling_bytes_per_s: int | None
    usb_version: str | None
    driver: str | None
    protocol: str | None
    interface_protocol: str | None
    bus: int | None
    devnum: int | None
    port_path: str | None
    rx_lanes: int | None
    tx_lanes: int | None
    lun: int | None
    root_hub_speed: str | None
    sysfs_path: str
    note: str | None = None
    shares_bus_with: list[str] = field(default_factory=list)
    same_reader: list[str] = field(default_factory=list)


_INTERFACE_RE = re.compile(r"^\d+-[\d.]+:\d+\.\d+$")
_HCTL_RE = re.compile(r"^(\d+):(\d+):(\d+):(\d+)$")
_PORT_RE = re.compile(r"^\d+-[\d.]+$")


def find_usb_device(device_dir: str, sysfs_root: str) -> tuple[str, str | None] | None:
    """Walk up from a resolved sysfs device directory to the USB device (the one with ``idVendor``).

    Returns ``(usb_device_dir, interface_dir)`` or None when no ancestor below ``sysfs_root`` is a
    USB device. Root hubs (``usbN``) also have ``idVendor``, so a hit is only taken when its name
    looks like a port path (``2-1``, ``2-1.4``), not ``usb2``.
    """
    root = os.path.realpath(sysfs_root)
    cur = device_dir
    child: str | None = None
    while cur.startswith(root) and cur != root:
        name = os.path.basename(cur)
        if os.path.exists(os.path.join(cur, "idVendor")) and not name.startswith("usb"):
            iface = child if child and _INTERFACE_RE.match(os.path.basename(child)) else None
            return cur, iface
        child, cur = cur, os.path.dirname(cur)
    return None


@dataclass
class UsbHub:
    """The USB hub several block devices are all behind (the deepest one they share): a hub of
    its own (``port_path`` "2-1"), or the host controller (``root``: its PCI ids, ``serial`` its
    PCI address, ``port_path`` its root hubs: an xHCI controller has one per speed, "usb2+usb3")."""

    vendor_id: str | None
    product_id: str | None
    manufacturer: str | None
    product: str | None
    serial: str | None
    speed: str | None
    port_path: str
    root: bool
    sysfs_path: str


def _is_usb_device(path: str) -> bool:
    return os.path.exists(os.path.join(path, "idVendor"))


def shared_hub(usb_dirs: list[str]) -> UsbHub | None:
    """The deepest USB hub every USB device in ``usb_dirs`` (their resolved sysfs directories,
    :attr:`UsbInfo.sysfs_path`) is behind; where that is a root hub, or the devices sit on
    different root hubs of one controller, the host controller itself. None when fewer than two
    devices are given (slots of one reader share the reader, not a hub) or they are on separate
    controllers."""
    dirs = [os.path.realpath(d) for d in usb_dirs]
    if len(set(dirs)) < 2:
        return None
    common = os.path.commonpath(dirs)
    cur = common
    while cur and cur != os.path.dirname(cur):
        name = os.path.basename(cur)
        if _is_usb_device(cur) and _PORT_RE.match(name):
            def attr(n: str, hub: str = cur) -> str | None:   # hub: this loop's directory, bound now
                return read_text(os.path.join(hub, n)) or None
            return UsbHub(vendor_id=attr("idVendor"), product_id=attr("idProduct"), manufacturer=attr("manufacturer"),
                          product=attr("product"), serial=attr("serial"), speed=attr("speed"), port_path=name,
                          root=False, sysfs_path=cur)
        if _is_usb_device(cur) and name.startswith("usb"):
            return _controller(os.path.dirname(cur), dirs)
        cur = os.path.dirname(cur)
    # on different root hubs: the common directory is their controller if each is below one of its usbN
    roots = {os.path.relpath(d, common).split(os.sep)[0] for d in dirs}
    if all(r.startswith("usb") and _is_usb_device(os.path.join(common, r)) for r in roots):
        return _controller(common, dirs)
    return None


def _controller(path: str, dirs: list[str]) -> UsbHub:
    """The host controller at ``path`` (its PCI ids where it is a PCI device, else its first root hub's)."""
    roots = sorted({os.path.relpath(d, path).split(os.sep)[0] for d in dirs},
                   key=lambda r: int(r[3:]) if r[3:].isdigit() else 0)
    first = os.path.join(path, roots[0])

    def pci(n: str) -> str | None:
        v = read_text(os.path.join(path, n))
        return v[2:] if v and v.startswith("0x") else v or None
    vendor, product = pci("vendor"), pci("device")
    if not (vendor and product):
        vendor = read_text(os.path.join(first, "idVendor")) or None
        product = read_text(os.path.join(first, "idProduct")) or None
    speeds = [read_text(os.path.join(path, r, "speed")) for r in roots]
    speed = max((x for x in speeds if x), key=lambda x: float(x) if x.replace(".", "").isdigit() else 0, default=None)
    return UsbHub(vendor_id=vendor, product_id=product, manufacturer=None,
                  product=read_text(os.path.join(first, "product")) or None,
                  serial=read_text(os.path.join(first, "serial")) or os.path.basename(path), speed=speed,
                  port_path="+".join(roots), root=True, sysfs_path=path)


def _version(text: str | None) -> str | None:
    """bcdUSB as the kernel prints it (" 3.20") -> "3.20"."""
    return text.strip() if text else None


def read_usb_info(device_dir: str, sysfs_root: str) -> UsbInfo | None:
    """The USB facts for a block device whose resolved sysfs directory is ``device_dir``."""
    hit = find_usb_device(device_dir, sysfs_root)
    if hit is None:
        return None
    udev, iface = hit

    def attr(name: str) -> str | None:
        """One attribute of the USB device directory (None when missing or empty)."""
        value = read_text(os.path.join(udev, name))
        return value if value else None

    vid, pid = attr("idVendor"), attr("idProduct")
    speed = attr("speed")
    port_path = os.path.basename(udev)
    bus = read_int(os.path.join(udev, "busnum"))
    if bus is None:
        m = re.match(r"^(\d+)-", port_path)
        bus = int(m.group(1)) if m else None

    driver = protocol_code = None
    if iface:
        driver = link_name(os.path.join(iface, "driver"))
        protocol_code = read_text(os.path.join(iface, "bInterfaceProtocol"))
    protocol = MASS_STORAGE_PROTOCOLS.get(protocol_code or "")
    if protocol is None and driver == "uas":
        protocol = "UAS"
    elif protocol is None and driver == "usb-storage":
        protocol = "BOT"

    lun = None
    for part in device_dir.split(os.sep):
        m = _HCTL_RE.match(part)
        if m:
            lun = int(m.group(4))

    root_hub = None
    cur = os.path.dirname(udev)
    while cur and os.path.basename(cur) and not os.path.basename(cur).startswith("usb"):
        cur = os.path.dirname(cur)
    if cur and os.path.basename(cur).startswith("usb"):
        root_hub = read_text(os.path.join(cur, "speed"))

    info = USB_SPEEDS.get(speed or "")
    version = _version(attr("version"))
    note = None
    if speed == "480" and version and _version_at_least(version, 3.0):
        note = (f"device supports USB {version} but linked at 480 Mbit/s "
                "(USB 2 cable, hub or port?)")
    elif speed == "12" and version and _version_at_least(version, 2.0):
        note = f"device supports USB {version} but linked at 12 Mbit/s (or the speed is unknown)"

    return UsbInfo(
        vendor_id=vid, product_id=pid, id=f"{vid}:{pid}" if vid and pid else None,
        manufacturer=attr("manufacturer"), product=attr("product"), serial=attr("serial"),
        speed=speed, speed_name=info.name if info else None,
        link_ceiling_bytes_per_s=info.ceiling_bytes_per_s if info else None,
        usb_version=version, driver=driver, protocol=protocol, interface_protocol=protocol_code,
        bus=bus, devnum=read_int(os.path.join(udev, "devnum")), port_path=port_path,
        rx_lanes=read_int(os.path.join(udev, "rx_lanes")), tx_lanes=read_int(os.path.join(udev, "tx_lanes")),
        lun=lun, root_hub_speed=root_hub, sysfs_path=udev, note=note,
    )


def _version_at_least(version: str, minimum: float) -> bool:
    """Whether a bcdUSB string such as "3.20" is at least ``minimum``."""
    try:
        return float(version) >= minimum
    except ValueError:
        return False
