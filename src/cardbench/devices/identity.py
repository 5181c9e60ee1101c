"""From a discovered block device to the identity a result carries: which card, which reader.

The card: an SD/MMC card on a native host names itself (CID serial, product name, capacity);
behind a USB reader only the reader is visible (its USB ids, serial, link speed and driver), so
the card is the reader's LUN plus the capacity, or the user's own name. A CompactFlash card behind
a reader that implements SAT answers ATA IDENTIFY DEVICE (:mod:`cardbench.devices.ata`): then it
is known by its own model, serial and sectors (``Card.ata``), and its transfer modes cap what it
can show. ``identify`` fills what the user left empty and never overwrites what they typed. It
also records in ``target`` what the verdicts need: the classes the card declares in its SD Status
(``ssr_classes``), the SD bus mode (``sd_bus``), and whether the card answered IDENTIFY
(``ata_identify``: status and reason, also when it did not).
"""

from __future__ import annotations

from typing import Any

from cardbench.devices.ata import DEFAULT_TIMEOUT, AtaProbe, read_identify
from cardbench.devices.discovery import BlockDevice, get_device, may_speak_ata
from cardbench.result import Card, Reader


def probe_ata(dev: BlockDevice, timeout: float = DEFAULT_TIMEOUT) -> AtaProbe | None:
    """``dev.ata`` if discovery already asked, else ask now (stored on ``dev.ata``); None where the
    device cannot be an ATA card (:func:`may_speak_ata`)."""
    if dev.ata is None and may_speak_ata(dev):
        dev.ata = read_identify(dev.path, timeout)
    return dev.ata


def apply_ata(card: Card, probe: AtaProbe | None, target: dict[str, Any] | None = None) -> None:
    """Put what the card said in IDENTIFY into ``card`` (``ata``, and ``model``/``serial`` where the
    user gave none) and the probe's status and reason into ``target["ata_identify"]``, so a result
    says also when the card did not answer (then today's identity stands: reader LUN + capacity or
    the user's names)."""
    if probe is None:
        return
    if target is not None:
        target["ata_identify"] = probe.to_dict(full=False)
    if probe.identify is None:
        return
    ident = probe.identify
    card.ata = ident.summary()
    if card.model is None and ident.model:
        card.model = ident.model
    if card.serial is None and ident.serial:
        card.serial = ident.serial


def identify(dev: BlockDevice | str, card: Card, reader: Reader, target: dict[str, Any] | None = None, *,
             ata_timeout: float | None = DEFAULT_TIMEOUT) -> BlockDevice:
    """Fill ``card``/``reader`` (and ``target``) from the device at ``dev`` (path or BlockDevice).

    ``ata_timeout``: seconds the card may take to answer ATA IDENTIFY (None: do not ask)."""
    if isinstance(dev, str):
        dev = get_device(dev)
    if ata_timeout is not None:
        apply_ata(card, probe_ata(dev, ata_timeout), target)
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
        if info is not None and info.cid is not None:      # who made it, as the card says (verdicts.identity)
            target["cid"] = {"card_type": info.cid.card_type, "manufacturer_id": info.cid.manufacturer_id,
                             "oem_id": info.cid.oem_id, "product_name": info.cid.product_name}
        if info is not None and (info.bus_timing or info.bus_clock_hz):
            target["sd_bus"] = {"mode": info.bus_timing, "clock_hz": info.bus_clock_hz,
                                "bus_width": info.bus_width_bits}
    return dev
