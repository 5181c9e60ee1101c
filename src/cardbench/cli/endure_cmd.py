"""`cardbench endure DEVICE`: how long will the card last? (cardbench.endure). Parses the options
into :class:`~cardbench.endure.EndureOptions`, confirms the destruction like ``run --destructive``
(:func:`cardbench.devices.safety.confirm_destructive`), stores the document as each round ends
(the run's one record id: each newer document replaces the one before) and at the end
(:func:`cardbench.measured.keep_measured`), and prints the answer in words and a line per round,
or the ``cardbench.endurance/1`` document (``--json``)."""

from __future__ import annotations

import json
import threading

import click

from cardbench.cli import params
from cardbench.cli.endure_many import endure_cards
from cardbench.cli.ui import end_of_document
from cardbench.devices.safety import confirm_destructive
from cardbench.endure import EndureOptions, resume_endurance, round_line, run_endurance, saved_run_on
from cardbench.errors import UsageError
from cardbench.measured import keep_measured
from cardbench.record import check_store, record
from cardbench.report.endurance import render_endurance
from cardbench.share import share_options
from cardbench.target import open_device_target
from cardbench.units import parse_number

WILL = "an endurance run writes all of it, round after round, until it wears out: EVERYTHING ON IT WILL BE DESTROYED"


def _fraction(ctx, param, value):
    """``--until-bad 1%`` (or ``1``: a percentage) -> 0.01."""
    if value is None:
        return None
    text = str(value).strip().rstrip("%")
    pct = parse_number(text, f"--{param.name.replace('_', '-')}")
    if not 0 < pct <= 100:
        raise click.BadParameter(f"must be more than 0% and at most 100%, got {value}")
    return pct / 100


def _video(ctx, param, value):
    """``--rated-video 5000@26`` (hours of video at Mbit/s) -> (5000.0, 26.0)."""
    if value is None:
        return None
    hours, sep, mbps = str(value).partition("@")
    if not sep:
        raise click.BadParameter(f"give HOURS@MBPS (hours of video at a bitrate in Mbit/s), e.g. 5000@26; "
                                 f"got {value!r}")
    return (parse_number(hours.strip().lower().rstrip("h"), "--rated-video hours"),
            parse_number(mbps.strip().lower().removesuffix("mbps").removesuffix("mbit/s"), "--rated-video Mbit/s"))


@click.command("endure", epilog=params.examples(
    "cardbench endure /dev/sdb                 # until 50% of it is bad",
    "cardbench endure /dev/sdb --rounds 100 --rated-tbw 40",
    "cardbench endure /dev/sdb --hours 72 --until-bad 1%",
    "cardbench endure --resume                 # go on after a kill or a reboot",
    "cardbench endure /dev/sdb /dev/sdc --rounds 500   # several cards at once",
    "cardbench endure --all-cards --share http://station:8080"))
@click.argument("devices", nargs=-1)
@click.option("--all-cards", "all_cards", is_flag=True,
              help="Every card `cardbench list` shows as free to test, all at once (each confirmed).")
@click.option("--rounds", type=click.IntRange(min=1), help="Stop after this many rounds.")
@click.option("--hours", type=float, help="Stop after this many hours of writing and reading.")
@click.option("--until-bad", "until_bad", callback=_fraction, default="50%", show_default=True, metavar="PCT",
              help="Stop once this share of the sectors is bad (e.g. 1%).")
@click.option("--slices", type=click.IntRange(1, 4096), default=16, show_default=True,
              help="Slices of the card, written and read in a new order each round.")
@click.option("--request", "request", callback=params.size, default="1MiB", show_default=True, metavar="SIZE",
              help="Request size (a multiple of 4 KiB).")
@click.option("--rated-tbw", "rated_tbw", type=float, metavar="TB",
              help="The maker's rating in TB written, to set the run against.")
@click.option("--rated-video", "rated_video", callback=_video, metavar="HOURS@MBPS",
              help="The maker's rating as hours of video at a bitrate (endurance cards), e.g. 5000@26.")
@click.option("--timeout", callback=params.seconds, metavar="SECONDS", default="10m", show_default=True,
              help="The longest to wait for a pulled card to come back (then it is called dead).")
@click.option("--resume", is_flag=True, help="Go on with the run saved on this host (its card found by the UUID "
                                             "in its sectors, on any device name).")
@click.option("--restart", is_flag=True, help="Start a new run on a card that has one saved (instead of going "
                                              "on with it).")
@click.option("--confirm", "confirm_value", metavar="VALUE", multiple=True,
              help="The device's serial (or exact size in bytes if it has none), to destroy its data without "
                   "a prompt; once per card with several. See `cardbench list`.")
@params.output_options(("table", "json"), format_help="table: the answer in words and a line per round; json: "
                                                       "the cardbench.endurance/1 document.")
@params.db_option
@share_options
@click.option("--no-save", is_flag=True, help="Do not store the result.")
def endure(devices, all_cards, rounds, hours, until_bad, slices, request, rated_tbw, rated_video, timeout, resume, restart,
           confirm_value, out, db, no_save):
    """How long will the card last? Write all of it and read it back, round after round (destroys its data).

    Every 512-byte sector carries the card's UUID, its address, the round and a check, so each bad
    sector is named: erased, stale (a lost write), misplaced, foreign, corrupt or unreadable. Stops
    at --rounds, --hours, --until-bad (default 50% bad), Ctrl-C, or when the card turns read-only or
    dies. The state is saved on this host after every slice: a killed run goes on with --resume.
    """
    if len(devices) > 1 or all_cards:      # several cards at once: cardbench.endure.many
        if resume or restart:
            raise UsageError("--resume and --restart take one card at a time")
        endure_cards(list(devices), all_cards=all_cards, confirms=tuple(confirm_value), out=out, db=db,
                     save=not no_save, opts=EndureOptions(
                         rounds=rounds, hours=hours, until_bad=until_bad, slices=slices, request_bytes=request,
                         rated_tbw=rated_tbw, rated_video=rated_video, timeout=timeout))
        return
    confirm_value = confirm_value[-1] if confirm_value else None
    if not devices and not resume:
        raise UsageError("give the DEVICE to wear (or --resume)")
    if resume and restart:
        raise UsageError("--resume and --restart cannot go together")
    target = open_device_target(devices[0], whole_device=True) if devices else None
    save = not no_save
    opts = EndureOptions(rounds=rounds, hours=hours, until_bad=until_bad, slices=slices, request_bytes=request,
                         rated_tbw=rated_tbw, rated_video=rated_video, timeout=timeout,
                         say=lambda line: out.note(line, with_json=True), stop=threading.Event())
    opts.events = lambda name, details: _event(out, db, save, name, details)
    opts.validate()
    if save:
        check_store(db)
    if target is not None and not resume and not restart:
        saved = saved_run_on(target)
        if saved is not None:
            resume = True
            out.note(f"{target.path} holds endurance run {saved['card_uuid'][:8]} saved on this host (round "
                     f"{len(saved['rounds']) + 1} under way): going on with it (--restart starts over)",
                     with_json=True)
    if resume:
        if confirm_value is not None and not out.quiet:
            out.note("--resume writes only to the card its state names; --confirm is not needed")

        def measure() -> dict:
            return resume_endurance(target, opts)
    else:
        assert target is not None
        confirm_destructive(target.block_device(), confirm_value, will=WILL)

        def measure() -> dict:
            return run_endurance(target, opts)

    kept = keep_measured(measure, db=db, save=save, show=lambda doc: _show(out, doc))
    end_of_document(kept.recorded, kept.item.get("error"), saved_line=not (out.json or out.quiet))


def _event(out, db, save: bool, name: str, details: dict) -> None:
    """A line per round on stderr (not with --json or --quiet), and the document so far stored."""
    if name == "round":
        out.note(round_line(details["round"]))
        if save:
            rec = record(details["document"], db)
            if rec.problem() is not None and details["round"]["round"] == 1:
                out.note(f"round {details['round']['round']}: {rec.problem()}", with_json=True)
    elif name == "paused":
        out.note(f"paused: {details['why']}")
    elif name == "back":
        out.note(f"back as {details['device']}")


def _show(out, doc: dict) -> None:
    if out.json:
        out.echo(json.dumps(doc, indent=2))
        return
    out.echo(render_endurance(doc).rstrip("\n"))
