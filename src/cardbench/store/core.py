"""The results store: save, find and read back results in SQLite or PostgreSQL.

The whole result document is kept (``runs.document``) so ``get`` returns exactly what was saved;
cards, readers, hosts, tests, samples and claims are kept beside it as rows to filter and join on.
``save`` is one transaction: a process killed in the middle of it leaves no trace of that run.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import platformdirs

from cardbench import kinds
from cardbench.errors import NotFound, StoreError, UsageError
from cardbench.kinds import PROBE_SCHEMA, RESULT_SCHEMA, SESSION_SCHEMA, VERIFY_SCHEMA  # noqa: F401  (re-exported)
from cardbench.result import Card, Reader, Result
from cardbench.store import query as q
from cardbench.store.backends import (
    IN_CHUNK,
    POOL_MAX,
    Backend,
    PostgresBackend,
    PostgresPool,
    SQLiteBackend,
    first_line,
    redact_url,
)
from cardbench.store.schema import (
    APP,
    MIGRATIONS,
    SCHEMA_VERSION_DDL,
    Migration,
    check_migrations,
)
from cardbench.units import UnitError, check_json_numbers

DEFAULT_FILENAME = "results.sqlite3"
#: How often a save is tried again after a concurrency conflict (PostgreSQL serialization/deadlock).
SAVE_ATTEMPTS = 6
#: How often a lost connection is made again within one store call (each time with its own backoff).
RECONNECTS = 2


def default_path() -> Path:
    """platformdirs.user_data_dir("cardbench")/results.sqlite3 (the directory is created)."""

    d = Path(platformdirs.user_data_dir("cardbench"))
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create {d} for the results database: {e.strerror or first_line(e)}") from None
    return d / DEFAULT_FILENAME


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _document_text(doc: Any, what: str) -> str:
    """A record's stored JSON text; UsageError when it has none: a number JSON cannot hold
    (NaN or Infinity, given or derived: ``seconds`` 1e-320 makes ``bytes_per_s`` infinite), a
    whole number beyond 64 bits, a lone surrogate, a value that is not JSON. Named by key path."""
    try:
        check_json_numbers(doc)
        return json.dumps(doc, ensure_ascii=False, allow_nan=False)
    except UnitError as e:
        raise UsageError(f"{what} cannot be stored: {e}") from None
    except (TypeError, ValueError, RecursionError) as e:
        raise UsageError(f"{what} cannot be stored as JSON: {first_line(e)}") from None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def open_store(url_or_path: str | os.PathLike | None = None, *, create: bool = True,
               reading: bool = False) -> "Store":
    """Open (creating and migrating as needed) a results store.

    ``None``: the default SQLite file in the user data directory. A path or ``sqlite:///path``:
    a SQLite file. ``postgresql://...`` / ``postgres://...``: a PostgreSQL database (needs
    ``cardbench[postgres]``). Raises StoreError (one line) when the store cannot be used.
    ``create=False`` (for commands that only read): a SQLite file that does not exist is an
    error instead of a new empty database, so a mistyped path is said, not silently created.
    ``reading=True`` (the same commands): a SQLite file on a file system that is full or read-only
    is still read (as last checkpointed) instead of refused.
    """
    return Store(url_or_path, create=create, reading=reading)


def parse_target(url_or_path: str | os.PathLike | None) -> tuple[str, str]:
    """("sqlite", path) or ("postgresql", url) for what ``open_store`` is given (None: the default file)."""
    text = os.fspath(default_path() if url_or_path is None else url_or_path)
    if text.startswith(("postgresql://", "postgres://")):
        return "postgresql", text
    if text.startswith("sqlite:"):
        path = text[len("sqlite:"):]
        if path.startswith("///"):
            path = path[2:]          # sqlite:///abs/path -> /abs/path ; sqlite:///rel -> /rel
        elif path.startswith("//"):
            raise UsageError(f"not a SQLite URL: {text!r} (use sqlite:///path/to/file)")
        return "sqlite", path
    if "://" in text:
        raise UsageError(f"unknown database URL {text!r} (use a file path, sqlite:///path or postgresql://...)")
    return "sqlite", text


def store_key(url_or_path: str | os.PathLike | None) -> str:
    """One name per store, without opening it: a SQLite file's absolute path, a PostgreSQL URL
    with its password hidden. The outbox files each result under the store it was meant for."""
    kind, where = parse_target(url_or_path)
    if kind == "postgresql":
        return redact_url(where)
    return os.path.realpath(os.path.expanduser(where))


class StorePool:
    """Stores for the many threads of a server, over one database. PostgreSQL: a pool of
    connections (``PostgresPool``, psycopg_pool), each ``store()`` a connection taken for one call
    and given back after it (rolled back if a transaction was left open, replaced if broken).
    SQLite: a store per thread, kept between calls and dropped after a StoreError (a file needs
    no pool: its connections cost no round trip, and its writers queue on the file's lock)."""

    def __init__(self, url_or_path: str | os.PathLike | None = None, *, pool_size: int = POOL_MAX):
        with open_store(url_or_path) as st:      # create / migrate once, and fail now on a bad --db
            self.location = st.location
        kind, where = parse_target(url_or_path)
        self._target = url_or_path
        self._url = where
        self.pool = PostgresPool(where, max_size=pool_size) if kind == "postgresql" else None
        self._local = threading.local()

    @contextmanager
    def store(self, *, now: bool = False) -> Iterator["Store"]:
        """A store for one call. ``now`` (PostgreSQL only): on a connection idle at once, with no
        wait, reconnect or retry in it (StoreError instead): what an event loop may run."""
        if now and self.pool is None:
            raise StoreError("a store without waits needs PostgreSQL's pool")
        if self.pool is not None:
            st = Store._over(PostgresBackend(self._url, pool=self.pool, patient=not now))
            try:
                yield st
            finally:
                st.close()
            return
        kept: Store | None = getattr(self._local, "store", None)
        if kept is None or kept.backend is None:
            kept = self._local.store = open_store(self._target)
        st = kept
        try:
            yield st
        except StoreError:
            self._local.store = None
            try:
                st.close()
            except Exception:  # noqa: BLE001 - a broken connection is dropped either way
                pass
            raise

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class Store:
    """A results database. Use as a context manager or call ``close()``."""

    def __init__(self, url_or_path: str | os.PathLike | None = None, *, create: bool = True, reading: bool = False,
                 _migrations: tuple[Migration, ...] | list[Migration] = MIGRATIONS):
        check_migrations(_migrations)
        self._migrations = tuple(_migrations)
        #: ("card" | "reader", identity) whose row a save in progress leaves as it is (save_all's ``before``)
        self._kept_names: frozenset[tuple[str, str]] = frozenset()
        kind, where = parse_target(url_or_path)
        #: None once closed
        self.backend: Backend | None
        if kind == "postgresql":
            self.backend = PostgresBackend(where)
        else:
            self.backend = SQLiteBackend(where, create=create, reading=reading)
        self.url = self._db.location
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    @classmethod
    def _over(cls, backend: Backend) -> "Store":
        """A store on a backend whose schema is known to be current (StorePool): no migration check."""
        st = cls.__new__(cls)
        st._migrations = MIGRATIONS
        st.backend = backend
        st.url = backend.location
        return st

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the store is, for messages (a path, or a URL with its password hidden)."""
        return self.url

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.backend is not None:
            try:
                self._db.close()
            finally:
                self.backend = None

    def __repr__(self) -> str:
        return f"<Store {self._db.kind if self.backend else 'closed'} {self.url}>"

    @property
    def _db(self) -> Backend:
        if self.backend is None:
            raise StoreError("the results store is closed")
        return self.backend

    def _fail(self, action: str, exc: BaseException) -> StoreError:
        return StoreError(f"results database {self.url}: {action} failed: {first_line(exc)}")

    def _run(self, action: str, fn, *args, retry: bool = False):
        """``fn(*args)`` with the backend's errors as one StoreError line. A lost connection is
        made again and ``fn`` run again (every write is one transaction that replaces by id, so a
        commit whose answer was lost is not doubled); with ``retry``, so is a conflict with
        another writer (PostgreSQL serialization, deadlock)."""
        attempts = SAVE_ATTEMPTS if retry else 1
        attempt = reconnects = 0
        while True:
            db = self._db
            try:
                return fn(*args)
            except db.error_types as e:
                if db.is_disconnect(e) and reconnects < RECONNECTS and db.patient:
                    reconnects += 1
                    try:
                        db.reconnect()
                    except StoreError:
                        raise self._fail(action, e) from None
                    continue
                attempt += 1
                if attempt < attempts and db.is_retryable(e) and db.patient:
                    time.sleep(0.01 * (2 ** attempt))
                    continue
                raise self._fail(action, e) from None

    # -- schema ------------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        return self._run("reading the schema version", self._read_version)

    def _read_version(self) -> int:
        if "schema_version" not in self._db.table_names():
            return 0
        self._db.check_schema_version()
        rows = self._db.execute("SELECT MAX(version), COUNT(*) FROM schema_version WHERE app = ?", (APP,))
        return int(rows[0][0]) if rows and rows[0][1] else 0

    def _migrate(self) -> None:
        latest = self._migrations[-1].version if self._migrations else 0
        try:
            version = self._read_version()
            if version == latest:
                return
            if version > latest:
                raise self._too_new(version, latest)
            with self._db.transaction():
                self._db.lock_for_migration()
                self._db.check_not_foreign()
                version = self._read_version()     # another process may have migrated meanwhile
                if version > latest:
                    raise self._too_new(version, latest)
                if version == 0 and "schema_version" not in self._db.table_names():
                    self._db.execute(SCHEMA_VERSION_DDL)
                for m in self._migrations[version:]:
                    for stmt in m.sql(self._db.kind):
                        self._db.execute(stmt)
                    self._db.execute(
                        "INSERT INTO schema_version (app, version, description, applied_at) VALUES (?, ?, ?, ?)",
                        (APP, m.version, m.description, _now_iso()))
                if isinstance(self.backend, SQLiteBackend):
                    self.backend.set_application_id()
        except self._db.error_types as e:
            raise self._fail("preparing the schema", e) from None

    def _too_new(self, version: int, latest: int) -> StoreError:
        return StoreError(f"results database {self.url} has schema version {version}, newer than this "
                          f"cardbench knows ({latest}); upgrade cardbench")

    # -- writing -----------------------------------------------------------------------------

    def save(self, result: Result) -> str:
        """Save (or replace, by id) a result in one transaction and return its id.

        An incomplete result (``complete=False``) is stored and marked incomplete.
        """
        if not isinstance(result, Result):
            raise UsageError(f"can only save a Result, not {type(result).__name__}")
        doc = result.to_dict()
        text = _document_text(doc, f"result {result.id}")
        self._run(f"saving result {result.id}", self._save_tx, result, doc, text, retry=True)
        return result.id

    def _upsert_card(self, card: Card) -> int:
        return self._upsert_id("card", self._card_row(card), "cards")

    def _upsert_reader(self, reader: Reader) -> int:
        return self._upsert_id("reader", self._reader_row(reader), "readers")

    def _upsert_id(self, what: str, row: tuple, table: str) -> int:
        """Upsert ``row`` (its identity first; a name in ``_kept_names`` only inserted when new)
        and return its id: on PostgreSQL in the same statement (RETURNING: one round trip, not
        two), on SQLite by reading it after."""
        upsert, keep = (self._CARD_UPSERT, self._CARD_KEEP) if what == "card" else \
            (self._READER_UPSERT, self._READER_KEEP)
        sql = keep if (what, row[0]) in self._kept_names else upsert
        if isinstance(self._db, PostgresBackend):
            got = self._db.execute(sql + " RETURNING id", row)
        else:
            self._db.execute(sql, row)
            got = []
        if not got:     # SQLite, or an upsert that left the row as it was
            got = self._db.execute(f"SELECT id FROM {table} WHERE identity = ?", (row[0],))
        return int(got[0][0])

    def _upsert_rows(self, what: str, rows: list[tuple]) -> None:
        """Cards' or readers' rows (identity first), upserted; those in ``_kept_names`` only
        inserted when new (their names stand: the station server's naming rule)."""
        upsert, keep = (self._CARD_UPSERT, self._CARD_KEEP) if what == "card" else \
            (self._READER_UPSERT, self._READER_KEEP)
        if not self._kept_names:
            self._db.executemany(upsert, rows)
            return
        self._db.executemany(upsert, [r for r in rows if (what, r[0]) not in self._kept_names])
        self._db.executemany(keep, [r for r in rows if (what, r[0]) in self._kept_names])

    def _delete_run(self, run_pk: int) -> None:
        for table in ("samples", "claims", "tests"):
            self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_pk,))
        self._db.execute("DELETE FROM runs WHERE id = ?", (run_pk,))

    def _save_tx(self, result: Result, doc: dict, text: str) -> None:
        with self._db.batch_transaction():
            self._save_results([(result, doc, text)])

    # One statement per table for a whole batch of results (a save, an upload, an import): the
    # rows are those the record-by-record path wrote, in the same order (tests/store/test_store_bulk.py).
    _CARD_UPSERT = (
        "INSERT INTO cards (identity, name, brand, capacity_bytes, label, serial, model) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (identity) DO UPDATE SET "
        "name = COALESCE(excluded.name, cards.name), brand = COALESCE(excluded.brand, cards.brand), "
        "capacity_bytes = COALESCE(excluded.capacity_bytes, cards.capacity_bytes), "
        "label = COALESCE(excluded.label, cards.label), model = COALESCE(excluded.model, cards.model)")
    _READER_UPSERT = (
        "INSERT INTO readers (identity, name, vendor_id, product_id, serial, link_speed_mbit, driver, transport) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (identity) DO UPDATE SET "
        "name = COALESCE(excluded.name, readers.name), "
        "link_speed_mbit = COALESCE(excluded.link_speed_mbit, readers.link_speed_mbit), "
        "driver = COALESCE(excluded.driver, readers.driver), "
        "transport = COALESCE(excluded.transport, readers.transport)")
    _CARD_KEEP = _CARD_UPSERT.split(" ON CONFLICT")[0] + " ON CONFLICT (identity) DO NOTHING"
    _READER_KEEP = _READER_UPSERT.split(" ON CONFLICT")[0] + " ON CONFLICT (identity) DO NOTHING"
    #: PostgreSQL: the runs of these result ids and their rows, in one statement (the foreign keys
    #: are checked at its end, when the samples, claims and tests are gone too)
    _PG_DELETE_RUNS = (
        "WITH old AS (SELECT id FROM runs WHERE result_id = ANY(?)), "
        "s AS (DELETE FROM samples WHERE run_id IN (SELECT id FROM old)), "
        "c AS (DELETE FROM claims WHERE run_id IN (SELECT id FROM old)), "
        "t AS (DELETE FROM tests WHERE run_id IN (SELECT id FROM old)) "
        "DELETE FROM runs WHERE id IN (SELECT id FROM old)")
    _HOST_UPSERT = ("INSERT INTO hosts (identity, hostname, machine, info) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (identity) DO UPDATE SET info = excluded.info")

    @staticmethod
    def _card_row(card: Card) -> tuple:
        return (card.identity(), card.name, card.brand, card.capacity_bytes, card.label, card.serial, card.model)

    @staticmethod
    def _reader_row(reader: Reader) -> tuple:
        return (reader.identity(), reader.name, reader.vendor_id, reader.product_id, reader.serial,
                reader.link_speed_mbit, reader.driver, reader.transport)

    @staticmethod
    def _host_row(host: dict) -> tuple:
        hostname = str(host.get("hostname") or "")
        machine = str(host.get("machine") or "")
        return (f"{hostname or 'unknown'}|{machine}", hostname or None, machine or None, _dumps(host))

    def _save_results(self, entries: list[tuple[Result, dict, str]]) -> None:
        """Store (replacing by id) results inside the caller's transaction, as saving them one
        after the other would: cards, readers and hosts are upserted in the results' order; a
        result given twice is stored as its last copy. Nothing is read back: each row finds the
        ids it points to by a subquery on a unique key (a card's identity, a run's result id, a
        test's run and position), so on PostgreSQL the whole batch is sent pipelined and only
        the commit is waited for."""
        if not entries:
            return
        b = self._db
        ids = [r.id for r, _, _ in entries]
        if isinstance(b, PostgresBackend):      # one statement, not four (the results replaced: usually none)
            b.send(self._PG_DELETE_RUNS, [[b.key(v) for v in ids]])
        else:
            old = "SELECT id FROM runs WHERE result_id {in}"
            for table in ("samples", "claims", "tests"):
                self._in_chunks(f"DELETE FROM {table} WHERE run_id IN ({old})", ids)
            self._in_chunks("DELETE FROM runs WHERE result_id {in}", ids)
        # a card (reader, host) named by many results of the batch alike is upserted once
        self._upsert_rows("card", _once([self._card_row(r.card) for r, _, _ in entries]))
        self._upsert_rows("reader", _once([self._reader_row(r.reader) for r, _, _ in entries]))
        b.executemany(self._HOST_UPSERT, _once([self._host_row(r.host or {}) for r, _, _ in entries]))
        last = {r.id: k for k, (r, _, _) in enumerate(entries)}
        kept = [e for k, e in enumerate(entries) if last[e[0].id] == k]
        now = _now_iso()
        b.executemany(
            "INSERT INTO runs (result_id, card_id, reader_id, host_id, started_at, started_epoch, finished_at, "
            "complete, source, error, tool_version, schema, n_tests, n_samples, document, saved_at) "
            "VALUES (?, (SELECT id FROM cards WHERE identity = ?), (SELECT id FROM readers WHERE identity = ?), "
            "(SELECT id FROM hosts WHERE identity = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(r.id, r.card.identity(), r.reader.identity(), self._host_row(r.host or {})[0],
              r.started_at, q.epoch_of_iso(r.started_at), r.finished_at, int(bool(r.complete)), r.source, r.error,
              str((r.tool or {}).get("version") or "") or None, RESULT_SCHEMA, len(r.tests),
              sum(len(t.runs) + len(t.warmup) for t in r.tests), text, now) for r, _, text in kept])
        run_of = "(SELECT id FROM runs WHERE result_id = ?)"
        test_rows, samples, claims = [], [], []
        for r, doc, _ in kept:
            for pos, (t, td) in enumerate(zip(r.tests, doc["tests"], strict=True)):
                ci = td.get("ci95_bytes_per_s") or (None, None)
                test_rows.append(
                    (r.id, pos, t.name, _dumps(t.method), int(bool(t.complete)), len(t.runs),
                     td.get("median_bytes_per_s"), td.get("mean_bytes_per_s"), td.get("min_bytes_per_s"),
                     td.get("max_bytes_per_s"), td.get("stdev_bytes_per_s"), ci[0], ci[1], td.get("x_rating"),
                     td.get("median_iops"), t.limited_by, _dumps(list(t.warnings))))
                samples += [(r.id, r.id, pos, kind, i, int(x.bytes), float(x.seconds), x.ops, x.offset)
                            for kind, runs in (("warmup", t.warmup), ("run", t.runs)) for i, x in enumerate(runs)]
            claims += [(r.id, i, _text(c.get("label") or c.get("claim")), _text(c.get("test")),
                        _text(c.get("verdict")), _dumps(c)) for i, c in enumerate(r.claims)]
        b.executemany(
            "INSERT INTO tests (run_id, position, name, method, complete, n_runs, median_bytes_per_s, "
            "mean_bytes_per_s, min_bytes_per_s, max_bytes_per_s, stdev_bytes_per_s, ci95_low, ci95_high, "
            f"x_rating, median_iops, limited_by, warnings) VALUES ({run_of}, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?)", test_rows)
        self._insert_samples(samples)
        b.executemany(
            f"INSERT INTO claims (run_id, position, label, test, verdict, document) VALUES ({run_of}, ?, ?, ?, ?, ?)",
            claims)

    def _in_chunks(self, sql: str, values: list) -> None:
        """A statement whose answer is not read, with ``{in}`` as in Backend.rows_in."""
        b = self._db
        if isinstance(b, PostgresBackend):
            b.send(sql.replace("{in}", "= ANY(?)"), [[b.key(v) for v in values]])
            return
        for k in range(0, len(values), IN_CHUNK):
            part = values[k:k + IN_CHUNK]
            b.send(sql.replace("{in}", "IN (" + ", ".join("?" * len(part)) + ")"), part)

    def _insert_samples(self, rows: list[tuple]) -> None:
        """rows: (result id, result id, test position, kind, idx, bytes, seconds, ops, offset)."""
        # a VALUES insert (a few statements for them all on PostgreSQL: PostgresBackend.executemany)
        self._db.executemany(
            "INSERT INTO samples (run_id, test_id, kind, idx, bytes, seconds, ops, offset_bytes) VALUES ("
            "(SELECT id FROM runs WHERE result_id = ?), (SELECT t.id FROM tests t JOIN runs r ON r.id = t.run_id "
            "WHERE r.result_id = ? AND t.position = ?), ?, ?, ?, ?, ?, ?)", rows)

    def delete(self, run_id: str) -> None:
        """Remove one run (exact id) and its rows."""
        def tx():
            with self._db.transaction():
                old = self._db.execute("SELECT id FROM runs WHERE result_id = ?", (run_id,))
                if not old:
                    raise UsageError(f"no run with id {run_id!r} in {self.url}")
                self._delete_run(int(old[0][0]))
        self._run(f"deleting run {run_id}", tx, retry=True)

    # -- reading -----------------------------------------------------------------------------

    def _rows_as_dicts(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        b = self._db
        rows = b.execute(sql, tuple(params))
        # plain column names only: a column holding a comma would be split here (strict: it fails)
        cols = [c.strip() for c in sql.split("SELECT", 1)[1].split("FROM", 1)[0].split(",")]
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def cards(self) -> list[dict]:
        """Every card seen, as dicts (id, identity, name, brand, capacity_bytes, label, serial, model)."""
        return self._run("reading cards", self._rows_as_dicts,
                         "SELECT id, identity, name, brand, capacity_bytes, label, serial, model FROM cards ORDER BY id")

    def readers(self) -> list[dict]:
        return self._run("reading readers", self._rows_as_dicts,
                         "SELECT id, identity, name, vendor_id, product_id, serial, link_speed_mbit, driver, transport "
                         "FROM readers ORDER BY id")

    def results(self, card: str | None = None, reader: str | None = None, since: Any = None, until: Any = None,
                test: str | None = None, complete: bool | None = None, order_by: str | None = "started",
                limit: int | None = None, source: str | None = None, offset: int = 0) -> list[Result]:
        """Results matching every filter given (see ``cardbench.store.query`` for how they read).
        Ordered by ``started`` or ``-started``, ``limit`` and ``offset`` are applied in SQL (a page
        of a large store reads only that page)."""
        where: list[str] = []
        params: list[Any] = []
        if card:
            ids = [c["id"] for c in self.cards() if q.card_matches(c, card)]
            if not ids:
                return []
            where.append(f"r.card_id IN ({', '.join('?' * len(ids))})")
            params += ids
        if reader:
            ids = [c["id"] for c in self.readers() if q.reader_matches(c, reader)]
            if not ids:
                return []
            where.append(f"r.reader_id IN ({', '.join('?' * len(ids))})")
            params += ids
        if since is not None and since != "":
            where.append("r.started_epoch >= ?")
            params.append(q.parse_when(since, what="--since time"))
        if until is not None and until != "":
            where.append("r.started_epoch <= ?")
            params.append(q.parse_when(until, what="--until time"))
        if test:
            if "*" in test:
                where.append("EXISTS (SELECT 1 FROM tests t WHERE t.run_id = r.id AND t.name LIKE ? ESCAPE '!')")
                params.append(test.replace("!", "!!").replace("%", "!%").replace("_", "!_").replace("*", "%"))
            else:
                where.append("EXISTS (SELECT 1 FROM tests t WHERE t.run_id = r.id AND t.name = ?)")
                params.append(test)
        if complete is not None:
            where.append("r.complete = ?")
            params.append(int(bool(complete)))
        if source:
            where.append("r.source = ?")
            params.append(source)
        sql = "SELECT r.document FROM runs r"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if order_by in ("started", "-started", None) and (limit is not None or offset):
            desc = " DESC" if order_by == "-started" else ""
            sql += f" ORDER BY r.started_epoch{desc}, r.id{desc} LIMIT ? OFFSET ?"
            rows = self._run("reading results", self._db.execute, sql, [*params, 2 ** 62 if limit is None else int(limit),
                                                                        int(offset)])
            return [self._load(r[0]) for r in rows]
        sql += " ORDER BY r.started_epoch, r.id"
        rows = self._run("reading results", self._db.execute, sql, params)
        out = [self._load(r[0]) for r in rows]
        out = q.sort_results(out, order_by)[offset:]
        return out[:limit] if limit is not None else out

    def results_of_cards(self, identities: list[str]) -> list[Result]:
        """The runs of exactly these cards (by identity, not by matching words), oldest first."""
        idents = [str(i) for i in dict.fromkeys(identities)]
        if not idents:
            return []
        rows = self._run("reading results", self._db.execute,
                         "SELECT r.document FROM runs r JOIN cards c ON c.id = r.card_id WHERE c.identity IN "
                         f"({', '.join('?' * len(idents))}) ORDER BY r.started_epoch, r.id", idents)
        return [self._load(r[0]) for r in rows]

    def _load(self, text: str) -> Result:
        try:
            return Result.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(f"results database {self.url}: a stored result cannot be read: {first_line(e)}") from None

    def get(self, run_id: str) -> Result:
        """The result with this id (or a unique prefix of at least 4 characters of it)."""
        run_id = str(run_id).strip()
        rows = self._run("reading a result", self._db.execute,
                         "SELECT document FROM runs WHERE result_id = ?", (run_id,))
        # a prefix is at most a whole id (a uuid); a longer text is no prefix (nor a LIKE pattern too long)
        if not rows and 4 <= len(run_id) <= 36 and all(c in "0123456789abcdefABCDEF-" for c in run_id):
            rows = self._run("reading a result", self._db.execute,
                             "SELECT document FROM runs WHERE result_id LIKE ?", (run_id.lower() + "%",))
            if len(rows) > 1:
                raise UsageError(f"run id prefix {run_id!r} matches {len(rows)} runs; give more of it")
        if not rows:
            raise NotFound(f"no run with id {run_id!r} in {self.url}")
        return self._load(rows[0][0])

    def count(self) -> int:
        return int(self._run("counting runs", self._db.execute, "SELECT COUNT(*) FROM runs")[0][0])

    def check(self) -> list[str]:
        """Consistency problems (empty when fine): every run's rows agree with its document."""
        problems: list[str] = []
        rows = self._run("checking", self._db.execute,
                         "SELECT r.id, r.result_id, r.n_tests, r.n_samples, r.document, "
                         "(SELECT COUNT(*) FROM tests t WHERE t.run_id = r.id), "
                         "(SELECT COUNT(*) FROM samples s WHERE s.run_id = r.id) FROM runs r")
        for _pk, rid, n_tests, n_samples, doc, got_tests, got_samples in rows:
            res = self._load(doc)
            want_samples = sum(len(t.runs) + len(t.warmup) for t in res.tests)
            if res.id != rid:
                problems.append(f"run {rid}: document id is {res.id}")
            if (n_tests, got_tests) != (len(res.tests),) * 2:
                problems.append(f"run {rid}: {got_tests} test rows, document has {len(res.tests)}")
            if (n_samples, got_samples) != (want_samples,) * 2:
                problems.append(f"run {rid}: {got_samples} sample rows, document has {want_samples}")
        orphans = self._run("checking", self._db.execute,
                            "SELECT COUNT(*) FROM samples s WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id)")
        if orphans[0][0]:
            problems.append(f"{orphans[0][0]} sample rows belong to no run")
        return problems

    # -- every other kind of record (cardbench.kinds) ------------------------------------------

    def save_record(self, item: Any, kind: str | None = None) -> str:
        """Save (or replace, by id) one record of any kind (a Result, a verify, probe or session
        document, or a kind registered later) in its own transaction; returns its id. ``kind``:
        the kind it must be (``"verify"``), else a UsageError. A document without an ``id`` is
        given one (in the stored copy; the caller's dict is not changed)."""
        if kind is not None:
            want = kinds.kind_named(kind)
            if want.item_type is not dict and not isinstance(item, want.item_type):
                raise UsageError(f"can only save a {want.item_type.__name__}, not {type(item).__name__}")
            if want.item_type is dict and (not isinstance(item, dict) or item.get("schema") != want.schema):
                got = item.get("schema") if isinstance(item, dict) else type(item).__name__
                raise UsageError(f"not a {want.schema} document (schema={got!r})")
        if isinstance(item, Result):
            return self.save(item)
        k, doc, text = self._prepare(item)

        def tx():
            with self._db.transaction():
                self._write_document(k, doc, text)
        self._run(f"saving a {k.noun}", tx, retry=True)
        return str(doc["id"])

    def save_verify(self, doc: dict) -> str:
        """Save a ``cardbench.verify/1`` document (fake-capacity verdict); returns its id.

        The document's ``card`` / ``reader`` (dicts as in a result) link it to cards and readers;
        a missing ``id`` is given one (in the stored copy; the caller's dict is not changed).
        """
        return self.save_record(doc, "verify")

    def save_probe(self, doc: dict) -> str:
        """Save a ``cardbench.probe/1`` document (cards read at once; see ``cardbench.evidence``);
        returns its id. Its ``reader`` and each device's ``card`` link it to readers and cards."""
        return self.save_record(doc, "probe")

    def save_session(self, doc: dict) -> str:
        """Save a ``cardbench.session/1`` document (a drawer session); returns its id."""
        return self.save_record(doc, "session")

    def _prepare(self, item: Any) -> tuple[kinds.Kind, Any, str]:
        """(kind, the document, its JSON text) of an item to store; a document is copied and given
        an ``id`` when it has none. UsageError when it is no kind's or cannot be JSON."""
        k = kinds.kind_of(item)
        if k.table.native:
            doc = item.to_dict()
            return k, doc, _document_text(doc, f"{k.noun} {item.id}")
        doc = dict(item)
        doc.setdefault("id", uuid.uuid4().hex)
        return k, doc, _document_text(doc, k.noun)

    def _write_document(self, k: kinds.Kind, doc: dict, text: str) -> None:
        """The rows of one document (inside the caller's transaction), as its kind's Table says:
        its row (replacing the one of the same id), its card and reader upserted, its links."""
        t = k.table
        rid = str(doc["id"])
        owner = " AND kind = ?" if t.kind_column else ""
        self._db.execute(f"DELETE FROM {t.name} WHERE {t.id_column} = ?{owner}", (rid, k.name) if owner else (rid,))
        created = k.created(doc)
        cols: list[tuple[str, Any]] = [(t.id_column, rid)]
        if t.kind_column:
            cols.append(("kind", k.name))
        card, reader = doc.get("card"), doc.get("reader")
        if t.card_column:
            cols.append(("card_id", self._upsert_card(Card.from_dict(card)) if isinstance(card, dict) and card else None))
        if t.reader_column:
            cols.append(("reader_id", self._upsert_reader(Reader.from_dict(reader))
                         if isinstance(reader, dict) and reader else None))
        cols += [(t.time_column.replace("_epoch", "_at"), created), (t.time_column, q.epoch_of_iso(created))]
        cols += [(name, fn(doc)) for name, fn in t.columns]
        if t.kind_column:
            cols.append(("summary", _summary(k, doc)))
        cols += [("schema", k.schema), ("document", text), ("saved_at", _now_iso())]
        self._db.execute(f"INSERT INTO {t.name} ({', '.join(c for c, _ in cols)}) "
                         f"VALUES ({', '.join('?' * len(cols))})", [v for _, v in cols])
        if not t.card_column:
            self._link_cards(k.name, rid, k.cards(doc))

    def _link_cards(self, kind: str, rid: str, links: list) -> None:
        self._db.execute("DELETE FROM record_cards WHERE kind = ? AND record_id = ?", (kind, rid))
        rows: list[Any] = []
        for pos, (card, reader) in enumerate(links):
            card_id = self._upsert_card(Card.from_dict(card)) if isinstance(card, dict) else None
            reader_id = self._upsert_reader(Reader.from_dict(reader)) if isinstance(reader, dict) else None
            rows.append((kind, rid, pos, card_id, reader_id))
        if rows:
            self._db.executemany("INSERT INTO record_cards (kind, record_id, position, card_id, reader_id) "
                                 "VALUES (?, ?, ?, ?, ?)", rows)

    def save_all(self, items: list, *, before=None) -> list[str]:
        """Save records of any kinds (results, verify, probe, session documents, ...) in ONE
        transaction: all or nothing (``cardbench import`` of an export). Each replaces what has its
        id. Returns the ids. ``before(backend, kinds_and_ids)``, when given, runs first inside that
        transaction (the station server's check of who may write these ids); what it raises undoes
        everything; what it returns, ("card" | "reader", identity) pairs, are the cards and readers
        whose rows these records may not rename (inserted if new, else left as they are)."""
        items = list(items)
        prepared = []
        for it in items:
            try:
                kinds.kind_of(it)
            except UsageError:
                got = it.get("schema") if isinstance(it, dict) else type(it).__name__
                nouns = [k.noun for k in kinds.kinds()]
                raise UsageError(f"cannot store {got!r}: not a {', '.join(nouns[:-1])} or {nouns[-1]}") from None
            prepared.append(self._prepare(it))

        def tx():
            with self._db.batch_transaction():
                self._kept_names = frozenset()
                if before is not None:
                    self._kept_names = frozenset(before(self._db, [(k.name, str(doc["id"])) for k, doc, _ in prepared])
                                                 or ())
                try:
                    results: list = []          # consecutive results, saved as one batch
                    for (k, doc, text), it in zip(prepared, items, strict=True):
                        if k.table.native:
                            results.append((it, doc, text))
                            continue
                        self._save_results(results)
                        results = []
                        self._write_document(k, doc, text)
                    self._save_results(results)
                finally:
                    self._kept_names = frozenset()
        self._run(f"saving {len(prepared)} records", tx, retry=True)
        return [str(doc["id"]) for _, doc, _ in prepared]

    def stored_document(self, kind: str, rid: str) -> dict | None:
        """The stored document of one record (kind: result, verify, probe, session, ...), or None."""
        t = kinds.kind_named(kind).table
        owner = " AND kind = ?" if t.kind_column else ""
        rows = self._run("reading a record", self._db.execute,
                         f"SELECT document FROM {t.name} WHERE {t.id_column} = ?{owner}",
                         (str(rid), kind) if owner else (str(rid),))
        return json.loads(rows[0][0]) if rows else None

    def _ids_for(self, what: str, text: str | None) -> list | None:
        if not text:
            return None
        rows = self.cards() if what == "card" else self.readers()
        match = q.card_matches if what == "card" else q.reader_matches
        return [r["id"] for r in rows if match(r, text)]

    def records(self, kind: str, card: str | None = None, reader: str | None = None, since: Any = None,
                until: Any = None) -> list:
        """Stored records of one kind, oldest first: of a matching card and reader (each through
        its kind's ``card_id`` / ``reader_id`` column, else the cards it names), made at or after
        ``since`` / at or before ``until``. Documents as dicts; results as Results (``results``
        has the run filters)."""
        k = kinds.kind_named(kind)
        if k.table.native:
            return self.results(card=card, reader=reader, since=since, until=until)
        t = k.table
        where: list[str] = []
        params: list[Any] = []
        if t.kind_column:
            where.append("kind = ?")
            params.append(k.name)
        for what, text, column in (("card", card, t.card_column), ("reader", reader, t.reader_column)):
            ids = self._ids_for(what, text)
            if ids is None:
                continue
            if not ids:
                return []
            marks = ", ".join("?" * len(ids))
            where.append(f"{what}_id IN ({marks})" if column else
                         f"EXISTS (SELECT 1 FROM record_cards c WHERE c.kind = ? AND c.record_id = {t.name}.{t.id_column} "
                         f"AND c.{what}_id IN ({marks}))")
            params += ids if column else [k.name, *ids]
        if since is not None and since != "":
            where.append(f"{t.time_column} >= ?")
            params.append(q.parse_when(since, what="--since time"))
        if until is not None and until != "":
            where.append(f"{t.time_column} <= ?")
            params.append(q.parse_when(until, what="--until time"))
        sql = f"SELECT document FROM {t.name}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY COALESCE({t.time_column}, 0), id"     # NULLs first in both SQLite and PostgreSQL
        rows = self._run(f"reading {k.noun}s", self._db.execute, sql, params)
        return [json.loads(r[0]) for r in rows]

    def probes(self, card: str | None = None, reader: str | None = None, since: Any = None,
               until: Any = None) -> list[dict]:
        """Stored ``cardbench.probe/1`` documents, oldest first: of a matching reader, with a
        matching card among its devices, made at or after ``since`` / before ``until``."""
        return self.records("probe", card=card, reader=reader, since=since, until=until)

    def sessions(self, card: str | None = None, reader: str | None = None, since: Any = None,
                 until: Any = None) -> list[dict]:
        """Stored ``cardbench.session/1`` documents, oldest first: holding a matching card, or a
        card read through a matching reader, started at or after ``since`` / before ``until``."""
        return self.records("session", card=card, reader=reader, since=since, until=until)

    def verify_results(self, card: str | None = None, reader: str | None = None, since: Any = None,
                       until: Any = None) -> list[dict]:
        """Stored verify documents, oldest first, optionally for matching cards / readers, made at
        or after ``since`` / at or before ``until``."""
        return self.records("verify", card=card, reader=reader, since=since, until=until)


def _once(rows: list[tuple]) -> list[tuple]:
    """Upsert rows (identity first) without those equal to the previous row of the same identity:
    upserting it again changes nothing, so the rows stored are the same (and so are their ids)."""
    last: dict[Any, tuple] = {}
    out = []
    for r in rows:
        if last.get(r[0]) != r:
            out.append(r)
            last[r[0]] = r
    return out


def _summary(k: kinds.Kind, doc: dict) -> str | None:
    """A kind's one line, for the ``summary`` column (a document its summary cannot read: none)."""
    try:
        return str(k.summary(doc))
    except (TypeError, ValueError, KeyError, AttributeError, IndexError):
        return None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else _dumps(v)
