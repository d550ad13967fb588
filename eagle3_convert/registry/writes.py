"""Writing the registry: a record merged in, locations and lineage edges added once, copies forgotten.

Every function runs inside the caller's write transaction (`SQLStore._writing()`): one writer at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .models import Acceptance, DrafterRecord, LineageEdge, Location, RecordChange, utcnow
from .queries import load_one
from .schema import INSERT_ACCEPTANCE, INSERT_CHANGE, UPSERT_ROW, acceptance_values, change_values, row_values, ts

MERGED_DICTS = ("ids_as_written", "flags")


def upsert(conn: Any, record: DrafterRecord, fields: frozenset[str], locations: list[Location],
           lineage: list[LineageEdge], path: str | Path) -> DrafterRecord:
    """Merge `fields` of a validated `record`, then add locations and edges; the merged record."""
    old = load_one(conn, record.drafter_id, path)
    now = utcnow()
    if old is None:
        conn.execute(UPSERT_ROW, row_values(record.model_copy(update={"created_at": now, "updated_at": now})))
    else:
        changes = {name: getattr(record, name) for name in fields}
        for name in fields.intersection(MERGED_DICTS):
            changes[name] = {**getattr(old, name), **getattr(record, name)}
        if any(getattr(old, name) != value for name, value in changes.items()):
            conn.execute(UPSERT_ROW, row_values(old.model_copy(update={**changes, "updated_at": now})))
    added = [insert_location(conn, record.drafter_id, loc) for loc in locations]
    added += [insert_edge(conn, record.drafter_id, edge) for edge in lineage]
    if old is not None and any(added):
        touch(conn, record.drafter_id)
    merged = load_one(conn, record.drafter_id, path)
    assert merged is not None  # written in this transaction
    return merged


def insert_location(conn: Any, drafter_id: str, location: Location) -> bool:
    cursor = conn.execute(
        "INSERT INTO locations (drafter_id, layout, uri, added_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (drafter_id, location.layout, location.uri, ts(location.added_at)),
    )
    return cursor.rowcount == 1


def insert_edge(conn: Any, drafter_id: str, edge: LineageEdge) -> bool:
    cursor = conn.execute(
        "INSERT INTO lineage (drafter_id, source_uri, source_layout, dest_uri, dest_layout, tool,"
        " created_at, kind, derived_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            drafter_id,
            edge.source.uri,
            edge.source.layout,
            edge.dest.uri,
            edge.dest.layout,
            edge.tool,
            ts(edge.created_at),
            edge.kind,
            edge.derived_from,
        ),
    )
    return cursor.rowcount == 1


def insert_acceptance(conn: Any, drafter_id: str, measured: Acceptance) -> bool:
    """One measurement: every one is kept (the same drafter measured again may differ: other prompts, k, device)."""
    conn.execute(INSERT_ACCEPTANCE, acceptance_values(drafter_id, measured))
    return True


def touch(conn: Any, drafter_id: str) -> None:
    conn.execute("UPDATE drafters SET updated_at = ? WHERE drafter_id = ?", (ts(utcnow()), drafter_id))


def forget_location(conn: Any, uri: str, keep: str | None, layout: str | None = None) -> int:
    spared = keep or ""  # no drafter id is empty
    if layout is None:  # every copy of `keep` at `uri` is spared
        stale_rows, params = "uri = ? AND drafter_id <> ?", (uri, spared)
    else:
        stale_rows, params = "uri = ? AND (drafter_id <> ? OR layout <> ?)", (uri, spared, layout)
    stale = [row[0] for row in conn.execute(f"SELECT DISTINCT drafter_id FROM locations WHERE {stale_rows}", params)]
    conn.execute(f"DELETE FROM locations WHERE {stale_rows}", params)
    for drafter_id in stale:
        touch(conn, drafter_id)
    return len(stale)


def delete(conn: Any, drafter_id: str) -> None:
    # Locations, lineage and measured acceptance go with it (ON DELETE CASCADE, foreign_keys on).
    conn.execute("DELETE FROM drafters WHERE drafter_id = ?", (drafter_id,))


def absorb(conn: Any, twin: str, into: str) -> None:
    """Merge the record `twin` into `into`: its copies, lineage edges and measured acceptance move, `twin` becomes an
    alias of `into` (as do the aliases it had), and `twin` is deleted. The caller has merged the fields it keeps."""
    for statement in (
        "INSERT INTO locations (drafter_id, layout, uri, added_at) SELECT ?, layout, uri, added_at FROM locations"
        " WHERE drafter_id = ? ON CONFLICT DO NOTHING",
        "INSERT INTO lineage (drafter_id, source_uri, source_layout, dest_uri, dest_layout, tool, created_at, kind,"
        " derived_from) SELECT ?, source_uri, source_layout, dest_uri, dest_layout, tool, created_at, kind,"
        " derived_from FROM lineage"
        " WHERE drafter_id = ? ORDER BY id ON CONFLICT DO NOTHING",
        "UPDATE aliases SET drafter_id = ? WHERE drafter_id = ?",
        "UPDATE acceptance SET drafter_id = ? WHERE drafter_id = ?",
        "UPDATE record_changes SET drafter_id = ? WHERE drafter_id = ?",
        "INSERT INTO weight_keys (weights_key, drafter_id, added_at) SELECT weights_key, ?, added_at FROM weight_keys"
        " WHERE drafter_id = ? ON CONFLICT DO NOTHING",
    ):
        conn.execute(statement, (into, twin))
    add_alias(conn, twin, into)
    delete(conn, twin)  # after the alias: the twin's own aliases would go with it (ON DELETE CASCADE)
    touch(conn, into)


def add_alias(conn: Any, alias: str, drafter_id: str) -> bool:
    """Remember that `alias` (a Hub fingerprint, or an id from before schema v5) names `drafter_id`; False if it
    already named a drafter."""
    cursor = conn.execute("INSERT INTO aliases (alias, drafter_id, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                          (alias, drafter_id, ts(utcnow())))
    return cursor.rowcount == 1


def add_weights_key(conn: Any, weights_key: str, drafter_id: str) -> bool:
    cursor = conn.execute("INSERT INTO weight_keys (weights_key, drafter_id, added_at) VALUES (?, ?, ?) "
                          "ON CONFLICT DO NOTHING", (weights_key, drafter_id, ts(utcnow())))
    return cursor.rowcount == 1


def insert_change(conn: Any, drafter_id: str, change: RecordChange) -> None:
    conn.execute(INSERT_CHANGE, change_values(drafter_id, change))
