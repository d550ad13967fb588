"""`registry sync` and `search` (issue 15, parts 3-5) against the loopback Hub of tests/hub_server.py, with the
real huggingface_hub client, real files and a real registry.

The organisation `eagle-org` holds 20 drafter repos: 6 published by our own `publish`, 10 raw SpecForge (sglang)
and ModelOpt exports with nested block-output ids on non-default boundaries (written by tests/builders.py, not by
our writers), and 4 broken ones. Their target `org/target-model` (8 layers) has its config.json on the same Hub.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter, config_for, write_target
from conftest import registry_records, run_cli
from test_registry_cli import cli_json
from eagle3_convert.registry.store import open_registry
from hub_server import HubServer, isolate_hf_client

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_index_secret_token"
ORG = "eagle-org"
TARGET = "org/target-model"  # DrafterSpec's verifier; depth 8, so the engines' defaults are [2, 4, 5]
CARD = f"---\nbase_model: {TARGET}\nlibrary_name: sglang\ntags:\n- eagle3\n---\n\n# a SpecForge export\n"

# repo -> (layout, boundaries the training used)
PUBLISHED = {f"{ORG}/pub-{i}": (layout, b) for i, (layout, b) in enumerate([
    ("speculators", (1, 3, 6)), ("speculators", (2, 4, 5)), ("sglang", (1, 5, 7)), ("vllm", (3, 4, 7)),
    ("modelopt", (2, 3, 6)), ("sglang", (1, 2, 3))])}
RAW = {f"{ORG}/specforge-{i}": ("sglang", b) for i, b in enumerate([(1, 3, 6), (2, 4, 6), (1, 5, 7), (3, 4, 7),
                                                                        (1, 2, 3)])}
RAW |= {f"{ORG}/modelopt-{i}": ("modelopt", b) for i, b in enumerate([(1, 3, 6), (2, 3, 6), (4, 5, 7), (1, 6, 7),
                                                                         (2, 5, 6)])}
BROKEN = {f"{ORG}/broken-no-config": "E-SRC-MISSING", f"{ORG}/broken-corrupt-json": "E-CONFIG-JSON",
          f"{ORG}/broken-ambiguous-ids": "E-CAPTURE-AMBIGUOUS", f"{ORG}/broken-unknown-layout": "E-LAYOUT-UNKNOWN"}


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def org(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    """The loopback Hub with the organisation above (built once; tests that change it use repos of their own)."""
    tmp = tmp_path_factory.mktemp("hub-index")
    with pytest.MonkeyPatch.context() as mp:
        isolate_hf_client(mp, tmp / "hf-home")
        with HubServer(page_size=7) as hub:  # 7 per page: list_models follows the Link header across pages
            target = write_target(tmp / "target", DrafterSpec())
            hub.create_repo(TARGET)
            hub.commit(TARGET, _files(target))
            for seed, (repo, (layout, bounds)) in enumerate(PUBLISHED.items(), start=100):
                src = build_drafter(tmp / repo, layout, DrafterSpec(capture_boundaries=bounds, seed=seed))
                done = run_cli("publish", src, repo, "--verifier", TARGET, "--target", target, "--endpoint", hub.url,
                               "--token", TOKEN, "--no-record")
                assert done.exit_code == 0, done.stderr
            for seed, (repo, (layout, bounds)) in enumerate(RAW.items(), start=200):
                src = build_drafter(tmp / repo, layout, DrafterSpec(capture_boundaries=bounds, seed=seed))
                hub.create_repo(repo)
                hub.commit(repo, {**_files(src), "README.md": CARD.encode()})
            good = build_drafter(tmp / "broken", "sglang", DrafterSpec(seed=300))
            modelopt = build_drafter(tmp / "ambiguous", "modelopt", DrafterSpec(seed=301))
            ambiguous = config_for("modelopt", DrafterSpec())
            ambiguous["eagle_aux_hidden_state_layer_ids"] = ambiguous["eagle_config"].pop(
                "eagle_aux_hidden_state_layer_ids")  # top level only: SpecForge ids or vLLM boundaries?
            unknown = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32}
            for repo, config in {f"{ORG}/broken-no-config": None, f"{ORG}/broken-corrupt-json": b'{"archi',
                                 f"{ORG}/broken-ambiguous-ids": json.dumps(ambiguous).encode(),
                                 f"{ORG}/broken-unknown-layout": json.dumps(unknown).encode()}.items():
                hub.create_repo(repo)
                hub.commit(repo, {"model.safetensors": (modelopt if "ambiguous" in repo else good).joinpath(
                                      "model.safetensors").read_bytes(), "README.md": CARD.encode(),
                                  **({"config.json": config} if config else {})})
            yield hub


def sync(hub: HubServer, registry: Path | str, *sources: str) -> tuple[int, dict]:
    result = run_cli("registry", "sync", *(sources or (ORG,)), "--endpoint", hub.url, "--token", TOKEN,
                     "--registry", registry, "--json")
    assert TOKEN not in result.stdout + result.stderr
    return result.exit_code, json.loads(result.stdout)


def by_repo(doc: dict) -> dict[str, dict]:
    return {entry["repo_id"]: entry for entry in doc["repos"]}


def safetensors_requests(hub: HubServer, since: int) -> list:
    return [r for r in hub.requests[since:] if r.path.endswith(".safetensors")]


def test_sync_records_every_drafter_of_the_org_flags_the_broken_and_reads_no_weights(org: HubServer, registry_url: Path | str, tmp_path: Path):
    registry = registry_url  # SQLite and PostgreSQL (tests/conftest.py)
    start = len(org.requests)
    code, doc = sync(org, registry)
    assert code == 0 and doc["ok"], doc
    assert doc["counts"] == {"added": 16, "unchanged": 0, "new-location": 0, "updated": 0, "conflict": 0,
                             "broken": 4}
    entries = by_repo(doc)
    assert set(entries) == set(PUBLISHED) | set(RAW) | set(BROKEN)  # the target repo is another org's
    for repo, (layout, bounds) in {**PUBLISHED, **RAW}.items():
        entry = entries[repo]
        assert entry["status"] == "added" and entry["layout"] == layout, entry
        assert entry["capture_boundaries"] == list(bounds), entry  # nested ids b-1 read back as boundaries b
        assert entry["target"] == TARGET, entry
        assert entry["uri"] == f"hf://{repo}@{org.repo(repo).branches['main']}"
        assert entry["identity"] == ("sidecar" if repo in PUBLISHED else "hub-fingerprint")
    for repo, code_ in BROKEN.items():
        assert entries[repo]["status"] == "broken" and entries[repo]["code"] == code_, entries[repo]

    records = {r["locations"][0]["uri"].split("@")[0][5:]: r for r in registry_records(registry)}
    assert len(records) == 16
    for repo, (layout, bounds) in {**PUBLISHED, **RAW}.items():
        assert records[repo]["capture_boundaries"] == list(bounds)
        assert records[repo]["target"]["name_or_path"] == TARGET
        assert records[repo]["target"]["num_hidden_layers"] == 8  # the target's config.json, from the Hub
        assert records[repo]["locations"][0]["layout"] == layout
    assert records[f"{ORG}/specforge-0"]["ids_as_written"] == {"sglang": [0, 2, 5]}

    # No weights: published repos (trusted sidecar) get no safetensors request at all; the others get their
    # header (8 bytes, then the header) and the d2t/t2d tensors by Range, never a whole file.
    seen = safetensors_requests(org, start)
    assert {r.path.split("/resolve/")[0].lstrip("/") for r in seen} == set(RAW) | set(BROKEN) - {
        f"{ORG}/broken-no-config"}
    for r in seen:
        assert r.method == "GET" and r.status == 206 and "range" in r.headers, (r.path, r.headers)
        repo = r.path.split("/resolve/")[0].lstrip("/")
        stored = org.read_file(repo, "model.safetensors")
        (n,) = struct.unpack("<Q", stored[:8])
        header = json.loads(stored[8:8 + n])
        allowed = {(0, 7), (8, 8 + n - 1)} | {(8 + n + header[t]["data_offsets"][0],
                                              8 + n + header[t]["data_offsets"][1] - 1)
                                             for t in ("d2t", "t2d") if t in header}
        first, last = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", r.headers["range"]).groups())
        assert (first, last) in allowed, (repo, first, last)
    per_path: dict[str, int] = {}
    for r in seen:
        per_path[r.path] = per_path.get(r.path, 0) + 1
    assert max(per_path.values()) <= 4  # 8-byte prefix, header, d2t, t2d
    served = sum(len(r.response_body or b"") for r in seen)
    stored_total = sum(len(org.read_file(repo, "model.safetensors")) for repo in RAW)
    print(f"\nsync: {len(org.requests) - start} requests, {len(seen)} to safetensors files "
          f"({max(per_path.values())} at most per file), {served} bytes of {stored_total} served")

    # Run again: nothing changes, not even a timestamp.
    before = registry_records(registry)
    code, again = sync(org, registry)
    assert code == 0 and again["counts"] == {"added": 0, "unchanged": 16, "new-location": 0, "updated": 0,
                                             "conflict": 0, "broken": 4}
    assert registry_records(registry) == before

    # A new commit to one repo: exactly one location more, on the same record.
    repo = f"{ORG}/specforge-3"
    old = org.repo(repo).branches["main"]
    new = org.commit(repo, {"README.md": (CARD + "\nNow with a usage section.\n").encode()})
    code, third = sync(org, registry)
    assert code == 0 and third["counts"]["new-location"] == 1 and third["counts"]["unchanged"] == 15
    after = registry_records(registry)
    assert sum(len(r["locations"]) for r in after) == sum(len(r["locations"]) for r in before) + 1
    [record] = [r for r in after if any(loc["uri"] == f"hf://{repo}@{new}" for loc in r["locations"])]
    assert {loc["uri"] for loc in record["locations"]} == {f"hf://{repo}@{old}", f"hf://{repo}@{new}"}
    assert [r for r in after if r is not record] == [r for r in before if r["drafter_id"] != record["drafter_id"]]


def test_a_conflict_is_reported_and_the_record_kept(org: HubServer, registry_url: Path | str, tmp_path: Path):
    registry = registry_url  # SQLite and PostgreSQL (tests/conftest.py)
    repo = f"{ORG}/pub-0"
    assert sync(org, registry, repo)[0] == 0
    [record] = registry_records(registry)
    with open_registry(registry) as store:  # someone stated another training truth (registry add --capture-layers)
        store.upsert_drafter(record["drafter_id"], capture_boundaries=[2, 3, 7])
    before = registry_records(registry)
    code, doc = sync(org, registry, repo, f"{ORG}/specforge-0")
    assert code == 1 and doc["ok"] is False and doc["error"]["code"] == "E-SYNC-CONFLICT"
    entry = by_repo(doc)[repo]
    assert entry["status"] == "conflict"
    assert entry["conflicts"] == [{"field": "capture_boundaries", "hub": [1, 3, 6], "registry": [2, 3, 7]}]
    assert by_repo(doc)[f"{ORG}/specforge-0"]["status"] == "added"  # the others are still recorded
    assert [r for r in registry_records(registry) if r["drafter_id"] == record["drafter_id"]] == before
    human = run_cli("registry", "sync", repo, "--endpoint", org.url, "--registry", registry)
    assert human.exit_code == 1
    assert f"conflict     hf://{repo}@" in human.stdout and "capture_boundaries [1, 3, 6]" in human.stdout
    [line] = human.stderr.splitlines()
    assert line.startswith("error: 1 repo(s) disagree") and "[E-SYNC-CONFLICT]" in line


def test_sync_into_the_registry_publish_recorded_changes_nothing(org: HubServer, registry_url: Path | str, tmp_path: Path):
    registry = registry_url  # SQLite and PostgreSQL (tests/conftest.py)
    src = build_drafter(tmp_path / "d", "sglang", DrafterSpec(capture_boundaries=(1, 4, 6), seed=400))
    done = run_cli("publish", src, f"{ORG}-own/mine", "--verifier", TARGET, "--endpoint", org.url, "--token", TOKEN,
                   "--registry", registry)
    assert done.exit_code == 0, done.stderr
    before = registry_records(registry)
    code, doc = sync(org, registry, f"{ORG}-own")
    assert code == 0 and doc["counts"]["unchanged"] == 1 and registry_records(registry) == before


def test_search_gives_each_engines_verdict_as_the_engine_tier_found_it(org: HubServer, registry_url: Path | str, tmp_path: Path):
    registry = registry_url  # SQLite and PostgreSQL (tests/conftest.py)
    assert sync(org, registry)[0] == 0
    result = run_cli("search", "--target", TARGET, "--hub", "--endpoint", org.url, "--token", TOKEN,
                     "--registry", registry, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    found = {copy["uri"].split("@")[0][5:]: copy for item in doc["drafters"] for copy in item["copies"]}
    assert set(PUBLISHED) | set(RAW) <= set(found)
    ours = set(PUBLISHED) | set(RAW)
    synced = [item for item in doc["drafters"] if any(c["uri"].split("@")[0][5:] in ours for c in item["copies"])]
    assert len(synced) == 16 and all(item["in_registry"] and item["on_hub"] for item in synced)
    unreadable = {c["uri"].split("@")[0][5:]: c["why"] for item in doc["drafters"] if not item["drafter_id"]
                  for c in item["copies"]}
    assert set(unreadable) == set(BROKEN) - {f"{ORG}/broken-no-config"} | ({f"{ORG}/broken-no-config"} & set(
        unreadable)) and all(f"[{BROKEN[r]}]" in why for r, why in unreadable.items()), unreadable

    # tests/test_engines.py, cell (sglang layout, "llama-1L (1,3,6)", sglang reading): real SGLang 0.5.23 served
    # the nested block-output ids [0, 2, 5] as trained, capturing [1, 3, 6]. A raw SpecForge export holds the same
    # nested ids (and no top-level copy): SGLang serves it as trained ...
    specforge = found[f"{ORG}/specforge-0"]["serves"]
    assert specforge["sglang"] == {"verdict": "as-trained", "captures": [1, 3, 6],
                                   "why": "captures [1, 3, 6], trained maths", "release": "0.5.23"}
    # ... while vLLM's V2 runner, which reads no nested ids (test_issue11_nested_id_layouts_served_by_vllm...:
    # "V2 ignored the nested ids (defaults [2,4,5])"), captures its defaults [2, 4, 5] on this 8-layer target,
    # and V1 reads the nested block outputs as boundaries ("V1 read ... as boundaries ([0,2,5])").
    assert specforge["vllm-v2"]["verdict"] == "wrong" and specforge["vllm-v2"]["captures"] == [2, 4, 5]
    assert specforge["vllm-v1"]["verdict"] == "wrong" and specforge["vllm-v1"]["captures"] == [0, 2, 5]
    # publish without --layout uploads the files as they are: the same verdicts for a published sglang export.
    assert {e: v["verdict"] for e, v in found[f"{ORG}/pub-2"]["serves"].items() if e in ("sglang", "vllm-v2")} == {
        "sglang": "as-trained", "vllm-v2": "wrong"}
    # A speculators drafter: both vLLM runners serve it as trained; SGLang fails loudly on a speculators config
    # (the engine tier's expectation: ("speculators", every family, "sglang") is LOUD).
    ours = found[f"{ORG}/pub-0"]["serves"]
    assert {e: ours[e]["verdict"] for e in ("sglang", "vllm-v1", "vllm-v2")} == {
        "sglang": "refuses", "vllm-v1": "as-trained", "vllm-v2": "as-trained"}
    assert ours["vllm-v2"]["captures"] == [1, 3, 6]
    # A drafter trained on the defaults is served by vLLM V2 from its defaults: default-layers, not wrong.
    assert found[f"{ORG}/pub-1"]["serves"]["vllm-v2"]["verdict"] in ("as-trained", "default-layers")

    only = run_cli("search", "--target", TARGET, "--engine", "sglang", "--registry", registry, "--json")
    assert only.exit_code == 0, only.stderr
    copies = [copy for item in json.loads(only.stdout)["drafters"] for copy in item["copies"]]
    assert len(copies) == 16 and all(copy["serves"] is None and "--hub" in copy["why"] for copy in copies)

    human = run_cli("search", "--target", TARGET, "--engine", "vllm-v2", "--hub", "--endpoint", org.url,
                    "--registry", registry, "--verbose")
    assert human.exit_code == 0, human.stderr
    print("\n" + "\n".join(human.stdout.splitlines()[:9]))
    labels = {line[4:].split("  ")[0] for line in human.stdout.splitlines() if line.startswith("    ")
              and "not judged" not in line}
    assert labels == {"vLLM (V2 runner) 0.33.0"}, labels  # the engine, and the release judged


def test_hub_failures_are_one_line_with_a_hint(org: HubServer, tmp_path: Path):
    registry = tmp_path / "registry.db"
    with socket_closed() as dead:
        result = run_cli("registry", "sync", ORG, "--endpoint", dead, "--token", TOKEN, "--registry", registry)
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "[E-HUB-OFFLINE]" in line and "hint:" in line and TOKEN not in line
    missing = run_cli("registry", "sync", f"{ORG}/nope", "--endpoint", org.url, "--token", TOKEN,
                      "--registry", registry, "--json")
    assert missing.exit_code == 1 and json.loads(missing.stdout)["error"]["code"] in ("E-HUB-AUTH", "E-HUB-NOTFOUND")
    org.fail_next(rf"^/api/models/{ORG}/specforge-1", 500, times=None)
    try:
        failed = run_cli("registry", "sync", f"{ORG}/specforge-1", "--endpoint", org.url, "--registry", registry)
        listed = run_cli("registry", "sync", ORG, "--endpoint", org.url, "--registry", registry, "--json")
    finally:
        org.clear_failures()
    assert failed.exit_code == 1 and "Traceback" not in failed.stderr
    [line] = failed.stderr.splitlines()
    assert "HTTP 500" in line and "hint:" in line and "[E-HUB-HTTP]" in line
    broken = by_repo(json.loads(listed.stdout))[f"{ORG}/specforge-1"]  # in an org, one repo's failure is flagged
    assert listed.exit_code == 0 and broken["status"] == "broken" and broken["code"] == "E-HUB-HTTP"
    with HubServer(token="hf_the_right_one") as guarded:
        denied = run_cli("search", "--target", TARGET, "--hub", "--endpoint", guarded.url, "--token", TOKEN,
                         "--registry", registry)
    assert denied.exit_code == 1 and "Traceback" not in denied.stderr and TOKEN not in denied.stderr
    [line] = denied.stderr.splitlines()
    assert "[E-HUB-AUTH]" in line and "hint:" in line
    assert len(registry_records(registry)) == 15  # the org sync recorded the 16 drafters but the one the Hub failed on


class socket_closed:
    """An endpoint on a port nothing listens on."""

    def __enter__(self) -> str:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_verify_reads_the_headers_of_published_repos_and_catches_a_sidecar_that_lies(org: HubServer, tmp_path: Path):
    """Without --verify a published repo is taken from its sidecar (no safetensors request); --verify reads its
    headers by Range with the layout readers and flags a sidecar whose capture boundaries config.json contradicts."""
    source = f"{ORG}/pub-0"
    tampered = f"{ORG}-verify/tampered"
    files = {name: org.read_file(source, name) for name in org.list_files(source) if name != ".gitattributes"}
    facts = json.loads(files["eagle3-convert.json"])
    facts["capture_boundaries"] = [2, 3, 4]  # config.json (and so the sidecar's config_sha256) unchanged
    org.create_repo(tampered)
    org.commit(tampered, {**files, "eagle3-convert.json": json.dumps(facts).encode()})

    start = len(org.requests)
    code, trusting = sync(org, tmp_path / "trusting.db", source, tampered)
    # the same drafter id (the sidecar's): the second copy's claim contradicts the first one's record
    assert code == 1 and [(e["status"], e["capture_boundaries"]) for e in trusting["repos"]] == [
        ("added", [1, 3, 6]), ("conflict", [2, 3, 4])]
    assert safetensors_requests(org, start) == []

    start = len(org.requests)
    result = run_cli("registry", "sync", source, tampered, "--verify", "--endpoint", org.url,
                     "--registry", tmp_path / "verified.db", "--json")
    assert result.exit_code == 0, result.stderr
    entries = by_repo(json.loads(result.stdout))
    assert entries[source]["status"] == "added" and entries[source]["identity"] == "sidecar"
    assert entries[tampered]["status"] == "broken" and entries[tampered]["code"] == "E-HUB-SIDECAR"
    assert "[2, 3, 4]" in entries[tampered]["message"] and "[1, 3, 6]" in entries[tampered]["message"]
    seen = safetensors_requests(org, start)
    assert seen and all(r.status == 206 and "range" in r.headers for r in seen)


def test_search_matches_a_target_ignoring_case_and_names_similar_targets(registry_url: Path | str, tmp_path: Path):
    """Hub repo ids are case-insensitive, so a search spelled Org/Target-Model finds drafters recorded for
    org/target-model; a search that finds nothing names the recorded targets it probably meant rather than
    looking like 'no drafter exists'. On both registry backends."""
    src = build_drafter(tmp_path / "src", "speculators", DrafterSpec())
    assert run_cli("registry", "add", src, "--registry", registry_url).exit_code == 0  # its verifier: TARGET
    found = cli_json("search", "--target", TARGET.upper(), "--registry", registry_url)
    assert len(found["drafters"]) == 1 and found["similar_targets"] == []
    for typo in ("other-org/target-model", "org/target-modle"):
        missed = cli_json("search", "--target", typo, "--registry", registry_url)
        assert missed["drafters"] == [] and missed["similar_targets"] == [TARGET], missed
        human = run_cli("search", "--target", typo, "--registry", registry_url).stdout
        assert f"recorded targets with a similar name: {TARGET}" in human
    assert cli_json("search", "--target", "meta-llama/Llama-3.1-8B", "--registry", registry_url)["similar_targets"] == []
    assert len(cli_json("registry", "list", "--target", TARGET.upper(), "--registry", registry_url)["records"]) == 1
