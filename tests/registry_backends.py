"""What the registry tests share across backends: ids, child processes, and raw SQL on the database
behind a registry (an SQLite path or a postgresql:// URL), straight through the driver, not our code."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from eagle3_convert.registry.schema import MIGRATIONS, for_postgres

REPO = Path(__file__).resolve().parents[1]


def did(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def is_postgres(registry: object) -> bool:
    return str(registry).startswith(("postgresql://", "postgres://"))


def backend(registry: object) -> str:
    return "postgresql" if is_postgres(registry) else "sqlite"


def run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def sql(registry: object, *statements: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run `statements` in one transaction (`?` placeholders); the last one's rows."""
    if is_postgres(registry):
        import psycopg

        with psycopg.connect(str(registry)) as conn:  # commits on leaving
            rows: list[tuple[Any, ...]] = []
            for statement in statements:
                cursor = conn.execute(statement.replace("?", "%s"), params or None)
                rows = cursor.fetchall() if cursor.description else []
            return rows
    conn = sqlite3.connect(registry)  # type: ignore[arg-type]
    try:
        with conn:
            rows = []
            for statement in statements:
                rows = conn.execute(statement, params).fetchall()
            return rows
    finally:
        conn.close()


def count(registry: object, table: str) -> int:
    return sql(registry, f"SELECT count(*) FROM {table}")[0][0]


def schema_version(registry: object) -> int:
    if is_postgres(registry):
        return sql(registry, "SELECT version FROM eagle3_registry_version")[0][0]
    return sql(registry, "PRAGMA user_version")[0][0]


def set_schema_version(registry: object, version: int) -> None:
    if is_postgres(registry):
        sql(registry, f"UPDATE eagle3_registry_version SET version = {version}")
    else:
        sql(registry, f"PRAGMA user_version = {version}")


def registry_as_released(registry: object, version: int) -> None:
    """A registry as schema `version` left it (its released steps, applied as the code of that version did)."""
    steps = [statement for step in MIGRATIONS[:version] for statement in step]
    if is_postgres(registry):
        sql(registry, "CREATE TABLE eagle3_registry_version (version INTEGER NOT NULL)",
            f"INSERT INTO eagle3_registry_version VALUES ({version})", *map(for_postgres, steps))
    else:
        Path(registry).parent.mkdir(parents=True, exist_ok=True)
        sql(registry, *steps, f"PRAGMA user_version = {version}")


def registry_columns(registry: object) -> dict[str, list[str]]:
    """The registry's tables and their columns in order (PostgreSQL's version table left out)."""
    if is_postgres(registry):
        rows = sql(registry, "SELECT table_name, column_name FROM information_schema.columns "
                             "WHERE table_schema = current_schema() AND table_name <> 'eagle3_registry_version' "
                             "ORDER BY table_name, ordinal_position")
    else:
        tables = [r[0] for r in sql(registry, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = [(t, r[1]) for t in tables for r in sql(registry, f"PRAGMA table_info({t})")]
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(table, []).append(column)
    return out


def registry_indexes(registry: object) -> set[str]:
    """The named indexes (primary keys' own indexes left out: their names differ by engine)."""
    if is_postgres(registry):
        rows = sql(registry, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                             "AND indexname NOT LIKE '%_pkey'")
    else:
        rows = sql(registry, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    return {r[0] for r in rows}
