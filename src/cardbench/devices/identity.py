"""From a discovered block device to the identity a result carries: which card, which reader.

This is the one identity rule: ``run``, ``verify``, the drawer and the shared probe all call
:func:`identify` (``verify``'s document too), so every record names a card the same way.

The card: an SD/MMC card on a native host names itself (its CID: manufacturer, OEM, serial;
``Card.sd`` keeps the decoded registers). A USB mass-storage device is either a **reader**
(it outlives its media: an empty slot of size 0, several LUNs, a medium that changed while the
USB device stayed, a name that says so) whose card is anonymous (the capacity, or the user's own
name), or a **stick** (its medium arrives and leaves with it: the SCSI removable bit clear, or
seen arriving with its medium in a drawer session; a single-card adapter plugged in with its
card is one too): then the USB device is the card, known by its USB serial, and there is no
reader. Where nothing tells, the holder is "unsure", said in ``Reader.kind_evidence``, and the
card takes the USB identity too (a reader's ceiling is never inferred from it: only a card's
own identity, ``Card.own_identity``, or a name the person typed makes "the same card" for the
reader verdicts: :func:`cardbench.verdicts.readers.same_card_basis`). A CompactFlash card behind
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
from cardbench.devices.holder import SessionHint, classify_holder
from cardbench.devices.usb import shared_hub
from cardbench.errors import CardbenchError
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


def usb_name(usb) -> str | None:
    """A USB device's name as every record shows it: manufacturer and product, then its serial
    (readers of one make are told apart by it)."""
    name = " ".join(x for x in (usb.manufacturer, usb.product) if x) or None
    if name and usb.serial:
        name += f" #{usb.serial}"
    return name


def sd_registers(info) -> dict[str, Any] | None:
    """An SD/MMC card's registers for ``Card.sd``: raw CID/CSD/SCR/SSR and what they say."""
    if info is None:
        return None
    out: dict[str, Any] = {"type": info.type, "raw": {k: v for k, v in (info.raw or {}).items() if v}}
    attrs = info.attributes or {}
    out["hwrev"], out["fwrev"], out["date"] = attrs.get("hwrev"), attrs.get("fwrev"), attrs.get("date")
    if info.cid is not None:
        c = info.cid
        out.update(manufacturer_id=c.manufacturer_id, manufacturer=c.manufacturer_hint, oem_id=c.oem_id,
                   product_name=c.product_name, revision=c.revision, serial=c.serial_hex,
                   manufactured=c.manufactured)
    if info.csd is not None:
        out["csd_capacity_bytes"] = info.csd.capacity_bytes
        out["csd_structure"] = info.csd.structure
    if info.declared_classes:
        out["declared_classes"] = list(info.declared_classes)
    return out


def identify(dev: BlockDevice, card: Card, reader: Reader, target: dict[str, Any] | None = None, *,
             ata_timeout: float | None = DEFAULT_TIMEOUT, hint: SessionHint | None = None) -> BlockDevice:
    """Fill ``card``/``reader`` (and ``target``) from the device ``dev`` (:func:`cardbench.devices.get_device`):
    the one identity rule (module docstring). What the user gave is never overwritten.

    ``ata_timeout``: seconds the card may take to answer ATA IDENTIFY (None: do not ask).
    ``hint``: what a drawer session saw of the device (:class:`SessionHint`)."""
    if ata_timeout is not None:
        apply_ata(card, probe_ata(dev, ata_timeout), target)
        if card.ata and card.ata.get("serial"):
            card.serial_source = card.serial_source or "ata"
    if card.capacity_bytes is None:
        card.capacity_bytes = dev.size
    info = dev.card
    if info is not None and info.cid is not None:
        if card.serial is None:
            card.serial = f"{info.cid.manufacturer_id:02x}-{info.cid.oem_id}-{info.cid.serial_hex}"
            card.serial_source = "cid"
        card.model = card.model or info.cid.product_name or None
    if info is not None:
        card.sd = card.sd or sd_registers(info)
    if reader.transport is None:
        reader.transport = dev.transport
    usb = dev.usb
    kind = None
    if usb is not None:
        kind, evidence = classify_holder(dev, hint)
        reader.kind, reader.kind_evidence = reader.kind or kind, reader.kind_evidence or evidence
        kind = reader.kind        # a kind decided before (the drawer's session evidence) stands
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
            reader.name = usb_name(usb)
            if kind == "stick" and reader.name:
                reader.name = f"none: a USB stick ({reader.name})"
        if kind in ("stick", "unsure") and card.serial is None and not (card.ata or {}).get("serial"):
            # the USB device is (or may be) the card: its serial is the card's, in every record
            own = usb.serial or dev.serial
            if own:
                card.serial, card.serial_source = own, "usb"
            card.model = card.model or " ".join(x for x in (usb.manufacturer, usb.product) if x) or None
    elif info is not None:
        reader.kind = reader.kind or "native"
        if reader.name is None:
            reader.name = f"native {info.type or 'SD'} slot ({info.host or 'mmc'})"
    elif dev.serial and card.serial is None and dev.transport not in ("loop",) and not card.ata:
        card.serial, card.serial_source = dev.serial, "device"
    if card.model is None:
        card.model = " ".join(x for x in (dev.vendor, dev.model) if x) or None
    if target is not None:
        target.setdefault("device", dev.path)
        target["transport"] = dev.transport
        if usb is not None:
            target["holder"] = {"kind": reader.kind, "evidence": list(reader.kind_evidence or [])}
        if info is not None and info.status is not None:
            target["ssr_classes"] = info.status.to_dict()
        if info is not None and info.cid is not None:      # who made it, as the card says (verdicts.identity)
            target["cid"] = {"card_type": info.cid.card_type, "manufacturer_id": info.cid.manufacturer_id,
                             "oem_id": info.cid.oem_id, "product_name": info.cid.product_name}
        if info is not None and (info.bus_timing or info.bus_clock_hz):
            target["sd_bus"] = {"mode": info.bus_timing, "clock_hz": info.bus_clock_hz,
                                "bus_width": info.bus_width_bits}
    return dev



def shared_path(paths: list[str], reader_name: str | None = None) -> tuple[Reader, dict[str, Card]]:
    """What cards read at once (``readers --probe``) share, as the reader their probe is stored
    under, and the card in each device (path -> Card, where it can be identified).

    Slots of one USB reader (one USB device): that reader. USB devices of their own (sticks, or
    cards in separate readers) behind one hub or host controller: that hub (``kind`` "hub"; a
    controller is known by its PCI ids and address), so a ceiling the set shows is never put
    on one stick or one reader of it. Devices off USB with one reader identity (an emulated
    reader's slots): that reader, as before. Nothing in common seen: a reader that says so.
    ``reader_name`` (``--reader``) names what is found; it changes no identity."""
    cards: dict[str, Card] = {}
    seen: list[Reader] = []
    usb_dirs: list[str | None] = []
    for path in dict.fromkeys(paths):
        card, reader = Card(), Reader(name=reader_name)
        try:
            dev = identify(get_device(path), card, reader)
        except (CardbenchError, OSError):
            continue
        cards[path] = card
        seen.append(reader)
        usb_dirs.append(dev.usb.sysfs_path if dev.usb is not None else None)
    if not seen:
        return Reader(name=reader_name), cards
    if all(usb_dirs):
        if len(set(usb_dirs)) == 1:
            return seen[0], cards
        hub = shared_hub([d for d in usb_dirs if d])
        if hub is not None:
            return _hub_reader(hub, len(usb_dirs), reader_name), cards
    elif not any(usb_dirs) and len({r.identity() for r in seen}) == 1:
        return seen[0], cards
    return Reader(name=reader_name or "no reader or USB hub in common seen",
                  kind_evidence=["the devices are not all in one reader or behind one USB host controller"]), cards


def _hub_reader(hub, count: int, reader_name: str | None) -> Reader:
    """The reader a probe of ``count`` USB devices behind ``hub`` (a devices.usb.UsbHub) is stored under."""
    if hub.root:
        what = f"USB host controller {hub.serial}" + (f" ({hub.product})" if hub.product else "")
    else:
        what = f"USB hub {' '.join(x for x in (hub.manufacturer, hub.product) if x) or '?'} (port {hub.port_path})"
    try:
        speed = float(hub.speed) if hub.speed else None
    except ValueError:
        speed = None
    # a hub without a serial is told apart by where it is plugged
    serial = hub.serial if hub.root or hub.serial else f"port {hub.port_path}"
    return Reader(name=reader_name or what, vendor_id=hub.vendor_id, product_id=hub.product_id, serial=serial,
                  link_speed_mbit=speed, transport="usb", kind="hub",
                  kind_evidence=[f"{count} USB devices of their own, all behind {what}: the path they share"])
