"""`cardbench verify`: is it genuine? (cardbench.verify). Parses its options into a
:class:`~cardbench.verify.options.VerifyOptions` (which holds every rule of which go together),
confirms a destructive test (:func:`cardbench.devices.safety.confirm_destructive`), calls
:func:`~cardbench.verify.options.verify_target` and keeps what it measured
(:func:`cardbench.measured.keep_measured`).

A block device gets the quick probe (seconds; non-destructive unless --destructive) or, with
--full --destructive, a fill of the whole device. A directory on a mounted card gets full mode:
its free space is filled with files and every sector is checked (resumable with --resume).
"""

from __future__ import annotations

import json

import click

from cardbench.cli import params
from cardbench.cli.ui import end_of_document
from cardbench.devices.safety import confirm_destructive
from cardbench.measured import keep_measured
from cardbench.record import check_store
from cardbench.report.verify import render_verify_doc
from cardbench.share import share_options
from cardbench.target import open_target
from cardbench.verify import VerifyOptions, verify_target


@click.command("verify", epilog=params.examples(
    "cardbench verify /dev/sdb      # quick probe, restores what it writes",
    "cardbench verify /media/card   # fills and checks the free space",
    "cardbench verify /dev/sdb --full --destructive --confirm SERIAL"))
@click.argument("target")
@click.option("--full", is_flag=True, help="Fill and check everything (H2testw / f3write+f3read) instead of the "
                                           "quick probe. Needs --destructive on a block device.")
@click.option("--destructive", is_flag=True, help="Do not save and restore what the test overwrites (faster; "
                                                  "destroys the card's data). Asks for confirmation.")
@click.option("--confirm", "confirm_value", metavar="VALUE",
              help="The device's serial (or exact size in bytes if it has none), to allow --destructive "
                   "without a prompt. See `cardbench list`.")
@click.option("--time-budget", callback=params.seconds, metavar="SECONDS",
              help="Quick mode: aim to finish within this time (fewer samples; the result says the confidence).")
@click.option("--resume", is_flag=True, help="Full mode: continue an interrupted run.")
@click.option("--keep-files", is_flag=True, help="Full mode on a directory: leave the test files.")
@click.option("--file-size", callback=params.size, metavar="SIZE", help="Full mode: bytes per file (default 1 GiB, "
                                                                  "smaller on small cards).")
@click.option("--journal", "journal_dir", metavar="DIR",
              help="Where the non-destructive quick mode keeps the bytes it overwrites (another disk; "
                   "default: the user data dir).")
@click.option("--assume-cache", callback=params.size, metavar="SIZE",
              help="Quick mode: the largest cache a fake card may hide data in (default: size/64, 8-256 MiB).")
@click.option("--seed", type=int, help="Make the run reproducible (data, positions, order).")
@params.output_options(("table", "json"), format_help="table: the verdict in words, then the details; json: the "
                                                       "cardbench.verify/1 document.")
@click.option("--mib", is_flag=True, help="Rates in MiB/s and sizes in MiB instead of MB/s and MB.")
@params.db_option
@share_options
@click.option("--no-save", is_flag=True, help="Do not store the result.")
def verify(target, full, destructive, confirm_value, time_budget, resume, keep_files, file_size, journal_dir,
           assume_cache, seed, out, mib, db, no_save):
    """Is the card genuine? Find its real capacity.

    TARGET is a whole block device (/dev/sdX, /dev/mmcblkN: quick probe, or --full --destructive)
    or a directory on the mounted card (full mode: fills its free space with files).
    """
    as_json = out.json
    target = open_target(target, kinds=("directory", "device"), write=True, whole_device=True)
    opts = VerifyOptions(full=full, destructive=destructive, time_budget=time_budget, resume=resume,
                         keep_files=keep_files, file_bytes=file_size, journal_dir=journal_dir,
                         assume_cache_bytes=assume_cache, seed=seed)
    mode = opts.validate(target)
    if not no_save:
        check_store(db)
    if destructive:              # a block device: validate refused it on a directory
        confirm_destructive(target.block_device(), confirm_value, will=(
            "verify will fill all of it and check it back: EVERYTHING ON IT WILL BE DESTROYED" if full else
            "verify will overwrite the blocks it samples and not put them back: what they held is lost"))
    if mode == "full" and not full:
        out.note("A directory: full mode (fills its free space and checks every sector).")

    def show(doc: dict) -> None:
        if as_json:
            out.echo(json.dumps(doc, indent=2))
        else:
            out.echo(render_verify_doc(doc, mib=mib, width=out.width), nl=False)

    # a Ctrl-C or SIGTERM once the check is over waits until its result is stored and shown
    kept = keep_measured(lambda: verify_target(target, opts, progress=out.progress()), db=db, save=not no_save,
                         show=show)
    doc = kept.item
    # the check stopped early (card removed, I/O errors, restore failed): stored as incomplete, and
    # said in one line with the exit code of a card that failed during the test
    stopped = None if doc.get("complete") else " ".join(str(doc.get("error") or "the check stopped before the "
                                                            "end (see the table above); stored as incomplete").split())
    end_of_document(kept.recorded, stopped, saved_line=not (as_json or out.quiet))
