"""The registry's schema: the forward migrations, and how a `DrafterRecord` maps to rows and back.

The steps are SQLite's text; `for_postgres` spells the one type PostgreSQL writes otherwise, so both
backends go through the same versions to the same tables and columns.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from .models import Acceptance, DrafterRecord, RecordChange

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
    # v3: how each drafter id was computed, and the ids a merged record was known by. Every record
    # before v3 is taken as content-identified (fingerprint.py); a record `registry sync` named by a
    # Hub fingerprint is marked as such when the next sync reads its repo again.
    (
        "ALTER TABLE drafters ADD COLUMN id_kind TEXT NOT NULL DEFAULT 'content'",  # or 'hub-fingerprint'
        """CREATE TABLE aliases (
            alias      TEXT PRIMARY KEY NOT NULL,
            drafter_id TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
            added_at   TEXT NOT NULL
        )""",
    ),
    # v4: the drafter kind (EAGLE-3 or P-EAGLE); every record before v4 is an EAGLE-3 drafter.
    (
        "ALTER TABLE drafters ADD COLUMN drafter_kind TEXT NOT NULL DEFAULT 'eagle3'",
    ),
    # v5: a drafter is its weights (fingerprint.py): the ids recorded before digested the canonical config
    # too. They cannot be recomputed here (that needs the tensors' bytes): such a record is marked
    # `config-and-weights` and merged into its weights id, its old id kept as an alias, when a copy of it is
    # read again (records.py). Lineage edges say what they are: `convert` (the same drafter in another
    # layout) or `cast` (a new drafter derived from `derived_from` by a dtype change).
    (
        "UPDATE drafters SET id_kind = 'config-and-weights' WHERE id_kind = 'content'",
        "ALTER TABLE lineage ADD COLUMN kind TEXT NOT NULL DEFAULT 'convert'",
        "ALTER TABLE lineage ADD COLUMN derived_from TEXT",
    ),
    # v6: the acceptance `verify` measured, one row per measurement: the drafter with one target (and its revision,
    # when known) on one prompt set (its digest), at k drafts a round, capturing the boundaries it lists.
    (
        """CREATE TABLE acceptance (
            id            INTEGER PRIMARY KEY,
            drafter_id           TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
            target_name_or_path  TEXT NOT NULL,
            target_revision      TEXT,
            prompts_sha256       TEXT NOT NULL,
            prompts              INTEGER NOT NULL,
            max_new_tokens       INTEGER NOT NULL,
            k                    INTEGER NOT NULL,
            capture_boundaries   TEXT NOT NULL,  -- JSON list of ints
            mean_accepted_length DOUBLE PRECISION NOT NULL,  -- the bonus token counted
            per_position         TEXT NOT NULL,  -- JSON list: the share of rounds accepting draft j
            rounds               INTEGER NOT NULL,
            tokens_per_second    DOUBLE PRECISION NOT NULL,
            device               TEXT NOT NULL,
            tool                 TEXT NOT NULL,
            measured_at          TEXT NOT NULL
        )""",
        "CREATE INDEX acceptance_drafter ON acceptance(drafter_id)",
    ),
    # v7: a drafter is found by its weights and a target by its facts. Each record keeps the lookup keys of its
    # weights (fingerprint.weights_key; a key may name more than one drafter: it is a sample, not an identity),
    # the other names of its target and the digest of the target's config, and every change made to it.
    (
        "ALTER TABLE drafters ADD COLUMN target_aliases TEXT NOT NULL DEFAULT '[]'",  # JSON list
        "ALTER TABLE drafters ADD COLUMN target_config_sha256 TEXT",
        """CREATE TABLE weight_keys (
            weights_key TEXT NOT NULL,
            drafter_id  TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
            added_at    TEXT NOT NULL,
            PRIMARY KEY (weights_key, drafter_id)
        )""",
        """CREATE TABLE record_changes (
            id            INTEGER PRIMARY KEY,
            drafter_id  TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
            field       TEXT NOT NULL,
            old_value   TEXT,  -- JSON
            new_value   TEXT,  -- JSON
            reason      TEXT NOT NULL,
            tool        TEXT NOT NULL,
            changed_at  TEXT NOT NULL
        )""",
        "CREATE INDEX record_changes_drafter ON record_changes(drafter_id)",
    ),
    # v8: a quantized drafter's scheme (JSON; NULL for a plain drafter), issue 35
    ("ALTER TABLE drafters ADD COLUMN quantization TEXT",),
    # v9: a measurement keeps the capture layers `verify --scan-layers` ranked on the same decoded text (JSON list,
    # best first; NULL: not scanned), so that `registry site` can chart them.
    (
        "ALTER TABLE acceptance ADD COLUMN scan TEXT",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# SQLite's INTEGER PRIMARY KEY is its rowid, numbered on insert; PostgreSQL says so with an identity column.
_POSTGRES_SPELLING = (
    ("id            INTEGER PRIMARY KEY,", "id            BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"),
)


def for_postgres(statement: str) -> str:
    """A migration statement as PostgreSQL runs it (the rest of the DDL is common to both)."""
    for sqlite_text, postgres_text in _POSTGRES_SPELLING:
        statement = statement.replace(sqlite_text, postgres_text)
    return statement

DRAFTER_COLUMNS = (
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
    "id_kind",
    "drafter_kind",
    "quantization",
    "created_at",
    "updated_at",
    "target_aliases",
    "target_config_sha256",
)
TARGET_COLUMNS = (*DRAFTER_COLUMNS[1:7], "target_config_sha256")


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def ts(value: datetime) -> str:
    # Fixed width keeps text order equal to time order.
    return value.isoformat(timespec="microseconds")


def to_row(record: DrafterRecord) -> dict[str, Any]:
    target = record.target
    return {
        "drafter_id": record.drafter_id,
        "target_name_or_path": None if target is None else target.name_or_path,
        "target_revision": None if target is None else target.revision,
        "target_architectures": None if target is None else dumps(target.architectures),
        "target_num_hidden_layers": None if target is None else target.num_hidden_layers,
        "target_hidden_size": None if target is None else target.hidden_size,
        "target_vocab_size": None if target is None else target.vocab_size,
        "capture_boundaries": dumps(record.capture_boundaries),
        "ids_as_written": dumps(record.ids_as_written),
        "draft_vocab_size": record.draft_vocab_size,
        "vocab_size": record.vocab_size,
        "hidden_size": record.hidden_size,
        "flags": dumps(record.flags),
        "trained_with": record.trained_with,
        "id_kind": record.id_kind,
        "drafter_kind": record.drafter_kind,
        "quantization": None if record.quantization is None else dumps(record.quantization),
        "created_at": ts(record.created_at),
        "updated_at": ts(record.updated_at),
        "target_aliases": dumps([] if target is None else target.aliases),
        "target_config_sha256": None if target is None else target.config_sha256,
    }


def row_values(record: DrafterRecord) -> tuple[Any, ...]:
    """`to_row` in DRAFTER_COLUMNS order, for UPSERT_ROW's placeholders."""
    row = to_row(record)
    return tuple(row[column] for column in DRAFTER_COLUMNS)


UPSERT_ROW = (
    f"INSERT INTO drafters ({', '.join(DRAFTER_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in DRAFTER_COLUMNS)}) "
    "ON CONFLICT(drafter_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in DRAFTER_COLUMNS if c not in ("drafter_id", "created_at"))
)


def edge_fields(row: Any) -> dict[str, Any]:
    return {
        "source": {"uri": row["source_uri"], "layout": row["source_layout"]},
        "dest": {"uri": row["dest_uri"], "layout": row["dest_layout"]},
        "tool": row["tool"],
        "created_at": row["created_at"],
        "kind": row["kind"],
        "derived_from": row["derived_from"],
    }


def to_record(row: Any, locations: list[dict[str, Any]], lineage: list[dict[str, Any]],
              changes: list[dict[str, Any]] = ()) -> DrafterRecord:
    target = None
    if any(row[column] is not None for column in TARGET_COLUMNS):
        target = {
            "name_or_path": row["target_name_or_path"],
            "revision": row["target_revision"],
            "architectures": loads(row["target_architectures"]) or [],
            "num_hidden_layers": row["target_num_hidden_layers"],
            "hidden_size": row["target_hidden_size"],
            "vocab_size": row["target_vocab_size"],
            "aliases": loads(row["target_aliases"]) or [],
            "config_sha256": row["target_config_sha256"],
        }
    return DrafterRecord.model_validate(
        {
            "drafter_id": row["drafter_id"],
            "target": target,
            "capture_boundaries": loads(row["capture_boundaries"]),
            "ids_as_written": loads(row["ids_as_written"]),
            "draft_vocab_size": row["draft_vocab_size"],
            "vocab_size": row["vocab_size"],
            "hidden_size": row["hidden_size"],
            "flags": loads(row["flags"]),
            "trained_with": row["trained_with"],
            "id_kind": row["id_kind"],
            "drafter_kind": row["drafter_kind"],
            "quantization": None if row["quantization"] is None else loads(row["quantization"]),
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "locations": locations,
            "lineage": lineage,
            "changes": list(changes),
        }
    )


ACCEPTANCE_COLUMNS = ("drafter_id", "target_name_or_path", "target_revision", "prompts_sha256", "prompts",
                      "max_new_tokens", "k", "capture_boundaries", "mean_accepted_length", "per_position", "rounds",
                      "tokens_per_second", "device", "tool", "measured_at", "scan")
INSERT_ACCEPTANCE = (f"INSERT INTO acceptance ({', '.join(ACCEPTANCE_COLUMNS)}) "
                     f"VALUES ({', '.join('?' for _ in ACCEPTANCE_COLUMNS)})")


def acceptance_values(drafter_id: str, measured: Acceptance) -> tuple[Any, ...]:
    row = {**measured.model_dump(), "drafter_id": drafter_id, "measured_at": ts(measured.measured_at),
           "capture_boundaries": dumps(measured.capture_boundaries), "per_position": dumps(measured.per_position),
           "scan": None if measured.scan is None else dumps([c.model_dump() for c in measured.scan])}
    return tuple(row[name] for name in ACCEPTANCE_COLUMNS)


def acceptance_fields(row: Any) -> dict[str, Any]:
    data = {name: row[name] for name in ACCEPTANCE_COLUMNS[1:]}
    data["capture_boundaries"], data["per_position"] = loads(data["capture_boundaries"]), loads(data["per_position"])
    data["scan"] = None if data["scan"] is None else loads(data["scan"])
    data["measured_at"] = datetime.fromisoformat(data["measured_at"])
    return data


CHANGE_COLUMNS = ("drafter_id", "field", "old_value", "new_value", "reason", "tool", "changed_at")
INSERT_CHANGE = (f"INSERT INTO record_changes ({', '.join(CHANGE_COLUMNS)}) "
                 f"VALUES ({', '.join('?' for _ in CHANGE_COLUMNS)})")


def change_values(drafter_id: str, change: RecordChange) -> tuple[Any, ...]:
    return (drafter_id, change.field, dumps(change.old), dumps(change.new), change.reason, change.tool,
            ts(change.changed_at))


def change_fields(row: Any) -> dict[str, Any]:
    return {"field": row["field"], "old": loads(row["old_value"]), "new": loads(row["new_value"]),
            "reason": row["reason"], "tool": row["tool"], "changed_at": row["changed_at"]}
