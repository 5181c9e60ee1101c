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


from cardbench.verdicts.readers import EVIDENCE_KINDS as KIND_WORDS


def render_table(rows: list[dict[str, Any]], console=None) -> None:
    """Print the readers as a rich table (on stdout unless ``console``), then each reader's
    evidence, piece by piece."""
    from rich.markup import escape
    from rich.table import Table

    console = console or stdout_console()
    if not rows:
        console.print("No results stored yet: nothing to say about readers.")
        return
    for row in rows:
        named = row["ceiling_bytes_per_s"] is not None
        answer = (f"caps {row['direction']}s at {_rate(row['ceiling_bytes_per_s'])} ({row['confidence']}, "
                  f"{KIND_WORDS.get(row.get('kind'), row.get('kind'))})" if named else "no ceiling named")
        console.print(f"[bold]{escape(str(row['name']))}[/bold]: {answer}", highlight=False)
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
        console.print(f"[bold]{escape(str(row['name']))}[/bold], the evidence:", highlight=False)
        for piece in row.get("pieces") or []:
            what = KIND_WORDS.get(piece["kind"], piece["kind"])
            direction = "" if piece["direction"] == "both" else f" {piece['direction']}"
            console.print(f"  - {what}{direction} ({piece['confidence']}): {escape(piece['evidence'])}",
                          highlight=False)
    console.print("MB/s = 10^6 bytes per second. Evidence: the same card faster through another reader (direct); "
                  "cards read at once that do not add up (direct, `cardbench readers --probe`); several different "
                  "cards at one rate (inferred); the link's own limit (an upper bound). \"possible\" means some "
                  "evidence speaks against it.")


def render_probe(finding: dict[str, Any]) -> None:
    """The answer of `readers --probe` first, then the figures."""
    from rich.markup import escape
    console = stdout_console()
    m = finding["measured"]
    if finding["ceiling_bytes_per_s"] is not None:
        console.print(f"The path these cards share caps reads at {_rate(finding['ceiling_bytes_per_s'])} "
                      f"({finding['confidence']}).")
    else:
        console.print(f"No shared ceiling: the path carried {_rate(m['together_bytes_per_s'])} together.")
    for r in m["devices"]:
        console.print(f"  {r['device']}: alone {_rate(r['alone_bytes_per_s'])}, together "
                      f"{_rate(r['together_bytes_per_s'])}", highlight=False)
    console.print(escape(finding["evidence"]), highlight=False)
    console.print("Read-only: O_DIRECT reads of 1 MiB at 4 positions per card, alone and then all at once; "
                  "MB/s = 10^6 bytes per second.")


@click.command("readers")
@params.db_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output format.")
@click.option("--json", "as_json", is_flag=True, help="Short for --format json.")
@click.option("--rejudge", is_flag=True,
              help="First judge the stored results of each named reader again with the ceiling its cards show "
                   "and save them (`cardbench run` does this after every run; this catches up older stores).")
@click.option("--probe", "probe", is_flag=True,
              help="Read the DEVICES (cards in the slots of one reader, or behind one hub) alone and then at "
                   "once, read-only: does the path they share carry their sum?")
@click.option("--seconds", type=click.FloatRange(0.2, 60), default=2.0, show_default=True,
              help="With --probe: seconds each card is read alone.")
@click.argument("devices", nargs=-1)
def readers(db: str | None, fmt: str, as_json: bool, rejudge: bool, probe: bool, seconds: float,
            devices: tuple[str, ...]) -> None:
    """List each card reader in the store with its observed ceiling and the evidence, piece by
    piece, each with its confidence.

    A "likely" ceiling marks the stored results of that reader that sit at it as limited by the
    reader (their label claims above it inconclusive): after each `cardbench run`, or here with
    --rejudge. With --probe DEVICE DEVICE...: read those cards at once (read-only) and say
    whether the reader or hub they share is the ceiling.
    """
    from cardbench.errors import UsageError
    from cardbench.verdicts.readers import judge_shared, reader_ceilings, rejudge_reader

    fmt = "json" if as_json else fmt
    if probe or devices:
        if not probe:
            raise UsageError("devices are read only with --probe (cardbench readers --probe DEVICE DEVICE...)")
        from cardbench.workloads.shared import read_together
        finding = judge_shared(read_together(list(devices), seconds=seconds))
        if fmt == "json":
            click.echo(json.dumps(finding, indent=2, sort_keys=True))
        else:
            render_probe(finding)
        return
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
