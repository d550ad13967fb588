"""How a Hub failure reads (issue 33 item 6, sources.py's mutation run): each answer the Hub can give to a download
or a config fetch, served by the loopback Hub of tests/hub_server.py to the real huggingface_hub client, reaches
sources.hub_error through download/fetch_config and comes back as one error whose message, hint, code and reading are
pinned word for word. The transport failures no loopback answer can make in a test's time (a read timeout, a refused
connection once the Hub answered the probe) are httpx2's and the OS's own exception types, handed to hub_error
directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EXAMPLE
from eagle3_convert import sources
from eagle3_convert.hub_read import HubReader
from hub_server import HubServer, isolated_hub

REPO = "org/drafter"
PRIVATE = "org/private"
TOKEN = "hf_right"
AUTH_HINT = "check the repo id, and log in (`hf auth login`, HF_TOKEN or --token) for private repos"
FORBIDDEN_HINT = "your token lacks permission for this repo: request access or use a write token"
NETWORK_HINT = "check the network, and --endpoint or HF_ENDPOINT"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with isolated_hub(monkeypatch, tmp_path / "hf-home", token=TOKEN) as server:
        server.create_repo(REPO)
        server.commit(REPO, {name: (EXAMPLE / name).read_bytes() for name in ("config.json", "model.safetensors")})
        server.create_repo(PRIVATE, private=True)
        server.commit(PRIVATE, {"config.json": json.dumps({"model_type": "llama"}).encode()})
        server.create_repo("org/no-config")
        yield server


def reading(error: sources.HubError) -> tuple[str, str | None, str, str]:
    return str(error), error.hint, error.code, error.reading


def failed_download(hub: HubServer, repo: str = REPO, **options) -> sources.HubError:
    with pytest.raises(sources.HubError) as caught:
        sources.download(repo, endpoint=hub.url, **options)
    return caught.value


def failed_fetch(hub: HubServer, repo: str = REPO, **options) -> sources.HubError:
    with pytest.raises(sources.HubError) as caught:
        sources.fetch_config(repo, endpoint=hub.url, **options)
    return caught.value


def test_a_missing_revision(hub: HubServer):
    assert reading(failed_download(hub, revision="v9")) == (
        f"downloading {REPO}: revision not found", "check --revision (a branch, tag or commit)", "E-HUB-REVISION",
        "revision not found")


def test_a_missing_repo_says_its_status(hub: HubServer):
    assert reading(failed_download(hub, "org/none")) == (
        "downloading org/none: repository not found or not authorized (HTTP 404)", AUTH_HINT, "E-HUB-AUTH",
        "repository not found or not authorized (HTTP 404)")


def test_a_private_repo_without_a_token(hub: HubServer):
    assert reading(failed_fetch(hub, PRIVATE)) == (
        f"fetching config.json of {PRIVATE}: repository not found or not authorized (HTTP 401)", AUTH_HINT,
        "E-HUB-AUTH", "repository not found or not authorized (HTTP 401)")


def test_a_refused_token_is_a_401_that_is_no_missing_repo(hub: HubServer):
    # The Hub's "Invalid credentials" 401 is a plain HfHubHTTPError (huggingface_hub/utils/_http.py,
    # hf_raise_for_status): only its status says it is an authorization failure.
    error = failed_download(hub, token="hf_wrong")
    assert reading(error) == (f"downloading {REPO}: repository not found or not authorized (HTTP 401)", AUTH_HINT,
                              "E-HUB-AUTH", "repository not found or not authorized (HTTP 401)")


@pytest.mark.parametrize("status, error_code", [(403, None), (403, "GatedRepo"), (401, "GatedRepo")])
def test_a_gated_or_forbidden_repo(hub: HubServer, status: int, error_code: str | None):
    hub.fail_next(rf"^/api/models/{REPO}$", status, method="GET", error_code=error_code)
    assert reading(failed_download(hub)) == (f"downloading {REPO}: access denied (HTTP 403)", FORBIDDEN_HINT,
                                             "E-HUB-FORBIDDEN", "access denied (HTTP 403)")


def test_a_missing_file_and_a_404_without_a_reason(hub: HubServer):
    found = ("file or repo not found (HTTP 404)", "check the repo id and revision", "E-HUB-NOTFOUND")
    no_config = failed_fetch(hub, "org/no-config")  # the Hub's EntryNotFound
    assert reading(no_config) == (f"fetching config.json of org/no-config: {found[0]}", *found[1:], found[0])
    hub.fail_next(rf"^/api/models/{REPO}$", 404, method="GET")  # no X-Error-Code: a bare HfHubHTTPError
    assert reading(failed_download(hub)) == (f"downloading {REPO}: {found[0]}", *found[1:], found[0])


def test_a_conflict(hub: HubServer):
    hub.fail_next(rf"^/api/models/{REPO}$", 409, method="GET")
    assert reading(failed_download(hub)) == (
        f"downloading {REPO}: conflict (HTTP 409)", "the branch moved or a PR is pending: retry, or use --create-pr",
        "E-HUB-CONFLICT", "conflict (HTTP 409)")


@pytest.mark.parametrize("status", [500, 400])  # (a 5xx is retried by huggingface_hub only for files)
def test_any_other_status(hub: HubServer, status: int):
    hub.fail_next(rf"^/api/models/{REPO}$", status, method="GET", times=None)
    assert reading(failed_download(hub)) == (
        f"downloading {REPO}: the Hub answered HTTP {status}", "retry later; if it persists, check the Hub status page",
        "E-HUB-HTTP", f"the Hub answered HTTP {status}")


def test_a_snapshot_the_hub_stops_serving_and_nothing_cached(hub: HubServer):
    # model_info answered, then each file's HEAD in snapshot_download got a 501: huggingface_hub turns that into a
    # LocalEntryNotFoundError (huggingface_hub 2.4.0 file_download.py:1962, _raise_on_head_call_error), a cache miss
    # online, never a 404
    hub.fail_next(rf"^/{REPO}/resolve/", 501, method="HEAD", times=None)
    assert reading(failed_download(hub)) == (
        f"downloading {REPO}: the Hub at {hub.url} is unreachable and nothing is cached (LocalEntryNotFoundError)",
        NETWORK_HINT, "E-HUB-OFFLINE", f"the Hub at {hub.url} is unreachable and nothing is cached "
        "(LocalEntryNotFoundError)")


@pytest.mark.parametrize("value", ["1", "TRUE", "yes", "On"])
def test_offline_and_not_cached(hub: HubServer, monkeypatch: pytest.MonkeyPatch, value: str):
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    expected = ("not in the Hugging Face cache, and HF_HUB_OFFLINE is set",
                "download it once with the network on, or unset HF_HUB_OFFLINE", "E-HUB-OFFLINE")
    assert reading(failed_download(hub)) == (f"downloading {REPO}: {expected[0]}", *expected[1:], expected[0])
    assert hub.requests == []


@pytest.mark.parametrize("value", ["0", "", "off", "no"])
def test_hub_offline_only_for_a_true_value(monkeypatch: pytest.MonkeyPatch, value: str):
    monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert sources.hub_offline() is False


def test_the_hub_reader_says_the_same(hub: HubServer):
    hub.fail_next(r"^/api/models", 501, method="GET")
    with pytest.raises(sources.HubError) as caught:
        HubReader(hub.url).repos("org")
    assert reading(caught.value) == ("listing the models of org: the Hub answered HTTP 501",
                                     "retry later; if it persists, check the Hub status page", "E-HUB-HTTP",
                                     "the Hub answered HTTP 501")


# Transport failures, as httpx2 (huggingface_hub 2.x's client) and the OS raise them

def test_a_transport_oserror_online_and_offline(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    refused = sources.hub_error(ConnectionRefusedError(111, "Connection refused"), REPO, "downloading",
                                "http://127.0.0.1:9/")
    assert reading(refused) == (
        f"downloading {REPO}: the Hub at http://127.0.0.1:9 is unreachable and nothing is cached "
        "(ConnectionRefusedError)", NETWORK_HINT, "E-HUB-OFFLINE",
        "the Hub at http://127.0.0.1:9 is unreachable and nothing is cached (ConnectionRefusedError)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = sources.hub_error(TimeoutError("timed out"), REPO, "fetching config.json of")
    assert (offline.code, offline.reading) == ("E-HUB-OFFLINE",
                                               "not in the Hugging Face cache, and HF_HUB_OFFLINE is set")


def test_any_other_failure_says_its_type_and_first_line():
    import httpx2  # huggingface_hub 2.x's HTTP client (huggingface_hub/utils/_http.py:33)

    timeout = sources.hub_error(httpx2.ReadTimeout("The read operation timed out\nsecond line"), REPO, "downloading")
    assert reading(timeout) == (f"downloading {REPO}: ReadTimeout: The read operation timed out",
                                "check the network, HF_ENDPOINT and your token", "E-HUB",
                                "ReadTimeout: The read operation timed out")
    long = sources.hub_error(httpx2.RemoteProtocolError("x" * 300), REPO, "downloading")
    assert long.reading == "RemoteProtocolError: " + "x" * 200
    silent = sources.hub_error(httpx2.ConnectError(""), REPO, "downloading")
    assert silent.reading == "ConnectError: failed" and silent.code == "E-HUB"


# fetch_config: a target's config.json alone, at the revision asked, with the token given, and its commit

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 6, "hidden_size": 64}


def test_fetch_config_at_a_revision_of_a_private_repo_names_its_commit(hub: HubServer):
    first = hub.commit(PRIVATE, {"config.json": json.dumps(LLAMA).encode()})
    later = hub.commit(PRIVATE, {"config.json": json.dumps({**LLAMA, "num_hidden_layers": 7}).encode()})
    assert sources.fetch_config(PRIVATE, endpoint=hub.url, token=TOKEN) == ({**LLAMA, "num_hidden_layers": 7}, later)
    assert sources.fetch_config(PRIVATE, first, endpoint=hub.url, token=TOKEN) == (LLAMA, first)


def test_fetch_config_of_a_file_that_is_no_json_names_it(hub: HubServer):
    hub.create_repo("org/broken")
    hub.commit("org/broken", {"config.json": b"{not json"})
    with pytest.raises(Exception) as caught:
        sources.fetch_config("org/broken", endpoint=hub.url)
    assert str(caught.value).startswith("org/broken/config.json is not valid JSON (")
    assert caught.value.code == "E-CONFIG-JSON"


def test_fetch_config_from_an_unreachable_hub(hub: HubServer):
    from test_sources import closed_port_endpoint
    dead = closed_port_endpoint()
    error = failed_fetch_at(dead, REPO)
    assert str(error).startswith(f"fetching config.json of {REPO}: the Hub at {dead} is unreachable (Connect"), error
    assert (error.hint, error.code) == (NETWORK_HINT, "E-HUB-OFFLINE")
    assert error.reading == str(error).removeprefix(f"fetching config.json of {REPO}: ")


def failed_fetch_at(endpoint: str, repo: str) -> sources.HubError:
    with pytest.raises(sources.HubError) as caught:
        sources.fetch_config(repo, endpoint=endpoint)
    return caught.value


def test_fetch_config_from_the_cache_when_the_hub_is_unreachable_or_offline(hub: HubServer,
                                                                           monkeypatch: pytest.MonkeyPatch):
    from huggingface_hub import constants
    from test_sources import closed_port_endpoint
    config, commit = sources.fetch_config(REPO, endpoint=hub.url)
    assert sources.fetch_config(REPO, endpoint=closed_port_endpoint()) == (config, commit)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.requests.clear()
    assert sources.fetch_config(REPO, endpoint=hub.url) == (config, commit)
    assert hub.requests == []  # offline: not even the reachability probe


def test_fetch_config_the_hub_stops_serving_names_the_endpoint(hub: HubServer):
    hub.fail_next(rf"^/{REPO}/resolve/", 501, method="HEAD", times=None)
    error = failed_fetch(hub)
    assert error.reading == f"the Hub at {hub.url} is unreachable and nothing is cached (LocalEntryNotFoundError)"


def test_a_missing_src_keeps_the_hubs_reading(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(sources.HubError) as caught:
        sources.resolve_source("scratch/none", endpoint=hub.url)
    assert reading(caught.value) == (
        "scratch/none: no such directory; as a Hub repo id: repository not found or not authorized (HTTP 404)",
        f"{AUTH_HINT}; if you meant a local path, check it", "E-HUB-AUTH",
        "repository not found or not authorized (HTTP 404)")


def test_remember_ref_names_only_a_snapshot_downloaded_by_commit(tmp_path: Path):
    sha, other = "a" * 40, "b" * 40

    def refs_after(snapshot: Path, revision: str, commit: str | None) -> list[str]:
        snapshot.mkdir(parents=True)
        sources._remember_ref(snapshot, revision, commit)
        refs = snapshot.parent.parent / "refs"
        return sorted(p.name for p in refs.iterdir()) if refs.is_dir() else []

    assert refs_after(tmp_path / "a" / "snapshots" / sha, "main", sha) == ["main"]
    assert refs_after(tmp_path / "b" / "snapshots" / sha, sha, sha) == []  # asked by its commit: nothing to name
    assert refs_after(tmp_path / "c" / "snapshots" / other, "main", sha) == []  # another commit's folder
    assert refs_after(tmp_path / "d" / "elsewhere" / sha, "main", sha) == []  # no HF-cache snapshot
    assert refs_after(tmp_path / "e" / "snapshots" / sha, "main", None) == []
    assert refs_after(tmp_path / "f" / "snapshots" / sha, "feature/x", sha) == ["feature"]  # a branch with a /
    assert (tmp_path / "f" / "refs" / "feature" / "x").read_text() == sha


def test_the_files_a_drafter_download_chooses():
    safetensors = ["config.json", "model.safetensors", "pytorch_model.bin", "optimizer.pt", "sub/model.safetensors",
                   "README.md", "eagle3-convert.json", "generation_config.json"]
    assert sources._choose_files(safetensors) == ["config.json", "model.safetensors", "README.md",
                                                  "eagle3-convert.json", "generation_config.json"]
    bins = ["config.json", "pytorch_model.bin.index.json", "pytorch_model-00001-of-00002.bin", "training_args.bin",
            "sub/pytorch_model.bin"]
    assert sources._choose_files(bins) == ["config.json", "pytorch_model.bin.index.json",
                                           "pytorch_model-00001-of-00002.bin"]
    gguf = ["eagle3-x-Q4_K.gguf", "eagle3-x-BF16.gguf", "eagle3-convert.json", "README.md", "notes.txt"]
    assert sources._choose_files(gguf) == ["eagle3-x-BF16.gguf", "eagle3-convert.json", "README.md"]


# download without the Hub: from the cache the earlier downloads filled, at the revision asked

def test_download_from_the_cache_at_the_revision_asked_when_the_hub_is_unreachable(hub: HubServer, tmp_path: Path):
    from test_sources import closed_port_endpoint
    first = hub.repo(REPO).branches["main"]
    later = hub.commit(REPO, {"README.md": b"later"}, message="later")
    cache = str(tmp_path / "own-cache")
    for revision in (first, None):
        sources.download(REPO, revision, endpoint=hub.url, cache_dir=cache)
    dead = closed_port_endpoint()
    path, commit = sources.download(REPO, first, endpoint=dead, cache_dir=cache)
    assert (path.name, commit) == (first, first) and (path / "config.json").is_file()
    assert sources.download(REPO, endpoint=dead, cache_dir=cache)[1] == later
    error = failed_download_at(dead, REPO)  # the HF cache holds nothing: the reason is the Hub
    assert str(error).startswith(f"downloading {REPO}: the Hub at {dead} is unreachable (Connect"), error
    assert (error.hint, error.code) == (NETWORK_HINT, "E-HUB-OFFLINE") and "None" not in str(error)


def failed_download_at(endpoint: str, repo: str) -> sources.HubError:
    with pytest.raises(sources.HubError) as caught:
        sources.download(repo, endpoint=endpoint)
    return caught.value


def test_download_offline_asks_nothing_of_any_hub(hub: HubServer, monkeypatch: pytest.MonkeyPatch):
    from huggingface_hub import constants
    path, commit = sources.download(REPO, endpoint=hub.url)
    # HF_HUB_OFFLINE set after huggingface_hub was imported (which reads it only then), its endpoint this Hub: only
    # local_files_only keeps the client off it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    hub.requests.clear()
    assert sources.download(REPO, endpoint=hub.url) == (path, commit)
    assert hub.requests == []


def test_download_takes_a_drafters_files_or_those_asked(hub: HubServer):
    hub.commit(REPO, {"optimizer.pt": b"\0" * 8, "runs/log.txt": b"x", "README.md": b"card"})
    path, _ = sources.download(REPO, endpoint=hub.url)
    assert sorted(p.name for p in path.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    hub.create_repo("org/other")
    hub.commit("org/other", {"config.json": b"{}", "model.safetensors": b"\0" * 8})
    only, _ = sources.download("org/other", endpoint=hub.url, files=("config.json",))
    assert sorted(p.name for p in only.iterdir()) == ["config.json"]


def test_what_is_asked_of_the_hub_and_what_a_destination_may_be(tmp_path: Path):
    from eagle3_convert.errors import UsageError
    for spec in ("org/a..b", "org/..", "../org/x"):
        assert not sources.has_repo_id_shape(spec) and sources.looks_local(spec) and not sources.is_repo_id(spec)
        with pytest.raises(UsageError) as caught:
            sources.check_repo_id(spec)
        assert (str(caught.value), caught.value.hint, caught.value.code) == (
            f"{spec!r} is not a Hub repo id", "give the destination as ORG/NAME, e.g. my-org/Llama-3.1-8B-eagle3",
            "E-USAGE")
    assert sources.check_repo_id("my-org/Llama-3.1-8B.eagle3") == "my-org/Llama-3.1-8B.eagle3"


def test_no_such_directory_reads_the_name_as_typed(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "ab").mkdir()
    # trailing X's and spaces are part of the name (only a trailing / is not)
    assert sources.no_such_directory(str(tmp_path / "sub" / "XXXX")) == (f"no such directory in {tmp_path / 'sub'}",
                                                                        True)
    assert sources.no_such_directory(str(tmp_path / "ab") + "    ") == (f"no such directory in {tmp_path}", True)
    assert sources.no_such_directory(str(tmp_path / "sub") + "x/") == (
        f"no such directory (did you mean {tmp_path / 'sub'}?)", True)


def test_the_gguf_a_repo_without_config_or_safetensors_is_read_by():
    assert sources.chosen_gguf(["eagle3-a-F32.gguf", "eagle3-a-F16.gguf", "eagle3-a-Q8_0.gguf"]) == "eagle3-a-F16.gguf"
    assert sources.chosen_gguf(["sub/eagle3-a-BF16.gguf", "only.gguf"]) == "only.gguf"  # top-level files only
    assert sources.chosen_gguf(["only.gguf", "README.md"]) == "only.gguf"
    assert sources.chosen_gguf(["a.gguf", "b.gguf"]) is None  # which one: no telling
    assert sources.chosen_gguf(["config.json", "eagle3-a-BF16.gguf"]) is None
    assert sources.chosen_gguf(["model.safetensors", "eagle3-a-BF16.gguf"]) is None
    assert sources.chosen_gguf(["README.md"]) is None


def test_resolve_source_of_a_private_repo_at_a_revision(hub: HubServer):
    first = hub.commit(PRIVATE, {"model.safetensors": (EXAMPLE / "model.safetensors").read_bytes()})
    hub.commit(PRIVATE, {"README.md": b"later"}, message="later")
    path, commit = sources.resolve_source(PRIVATE, first, endpoint=hub.url, token=TOKEN, files=("config.json",))
    assert commit == first and sorted(p.name for p in path.iterdir()) == ["config.json"]
    path, commit = sources.download(PRIVATE, first, endpoint=hub.url, token=TOKEN)
    assert commit == first and sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]


def test_resolve_source_says_a_missing_path_and_a_mistyped_one(hub: HubServer, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch):
    from eagle3_convert.errors import FormatError
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FormatError) as caught:
        sources.resolve_source("./nope")
    assert (str(caught.value), caught.value.hint, caught.value.code) == (
        "./nope: no such directory", "check the path (a Hub repo id is written ORG/NAME)", "E-SRC-MISSING")
    (tmp_path / "scratch").mkdir()
    with pytest.raises(sources.HubError) as caught:
        sources.resolve_source("scratch/nope", endpoint=hub.url)
    assert (caught.value.code, caught.value.hint) == (
        "E-SRC-MISSING", f"check the path (for the Hub repo: {AUTH_HINT})")


def test_an_unreachable_hub_says_why_in_one_line():
    from test_sources import closed_port_endpoint
    dead = closed_port_endpoint()
    assert sources.unreachable(dead) == "ConnectError: [Errno 111] Connection refused"


def test_which_hub_and_whether_offline(monkeypatch: pytest.MonkeyPatch):
    from huggingface_hub import constants
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert sources.hub_offline() is False
    assert sources.hub_url("http://h.example/pathX/") == "http://h.example/pathX"
    monkeypatch.setattr(constants, "ENDPOINT", "http://mirror.example/")
    assert sources.hub_url(None) == "http://mirror.example"  # what huggingface_hub settled on at its import
    monkeypatch.setattr(constants, "ENDPOINT", "")
    assert sources.hub_url(None) == "https://huggingface.co"
    monkeypatch.setenv("HF_ENDPOINT", "http://env.example")
    assert sources.hub_url(None) == "http://env.example"


def test_a_hub_that_never_answers_is_unreachable_within_the_bound():
    import socket
    import time
    with socket.socket() as silent:  # listens, never accepts: the connection opens, no answer comes
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        why = sources.unreachable(f"http://127.0.0.1:{silent.getsockname()[1]}")
        took = time.monotonic() - started
    assert why == "ReadTimeout: timed out", why
    assert sources.REACH_TIMEOUT_S <= took < sources.REACH_TIMEOUT_S + 0.3 + 1


def test_a_hub_that_answers_with_a_redirect_is_reachable():
    # any HTTP answer counts, a redirect too, wherever it points (huggingface_hub's client follows redirects by
    # default, 2.4.0 utils/_http.py:347: the probe must not)
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from test_sources import closed_port_endpoint
    dead = closed_port_endpoint()

    class Redirect(BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(302)
            self.send_header("Location", f"{dead}/")
            self.end_headers()

        def log_message(self, *args):
            pass

    with HTTPServer(("127.0.0.1", 0), Redirect) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            assert sources.unreachable(f"http://127.0.0.1:{server.server_address[1]}") is None
        finally:
            server.shutdown()
