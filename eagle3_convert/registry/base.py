"""The registry's interface, `RegistryStore`, and `SQLStore`: its methods over any SQL database.

The backends (store.SQLiteStore, postgres.PostgresStore) supply only the plumbing: a
connection that speaks the shared SQL of queries.py and writes.py (`?` placeholders, rows by
index or by name), transactions, error translation and migrations.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pydantic import ValidationError

from ..target_identity import TargetIdentity
from . import queries, writes
from .errors import RegistryError
from .models import Acceptance, DrafterRecord, LineageEdge, Location, RecordChange


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET = _Unset.UNSET


def invalid(exc: ValidationError) -> RegistryError:
    """A pydantic ValidationError as a RegistryError."""
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
        target: TargetIdentity | None | _Unset = _UNSET,
        capture_boundaries: list[int] | None | _Unset = _UNSET,
        ids_as_written: dict[str, list[int]] | _Unset = _UNSET,
        draft_vocab_size: int | None | _Unset = _UNSET,
        vocab_size: int | None | _Unset = _UNSET,
        hidden_size: int | None | _Unset = _UNSET,
        flags: dict[str, bool] | _Unset = _UNSET,
        trained_with: str | None | _Unset = _UNSET,
        id_kind: str | _Unset = _UNSET,
        drafter_kind: str | _Unset = _UNSET,
        quantization: dict[str, Any] | None | _Unset = _UNSET,
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
            "id_kind": id_kind,
            "drafter_kind": drafter_kind,
            "quantization": quantization,
        }
        given = {name: value for name, value in given.items() if value is not _UNSET}
        try:
            record = DrafterRecord.model_validate({"drafter_id": drafter_id, **given})
            new_locations = [Location.model_validate(loc) for loc in locations]
            new_edges = [LineageEdge.model_validate(edge) for edge in lineage]
        except ValidationError as exc:
            raise invalid(exc) from exc
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
    def add_acceptance(self, drafter_id: str, measured: Acceptance) -> bool:
        """Record one `verify` measurement of a recorded drafter."""

    @abstractmethod
    def acceptance(self, drafter_id: str) -> list[Acceptance]:
        """What `verify` measured of a drafter (an id or unique prefix), oldest first; [] if unknown."""

    @abstractmethod
    def forget_location(self, uri: str, keep: str | None = None, layout: str | None = None) -> int:
        """A directory was overwritten: drop `uri` from every drafter but `keep` (and from `keep` too in any other
        layout than `layout`, when given); how many drafters lost a copy."""

    @abstractmethod
    def holding(self, uri: str) -> list[str]:
        """The ids of the drafters with a copy at `uri` (a Hub uri's repo id compared ignoring case)."""

    @abstractmethod
    def aliased(self, alias: str) -> str | None:
        """The drafter that `alias` (the Hub fingerprint of a record merged into it, or the bytes of its weight
        files: hub_read.weights_alias) names, or None."""

    @abstractmethod
    def add_alias(self, alias: str, drafter_id: str) -> bool:
        """Remember that `alias` names the known `drafter_id`; False if it named a drafter already."""

    @abstractmethod
    def add_weights_key(self, weights_key: str, drafter_id: str) -> bool:
        """Remember that weights with this lookup key (fingerprint.weights_key) are the known `drafter_id`;
        False if that pair was known."""

    @abstractmethod
    def keyed(self, weights_key: str) -> list[str]:
        """The ids of the drafters whose weights have this lookup key (more than one only on a collision)."""

    @abstractmethod
    def keys_of(self, drafter_id: str) -> list[str]:
        """The weights lookup keys recorded for a drafter (a full id); [] for a record made before schema v7."""

    @abstractmethod
    def add_change(self, drafter_id: str, change: RecordChange) -> None:
        """Keep one change made to a recorded fact in the drafter's history."""

    @abstractmethod
    def absorb(self, twin: str, into: str) -> None:
        """Merge the record `twin` into `into` (both full ids): its copies and lineage move to `into`, `twin`
        becomes an alias of it and is forgotten. Fields are the caller's to merge first (upsert_drafter)."""

    @abstractmethod
    def get(self, drafter_id: str) -> DrafterRecord | None:
        """The drafter with this id or unique id prefix; None if there is none."""

    @abstractmethod
    def list(self, target: str | None = None) -> list[DrafterRecord]:
        """All drafters, oldest first; only those whose target is known by the name `target` (its name or an
        alias: target_identity's rule, a Hub repo id compared ignoring case) if given."""

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


class SQLStore(RegistryStore):
    """`RegistryStore` over a SQL connection; `path` names the registry in messages (never a password)."""

    path: Any
    _conn: Any  # the driver's connection; None once closed

    def _connection(self) -> Any:
        if self._conn is None:
            raise RegistryError("the registry is closed", hint="open it again with open_registry()")
        return self._conn

    @abstractmethod
    def _txn(self, *, write: bool) -> AbstractContextManager[Any]:
        """A transaction (writers one at a time), or the one already open; yields the connection."""

    @abstractmethod
    def _errors(self) -> AbstractContextManager[None]:
        """The driver's errors as one-line `RegistryError`s."""

    @contextmanager
    def _writing(self) -> Iterator[Any]:
        with self._errors(), self._txn(write=True) as conn:
            yield conn

    @contextmanager
    def _reading(self) -> Iterator[Any]:
        with self._errors(), self._txn(write=False) as conn:
            yield conn

    def _upsert(
        self,
        record: DrafterRecord,
        fields: frozenset[str],
        locations: list[Location],
        lineage: list[LineageEdge],
    ) -> DrafterRecord:
        with self._writing() as conn:
            return writes.upsert(conn, record, fields, locations, lineage, self.path)

    def add_location(self, drafter_id: str, location: Location) -> bool:
        return self._add_to(drafter_id, Location, location, writes.insert_location)

    def forget_location(self, uri: str, keep: str | None = None, layout: str | None = None) -> int:
        with self._writing() as conn:
            return writes.forget_location(conn, uri, keep, layout)

    def add_lineage(self, drafter_id: str, edge: LineageEdge) -> bool:
        return self._add_to(drafter_id, LineageEdge, edge, writes.insert_edge)

    def add_acceptance(self, drafter_id: str, measured: Acceptance) -> bool:
        return self._add_to(drafter_id, Acceptance, measured, writes.insert_acceptance)

    def acceptance(self, drafter_id: str) -> list[Acceptance]:
        with self._reading() as conn:
            found = queries.resolve(conn, drafter_id)
            return [] if found is None else queries.acceptance_of(conn, found)

    def _add_to(self, drafter_id: str, model: Any, item: Any, insert: Any) -> bool:
        """Validate `item` as `model` and insert it for a known drafter; touch the record if it was new."""
        try:
            item = model.model_validate(item)
        except ValidationError as exc:
            raise invalid(exc) from exc
        with self._writing() as conn:
            found = queries.require(conn, drafter_id, self.path)
            added = insert(conn, found, item)
            if added:
                writes.touch(conn, found)
            return added

    def holding(self, uri: str) -> list[str]:
        with self._reading() as conn:
            return queries.holding(conn, uri)

    def aliased(self, alias: str) -> str | None:
        with self._reading() as conn:
            return queries.aliased(conn, alias)

    def add_alias(self, alias: str, drafter_id: str) -> bool:
        with self._writing() as conn:
            return writes.add_alias(conn, alias.strip().lower(), queries.require(conn, drafter_id, self.path))

    def add_weights_key(self, weights_key: str, drafter_id: str) -> bool:
        with self._writing() as conn:
            return writes.add_weights_key(conn, weights_key, queries.require(conn, drafter_id, self.path))

    def keyed(self, weights_key: str) -> list[str]:
        with self._reading() as conn:
            return queries.keyed(conn, weights_key)

    def keys_of(self, drafter_id: str) -> list[str]:
        with self._reading() as conn:
            return queries.keys_of(conn, drafter_id)

    def add_change(self, drafter_id: str, change: RecordChange) -> None:
        try:
            change = RecordChange.model_validate(change)
        except ValidationError as exc:
            raise invalid(exc) from exc
        with self._writing() as conn:
            writes.insert_change(conn, queries.require(conn, drafter_id, self.path), change)

    def absorb(self, twin: str, into: str) -> None:
        with self._writing() as conn:
            twin, into = queries.require(conn, twin, self.path), queries.require(conn, into, self.path)
            if twin == into:
                raise RegistryError(f"cannot merge drafter {twin} into itself", hint="name two different drafters")
            writes.absorb(conn, twin, into)

    def get(self, drafter_id: str) -> DrafterRecord | None:
        with self._reading() as conn:
            found = queries.resolve(conn, drafter_id)
            return None if found is None else queries.load_one(conn, found, self.path)

    def list(self, target: str | None = None) -> list[DrafterRecord]:
        with self._reading() as conn:
            records = queries.load(conn, "", (), self.path)
        return records if target is None else [r for r in records if r.target and r.target.known_as(target)]

    def lineage(self, drafter_id: str) -> list[LineageEdge]:
        with self._reading() as conn:
            found = queries.resolve(conn, drafter_id)
            return [] if found is None else queries.lineage_of(conn, found)

    def remove(self, drafter_id: str) -> bool:
        with self._writing() as conn:
            found = queries.resolve(conn, drafter_id)
            if found is None:
                return False
            writes.delete(conn, found)
            return True

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._txn(write=True):
            yield
