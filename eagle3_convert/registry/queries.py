"""Reading the registry: an id or unique prefix resolved, records loaded with their locations and lineage.

The SQL here and in writes.py is common to SQLite and PostgreSQL: `?` placeholders (postgres.py
passes them on as psycopg's), and rows read by index or by column name.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import RegistryError
from .models import Acceptance, DrafterRecord, LineageEdge
from .schema import acceptance_fields, change_fields, edge_fields, to_record

MIN_PREFIX = 4  # as git: shorter prefixes are ambiguous too often to be useful


def resolve(conn: Any, drafter_id: str) -> str | None:
    prefix = drafter_id.strip().lower()
    if not (MIN_PREFIX <= len(prefix) <= 128) or prefix.strip("0123456789abcdef"):
        raise RegistryError(
            f"{drafter_id!r} is not a drafter id or id prefix",
            hint=f"give at least {MIN_PREFIX} hex characters of the id",
        )
    if conn.execute("SELECT 1 FROM drafters WHERE drafter_id = ?", (prefix,)).fetchone():
        return prefix
    # Ids are lowercase hex, so those starting with `prefix` are exactly those in [prefix, prefix + "g"):
    # a range both databases answer from the primary key index.
    span = (prefix, prefix + "g")
    count = conn.execute("SELECT count(*) FROM drafters WHERE drafter_id >= ? AND drafter_id < ?", span).fetchone()[0]
    if count == 0:  # an id merged into another record (a Hub fingerprint) still names it
        merged = conn.execute("SELECT DISTINCT drafter_id FROM aliases WHERE alias >= ? AND alias < ? LIMIT 2",
                              span).fetchall()
        return merged[0][0] if len(merged) == 1 else None
    first = conn.execute(
        "SELECT drafter_id FROM drafters WHERE drafter_id >= ? AND drafter_id < ? ORDER BY drafter_id LIMIT 3", span
    ).fetchall()
    if count > 1:
        shown = ", ".join(row[0][:16] for row in first) + (", ..." if count > 3 else "")
        raise RegistryError(
            f"drafter id prefix {prefix!r} is ambiguous: it matches {count} drafters ({shown})",
            hint="give more characters of the id",
        )
    return first[0][0]


def require(conn: Any, drafter_id: str, path: str | Path) -> str:
    found = resolve(conn, drafter_id)
    if found is None:
        raise RegistryError(
            f"no drafter {drafter_id} in the registry {path}",
            hint="record the drafter first, or check the id against the registry's list",
        )
    return found


def load(conn: Any, where: str, params: tuple[Any, ...], path: str | Path) -> list[DrafterRecord]:
    rows = conn.execute(f"SELECT * FROM drafters {where} ORDER BY created_at, drafter_id", params).fetchall()
    if not rows:
        return []
    selected = f"SELECT drafter_id FROM drafters {where}"
    locations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    # Ties in added_at keep insertion order: SQLite's rowid; PostgreSQL's ctid (locations are never updated).
    order = getattr(conn, "insertion_order", "rowid")
    for row in conn.execute(
        f"SELECT * FROM locations WHERE drafter_id IN ({selected}) ORDER BY added_at, {order}", params
    ):
        locations[row["drafter_id"]].append(
            {"layout": row["layout"], "uri": row["uri"], "added_at": row["added_at"]}
        )
    edges: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in conn.execute(
        f"SELECT * FROM lineage WHERE drafter_id IN ({selected}) ORDER BY created_at, id", params
    ):
        edges[row["drafter_id"]].append(edge_fields(row))
    changes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in conn.execute(
        f"SELECT * FROM record_changes WHERE drafter_id IN ({selected}) ORDER BY changed_at, id", params
    ):
        changes[row["drafter_id"]].append(change_fields(row))
    try:
        return [to_record(row, locations[row["drafter_id"]], edges[row["drafter_id"]], changes[row["drafter_id"]])
                for row in rows]
    except (ValidationError, ValueError) as exc:  # a field that fails its model, or a JSON column that is not JSON
        why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else f"a stored JSON value: {exc}"
        raise RegistryError(
            f"the registry {path} holds a record it cannot read: {why}",
            hint="remove that drafter, or move the file aside to start a new registry",
        ) from exc


def load_one(conn: Any, drafter_id: str, path: str | Path) -> DrafterRecord | None:
    found = load(conn, "WHERE drafter_id = ?", (drafter_id,), path)
    return found[0] if found else None


def lineage_of(conn: Any, drafter_id: str) -> list[LineageEdge]:
    """The conversions recorded for `drafter_id` (resolved), oldest first."""
    rows = conn.execute(
        "SELECT * FROM lineage WHERE drafter_id = ? ORDER BY created_at, id", (drafter_id,)
    ).fetchall()
    return [LineageEdge.model_validate(edge_fields(row)) for row in rows]


def acceptance_of(conn: Any, drafter_id: str) -> list[Acceptance]:
    """What `verify` measured of `drafter_id` (resolved), oldest first."""
    rows = conn.execute("SELECT * FROM acceptance WHERE drafter_id = ? ORDER BY measured_at, id",
                        (drafter_id,)).fetchall()
    return [Acceptance.model_validate(acceptance_fields(row)) for row in rows]


def aliased(conn: Any, alias: str) -> str | None:
    """The drafter an alias names (a Hub fingerprint of a record merged into it), or None."""
    row = conn.execute("SELECT drafter_id FROM aliases WHERE alias = ?", (alias.strip().lower(),)).fetchone()
    return None if row is None else row[0]


def keyed(conn: Any, weights_key: str) -> list[str]:
    """The drafters recorded with this weights lookup key."""
    rows = conn.execute("SELECT drafter_id FROM weight_keys WHERE weights_key = ? ORDER BY drafter_id", (weights_key,))
    return [row[0] for row in rows]


def keys_of(conn: Any, drafter_id: str) -> list[str]:
    rows = conn.execute("SELECT weights_key FROM weight_keys WHERE drafter_id = ? ORDER BY weights_key", (drafter_id,))
    return [row[0] for row in rows]


def holding(conn: Any, uri: str) -> list[str]:
    """The drafters with a copy at `uri`; a Hub uri's repo id compared ignoring case (as the Hub does)."""
    if uri.startswith("hf://"):
        rows = conn.execute("SELECT DISTINCT drafter_id FROM locations WHERE lower(uri) = lower(?) ORDER BY drafter_id",
                            (uri,))
    else:
        rows = conn.execute("SELECT DISTINCT drafter_id FROM locations WHERE uri = ? ORDER BY drafter_id", (uri,))
    return [row[0] for row in rows]
