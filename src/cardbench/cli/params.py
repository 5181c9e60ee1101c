"""What several commands share at the edge: callbacks that read units (cardbench.units:
``--size 16MB``, ``--time-budget 30s``, ``--write-rate 4.9MB/s``), the ``--db`` option and how a
reading command opens it.

A value that cannot be read becomes click's BadParameter, which the main entry point prints as
one line with exit code 2.
"""

from __future__ import annotations

import functools
import sys
import textwrap

import click

from cardbench.cli.ui import RichProgress
from cardbench.report.terminal import PIPE_WIDTH, terminal_width
from cardbench.store import open_store
from cardbench.units import UnitError, parse_duration, parse_rate, parse_size


def _reader(parse, doc: str):
    """A click callback that reads a value with ``parse`` (None stays None)."""
    def callback(ctx, param, value):
        if value is None:
            return None
        try:
            return parse(value)
        except UnitError as e:
            raise click.BadParameter(str(e)) from None
    callback.__doc__ = doc
    return callback


size = _reader(parse_size, "``16MB``, ``64MiB``, ``4096`` -> bytes (None stays None).")
size_or_zero = _reader(lambda v: parse_size(v, minimum=0), "like :data:`size`, and ``0`` (none).")
seconds = _reader(parse_duration, "``10``, ``10s``, ``250ms``, ``2m`` -> seconds > 0 (None stays None).")
seconds_or_zero = _reader(lambda v: parse_duration(v, zero=True), "like :data:`seconds`, and ``0`` (none).")
rate = _reader(parse_rate, "``4.9MB/s``, ``20MiB/s``, ``133x`` -> bytes/s > 0 (None stays None).")
rate_or_off = _reader(lambda v: 0.0 if v.strip().lower() in ("none", "off", "0", "") else parse_rate(v),
                      "like :data:`rate`; ``none`` (or ``0``) is 0.0: no limit.")

#: ``--db`` of every command that stores or reads results (not the demo, which keeps its own file)
db_option = click.option("--db", envvar="CARDBENCH_DB", metavar="PATH|URL",
                         help="Results database: a SQLite path, sqlite:///path or postgresql://... "
                              "(default: $CARDBENCH_DB, else results.sqlite3 in the user data dir).")


def open_to_read(db: str | None):
    """The store for a command that only reads it: a --db (or $CARDBENCH_DB) path that does not
    exist is an error (a typo must not become a new empty database); the default one may be new.
    A store on a full or read-only file system is still read."""
    return open_store(db, create=db is None, reading=True)


# -- what a command prints: --format, --json, --quiet ---------------------------------------------------


class Output:
    """Where a command's output goes, decided once from ``--format``, ``--json`` and ``--quiet``.

    ``out.fmt`` is the format; ``out.echo(text)`` prints data on stdout (nothing when quiet);
    ``out.note(text)`` prints a remark on stderr (nothing when quiet, nor with JSON unless asked:
    stdout holds one JSON document and nothing else either way); ``out.width`` is the width renderers fit (the terminal's,
    or the full pipe width); ``out.progress()`` the progress reporter (none when quiet or JSON).
    """

    def __init__(self, fmt: str, quiet: bool = False):
        self.fmt = fmt
        self.quiet = quiet

    @property
    def json(self) -> bool:
        return self.fmt == "json"

    @property
    def width(self) -> int:
        return terminal_width()

    def echo(self, text: str, nl: bool = True) -> None:
        if not self.quiet:
            click.echo(text, nl=nl)

    def note(self, text: str, *, with_json: bool = False) -> None:
        """A remark on stderr, wrapped between words at the terminal's width (when it is one).
        Left out when quiet, and with JSON unless ``with_json`` (what an action the user asked
        for did, such as "3 stored results judged again")."""
        if self.quiet or (self.json and not with_json):
            return
        width = terminal_width(sys.stderr)
        if width != PIPE_WIDTH:
            text = "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                              for line in text.splitlines())
        click.echo(text, err=True)

    def progress(self):
        return RichProgress(enabled=False if (self.quiet or self.json) else None)


def output_options(formats: tuple[str, ...] | list[str] = ("table", "md", "csv", "json"), default: str = "table",
                   format_help: str | None = None):
    """``--format`` (``formats``), ``--json`` (short for ``--format json``) and ``--quiet``, handed
    to the command as one argument ``out`` (an :class:`Output`)::

        @click.command()
        @params.output_options(("table", "json"))
        def readers(out): ...
    """

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, fmt, quiet, as_json=False, **kwargs):
            if as_json and fmt not in ("json", default):
                raise click.BadParameter(f"--json and --format {fmt} contradict each other", param_hint="--json")
            return f(*args, out=Output("json" if as_json else fmt, quiet), **kwargs)
        wrapper = click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")(wrapper)
        if "json" in formats:
            wrapper = click.option("--json", "as_json", is_flag=True,
                                   help="Short for --format json: one JSON document on stdout.")(wrapper)
        wrapper = click.option("--format", "fmt", type=click.Choice(list(formats)), default=default,
                               show_default=True, help=format_help or "Output format.")(wrapper)
        return wrapper
    return decorate


def examples(*lines: str) -> str:
    """A command's help epilog: "Examples:" and each line as written (click keeps it unwrapped)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
