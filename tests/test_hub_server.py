"""The real `huggingface_hub` client against the in-process test Hub (tests/hub_server.py)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from huggingface_hub import (
    CommitOperationAdd,
    HfApi,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    snapshot_download,
)
from huggingface_hub.errors import (
    BadRequestError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import get_session
from huggingface_hub.utils._runtime import is_xet_available

from hub_server import HubServer, git_blob_sha1, isolated_hub

# huggingface_hub 2.4.0 PUTs LFS content with `data=<file>`, which httpx2 deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

TOKEN = "hf_writer_token"
REPO = "test-user/drafter"
CONFIG = json.dumps({"architectures": ["Eagle3Speculator"], "hidden_size": 64}, indent=2).encode()
WEIGHTS = b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + bytes(range(256)) * 16  # binary: must travel via LFS
NOTES = b"first draft\n"


@pytest.fixture
def api(hub: HubServer) -> HfApi:
    return HfApi(endpoint=hub.url, token=TOKEN)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    src = tmp_path / "upload"
    (src / "docs").mkdir(parents=True)
    (src / "config.json").write_bytes(CONFIG)
    (src / "model.safetensors").write_bytes(WEIGHTS)
    (src / "docs" / "notes.txt").write_bytes(NOTES)
    return src


@pytest.fixture
def published(api: HfApi, folder: Path) -> str:
    api.create_repo(REPO)
    return api.upload_folder(folder_path=folder, repo_id=REPO, commit_message="Add drafter").oid


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_client_runs_without_xet(hub: HubServer, api: HfApi, published: str) -> None:
    assert not is_xet_available()
    assert get_hf_file_metadata(hf_hub_url(REPO, "model.safetensors", endpoint=hub.url)).xet_file_data is None
    response = get_session().get(f"{hub.url}/api/models/{REPO}/xet-write-token/main")
    assert response.status_code == 501
    assert "HF_HUB_DISABLE_XET" in response.json()["error"]


def test_whoami_and_token_in_request_log(hub: HubServer, api: HfApi) -> None:
    assert api.whoami()["name"] == "test-user"
    [request] = hub.find_requests("/api/whoami-v2", "GET")
    assert request.authorization == f"Bearer {TOKEN}"
    assert request.token == TOKEN
    assert request.status == 200


def test_create_repo_exist_ok_and_private(hub: HubServer, api: HfApi) -> None:
    url = api.create_repo("drafter", private=True)
    assert (url.repo_id, url.repo_type, url.endpoint) == (REPO, "model", hub.url)
    assert str(url) == f"{hub.url}/{REPO}"
    assert hub.repo(REPO).private

    with pytest.raises(HfHubHTTPError) as conflict:
        api.create_repo(REPO)
    assert conflict.value.response.status_code == 409
    assert api.create_repo(REPO, exist_ok=True).repo_id == REPO

    info = api.model_info(REPO)
    assert info.private is True
    assert [s.rfilename for s in info.siblings] == [".gitattributes"]  # the Hub's initial commit
    assert hub.find_requests("/api/repos/create")[0].json() == {
        "name": "drafter", "organization": None, "visibility": "private"}

    api.update_repo_settings(REPO, private=False)
    assert api.model_info(REPO).private is False
    api.delete_repo(REPO)
    assert not hub.has_repo(REPO)
    with pytest.raises(RepositoryNotFoundError):
        api.delete_repo(REPO)
    api.delete_repo(REPO, missing_ok=True)


def test_upload_folder_sends_regular_and_lfs_files_in_one_commit(hub: HubServer, api: HfApi, folder: Path) -> None:
    api.create_repo(REPO)
    info = api.upload_folder(folder_path=folder, repo_id=REPO, commit_message="Add drafter")

    [preupload] = hub.find_requests("/preupload/main", "POST")
    assert {f["path"] for f in preupload.json()["files"]} == {"config.json", "model.safetensors", "docs/notes.txt"}
    modes = {f["path"]: f["uploadMode"] for f in preupload.response_json()["files"]}
    assert modes == {"config.json": "regular", "model.safetensors": "lfs", "docs/notes.txt": "regular"}

    [batch] = hub.find_requests(rf"^/{REPO}\.git/info/lfs/objects/batch$", "POST")
    assert batch.headers["accept"] == "application/vnd.git-lfs+json"
    assert batch.json()["objects"] == [{"oid": sha256(WEIGHTS), "size": len(WEIGHTS)}]
    [put] = hub.find_requests(f"/_lfs/models/{REPO}/{sha256(WEIGHTS)}$", "PUT")
    assert put.body == WEIGHTS
    assert put.authorization is None  # the client treats the upload href as presigned
    [verify] = hub.find_requests("/verify$", "POST")
    assert verify.json() == {"oid": sha256(WEIGHTS), "size": len(WEIGHTS)}

    [commit] = hub.find_requests(f"/api/models/{REPO}/commit/main", "POST")
    assert commit.headers["content-type"] == "application/x-ndjson"
    assert commit.token == TOKEN
    lines = commit.ndjson()
    assert lines[0] == {"key": "header", "value": {"summary": "Add drafter", "description": ""}}
    by_path = {line["value"]["path"]: line for line in lines[1:]}
    assert by_path["model.safetensors"] == {"key": "lfsFile", "value": {
        "path": "model.safetensors", "algo": "sha256", "oid": sha256(WEIGHTS), "size": len(WEIGHTS)}}
    assert by_path["config.json"]["key"] == "file"
    assert base64.b64decode(by_path["config.json"]["value"]["content"]) == CONFIG

    assert info.oid == hub.repo(REPO).branches["main"]
    assert info.commit_url == f"{hub.url}/{REPO}/commit/{info.oid}"
    assert hub.read_file(REPO, "model.safetensors") == WEIGHTS
    assert hub.read_file(REPO, "docs/notes.txt") == NOTES


def test_model_info_tree_and_file_listing(hub: HubServer, api: HfApi, published: str) -> None:
    info = api.model_info(REPO, files_metadata=True)
    assert info.sha == published
    siblings = {s.rfilename: s for s in info.siblings}
    assert sorted(siblings) == [".gitattributes", "config.json", "docs/notes.txt", "model.safetensors"]
    assert siblings["config.json"].size == len(CONFIG)
    assert siblings["config.json"].blob_id == git_blob_sha1(CONFIG)
    assert siblings["config.json"].lfs is None
    lfs = siblings["model.safetensors"].lfs
    assert (lfs.sha256, lfs.size) == (sha256(WEIGHTS), len(WEIGHTS))

    assert api.list_repo_files(REPO) == [".gitattributes", "config.json", "docs/notes.txt", "model.safetensors"]
    top = {entry.path: type(entry).__name__ for entry in api.list_repo_tree(REPO)}
    assert top == {"docs": "RepoFolder", ".gitattributes": "RepoFile", "config.json": "RepoFile",
                   "model.safetensors": "RepoFile"}
    assert [e.path for e in api.list_repo_tree(REPO, path_in_repo="docs")] == ["docs/notes.txt"]
    [weights] = api.get_paths_info(REPO, ["model.safetensors"])
    assert weights.lfs.sha256 == sha256(WEIGHTS)
    assert api.file_exists(REPO, "config.json") and not api.file_exists(REPO, "missing.bin")
    assert [c.title for c in api.list_repo_commits(REPO)] == ["Add drafter", "initial commit"]


def test_snapshot_download_returns_the_uploaded_bytes(hub: HubServer, published: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    snapshot = Path(snapshot_download(REPO, endpoint=hub.url, cache_dir=cache, token=TOKEN))
    assert snapshot.name == published
    assert (snapshot / "config.json").read_bytes() == CONFIG
    assert (snapshot / "model.safetensors").read_bytes() == WEIGHTS
    assert (snapshot / "docs" / "notes.txt").read_bytes() == NOTES
    blobs = {p.name for p in (cache / "models--test-user--drafter" / "blobs").iterdir()}
    # LFS blobs are cached under the X-Linked-Etag (sha256), regular ones under the git blob sha1.
    assert {sha256(WEIGHTS), git_blob_sha1(CONFIG), git_blob_sha1(NOTES)} <= blobs

    heads = hub.find_requests(f"^/{REPO}/resolve/{published}/", "HEAD")
    assert len(heads) == 4 and all(r.token == TOKEN for r in heads)


def test_hf_hub_download_one_file_and_metadata(hub: HubServer, published: str, tmp_path: Path) -> None:
    path = hf_hub_download(REPO, "model.safetensors", endpoint=hub.url, cache_dir=tmp_path, token=TOKEN)
    assert Path(path).read_bytes() == WEIGHTS
    by_sha = hf_hub_download(REPO, "config.json", revision=published, endpoint=hub.url, cache_dir=tmp_path)
    assert Path(by_sha).read_bytes() == CONFIG

    meta = get_hf_file_metadata(hf_hub_url(REPO, "model.safetensors", endpoint=hub.url))
    assert (meta.commit_hash, meta.etag, meta.size) == (published, sha256(WEIGHTS), len(WEIGHTS))
    meta = get_hf_file_metadata(hf_hub_url(REPO, "config.json", endpoint=hub.url))
    assert (meta.etag, meta.size) == (git_blob_sha1(CONFIG), len(CONFIG))

    ranged = get_session().get(hf_hub_url(REPO, "config.json", endpoint=hub.url), headers={"Range": "bytes=2-"})
    assert ranged.status_code == 206 and ranged.content == CONFIG[2:]


def test_create_pr_leaves_main_alone(hub: HubServer, api: HfApi, published: str, tmp_path: Path) -> None:
    info = api.upload_file(path_or_fileobj=b"v2 notes\n", path_in_repo="docs/notes.txt", repo_id=REPO,
                           create_pr=True, commit_message="Update notes")
    assert info.pr_url == f"{hub.url}/{REPO}/discussions/1"
    assert (info.pr_revision, info.pr_num) == ("refs/pr/1", 1)
    assert hub.find_requests("/commit/main", "POST")[-1].query == {"create_pr": ["1"]}

    assert api.model_info(REPO).sha == published
    assert hub.read_file(REPO, "docs/notes.txt") == NOTES
    assert api.model_info(REPO, revision=info.pr_revision).sha == info.oid
    pr_file = hf_hub_download(REPO, "docs/notes.txt", revision=info.pr_revision, endpoint=hub.url,
                              cache_dir=tmp_path)
    assert Path(pr_file).read_bytes() == b"v2 notes\n"

    second = api.upload_file(path_or_fileobj=b"{}", path_in_repo="extra.json", repo_id=REPO, create_pr=True)
    assert second.pr_num == 2
    refs = api.list_repo_refs(REPO, include_pull_requests=True)
    assert [(r.ref, r.target_commit) for r in refs.pull_requests] == [
        ("refs/pr/1", info.oid), ("refs/pr/2", second.oid)]


def test_branches(hub: HubServer, api: HfApi, published: str) -> None:
    api.create_branch(REPO, branch="v1")
    api.create_branch(REPO, branch="v1", exist_ok=True)
    with pytest.raises(HfHubHTTPError) as exists:
        api.create_branch(REPO, branch="v1")
    assert exists.value.response.status_code == 409

    info = api.upload_file(path_or_fileobj=b"[]", path_in_repo="v1.json", repo_id=REPO, revision="v1")
    refs = {r.name: r.target_commit for r in api.list_repo_refs(REPO).branches}
    assert refs == {"main": published, "v1": info.oid}
    assert "v1.json" in api.list_repo_files(REPO, revision="v1")
    assert "v1.json" not in api.list_repo_files(REPO)
    api.delete_branch(REPO, branch="v1")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="v1")


def test_unchanged_upload_is_skipped_and_lfs_is_deduplicated(hub: HubServer, api: HfApi, folder: Path,
                                                             published: str) -> None:
    again = api.upload_folder(folder_path=folder, repo_id=REPO)
    assert again.oid == published
    assert len(hub.find_requests("/commit/main", "POST")) == 1

    (folder / "config.json").write_bytes(CONFIG + b"\n")
    changed = api.upload_folder(folder_path=folder, repo_id=REPO)
    assert changed.oid != published
    assert len(hub.find_requests("/_lfs/", "PUT")) == 1  # weights already stored: no second upload
    assert [line["value"]["path"] for line in hub.find_requests("/commit/main", "POST")[-1].ndjson()[1:]] == [
        "config.json"]


def test_lfs_upload_url_checks_signature_and_content(hub: HubServer, api: HfApi) -> None:
    api.create_repo(REPO)
    blob = b"\x00" * 1000
    batch = get_session().post(
        f"{hub.url}/{REPO}.git/info/lfs/objects/batch", headers={"Authorization": f"Bearer {TOKEN}"},
        json={"operation": "upload", "transfers": ["basic"], "objects": [{"oid": sha256(blob), "size": len(blob)}]})
    href = batch.json()["objects"][0]["actions"]["upload"]["href"]
    assert get_session().put(href.replace("sig=", "sig=0"), content=blob).status_code == 403
    assert get_session().put(href, content=blob[:-1] + b"\x01").status_code == 400
    chunked = get_session().put(href, content=iter([blob[:300], blob[300:]]))
    assert chunked.status_code == 200
    assert hub.find_requests("/_lfs/", "PUT")[-1].headers["transfer-encoding"] == "chunked"
    assert hub.repo(REPO).lfs_objects[sha256(blob)] == blob


def test_stale_parent_commit_is_rejected(hub: HubServer, api: HfApi, published: str) -> None:
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    with pytest.raises(HfHubHTTPError) as stale:
        api.upload_file(path_or_fileobj=b"y", path_in_repo="y.txt", repo_id=REPO, parent_commit=published)
    assert stale.value.response.status_code == 412


def test_commit_referencing_missing_lfs_object_is_rejected(hub: HubServer, api: HfApi, published: str) -> None:
    op = CommitOperationAdd(path_in_repo="ghost.safetensors", path_or_fileobj=b"\x00ghost")
    op._upload_mode = "lfs"  # skip preupload + LFS upload, as a buggy client would
    op._should_ignore = False
    op._is_uploaded = True
    with pytest.raises(BadRequestError, match="not uploaded"):
        api.create_commit(REPO, operations=[op], commit_message="ghost")


def test_missing_repo_revision_and_file_raise_typed_errors(hub: HubServer, api: HfApi, published: str,
                                                           tmp_path: Path) -> None:
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("test-user/nope")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(REPO, revision="no-such-branch")
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO, "missing.bin", endpoint=hub.url, cache_dir=tmp_path)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("test-user/nope", "config.json", endpoint=hub.url, cache_dir=tmp_path)


def test_injected_404_then_recovery(hub: HubServer, api: HfApi, published: str) -> None:
    rule = hub.fail_next(rf"^/api/models/{REPO}$", 404, method="GET", error_code="RepoNotFound")
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(REPO)
    assert api.model_info(REPO).sha == published
    assert (rule.hits, rule.remaining) == (1, 0)
    assert [r.status for r in hub.find_requests(rf"^/api/models/{REPO}$")] == [404, 200]


def test_injected_500_on_commit_changes_nothing(hub: HubServer, api: HfApi, published: str) -> None:
    hub.fail_next("/commit/", 500, message="database on fire")
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    assert err.value.response.status_code == 500
    assert "database on fire" in str(err.value)
    assert hub.repo(REPO).branches["main"] == published
    assert api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO).oid != published


def test_injected_403_on_preupload(hub: HubServer, api: HfApi, published: str) -> None:
    hub.fail_next("/preupload/", 403, message="Write access denied")
    with pytest.raises(HfHubHTTPError) as err:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    assert err.value.response.status_code == 403
    assert "Write access denied" in str(err.value)
    assert not hub.find_requests("/commit/")[1:]


def test_transient_500_on_preupload_is_retried_by_the_client(hub: HubServer, api: HfApi, published: str) -> None:
    hub.fail_next("/preupload/", 500)  # http_backoff sleeps 1 s before its retry
    api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO)
    assert [r.status for r in hub.find_requests("/preupload/")] == [200, 500, 200]


def test_injected_401_on_download(hub: HubServer, published: str, tmp_path: Path) -> None:
    hub.fail_next("/resolve/", 401, method="HEAD", message="Invalid credentials in Authorization header")
    with pytest.raises(HfHubHTTPError) as err:
        hf_hub_download(REPO, "config.json", endpoint=hub.url, cache_dir=tmp_path)
    assert err.value.response.status_code == 401
    assert not isinstance(err.value, RepositoryNotFoundError)


def test_unknown_route_is_a_plain_404(hub: HubServer) -> None:
    response = get_session().get(f"{hub.url}/api/spaces/someone/space")
    assert response.status_code == 404
    assert "no route" in response.json()["error"]


def test_server_side_seeding_is_downloadable(hub: HubServer, tmp_path: Path) -> None:
    hub.create_repo("org/seeded")
    oid = hub.commit("org/seeded", {"config.json": CONFIG, "model.safetensors": WEIGHTS})
    assert hub.repo("org/seeded").head().tree["model.safetensors"].is_lfs
    snapshot = Path(snapshot_download("org/seeded", endpoint=hub.url, cache_dir=tmp_path))
    assert snapshot.name == oid
    assert (snapshot / "model.safetensors").read_bytes() == WEIGHTS


def test_dataset_repos(hub: HubServer, api: HfApi, tmp_path: Path) -> None:
    api.create_repo("data", repo_type="dataset")
    api.upload_file(path_or_fileobj=b"PAR1\x00\x01", path_in_repo="train.parquet", repo_id="test-user/data",
                    repo_type="dataset")
    assert hub.repo("test-user/data", "dataset").head().tree["train.parquet"].is_lfs
    path = hf_hub_download("test-user/data", "train.parquet", repo_type="dataset", endpoint=hub.url,
                           cache_dir=tmp_path)
    assert Path(path).read_bytes() == b"PAR1\x00\x01"
    assert hub.find_requests(r"^/datasets/test-user/data\.git/info/lfs/objects/batch$")


class TestRequiredToken:
    @pytest.fixture
    def locked(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
        with isolated_hub(monkeypatch, tmp_path / "hf-home", token="hf_good") as server:
            HfApi(endpoint=server.url, token="hf_good").create_repo("secret", private=True)
            HfApi(endpoint=server.url, token="hf_good").create_repo("open")
            yield server

    def test_whoami(self, locked: HubServer) -> None:
        assert HfApi(endpoint=locked.url, token="hf_good").whoami()["name"] == "test-user"
        with pytest.raises(HfHubHTTPError, match="Invalid user token") as err:
            HfApi(endpoint=locked.url, token="hf_bad").whoami()
        assert err.value.response.status_code == 401

    def test_wrong_token_is_an_auth_error_not_a_missing_repo(self, locked: HubServer) -> None:
        with pytest.raises(HfHubHTTPError) as err:
            HfApi(endpoint=locked.url, token="hf_bad").model_info("test-user/open")
        assert err.value.response.status_code == 401
        assert not isinstance(err.value, RepositoryNotFoundError)
        assert err.value.response.headers["X-Error-Message"] == "Invalid credentials in Authorization header"

    def test_private_repo_needs_the_token(self, locked: HubServer) -> None:
        anonymous = HfApi(endpoint=locked.url, token=False)
        with pytest.raises(RepositoryNotFoundError):
            anonymous.model_info("test-user/secret")
        assert anonymous.model_info("test-user/open").private is False
        assert HfApi(endpoint=locked.url, token="hf_good").model_info("test-user/secret").private is True
        assert locked.find_requests("/api/models/test-user/secret")[0].authorization is None

    def test_writes_need_a_token(self, locked: HubServer) -> None:
        with pytest.raises(HfHubHTTPError) as err:
            HfApi(endpoint=locked.url, token=False).upload_file(
                path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="test-user/open")
        assert err.value.response.status_code == 401
        assert locked.list_files("test-user/open") == [".gitattributes"]


def test_list_models_filters_pages_and_cards_as_the_hub_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """GET /api/models: author, search, filter (tags incl. base_model:...), limit, and pages the client follows by
    the Link header; model_info carries cardData and the tags the Hub derives from the card."""
    with isolated_hub(monkeypatch, tmp_path / "hf-home", page_size=2) as hub:
        for i in range(5):
            repo = f"org{i % 2}/model-{i}"
            hub.create_repo(repo)
            card = f"---\nbase_model: base/m{i % 3}\nlibrary_name: sglang\nlicense: mit\ntags:\n- eagle3\n---\n# {i}\n"
            hub.commit(repo, {"README.md": card.encode(), "model.safetensors": WEIGHTS})
        hub.create_repo("org0/no-card", private=True)
        api = HfApi(endpoint=hub.url, token=TOKEN)
        assert [m.id for m in api.list_models(author="org0")] == ["org0/model-0", "org0/model-2", "org0/model-4",
                                                                 "org0/no-card"]
        assert [m.id for m in HfApi(endpoint=hub.url).list_models(author="org0")] == [
            "org0/model-0", "org0/model-2", "org0/model-4"]  # private repos need a token
        pages = hub.find_requests(r"^/api/models$", "GET")
        assert len(pages) >= 2 and 'rel="next"' in pages[0].response_headers["Link"]
        assert [m.id for m in api.list_models(filter="base_model:base/m0")] == ["org0/model-0", "org1/model-3"]
        assert [m.id for m in api.list_models(filter=["eagle3", "base_model:base/m1"])] == ["org0/model-4",
                                                                                           "org1/model-1"]
        assert [m.id for m in api.list_models(search="MODEL-3")] == ["org1/model-3"]
        assert len(list(api.list_models(limit=3))) == 3
        info = api.model_info("org1/model-1", files_metadata=True)
        assert info.card_data.base_model == "base/m1" and info.library_name == "sglang"
        assert info.tags == ["eagle3", "sglang", "license:mit", "base_model:base/m1", "base_model:finetune:base/m1",
                             "safetensors"]
        assert {s.rfilename: s.lfs is not None for s in info.siblings} == {
            ".gitattributes": False, "README.md": False, "model.safetensors": True}
        assert api.model_info("org0/no-card").card_data is None
