"""``cardbench geometry DEVICE``: the card's AU, page, open AUs and FAT-tuned AUs, and the advice.

A thin layer over :func:`cardbench.geometry.find_geometry`: read-only by default (a mounted card
may be timed); ``--write`` goes through the safety rules (never a mounted, system or read-only
device) and is confirmed by the device's identity, or ``--preserve``d.
"""

from __future__ import annotations

import json

import click

from cardbench.cli import params
from cardbench.cli.ui import said
from cardbench.devices.safety import confirm_destructive
from cardbench.geometry import GeometryOptions, find_geometry
from cardbench.geometry.timing import MAX_AU, REPEATS
from cardbench.geometry.writes import MAX_OPEN
from cardbench.measured import keep_measured
from cardbench.record import check_store
from cardbench.report.geometry import render_geometry
from cardbench.target import open_device_target
from cardbench.units import fmt_size


@click.command("geometry", epilog=params.examples(
    "cardbench geometry /dev/sdb          # read-only: AU and page",
    "cardbench geometry /dev/sdb --json",
    "cardbench geometry /dev/sdb --write --preserve   # + open AUs"))
@click.argument("device")
@click.option("--write", is_flag=True, help="Also find the open AUs and FAT-tuned AUs by writing (destroys data "
                                            "unless --preserve; asks for confirmation).")
@click.option("--preserve", is_flag=True, help="With --write: save every region first and write it back after.")
@click.option("--confirm", "confirm_value", metavar="VALUE",
              help="With --write: the device's serial (or exact size in bytes), to allow it without a prompt.")
@click.option("--max-au", callback=params.size, metavar="SIZE",
              help=f"The largest AU tried (a multiple of 512 KiB; default {fmt_size(MAX_AU, True)}).")
@click.option("--au", callback=params.size, metavar="SIZE",
              help="With --write: the AU to test open AUs with when none is found or declared.")
@click.option("--repeats", type=int, default=REPEATS, show_default=True, help="Tries of each read (the minimum counts).")
@click.option("--max-open", type=int, default=MAX_OPEN, show_default=True, help="With --write: the most open AUs tried.")
@click.option("--journal", "journal_dir", metavar="DIR", help="With --preserve: where the saved bytes go.")
@click.option("--seed", type=int, help="Make the run reproducible (order of the reads and writes).")
@params.output_options(("table", "json"), format_help="table: the answer in words and the advice; json: the "
                                                       "cardbench.geometry/1 document.")
@params.db_option
@click.option("--no-save", is_flag=True, help="Do not store the result.")
def geometry(device, write, preserve, confirm_value, max_au, au, repeats, max_open, journal_dir, seed, out, db,
             no_save):
    """Find the card's allocation unit (AU) and page from read timing, and say how to partition
    and format it. With --write: how many AUs it keeps open, and FAT-tuned first AUs."""
    opts = GeometryOptions(write=write, preserve=preserve, confirm=confirm_value, max_au=max_au or MAX_AU,
                           repeats=repeats, max_open=max_open, au=au, journal_dir=journal_dir, seed=seed,
                           progress=out.progress())
    opts.validate()
    target = open_device_target(device, whole_device=True)
    if not no_save:
        check_store(db)
    if write and not preserve:
        opts.confirm = confirm_destructive(target.block_device(), confirm_value, will=(
            "--write overwrites parts of it (the open-AU and FAT tests); what it overwrites is lost "
            "(--preserve saves it first)"))

    def show(doc: dict) -> None:
        if out.json:
            out.echo(json.dumps(doc, indent=2))
        else:
            out.echo(render_geometry(doc), nl=False)
    kept = keep_measured(lambda: find_geometry(target, opts), db=db, save=not no_save, show=show)
    if kept.recorded is not None:
        said(kept.recorded, saved_line=not (out.json or out.quiet))
