"""`cardbench demo`: the drawer of emulated CompactFlash cards (cardbench.demo)."""

from __future__ import annotations

from cardbench.cli.ui import stdout_console

import os
import sys
import time

import click
from rich.console import Console
from rich.table import Table

from cardbench.units import MB, fmt_x


def default_demo_db() -> str:
    import platformdirs
    d = platformdirs.user_data_dir("cardbench")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, "demo.sqlite3")


@click.command("demo")
@click.option("--db", help="Where to store the demo results (default: demo.sqlite3 in the user data dir).")
@click.option("--no-save", is_flag=True, help="Do not store the results.")
@click.option("--check", is_flag=True, help="Only check that the demo can run here (root, FUSE, loop devices).")
@click.option("--cards", type=click.IntRange(1, 9), default=9, show_default=True, help="How many of the nine cards.")
def demo(db, no_save, check, cards):
    """Emulate a 2006 drawer of nine CF cards behind one USB 2.0 reader and test each one; then
    answer the survey's question: what is the reader's upper limit?"""
    from cardbench.cli.ui import RichProgress, said
    from cardbench.record import check_store, record
    from cardbench.demo import (DRAWER, FAST_READER_NAME, FILE_BYTES, READER_CEILING_MB_S, RUNS, SPEED_FACTOR,
                                check_environment, reader_answer, run_demo)

    check_environment()
    if check:
        click.echo("the demo can run here")
        return
    db = db or default_demo_db()
    if not no_save:
        check_store(db)
    console = stdout_console()
    console.print(f"Emulating {cards} CompactFlash cards from a 2006 survey (write/read MB/s set as published, "
                  f"x{SPEED_FACTOR} so the demo is quick), one {FILE_BYTES // MB} MB file per run, "
                  f"1 warm-up + {RUNS} runs each, ext4. The reader has a ceiling the demo finds: first the "
                  f"fastest card through another reader, then the drawer, then two cards at once.")
    table = Table(title="The drawer: set vs measured, MB/s (10^6 B/s); X = MB/s / 0.15")
    for col in ["card", "label", "write set", "write measured", "ratio", "write X",
                "read set", "read measured", "ratio", "read X", f"measured / {SPEED_FACTOR} (survey scale)"]:
        table.add_column(col, justify="left" if col in ("card", "label") else "right")
    started = time.monotonic()

    not_stored = []

    def on_result(c, result):
        if no_save:
            show(c, result)
            return
        rec = record(result, db, show=lambda: show(c, result))
        said(rec, saved_line=False, end=False)
        if rec.problem():
            not_stored.append(rec.problem())

    def show(c, result):
        w = result.test("seq_write").median_bytes_per_s
        r = result.test("cold_read").median_bytes_per_s
        ws, rs = c.write_mb_s * MB * SPEED_FACTOR, c.read_mb_s * MB * SPEED_FACTOR
        name = f"{c.brand} {c.capacity_bytes // MB}M"
        if result.reader.name == FAST_READER_NAME:
            name += " (other reader)"
        table.add_row(name, c.label or "", f"{ws / MB:.3f}", f"{w / MB:.3f}",
                      f"{w / ws:.3f}", fmt_x(w), f"{rs / MB:.3f}", f"{r / MB:.3f}", f"{r / rs:.3f}", fmt_x(r),
                      f"{w / MB / SPEED_FACTOR:.3f} / {r / MB / SPEED_FACTOR:.2f}")
        console.print(f"  {name}: write {w / MB:.3f} MB/s (set {ws / MB:.3f}), "
                      f"read {r / MB:.3f} MB/s (set {rs / MB:.3f})")

    probes: list[dict] = []

    def on_evidence(finding):
        probes.append(finding)
        console.print(f"  {' and '.join(finding['cards'])} in two slots of the reader, read at once: "
                      f"{finding['measured']['together_bytes_per_s'] / MB:.3f} MB/s together")

    done = run_demo(cards=DRAWER[:cards], progress=RichProgress(), on_result=on_result, on_evidence=on_evidence)
    console.print(table)
    _print_answer(console, reader_answer(done, probes), SPEED_FACTOR, READER_CEILING_MB_S)
    console.print(f"{cards} cards in {time.monotonic() - started:.0f} s; nothing left attached.")
    if not_stored:
        raise not_stored[-1]
    if not no_save:
        console.print(f"stored in {db}: see `cardbench results --db {db}` and `cardbench readers --db {db}`")




def _print_answer(console, answer: dict, factor: float, set_ceiling_mb_s: float) -> None:
    """The survey's open question, answered: the ceiling, the cards it hides, the evidence."""
    from rich.markup import escape
    from cardbench.verdicts.readers import EVIDENCE_KINDS as KIND_WORDS
    entry = answer["entry"]
    ceiling = answer["ceiling_bytes_per_s"]
    console.print()
    if not ceiling or entry is None:
        console.print("The reader's upper limit: not found from these cards (see `cardbench readers`).")
        return
    console.print(f"[bold]The reader's upper limit:[/bold] it caps {entry['direction']}s at {ceiling / MB:.2f} MB/s "
                  f"({ceiling / MB / factor:.2f} MB/s at survey scale; the emulated reader was set to "
                  f"{set_ceiling_mb_s:.2f}), {entry['confidence']}.")
    if answer["hidden"]:
        names = ", ".join(f"{c.brand} {c.capacity_bytes // MB}M (set {s / MB:.2f}, measured "
                          f"{(m or 0) / MB:.2f} MB/s)" for c, s, m in answer["hidden"])
        console.print(f"It hides {len(answer['hidden'])} card(s) that read faster than it: {names}.")
    else:
        console.print("It hides no card of this drawer: none reads faster than it.")
    console.print("The evidence, strongest first:")
    for piece in sorted(entry["pieces"], key=lambda p: {"likely": 0, "possible": 1}.get(p["confidence"], 2)):
        if piece["kind"] == "cluster" and piece["confidence"] == "none":
            continue
        console.print(f"  - {KIND_WORDS.get(piece['kind'], piece['kind'])} ({piece['confidence']}): "
                      f"{escape(piece['evidence'])}", highlight=False)
