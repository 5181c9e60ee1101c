"""Results store: SQLite by default, PostgreSQL by URL, one versioned schema for both.

    from cardbench.store import open_store
    with open_store() as store:               # ~/.local/share/cardbench/results.sqlite3
        store.save(result)
        for r in store.results(card="Lexar 48M", test="seq_write", order_by="-write"):
            ...

``open_store(None | path | "sqlite:///path" | "postgresql://...")`` -> ``Store`` with ``save``,
``results``, ``get``, ``delete``, ``save_record`` and ``records(kind, ...)`` (a record of any kind of
:mod:`cardbench.kinds`), ``save_verify``, ``verify_results``, ``save_probe``, ``probes`` (cards
read at once), ``save_session``, ``sessions`` (drawer sessions), ``save_all`` (any of them in one
transaction), ``cards``, ``readers``, ``count``, ``check``, ``close`` (also a context manager). Schema and migrations: ``store.schema``; every kind out and back in: ``store.export``.
"""

from cardbench.store.core import (
    PROBE_SCHEMA,
    SESSION_SCHEMA,
    VERIFY_SCHEMA,
    Store,
    default_path,
    open_store,
)
from cardbench.store.schema import LATEST as SCHEMA_VERSION

__all__ = ["Store", "open_store", "default_path", "SCHEMA_VERSION", "VERIFY_SCHEMA", "PROBE_SCHEMA", "SESSION_SCHEMA"]
