"""The registry in a PostgreSQL database, for a team: `--registry postgresql://user@host/db`.

Same tables, migrations and SQL as SQLite (schema.py, queries.py, writes.py); the schema version
lives in a one-row table because PostgreSQL has no `PRAGMA user_version`.

Concurrency: every write transaction runs under READ COMMITTED and takes one transaction-level
advisory lock as its first statement. Writers therefore queue one at a time, as SQLite's
`BEGIN IMMEDIATE` makes them, and since each later statement takes a fresh snapshot, a writer
reads every commit made before it got the lock: upsert's read-merge-write cannot lose an
update, and no writer ever fails with a serialization error that would need the caller's
`transaction()` body replayed. The lock ends with the transaction, and with the session when a
writer dies. Reads run REPEATABLE READ READ ONLY: a record, its locations and its lineage come
from one snapshot, and readers never wait for writers.

The URL's password never leaves this module: `path` (shown in messages and --json) is the URL
with the password replaced by ***, and the driver's error text is scrubbed of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from .base import SQLStore
from .errors import NoRegistry, RegistryError
from .paths import ENV_VAR
from .schema import MIGRATIONS, SCHEMA_VERSION, for_postgres

VERSION_TABLE = "eagle3_registry_version"  # one row: the schema version, as SQLite's user_version
WRITE_LOCK = 0x6561676C65330001  # pg_advisory_xact_lock key every writer takes ("eagle3" + 1)
INSTALL_HINT = "pip install 'eagle3-convert[postgresql]'"
_SECRET_KEYS = {"password", "passfile", "sslpassword"}


def redact(url: str) -> str:
    """`url` with its password (in the authority or the query) replaced by ***."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
        query = urlencode([(k, "***" if k.lower() in _SECRET_KEYS else v) for k, v in parse_qsl(parts.query)],
                          safe="*")
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:  # unparsable (a bad port, say): keep only the scheme
        return url.split("://", 1)[0] + "://***"


def _secrets(url: str) -> list[str]:
    """The spellings of the URL's password that an error message could carry."""
    found: list[str] = []
    with suppress(ValueError):
        parts = urlsplit(url)
        userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
        found += [v for k, v in parse_qsl(parts.query) if k.lower() in _SECRET_KEYS]
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """`text` in one line, without the URL or its password."""
    text = text.replace(url, redact(url))
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return re.sub(r"\s+", " ", text).strip()


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise RegistryError("a postgresql:// registry needs the psycopg driver, which is not installed",
                            hint=f"{INSTALL_HINT}, or give a file path for an SQLite registry") from None
    return psycopg


class _Row(tuple):  # type: ignore[type-arg]
    """A row read by index or by column name, as sqlite3.Row is."""

    names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self.names[key] if isinstance(key, str) else key)


def _rows(cursor: Any) -> Any:
    names = {column.name: i for i, column in enumerate(cursor.description or ())}

    def make(values: Any) -> _Row:
        row = _Row(values)
        row.names = names
        return row

    return make


class _Connection:
    """A psycopg connection speaking the shared SQL: `?` placeholders (none of it has a literal ? or %)."""

    insertion_order = "ctid"  # queries.load's tie-break (SQLite: rowid)

    def __init__(self, raw: Any):
        self.raw = raw

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.raw.execute(sql.replace("?", "%s"), tuple(params) or None)


class PostgresStore(SQLStore):
    """The registry in one PostgreSQL database, safe for many processes and machines at once."""

    def __init__(self, url: str, *, timeout: float = 30.0, create: bool = True):
        self._url = url
        self._create = create
        self.path = redact(url)
        self.timeout = timeout
        self._conn: _Connection | None = None
        psycopg = _psycopg()
        self._driver = psycopg
        with self._errors():
            raw = psycopg.connect(url, autocommit=True, connect_timeout=max(2, min(int(timeout), 10)),
                                  application_name="eagle3-convert", row_factory=_rows)
        self._conn = _Connection(raw)
        try:
            with self._errors():
                # A writer waits this long for the write lock (or a migration's table locks), as busy_timeout.
                raw.execute("SELECT set_config('lock_timeout', %s, false)", (f"{int(timeout * 1000)}ms",))
                self._migrate()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r})"

    # -- plumbing ---------------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except self._driver.Error as exc:
            # `from None`: the driver's exception may carry the password in its text.
            raise self._translate(exc) from None

    def _translate(self, exc: Any) -> RegistryError:
        primary = getattr(getattr(exc, "diag", None), "message_primary", None)  # without the LINE 1: context
        text = scrub(primary or str(exc), self._url) or type(exc).__name__
        state = getattr(exc, "sqlstate", None) or ""
        where = f"the registry {self.path}"
        if state == "55P03" or "lock timeout" in text:
            return RegistryError(f"{where} stayed locked by another writer for {self.timeout:g} s",
                                 hint="retry when the other eagle3-convert has finished, or give a longer timeout")
        if state in ("28P01", "28000") or "authentication failed" in text:
            return RegistryError(f"{where} refused the login: {text}",
                                 hint="check the user and password in the URL (or PGPASSWORD, ~/.pgpass)")
        if state == "3D000" or (self._conn is None and "does not exist" in text):
            return RegistryError(f"{where} names a database the server does not have: {text}",
                                 hint="create it first (createdb NAME), or point --registry at an existing database")
        if state == "42501":
            return RegistryError(f"{where}: permission denied: {text}",
                                 hint="grant this user CREATE and write rights in the database, or use another one")
        if self._conn is None or self._conn.raw.closed:
            return RegistryError(f"cannot reach {where}: {text}",
                                 hint="check the host, port and database in the URL and that the server is running; "
                                      f"or set {ENV_VAR} / --registry to a file path")
        return RegistryError(f"{where}: {text}", hint="retry; if it persists, check the server and its log")

    def _idle(self, conn: _Connection) -> bool:
        return conn.raw.info.transaction_status == self._driver.pq.TransactionStatus.IDLE

    @contextmanager
    def _txn(self, *, write: bool) -> Iterator[_Connection]:
        """A transaction, or the one already open on this connection (all or nothing)."""
        conn = self._connection()
        if not self._idle(conn):
            yield conn
            return
        with self._errors():
            conn.raw.execute("BEGIN ISOLATION LEVEL READ COMMITTED" if write
                             else "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        try:
            if write:  # first statement: every later one sees what the writers before this one committed
                with self._errors():
                    conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield conn
            self._commit(conn)
        except BaseException:
            if not conn.raw.closed and not self._idle(conn):
                with suppress(self._driver.Error):
                    conn.raw.execute("ROLLBACK")
            raise

    def _commit(self, conn: _Connection) -> None:
        # PostgreSQL answers COMMIT of a failed transaction with a silent ROLLBACK: say so instead.
        if conn.raw.info.transaction_status == self._driver.pq.TransactionStatus.INERROR:
            raise RegistryError(f"a statement failed in a transaction on the registry {self.path}; "
                                "nothing of it was written", hint="retry the command")
        with self._errors():
            conn.raw.execute("COMMIT")

    def _version(self, conn: _Connection) -> int | None:
        """The recorded schema version; None when the database has no version table."""
        # A catalog query, not to_regclass(): that answers from this session's cache, which may still say
        # "no such table" after the writer before us created it (found by the 4-process test).
        if not conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?",
                            (VERSION_TABLE,)).fetchone()[0]:
            return None
        rows = conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchall()
        if len(rows) != 1:
            raise RegistryError(f"the registry {self.path} has {len(rows)} rows in {VERSION_TABLE}, not one",
                                hint="point --registry at another database")
        return int(rows[0][0])

    def _migrate(self) -> None:
        with self._txn(write=False) as conn:
            version = self._version(conn)
        if version is not None and version == SCHEMA_VERSION:
            return
        if version is None and not self._create:  # a lookup: the database is not ours to fill
            raise NoRegistry(self.path, "holds no eagle3-convert tables")
        with self._txn(write=True) as conn:
            # Read again under the write lock: another process may have migrated meanwhile.
            version = self._version(conn)
            if version is None:
                self._claim(conn)
                version = 0
            if version > SCHEMA_VERSION:
                raise RegistryError(
                    f"the registry {self.path} has schema version {version}; "
                    f"this eagle3-convert knows versions up to {SCHEMA_VERSION}",
                    hint=f"upgrade eagle3-convert, or set {ENV_VAR} to another database",
                )
            for step in MIGRATIONS[version:]:
                for statement in step:
                    conn.execute(for_postgres(statement))
            # DDL is transactional here: the steps and the version commit together.
            conn.execute(f"UPDATE {VERSION_TABLE} SET version = ?", (SCHEMA_VERSION,))

    def _claim(self, conn: _Connection) -> None:
        """Start a registry in an empty schema; a database holding other tables is not ours to fill."""
        others = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()[0]
        if others:
            raise RegistryError(
                f"the database {self.path} holds {others} other table(s) and is not an eagle3-convert registry",
                hint="create an empty database for the registry (createdb eagle3_registry) and point --registry at it",
            )
        conn.execute(f"CREATE TABLE {VERSION_TABLE} (version INTEGER NOT NULL)")
        conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (0)")

    def close(self) -> None:
        if self._conn is not None:
            with suppress(Exception):
                self._conn.raw.close()
            self._conn = None
