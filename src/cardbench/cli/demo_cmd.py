"""`cardbench demo`: the drawer of emulated CompactFlash cards (cardbench.demo), rendered by
cardbench.report.demo."""

from __future__ import annotations

import os
import time

import click
import platformdirs

from cardbench.cli import params
from cardbench.cli.ui import said
from cardbench.demo import (
    DRAWER,
    READER_CEILING_MB_S,
    RUN_SECONDS,
    RUNS,
    SPEED_FACTOR,
    check_environment,
    reader_answer,
    run_demo,
)
from cardbench.measured import keep_measured
from cardbench.record import check_store
from cardbench.report.demo import FORMATS, card_line, reader_answer_lines, render_demo
from cardbench.units import MB


def default_demo_db() -> str:
    d = platformdirs.user_data_dir("cardbench")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "demo.sqlite3")


@click.command("demo", epilog=params.examples(
    "cardbench demo --cards 3   # three cards, about a minute",
    "cardbench demo --check     # can it run here? (root, FUSE, loop devices)"))
@click.option("--db", help="Where to store the demo results (default: demo.sqlite3 in the user data dir).")
@click.option("--no-save", is_flag=True, help="Do not store the results.")
@click.option("--check", is_flag=True, help="Only check that the demo can run here (root, FUSE, loop devices).")
@click.option("--cards", type=click.IntRange(1, 9), default=9, show_default=True, help="How many of the nine cards.")
@params.output_options(FORMATS, format_help="table: the answer, then set vs measured; json: the results "
                                            "(cardbench.results/1).")
def demo(db, no_save, check, cards, out):
    """Emulate a 2006 drawer of nine CF cards behind one USB 2.0 reader and test each one; then
    answer the survey's question: what is the reader's upper limit?"""
    check_environment()
    if check:
        out.echo("the demo can run here")
        return
    db = db or default_demo_db()
    if not no_save:
        check_store(db)
    out.note(f"Emulating {cards} CompactFlash cards from a 2006 survey (write/read MB/s set as published, "
             f"x{SPEED_FACTOR} so the demo is quick), each card's file sized so that a run lasts at least "
             f"{RUN_SECONDS:g} s, 1 warm-up + {RUNS} runs each, ext4. The reader has a ceiling the demo finds: "
             f"first the fastest card through another reader, then the drawer, then two cards at once.")
    started = time.monotonic()
    not_stored = []

    def keep(c, measure):
        kept = keep_measured(measure, db=db, save=not no_save,
                             show=lambda result: out.note("  " + card_line(c, result)))
        if kept.recorded is not None:
            said(kept.recorded, saved_line=False, end=False)
            if kept.recorded.problem():
                not_stored.append(kept.recorded.problem())
        return kept.item

    probes: list[dict] = []

    def on_evidence(finding):
        probes.append(finding)
        out.note(f"  {' and '.join(finding['cards'])} in two slots of the reader, read at once: "
                 f"{finding['measured']['together_bytes_per_s'] / MB:.3f} MB/s together")

    pairs = run_demo(cards=DRAWER[:cards], progress=out.progress(), keep=keep, on_evidence=on_evidence)
    answer = reader_answer_lines(reader_answer(pairs, probes), SPEED_FACTOR, READER_CEILING_MB_S)
    out.echo(render_demo(pairs, out.fmt, factor=SPEED_FACTOR, width=out.width, answer=answer), nl=False)
    out.note(f"{cards} cards in {time.monotonic() - started:.0f} s; nothing left attached.")
    if not_stored:
        raise not_stored[-1]
    if not no_save:
        out.note(f"stored in {db}: see `cardbench results --db {db}` and `cardbench readers --db {db}`")
