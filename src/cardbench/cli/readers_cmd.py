"""``cardbench readers``: each reader seen in the store, with the ceiling its cards suggest.

A thin layer over :func:`cardbench.verdicts.readers.reader_ceilings` on ``open_store(db).results()``;
registered on the main group as ``readers``. ``--format json`` prints the list of reader entries
exactly as reader_ceilings returns them (bytes/s figures, findings per direction). ``--rejudge``
first runs :func:`cardbench.verdicts.readers.rejudge_reader` for every reader in the store.
"""

from __future__ import annotations

from cardbench.cli.ui import stdout_console

import json
from typing import Any

import click

from cardbench.cli import params
from cardbench.units import MB


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value / MB:.3g} MB/s"


def render_table(rows: list[dict[str, Any]]) -> None:
    """Print the readers as a rich table on stdout."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = stdout_console()
    if not rows:
        console.print("No results stored yet: nothing to say about readers.")
        return
    table = Table(title="Readers and the ceilings their cards suggest")
    table.add_column("Reader")
    table.add_column("Cards", justify="right")
    table.add_column("Ceiling", justify="right")
    table.add_column("Direction")
    table.add_column("At ceiling", justify="right")
    table.add_column("Confidence")
    for row in rows:
        named = row["ceiling_bytes_per_s"] is not None
        table.add_row(escape(str(row["name"])), str(row["cards"]), _rate(row["ceiling_bytes_per_s"]),
                      row["direction"] if named else "-",
                      f"{row['cards_at_ceiling']} of {row['cards']}" if named else "-", row["confidence"])
    console.print(table)
    for row in rows:
        console.print(f"[bold]{escape(str(row['name']))}[/bold]: {escape(row['evidence'])}", highlight=False)
    console.print("MB/s = 10^6 bytes per second. A ceiling is inferred from several different cards hitting the "
                  "same rate through one reader; \"possible\" means some evidence speaks against it (see evidence).")


@click.command("readers")
@params.db_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output format.")
@click.option("--rejudge", is_flag=True,
              help="First judge the stored results of each named reader again with the ceiling its cards show "
                   "and save them (`cardbench run` does this after every run; this catches up older stores).")
def readers(db: str | None, fmt: str, rejudge: bool) -> None:
    """List each card reader in the store with its observed ceiling and the evidence.

    A "likely" ceiling marks the stored results of that reader that sit at it as limited by the
    reader (their label claims above it inconclusive): after each `cardbench run`, or here with
    --rejudge.
    """
    from cardbench.verdicts.readers import reader_ceilings, rejudge_reader

    with params.open_to_read(db) as store:
        if rejudge:
            changed = 0
            for identity in dict.fromkeys(r.reader.identity() for r in store.results()):
                changed += len(rejudge_reader(store, identity))
            click.echo(f"{changed} stored result(s) judged again and saved", err=True)
        results = store.results()
    rows = reader_ceilings(results)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
    else:
        render_table(rows)
