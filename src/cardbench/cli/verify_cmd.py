"""`cardbench verify`: is it genuine? (cardbench.verify). Parses its options into a
:class:`~cardbench.verify.options.VerifyOptions` (which holds every rule of which go together),
confirms a destructive test with the user, and calls :func:`~cardbench.verify.options.verify_target`.

A block device gets the quick probe (seconds; non-destructive unless --destructive) or, with
--full --destructive, a fill of the whole device. A directory on a mounted card gets full mode:
its free space is filled with files and every sector is checked (resumable with --resume).
"""

from __future__ import annotations

import json
import sys

import click

from cardbench.cli import params
from cardbench.cli.ui import said
from cardbench.devices.safety import check_destructive, confirm, identity_kind
from cardbench.errors import DeviceFault, Interrupted, SafetyRefusal
from cardbench.record import check_store, record
from cardbench.report.verify import render_verify_doc
from cardbench.share import share_options
from cardbench.signals import signals_held
from cardbench.target import open_target
from cardbench.units import fmt_size
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
        _confirm(target, confirm_value, as_json)
    if mode == "full" and not full:
        out.note("A directory: full mode (fills its free space and checks every sector).")
    try:
        doc = verify_target(target, opts, progress=out.progress())
    except (Interrupted, KeyboardInterrupt) as e:
        partial = e.doc if isinstance(e, Interrupted) else None
        if partial is not None and not no_save:
            said(record(partial, db), saved_line=False, end=False)
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted("interrupted; cleanup has run") from None
        raise
    # the check is over: a Ctrl-C or SIGTERM from here on waits until the result is stored and
    # shown, then ends the command (exit 130) without losing the result
    failed = not doc.get("complete")

    def show() -> None:
        if as_json:
            out.echo(json.dumps(doc, indent=2))
        else:
            out.echo(render_verify_doc(doc, mib=mib, width=out.width), nl=False)

    with signals_held() as sigs:
        rec = None if no_save else record(doc, db, show=show)
        if no_save:
            show()
    if rec is not None and (failed or sigs):
        said(rec, saved_line=False, end=False)    # then the error that ends the command
    if sigs:
        raise Interrupted("interrupted after the check had finished; its result was "
                          + ("saved" if rec and rec.stored else "kept in the outbox" if rec and rec.kept
                             else "shown above"))
    if failed:
        # the check stopped early (card removed, I/O errors, restore failed): stored as incomplete,
        # and said in one line with the exit code of a card that failed during the test
        raise DeviceFault(" ".join(str(doc.get("error") or "the check stopped before the end (see the "
                                       "table above); stored as incomplete").split()))
    if rec is not None:
        said(rec, saved_line=not (as_json or out.quiet))


def _confirm(target, value: str | None, quiet: bool) -> None:
    """Destructive mode: the safety rules now, then the identity typed by the user (or --confirm)."""
    path = target.path
    dev = check_destructive(target.block_device())
    if value is None:
        if not sys.stdin.isatty():
            raise SafetyRefusal(f"not confirmed: pass --confirm with the {identity_kind(dev)} of {path} "
                                "(see `cardbench list`) to allow destroying its data")
        what = " ".join(x for x in (dev.vendor, dev.model) if x) or "device"
        click.echo(f"{path}: {what}, {fmt_size(dev.size)} ({dev.size} bytes). EVERYTHING ON IT WILL BE "
                   "DESTROYED.", err=True)
        value = click.prompt(f"Type its {identity_kind(dev)} to go on", default="", show_default=False,
                             err=True)
    confirm(dev, value)
