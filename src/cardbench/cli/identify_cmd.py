"""``cardbench identify SOURCE``: what a CompactFlash card says in its ATA IDENTIFY data.

A thin layer over :func:`cardbench.devices.ata.identify_from` (a device, a dump file, or "-" for
``hdparm --Istdout`` text on stdin) and :func:`cardbench.report.identify.render_identify`.
"""

from __future__ import annotations

import json

import click

from cardbench.cli import params
from cardbench.devices.ata import DEFAULT_TIMEOUT, identify_from
from cardbench.report.identify import render_identify


@click.command("identify", epilog=params.examples(
    "cardbench identify /dev/sdb",
    "hdparm --Istdout /dev/sdb | cardbench identify - --json"))
@click.argument("source")
@params.output_options(("table", "json"), format_help="table: the card in words; json: the decoded block.")
@click.option("--timeout", type=click.FloatRange(0.1, 60), default=DEFAULT_TIMEOUT, show_default=True,
              help="Seconds a device may take to answer.")
def identify_cmd(source: str, out, timeout: float) -> None:
    """A CF card's ATA IDENTIFY data: model, serial, sectors and transfer modes.

    SOURCE is a device behind a SAT reader (asked read-only, as root), a file with a dump
    (512 bytes, or the text `hdparm --Istdout` prints), or - to read such text from stdin.
    """
    ident = identify_from(source, timeout)
    if out.json:
        out.echo(json.dumps(ident.to_dict(), indent=2))
        return
    out.echo(render_identify(ident))
