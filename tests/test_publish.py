"""`eagle3-convert publish` against the loopback Hub of tests/hub_server.py, read back with the real
huggingface_hub client: one commit, a model card the Hub can parse, the registry updated, and every
failure one line with a hint and nothing recorded."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import tempfile
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, snapshot_download
from huggingface_hub.utils import are_progress_bars_disabled

from conftest import DATA, EXAMPLE, run_cli, tensor_hashes
from eagle3_convert import sidecar
from eagle3_convert.convert import read_source
from eagle3_convert.fingerprint import drafter_id, tensor_digests
from eagle3_convert.registry import open_registry
from hub_server import HubServer, isolated_hub

# huggingface_hub 2.4.0 PUTs LFS content with `data=<file>`, which httpx deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_publish_test_token"
REPO = "test-user/tiny-drafter"
EXAMPLE_TARGET = "example-org/tiny-llama-target"  # the example's speculators_config.verifier


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    return tmp_path / "registry.db"


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The temporary directory publish converts into, to see that it is cleaned up."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def publish(hub_url: str, src: Path | str, registry: Path, *extra: str, repo: str = REPO):
    return run_cli("publish", src, repo, "--endpoint", hub_url, "--token", TOKEN, "--registry", registry, *extra)


def download(hub: HubServer, tmp_path: Path, revision: str | None = None, repo: str = REPO) -> Path:
    return Path(snapshot_download(repo, revision=revision, endpoint=hub.url, token=TOKEN,
                                  cache_dir=tmp_path / "downloads"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hub_locations(registry: Path) -> list[str]:
    if not registry.exists():
        return []
    with open_registry(registry) as store:
        return [loc.uri for record in store.list() for loc in record.locations if loc.uri.startswith("hf://")]


def example_id() -> str:
    drafter = read_source(str(EXAMPLE)).drafter
    return drafter_id(drafter, tensor_digests(drafter))


# ------------------------------------------------------------------------------------------- round trips


def test_publish_download_validate_round_trip(hub: HubServer, example_dir: Path, registry: Path,
                                              tmp_path: Path) -> None:
    bars_were_disabled = are_progress_bars_disabled()
    result = publish(hub.url, example_dir, registry)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # not a terminal: no progress bars
    assert are_progress_bars_disabled() == bars_were_disabled  # the client's global setting is handed back
    commit = hub.repo(REPO).branches["main"]
    assert f"commit: {hub.url}/{REPO}/commit/{commit}" in result.stdout

    # ONE commit holds config, weights, sidecar and card, sent with the token given.
    [commit_request] = hub.find_requests(f"^/api/models/{REPO}/commit/main$", "POST")
    assert sorted(line["value"]["path"] for line in commit_request.ndjson()[1:]) == [
        "README.md", "config.json", "eagle3-convert.json", "model.safetensors"]
    assert all(r.token == TOKEN for r in hub.requests if r.path.startswith("/api/") and r.method == "POST")

    snapshot = download(hub, tmp_path)
    assert snapshot.name == commit
    assert sorted(p.name for p in snapshot.iterdir()) == [
        ".gitattributes", "README.md", "config.json", "eagle3-convert.json", "model.safetensors"]
    assert tensor_hashes(snapshot) == tensor_hashes(EXAMPLE)
    assert (snapshot / "config.json").read_bytes() == (EXAMPLE / "config.json").read_bytes()

    card = ModelCard.load(snapshot / "README.md")
    assert card.data.base_model == EXAMPLE_TARGET
    assert card.data.library_name == "speculators"
    assert card.data.tags == ["eagle3", "speculative-decoding", "speculators", "vllm"]
    assert f'"model": "{REPO}"' in card.text and f"vllm serve {EXAMPLE_TARGET}" in card.text
    assert "| `[2, 4, 5]` | `[2, 4, 5]` | `[2, 4, 5]` | `[1, 3, 4]` |" in card.text  # speculators, vLLM, EAGLE, SGLang
    assert "0 errors, 0 warnings, 0 info" in card.text

    # The sidecar was made for these weights: trusted beside this config, naming the drafter by its bytes.
    facts, trusted = sidecar.read(snapshot)
    assert trusted and facts["drafter_id"] == example_id()
    assert facts["capture_boundaries"] == [2, 4, 5] and facts["target"]["name_or_path"] == EXAMPLE_TARGET

    validated = run_cli("validate", REPO, "--revision", commit, "--endpoint", hub.url, "--token", TOKEN)
    assert validated.exit_code == 0, validated.stdout + validated.stderr
    assert f"{REPO}@{commit}" in validated.stdout

    with open_registry(registry) as store:
        record = store.get(example_id())
    assert record is not None
    uris = {loc.uri: loc.layout for loc in record.locations}
    assert uris[f"hf://{REPO}@{commit}"] == "speculators"
    assert uris[str(example_dir.resolve())] == "speculators"
    assert [(e.source.uri, e.dest.uri) for e in record.lineage] == [(str(example_dir.resolve()),
                                                                      f"hf://{REPO}@{commit}")]


def test_a_converted_checkpoint_is_published_with_its_own_sidecar(hub: HubServer, example_dir: Path,
                                                                   registry_url, tmp_path: Path) -> None:
    registry = registry_url  # an SQLite file, then a PostgreSQL database
    local = tmp_path / "as-sglang"
    assert run_cli("--to", "sglang", example_dir, local, "--registry", registry).exit_code == 0
    result = publish(hub.url, local, registry, "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["layout"] == "sglang" and summary["converted_from"] is None
    assert summary["recorded_in"] == str(registry)

    snapshot = download(hub, tmp_path)
    published = (snapshot / "eagle3-convert.json").read_text()
    local_sidecar = json.loads((local / "eagle3-convert.json").read_text())
    assert str(tmp_path) not in published  # the uploader's paths stay private
    assert json.loads(published)["lineage"][-1]["source"]["uri"] == f"local:{example_dir.name}"
    assert {k: v for k, v in json.loads(published).items() if k not in ("lineage", "converted_from")} == \
        {k: v for k, v in local_sidecar.items() if k not in ("lineage", "converted_from")}
    assert tensor_hashes(snapshot) == tensor_hashes(local)
    assert ModelCard.load(snapshot / "README.md").data.tags == ["eagle3", "speculative-decoding", "sglang"]
    with open_registry(registry) as store:
        record = store.get(example_id())
    assert f"hf://{REPO}@{summary['commit']}" in {loc.uri for loc in record.locations}
    # the conversion (from the sidecar) and the upload
    assert (str(local.resolve()), f"hf://{REPO}@{summary['commit']}") in {
        (e.source.uri, e.dest.uri) for e in record.lineage}


def test_layout_converts_on_the_way(hub: HubServer, example_dir: Path, registry: Path, tmp_path: Path,
                                    private_tmp: Path) -> None:
    result = publish(hub.url, example_dir, registry, "--layout", "sglang")
    assert result.exit_code == 0, result.stderr
    assert "(sglang, converted from speculators)" in result.stdout
    assert list(private_tmp.iterdir()) == []  # the staging directory is gone
    commit = hub.repo(REPO).branches["main"]

    snapshot = download(hub, tmp_path)
    config = json.loads((snapshot / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    # Renamed, never re-encoded: the same tensor bytes under SGLang's names.
    assert sorted(tensor_hashes(snapshot).values()) == sorted(tensor_hashes(EXAMPLE).values())
    published_sidecar = (snapshot / "eagle3-convert.json").read_text()
    assert str(private_tmp) not in published_sidecar  # the staging directory is named nowhere
    facts = json.loads(published_sidecar)
    assert facts["drafter_id"] == example_id()
    assert facts["lineage"][-1]["dest"] == {"layout": "sglang", "uri": f"hf://{REPO}"}
    card = ModelCard.load(snapshot / "README.md")
    assert card.data.tags == ["eagle3", "speculative-decoding", "sglang"]
    assert (f"--speculative-algorithm EAGLE3 \\\n  --speculative-draft-model-path {REPO}" in card.text
            and "### vLLM" in card.text)  # the top-level copy of the ids we write: vLLM serves it as trained

    inspected = run_cli("inspect", REPO, "--endpoint", hub.url, "--json")
    assert inspected.exit_code == 0, inspected.stderr
    assert json.loads(inspected.stdout)["layout"] == "sglang"

    with open_registry(registry) as store:
        record = store.get(example_id())
    assert {loc.uri: loc.layout for loc in record.locations} == {
        str(example_dir.resolve()): "speculators", f"hf://{REPO}@{commit}": "sglang"}
    assert [(e.source.uri, e.dest.uri, e.dest.layout) for e in record.lineage] == [
        (str(example_dir.resolve()), f"hf://{REPO}@{commit}", "sglang")]


def test_create_pr_lands_on_a_pr_ref_and_leaves_main_alone(hub: HubServer, example_dir: Path, registry: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # no --endpoint: the environment names the Hub
    result = run_cli("publish", example_dir, REPO, "--create-pr", "--token", TOKEN, "--registry", registry,
                     "-m", "Add the drafter")
    assert result.exit_code == 0, result.stderr
    assert f"pull request: {hub.url}/{REPO}/discussions/1 (refs/pr/1)" in result.stdout
    assert hub.list_files(REPO) == [".gitattributes"]
    assert "README.md" in hub.list_files(REPO, "refs/pr/1")
    pr_commit = hub.repo(REPO).pull_requests[1]
    assert hub.repo(REPO).commits[pr_commit].title == "Add the drafter"
    assert hub_locations(registry) == [f"hf://{REPO}@{pr_commit}"]


def test_revision_commits_to_a_branch_and_the_card_pins_it(hub: HubServer, example_dir: Path, registry: Path,
                                                           tmp_path: Path) -> None:
    assert publish(hub.url, example_dir, registry).exit_code == 0
    on_main = hub.repo(REPO).branches["main"]
    result = publish(hub.url, example_dir, registry, "--revision", "v2", "--layout", "vllm")
    assert result.exit_code == 0, result.stderr
    assert hub.repo(REPO).branches["main"] == on_main
    card = ModelCard.load(download(hub, tmp_path, "v2") / "README.md")
    assert f'"model": "{REPO}", "num_speculative_tokens": 3, "revision": "v2"' in card.text

    # The download side takes the same repo ids and revisions.
    assert json.loads(run_cli("inspect", REPO, "--revision", "v2", "--endpoint", hub.url, "--json").stdout
                      )["layout"] == "vllm"
    assert json.loads(run_cli("inspect", REPO, "--endpoint", hub.url, "--json").stdout)["layout"] == "speculators"
    converted = run_cli("--to", "sglang", REPO, tmp_path / "from-v2", "--revision", "v2", "--endpoint", hub.url,
                        "--token", TOKEN, "--registry", registry)
    assert converted.exit_code == 0, converted.stderr
    assert sorted(tensor_hashes(tmp_path / "from-v2").values()) == sorted(tensor_hashes(EXAMPLE).values())


def test_pickled_weights_are_published_as_safetensors(hub: HubServer, sample, registry: Path,
                                                      tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="reading pytorch_model.bin needs torch")
    result = publish(hub.url, sample("eagle-original"), registry)
    assert result.exit_code == 0, result.stderr
    assert "published as model.safetensors" in result.stdout
    files = hub.list_files(REPO)
    assert "model.safetensors" in files and "pytorch_model.bin" not in files
    card = ModelCard.load(download(hub, tmp_path) / "README.md")
    assert "### SGLang" in card.text and "### vLLM" in card.text  # EAGLE's layout serves on both


# ------------------------------------------------------------------------------------------------ dry run


def test_dry_run_prints_the_plan_and_sends_nothing(hub: HubServer, example_dir: Path, registry: Path) -> None:
    result = publish(hub.url, example_dir, registry, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert hub.requests == []
    assert not hub.has_repo(REPO) and not registry.exists()
    for name in ("config.json", "model.safetensors"):
        path = example_dir / name
        assert f"{path.stat().st_size} B  sha256 {sha256(path)}" in result.stdout
    assert "eagle3-convert.json" in result.stdout
    card = result.stdout.split("--- README.md ---\n", 1)[1].split("--- end ---", 1)[0]
    assert ModelCard(card).data.base_model == EXAMPLE_TARGET

    as_json = json.loads(publish(hub.url, example_dir, registry, "--dry-run", "--json").stdout)
    assert hub.requests == []
    by_path = {f["path"]: f for f in as_json["files"]}
    weights = example_dir / "model.safetensors"
    assert by_path["model.safetensors"] == {"path": "model.safetensors", "sha256": sha256(weights),
                                            "size": weights.stat().st_size}
    assert by_path["README.md"]["sha256"] == hashlib.sha256(as_json["card"].encode()).hexdigest()
    assert as_json["dry_run"] is True and as_json["drafter_id"] == example_id()


def test_a_checkpoint_with_an_error_is_refused_before_any_request(hub: HubServer, sample, registry: Path) -> None:
    result = publish(hub.url, sample("h4-missing-lm_head"), registry)
    assert result.exit_code == 1
    assert "E-KEY-MISSING" in result.stdout and "lm_head.weight" in result.stdout  # the findings, as validate shows
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: refusing to publish") and "[E-KEY-MISSING]" in result.stderr
    assert hub.requests == []
    assert hub_locations(registry) == []


# -------------------------------------------------------------------------------------------------- auth


def test_token_from_the_hf_auth_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, example_dir: Path,
                                      registry: Path) -> None:
    home = tmp_path / "hf-home"
    with isolated_hub(monkeypatch, home, token="hf_stored_token") as server:
        (home / "token").write_text("hf_stored_token")  # where `hf auth login` keeps it
        result = run_cli("publish", example_dir, REPO, "--endpoint", server.url, "--registry", registry)
        assert result.exit_code == 0, result.stderr
        assert server.has_repo(REPO)
        assert {r.token for r in server.requests if r.method == "POST"} == {"hf_stored_token"}


def test_no_token_anywhere_is_refused_before_any_request(hub: HubServer, example_dir: Path, registry: Path) -> None:
    result = run_cli("publish", example_dir, REPO, "--endpoint", hub.url, "--registry", registry)
    assert result.exit_code == 1
    assert "[E-HUB-AUTH]" in result.stderr and "hf auth login" in result.stderr
    assert hub.requests == []


# ------------------------------------------------------------------------------------------------ failures


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAILURES = {
    # status: (how the Hub is made to answer it, the code it becomes, a word of its hint)
    401: (None, "E-HUB-AUTH", "write token"),
    403: ((r"^/api/repos/create$", "POST", None), "E-HUB-FORBIDDEN", "write access"),
    404: ((r"/commit/", "POST", "RepoNotFound"), "E-HUB-NOTFOUND", "repo id"),
    409: ((r"/commit/", "POST", None), "E-HUB-CONFLICT", "--create-pr"),
    500: ((r"/commit/", "POST", None), "E-HUB-HTTP", "retry"),
    400: ((r"^/api/validate-yaml$", "POST", None), "E-HUB-CARD", "--dry-run"),  # the card's metadata refused
}


@pytest.mark.parametrize("status", [*FAILURES, "refused"])
def test_hub_failures_are_one_line_and_record_nothing(status: int | str, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, example_dir: Path, registry: Path) -> None:
    # 401: the server wants another token; the rest are injected on every matching request (no retry loops).
    server_token = "hf_the_right_one" if status == 401 else None
    with isolated_hub(monkeypatch, tmp_path / "hf-home", token=server_token) as server:
        if status == "refused":
            endpoint, code, hint_word = f"http://127.0.0.1:{_free_port()}", "E-HUB-OFFLINE", "--endpoint"
        else:
            endpoint, (rule, code, hint_word) = server.url, FAILURES[status]
            if rule is not None:
                route, method, error_code = rule
                server.fail_next(route, status, method=method, times=None, error_code=error_code)
        result = run_cli("publish", example_dir, REPO, "--endpoint", endpoint, "--token", TOKEN,
                         "--registry", registry)
        if status != "refused":
            assert any(r.status == status for r in server.requests)  # the failure really came from the Hub
            assert not server.has_repo(REPO) or "README.md" not in server.list_files(REPO)
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: publishing to {REPO}: ") and f"[{code}] — hint: " in line
    assert hint_word in line.split(" — hint: ", 1)[1]
    assert TOKEN not in result.stdout + result.stderr
    assert hub_locations(registry) == []


def test_unusable_registry_refuses_before_upload(hub: HubServer, example_dir: Path, tmp_path: Path) -> None:
    not_a_db = tmp_path / "registry.db"
    not_a_db.write_text("this is not SQLite")
    result = publish(hub.url, example_dir, not_a_db)
    assert result.exit_code == 1 and "--no-registry" in result.stderr
    assert not hub.has_repo(REPO)
    assert publish(hub.url, example_dir, not_a_db, "--no-registry").exit_code == 0
    assert not_a_db.read_text() == "this is not SQLite"


def test_bad_repo_id_is_a_usage_error(hub: HubServer, example_dir: Path, registry: Path) -> None:
    result = publish(hub.url, example_dir, registry, repo="not a repo")
    assert result.exit_code == 2 and "ORG/NAME" in result.stderr
    assert hub.requests == []


def test_sharded_source_publishes_every_shard_and_the_index(hub: HubServer, tmp_path: Path, registry: Path) -> None:
    from hostile import copy_sharded, shard_names

    src = tmp_path / "sharded"
    copy_sharded(src)
    result = publish(hub.url, src, registry, "--no-record")
    assert result.exit_code == 0, result.stderr
    files = hub.list_files(REPO)
    assert set(shard_names(src)) <= set(files) and "model.safetensors.index.json" in files
    assert tensor_hashes(download(hub, tmp_path)) == tensor_hashes(EXAMPLE)


def test_stray_files_beside_the_checkpoint_stay_home(hub: HubServer, example_dir: Path, registry: Path) -> None:
    (example_dir / "optimizer.pt").write_bytes(b"\0" * 64)
    (example_dir / "train.log").write_text("step 1\n")
    shutil.copy(DATA / "speculators-trained" / "checkpoint" / "config.py", example_dir)
    assert publish(hub.url, example_dir, registry, "--no-record").exit_code == 0
    assert hub.list_files(REPO) == [".gitattributes", "README.md", "config.json", "eagle3-convert.json",
                                    "model.safetensors"]


def test_verifier_names_the_target_of_a_checkpoint_that_does_not(hub: HubServer, sample, registry: Path) -> None:
    src = sample("specforge-sglang")  # SpecForge's export names no target
    result = publish(hub.url, src, registry, "--dry-run", "--json", "--layout", "speculators")
    assert result.exit_code == 1 and "--verifier" in result.stderr
    result = publish(hub.url, src, registry, "--dry-run", "--json", "--layout", "speculators",
                     "--verifier", "org/llama-tiny", "--target", DATA / "targets" / "llama-tiny")
    assert result.exit_code == 0, result.stderr
    card = ModelCard(json.loads(result.stdout)["card"])
    assert card.data.base_model == "org/llama-tiny"
    assert "| layers | `8` |" in card.text and "`vllm serve test-user/tiny-drafter` alone" in card.text
    assert hub.requests == []


def test_private_repo_downloads_take_the_same_token_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           example_dir: Path, registry: Path) -> None:
    with isolated_hub(monkeypatch, tmp_path / "hf-home", token=TOKEN) as server:
        assert publish(server.url, example_dir, registry, "--private").exit_code == 0
        assert server.repo(REPO).private
        for command in (["inspect", REPO], ["validate", REPO, "--registry", registry],
                        ["--to", "sglang", REPO, tmp_path / "out", "--registry", registry]):
            anonymous = run_cli(*command, "--endpoint", server.url)
            assert anonymous.exit_code == 1 and "[E-HUB-AUTH]" in anonymous.stderr, (command, anonymous.stderr)
            allowed = run_cli(*command, "--endpoint", server.url, "--token", TOKEN)
            assert allowed.exit_code == 0, (command, allowed.stderr)


def test_a_target_repo_is_fetched_from_the_given_endpoint(hub: HubServer, example_dir: Path, tmp_path: Path) -> None:
    target = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 8,
              "hidden_size": 64, "vocab_size": 512, "max_position_embeddings": 2048}
    hub.create_repo("org/llama-target")
    hub.commit("org/llama-target", {"config.json": json.dumps(target).encode()})
    checked = run_cli("validate", example_dir, "--target", "org/llama-target", "--endpoint", hub.url, "--json")
    assert checked.exit_code == 0, checked.stderr
    converted = run_cli("--to", "sglang", "--target", "org/llama-target", "--endpoint", hub.url, "--no-record",
                        example_dir, tmp_path / "sg")
    assert converted.exit_code == 0, converted.stderr
    assert json.loads((tmp_path / "sg" / "eagle3-convert.json").read_text())["target"]["num_hidden_layers"] == 8
    fetched = hub.find_requests(r"org/llama-target/resolve/.*/config\.json", method="GET")
    assert len(fetched) >= 1  # read from our endpoint, not HF_ENDPOINT's default


def test_registry_add_reads_a_repo_from_the_given_endpoint(hub: HubServer, registry: Path) -> None:
    hub.create_repo("org/drafter")
    commit = hub.commit("org/drafter", {name: (EXAMPLE / name).read_bytes()
                                        for name in ("config.json", "model.safetensors")})
    result = run_cli("registry", "add", "org/drafter", "--endpoint", hub.url, "--registry", registry, "--json")
    assert result.exit_code == 0, result.stderr
    added = json.loads(result.stdout)
    assert added["drafter_id"] == example_id()
    assert added["location"]["uri"] == f"hf://org/drafter@{commit}"
