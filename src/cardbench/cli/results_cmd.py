"""Commands over stored results: results, compare, report, import, export.

Each is a thin layer: parse options, call cardbench.store / cardbench.report / cardbench.importers,
print. Bad input raises cardbench.errors exceptions (one line; the main group prints them).
The database is ``--db`` (a SQLite path, ``sqlite:///path`` or ``postgresql://...``), else the
``CARDBENCH_DB`` environment variable, else the default file in the user data directory. The
commands that only read (and ``readers``) open it with ``params.open_to_read``: a named file
that does not exist is refused, not created empty.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import click

from cardbench.cli import params
from cardbench.errors import UsageError
from cardbench.importers import FORMATS as IMPORT_FORMATS

FORMATS = ["table", "md", "csv", "json"]


def _filters(f):
    f = click.option("--card", metavar="TEXT", help="Cards matching every word (brand, name, label, serial; "
                                                    "sizes like 64GB match the capacity) or a card identity.")(f)
    f = click.option("--reader", metavar="TEXT", help="Readers matching every word, or a reader identity.")(f)
    f = click.option("--since", metavar="WHEN", help="Runs started at or after: 2024-05-01, 2024-05-01T14:30, 7d, 12h.")(f)
    f = click.option("--until", metavar="WHEN", help="Runs started at or before (same forms as --since).")(f)
    f = click.option("--test", "test_name", metavar="NAME", help="Runs that have this test (e.g. cold_read; "
                                                                  "* is a wildcard).")(f)
    f = click.option("--complete/--incomplete", "complete", default=None,
                     help="Only complete runs, or only incomplete (interrupted) ones (default: both).")(f)
    return f


def _width() -> int:
    return max(100, shutil.get_terminal_size((150, 40)).columns) if sys.stdout.isatty() else 150


def _unit(mib: bool) -> str:
    return "MiB/s" if mib else "MB/s"


def _query(store, card, reader, since, until, test_name, complete, sort="started"):
    return store.results(card=card, reader=reader, since=since, until=until, test=test_name, complete=complete,
                         order_by=sort)


@click.command("results")
@params.db_option
@_filters
@click.option("--sort", default="started", show_default=True, metavar="KEY",
              help="started, card, reader, write, read, source or id; a leading '-' reverses (e.g. -write).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--mib", is_flag=True, help="Rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
@click.option("--id", "run_id", metavar="RUN_ID", help="Show one run in detail (every run, median, spread, 95% CI).")
def results(db, card, reader, since, until, test_name, complete, sort, fmt, mib, run_id):
    """List stored results as the drawer table: one row per run."""
    from cardbench.report import render, render_result

    with params.open_to_read(db) as store:
        if run_id:
            click.echo(render_result(store.get(run_id), fmt, _unit(mib), width=_width()), nl=False)
            return
        found = _query(store, card, reader, since, until, test_name, complete, sort)
        verify_docs = store.verify_results(card=card, reader=reader) if fmt in ("table", "md") else []
    click.echo(render(found, fmt, _unit(mib), width=_width()), nl=False)
    if verify_docs:
        from cardbench.report.verify import render_verify
        click.echo(render_verify(verify_docs, fmt, width=_width()), nl=False)
    from cardbench.record import waiting_notice
    notice = waiting_notice(db)
    if notice:
        from cardbench.cli.ui import error_line
        error_line(notice)


@click.command("compare")
@click.argument("a")
@click.argument("b")
@params.db_option
@click.option("--by", type=click.Choice(["auto", "run", "card", "reader"]), default="auto", show_default=True,
              help="How to read A and B; auto tries a run id, then a card, then a reader.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--mib", is_flag=True, help="Rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
def compare(a, b, db, by, fmt, mib):
    """Compare two cards, readers or runs side by side, test by test.

    The difference is B's mean rate minus A's; it is beyond the spread of the runs when the two
    95% confidence intervals do not overlap.
    """
    from cardbench.report.compare import compare as compare_groups
    from cardbench.report.compare import render_compare, resolve_group

    with params.open_to_read(db) as store:
        label_a, group_a = resolve_group(store, a, by)
        label_b, group_b = resolve_group(store, b, by)
    click.echo(render_compare(compare_groups(group_a, group_b), label_a, label_b, fmt, _unit(mib), width=_width()),
               nl=False)


@click.command("report")
@params.db_option
@_filters
@click.option("--html", "html_file", type=click.Path(dir_okay=False, writable=True),
              help="Write one self-contained HTML file (table, charts, readers, verify verdicts).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="md", show_default=True,
              help="Format printed when --html is not given (md is ready for a forum post).")
@click.option("--sort", default="started", show_default=True, metavar="KEY", help="As for `results`.")
@click.option("--mib", is_flag=True, help="Rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
def report(db, card, reader, since, until, test_name, complete, html_file, fmt, sort, mib):
    """A report of stored results: Markdown (default) or one HTML file with charts."""
    from cardbench.report import render

    with params.open_to_read(db) as store:
        found = _query(store, card, reader, since, until, test_name, complete, sort)
        verify = store.verify_results(card=card, reader=reader) if html_file else []
    if html_file:
        from cardbench.report.html import render_html
        _write_atomically(Path(html_file), render_html(found, verify, rate_unit=_unit(mib)))
        click.echo(f"wrote {html_file} ({len(found)} run{'s' if len(found) != 1 else ''})", err=True)
        return
    click.echo(render(found, fmt, _unit(mib), width=_width()), nl=False)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@params.db_option
@click.option("--fio", "as_fio", is_flag=True, help="FILE is fio --output-format=json output.")
@click.option("--format", "fmt", type=click.Choice(list(IMPORT_FORMATS)),
              help="The file's format (default: recognised from its content).")
@click.option("--file-size", metavar="SIZE",
              help="Size of the file a survey's write times refer to: 42MB = 42,000,000 B (the default), "
                   "42MiB = 44,040,192 B. A '# file size: ...' line in the file also sets it.")
@click.option("--reader", "reader_name", metavar="NAME", help="The reader, for rows that do not name one.")
@click.option("--card", "card_name", metavar="NAME", help="The card of a fio run.")
@click.option("--label", metavar="LABEL", help="The label of the card of a fio run (e.g. '133x').")
@click.option("--dry-run", is_flag=True, help="Read and check only: print what was found and every flag; save nothing.")
def import_cmd(file, db, as_fio, fmt, file_size, reader_name, card_name, label, dry_run):
    """Import results: fio JSON/terse, KDiskMark, CrystalDiskMark, f3, H2testw, hdparm, dd, a
    classic survey table, a legacy CSV or a cardbench export.

    Rates are stored in bytes/s with the tool's unit convention applied (and said); every printed
    figure that disagrees with its own raw data is flagged; f3 and H2testw logs become verify
    verdicts. Importing a file again replaces its earlier import.
    """
    from cardbench.importers import import_file
    from cardbench.result import Card

    if as_fio:
        if fmt and fmt != "fio":
            raise UsageError(f"--fio and --format {fmt} contradict each other")
        fmt = "fio"
    card = Card(name=card_name, label=label) if (card_name or label) else None
    rep = import_file(file, fmt, file_size=file_size, reader=reader_name, card=card)
    for line in rep.lines():
        click.echo(line)
    if dry_run:
        click.echo("dry run: nothing saved")
        return
    from cardbench.cli.ui import said
    from cardbench.record import check_store, record
    check_store(db)    # a bad --db is refused (exit 6), not filled into the outbox
    rec = record([*rep.results, *rep.verify_docs], db)
    said(rec, saved_line=False)
    n = len(rep.results) + len(rep.verify_docs)
    click.echo(f"saved {n} {'result' if not rep.verify_docs else 'record'}{'s' if n != 1 else ''} to {rec.location}")


@click.command("export")
@params.db_option
@_filters
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
              help="Where to write the JSON (cardbench.results/1); '-' is standard output.")
def export(db, card, reader, since, until, test_name, complete, output):
    """Export stored results as JSON that `cardbench import` reads back identically."""
    from cardbench.report import results_json

    with params.open_to_read(db) as store:
        found = _query(store, card, reader, since, until, test_name, complete)
    text = results_json(found)
    if output == "-":
        click.echo(text, nl=False)
        return
    _write_atomically(Path(output), text)
    click.echo(f"exported {len(found)} result{'s' if len(found) != 1 else ''} to {output}", err=True)


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a failed write never leaves half a file."""
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"cannot write {path}: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


#: for the main group: cli.add_command(...) each of these
COMMANDS = [results, compare, report, import_cmd, export]
