"""From a discovered block device to the identity a result carries: which card, which reader.

The card: an SD/MMC card on a native host names itself (CID serial, product name, capacity);
behind a USB reader only the reader is visible (its USB ids, serial, link speed and driver), so
the card is the reader's LUN plus the capacity, or the user's own name. ``identify`` fills what
the user left empty and never overwrites what they typed. It also records in ``target`` what the
verdicts need: the classes the card declares in its SD Status (``ssr_classes``) and the SD bus
mode (``sd_bus``).
"""

from __future__ import annotations

from typing import Any

from cardbench.devices.discovery import BlockDevice, get_device
from cardbench.result import Card, Reader


def identify(dev: BlockDevice | str, card: Card, reader: Reader, target: dict[str, Any] | None = None) -> BlockDevice:
    """Fill ``card``/``reader`` (and ``target``) from the device at ``dev`` (path or BlockDevice)."""
    if isinstance(dev, str):
        dev = get_device(dev)
    if card.capacity_bytes is None:
        card.capacity_bytes = dev.size
    if card.model is None:
        card.model = " ".join(x for x in (dev.vendor, dev.model) if x) or None
    info = dev.card
    if info is not None and info.cid is not None:
        card.serial = card.serial or f"{info.cid.manufacturer_id:02x}-{info.cid.oem_id}-{info.cid.serial_hex}"
        card.model = info.cid.product_name or card.model
    if reader.transport is None:
        reader.transport = dev.transport
    usb = dev.usb
    if usb is not None:
        reader.vendor_id = reader.vendor_id or usb.vendor_id
        reader.product_id = reader.product_id or usb.product_id
        reader.serial = reader.serial or usb.serial
        reader.driver = reader.driver or usb.driver
        if reader.link_speed_mbit is None and usb.speed:
            try:
                reader.link_speed_mbit = float(usb.speed)
            except ValueError:
                pass
        if reader.name is None:
            reader.name = " ".join(x for x in (usb.manufacturer, usb.product) if x) or None
    elif info is not None and reader.name is None:
        reader.name = f"native {info.type or 'SD'} slot ({info.host or 'mmc'})"
    if target is not None:
        target.setdefault("device", dev.path)
        target["transport"] = dev.transport
        if info is not None and info.status is not None:
            target["ssr_classes"] = info.status.to_dict()
        if info is not None and (info.bus_timing or info.bus_clock_hz):
            target["sd_bus"] = {"mode": info.bus_timing, "clock_hz": info.bus_clock_hz,
                                "bus_width": info.bus_width_bits}
    return dev
