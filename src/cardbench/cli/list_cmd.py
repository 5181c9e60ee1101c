"""``cardbench list``: the block devices, with what cardbench knows about each.

A thin layer over :func:`cardbench.devices.list_devices`; register it on the main group with
``cli.add_command(list_cmd)``. ``--json`` prints one document ``{"schema": "cardbench.devices/1",
"devices": [...]}`` (each device as ``BlockDevice.to_dict()``); the default is a table.
"""

from __future__ import annotations

from cardbench.cli.ui import stdout_console

import json

import click

from cardbench.devices import SCHEMA, BlockDevice, list_devices
from cardbench.units import fmt_size


def devices_document(devices: list[BlockDevice]) -> dict:
    """The ``--json`` document for a list of devices."""
    return {"schema": SCHEMA, "devices": [d.to_dict() for d in devices]}


def _size(d: BlockDevice) -> str:
    """"31.9 GB / 29.7 GiB", or "no medium" for an empty slot."""
    if not d.medium_present:
        return "no medium"
    return f"{fmt_size(d.size)} / {fmt_size(d.size, binary=True)}"


def _reader(d: BlockDevice) -> str:
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
            bits.append(f"[yellow]{u.note}[/yellow]")
        return "\n".join(bits)
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


def _ata_line(d: BlockDevice) -> str:
    """What the card behind the reader said to ATA IDENTIFY: "CF card SanDisk SDCFH-004G, s/n ...,
    UDMA 0-4 (4 in use)"; a probe that timed out or failed says so; "not ATA" stays quiet."""
    probe = d.ata
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


def _mounts(d: BlockDevice) -> str:
    """Mount points of the device and its partitions, and swap / holder uses."""
    out = []
    for node in (d, *d.partitions):
        for mp in node.mountpoints:
            out.append(f"{node.name}: {mp}" if node is not d else mp)
        if node.swap:
            out.append(f"{node.name}: swap")
        for h in node.holders:
            out.append(f"{node.name} -> {h}")
    return "\n".join(out)


def render_table(devices: list[BlockDevice]):
    """A rich Table of the devices (path, size in GB and GiB, bus, model, serial, reader, mounts, system)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Block devices", show_lines=True)
    for name, kw in (("Device", {"no_wrap": True}), ("Size", {"justify": "right", "no_wrap": True}),
                     ("Bus", {}), ("Model", {}),
                     ("Serial", {"overflow": "fold"}), ("Reader / link", {}), ("Mounted / used", {}), ("", {})):
        table.add_column(name, **kw)
    for d in devices:
        if d.card is not None and d.card.cid is not None:
            # the CID maker id is only a hint (SD-3C does not publish the table)
            hint = d.card.cid.manufacturer_hint
            model = f"{d.model or '?'} (maker 0x{d.card.cid.manufacturer_id:02x}" + (f": {hint}?)" if hint else ")")
        else:
            model = " ".join(x for x in (d.vendor, d.model) if x)
        ata = _ata_line(d)
        if ata:
            model = f"{model}\n{ata}" if model else ata
        marker = "[bold red]SYSTEM[/bold red]" if d.system else ("in use" if d.in_use_reason else "")
        reader = _reader(d)
        table.add_row(escape(d.path), _size(d), escape(d.transport or "?"), escape(model), escape(d.serial or ""),
                      reader, escape(_mounts(d)), marker)
    return table


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema cardbench.devices/1).")
def list_cmd(as_json: bool) -> None:
    """List block devices: size, bus, model, serial, reader and link speed, mounts, system disks.

    SD cards in a native slot also show what their registers declare (speed, UHS, video and
    application classes); CompactFlash cards behind a SAT reader what they answer to ATA
    IDENTIFY (model, serial, transfer modes), as root. Devices marked SYSTEM hold the running system and are never written to.
    """
    devices = list_devices(probe_ata=True)
    if as_json:
        click.echo(json.dumps(devices_document(devices), indent=2))
        return
    from rich.console import Console

    console = stdout_console()
    if not devices:
        console.print("No block devices found.")
        return
    console.print(render_table(devices))
