"""Block devices (``cardbench list``): the answer first, then a table that fits the terminal.

    from cardbench.devices import list_devices
    from cardbench.report.devices import render_devices
    print(render_devices(list_devices(), "table", width=80))

:func:`devices_summary` says in words which devices are cards or sticks one could test, which
hold the running system (never written to) and which are in use; :func:`devices_table` is the
rich table (path, size in GB and GiB, bus, model, serial, reader and link, mounts, SYSTEM);
``json`` is ``{"schema": "cardbench.devices/1", "devices": [BlockDevice.to_dict(), ...]}``.
"""

from __future__ import annotations

import json

from rich.markup import escape

from cardbench.devices import SCHEMA, BlockDevice, Partition
from cardbench.errors import UsageError
from cardbench.report.drawer import md_table
from cardbench.report.terminal import Col, fit_table, to_text
from cardbench.units import fmt_size

FORMATS = ("table", "md", "json")


def devices_document(devices: list[BlockDevice]) -> dict:
    """The ``--json`` document for a list of devices."""
    return {"schema": SCHEMA, "devices": [d.to_dict() for d in devices]}


def size_text(d: BlockDevice) -> str:
    """"31.9 GB / 29.7 GiB", or "no medium" for an empty slot."""
    if not d.medium_present:
        return "no medium"
    return f"{fmt_size(d.size)} / {fmt_size(d.size, binary=True)}"


def reader_text(d: BlockDevice, markup: bool = True) -> str:
    """The reader and its link for USB devices, the host and bus mode for native SD slots."""
    if d.usb is not None:
        u = d.usb
        name = " ".join(x for x in (u.manufacturer, u.product) if x) or "USB device"
        bits = [f"{name} ({u.id})" if u.id else name]
        link = f"{u.speed} Mbit/s" if u.speed else "speed unknown"
        if u.driver:
            link += f" {u.driver}"
        bits.append(link)
        if u.note:
            bits.append(f"[yellow]{_escape(u.note)}[/yellow]" if markup else u.note)
        holder = d.holder() or {}
        bits.append({"reader": "a card reader", "stick": "a stick: the USB device is the card",
                     "unsure": "a stick or a single-slot reader (cannot tell)"}.get(holder.get("kind") or "", ""))
        return "\n".join(b for b in bits if b)
    if d.card is not None:
        c = d.card
        bits = [f"{c.type or 'card'} on {c.host or 'native host'}"]
        if c.bus_timing:
            bits.append(c.bus_timing + (f" {c.bus_clock_hz / 1e6:.0f} MHz" if c.bus_clock_hz else ""))
        if c.declared_classes:
            bits.append("declares " + " ".join(c.declared_classes))
        return "\n".join(bits)
    if d.loop_backing_file:
        return f"file {d.loop_backing_file}"
    return ""


def mounts_text(d: BlockDevice) -> str:
    """Mount points of the device and its partitions, and swap / holder uses."""
    out = []
    nodes: list[BlockDevice | Partition] = [d, *d.partitions]
    for node in nodes:
        for mp in node.mountpoints:
            out.append(f"{node.name}: {mp}" if node is not d else mp)
        if node.swap:
            out.append(f"{node.name}: swap")
        for h in node.holders:
            out.append(f"{node.name} -> {h}")
    return "\n".join(out)


def ata_line(d: BlockDevice) -> str:
    """What the card behind the reader said to ATA IDENTIFY: "CF card SanDisk SDCFH-004G, s/n ...,
    UDMA 0-4 (4 in use)"; a probe that timed out or failed says so; "not ATA" stays quiet."""
    probe = getattr(d, "ata", None)
    if probe is None:
        return ""
    ident = probe.identify
    if ident is not None:
        kind = "CF card" if ident.is_cf else "ATA device"
        serial = f", s/n {ident.serial}" if ident.serial else ", no serial"
        return f"{kind} {ident.model}{serial}, {ident.modes_text()}"
    if probe.status in ("timed out", "failed") and d.transport == "usb":
        return f"IDENTIFY {probe.status}"
    return ""


def model_text(d: BlockDevice, ata: bool = True) -> str:
    """The model (with the CID maker hint of an SD card), and the ATA IDENTIFY line below it."""
    if d.card is not None and d.card.cid is not None:
        # the CID maker id is only a hint (SD-3C does not publish the table)
        hint = d.card.cid.manufacturer_hint
        model = f"{d.model or '?'} (maker 0x{d.card.cid.manufacturer_id:02x}" + (f": {hint}?)" if hint else ")")
    else:
        model = " ".join(x for x in (d.vendor, d.model) if x)
    line = ata_line(d) if ata else ""
    if line:
        model = f"{model}\n{line}" if model else line
    return model


def _escape(text: str) -> str:
    return escape(text)


def is_card(d: BlockDevice) -> bool:
    """A card or stick one would test: behind a USB reader, in an SD slot, or removable."""
    return d.usb is not None or d.card is not None or bool(d.removable)


def devices_summary(devices: list[BlockDevice]) -> list[str]:
    """The answer in words: the cards and sticks (and whether they are free to test), the system
    disks, the rest counted."""
    if not devices:
        return ["No block devices found."]
    lines = []
    cards = [d for d in devices if is_card(d) and not d.system]
    for d in cards:
        what = ata_line(d).split(",")[0] or model_text(d, ata=False) or "card"
        via = d.usb.id if d.usb is not None and d.usb.id else (d.transport or "")
        link = f", {d.usb.speed} Mbit/s" if d.usb is not None and d.usb.speed else ""
        state = ("empty slot" if not d.medium_present else
                 f"in use ({d.in_use_reason}): unmount it for destructive tests" if d.in_use_reason else
                 "not mounted: ready for `cardbench verify` and `cardbench run`")
        lines.append(f"{d.path}: {what}, {size_text(d) if d.medium_present else 'no medium'}"
                     f"{' via ' + via if via else ''}{link}; {state}.")
    if not cards:
        lines.append("No card or stick found (no USB reader, SD slot or removable device).")
    system = [d.path for d in devices if d.system]
    if system:
        lines.append(f"Never written to (they hold the running system): {', '.join(system)}.")
    rest = len(devices) - len(cards) - len(system)
    if rest:
        lines.append(f"{rest} other device{'s' if rest != 1 else ''} (loop, disks) in the table below.")
    return lines


_HEADERS = ("Device", "Size", "Bus", "Model", "Serial", "Reader / link", "Mounted / used", "")


def _cells(d: BlockDevice) -> list[str]:
    marker = "[bold red]SYSTEM[/bold red]" if d.system else ("in use" if d.in_use_reason else "")
    return [_escape(d.path), size_text(d).replace(" / ", "\n"), _escape(d.transport or "?"), _escape(model_text(d)), _escape(d.serial or ""),
            reader_text(d), _escape(mounts_text(d)), marker]


def devices_table(devices: list[BlockDevice], width: int = 150):
    """A rich Table of the devices that fits ``width`` (serial, then bus, then model go first)."""
    drop = {4: 1, 2: 2, 3: 3}
    cols = [Col(h, right=(i == 1), wrap=i not in (0, 1, 7), drop=drop.get(i), squeeze=i in (5, 6))
            for i, h in enumerate(_HEADERS)]
    return fit_table(cols, [_cells(d) for d in devices], width, title="Block devices", show_lines=True,
                     markup=True)


def render_devices(devices: list[BlockDevice], fmt: str = "table", *, width: int = 150) -> str:
    """``cardbench list`` as text: ``table`` (the summary, then the table), ``md`` or ``json``."""
    if fmt == "json":
        return json.dumps(devices_document(devices), indent=2) + "\n"
    if fmt == "md":
        rows = [[d.path, size_text(d), d.transport or "?", model_text(d).replace("\n", ", "), d.serial or "",
                 reader_text(d, markup=False).replace("\n", ", "), mounts_text(d).replace("\n", ", "),
                 "SYSTEM" if d.system else ("in use" if d.in_use_reason else "")] for d in devices]
        return "\n".join(f"- {x}" for x in devices_summary(devices)) + "\n\n" + md_table(list(_HEADERS), rows) + "\n"
    if fmt != "table":
        raise UsageError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")
    parts: list[object] = list(devices_summary(devices))
    if devices:
        table = devices_table(devices, width)
        parts += ["", table]
        if table.dropped:
            parts.append(f"Left out at {width} columns: {', '.join(h for h in table.dropped if h)} "
                         "(`cardbench list --json` has everything).")
    return to_text(parts, width)
