"""The registry store on both backends (a real SQLite file, a real PostgreSQL database): records,
prefixes, lineage, transactions, schema versions; then what only SQLite has: migration of a v1 file,
unusable paths, the default path. Concurrent and killed writers: test_registry_concurrency.py;
what only PostgreSQL has: test_registry_postgres.py."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import without_root_powers
from registry_backends import count, did, set_schema_version, sql

from eagle3_convert.drafter import TargetIdentity
from eagle3_convert.registry.base import RegistryStore
from eagle3_convert.registry.errors import RegistryError
from eagle3_convert.registry.models import DrafterRecord, LineageEdge, Location
from eagle3_convert.registry.paths import default_registry_path
from eagle3_convert.registry.schema import SCHEMA_VERSION
from eagle3_convert.registry.store import SQLiteStore, open_registry

TOOL = "eagle3-convert 0.1.0"
LLAMA = TargetIdentity(
    name_or_path="meta-llama/Llama-3.1-8B-Instruct",
    revision="0e9e39f249a16976918f6564b8830bc894c89659",
    architectures=["LlamaForCausalLM"],
    num_hidden_layers=32,
    hidden_size=4096,
    vocab_size=128256,
)


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


@pytest.fixture
def store(registry_url):
    with open_registry(registry_url) as opened:
        yield opened


def test_record_list_and_show_by_id_and_prefix(store: RegistryStore) -> None:
    llama_id, qwen_id = did("llama-drafter"), did("qwen-drafter")
    store.upsert_drafter(
        llama_id,
        target=LLAMA,
        capture_boundaries=[2, 16, 29],
        ids_as_written={"speculators": [2, 16, 29]},
        draft_vocab_size=32000,
        vocab_size=128256,
        hidden_size=4096,
        flags={"norm_before_residual": False, "fc_norm": False},
        trained_with="speculators 0.3, ultrachat 200k",
    )
    store.upsert_drafter(qwen_id, target=TargetIdentity(name_or_path="Qwen/Qwen3-8B"), capture_boundaries=None)

    assert [r.drafter_id for r in store.list()] == [llama_id, qwen_id]
    assert [r.drafter_id for r in store.list(target="Qwen/Qwen3-8B")] == [qwen_id]
    assert store.list(target="no/such-model") == []

    shown = store.get(llama_id)
    assert shown is not None
    assert shown.target == LLAMA
    assert shown.capture_boundaries == [2, 16, 29]
    assert shown.ids_as_written == {"speculators": [2, 16, 29]}
    assert (shown.draft_vocab_size, shown.vocab_size, shown.hidden_size) == (32000, 128256, 4096)
    assert shown.flags == {"norm_before_residual": False, "fc_norm": False}
    assert shown.trained_with == "speculators 0.3, ultrachat 200k"
    assert shown.created_at.utcoffset().total_seconds() == 0
    assert store.get(llama_id[:7]) == shown
    assert store.get(llama_id[:7].upper()) == shown
    assert store.get(qwen_id).capture_boundaries is None


def test_ambiguous_and_invalid_prefixes_say_what_to_do(store: RegistryStore) -> None:
    first, second = "abcd1" + "0" * 59, "abcd2" + "0" * 59
    store.upsert_drafter(first)
    store.upsert_drafter(second)
    assert store.get("abcd1").drafter_id == first

    with pytest.raises(RegistryError) as ambiguous:
        store.get("abcd")
    assert "ambiguous" in ambiguous.value.message and "2 drafters" in ambiguous.value.message
    assert "more characters" in ambiguous.value.hint
    with pytest.raises(RegistryError):
        store.remove("abcd")
    for bad in ("abc", "not-hex!", ""):
        with pytest.raises(RegistryError) as invalid:
            store.get(bad)
        assert invalid.value.hint
    assert store.get("ffff") is None
    assert store.lineage("ffff") == []
    assert store.remove("ffff") is False


def test_upsert_merges_given_fields_and_dedups_locations(store: RegistryStore, tmp_path: Path) -> None:
    drafter_id = did("merge")
    spec_dir = tmp_path / "spec"
    first = store.upsert_drafter(
        drafter_id,
        target=LLAMA,
        capture_boundaries=[2, 16, 29],
        ids_as_written={"speculators": [2, 16, 29]},
        flags={"fc_norm": False},
        locations=[Location.local(spec_dir, "speculators")],
    )
    again = store.upsert_drafter(
        drafter_id,
        ids_as_written={"sglang": [1, 15, 28]},
        flags={"norm_output": True},
        trained_with="SpecForge",
        # The same directory spelled differently is the same location.
        locations=[Location(layout="speculators", uri=f"{spec_dir}/./"), Location.local(spec_dir, "speculators")],
    )
    assert again.target == LLAMA and again.capture_boundaries == [2, 16, 29]
    assert again.ids_as_written == {"speculators": [2, 16, 29], "sglang": [1, 15, 28]}
    assert again.flags == {"fc_norm": False, "norm_output": True}
    assert again.trained_with == "SpecForge"
    assert len(again.locations) == 1 and again.locations[0].added_at == first.locations[0].added_at
    assert again.created_at == first.created_at and again.updated_at > first.updated_at

    # None is a value: back to the engine default boundaries.
    assert store.upsert_drafter(drafter_id, capture_boundaries=None).capture_boundaries is None
    # Nothing new: the record, including updated_at, stays as it was.
    unchanged = store.get(drafter_id)
    assert store.upsert_drafter(drafter_id, trained_with="SpecForge") == unchanged

    with pytest.raises(RegistryError) as invalid:
        store.upsert_drafter(drafter_id, capture_boundaries=[-1])
    assert "capture_boundaries" in invalid.value.message and invalid.value.hint
    with pytest.raises(RegistryError):
        store.upsert_drafter("not a digest")


def test_lineage_of_one_drafter_through_three_layouts(registry_url, tmp_path: Path) -> None:
    path = registry_url
    drafter_id = did("chain")
    speculators = Location.local(tmp_path / "llama-eagle3", "speculators")
    sglang = Location.local(tmp_path / "llama-eagle3-sglang", "sglang")
    vllm = Location.hub("acme/llama-eagle3-vllm", "vllm", revision="9f1c2e7")

    with open_registry(path) as store:
        store.upsert_drafter(drafter_id, target=LLAMA, capture_boundaries=[2, 16, 29], locations=[speculators])
        for source, dest in ((speculators, sglang), (sglang, vllm)):
            edge = LineageEdge(source=source, dest=dest, tool=TOOL)
            store.upsert_drafter(drafter_id, locations=[dest], lineage=[edge])
        # Recording the second conversion again changes nothing.
        assert store.add_location(drafter_id, vllm) is False
        assert store.add_lineage(drafter_id[:8], LineageEdge(source=sglang, dest=vllm, tool=TOOL)) is False

    with open_registry(path) as store:
        record = store.get(drafter_id[:10])
        assert record is not None
        assert [(loc.layout, loc.kind) for loc in record.locations] == [
            ("speculators", "local"),
            ("sglang", "local"),
            ("vllm", "hub"),
        ]
        assert record.locations[2].path_or_repo == "acme/llama-eagle3-vllm"
        assert record.locations[2].revision == "9f1c2e7"
        edges = store.lineage(drafter_id)
        assert edges == record.lineage
        assert [(e.source.uri, e.dest.uri) for e in edges] == [
            (speculators.uri, sglang.uri),
            (sglang.uri, vllm.uri),
        ]
        assert [(e.source.layout, e.dest.layout) for e in edges] == [("speculators", "sglang"), ("sglang", "vllm")]
        assert all(e.tool == TOOL for e in edges)
        assert len(store.list()) == 1

        assert store.remove(drafter_id) is True
        assert store.get(drafter_id) is None
    assert count(path, "locations") == count(path, "lineage") == 0  # they went with the drafter


def test_add_location_needs_a_recorded_drafter(store: RegistryStore, tmp_path: Path) -> None:
    with pytest.raises(RegistryError) as unknown:
        store.add_location(did("nobody"), Location.local(tmp_path, "speculators"))
    assert "no drafter" in unknown.value.message and unknown.value.hint


def test_a_failed_transaction_writes_nothing(store: RegistryStore) -> None:
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.upsert_drafter(did("a"))
            store.upsert_drafter(did("b"))
            raise RuntimeError("conversion failed")
    assert store.list() == []
    with store.transaction():
        store.upsert_drafter(did("a"))
        store.upsert_drafter(did("b"))
    assert len(store.list()) == 2


# A literal copy of schema version 1, so this test does not lean on the code it checks.
V1_DDL = """
CREATE TABLE drafters (
    drafter_id          TEXT PRIMARY KEY NOT NULL,
    target_name_or_path TEXT,
    target_revision     TEXT,
    capture_boundaries  TEXT,
    draft_vocab_size    INTEGER,
    vocab_size          INTEGER,
    hidden_size         INTEGER,
    flags               TEXT NOT NULL DEFAULT '{}',
    trained_with        TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE TABLE locations (
    drafter_id TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
    layout     TEXT NOT NULL,
    uri        TEXT NOT NULL,
    added_at   TEXT NOT NULL,
    PRIMARY KEY (drafter_id, uri, layout)
);
CREATE TABLE lineage (
    id            INTEGER PRIMARY KEY,
    drafter_id    TEXT NOT NULL REFERENCES drafters(drafter_id) ON DELETE CASCADE,
    source_uri    TEXT NOT NULL,
    source_layout TEXT NOT NULL,
    dest_uri      TEXT NOT NULL,
    dest_layout   TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX lineage_drafter ON lineage(drafter_id);
PRAGMA user_version = 1;
"""


def test_a_version_1_registry_is_migrated_with_its_records(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    drafter_id = did("recorded-by-v1")
    edge = (drafter_id, "/models/spec", "speculators", "/models/sgl", "sglang", "2025-01-02T03:04:05.000000+00:00")
    with sqlite3.connect(path) as conn:
        conn.executescript(V1_DDL)
        conn.execute(
            "INSERT INTO drafters VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                drafter_id,
                "meta-llama/Llama-3.1-8B-Instruct",
                "main",
                "[2,16,29]",
                32000,
                128256,
                4096,
                '{"fc_norm":false}',
                "EAGLE-3 reference trainer",
                "2025-01-01T00:00:00.000000+00:00",
                "2025-01-02T00:00:00.000000+00:00",
            ),
        )
        conn.execute(
            "INSERT INTO locations VALUES (?, 'speculators', '/models/spec', '2025-01-01T00:00:00.000000+00:00')",
            (drafter_id,),
        )
        # v1 allowed the same edge twice.
        conn.executemany(
            "INSERT INTO lineage (drafter_id, source_uri, source_layout, dest_uri, dest_layout, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [edge, edge],
        )
    conn.close()

    with SQLiteStore(path) as store:
        record = store.get(drafter_id)
        assert record is not None
        assert record.target == TargetIdentity(name_or_path="meta-llama/Llama-3.1-8B-Instruct", revision="main")
        assert record.capture_boundaries == [2, 16, 29]
        assert (record.draft_vocab_size, record.vocab_size, record.hidden_size) == (32000, 128256, 4096)
        assert record.flags == {"fc_norm": False}
        assert record.trained_with == "EAGLE-3 reference trainer"
        assert record.created_at.isoformat() == "2025-01-01T00:00:00+00:00"
        assert record.ids_as_written == {}  # never recorded by v1: unknown, not guessed
        assert [(loc.layout, loc.uri) for loc in record.locations] == [("speculators", "/models/spec")]
        assert len(record.lineage) == 1
        assert record.lineage[0].tool.startswith("unknown")

        # The new columns take writes.
        updated = store.upsert_drafter(drafter_id, target=LLAMA, ids_as_written={"speculators": [2, 16, 29]})
        assert updated.target == LLAMA and updated.ids_as_written == {"speculators": [2, 16, 29]}
        to_hub = LineageEdge(
            source=Location(layout="sglang", uri="/models/sgl"), dest=Location.hub("acme/d", "vllm"), tool=TOOL
        )
        assert store.add_lineage(drafter_id, to_hub)

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 2
        assert {row[1] for row in conn.execute("PRAGMA table_info(lineage)")} >= {"tool"}
    conn.close()
    assert integrity(path) == "ok"


def test_a_newer_schema_is_refused(registry_url) -> None:
    open_registry(registry_url).close()
    set_schema_version(registry_url, 999)
    with pytest.raises(RegistryError) as newer:
        open_registry(registry_url)
    assert "999" in newer.value.message and "upgrade" in newer.value.hint and "\n" not in newer.value.message


def test_unwritable_path_is_a_registry_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(RegistryError) as under_file:
        open_registry(blocker / "registry.db")
    assert str(blocker) in under_file.value.message and "EAGLE3_CONVERT_REGISTRY" in under_file.value.hint
    assert "\n" not in under_file.value.message

    with pytest.raises(RegistryError) as folder:
        open_registry(tmp_path)
    assert "folder" in folder.value.message and folder.value.hint


def test_read_only_folder_is_a_registry_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        # A child process: as root, permission bits bind only once the capabilities that skip them are dropped.
        code = ("from eagle3_convert.registry.store import open_registry, RegistryError\n"
                "try:\n    open_registry(%r)\nexcept RegistryError as e:\n"
                "    print(e.message); print(e.hint); raise SystemExit(7)\n") % str(locked / "sub" / "registry.db")
        proc = subprocess.run([*without_root_powers(), sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode == 7, proc.stderr
        message, hint = proc.stdout.splitlines()
        assert "locked" in message and hint
        assert not (locked / "sub").exists()
    finally:
        locked.chmod(0o700)


def test_a_file_that_is_not_sqlite_is_a_registry_error_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    content = b"safetensors? no: this is not a database\n" * 200
    path.write_bytes(content)
    with pytest.raises(RegistryError) as corrupt:
        open_registry(path)
    assert "not a usable registry" in corrupt.value.message and "\n" not in corrupt.value.message
    assert "move the file aside" in corrupt.value.hint
    assert path.read_bytes() == content


def test_another_programs_database_is_refused_and_left_alone(registry_url) -> None:
    if isinstance(registry_url, Path):
        registry_url.parent.mkdir()
    sql(registry_url, "CREATE TABLE bookmarks (url TEXT)", "INSERT INTO bookmarks VALUES ('https://example.org')")
    with pytest.raises(RegistryError) as foreign:
        open_registry(registry_url)
    assert "not an eagle3-convert registry" in foreign.value.message and foreign.value.hint
    assert sql(registry_url, "SELECT url FROM bookmarks") == [("https://example.org",)]


def test_default_path_follows_env_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(tmp_path / "team" / "reg.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_registry_path() == tmp_path / "team" / "reg.db"
    with open_registry() as store:  # parent folders are created
        store.upsert_drafter(did("x"))
    assert (tmp_path / "team" / "reg.db").is_file()

    monkeypatch.delenv("EAGLE3_CONVERT_REGISTRY")
    assert default_registry_path() == tmp_path / "xdg" / "eagle3-convert" / "registry.db"

    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_registry_path() == tmp_path / "home" / ".local" / "share" / "eagle3-convert" / "registry.db"


def test_location_uris() -> None:
    hub = Location(layout="sglang", uri="hf://acme/llama-eagle3@refs/pr/3")
    assert (hub.kind, hub.path_or_repo, hub.revision) == ("hub", "acme/llama-eagle3", "refs/pr/3")
    assert Location.hub("acme/d", "vllm").uri == "hf://acme/d" and Location.hub("acme/d", "vllm").revision is None
    local = Location(layout="speculators", uri="/data/models//drafter/")
    assert (local.kind, local.uri, local.revision) == ("local", "/data/models/drafter", None)
    for bad in ("relative/path", "hf://a/b/c", "hf://acme/d@", ""):
        with pytest.raises(ValueError):
            Location(layout="speculators", uri=bad)
    with pytest.raises(ValueError):
        LineageEdge(source=local, dest=local, tool=TOOL)
    assert DrafterRecord(drafter_id="AB" * 32).drafter_id == "ab" * 32
