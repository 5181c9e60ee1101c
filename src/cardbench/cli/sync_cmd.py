"""`cardbench sync`: store what the outbox keeps (cardbench.record.sync)."""

from __future__ import annotations

import click

from cardbench.cli import params
from cardbench.record import sync as sync_outbox
from cardbench.share import sync_share


@click.command("sync", epilog=params.examples(
    "cardbench sync",
    "cardbench sync --db postgresql://bench@lab/cards"))
@params.db_option
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("--share", "share_url", metavar="URL", help="Send what waits for this station server instead "
              "(with --token TOKEN or CARDBENCH_TOKEN).")
@click.option("--token", envvar="CARDBENCH_TOKEN", metavar="TOKEN", help="The station's token for --share.")
def sync(db, quiet, share_url, token):
    """Store the results kept in the outbox (measured while the store could not take them).

    Safe to run again or after a sync that was cut short: a result is stored once, by its id.
    Every command that saves does this first, quietly.
    """
    out = params.Output("table", quiet)
    if share_url:
        for line in sync_share(share_url, token):
            out.echo(line)
        return
    for line in sync_outbox(db).lines():
        out.echo(line)
