"""The command line: a thin layer over the library. Each command parses its arguments, calls one
library function, and prints. Errors are one line on stderr with a documented exit code
(README.md, "Exit codes"); a traceback is only shown with CARDBENCH_DEBUG=1.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys

import click

from cardbench import __version__
from cardbench.cli.ui import RichProgress, error_line
from cardbench.errors import CardbenchError, Interrupted, StoreError, UsageError
from cardbench.result import Card, Reader, Result
from cardbench.units import UnitError, parse_size

FORMATS = ["table", "md", "csv", "json"]


def _size_option(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_size(value)
    except UnitError as e:
        raise click.BadParameter(str(e)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cardbench")
def cli() -> None:
    """Honest speed, label and capacity tests for flash cards, USB sticks and card readers."""


def save_result(result: Result, db: str | None, no_save: bool) -> str | None:
    """Store a result (also a partial one); returns where, or None when saving is off."""
    if no_save:
        return None
    from cardbench.store import open_store
    with open_store(db) as store:
        store.save(result)
        return getattr(store, "location", db)


def output_result(result: Result, fmt: str, mib: bool) -> None:
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    from cardbench.report import render_result
    click.echo(render_result(result, fmt, rate_unit="MiB/s" if mib else "MB/s"))


@cli.command("run")
@click.argument("target", default=".", required=False)
@click.option("--size", callback=_size_option, help="Bytes per test file, e.g. 16MB or 64MiB (default: adapt so a run lasts ~3 s).")
@click.option("--runs", type=int, default=3, show_default=True, help="Timed runs per test (after one warm-up run).")
@click.option("--name", help="The card's name, e.g. 'Ultra II'.")
@click.option("--brand", help="The card's brand, e.g. SanDisk.")
@click.option("--capacity", callback=_size_option, help="The capacity printed on the card, e.g. 256MB.")
@click.option("--label", help="Speed marks printed on the card, e.g. '4X' or 'C10 U3 V30 A2'.")
@click.option("--reader", "reader_name", help="Name of the card reader (for readers cardbench cannot identify).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Short for --format json.")
@click.option("--mib", is_flag=True, help="Show rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
@click.option("--db", help="Results database: a SQLite path or postgresql:// URL (default: user data dir).")
@click.option("--no-save", is_flag=True, help="Do not store the result.")
def run_cmd(target, size, runs, name, brand, capacity, label, reader_name, fmt, as_json, mib, db, no_save):
    """Test the card mounted at TARGET (a directory; default: the current one).

    Runs seq_write (fresh files of incompressible data, timed through fsync, one warm-up run
    apart) and cold_read (O_DIRECT, page cache dropped and checked, content verified).
    """
    from cardbench.runner import RunOptions, run_directory
    fmt = "json" if as_json else fmt
    card = Card(name=name, brand=brand, capacity_bytes=capacity, label=label)
    reader = Reader(name=reader_name)
    opts = RunOptions(size=size, runs=runs, card=card, reader=reader, label=label,
                      progress=RichProgress(enabled=None if fmt != "json" else False))
    if label:
        _validate_label(label)
    if not no_save:
        _check_db_writable(db)
    try:
        result = run_directory(target, opts)
    except (CardbenchError, KeyboardInterrupt) as e:
        partial = getattr(e, "result", None)
        if partial is not None and partial.tests and not no_save:
            try:
                save_result(partial, db, no_save)
            except CardbenchError:
                pass
        raise
    where = save_result(result, db, no_save)
    output_result(result, fmt, mib)
    if where and fmt != "json":
        click.echo(f"saved to {where}", err=True)


def _validate_label(label: str) -> None:
    try:
        from cardbench.verdicts.labels import parse_label
    except ImportError:
        return
    parse_label(label)


def _check_db_writable(db: str | None) -> None:
    """Open the store before testing, so an unwritable --db fails before a byte is written."""
    from cardbench.store import open_store
    with open_store(db):
        pass


def _attach(module: str, attr: str) -> None:
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return
    cmd = getattr(mod, attr, None)
    if cmd is not None:
        cli.add_command(cmd)


for _module, _attr in [
    ("cardbench.cli.results_cmd", "results"),
    ("cardbench.cli.results_cmd", "compare"),
    ("cardbench.cli.results_cmd", "report"),
    ("cardbench.cli.results_cmd", "import_cmd"),
    ("cardbench.cli.results_cmd", "export"),
    ("cardbench.cli.list_cmd", "list_cmd"),
    ("cardbench.cli.emulate_cmd", "emulate"),
    ("cardbench.cli.readers_cmd", "readers"),
    ("cardbench.cli.demo_cmd", "demo"),
]:
    _attach(_module, _attr)


def _on_sigterm(signum, frame):
    raise Interrupted("stopped by SIGTERM; cleanup has run")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `cardbench` console script and `python -m cardbench`."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    debug = os.environ.get("CARDBENCH_DEBUG") == "1"
    try:
        cli.main(args=argv, prog_name="cardbench", standalone_mode=False)
    except click.exceptions.NoArgsIsHelp:
        sys.exit(0)
    except click.ClickException as e:
        error_line(e.format_message().replace("\n", " "))
        sys.exit(2)
    except click.exceptions.Abort:
        error_line("aborted")
        sys.exit(130)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except CardbenchError as e:
        if debug:
            raise
        error_line(e.message)
        sys.exit(e.exit_code)
    except UnitError as e:
        error_line(str(e))
        sys.exit(UsageError.exit_code)
    except KeyboardInterrupt:
        error_line("interrupted; cleanup has run")
        sys.exit(Interrupted.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a traceback
        if debug:
            raise
        error_line(f"internal error: {type(e).__name__}: {e} (CARDBENCH_DEBUG=1 shows the traceback)")
        sys.exit(70)
