"""The two databases a store can live in: a SQLite file (stdlib) and PostgreSQL (psycopg 3).

A backend hides only what differs between them: connecting, placeholders, transactions,
auto-numbered ids, catalogue queries and which errors are worth a retry. SQL in the store is
written once, with ``?`` placeholders and portable syntax (``ON CONFLICT ... DO UPDATE``,
``||``, ``COALESCE``).
"""

from __future__ import annotations

import functools
import re
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import quote

from cardbench.errors import StoreError
from cardbench.store.schema import APP, SQLITE_APPLICATION_ID, TABLES

SQLITE_MAGIC = b"SQLite format 3\x00"
#: How many values one ``IN (...)`` list holds (SQLite's limit on parameters was 999 before 3.32).
IN_CHUNK = 900
#: How long a writer waits for another one before giving up (SQLite busy timeout).
BUSY_TIMEOUT_S = 30.0
#: PostgreSQL: seconds per connection try, how many tries, the first pause between them (doubling):
#: a server that restarts within ~4 s is waited for; longer, and the result goes to the outbox.
CONNECT_TIMEOUT_S = 5
CONNECT_ATTEMPTS = 4
CONNECT_BACKOFF_S = 0.5
#: A server's pool of PostgreSQL connections (PostgresPool): how many at most (the threads that
#: write at once; PostgreSQL's default max_connections is 100) and how many kept open when idle.
POOL_MAX = 10
POOL_MIN = 2
#: How long a call waits for a pooled connection (all busy, or the server restarting) before the
#: store fails (the station server answers 503; the station's outbox keeps its record).
POOL_WAIT_S = 10.0
#: the longest a pooled connection "idle at once" (PostgresPool.take(wait_s=0)) is waited for
NOW_S = 0.002


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def redact_url(url: str) -> str:
    """postgresql://user:secret@host/db -> postgresql://user:***@host/db (for messages)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


class Backend:
    kind: str = ""
    location: str = ""
    error_types: tuple[type[BaseException], ...] = ()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT into a table with an ``id`` primary key and return the new id."""
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[None]:
        raise NotImplementedError
        yield

    @contextmanager
    def batch_transaction(self) -> Iterator[None]:
        """A transaction for many statements in a row (a batch save): PostgreSQL sends them
        pipelined, waiting for the server only where a result is read (or at the commit)."""
        with self.transaction():
            yield

    def send(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run a statement whose answer is not read (in a pipeline: not waited for)."""
        self.execute(sql, params)

    def key(self, text: str) -> str:
        """``text`` as the database gives it back when it was written as a parameter."""
        return text

    def rows_in(self, sql: str, values: Sequence[Any], params: Sequence[Any] = ()) -> list[tuple]:
        """``sql`` with ``{in}`` standing for "IN (values)", run in chunks of IN_CHUNK values
        after ``params``; the rows of every chunk."""
        out: list[tuple] = []
        values = list(values)
        for k in range(0, len(values), IN_CHUNK):
            part = values[k:k + IN_CHUNK]
            out += self.execute(sql.replace("{in}", "IN (" + ", ".join("?" * len(part)) + ")"), [*params, *part])
        return out

    def lock_for_migration(self) -> None:
        """Inside a transaction: keep other processes from migrating at the same time."""

    def table_names(self) -> set[str]:
        raise NotImplementedError

    def check_not_foreign(self) -> None:
        """Refuse a database another program made (a read-only look: it is left as it was)."""
        raise NotImplementedError

    def column_names(self, table: str) -> set[str]:
        raise NotImplementedError

    #: False: a failure is answered at once, never waited on (no reconnect or retry; Store._run)
    patient = True

    def is_retryable(self, exc: BaseException) -> bool:
        """A conflict with another writer: the same statements, tried again, may pass."""
        return False

    def is_disconnect(self, exc: BaseException) -> bool:
        """The connection is gone (a server restarted, the network dropped): reconnect, then retry."""
        return False

    def reconnect(self) -> None:
        raise NotImplementedError

    #: how a refusal ends: what the person can do instead
    other_place = "choose another database"

    def check_schema_version(self) -> None:
        """The one check of a ``schema_version`` table (both backends): it is cardbench's (its
        columns) and it is empty (being created) or holds cardbench's rows."""
        if not {"app", "version"} <= self.column_names("schema_version"):
            raise StoreError(f"{self.location} has a schema_version table that is not cardbench's; "
                             f"{self.other_place}")
        total, ours = self.execute("SELECT COUNT(*), SUM(CASE WHEN app = ? THEN 1 ELSE 0 END) FROM schema_version",
                                   (APP,))[0]
        if total and not ours:
            raise StoreError(f"{self.location} has a schema_version table of another program; {self.other_place}")

    def close(self) -> None:
        raise NotImplementedError


class SQLiteBackend(Backend):
    """A SQLite file in WAL mode with a busy timeout, so two writers both get their turn."""

    kind = "sqlite"
    other_place = "choose another path with --db"
    # a damaged file can hold text that is not UTF-8: sqlite3 raises UnicodeDecodeError reading it
    error_types = (sqlite3.Error, UnicodeDecodeError)

    def __init__(self, path: str | Path, *, create: bool = True, reading: bool = False):
        p = Path(path).expanduser()
        self.path = p
        self.location = str(p)
        if p.is_dir():
            raise StoreError(f"cannot open results database {p}: it is a directory")
        if not p.parent.is_dir():
            raise StoreError(f"cannot open results database {p}: directory {p.parent} does not exist")
        if not create and not p.exists():
            raise StoreError(f"no results database at {p}: nothing has been stored there (check --db or $CARDBENCH_DB)")
        existing = p.exists() and p.stat().st_size > 0
        if existing:
            try:
                with open(p, "rb") as f:
                    head = f.read(len(SQLITE_MAGIC))
            except OSError as e:
                raise StoreError(f"cannot read results database {p}: {e.strerror or first_line(e)}") from None
            if head != SQLITE_MAGIC:
                raise StoreError(f"{p} is not a SQLite database (not a cardbench results file); "
                                 "choose another path with --db")
        try:
            self.conn = sqlite3.connect(str(p), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open results database {p}: {first_line(e)}") from None
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if existing:
                # Read-only look first: a foreign database must be left exactly as it was.
                self.check_not_foreign()
            mode = self._switch_to_wal()
            if mode and str(mode[0]).lower() != "wal":
                raise StoreError(f"results database {p}: cannot switch to WAL journal mode (got {mode[0]})")
            self.conn.execute("PRAGMA foreign_keys = ON")
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:
            self.conn.close()
            if not (reading and existing and _unwritable(e)):
                raise StoreError(f"cannot open results database {p}: {first_line(e)}") from None
            self._open_immutable(e)
        except BaseException:
            self.conn.close()
            raise

    def _open_immutable(self, why: BaseException) -> None:
        """For a command that only reads: a store whose file system is full or read-only (SQLite
        cannot make its shared-memory file there) is read as it was last checkpointed, untouched."""
        try:
            self.conn = sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?immutable=1", uri=True)
            self.check_not_foreign()
        except (sqlite3.DatabaseError, UnicodeDecodeError):
            raise StoreError(f"cannot open results database {self.path}: {first_line(why)}") from None

    def _switch_to_wal(self):
        """PRAGMA journal_mode=WAL, retried: while another process creates the same new file,
        SQLite answers "database is locked" at once here, without waiting on the busy timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return self.conn.execute("PRAGMA journal_mode = WAL").fetchone()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def check_not_foreign(self) -> None:
        app_id = self.conn.execute("PRAGMA application_id").fetchone()[0]
        names = self.table_names()
        if app_id not in (0, SQLITE_APPLICATION_ID):
            raise StoreError(f"{self.path} is a SQLite database of another program "
                             f"(application id {app_id:#x}); choose another path with --db")
        if names and "schema_version" not in names:
            shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
            raise StoreError(f"{self.path} is a SQLite database of another program (tables {shown}); "
                             "choose another path with --db")
        if "schema_version" in names:
            self.check_schema_version()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self.conn.execute(sql, tuple(params)).fetchall()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        cur = self.conn.execute(sql, tuple(params))
        if cur.lastrowid is None:
            raise StoreError(f"{self.location}: no row id after {sql.split('(')[0].strip()}")
        return cur.lastrowid

    @contextmanager
    def transaction(self) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front (waiting up to the busy timeout), so two writers
        # queue instead of failing with "database is locked" when a reader upgrades.
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    def set_application_id(self) -> None:
        self.conn.execute(f"PRAGMA application_id = {SQLITE_APPLICATION_ID}")

    def table_names(self) -> set[str]:
        rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                 "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").fetchall()
        return {r[0] for r in rows}

    def column_names(self, table: str) -> set[str]:
        return {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})").fetchall()}

    def is_retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower()

    def close(self) -> None:
        self.conn.close()


def _unwritable(exc: BaseException) -> bool:
    """SQLite's words for a file system that takes nothing more (full, read-only)."""
    text = str(exc).lower()
    return any(w in text for w in ("disk i/o error", "unable to open database file", "readonly", "read-only",
                                   "disk is full"))


class PostgresBackend(Backend):
    """A PostgreSQL database (psycopg 3), tables in the connection's current schema."""

    kind = "postgresql"
    other_place = "use another database or schema"
    #: pg_advisory_xact_lock key for "cardbench migrating" (any fixed 64-bit number).
    MIGRATION_LOCK = 0x43424E43_5354_4F52 & 0x7FFFFFFFFFFFFFFF

    def __init__(self, url: str, pool: "PostgresPool | None" = None, *, patient: bool = True):
        """``pool``: the connection is taken from it (and given back by ``close``), not made.
        ``patient`` False (with a pool): only a connection idle at once, and no reconnect or
        retry after a failure (``Backend.patient``)."""
        self.location = redact_url(url)
        try:   # function-level: psycopg is the optional postgres extra; without it, one line
            import psycopg
            import psycopg.errors
        except ImportError:
            raise StoreError("PostgreSQL support is not installed: pip install 'cardbench[postgres]'") from None
        self.psycopg = psycopg
        self.error_types = (psycopg.Error,)
        self._url = url
        self.pool = pool
        self.patient = patient or pool is None
        self.conn = (pool.take() if patient else pool.take(wait_s=0)) if pool is not None else self._connect()

    def _connect(self):
        """Connect, with a timeout per try (``connect_timeout`` in the URL wins), and try again
        with backoff while the server is unreachable, starting up or shutting down (bounded:
        CONNECT_ATTEMPTS tries, CONNECT_BACKOFF_S apart and doubling)."""
        psycopg = self.psycopg
        kw = {} if "connect_timeout" in self._url else {"connect_timeout": CONNECT_TIMEOUT_S}
        delay = CONNECT_BACKOFF_S
        attempt = 1
        while True:
            try:
                return psycopg.connect(self._url, autocommit=True, **kw)
            except psycopg.Error as e:
                if attempt >= CONNECT_ATTEMPTS or not self._may_come_back(e):
                    raise StoreError(f"cannot connect to {self.location}: {first_line(e)}") from None
            time.sleep(delay)
            delay *= 2
            attempt += 1

    def _may_come_back(self, exc: BaseException) -> bool:
        """A connection failure worth waiting for (not a wrong password, user or database)."""
        text = str(exc).lower()
        return isinstance(exc, self.psycopg.OperationalError) and not any(
            w in text for w in ("authentication", "password", "does not exist", "no pg_hba", "permission denied"))

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def _sql(sql: str) -> str:
        """``?`` placeholders as PostgreSQL's own (``$1``, ``$2``...), for psycopg's RawCursor
        (:meth:`_cursor`): a statement goes out as written, not parsed for ``%s`` on every call
        (psycopg keeps that parse only for statements of at most 50 parameters, and a multi-row
        insert has more)."""
        parts = sql.split("?")
        return parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], 1))

    def _cursor(self):
        return self.psycopg.RawCursor(self.conn)

    @staticmethod
    def _params(params: Sequence[Any]) -> tuple:
        # PostgreSQL text cannot hold NUL; documents are JSON (NUL escaped), so only index columns see this.
        return tuple(p.replace("\x00", "\ufffd") if isinstance(p, str) else p for p in params)

    #: the pipeline of a batch_transaction under way (None: each statement waits for its answer)
    _pipe = None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        cur = self._cursor().execute(self._sql(sql), self._params(params) if params else None)
        if self._pipe is not None:
            self._pipe.sync()       # the answer is read: wait for it (and for what was sent before)
        return cur.fetchall() if cur.description is not None else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """An ``INSERT ... VALUES (row)`` (not one that updates on conflict) is sent as ONE
        statement of up to :data:`MULTI_ROWS` rows (``VALUES (row), (row), ...``): a statement
        costs the server and psycopg more than a row does; others a statement a row."""
        if not rows:
            return
        multi = _multi_row(sql) if len(rows) > 1 else None
        if multi is None:
            with self._cursor() as cur:
                cur.executemany(self._sql(sql), [self._params(r) for r in rows])
            return
        head, row, tail = multi
        for k in range(0, len(rows), MULTI_ROWS):
            part = rows[k:k + MULTI_ROWS]
            self._cursor().execute(self._sql(f"{head}{', '.join([row] * len(part))}{tail}"),
                                   [v for r in part for v in self._params(r)])

    def insert(self, sql: str, params: Sequence[Any]) -> int:
        cur = self._cursor().execute(self._sql(sql + " RETURNING id"), self._params(params))
        if self._pipe is not None:
            self._pipe.sync()
        return int(cur.fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    @contextmanager
    def batch_transaction(self) -> Iterator[None]:
        # pipeline mode (psycopg >= 3.1, libpq >= 14): BEGIN, the statements whose answers are not
        # read (send, executemany) and COMMIT go out without a round trip each; a read waits.
        if not self.psycopg.Pipeline.is_supported():
            with self.conn.transaction():
                yield
            return
        with self.conn.pipeline() as pipe, self.conn.transaction():
            self._pipe = pipe
            try:
                yield
            finally:
                self._pipe = None

    def send(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._cursor().execute(self._sql(sql), self._params(params) if params else None)

    def key(self, text: str) -> str:
        return text.replace("\x00", "\ufffd") if isinstance(text, str) else text

    def rows_in(self, sql: str, values: Sequence[Any], params: Sequence[Any] = ()) -> list[tuple]:
        values = list(values)
        if not values:
            return []
        return self.execute(sql.replace("{in}", "= ANY(?)"), [*params, [self.key(v) for v in values]])

    def lock_for_migration(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.MIGRATION_LOCK,))

    def table_names(self) -> set[str]:
        rows = self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()").fetchall()
        return {r[0] for r in rows}

    def column_names(self, table: str) -> set[str]:
        rows = self.conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s", (table,)).fetchall()
        return {r[0] for r in rows}

    def check_not_foreign(self) -> None:
        names = self.table_names()
        ours = set(TABLES) & names
        if ours and "schema_version" not in names:
            raise StoreError(f"{self.location} already has tables named {', '.join(sorted(ours))} that are not "
                             "cardbench's; use another database or schema")
        if "schema_version" in names:
            self.check_schema_version()

    def is_retryable(self, exc: BaseException) -> bool:
        e = self.psycopg.errors
        return isinstance(exc, (e.SerializationFailure, e.DeadlockDetected, e.UniqueViolation))

    def is_disconnect(self, exc: BaseException) -> bool:
        return isinstance(exc, self.psycopg.OperationalError) or bool(self.conn.broken or self.conn.closed)

    def reconnect(self) -> None:
        if self.pool is not None:
            conn, self.conn = self.conn, None
            self.pool.give_back(conn, broken=True)
            self.conn = self.pool.take()
            return
        try:
            self.conn.close()
        except self.psycopg.Error:
            pass
        self.conn = self._connect()

    def close(self) -> None:
        if self.pool is not None:
            conn, self.conn = self.conn, None
            if conn is not None:
                self.pool.give_back(conn)
            return
        self.conn.close()


#: rows a multi-row INSERT carries at most: a record's samples (about a dozen) in one statement,
#: and a batch's in statements of one text, which psycopg prepares after 5 uses.
#: bench/store_rows.py: 50 records a save took 1.16-1.30 times the records/s of a statement a row
#: at 20, and 0.40-0.49 times at 200 (each sample row's two subqueries are subplans to plan
#: afresh for each new text); one record a save took the same at any size.
MULTI_ROWS = 20
_VALUES = re.compile(r"^(INSERT INTO \w+ \([\w, ]+\) VALUES )(\(.*\))((?: ON CONFLICT \([\w, ]+\) DO NOTHING)?)$",
                     re.DOTALL)


@functools.lru_cache(maxsize=256)
def _multi_row(sql: str) -> tuple[str, str, str] | None:
    """(head, the row's parentheses, tail) of ``INSERT INTO t (cols) VALUES (row)``, plain or
    ending in ``ON CONFLICT (cols) DO NOTHING``; None for any other statement."""
    m = _VALUES.match(sql)
    if m is None:
        return None
    depth = 0
    for k, ch in enumerate(m.group(2)):         # one row: its first parenthesis closes at its end
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and k != len(m.group(2)) - 1:
            return None
    return m.group(1), m.group(2), m.group(3)


class PostgresPool:
    """Connections to one PostgreSQL database shared by a server's threads (psycopg_pool): a call
    takes one (:meth:`take`, through a :class:`PostgresBackend` made with ``pool=``) and gives it
    back when done, so a few connections serve any number of threads, stay open between requests
    and keep their prepared statements (psycopg prepares a query it has run 5 times). A connection
    given back in a transaction (an error inside one) is rolled back by the pool; one that broke
    (the server restarted) is replaced, and the others are checked at once."""

    def __init__(self, url: str, *, min_size: int = POOL_MIN, max_size: int = POOL_MAX,
                 wait_s: float = POOL_WAIT_S):
        self.location = redact_url(url)
        try:   # function-level: psycopg_pool is in the optional postgres extra; without it, one line
            import psycopg_pool
        except ImportError:
            raise StoreError("the server's PostgreSQL pool is not installed: pip install 'cardbench[postgres]' "
                             "(psycopg_pool is missing)") from None
        kw: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in url:
            kw["connect_timeout"] = CONNECT_TIMEOUT_S
        self.wait_s = wait_s
        self.pool = psycopg_pool.ConnectionPool(url, kwargs=kw, min_size=min(min_size, max_size), max_size=max_size,
                                                open=False,
                                                timeout=wait_s, name="cardbench")
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * CONNECT_ATTEMPTS)
        except psycopg_pool.PoolTimeout:
            self.pool.close()
            raise StoreError(f"cannot connect to {self.location}: no connection within "
                             f"{CONNECT_TIMEOUT_S * CONNECT_ATTEMPTS} s") from None

    def take(self, wait_s: float | None = None):
        """A connection, waiting up to ``wait_s`` (the pool's when None; 0: only one idle now)
        for one (StoreError then)."""
        import psycopg  # function-level: the optional postgres extra (PostgresBackend checked it)
        try:
            # psycopg_pool refuses a timeout of 0 before looking: "at once" is a wait of NOW_S
            return self.pool.getconn(timeout=self.wait_s if wait_s is None else max(wait_s, NOW_S))
        except psycopg.Error as e:        # PoolTimeout, PoolClosed: OperationalErrors
            raise StoreError(f"cannot connect to {self.location}: {first_line(e)}") from None

    def give_back(self, conn, *, broken: bool = False) -> None:
        """Return ``conn``; ``broken``: it failed as a lost connection does, so every idle one is
        checked now (after a server restart they all are broken) instead of handed out to fail."""
        if broken:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection is dropped either way
                pass
        self.pool.putconn(conn)
        if broken:
            self.pool.check()

    def stats(self) -> dict[str, int]:
        """psycopg_pool's counters (pool_size, pool_available, requests_num, connections_num, ...)."""
        return dict(self.pool.get_stats())

    def close(self) -> None:
        self.pool.close()
