"""Results store: SQLite by default, PostgreSQL by URL, one versioned schema for both.

    from cardbench.store import open_store
    with open_store() as store:               # ~/.local/share/cardbench/results.sqlite3
        store.save(result)
        for r in store.results(card="Lexar 48M", test="seq_write", order_by="-write"):
            ...

``open_store(None | path | "sqlite:///path" | "postgresql://...")`` -> ``Store`` with ``save``,
``results``, ``get``, ``delete``, ``save_verify``, ``verify_results``, ``cards``, ``readers``,
``count``, ``check``, ``close`` (also a context manager). Schema and migrations: ``store.schema``.
"""

from cardbench.store.core import VERIFY_SCHEMA, Store, default_path, open_store
from cardbench.store.schema import LATEST as SCHEMA_VERSION

__all__ = ["Store", "open_store", "default_path", "SCHEMA_VERSION", "VERIFY_SCHEMA"]
