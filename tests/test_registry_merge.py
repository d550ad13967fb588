"""One drafter, one record (docs: README "Registry sync"): a Hub repo that `registry sync` recorded under its
hub fingerprint and the same drafter recorded under its content id (convert or `registry add` from that Hub
commit) become one record, in either order, on both registry backends; where the two disagree the user is told
and nothing is lost. The loopback Hub of tests/hub_server.py, the real huggingface_hub client, real files, a real
SQLite file and a real PostgreSQL server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_backends import backend, registry_as_released, schema_version, sql

from builders import DrafterSpec, build_drafter, write_target
from conftest import registry_records, run_cli
from eagle3_convert.registry.schema import SCHEMA_VERSION
from eagle3_convert.registry.store import open_registry
from hub_server import HubServer, isolate_hf_client

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_merge_secret_token"
ORG = "merge-org"
TARGET = "org/target-model"  # DrafterSpec's verifier, 8 layers
CARD = f"---\nbase_model: {TARGET}\nlibrary_name: sglang\ntags:\n- eagle3\n---\n\n# a SpecForge export\n"
TABLES = ("drafters", "locations", "lineage", "aliases")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    tmp = tmp_path_factory.mktemp("hub-merge")
    with pytest.MonkeyPatch.context() as mp:
        isolate_hf_client(mp, tmp / "hf-home")
        with HubServer() as server:
            target = write_target(tmp / "target", DrafterSpec())
            server.create_repo(TARGET)
            server.commit(TARGET, {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()})
            server.tmp = tmp  # type: ignore[attr-defined]
            yield server


def raw_repo(hub: HubServer, registry: Path | str, name: str, seed: int, bounds: tuple[int, ...] = (1, 3, 6)) -> str:
    """A SpecForge export we did not publish (no sidecar): sync names it by its hub fingerprint. One per backend."""
    name = f"{name}-{backend(registry)}"
    repo = f"{ORG}/{name}"
    spec = DrafterSpec(capture_boundaries=bounds, seed=seed)
    src = build_drafter(hub.tmp / name, "sglang", spec)  # type: ignore[attr-defined]
    hub.create_repo(repo)
    hub.commit(repo, {**{p.name: p.read_bytes() for p in src.iterdir() if p.is_file()}, "README.md": CARD.encode()})
    return repo


def sync(hub: HubServer, registry: Path | str, repo: str) -> tuple[int, dict]:
    result = run_cli("registry", "sync", repo, "--endpoint", hub.url, "--token", TOKEN, "--registry", registry,
                     "--json")
    return result.exit_code, json.loads(result.stdout)


def convert(hub: HubServer, registry: Path | str, repo: str, dest: Path):
    return run_cli("--to", "vllm", repo, dest, "--endpoint", hub.url, "--token", TOKEN, "--registry", registry,
                   "--json")


def rows(registry: Path | str) -> dict[str, list[tuple]]:
    """Every row of every table, straight from the database: "changes 0 rows" is checked on these."""
    return {table: sorted(map(tuple, sql(registry, f"SELECT * FROM {table}")), key=repr) for table in TABLES}


def uri_of(hub: HubServer, repo: str) -> str:
    return f"hf://{repo}@{hub.repo(repo).branches['main']}"


def test_sync_then_convert_from_the_hub_is_one_record(hub: HubServer, registry_url: Path | str, tmp_path: Path):
    repo = raw_repo(hub, registry_url, "sync-first", seed=500)
    code, doc = sync(hub, registry_url, repo)
    assert code == 0 and doc["repos"][0]["identity"] == "hub-fingerprint"
    fingerprint = doc["repos"][0]["drafter_id"]
    [synced] = registry_records(registry_url)
    assert synced["id_kind"] == "hub-fingerprint" and synced["drafter_id"] == fingerprint

    out = tmp_path / "out"
    result = convert(hub, registry_url, repo, out)
    assert result.exit_code == 0, result.stderr
    converted = json.loads(result.stdout)
    assert converted["registry_conflicts"] == [] and "warning" not in result.stderr
    assert any(note.startswith("merged the record registry sync made of") for note in converted["notes"])
    [record] = registry_records(registry_url)  # one drafter, one record
    assert record["drafter_id"] == converted["drafter_id"] != fingerprint and record["id_kind"] == "content"
    assert {(loc["layout"], loc["uri"]) for loc in record["locations"]} == {
        ("sglang", uri_of(hub, repo)), ("vllm", str(out.resolve()))}
    assert [(e["source"]["uri"], e["dest"]["uri"]) for e in record["lineage"]] == [(uri_of(hub, repo),
                                                                                     str(out.resolve()))]
    assert record["capture_boundaries"] == [1, 3, 6] and record["target"]["name_or_path"] == TARGET
    assert sql(registry_url, "SELECT alias, drafter_id FROM aliases") == [(fingerprint, record["drafter_id"])]
    for old_id in (fingerprint, fingerprint[:10]):  # the id sync printed still names the drafter, now merged
        shown = json.loads(run_cli("registry", "show", old_id, "--registry", registry_url, "--json").stdout)
        assert shown["record"]["drafter_id"] == record["drafter_id"]
    found = json.loads(run_cli("search", "--target", TARGET, "--registry", registry_url, "--json").stdout)
    assert [d["drafter_id"] for d in found["drafters"]] == [record["drafter_id"]]  # listed once

    # Sync again: it finds the record through the alias; not one row changes.
    before = rows(registry_url)
    code, again = sync(hub, registry_url, repo)
    assert code == 0 and again["counts"]["unchanged"] == 1, again
    assert again["repos"][0]["drafter_id"] == record["drafter_id"]
    assert rows(registry_url) == before

    # A new commit that leaves config and weights alone: a new location on the same record, no twin.
    hub.commit(repo, {"README.md": (CARD + "\nNow with a usage section.\n").encode()})
    code, third = sync(hub, registry_url, repo)
    assert code == 0 and third["counts"]["new-location"] == 1, third
    [after] = registry_records(registry_url)
    assert after["drafter_id"] == record["drafter_id"] and uri_of(hub, repo) in {l["uri"] for l in after["locations"]}


def test_convert_then_sync_attaches_to_the_record(hub: HubServer, registry_url: Path | str, tmp_path: Path):
    repo = raw_repo(hub, registry_url, "convert-first", seed=501)
    out = tmp_path / "out"
    result = convert(hub, registry_url, repo, out)
    assert result.exit_code == 0, result.stderr
    true_id = json.loads(result.stdout)["drafter_id"]

    code, doc = sync(hub, registry_url, repo)
    assert code == 0, doc
    [entry] = doc["repos"]
    assert entry["drafter_id"] == true_id and entry["identity"] == "hub-fingerprint"
    assert entry["status"] in ("unchanged", "updated") and any("content id" in n for n in entry["notes"])
    [record] = registry_records(registry_url)
    assert record["drafter_id"] == true_id and record["id_kind"] == "content"
    assert {loc["uri"] for loc in record["locations"]} == {uri_of(hub, repo), str(out.resolve())}
    assert len(record["lineage"]) == 1 and record["target"]["name_or_path"] == TARGET
    [(alias, owner)] = sql(registry_url, "SELECT alias, drafter_id FROM aliases")
    assert owner == true_id and alias != true_id

    before = rows(registry_url)
    code, again = sync(hub, registry_url, repo)
    assert code == 0 and again["counts"]["unchanged"] == 1 and rows(registry_url) == before


def test_a_disagreement_is_reported_and_nothing_is_lost(hub: HubServer, registry_url: Path | str, tmp_path: Path):
    repo = raw_repo(hub, registry_url, "disagree", seed=502)
    assert sync(hub, registry_url, repo)[0] == 0
    [synced] = registry_records(registry_url)
    with open_registry(registry_url) as store:  # someone stated another training truth on the synced record
        store.upsert_drafter(synced["drafter_id"], capture_boundaries=[2, 3, 7])
    [twin] = registry_records(registry_url)

    result = convert(hub, registry_url, repo, tmp_path / "out")
    assert result.exit_code == 0, result.stderr  # DST is written and recorded
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert "[E-SYNC-CONFLICT]" in line and synced["drafter_id"][:12] in line and "[2, 3, 7]" in line
    doc = json.loads(result.stdout)
    [conflict] = doc["registry_conflicts"]
    assert conflict["drafter_id"] == synced["drafter_id"] and conflict["uri"] == uri_of(hub, repo)
    assert conflict["conflicts"] == [{"field": "capture_boundaries", "hub": [2, 3, 7], "registry": [1, 3, 6]}]
    records = {r["drafter_id"]: r for r in registry_records(registry_url)}
    assert records[synced["drafter_id"]] == twin  # the synced record untouched
    assert len(records) == 2 and {loc["uri"] for loc in records[doc["drafter_id"]]["locations"]} == {
        uri_of(hub, repo), str((tmp_path / "out").resolve())}

    # registry add of the same Hub commit: recorded, and it fails as sync fails on a conflict.
    before = rows(registry_url)
    added = run_cli("registry", "add", repo, "--endpoint", hub.url, "--registry", registry_url, "--json")
    assert added.exit_code == 1 and json.loads(added.stdout)["error"]["code"] == "E-SYNC-CONFLICT"
    assert "Fetching" not in added.stderr and "%|" not in added.stderr  # no download bar off a terminal
    assert json.loads(added.stdout)["conflicts"][0]["drafter_id"] == synced["drafter_id"]
    assert rows(registry_url) == before

    # Sync against the record under the content id: a conflict, nothing of the repo written.
    code, again = sync(hub, registry_url, repo)
    assert code == 1 and again["error"]["code"] == "E-SYNC-CONFLICT" and again["repos"][0]["status"] == "conflict"
    assert rows(registry_url) == before

    # The user settles it: forget the synced record; the next sync attaches to the content record.
    assert run_cli("registry", "remove", synced["drafter_id"], "--registry", registry_url).exit_code == 0
    code, settled = sync(hub, registry_url, repo)
    assert code == 0 and settled["repos"][0]["drafter_id"] == doc["drafter_id"]
    assert len(registry_records(registry_url)) == 1


def test_a_sync_contradicting_the_content_record_writes_nothing(hub: HubServer, registry_url: Path | str,
                                                                 tmp_path: Path):
    repo = raw_repo(hub, registry_url, "contradicted", seed=503)
    result = convert(hub, registry_url, repo, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    with open_registry(registry_url) as store:
        store.upsert_drafter(json.loads(result.stdout)["drafter_id"], capture_boundaries=[2, 3, 7])
    before = rows(registry_url)
    code, doc = sync(hub, registry_url, repo)
    assert code == 1 and doc["repos"][0]["status"] == "conflict" and doc["repos"][0]["conflicts"] == [
        {"field": "capture_boundaries", "hub": [1, 3, 6], "registry": [2, 3, 7]}]
    assert rows(registry_url) == before  # no fingerprint twin, no alias


def test_a_version_2_registry_is_migrated_and_its_synced_record_merged(hub: HubServer, registry_url: Path | str,
                                                                        tmp_path: Path):
    """Before v3 nothing marked a fingerprint record: the migration takes every record as content-identified,
    the next sync of its repo marks it, and a conversion then merges it."""
    repo = raw_repo(hub, registry_url, "legacy", seed=504)
    code, doc = sync(hub, tmp_path / "probe.db", repo)  # the id sync gives it
    assert code == 0
    fingerprint = doc["repos"][0]["drafter_id"]
    registry_as_released(registry_url, 2)
    sql(registry_url, "INSERT INTO drafters (drafter_id, target_name_or_path, capture_boundaries, flags, created_at,"
                      " updated_at) VALUES (?, ?, '[1,3,6]', '{}', '2025-01-01T00:00:00.000000+00:00',"
                      " '2025-01-01T00:00:00.000000+00:00')", params=(fingerprint, TARGET))
    sql(registry_url, "INSERT INTO locations VALUES (?, 'sglang', ?, '2025-01-01T00:00:00.000000+00:00')",
        params=(fingerprint, uri_of(hub, repo)))

    [old] = registry_records(registry_url)  # opening migrates
    # v5 marks what v2 to v4 took as content-identified as an id that also digested the config (issue 21)
    assert schema_version(registry_url) == SCHEMA_VERSION == 9 and old["id_kind"] == "config-and-weights"
    assert sql(registry_url, "SELECT count(*) FROM aliases") == [(0,)]
    code, resynced = sync(hub, registry_url, repo)
    assert code == 0 and resynced["repos"][0]["status"] == "updated"
    assert [r["id_kind"] for r in registry_records(registry_url)] == ["hub-fingerprint"]
    result = convert(hub, registry_url, repo, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    [record] = registry_records(registry_url)
    assert record["drafter_id"] == json.loads(result.stdout)["drafter_id"] and record["id_kind"] == "content"
    assert len(record["locations"]) == 2 and len(record["lineage"]) == 1


def test_publish_of_a_synced_commit_tells_of_a_twin_it_disagrees_with(hub: HubServer, registry_url: Path | str,
                                                                      tmp_path: Path):
    """publish from a Hub commit that sync recorded under its fingerprint, where that record names another target
    than the checkpoint's own (speculators names its verifier; other capture layers are refused before the upload,
    E-CAPTURE-RECORD): the commit is made and recorded, and the disagreement is a warning line and
    `registry_conflicts` (it was a note nobody printed)."""
    from eagle3_convert.drafter import TargetIdentity

    repo = f"{ORG}/publish-twin-{backend(registry_url)}"
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec(capture_boundaries=(1, 3, 6), seed=503))
    hub.create_repo(repo)
    hub.commit(repo, {p.name: p.read_bytes() for p in src.iterdir() if p.is_file()})
    assert sync(hub, registry_url, repo)[0] == 0
    [synced] = registry_records(registry_url)
    assert synced["id_kind"] == "hub-fingerprint" and synced["target"]["name_or_path"] == TARGET
    with open_registry(registry_url) as store:
        store.upsert_drafter(synced["drafter_id"], target=TargetIdentity(name_or_path="other-org/other-target"))
    dest_repo = f"{ORG}/published-{backend(registry_url)}"
    result = run_cli("publish", repo, dest_repo, "--endpoint", hub.url, "--token", TOKEN, "--registry",
                     registry_url, "--json")
    assert result.exit_code == 0, result.stderr
    assert "Fetching" not in result.stderr and "%|" not in result.stderr  # no download bar off a terminal
    doc = json.loads(result.stdout)
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert "[E-SYNC-CONFLICT]" in line and synced["drafter_id"][:12] in line
    [conflict] = doc["registry_conflicts"]
    assert conflict["drafter_id"] == synced["drafter_id"] and conflict["uri"] == uri_of(hub, repo)
    records = {r["drafter_id"]: r for r in registry_records(registry_url)}
    assert len(records) == 2 and records[synced["drafter_id"]]["target"]["name_or_path"] == "other-org/other-target"
    assert f"hf://{dest_repo}@{doc['commit']}" in {loc["uri"] for loc in records[doc["drafter_id"]]["locations"]}
