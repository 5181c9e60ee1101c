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
    """Emulate a 2006 drawer of nine CF cards behind one USB 2.0 reader and test each one."""
    from cardbench.cli.ui import RichProgress, said
    from cardbench.record import check_store, record
    from cardbench.demo import DRAWER, FILE_BYTES, RUNS, SPEED_FACTOR, check_environment, run_demo

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
                  f"1 warm-up + {RUNS} runs each, ext4.")
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
        table.add_row(f"{c.brand} {c.capacity_bytes // MB}M", c.label or "", f"{ws / MB:.3f}", f"{w / MB:.3f}",
                      f"{w / ws:.3f}", fmt_x(w), f"{rs / MB:.3f}", f"{r / MB:.3f}", f"{r / rs:.3f}", fmt_x(r),
                      f"{w / MB / SPEED_FACTOR:.3f} / {r / MB / SPEED_FACTOR:.2f}")
        console.print(f"  {c.brand} {c.capacity_bytes // MB}M: write {w / MB:.3f} MB/s (set {ws / MB:.3f}), "
                      f"read {r / MB:.3f} MB/s (set {rs / MB:.3f})")

    run_demo(cards=DRAWER[:cards], progress=RichProgress(), on_result=on_result)
    console.print(table)
    console.print(f"{cards} cards in {time.monotonic() - started:.0f} s; nothing left attached.")
    if not_stored:
        raise not_stored[-1]
    if not no_save:
        console.print(f"stored in {db}: see `cardbench results --db {db}` and `cardbench readers --db {db}`")
