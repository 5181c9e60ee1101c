"""`cardbench share`: send what a local store holds to a station server (cardbench.share)."""

from __future__ import annotations

import click

from cardbench.cli import params
from cardbench.cli.ui import error_line
from cardbench.share import share_store


@click.command("share", epilog=params.examples(
    "cardbench share --share http://lab:8080 --token cbt_...",
    "cardbench share --since 7d   # with CARDBENCH_SHARE and CARDBENCH_TOKEN set"))
@params.db_option
@click.option("--share", "url", envvar="CARDBENCH_SHARE", metavar="URL", help="The station server.")
@click.option("--token", envvar="CARDBENCH_TOKEN", metavar="TOKEN", help="This station's token.")
@click.option("--card", help="Only the records of matching cards.")
@click.option("--since", help="Only records made since, e.g. 7d or 2024-05-01.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
def share(db, url, token, card, since, quiet):
    """Send what the local store holds to a station server; what the server holds already (same
    id) is stored once, so sharing again is safe."""
    out = params.Output("table", quiet)
    done = share_store(db, url, token, card=card, since=since)
    out.echo(f"shared {done.sent} record{'s' if done.sent != 1 else ''} with {url}")
    for w in done.refused:
        error_line(f"warning: {w}")
