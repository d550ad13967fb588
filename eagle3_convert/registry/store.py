"""Registry storage: an abstract `RegistryStore` and its SQLite implementation.

The interface is small and SQL-shaped so that a shared server database could serve a
team later; `SQLiteStore` is the single-user default. Several processes may write the
same SQLite file at once: WAL lets readers run beside a writer, `busy_timeout` makes
writers queue instead of failing, and every write is one `BEGIN IMMEDIATE`
transaction, so a process killed mid-write leaves nothing behind. The schema and its
migrations are in schema.py, the reads in queries.py, the writes in writes.py.
"""


from __future__ import annotations

import enum
import os
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path

from pydantic import ValidationError

from . import queries, writes
from .errors import RegistryError
from .models import DrafterRecord, LineageEdge, Location, TargetInfo
from .schema import MIGRATIONS, SCHEMA_VERSION

ENV_VAR = "EAGLE3_CONVERT_REGISTRY"


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET


def default_registry_path() -> Path:
    """`$EAGLE3_CONVERT_REGISTRY`, else `$XDG_DATA_HOME/eagle3-convert/registry.db`
    (XDG_DATA_HOME defaulting to ~/.local/share)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        base = Path(xdg)
    else:
        try:
            base = Path.home() / ".local" / "share"
        except RuntimeError as exc:
            raise RegistryError(
                "cannot find a home directory for the default registry",
                hint=f"set {ENV_VAR} to the registry file to use",
            ) from exc
    return base / "eagle3-convert" / "registry.db"


def open_registry(path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> RegistryStore:
    """Open (creating and migrating as needed) the registry at `path` or the default path."""
    return SQLiteStore(default_registry_path() if path is None else path, timeout=timeout)


def _invalid(exc: ValidationError) -> RegistryError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "value"
    return RegistryError(
        f"invalid registry record: {where}: {first['msg']}",
        hint="fix the value passed to the registry",
    )


class RegistryStore(ABC):
    """Where drafter records live. Ids may be given as a unique prefix wherever a
    drafter is looked up (at least 4 hex characters, as git)."""

    def upsert_drafter(
        self,
        drafter_id: str,
        *,
        target: TargetInfo | None | _Unset = _UNSET,
        capture_boundaries: list[int] | None | _Unset = _UNSET,
        ids_as_written: dict[str, list[int]] | _Unset = _UNSET,
        draft_vocab_size: int | None | _Unset = _UNSET,
        vocab_size: int | None | _Unset = _UNSET,
        hidden_size: int | None | _Unset = _UNSET,
        flags: dict[str, bool] | _Unset = _UNSET,
        trained_with: str | None | _Unset = _UNSET,
        locations: Iterable[Location] = (),
        lineage: Iterable[LineageEdge] = (),
    ) -> DrafterRecord:
        """Create the drafter or merge into it, in one transaction; return the result.

        Only the fields given change (None is a value: for `capture_boundaries` it means
        the engine default). `ids_as_written` and `flags` merge key by key. Locations and
        edges already recorded (same uri and layout; same endpoints) are kept once.
        """
        given = {
            "target": target,
            "capture_boundaries": capture_boundaries,
            "ids_as_written": ids_as_written,
            "draft_vocab_size": draft_vocab_size,
            "vocab_size": vocab_size,
            "hidden_size": hidden_size,
            "flags": flags,
            "trained_with": trained_with,
        }
        given = {name: value for name, value in given.items() if value is not _UNSET}
        try:
            record = DrafterRecord.model_validate({"drafter_id": drafter_id, **given})
            new_locations = [Location.model_validate(loc) for loc in locations]
            new_edges = [LineageEdge.model_validate(edge) for edge in lineage]
        except ValidationError as exc:
            raise _invalid(exc) from exc
        return self._upsert(record, frozenset(given), new_locations, new_edges)

    @abstractmethod
    def _upsert(
        self,
        record: DrafterRecord,
        fields: frozenset[str],
        locations: list[Location],
        lineage: list[LineageEdge],
    ) -> DrafterRecord:
        """Merge `fields` of a validated `record`, then add locations and edges."""

    @abstractmethod
    def add_location(self, drafter_id: str, location: Location) -> bool:
        """Record a copy of a known drafter; False if that uri and layout were known."""

    @abstractmethod
    def add_lineage(self, drafter_id: str, edge: LineageEdge) -> bool:
        """Record a conversion of a known drafter; False if that edge was known."""

    @abstractmethod
    def forget_location(self, uri: str, keep: str | None = None) -> int:
        """A directory was overwritten: drop `uri` from every drafter but `keep`; how many were dropped."""

    @abstractmethod
    def get(self, drafter_id: str) -> DrafterRecord | None:
        """The drafter with this id or unique id prefix; None if there is none."""

    @abstractmethod
    def list(self, target: str | None = None) -> list[DrafterRecord]:
        """All drafters, oldest first; only those trained on `target` if given."""

    @abstractmethod
    def lineage(self, drafter_id: str) -> list[LineageEdge]:
        """The conversions recorded for a drafter, oldest first ([] if unknown)."""

    @abstractmethod
    def remove(self, drafter_id: str) -> bool:
        """Forget a drafter with its locations and lineage; False if it was unknown."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """Group several writes into one atomic transaction (`with store.transaction():`)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; further calls fail."""

    def __enter__(self) -> RegistryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()



class SQLiteStore(RegistryStore):
    """The registry in one SQLite file, safe for several processes at once."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0):
        self.path = Path(path)
        self.timeout = timeout
        self._conn: sqlite3.Connection | None = None
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
        with self._sqlite_errors():
            # `timeout` is SQLite's busy_timeout: a writer waits this long for another
            # process's transaction to end instead of failing at once.
            conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        self._conn = conn
        try:
            with self._sqlite_errors():
                self._use_wal(conn)
                conn.execute("PRAGMA foreign_keys = ON")  # per connection, outside transactions
                self._migrate(conn)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- plumbing ---------------------------------------------------------------------

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
    def _sqlite_errors(self) -> Iterator[None]:
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

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RegistryError("the registry is closed", hint="open it again with open_registry()")
        return self._conn

    @contextmanager
    def _txn(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """A transaction, or the one already open on this connection (all or nothing)."""
        conn = self._connection()
        if conn.in_transaction:
            yield conn
            return
        with self._sqlite_errors():
            # IMMEDIATE takes the write lock up front (waiting on busy_timeout); a
            # deferred transaction upgraded later would fail at once with SQLITE_BUSY.
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
            with self._sqlite_errors():
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


    # -- RegistryStore ----------------------------------------------------------------

    def _upsert(
        self,
        record: DrafterRecord,
        fields: frozenset[str],
        locations: list[Location],
        lineage: list[LineageEdge],
    ) -> DrafterRecord:
        with self._sqlite_errors(), self._txn(write=True) as conn:
            return writes.upsert(conn, record, fields, locations, lineage, self.path)

    def add_location(self, drafter_id: str, location: Location) -> bool:
        try:
            location = Location.model_validate(location)
        except ValidationError as exc:
            raise _invalid(exc) from exc
        with self._sqlite_errors(), self._txn(write=True) as conn:
            found = queries.require(conn, drafter_id, self.path)
            added = writes.insert_location(conn, found, location)
            if added:
                writes.touch(conn, found)
            return added

    def forget_location(self, uri: str, keep: str | None = None) -> int:
        with self._sqlite_errors(), self._txn(write=True) as conn:
            return writes.forget_location(conn, uri, keep)

    def add_lineage(self, drafter_id: str, edge: LineageEdge) -> bool:
        try:
            edge = LineageEdge.model_validate(edge)
        except ValidationError as exc:
            raise _invalid(exc) from exc
        with self._sqlite_errors(), self._txn(write=True) as conn:
            found = queries.require(conn, drafter_id, self.path)
            added = writes.insert_edge(conn, found, edge)
            if added:
                writes.touch(conn, found)
            return added

    def get(self, drafter_id: str) -> DrafterRecord | None:
        with self._sqlite_errors(), self._txn(write=False) as conn:
            found = queries.resolve(conn, drafter_id)
            return None if found is None else queries.load_one(conn, found, self.path)

    def list(self, target: str | None = None) -> list[DrafterRecord]:
        with self._sqlite_errors(), self._txn(write=False) as conn:
            if target is None:
                return queries.load(conn, "", (), self.path)
            return queries.load(conn, "WHERE target_name_or_path = ?", (target,), self.path)

    def lineage(self, drafter_id: str) -> list[LineageEdge]:
        with self._sqlite_errors(), self._txn(write=False) as conn:
            found = queries.resolve(conn, drafter_id)
            return [] if found is None else queries.lineage_of(conn, found)

    def remove(self, drafter_id: str) -> bool:
        with self._sqlite_errors(), self._txn(write=True) as conn:
            found = queries.resolve(conn, drafter_id)
            if found is None:
                return False
            writes.delete(conn, found)
            return True

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._txn(write=True):
            yield

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

