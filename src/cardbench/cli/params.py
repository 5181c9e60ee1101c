"""What several commands share at the edge: callbacks that read units (cardbench.units:
``--size 16MB``, ``--time-budget 30s``), the ``--db`` option and how a reading command opens it.

A value that cannot be read becomes click's BadParameter, which the main entry point prints as
one line with exit code 2.
"""

from __future__ import annotations

import click

from cardbench.units import UnitError, parse_duration, parse_size


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
seconds = _reader(parse_duration, "``10``, ``10s``, ``250ms``, ``2m`` -> seconds > 0 (None stays None).")

#: ``--db`` of every command that stores or reads results (not the demo, which keeps its own file)
db_option = click.option("--db", envvar="CARDBENCH_DB", metavar="PATH|URL",
                         help="Results database: a SQLite path, sqlite:///path or postgresql://... "
                              "(default: $CARDBENCH_DB, else results.sqlite3 in the user data dir).")


def open_to_read(db: str | None):
    """The store for a command that only reads it: a --db (or $CARDBENCH_DB) path that does not
    exist is an error (a typo must not become a new empty database); the default one may be new.
    A store on a full or read-only file system is still read."""
    from cardbench.store import open_store
    return open_store(db, create=db is None, reading=True)
