"""`cardbench endure DEVICE DEVICE...` and `cardbench endure --all-cards`: many cards at once.

The `endure` command calls :func:`endure_cards` when it is given more than one device or
``--all-cards``: each card is opened and confirmed like ``run --destructive`` (one ``--confirm``
value per card, in any order, each matching one card's serial or size; else asked at the
terminal, card by card), then :func:`cardbench.endure.many.endure_many` runs them all, with one
live table (stderr, at a terminal) and each round stored as it ends (store, else outbox; shared
with ``--share``, and each card's progress sent to the server's live page).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.live import Live

from cardbench.cli.ui import said
from cardbench.devices import list_devices
from cardbench.devices.safety import confirm_destructive
from cardbench.endure import EndureOptions
from cardbench.endure.many import CardRow, ManyResult, endure_many
from cardbench.errors import DeviceFault, Interrupted, SafetyRefusal, UsageError
from cardbench.record import check_store, record
from cardbench.report.devices import is_card
from cardbench.report.endurance import live_table, render_endurance
from cardbench.report.terminal import terminal_width, to_text
from cardbench.share import LiveCards, live_cards
from cardbench.target import DeviceTarget, open_device_target

WILL = "an endurance run writes all of it, round after round, until it wears out: EVERYTHING ON IT WILL BE DESTROYED"


def free_cards() -> list[str]:
    """The cards `cardbench list` shows as free to test: a card or stick (USB reader, SD slot,
    removable), with a medium, not the system's, not mounted or in use."""
    return [d.path for d in list_devices() if is_card(d) and not d.system and d.medium_present
            and not d.in_use_reason]


def open_cards(devices: list[str], all_cards: bool) -> list[DeviceTarget]:
    """The whole devices to wear (``--all-cards``: :func:`free_cards`), each named once."""
    if all_cards:
        if devices:
            raise UsageError("give DEVICEs or --all-cards, not both")
        devices = free_cards()
        if not devices:
            raise UsageError("--all-cards: no card is free to test (see `cardbench list`: a card that is not "
                             "mounted, in use or the system's)")
    targets = [open_device_target(d, whole_device=True) for d in devices]
    seen: dict[str, str] = {}
    for t in targets:
        dev = t.block_device()
        key = getattr(dev, "devno", None) or t.path
        if key in seen:
            raise UsageError(f"{t.path} is {seen[key]} again: give each card once")
        seen[key] = t.path
    return targets


def confirm_all(targets: list[DeviceTarget], given: tuple[str, ...]) -> None:
    """Confirm every card like ``run --destructive`` before any is written: with ``given`` values
    (``--confirm``, one per card, any order), each card takes the one that is its identity;
    without, each is asked at the terminal in turn. A card no value confirms: SafetyRefusal
    (one line, nothing written to any card)."""
    for t in targets:
        if not given:
            confirm_destructive(t.block_device(), None, will=WILL)
            continue
        refusal: SafetyRefusal | None = None
        for value in given:
            try:
                confirm_destructive(t.block_device(), value, will=WILL)
                break
            except SafetyRefusal as e:
                refusal = e
        else:
            assert refusal is not None
            raise refusal


def _live_event(live: LiveCards, row: CardRow) -> None:
    """A card's row as the live page's event (its ``kind`` says endurance; done/total: the phase
    under way, in bytes)."""
    if row.state in ("write", "read"):
        task = f"round {row.round}, {row.phase}"
    elif row.state == "paused":
        task = f"round {row.round}: paused ({row.error or 'the card went away'})"
    elif row.state in ("ended", "failed"):
        task = f"ended: {row.ended or row.error or row.state}"
    else:
        task = "starting (the fake-capacity probe first)"
    running = row.state in ("write", "read")
    live.update(row.key, row.label, task, identity=row.identity, kind="endurance", round=row.round,
                done=row.done_bytes if running else None, total=row.round_bytes if running else None,
                bytes_written=row.bytes_written, rate_bytes_per_s=row.rate_bytes_per_s,
                bad_fraction=row.bad_fraction, eta_s=row.eta_s,
                ended=(row.ended or "failed") if row.state in ("ended", "failed") else None)


def endure_cards(devices: list[str], *, all_cards: bool, confirms: tuple[str, ...], opts: EndureOptions, out: Any,
                 db: Any, save: bool = True) -> ManyResult:
    """The whole of `cardbench endure` on several cards (see the module): returns what
    :func:`endure_many` did, after printing each card's answer (or, with ``--json``, a JSON list
    of the ``cardbench.endurance/1`` documents, one per card in the order given). Raises
    Interrupted (exit 130) after Ctrl-C, once every document is stored; DeviceFault when a card's
    run failed."""
    opts.validate()
    targets = open_cards(list(devices), all_cards)
    confirm_all(targets, confirms)
    if save:
        check_store(db)
    live = live_cards()
    warnings: list[str] = []
    problems: list[Any] = []

    def keep(doc: dict) -> None:
        rec = record(doc, db)
        warnings.extend(w for w in rec.warnings if w not in warnings)
        if rec.problem() is not None:
            problems.append(rec)

    tty = not (out.quiet or out.json) and sys.stderr.isatty()
    console = Console(file=sys.stderr, width=terminal_width(sys.stderr)) if tty else None
    holder: dict[str, Any] = {}

    def show(rows: list[CardRow]) -> None:
        table = live_table([r.as_dict() for r in rows], width=console.width if console else 80)
        if "live" in holder:
            holder["live"].update(table)

    def said_line(line: str) -> None:
        if not tty:
            out.note(line)
        elif "live" in holder:
            holder["live"].console.print(line, markup=False, highlight=False)

    def on_round(row: CardRow) -> None:
        if live is not None:
            _live_event(live, row)

    try:
        if console is not None:
            with Live(console=console, refresh_per_second=2, transient=True) as lv:
                holder["live"] = lv
                result = endure_many(targets, opts, save=keep if save else None, live=on_round, show=show,
                                     say=said_line)
        else:
            result = endure_many(targets, opts, save=keep if save else None, live=on_round, say=said_line)
    finally:
        if live is not None:
            live.close()
    _print(out, result)
    for w in warnings:
        out.note(f"warning: {w}", with_json=True)
    if problems:
        said(problems[-1], saved_line=False)
    if result.interrupted:
        raise Interrupted("interrupted; each card's state is kept: `cardbench endure --resume DEVICE` goes on")
    failed = [r for r in result.rows if r.state == "failed"]
    if failed:
        raise DeviceFault("; ".join(f"{r.device}: {r.error}" for r in failed))
    return result


def _print(out: Any, result: ManyResult) -> None:
    if out.json:
        out.echo(json.dumps(result.docs, indent=2))
        return
    for row in result.rows:
        if row.doc is not None:
            out.echo(f"{row.device}: " + render_endurance(row.doc).rstrip("\n"))
        else:
            out.echo(f"{row.device}: no document ({row.error or 'it did not start'})")
    width = min(terminal_width(), 100)
    out.echo(to_text([live_table([r.as_dict() for r in result.rows], width=width)], width), nl=False)
