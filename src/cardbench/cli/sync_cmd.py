"""`cardbench sync`: store what the outbox keeps (cardbench.record.sync)."""

from __future__ import annotations

import click

from cardbench.cli import params


@click.command("sync", epilog=params.examples(
    "cardbench sync",
    "cardbench sync --db postgresql://bench@lab/cards"))
@params.db_option
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def sync(db, quiet):
    """Store the results kept in the outbox (measured while the store could not take them).

    Safe to run again or after a sync that was cut short: a result is stored once, by its id.
    Every command that saves does this first, quietly.
    """
    from cardbench.record import sync as sync_outbox
    out = params.Output("table", quiet)
    for line in sync_outbox(db).lines():
        out.echo(line)
