"""Registry storage: opening a registry by path or URL, and `SQLiteStore`, the default.

The interface is in base.py; postgres.py serves a team from one PostgreSQL database
(`postgresql://` URLs). Several processes may write the same SQLite file at once: WAL lets
readers run beside a writer, `busy_timeout` makes writers queue instead of failing, and
every write is one `BEGIN IMMEDIATE` transaction, so a process killed mid-write leaves
nothing behind. The schema and its migrations are in schema.py, the reads in queries.py,
the writes in writes.py.
"""


from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .base import RegistryStore, SQLStore
from .errors import NoRegistry, RegistryError
from .paths import ENV_VAR, default_registry, is_url, url_scheme
from .postgres import PostgresStore  # (psycopg itself only when a server is asked for)
from .schema import MIGRATIONS, SCHEMA_VERSION


POSTGRES_SCHEMES = ("postgresql", "postgres")


def open_registry(path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0,
                  create: bool = True) -> RegistryStore:
    """Open (creating and migrating as needed) the registry at `path` (a file or a
    `postgresql://` URL) or the default one. With `create` False (a lookup) a place holding no
    registry is left as it is and NoRegistry is raised: no file, no table is created."""
    target = default_registry() if path is None else path
    if not is_url(target):
        return SQLiteStore(target, timeout=timeout, create=create)
    scheme = url_scheme(str(target))
    if scheme not in POSTGRES_SCHEMES:
        raise RegistryError(f"registry URLs are postgresql:// or postgres://, not {scheme}://",
                            hint="give a file path for SQLite, or a postgresql://user@host/database URL")
    return PostgresStore(str(target), timeout=timeout, create=create)


class SQLiteStore(SQLStore):
    """The registry in one SQLite file, safe for several processes at once."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0, create: bool = True):
        self.path = Path(path)
        self.timeout = timeout
        self._conn: sqlite3.Connection | None = None
        if not create and not self.path.is_dir() and not self.path.exists():
            raise NoRegistry(self.path, "does not exist")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(
                f"cannot create the registry's folder {self.path.parent}: {exc.strerror or exc}",
                hint=f"set {ENV_VAR} to a file in a writable folder",
            ) from exc
        if self.path.is_dir():
            raise RegistryError(
                f"the registry path {self.path} is a folder, not a file",
                hint=f"set {ENV_VAR} to a file path, e.g. {self.path / 'registry.db'}",
            )
        with self._errors():
            # `timeout` is SQLite's busy_timeout: a writer waits this long for another
            # process's transaction to end instead of failing at once.
            conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        self._conn = conn
        try:
            if not create and not self._holds_registry(conn):
                raise NoRegistry(self.path, "holds no eagle3-convert tables")
            with self._errors():
                self._use_wal(conn)
                conn.execute("PRAGMA foreign_keys = ON")  # per connection, outside transactions
                self._migrate(conn)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- plumbing ---------------------------------------------------------------------

    def _holds_registry(self, conn: sqlite3.Connection) -> bool:
        """Whether the file has our schema version: read before anything (WAL, migrations) writes to it."""
        with self._errors():
            return conn.execute("PRAGMA user_version").fetchone()[0] != 0

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock and SQLite answers BUSY at
        # once, without busy_timeout, when two processes open a new registry together.
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 0.05)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.Error) -> RegistryError:
        text = str(exc)
        low = text.lower()
        if "locked" in low or "busy" in low:
            return RegistryError(
                f"the registry {self.path} stayed locked by another process for {self.timeout:g} s",
                hint="retry when the other eagle3-convert has finished, or give a longer timeout",
            )
        if any(s in low for s in ("readonly", "read-only", "unable to open", "permission")):
            return RegistryError(
                f"cannot open the registry {self.path} for writing: {text}",
                hint=f"check the file's and its folder's permissions, or set {ENV_VAR} to a writable path",
            )
        if any(s in low for s in ("not a database", "malformed", "corrupt", "encrypted")):
            return RegistryError(
                f"{self.path} is not a usable registry database: {text}",
                hint=f"move the file aside to start a new registry, or set {ENV_VAR} to another path",
            )
        return RegistryError(
            f"registry {self.path}: {text}",
            hint="retry; if it persists, check the disk and the file",
        )

    @contextmanager
    def _txn(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """A transaction, or the one already open on this connection (all or nothing)."""
        conn = self._connection()
        if conn.in_transaction:
            yield conn
            return
        with self._errors():
            # IMMEDIATE takes the write lock up front (waiting on busy_timeout); a
            # deferred transaction upgraded later would fail at once with SQLITE_BUSY.
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
            with self._errors():
                conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _migrate(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        with self._txn(write=True):
            # Read again under the write lock: another process may have migrated meanwhile.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RegistryError(
                    f"the registry {self.path} has schema version {version}; "
                    f"this eagle3-convert knows versions up to {SCHEMA_VERSION}",
                    hint=f"upgrade eagle3-convert, or set {ENV_VAR} to another path",
                )
            if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise RegistryError(
                    f"{self.path} is an SQLite database but not an eagle3-convert registry",
                    hint=f"set {ENV_VAR} to another path",
                )
            for step in MIGRATIONS[version:]:
                for statement in step:
                    conn.execute(statement)
            # user_version lives in the file header and commits with the steps.
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

