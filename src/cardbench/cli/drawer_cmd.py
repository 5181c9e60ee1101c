"""``cardbench drawer``: a whole drawer of cards in one sitting (cardbench.drawer.DrawerSession)."""

from __future__ import annotations

import json
import sys
import textwrap

import click

from cardbench.cli import params
from cardbench.cli.ui import RichProgress
from cardbench.drawer import CardDone, DrawerEvent, DrawerOptions, DrawerSession
from cardbench.errors import Interrupted, UsageError
from cardbench.record import check_store
from cardbench.report.drawer import render
from cardbench.report.readers import render_readers
from cardbench.report.session import card_lines, event_lines
from cardbench.report.terminal import terminal_width
from cardbench.result import Card
from cardbench.share import live_progress, share_options
from cardbench.units import UnitError, fmt_size, parse_size
from cardbench.verdicts.labels import parse_label


def _wrap(text: str) -> str:
    """At most 80 columns; continuation lines indented like the first, plus two."""
    lead = len(text) - len(text.lstrip(" "))
    return textwrap.fill(text, 80, subsequent_indent=" " * (lead + 2), break_on_hyphens=False,
                         break_long_words=False)


def _say(text: str) -> None:
    click.echo(_wrap(text), err=True)


def _out(text: str) -> None:
    click.echo(_wrap(text))


def _asker(no_prompt: bool):
    """Ask a new card's name, brand, capacity and label once (None: never ask)."""
    if no_prompt or not sys.stdin.isatty():
        return None

    def ask(probe: Card, dev) -> Card:
        _say(f"A new card in {dev.path} ({fmt_size(dev.size)}{', ' + probe.model if probe.model else ''}); "
             "Enter leaves a field empty.")
        card = Card(serial=probe.serial, model=probe.model, capacity_bytes=probe.capacity_bytes,
                    serial_source=probe.serial_source, sd=probe.sd, ata=probe.ata)
        card.brand = click.prompt("  brand", default="", show_default=False, err=True).strip() or None
        card.name = click.prompt("  name", default="", show_default=False, err=True).strip() or None
        cap = click.prompt("  capacity printed on it (e.g. 256MB)", default="", show_default=False, err=True).strip()
        if cap:
            try:
                card.capacity_bytes = parse_size(cap)
            except UnitError as e:
                _say(f"  {e}; the device's size is kept")
        label = click.prompt("  speed marks on the label (e.g. 4X, C10 U1)", default="", show_default=False,
                             err=True).strip()
        if label:
            try:
                parse_label(label)
                card.label = label
            except UsageError as e:
                _say(f"  {e.message}; no label kept")
        return card
    return ask


@click.command("drawer", epilog=params.examples(
    "cardbench drawer              # insert cards one by one; Ctrl-C ends",
    "cardbench drawer --cards 3 --json > session.jsonl"))
@click.option("--profile", type=click.Choice(["classic", "app", "matrix"]), default="classic", show_default=True,
              help="Extra tests for a mounted card, as in `cardbench run`.")
@click.option("--runs", type=click.IntRange(1, 100), default=3, show_default=True, help="Timed runs per test.")
@click.option("--no-prompt", is_flag=True, help="Never ask for a new card's name, brand, capacity and label.")
@click.option("--include-loop", is_flag=True, help="Watch loop devices too (emulated cards, disk images).")
@click.option("--loop-under", metavar="DIR",
              help="With --include-loop: only loop devices whose backing file lies under DIR.")
@click.option("--settle", type=click.FloatRange(0, 60), default=3.0, show_default=True,
              help="Seconds a new card is given to be automounted before it is tested unmounted.")
@click.option("--cards", "max_cards", type=click.IntRange(1, 10000),
              help="End the session after this many cards (default: at Ctrl-C).")
@click.option("--present", "test_present", is_flag=True,
              help="Test the cards already in when the session starts, first.")
@click.option("--no-verify", is_flag=True, help="Unmounted cards: skip the quick fake-capacity verify.")
@click.option("--reader", "reader_name", help="Name of the card reader (for readers cardbench cannot identify).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON line per card as it finishes (schema cardbench.drawer/1) on stdout.")
@click.option("--mib", is_flag=True, help="Show rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
@params.db_option
@share_options
@click.option("--no-save", is_flag=True, help="Do not store the results.")
def drawer(profile, runs, no_prompt, include_loop, loop_under, settle, max_cards, test_present, no_verify, reader_name,
           as_json, mib, db, no_save):
    """Watch for cards until Ctrl-C and test each one as it goes in: identify it, recall or ask
    its name, test it (mounted: `run` on its mount; not mounted: read-only `run DEVICE` plus the
    quick `verify`, which restores what it writes), store it, and say when it can be swapped.
    Ends with this session's drawer table and the reader verdict."""
    if loop_under and not include_loop:
        raise UsageError("--loop-under only narrows --include-loop")
    if not no_save:
        check_store(db)   # a bad --db fails before any card is touched
    unit = "MiB/s" if mib else "MB/s"

    def on_event(event: DrawerEvent) -> None:
        if isinstance(event, CardDone):
            if as_json:
                click.echo(json.dumps(event.outcome.to_json(), ensure_ascii=False))
                sys.stdout.flush()
            for line in card_lines(event.outcome, event.count, unit):
                (_say if as_json else _out)(line)
        for line in event_lines(event):
            _say(line)

    session = DrawerSession(DrawerOptions(
        profile=profile, runs=runs, include_loop=include_loop, loop_under=loop_under, settle=settle,
        verify=not no_verify, db=db, save=not no_save, reader_name=reader_name, ask=_asker(no_prompt),
        test_present=test_present,
        progress=live_progress(RichProgress(enabled=None)), on_event=on_event))
    cut_short = None
    try:
        session.run(max_cards=max_cards)
    except (KeyboardInterrupt, Interrupted) as e:
        cut_short = e
    _summary(session, unit, as_json)
    if session.not_stored:
        _say(f"{len(session.not_stored)} card(s) not stored (said above with each card).")
    if cut_short is None and session.not_stored:
        raise session.not_stored[-1]
    if cut_short is not None and session.cut_short:
        saved = any(o.device == session.cut_short and o.saved for o in session.outcomes)
        raise Interrupted(f"interrupted while testing {session.cut_short}; its cleanup has run and its partial "
                          "result is " + ("stored as incomplete" if saved else "not stored"))


def _summary(session, unit: str, as_json: bool) -> None:
    """This session's drawer table, then the reader verdict (on stderr with --json)."""
    out = (lambda text: click.echo(text, err=True)) if as_json else click.echo
    results = session.results()
    if not results:
        out("Session over: no card was tested.")
        return
    out(f"Session over: {len(results)} card(s) tested.")
    width = terminal_width(sys.stderr if as_json else sys.stdout)
    out(render(results, "table", rate_unit=unit, width=width).rstrip())
    out(render_readers(session.reader_verdict(), "table", width=width).rstrip())
