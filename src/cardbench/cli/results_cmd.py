"""Commands over stored results: results, compare, report, import, export.

Each is a thin layer: parse options, call cardbench.store / cardbench.report / cardbench.importers,
print. Bad input raises cardbench.errors exceptions (one line; the main group prints them).
The database is ``--db`` (a SQLite path, ``sqlite:///path`` or ``postgresql://...``), else the
``CARDBENCH_DB`` environment variable, else the default file in the user data directory. The
commands that only read (and ``readers``) open it with ``params.open_to_read``: a named file
that does not exist is refused, not created empty.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import click

from cardbench import kinds
from cardbench.cli import params
from cardbench.cli.ui import error_line, said
from cardbench.errors import UsageError
from cardbench.importers import FORMATS as IMPORT_FORMATS
from cardbench.importers import import_file
from cardbench.record import check_store, record, waiting_notice
from cardbench.report import render
from cardbench.report.answer import render_run
from cardbench.report.compare import compare as compare_groups
from cardbench.report.compare import render_compare, resolve_group
from cardbench.report.html import render_html
from cardbench.report.records import render_records
from cardbench.report.terminal import nothing_yet
from cardbench.result import Card, Result
from cardbench.share import destination, share_items, share_options
from cardbench.store.export import collect, counts, import_records, to_json

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


#: `results` on a store with nothing in it, in the words `readers` uses (report.terminal.nothing_yet)
NO_RESULTS = nothing_yet("No result stored", "`cardbench run DIRECTORY` measures a card and stores its result; "
                                             "`cardbench import FILE` stores another tool's.")
NO_MATCH = "No stored result matches these filters: `cardbench results` without them lists every one."


def _none_stored(store) -> bool:
    """Whether the store holds no result and no record of a listed kind at all."""
    return not store.results(limit=1) and not any(store.records(k.name) for k in kinds.kinds() if k.listed)


def _unit(mib: bool) -> str:
    return "MiB/s" if mib else "MB/s"


def _query(store, card, reader, since, until, test_name, complete, sort="started"):
    return store.results(card=card, reader=reader, since=since, until=until, test=test_name, complete=complete,
                         order_by=sort)


@click.command("results", epilog=params.examples(
    "cardbench results --card lexar --sort -read",
    "cardbench results --id 3f2a      # one run: every run, statistics, verdicts",
    "cardbench results --json | jq '.results[].card'"))
@params.db_option
@_filters
@click.option("--sort", default="started", show_default=True, metavar="KEY",
              help="started, card, reader, write, read, source or id; a leading '-' reverses (e.g. -write).")
@params.output_options(FORMATS)
@click.option("--mib", is_flag=True, help="Rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
@click.option("--id", "run_id", metavar="RUN_ID", help="Show one run in detail (every run, median, spread, 95% CI, "
                                                       "then its row and verdicts).")
@click.option("-v", "--verbose", is_flag=True, hidden=True, help="Accepted for symmetry with run (--id is verbose).")
def results(db, card, reader, since, until, test_name, complete, sort, out, mib, run_id, verbose):
    """List stored results as the drawer table: one row per run, then verify verdicts and the
    other records (one line each); --json: every kind of record (cardbench.export/2)."""

    text: str | None = None      # --json: the whole document
    found: list[Result] = []
    listed: list[tuple[kinds.Kind, list]] = []
    nothing: str | None = None   # a table of no rows: what is missing, instead
    with params.open_to_read(db) as store:
        if run_id:
            out.echo(render_run(store.get(run_id), out.fmt, _unit(mib), width=out.width, verbose=True), nl=False)
            return
        if out.fmt == "json":    # every kind of record, one cardbench.export/2 document
            text = to_json(collect(store, card=card, reader=reader, since=since, until=until, test=test_name,
                                   complete=complete, sort=sort))
        else:
            found = _query(store, card, reader, since, until, test_name, complete, sort)
            # below the runs, the records of every kind listed (cardbench.kinds), each kind its table
            listed = [(k, store.records(k.name, card=card, reader=reader, since=since, until=until))
                      for k in kinds.kinds() if k.listed] if out.fmt in ("table", "md") else []
            # a table of no rows says nothing: say what is missing instead (csv keeps its header row)
            if out.fmt in ("table", "md") and not found and not any(docs for _, docs in listed):
                nothing = NO_RESULTS if _none_stored(store) else NO_MATCH
    if text is not None:
        out.echo(text, nl=False)
    elif nothing:
        out.echo(nothing)
    else:
        out.echo(render(found, out.fmt, _unit(mib), width=out.width), nl=False)
        for k, docs in listed:
            if docs:
                out.echo(render_records(k, docs, out.fmt, width=out.width), nl=False)
    notice = waiting_notice(db)
    if notice and not out.quiet:    # on stderr: stdout stays one JSON document with --json
        error_line(notice)


@click.command("compare", epilog=params.examples(
    "cardbench compare 'lexar 48MB' 'sandisk 64MB'      # two cards",
    "cardbench compare 3f2a 9c1b --by run --json"))
@click.argument("a")
@click.argument("b")
@params.db_option
@click.option("--by", type=click.Choice(["auto", "run", "card", "reader"]), default="auto", show_default=True,
              help="How to read A and B; auto tries a run id, then a card, then a reader.")
@params.output_options(FORMATS)
@click.option("--mib", is_flag=True, help="Rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
def compare(a, b, db, by, out, mib):
    """Compare two cards, readers or runs side by side, test by test.

    The difference is B's mean rate minus A's; it is beyond the spread of the runs when the two
    95% confidence intervals do not overlap.
    """

    with params.open_to_read(db) as store:
        label_a, group_a = resolve_group(store, a, by)
        label_b, group_b = resolve_group(store, b, by)
    out.echo(render_compare(compare_groups(group_a, group_b), label_a, label_b, out.fmt, _unit(mib),
                            width=out.width), nl=False)


@click.command("report", epilog=params.examples(
    "cardbench report --html drawer.html   # one file with charts, no network",
    "cardbench report --card sandisk > forum-post.md"))
@params.db_option
@_filters
@click.option("--html", "html_file", type=click.Path(dir_okay=False, writable=True),
              help="Write one self-contained HTML file (table, charts, readers, verify verdicts, "
                   "geometry, pull tests, endurance runs).")
@params.output_options(FORMATS, default="md", format_help="Format printed when --html is not given (md is ready "
                                                          "for a forum post).")
@click.option("--sort", default="started", show_default=True, metavar="KEY", help="As for `results`.")
@click.option("--mib", is_flag=True, help="Rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
def report(db, card, reader, since, until, test_name, complete, html_file, out, sort, mib):
    """A report of stored results: Markdown (default) or one HTML file with charts."""

    everything: str | None = None    # json without --html: every kind of record
    with params.open_to_read(db) as store:
        found = _query(store, card, reader, since, until, test_name, complete, sort)
        verify = store.verify_results(card=card, reader=reader, since=since, until=until) if html_file else []
        geometry = store.records("geometry", card=card, reader=reader, since=since, until=until) if html_file else []
        pulls = store.records("pulltest", card=card, reader=reader, since=since, until=until) if html_file else []
        endure = store.records("endurance", card=card, reader=reader, since=since, until=until) if html_file else []
        if out.fmt == "json" and not html_file:   # every kind of record, as `results --json` and `export`
            everything = to_json(collect(store, card=card, reader=reader, since=since, until=until, test=test_name,
                                         complete=complete, sort=sort))
        # Markdown: below the runs, the records of every listed kind, as `results --format md`
        listed = [(k, store.records(k.name, card=card, reader=reader, since=since, until=until))
                  for k in kinds.kinds() if k.listed] if out.fmt == "md" and not html_file else []
    if html_file:
        _write_atomically(Path(html_file), render_html(found, verify, rate_unit=_unit(mib), geometry_docs=geometry,
                                                     pulltest_docs=pulls, endurance_docs=endure))
        if out.json:
            out.echo(json.dumps({"schema": "cardbench.report/1", "html": html_file, "results": len(found),
                                 "verify_results": len(verify), "geometry_results": len(geometry),
                                 "pulltest_results": len(pulls), "endurance_results": len(endure)}, indent=2))
        out.note(f"wrote {html_file} ({len(found)} run{'s' if len(found) != 1 else ''})")
        return
    if everything is not None:
        out.echo(everything, nl=False)
        return
    out.echo(render(found, out.fmt, _unit(mib), width=out.width), nl=False)
    for k, docs in listed:
        if docs:
            out.echo(render_records(k, docs, out.fmt, width=out.width), nl=False)


@click.command("import", epilog=params.examples(
    "cardbench import survey-2006.txt --reader 'USB 2.0 reader' --dry-run",
    "cardbench import fio-out.json --fio --card 'Lexar 48MB' --label 4X"))
@click.argument("file", type=click.Path(dir_okay=False))
@params.db_option
@click.option("--fio", "as_fio", is_flag=True, help="FILE is fio --output-format=json output.")
@click.option("--format", "fmt", type=click.Choice(list(IMPORT_FORMATS)), metavar="FORMAT",
              help=f"The file's format: {', '.join(IMPORT_FORMATS)} (default: recognised from its content).")
@click.option("--file-size", metavar="SIZE",
              help="Size of the file a survey's write times refer to: 42MB = 42,000,000 B (the default), "
                   "42MiB = 44,040,192 B. A '# file size: ...' line in the file also sets it.")
@click.option("--reader", "reader_name", metavar="NAME", help="The reader, for rows that do not name one.")
@click.option("--card", "card_name", metavar="NAME", help="The card of a fio run.")
@click.option("--label", metavar="LABEL", help="The label of the card of a fio run (e.g. '133x').")
@click.option("--dry-run", is_flag=True, help="Read and check only: print what was found and every flag; save nothing.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@share_options
def import_cmd(file, db, as_fio, fmt, file_size, reader_name, card_name, label, dry_run, quiet):
    """Import results: fio (JSON, terse or its normal output), KDiskMark,
    CrystalDiskMark, f3, H2testw, hdparm, dd, a classic survey table, a legacy CSV
    or a cardbench export.

    Rates are stored in bytes/s with the tool's unit convention applied (and said); every printed
    figure that disagrees with its own raw data is flagged; f3 and H2testw logs become verify
    verdicts. Importing a file again replaces its earlier import.
    """

    if as_fio:
        if fmt and fmt != "fio":
            raise UsageError(f"--fio and --format {fmt} contradict each other")
        fmt = "fio"
    card = Card(name=card_name, label=label) if (card_name or label) else None
    rep = import_file(file, fmt, file_size=file_size, reader=reader_name, card=card)
    out = params.Output("table", quiet)
    for line in rep.lines():
        out.echo(line)
    if dry_run:
        out.echo("dry run: nothing saved")
        return
    check_store(db)    # a bad --db is refused (exit 6), not filled into the outbox
    if rep.export is not None:
        # a cardbench export: every record as it was, in one transaction (all or nothing), not judged again
        location = import_records(rep.export, db, path=file)
        c = rep.export
        out.echo(f"saved {counts(c.sections())} to {location}")
        url = destination()[0]
        shared = share_items(c.items(), url) if url else None
        if url and shared is not None:
            for w in shared.warnings(url):
                error_line(f"warning: {w}")
        return
    rec = record([*rep.results, *rep.verify_docs], db)
    said(rec, saved_line=False)
    n = len(rep.results) + len(rep.verify_docs)
    out.echo(f"saved {n} {'result' if not rep.verify_docs else 'record'}{'s' if n != 1 else ''} to {rec.location}")


@click.command("export", epilog=params.examples(
    "cardbench export --card lexar -o lexar.json",
    "cardbench export --since 7d -o week.json",
    "cardbench import week.json --db other.sqlite3"))
@params.db_option
@_filters
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-", show_default=True,
              help="Where to write the JSON (cardbench.export/2); '-' is standard output.")
@params.output_options(("json",), default="json", format_help="Always JSON (cardbench.export/2).")
def export(db, card, reader, since, until, test_name, complete, output, out):
    """Export every kind of stored record (runs, verify verdicts, reader probes, drawer sessions)
    as JSON that `cardbench import` reads back identically, with the same ids."""

    with params.open_to_read(db) as store:
        doc = collect(store, card=card, reader=reader, since=since, until=until, test=test_name, complete=complete)
    text = to_json(doc)
    if output == "-":
        out.echo(text, nl=False)
        return
    _write_atomically(Path(output), text)
    if not out.quiet:
        click.echo(f"exported {counts(doc)} to {output}", err=True)


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
