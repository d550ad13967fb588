"""Registry storage: an abstract `RegistryStore` and its SQLite implementation.

The interface is small and SQL-shaped so that a shared server database could serve a
team later; `SQLiteStore` is the single-user default. Several processes may write the
same SQLite file at once: WAL lets readers run beside a writer, `busy_timeout` makes
writers queue instead of failing, and every write is one `BEGIN IMMEDIATE`
transaction, so a process killed mid-write leaves nothing behind.
"""

from __future__ import annotations

import enum
import json
import os
import sqlite3
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import RegistryError
from .models import DrafterRecord, LineageEdge, Location, TargetInfo, utcnow

ENV_VAR = "EAGLE3_CONVERT_REGISTRY"
MIN_PREFIX = 4  # as git: shorter prefixes are ambiguous too often to be useful

# Forward migrations: step i takes PRAGMA user_version from i to i + 1, inside one
# transaction with the version bump. Never edit a released step; append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # v1: drafters with the target's name and revision only, their locations, and
    # lineage edges without the tool that made them.
    (
        """CREATE TABLE drafters (
            drafter_id          TEXT PRIMARY KEY NOT NULL,
            target_name_or_path TEXT,
            target_revision     TEXT,
            capture_boundaries  TEXT,  -- JSON list of ints; NULL = engine default
            draft_vocab_size    INTEGER,
            vocab_size          INTEGER,
            hidden_size         INTEGER,
            flags               TEXT NOT NULL DEFAULT '{}',  -- JSON object of booleans
            trained_with        TEXT,
            created_at          TEXT NOT NULL,
            updated_at          TEXT NOT NULL
        )""",
        """CREATE TABLE locations (
            drafter_id TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
            layout     TEXT NOT NULL,
            uri        TEXT NOT NULL,
            added_at   TEXT NOT NULL,
            PRIMARY KEY (drafter_id, uri, layout)
        )""",
        """CREATE TABLE lineage (
            id            INTEGER PRIMARY KEY,
            drafter_id    TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
            source_uri    TEXT NOT NULL,
            source_layout TEXT NOT NULL,
            dest_uri      TEXT NOT NULL,
            dest_layout   TEXT NOT NULL,
            created_at    TEXT NOT NULL
        )""",
        "CREATE INDEX lineage_drafter ON lineage(drafter_id)",
    ),
    # v2: the target's shape, the layer ids each engine's config spelled, the tool of
    # each conversion, and one row per distinct edge.
    (
        "ALTER TABLE drafters ADD COLUMN target_architectures TEXT",  # JSON list
        "ALTER TABLE drafters ADD COLUMN target_num_hidden_layers INTEGER",
        "ALTER TABLE drafters ADD COLUMN target_hidden_size INTEGER",
        "ALTER TABLE drafters ADD COLUMN target_vocab_size INTEGER",
        # v1 never recorded which ids a config spelled: unknown, not guessed.
        "ALTER TABLE drafters ADD COLUMN ids_as_written TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE lineage ADD COLUMN tool TEXT NOT NULL DEFAULT 'unknown (before schema v2)'",
        # v1 could record the same edge twice; keep the first before making edges unique.
        """DELETE FROM lineage WHERE id NOT IN (
            SELECT min(id) FROM lineage
            GROUP BY drafter_id, source_uri, source_layout, dest_uri, dest_layout)""",
        """CREATE UNIQUE INDEX lineage_edge
            ON lineage(drafter_id, source_uri, source_layout, dest_uri, dest_layout)""",
        "DROP INDEX lineage_drafter",  # lineage_edge's leading column serves those lookups
        "CREATE INDEX drafters_target ON drafters(target_name_or_path)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

_DRAFTER_COLUMNS = (
    "drafter_id",
    "target_name_or_path",
    "target_revision",
    "target_architectures",
    "target_num_hidden_layers",
    "target_hidden_size",
    "target_vocab_size",
    "capture_boundaries",
    "ids_as_written",
    "draft_vocab_size",
    "vocab_size",
    "hidden_size",
    "flags",
    "trained_with",
    "created_at",
    "updated_at",
)
_TARGET_COLUMNS = _DRAFTER_COLUMNS[1:7]
# Fields an upsert may set; timestamps, locations and lineage are the store's to keep.
_RECORD_FIELDS = (
    "target",
    "capture_boundaries",
    "ids_as_written",
    "draft_vocab_size",
    "vocab_size",
    "hidden_size",
    "flags",
    "trained_with",
)
_MERGED_DICTS = ("ids_as_written", "flags")


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


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _ts(value: datetime) -> str:
    # Fixed width keeps text order equal to time order.
    return value.isoformat(timespec="microseconds")


def _row(record: DrafterRecord) -> dict[str, Any]:
    target = record.target
    return {
        "drafter_id": record.drafter_id,
        "target_name_or_path": None if target is None else target.name_or_path,
        "target_revision": None if target is None else target.revision,
        "target_architectures": None if target is None else _dumps(target.architectures),
        "target_num_hidden_layers": None if target is None else target.num_hidden_layers,
        "target_hidden_size": None if target is None else target.hidden_size,
        "target_vocab_size": None if target is None else target.vocab_size,
        "capture_boundaries": _dumps(record.capture_boundaries),
        "ids_as_written": _dumps(record.ids_as_written),
        "draft_vocab_size": record.draft_vocab_size,
        "vocab_size": record.vocab_size,
        "hidden_size": record.hidden_size,
        "flags": _dumps(record.flags),
        "trained_with": record.trained_with,
        "created_at": _ts(record.created_at),
        "updated_at": _ts(record.updated_at),
    }


_UPSERT_ROW = (
    f"INSERT INTO drafters ({', '.join(_DRAFTER_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in _DRAFTER_COLUMNS)}) "
    "ON CONFLICT(drafter_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _DRAFTER_COLUMNS if c not in ("drafter_id", "created_at"))
)


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

    def _resolve(self, conn: sqlite3.Connection, drafter_id: str) -> str | None:
        prefix = drafter_id.strip().lower()
        if not (MIN_PREFIX <= len(prefix) <= 128) or prefix.strip("0123456789abcdef"):
            raise RegistryError(
                f"{drafter_id!r} is not a drafter id or id prefix",
                hint=f"give at least {MIN_PREFIX} hex characters of the id",
            )
        if conn.execute("SELECT 1 FROM drafters WHERE drafter_id = ?", (prefix,)).fetchone():
            return prefix
        # GLOB is case-sensitive, so it can use the primary key index; hex has no wildcards.
        pattern = (prefix + "*",)
        count = conn.execute("SELECT count(*) FROM drafters WHERE drafter_id GLOB ?", pattern).fetchone()[0]
        if count == 0:
            return None
        first = conn.execute(
            "SELECT drafter_id FROM drafters WHERE drafter_id GLOB ? ORDER BY drafter_id LIMIT 3", pattern
        ).fetchall()
        if count > 1:
            shown = ", ".join(row[0][:16] for row in first) + (", ..." if count > 3 else "")
            raise RegistryError(
                f"drafter id prefix {prefix!r} is ambiguous: it matches {count} drafters ({shown})",
                hint="give more characters of the id",
            )
        return first[0][0]

    def _require(self, conn: sqlite3.Connection, drafter_id: str) -> str:
        found = self._resolve(conn, drafter_id)
        if found is None:
            raise RegistryError(
                f"no drafter {drafter_id} in the registry {self.path}",
                hint="record the drafter first, or check the id against the registry's list",
            )
        return found

    def _load(self, conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> list[DrafterRecord]:
        rows = conn.execute(f"SELECT * FROM drafters {where} ORDER BY created_at, drafter_id", params).fetchall()
        if not rows:
            return []
        selected = f"SELECT drafter_id FROM drafters {where}"
        locations: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in conn.execute(
            f"SELECT * FROM locations WHERE drafter_id IN ({selected}) ORDER BY added_at, rowid", params
        ):
            locations[row["drafter_id"]].append(
                {"layout": row["layout"], "uri": row["uri"], "added_at": row["added_at"]}
            )
        edges: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in conn.execute(
            f"SELECT * FROM lineage WHERE drafter_id IN ({selected}) ORDER BY created_at, id", params
        ):
            edges[row["drafter_id"]].append(_edge_fields(row))
        try:
            return [_record(row, locations[row["drafter_id"]], edges[row["drafter_id"]]) for row in rows]
        except ValidationError as exc:
            raise RegistryError(
                f"the registry {self.path} holds a record it cannot read: {exc.errors()[0]['msg']}",
                hint="remove that drafter, or move the file aside to start a new registry",
            ) from exc

    def _load_one(self, conn: sqlite3.Connection, drafter_id: str) -> DrafterRecord | None:
        found = self._load(conn, "WHERE drafter_id = ?", (drafter_id,))
        return found[0] if found else None

    @staticmethod
    def _insert_location(conn: sqlite3.Connection, drafter_id: str, location: Location) -> bool:
        cursor = conn.execute(
            "INSERT INTO locations (drafter_id, layout, uri, added_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (drafter_id, location.layout, location.uri, _ts(location.added_at)),
        )
        return cursor.rowcount == 1

    @staticmethod
    def _insert_edge(conn: sqlite3.Connection, drafter_id: str, edge: LineageEdge) -> bool:
        cursor = conn.execute(
            "INSERT INTO lineage (drafter_id, source_uri, source_layout, dest_uri, dest_layout, tool,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                drafter_id,
                edge.source.uri,
                edge.source.layout,
                edge.dest.uri,
                edge.dest.layout,
                edge.tool,
                _ts(edge.created_at),
            ),
        )
        return cursor.rowcount == 1

    @staticmethod
    def _touch(conn: sqlite3.Connection, drafter_id: str) -> None:
        conn.execute("UPDATE drafters SET updated_at = ? WHERE drafter_id = ?", (_ts(utcnow()), drafter_id))

    # -- RegistryStore ----------------------------------------------------------------

    def _upsert(
        self,
        record: DrafterRecord,
        fields: frozenset[str],
        locations: list[Location],
        lineage: list[LineageEdge],
    ) -> DrafterRecord:
        with self._sqlite_errors(), self._txn(write=True) as conn:
            old = self._load_one(conn, record.drafter_id)
            now = utcnow()
            if old is None:
                conn.execute(_UPSERT_ROW, _row(record.model_copy(update={"created_at": now, "updated_at": now})))
            else:
                changes = {name: getattr(record, name) for name in fields}
                for name in fields.intersection(_MERGED_DICTS):
                    changes[name] = {**getattr(old, name), **getattr(record, name)}
                if any(getattr(old, name) != value for name, value in changes.items()):
                    conn.execute(_UPSERT_ROW, _row(old.model_copy(update={**changes, "updated_at": now})))
            added = [self._insert_location(conn, record.drafter_id, loc) for loc in locations]
            added += [self._insert_edge(conn, record.drafter_id, edge) for edge in lineage]
            if old is not None and any(added):
                self._touch(conn, record.drafter_id)
            merged = self._load_one(conn, record.drafter_id)
            assert merged is not None  # written in this transaction
            return merged

    def add_location(self, drafter_id: str, location: Location) -> bool:
        try:
            location = Location.model_validate(location)
        except ValidationError as exc:
            raise _invalid(exc) from exc
        with self._sqlite_errors(), self._txn(write=True) as conn:
            found = self._require(conn, drafter_id)
            added = self._insert_location(conn, found, location)
            if added:
                self._touch(conn, found)
            return added

    def forget_location(self, uri: str, keep: str | None = None) -> int:
        with self._sqlite_errors(), self._txn(write=True) as conn:
            stale = [row[0] for row in conn.execute(
                "SELECT DISTINCT drafter_id FROM locations WHERE uri = ? AND drafter_id IS NOT ?", (uri, keep))]
            conn.execute("DELETE FROM locations WHERE uri = ? AND drafter_id IS NOT ?", (uri, keep))
            for drafter_id in stale:
                self._touch(conn, drafter_id)
            return len(stale)

    def add_lineage(self, drafter_id: str, edge: LineageEdge) -> bool:
        try:
            edge = LineageEdge.model_validate(edge)
        except ValidationError as exc:
            raise _invalid(exc) from exc
        with self._sqlite_errors(), self._txn(write=True) as conn:
            found = self._require(conn, drafter_id)
            added = self._insert_edge(conn, found, edge)
            if added:
                self._touch(conn, found)
            return added

    def get(self, drafter_id: str) -> DrafterRecord | None:
        with self._sqlite_errors(), self._txn(write=False) as conn:
            found = self._resolve(conn, drafter_id)
            return None if found is None else self._load_one(conn, found)

    def list(self, target: str | None = None) -> list[DrafterRecord]:
        with self._sqlite_errors(), self._txn(write=False) as conn:
            if target is None:
                return self._load(conn, "", ())
            return self._load(conn, "WHERE target_name_or_path = ?", (target,))

    def lineage(self, drafter_id: str) -> list[LineageEdge]:
        with self._sqlite_errors(), self._txn(write=False) as conn:
            found = self._resolve(conn, drafter_id)
            if found is None:
                return []
            rows = conn.execute(
                "SELECT * FROM lineage WHERE drafter_id = ? ORDER BY created_at, id", (found,)
            ).fetchall()
            return [LineageEdge.model_validate(_edge_fields(row)) for row in rows]

    def remove(self, drafter_id: str) -> bool:
        with self._sqlite_errors(), self._txn(write=True) as conn:
            found = self._resolve(conn, drafter_id)
            if found is None:
                return False
            # Locations and lineage go with it (ON DELETE CASCADE, foreign_keys on).
            conn.execute("DELETE FROM drafters WHERE drafter_id = ?", (found,))
            return True

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._txn(write=True):
            yield

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _edge_fields(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "source": {"uri": row["source_uri"], "layout": row["source_layout"]},
        "dest": {"uri": row["dest_uri"], "layout": row["dest_layout"]},
        "tool": row["tool"],
        "created_at": row["created_at"],
    }


def _record(row: sqlite3.Row, locations: list[dict[str, Any]], lineage: list[dict[str, Any]]) -> DrafterRecord:
    target = None
    if any(row[column] is not None for column in _TARGET_COLUMNS):
        target = {
            "name_or_path": row["target_name_or_path"],
            "revision": row["target_revision"],
            "architectures": _loads(row["target_architectures"]) or [],
            "num_hidden_layers": row["target_num_hidden_layers"],
            "hidden_size": row["target_hidden_size"],
            "vocab_size": row["target_vocab_size"],
        }
    return DrafterRecord.model_validate(
        {
            "drafter_id": row["drafter_id"],
            "target": target,
            "capture_boundaries": _loads(row["capture_boundaries"]),
            "ids_as_written": _loads(row["ids_as_written"]),
            "draft_vocab_size": row["draft_vocab_size"],
            "vocab_size": row["vocab_size"],
            "hidden_size": row["hidden_size"],
            "flags": _loads(row["flags"]),
            "trained_with": row["trained_with"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "locations": locations,
            "lineage": lineage,
        }
    )
