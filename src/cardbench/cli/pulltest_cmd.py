"""`cardbench pulltest DEVICE`: does the card keep what it acknowledged? (cardbench.pulltest).
Parses the options into :class:`~cardbench.pulltest.PullOptions`, confirms the destruction like
``run --destructive`` (:func:`cardbench.devices.safety.confirm_destructive`) and prints the
``cardbench.pulltest/1`` document (``--json``) or its answer in words."""

from __future__ import annotations

import json

import click

from cardbench.cli import params
from cardbench.cli.ui import end_of_document
from cardbench.devices.safety import confirm_destructive
from cardbench.measured import keep_measured
from cardbench.pulltest import MIXES, PowerSwitch, PullOptions, resume_pulltest, run_pulltest
from cardbench.record import check_store
from cardbench.target import open_device_target


@click.command("pulltest", epilog=params.examples(
    "cardbench pulltest /dev/sdb                # pull it out when asked",
    "cardbench pulltest /dev/sdb --cycles 10 --after 5s",
    "cardbench pulltest /dev/sdb --cycles 20 --power-cut 1-1:2 --no-prompt",
    "cardbench pulltest /dev/sdc --resume       # verify what the log kept"))
@click.argument("device")
@click.option("--cycles", type=click.IntRange(min=1), default=1, show_default=True,
              help="Pulls to make: write, pull, find the card again, verify.")
@click.option("--after", callback=params.seconds_or_zero, metavar="SECONDS",
              help="Pull (or cut the power) this long after writing starts (default: ask at once).")
@click.option("--no-prompt", is_flag=True, help="Ask nothing: write until the card goes away (a script or a "
                                                "hub pulls it), then wait for it to come back.")
@click.option("--timeout", callback=params.seconds, metavar="SECONDS", default="10m", show_default=True,
              help="The longest to wait for the pull, and for the card to come back.")
@click.option("--power-cut", "power_cut", metavar="HUB:PORT",
              help="Cut the card's power with uhubctl (a hub with per-port power switching), --after "
                   "into each cycle (default 5 s); switch it on again yourself or with uhubctl -a on.")
@click.option("--mix", type=click.Choice(MIXES), default="both", show_default=True,
              help="Records: small (4 KiB, scattered), large (1 MiB, sequential) or both.")
@click.option("--resume", is_flag=True, help="Verify the pull the host's log kept (the card found by its "
                                             "UUID), then the cycles left.")
@click.option("--confirm", "confirm_value", metavar="VALUE",
              help="The device's serial (or exact size in bytes if it has none), to destroy its data without "
                   "a prompt. See `cardbench list`.")
@params.output_options(("table", "json"), format_help="table: the answer in words and a line per pull; json: "
                                                       "the cardbench.pulltest/1 document.")
@params.db_option
@click.option("--no-save", is_flag=True, help="Do not store the result.")
def pulltest(device, cycles, after, no_prompt, timeout, power_cut, mix, resume, confirm_value, out, db, no_save):
    """Does the card keep what it acknowledged? Pull it out while it writes (destroys its data).

    Writes numbered records (each flushed, each logged on this host before and after), asks you to
    pull the card out (or cuts its power), waits for it to come back on any device name, finds it
    by the UUID written on it, reads everything back and says which acknowledged writes it lost.
    """
    target = open_device_target(device, whole_device=True)
    switch = PowerSwitch(power_cut) if power_cut else None
    opts = PullOptions(cycles=cycles, after=after, prompt=not no_prompt, timeout=timeout, mix=mix,
                       cut=switch.cut if switch else None, restore=switch.restore if switch else None,
                       say=lambda line: out.note(line, with_json=True),
                       events=lambda name, details: _progress(out, name, details),
                       extra={"power_cut": power_cut} if power_cut else {})
    opts.validate()
    if not no_save:
        check_store(db)
    if resume:
        if confirm_value is not None and not out.quiet:
            out.note("--resume writes only to the card its log names; --confirm is not needed")

        def measure() -> dict:
            return resume_pulltest(target, opts, cycles=cycles if cycles > 1 else None)
    else:
        confirm_destructive(target.block_device(), confirm_value,
                            will="a pull test writes all over it: EVERYTHING ON IT WILL BE DESTROYED")

        def measure() -> dict:
            return run_pulltest(target, opts)

    # stored (else kept in the outbox) and shown; a Ctrl-C once it is over waits for both
    kept = keep_measured(measure, db=db, save=not no_save, show=lambda doc: _show(out, doc))
    end_of_document(kept.recorded, kept.item.get("error"), saved_line=not (out.json or out.quiet))


def _show(out, doc: dict) -> None:
    if out.json:
        out.echo(json.dumps(doc, indent=2))
        return
    out.echo(doc["answer"])
    for p in doc["pulls"]:
        out.echo("  " + _pull_line(p))
    kernel = doc.get("kernel") or {}
    if kernel.get("flush_sent") is False:
        out.echo("  note: the kernel sends this card no flush (write_cache: write through"
                 + (f", {kernel['cache_type']}" if kernel.get("cache_type") else "")
                 + "): a write's completion is its only promise")


def _pull_line(p: dict) -> str:
    ages = p["lost_ages_s"]
    return (f"pull {p['cycle']}: {p['acknowledged']:,} acknowledged: {p['intact']:,} intact, {p['lost']:,} lost, "
            f"{p['torn']:,} torn; {p['in_flight']} in flight"
            + (f" ({p['in_flight_torn']} torn)" if p["in_flight_torn"] else "")
            + (f"; old data damaged: {p['old_damaged']:,}" if p["old_damaged"] else "")
            + (f"; lost writes acknowledged {min(ages):.2f}-{max(ages):.2f} s before the pull" if ages else ""))


def _progress(out, name: str, details: dict) -> None:
    """Lines on stderr as the test goes (not with --json or --quiet)."""
    if name == "setup":
        out.note(f"Set up: {details['records']:,} records written, flushed and read back.")
    elif name == "pulled":
        out.note(f"The card went away (cycle {details['cycle']}, {details['acknowledged']:,} writes acknowledged).")
    elif name == "back":
        out.note(f"It is back as {details['device']}; reading it.")
    elif name == "verified":
        out.note(_pull_line(details["result"]))
