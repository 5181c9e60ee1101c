"""``cardbench list``: the block devices, with what cardbench knows about each.

A thin layer over :func:`cardbench.devices.list_devices` and
:func:`cardbench.report.devices.render_devices`; register it on the main group with
``cli.add_command(list_cmd)``. ``--json`` prints one document ``{"schema": "cardbench.devices/1",
"devices": [...]}`` (each device as ``BlockDevice.to_dict()``); the default is the answer in
words, then a table.
"""

from __future__ import annotations

import click

from cardbench.cli import params
from cardbench.devices import list_devices
from cardbench.report.devices import (  # noqa: F401 - re-exported
    FORMATS,
    devices_document,
    devices_table,
    render_devices,
)


def render_table(devices):
    """The devices as a rich Table at its natural width (kept for callers of the old name)."""
    return devices_table(devices, width=10_000)


@click.command("list", epilog=params.examples(
    "cardbench list",
    "cardbench list --json | jq '.devices[] | select(.usb) | .path'"))
@params.output_options(FORMATS, format_help="table: which devices are cards, which are the system, then the "
                                            "table; json: the cardbench.devices/1 document.")
def list_cmd(out) -> None:
    """List block devices: size, bus, model, serial, reader and link speed, mounts, system disks.

    SD cards in a native slot also show what their registers declare (speed, UHS, video and
    application classes); CompactFlash cards behind a SAT reader what they answer to ATA
    IDENTIFY (model, serial, transfer modes), as root. Devices marked SYSTEM hold the running
    system and are never written to.
    """
    out.echo(render_devices(list_devices(probe_ata=True), out.fmt, width=out.width), nl=False)
