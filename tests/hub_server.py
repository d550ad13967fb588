"""An in-process stand-in for the Hugging Face Hub HTTP API, for tests.

The server speaks the subset of the Hub protocol that `huggingface_hub` (checked against 2.4.0) uses to create
repos, commit files (regular and LFS), create branches and pull requests, and download files back. It stores
everything it is sent in memory and serves that back, so a test exercises the real client end to end without
the network. It listens on 127.0.0.1 only, on a free port.

Xet storage is deliberately not offered: the client must run with Xet disabled (see `isolate_hf_client`),
otherwise `huggingface_hub` uploads through `hf_xet` and never calls the LFS batch API.

Typical use::

    with HubServer() as hub:
        api = HfApi(endpoint=hub.url, token="hf_test")
        ...
        assert hub.requests[-1].token == "hf_test"

or `isolated_hub(monkeypatch, tmp_path)`, which also isolates the client, inside a fixture.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

if TYPE_CHECKING:
    import pytest

# repo type -> prefix in web URLs (resolve, LFS); the API uses "<type>s".
URL_PREFIXES = {"model": "", "dataset": "datasets/"}
API_TYPES = {"models": "model", "datasets": "dataset"}

# Mirrors the Hub's rule of thumb: known binary formats, files with NUL bytes, and anything over 10 MB go to LFS.
LFS_EXTENSIONS = (
    ".7z", ".arrow", ".bin", ".bz2", ".ckpt", ".ftz", ".gguf", ".gz", ".h5", ".joblib", ".mlmodel", ".model",
    ".msgpack", ".npy", ".npz", ".onnx", ".ot", ".parquet", ".pb", ".pickle", ".pkl", ".pt", ".pth", ".rar",
    ".safetensors", ".tar", ".tflite", ".tgz", ".wasm", ".xz", ".zip", ".zst",
)
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
MAX_LOGGED_BODY = 1024 * 1024

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"  # exact text the client special-cases on 401
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob, which the Hub reports as `blobId`/ETag for regular files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(oid: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n".encode()


def wants_lfs(path: str, size: int, sample: bytes = b"") -> bool:
    """The upload mode this server answers in `preupload` (and enforces at commit time)."""
    if size == 0:
        return False  # the client always sends empty files as regular
    return path.lower().endswith(LFS_EXTENSIONS) or size > LFS_SIZE_THRESHOLD or b"\0" in sample


def _gitattributes() -> bytes:
    lines = [f"*{ext} filter=lfs diff=lfs merge=lfs -text" for ext in LFS_EXTENSIONS]
    return ("\n".join(lines) + "\n").encode()


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# --------------------------------------------------------------------------------------------------------- storage


@dataclass(frozen=True)
class StoredFile:
    path: str
    size: int
    blob_id: str  # git sha1 of the content, or of the LFS pointer for LFS files
    lfs_oid: str | None = None  # sha256 of the content for LFS files
    pointer_size: int | None = None

    @property
    def is_lfs(self) -> bool:
        return self.lfs_oid is not None

    @property
    def etag(self) -> str:
        return self.lfs_oid or self.blob_id


@dataclass
class Commit:
    oid: str
    parents: tuple[str, ...]
    title: str
    message: str
    author: str
    date: str
    tree: dict[str, StoredFile]


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    private: bool
    created_at: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    pull_requests: dict[int, str] = field(default_factory=dict)  # number -> head commit of refs/pr/<number>
    blobs: dict[str, bytes] = field(default_factory=dict)  # git sha1 -> content (regular files)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # sha256 -> content

    def resolve(self, revision: str) -> str | None:
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.tags:
            return self.tags[revision]
        if m := re.fullmatch(r"refs/pr/(\d+)", revision):
            return self.pull_requests.get(int(m[1]))
        if m := re.fullmatch(r"refs/heads/(.+)", revision):
            return self.branches.get(m[1])
        if _HEX40.fullmatch(revision) and revision in self.commits:
            return revision
        return None

    def content(self, f: StoredFile) -> bytes:
        return self.lfs_objects[f.lfs_oid] if f.lfs_oid else self.blobs[f.blob_id]

    def head(self, revision: str = "main") -> Commit:
        oid = self.resolve(revision)
        if oid is None:
            raise KeyError(revision)
        return self.commits[oid]


# ----------------------------------------------------------------------------------------------- log and failures


@dataclass
class RecordedRequest:
    method: str
    path: str  # unquoted, without the query string
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names; Authorization is kept so tests can check which token was sent
    body: bytes | None  # None when larger than MAX_LOGGED_BODY
    body_size: int
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes | None = None  # None for HEAD and when larger than MAX_LOGGED_BODY

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def token(self) -> str | None:
        auth = self.authorization
        return auth[len("Bearer "):] if auth and auth.startswith("Bearer ") else None

    def json(self) -> Any:
        assert self.body is not None
        return json.loads(self.body)

    def ndjson(self) -> list[dict]:
        assert self.body is not None
        return [json.loads(line) for line in self.body.splitlines() if line.strip()]

    def response_json(self) -> Any:
        assert self.response_body is not None
        return json.loads(self.response_body)


@dataclass
class FailureRule:
    route: re.Pattern[str]
    status: int
    method: str | None = None
    remaining: int | None = 1  # None = fail forever
    error_code: str | None = None
    message: str = "Injected failure"
    headers: dict[str, str] = field(default_factory=dict)
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        return (self.method is None or self.method == method) and self.route.search(path) is not None


class HubError(Exception):
    def __init__(self, status: int, message: str, error_code: str | None = None,
                 headers: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_code = error_code
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})  # more JSON fields for the error body


def _repo_not_found(status: int = 404) -> HubError:
    return HubError(status, "Repository not found", "RepoNotFound")


def _revision_not_found(revision: str) -> HubError:
    return HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")


def _card_fields(repo: Repo, commit: Commit) -> dict[str, Any]:
    """What the Hub derives from a commit's README.md front matter and files: `cardData`, `tags` (the card's
    tags, `library_name`, `license:...`, `base_model:...` and `base_model:finetune:...`, and file formats) and
    `library_name`. A README without parsable front matter has no cardData."""
    import yaml

    card = None
    readme = commit.tree.get("README.md")
    if readme is not None:
        text = repo.content(readme).decode("utf-8", "replace")
        match = re.match(r"^---\s*\n(.*?)\n---\s*$", text, re.DOTALL | re.MULTILINE)
        try:
            card = yaml.safe_load(match[1]) if match else None
        except yaml.YAMLError:
            card = None
    card = card if isinstance(card, dict) else None
    tags: list[str] = []

    def add(tag: Any) -> None:
        if isinstance(tag, str) and tag and tag not in tags:
            tags.append(tag)

    if card:
        for tag in card.get("tags") or []:
            add(tag)
        add(card.get("library_name"))
        if card.get("license"):
            add(f"license:{card['license']}")
        bases = card.get("base_model")
        for base in [bases] if isinstance(bases, str) else bases if isinstance(bases, list) else []:
            add(f"base_model:{base}")
            add(f"base_model:finetune:{base}")
    if any(p.endswith(".safetensors") for p in commit.tree):
        add("safetensors")
    if any(p.endswith(".gguf") for p in commit.tree):
        add("gguf")
    out: dict[str, Any] = {"tags": tags}
    if card is not None:
        out["cardData"] = card
        if isinstance(card.get("library_name"), str):
            out["library_name"] = card["library_name"]
    return out


# ------------------------------------------------------------------------------------------------------- the server


class HubServer:
    """A fake Hub on http://127.0.0.1:<free port>.

    token: when set, only `Bearer <token>` is accepted; any other Authorization value gets 401. When unset, any
        Bearer token is accepted. Writes always need some accepted token; reads of public repos need none.
    user: the name whoami reports and the namespace of repos created without one.
    orgs: namespaces the user may write to besides `user`; None allows every namespace.
    page_size: how many models one page of `GET /api/models` holds (the real Hub pages by a `Link: <...>;
        rel="next"` header, which the client follows).
    """

    def __init__(self, *, token: str | None = None, user: str = "test-user", orgs: list[str] | None = None,
                 page_size: int = 1000):
        self.required_token = token
        self.page_size = page_size  # GET /api/models answers at most this many per page, then a Link to the next
        self.user = user
        self.orgs = orgs
        self.requests: list[RecordedRequest] = []
        self.failures: list[FailureRule] = []
        self._repos: dict[tuple[str, str], Repo] = {}
        self._lock = threading.RLock()
        self._secret = secrets.token_bytes(16)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    # lifecycle

    def start(self) -> HubServer:
        if self._httpd is not None:
            return self
        handler = type("BoundHubHandler", (_HubHandler,), {"hub": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="hub-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            # Keep-alive connections would otherwise keep their handler threads waiting for a next request.
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("HubServer is not started")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # error injection and request log

    def fail_next(self, route: str, status: int, *, method: str | None = None, times: int | None = 1,
                  error_code: str | None = None, message: str = "Injected failure",
                  headers: Mapping[str, str] | None = None) -> FailureRule:
        """Answer `status` to the next `times` requests (None = all) whose unquoted path matches regex `route`.

        `error_code` becomes the X-Error-Code header the client maps to exception classes: "RepoNotFound",
        "RevisionNotFound", "EntryNotFound", "GatedRepo". The request body is read and the request logged first.
        """
        rule = FailureRule(re.compile(route), status, method.upper() if method else None, times, error_code,
                           message, dict(headers or {}))
        with self._lock:
            self.failures.append(rule)
        return rule

    def clear_failures(self) -> None:
        with self._lock:
            self.failures.clear()

    def find_requests(self, path: str | None = None, method: str | None = None) -> list[RecordedRequest]:
        """Logged requests whose unquoted path matches regex `path` and whose method is `method`."""
        with self._lock:
            return [r for r in self.requests
                    if (method is None or r.method == method.upper()) and (path is None or re.search(path, r.path))]

    # direct access to the stored state, for seeding and for checking what a client published

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        with self._lock:
            return self._repos[(repo_type, repo_id)]

    def has_repo(self, repo_id: str, repo_type: str = "model") -> bool:
        with self._lock:
            return (repo_type, repo_id) in self._repos

    def read_file(self, repo_id: str, path: str, revision: str = "main", repo_type: str = "model") -> bytes:
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            return repo.content(repo.head(revision).tree[path])

    def list_files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> list[str]:
        with self._lock:
            return sorted(self.repo(repo_id, repo_type).head(revision).tree)

    def create_repo(self, repo_id: str, *, private: bool = False, repo_type: str = "model") -> Repo:
        """Create a repo with the Hub's initial `.gitattributes` commit."""
        with self._lock:
            if (repo_type, repo_id) in self._repos:
                raise HubError(409, f"You already created this {repo_type} repo")
            repo = Repo(repo_id, repo_type, private, _now())
            self._repos[(repo_type, repo_id)] = repo
            gitattributes = _gitattributes()
            tree = {".gitattributes": self._store_regular(repo, ".gitattributes", gitattributes)}
            oid = self._new_commit(repo, (), "initial commit", "", tree)
            repo.branches["main"] = oid
            return repo

    def commit(self, repo_id: str, files: Mapping[str, bytes], *, message: str = "seed",
               revision: str = "main", repo_type: str = "model") -> str:
        """Commit `files` to an existing branch without going through HTTP, choosing LFS like `preupload` does."""
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            base = repo.head(revision)
            tree = dict(base.tree)
            for path, data in files.items():
                if wants_lfs(path, len(data), data[:512]):
                    oid = hashlib.sha256(data).hexdigest()
                    repo.lfs_objects[oid] = data
                    tree[path] = self._lfs_entry(path, oid, len(data))
                else:
                    tree[path] = self._store_regular(repo, path, data)
            new = self._new_commit(repo, (base.oid,), message, "", tree)
            repo.branches[revision] = new
            return new

    # internals shared by the handler

    def _get_repo(self, repo_type: str, repo_id: str, auth: _Auth, *, write: bool = False) -> Repo:
        repo = self._repos.get((repo_type, repo_id))
        if write:
            auth.require()
        if repo is None:
            raise _repo_not_found()
        if repo.private and not auth.ok:
            raise _repo_not_found(401)  # the Hub hides private repos behind the same answer as missing ones
        return repo

    def _check_namespace(self, namespace: str) -> None:
        if self.orgs is not None and namespace != self.user and namespace not in self.orgs:
            raise HubError(403, f"You don't have the rights to create a repo under the namespace {namespace}")

    @staticmethod
    def _store_regular(repo: Repo, path: str, data: bytes) -> StoredFile:
        blob_id = git_blob_sha1(data)
        repo.blobs[blob_id] = data
        return StoredFile(path, len(data), blob_id)

    @staticmethod
    def _lfs_entry(path: str, oid: str, size: int) -> StoredFile:
        pointer = lfs_pointer(oid, size)
        return StoredFile(path, size, git_blob_sha1(pointer), oid, len(pointer))

    def _new_commit(self, repo: Repo, parents: tuple[str, ...], title: str, message: str,
                    tree: dict[str, StoredFile]) -> str:
        material = json.dumps({
            "parents": parents, "title": title, "message": message,
            "tree": sorted((p, f.blob_id) for p, f in tree.items()),
        }).encode()
        oid = hashlib.sha1(material).hexdigest()
        repo.commits.setdefault(oid, Commit(oid, parents, title, message, self.user, _now(), dict(tree)))
        return oid

    def _sign(self, repo_type: str, repo_id: str, oid: str, size: int) -> str:
        return hmac.new(self._secret, f"{repo_type}:{repo_id}:{oid}:{size}".encode(), "sha256").hexdigest()

    def _web_prefix(self, repo: Repo) -> str:
        return f"{self.url}/{URL_PREFIXES[repo.repo_type]}{repo.repo_id}"


@dataclass
class _Auth:
    header: str | None
    ok: bool

    def require(self) -> None:
        if not self.ok:
            raise HubError(401, "You must be authenticated to access this resource")


# ------------------------------------------------------------------------------------------------------ HTTP layer

_T = r"(?P<t>models|datasets)"
_R = r"(?P<repo>[^/]+/[^/]+)"
_REV = r"(?P<rev>[^/]+)"
_WEB = r"/(?:(?P<prefix>datasets)/)?" + _R

_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), h) for m, p, h in [
        ("GET", r"^/api/whoami-v2$", "whoami"),
        ("POST", r"^/api/validate-yaml$", "validate_yaml"),
        ("POST", r"^/api/repos/create$", "create_repo"),
        ("DELETE", r"^/api/repos/delete$", "delete_repo"),
        ("PUT", rf"^/api/{_T}/{_R}/settings$", "settings"),
        ("GET", r"^/api/models$", "list_models"),
        ("GET", rf"^/api/{_T}/{_R}$", "info"),
        ("GET", rf"^/api/{_T}/{_R}/revision/{_REV}$", "info"),
        ("GET", rf"^/api/{_T}/{_R}/tree/{_REV}(?:/(?P<path>.*))?$", "tree"),
        ("POST", rf"^/api/{_T}/{_R}/paths-info/{_REV}$", "paths_info"),
        ("GET", rf"^/api/{_T}/{_R}/refs$", "refs"),
        ("GET", rf"^/api/{_T}/{_R}/commits/{_REV}$", "commits"),
        ("POST", rf"^/api/{_T}/{_R}/preupload/{_REV}$", "preupload"),
        ("POST", rf"^/api/{_T}/{_R}/commit/{_REV}$", "commit"),
        ("POST", rf"^/api/{_T}/{_R}/branch/(?P<branch>[^/]+)$", "create_branch"),
        ("DELETE", rf"^/api/{_T}/{_R}/branch/(?P<branch>[^/]+)$", "delete_branch"),
        ("GET", rf"^/api/{_T}/{_R}/xet-(?:read|write)-token/.*$", "xet"),
        ("POST", rf"^{_WEB}\.git/info/lfs/objects/batch$", "lfs_batch"),
        ("PUT", rf"^/_lfs/{_T}/{_R}/(?P<oid>[0-9a-f]{{64}})$", "lfs_put"),
        ("POST", rf"^/_lfs/{_T}/{_R}/(?P<oid>[0-9a-f]{{64}})/verify$", "lfs_verify"),
        ("GET", rf"^{_WEB}/resolve/{_REV}/(?P<path>.+)$", "resolve"),
        ("HEAD", rf"^{_WEB}/resolve/{_REV}/(?P<path>.+)$", "resolve"),
    ]
]


@dataclass
class _Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, payload: Any, status: int = 200, content_type: str = "application/json") -> _Response:
        return cls(status, json.dumps(payload).encode(), {"Content-Type": content_type})


class _HubHandler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"
    timeout = 60
    server_version = "TestHub/1.0"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: avoid 40 ms delayed-ACK stalls

    def setup(self) -> None:
        super().setup()
        with self.hub._lock:
            self.hub._connections.add(self.connection)

    def finish(self) -> None:
        with self.hub._lock:
            self.hub._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # plumbing

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self, method: str) -> None:
        hub = self.hub
        split = urlsplit(self.path)
        raw_path, path = split.path, unquote(split.path)
        body = self._read_body()
        record = RecordedRequest(
            method=method, path=path, query=parse_qs(split.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body if len(body) <= MAX_LOGGED_BODY else None, body_size=len(body),
        )
        with hub._lock:
            hub.requests.append(record)
            rule = next((r for r in hub.failures if r.matches(method, path)), None)
            if rule is not None:
                rule.hits += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
        try:
            if rule is not None:
                raise HubError(rule.status, rule.message, rule.error_code, rule.headers)
            response = self._dispatch(method, raw_path, record, body)
        except HubError as err:
            response = _Response.json({**err.extra, "error": err.message}, err.status)
            response.headers["X-Error-Message"] = err.message.replace("\n", " ")
            if err.error_code:
                response.headers["X-Error-Code"] = err.error_code
            response.headers.update(err.headers)
        except Exception as err:  # noqa: BLE001 - a bug in the fake should read as a 500, not a hung client
            response = _Response.json({"error": f"test hub crashed: {err!r}"}, 500)
        headers = {"Content-Length": str(len(response.body)), **response.headers}
        record.status, record.response_headers = response.status, headers
        if method != "HEAD" and len(response.body) <= MAX_LOGGED_BODY:
            record.response_body = response.body
        self._send(method, response.status, headers, response.body)

    def _send(self, method: str, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(body)

    def _dispatch(self, method: str, raw_path: str, record: RecordedRequest, body: bytes) -> _Response:
        auth = self._auth()
        path_matched = False
        for route_method, pattern, name in _ROUTES:
            m = pattern.match(raw_path)
            if m is None:
                continue
            path_matched = True
            if route_method != method:
                continue
            params = {k: unquote(v) for k, v in m.groupdict().items() if v is not None}
            if "t" in params:
                params["repo_type"] = API_TYPES[params.pop("t")]
            elif "repo" in params:
                params["repo_type"] = "dataset" if params.pop("prefix", None) == "datasets" else "model"
            with self.hub._lock:
                return getattr(self, f"_h_{name}")(auth=auth, record=record, body=body, **params)
        if path_matched:
            raise HubError(405, f"Method {method} not allowed on {record.path}")
        raise HubError(404, f"Test hub has no route for {method} {record.path}")

    def _auth(self) -> _Auth:
        header = self.headers.get("Authorization")
        if header is None:
            return _Auth(None, False)
        scheme, _, token = header.partition(" ")
        required = self.hub.required_token
        if scheme != "Bearer" or not token or (required is not None and token != required):
            raise HubError(401, INVALID_CREDENTIALS)
        return _Auth(header, True)

    @staticmethod
    def _json_body(body: bytes) -> dict:
        try:
            data = json.loads(body or b"{}")
        except json.JSONDecodeError as err:
            raise HubError(400, f"Invalid JSON body: {err}") from None
        if not isinstance(data, dict):
            raise HubError(400, "Expected a JSON object")
        return data

    # account and repos

    def _h_whoami(self, auth: _Auth, **_: Any) -> _Response:
        if not auth.ok:
            raise HubError(401, "Invalid username or password.")
        hub = self.hub
        return _Response.json({
            "type": "user", "id": hashlib.sha1(hub.user.encode()).hexdigest()[:24], "name": hub.user,
            "fullname": hub.user, "email": None, "emailVerified": False, "isPro": False, "canPay": False,
            "orgs": [{"type": "org", "name": org, "roleInOrg": "admin"} for org in hub.orgs or []],
            "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}},
        })

    def _h_validate_yaml(self, body: bytes, **_: Any) -> _Response:
        """create_commit sends a README.md's text here before uploading anything; only YAML syntax is checked."""
        import yaml

        content = self._json_body(body).get("content")
        if not isinstance(content, str):
            raise HubError(400, "Expected the README.md text in 'content'")
        match = re.match(r"^---\s*\n(.*?)\n---\s*$", content, re.DOTALL | re.MULTILINE)
        try:
            metadata = yaml.safe_load(match[1]) if match else {}
        except yaml.YAMLError as err:
            return _Response.json({"errors": [{"message": f"Invalid YAML: {err}"}], "warnings": []}, 400)
        if not isinstance(metadata, (dict, type(None))):
            return _Response.json({"errors": [{"message": "The metadata must be a YAML mapping"}], "warnings": []},
                                  400)
        return _Response.json({"errors": [], "warnings": []})

    def _repo_target(self, data: dict) -> tuple[str, str]:
        name, org = data.get("name"), data.get("organization")
        if not isinstance(name, str) or not _REPO_NAME.fullmatch(name):
            raise HubError(400, f"Invalid repo name: {name!r}")
        repo_type = data.get("type") or "model"
        if repo_type not in URL_PREFIXES:
            raise HubError(400, f"Unsupported repo type: {repo_type}")
        return repo_type, f"{org or self.hub.user}/{name}"

    def _h_create_repo(self, auth: _Auth, body: bytes, **_: Any) -> _Response:
        auth.require()
        data = self._json_body(body)
        repo_type, repo_id = self._repo_target(data)
        self.hub._check_namespace(repo_id.split("/")[0])
        private = data.get("visibility", "private" if data.get("private") else "public") == "private"
        url = f"{self.hub.url}/{URL_PREFIXES[repo_type]}{repo_id}"
        if self.hub.has_repo(repo_id, repo_type):
            # exist_ok=True makes the client read "url" from this 409 body.
            raise HubError(409, f"You already created this {repo_type} repo", extra={"url": url})
        repo = self.hub.create_repo(repo_id, private=private, repo_type=repo_type)
        return _Response.json({"url": url, "name": repo_id, "id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                               "private": repo.private})

    def _h_delete_repo(self, auth: _Auth, body: bytes, **_: Any) -> _Response:
        auth.require()
        repo_type, repo_id = self._repo_target(self._json_body(body))
        if self.hub._repos.pop((repo_type, repo_id), None) is None:
            raise _repo_not_found()
        return _Response()

    def _h_settings(self, auth: _Auth, body: bytes, repo_type: str, repo: str, **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth, write=True)
        data = self._json_body(body)
        if "visibility" in data:
            r.private = data["visibility"] == "private"
        elif "private" in data:
            r.private = bool(data["private"])
        return _Response.json({"private": r.private})

    def _h_info(self, auth: _Auth, record: RecordedRequest, repo_type: str, repo: str, rev: str = "main",
                **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth)
        oid = r.resolve(rev)
        if oid is None:
            raise _revision_not_found(rev)
        commit = r.commits[oid]
        with_blobs = record.query.get("blobs", ["false"])[-1].lower() in ("1", "true")
        siblings = []
        for path in sorted(commit.tree):
            f = commit.tree[path]
            sibling: dict[str, Any] = {"rfilename": path}
            if with_blobs:
                sibling.update(size=f.size, blobId=f.blob_id)
                if f.is_lfs:
                    sibling["lfs"] = {"size": f.size, "sha256": f.lfs_oid, "pointerSize": f.pointer_size}
            siblings.append(sibling)
        info: dict[str, Any] = {
            "_id": hashlib.sha1(repo.encode()).hexdigest()[:24], "id": repo, "author": repo.split("/")[0],
            "sha": oid, "lastModified": commit.date, "createdAt": r.created_at, "private": r.private,
            "disabled": False, "gated": False, "downloads": 0, "likes": 0, "siblings": siblings,
            **_card_fields(r, commit),
        }
        if repo_type == "model":
            info["modelId"] = repo
        if with_blobs:
            info["usedStorage"] = sum(f.size for f in commit.tree.values())
        return _Response.json(info)

    def _h_list_models(self, auth: _Auth, record: RecordedRequest, **_: Any) -> _Response:
        """`GET /api/models`: `author`, `search` (in the repo id, any case), `filter` (every one a tag of the repo,
        base_model:... included), `limit`, `full`/`cardData`/`expand`; pages of `page_size` with a Link header."""
        q = record.query
        author, search = q.get("author", [None])[-1], (q.get("search", [""])[-1] or "").lower()
        wanted = [t for value in q.get("filter", []) for t in value.split(",") if t]
        limit = q.get("limit", [""])[-1]
        full = any(q.get(k, ["false"])[-1].lower() in ("1", "true") for k in ("full", "cardData"))
        found = []
        for (repo_type, repo_id), r in sorted(self.hub._repos.items()):
            if repo_type != "model" or (r.private and not auth.ok):
                continue
            if author and repo_id.split("/")[0] != author or search and search not in repo_id.lower():
                continue
            commit = r.head("main")
            fields = _card_fields(r, commit)
            if any(tag not in fields["tags"] for tag in wanted):
                continue
            item: dict[str, Any] = {"_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24], "id": repo_id,
                                    "modelId": repo_id, "author": repo_id.split("/")[0], "sha": commit.oid,
                                    "lastModified": commit.date, "createdAt": r.created_at, "private": r.private,
                                    "downloads": 0, "likes": 0, "tags": fields["tags"]}
            if "library_name" in fields:
                item["library_name"] = fields["library_name"]
            if full:
                item["siblings"] = [{"rfilename": path} for path in sorted(commit.tree)]
                item["cardData"] = fields.get("cardData")
            found.append(item)
        if limit.isdigit():
            found = found[:int(limit)]
        start = int(q.get("cursor", ["0"])[-1] or 0)
        page = found[start:start + self.hub.page_size]
        headers = {"Content-Type": "application/json"}
        if start + self.hub.page_size < len(found):
            rest = [(k, v) for k, values in q.items() if k != "cursor" for v in values]
            rest.append(("cursor", str(start + self.hub.page_size)))
            headers["Link"] = f'<{self.hub.url}/api/models?{urlencode(rest)}>; rel="next"'
        return _Response(200, json.dumps(page).encode(), headers)

    # tree listings

    @staticmethod
    def _file_entry(f: StoredFile, commit: Commit | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": f.blob_id, "size": f.size, "path": f.path}
        if f.is_lfs:
            entry["lfs"] = {"oid": f.lfs_oid, "size": f.size, "pointerSize": f.pointer_size}
        if commit is not None:
            entry["lastCommit"] = {"id": commit.oid, "title": commit.title, "date": commit.date}
        return entry

    @staticmethod
    def _dir_entry(tree: dict[str, StoredFile], path: str, commit: Commit | None = None) -> dict[str, Any]:
        listing = sorted((p, f.blob_id) for p, f in tree.items() if p.startswith(path + "/"))
        entry: dict[str, Any] = {"type": "directory", "oid": hashlib.sha1(json.dumps(listing).encode()).hexdigest(),
                                 "size": 0, "path": path}
        if commit is not None:
            entry["lastCommit"] = {"id": commit.oid, "title": commit.title, "date": commit.date}
        return entry

    @staticmethod
    def _dirs(tree: dict[str, StoredFile]) -> set[str]:
        return {"/".join(p.split("/")[:i]) for p in tree for i in range(1, p.count("/") + 1)}

    def _resolved_commit(self, auth: _Auth, repo_type: str, repo: str, rev: str) -> tuple[Repo, Commit]:
        r = self.hub._get_repo(repo_type, repo, auth)
        oid = r.resolve(rev)
        if oid is None:
            raise _revision_not_found(rev)
        return r, r.commits[oid]

    def _h_tree(self, auth: _Auth, record: RecordedRequest, repo_type: str, repo: str, rev: str,
                path: str = "", **_: Any) -> _Response:
        _, commit = self._resolved_commit(auth, repo_type, repo, rev)
        tree, dirs = commit.tree, self._dirs(commit.tree)
        path = path.strip("/")
        recursive = record.query.get("recursive", ["false"])[-1].lower() in ("1", "true")
        expand = record.query.get("expand", ["false"])[-1].lower() in ("1", "true")
        if path and path not in dirs:
            if path in tree:
                raise HubError(400, f"{path} is a file, not a directory")
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        prefix = path + "/" if path else ""

        def wanted(p: str) -> bool:
            return p.startswith(prefix) and (recursive or "/" not in p[len(prefix):])

        last = commit if expand else None
        entries = [self._dir_entry(tree, d, last) for d in sorted(dirs) if wanted(d)]
        entries += [self._file_entry(tree[p], last) for p in sorted(tree) if wanted(p)]
        return _Response.json(entries)

    def _h_paths_info(self, auth: _Auth, body: bytes, repo_type: str, repo: str, rev: str, **_: Any) -> _Response:
        _, commit = self._resolved_commit(auth, repo_type, repo, rev)
        form = parse_qs(body.decode(), keep_blank_values=True)
        paths = form.get("paths", [])
        expand = form.get("expand", ["false"])[-1].lower() in ("1", "true")
        dirs, last = self._dirs(commit.tree), commit if expand else None
        out = []
        for p in paths:
            p = p.strip("/")
            if p in commit.tree:
                out.append(self._file_entry(commit.tree[p], last))
            elif p in dirs:
                out.append(self._dir_entry(commit.tree, p, last))
        return _Response.json(out)

    def _h_refs(self, auth: _Auth, record: RecordedRequest, repo_type: str, repo: str, **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth)
        refs: dict[str, Any] = {
            "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": o} for n, o in sorted(r.branches.items())],
            "converts": [],
            "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": o} for n, o in sorted(r.tags.items())],
        }
        if record.query.get("include_prs", ["0"])[-1] in ("1", "true", "True"):
            refs["pullRequests"] = [{"name": f"refs/pr/{n}", "ref": f"refs/pr/{n}", "targetCommit": o}
                                    for n, o in sorted(r.pull_requests.items())]
        return _Response.json(refs)

    def _h_commits(self, auth: _Auth, repo_type: str, repo: str, rev: str, **_: Any) -> _Response:
        r, commit = self._resolved_commit(auth, repo_type, repo, rev)
        history = []
        current: Commit | None = commit
        while current is not None:
            history.append({"id": current.oid, "title": current.title, "message": current.message,
                            "authors": [{"user": current.author}], "date": current.date})
            current = r.commits[current.parents[0]] if current.parents else None
        return _Response.json(history)

    def _h_create_branch(self, auth: _Auth, body: bytes, repo_type: str, repo: str, branch: str,
                         **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth, write=True)
        if branch in r.branches:
            raise HubError(409, f"Reference refs/heads/{branch} already exists")
        start = self._json_body(body).get("startingPoint") or "main"
        oid = r.resolve(start)
        if oid is None:
            raise _revision_not_found(start)
        r.branches[branch] = oid
        return _Response.json({})

    def _h_delete_branch(self, auth: _Auth, repo_type: str, repo: str, branch: str, **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth, write=True)
        if branch == "main":
            raise HubError(403, "Cannot delete the default branch")
        if r.branches.pop(branch, None) is None:
            raise _revision_not_found(branch)
        return _Response()

    def _h_xet(self, **_: Any) -> _Response:
        raise HubError(501, "The test hub does not support Xet storage; run the client with HF_HUB_DISABLE_XET=1")

    # committing

    def _h_preupload(self, auth: _Auth, body: bytes, repo_type: str, repo: str, rev: str, **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth, write=True)
        oid = r.resolve(rev)
        if oid is None:
            raise _revision_not_found(rev)
        tree = r.commits[oid].tree
        files = self._json_body(body).get("files")
        if not isinstance(files, list):
            raise HubError(400, "Expected 'files' to be a list")
        answers = []
        for item in files:
            path, size = item.get("path"), item.get("size")
            if not isinstance(path, str) or not isinstance(size, int):
                raise HubError(400, f"Malformed preupload entry: {item!r}")
            sample = base64.b64decode(item.get("sample") or "")
            mode = "lfs" if wants_lfs(path, size, sample) else "regular"
            answer: dict[str, Any] = {"path": path, "uploadMode": mode, "shouldIgnore": False}
            if path in tree:
                # The client compares this with its own oid to skip unchanged files: sha256 for LFS, git sha1 else.
                answer["oid"] = tree[path].lfs_oid if mode == "lfs" else tree[path].blob_id
            answers.append(answer)
        return _Response.json({"files": answers, "commitOid": oid})

    def _h_commit(self, auth: _Auth, record: RecordedRequest, body: bytes, repo_type: str, repo: str, rev: str,
                  **_: Any) -> _Response:
        hub = self.hub
        r = hub._get_repo(repo_type, repo, auth, write=True)
        create_pr = record.query.get("create_pr", ["0"])[-1] in ("1", "true", "True")
        try:
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            raise HubError(400, f"Invalid ndjson payload: {err}") from None
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first ndjson line must be the commit header")
        header = lines[0].get("value") or {}
        title = header.get("summary")
        if not isinstance(title, str) or not title:
            raise HubError(400, "Commit summary is required")

        base_oid = r.resolve(rev)
        if base_oid is None:
            raise _revision_not_found(rev)
        if not create_pr and rev not in r.branches and not re.fullmatch(r"refs/pr/\d+", rev):
            raise HubError(400, f"Cannot commit to {rev}: not a branch or pull request ref")
        parent = header.get("parentCommit")
        if parent is not None and parent != base_oid:
            raise HubError(412, f"Parent commit {parent} is not the head of {rev} ({base_oid})")

        tree = dict(r.commits[base_oid].tree)
        staged_blobs: dict[str, bytes] = {}
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value") or {}
            path = value.get("path")
            if not isinstance(path, str) or not path or path.startswith("/"):
                raise HubError(400, f"Invalid path in {key} operation: {path!r}")
            if key == "file":
                if value.get("encoding", "base64") != "base64":
                    raise HubError(400, f"Unsupported encoding for {path}")
                data = base64.b64decode(value.get("content", ""))
                if wants_lfs(path, len(data), data[:512]):
                    raise HubError(400, f"Your push was rejected: {path} must be stored with LFS")
                blob_id = git_blob_sha1(data)
                staged_blobs[blob_id] = data
                tree[path] = StoredFile(path, len(data), blob_id)
            elif key == "lfsFile":
                oid = value.get("oid")
                if value.get("algo", "sha256") != "sha256" or oid not in r.lfs_objects:
                    raise HubError(400, f"Your push was rejected because an LFS pointer for {path} points to an "
                                        f"object that was not uploaded: {oid}")
                size = len(r.lfs_objects[oid])
                if value.get("size") not in (None, size):
                    raise HubError(400, f"LFS object {oid} has size {size}, not {value.get('size')}")
                tree[path] = hub._lfs_entry(path, oid, size)
            elif key == "deletedFile":
                if tree.pop(path, None) is None:
                    raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            elif key == "deletedFolder":
                folder = path.rstrip("/") + "/"
                doomed = [p for p in tree if p.startswith(folder)]
                if not doomed:
                    raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                for p in doomed:
                    del tree[p]
            else:
                raise HubError(400, f"Unknown commit operation {key!r}")

        r.blobs.update(staged_blobs)
        oid = hub._new_commit(r, (base_oid,), title, header.get("description") or "", tree)
        pr_url = None
        if create_pr:
            number = max(r.pull_requests, default=0) + 1
            r.pull_requests[number] = oid
            pr_url = f"{hub._web_prefix(r)}/discussions/{number}"
        elif rev in r.branches:
            r.branches[rev] = oid
        else:
            r.pull_requests[int(rev.rsplit("/", 1)[1])] = oid
        return _Response.json({"success": True, "commitOid": oid, "commitUrl": f"{hub._web_prefix(r)}/commit/{oid}",
                               "hookOutput": "", "pullRequestUrl": pr_url})

    # LFS

    def _h_lfs_batch(self, auth: _Auth, body: bytes, repo_type: str, repo: str, **_: Any) -> _Response:
        hub = self.hub
        r = hub._get_repo(repo_type, repo, auth, write=True)
        data = self._json_body(body)
        if data.get("operation") != "upload":
            raise HubError(422, f"Unsupported LFS operation: {data.get('operation')!r}")
        if "basic" not in (data.get("transfers") or ["basic"]):
            raise HubError(422, "The test hub only offers the 'basic' LFS transfer")
        api_type = f"{repo_type}s"
        objects = []
        for obj in data.get("objects") or []:
            oid, size = obj.get("oid"), obj.get("size")
            if not isinstance(oid, str) or not _HEX64.fullmatch(oid) or not isinstance(size, int) or size < 0:
                objects.append({"oid": str(oid), "size": size if isinstance(size, int) else 0,
                                "error": {"code": 422, "message": "Invalid object"}})
                continue
            answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if oid not in r.lfs_objects:
                # No Authorization is sent with the PUT (it normally goes to a presigned S3 URL) => sign the URL.
                sig = hub._sign(repo_type, repo, oid, size)
                base = f"{hub.url}/_lfs/{api_type}/{repo}/{oid}"
                answer["actions"] = {
                    "upload": {"href": f"{base}?size={size}&sig={sig}", "expires_in": 3600},
                    "verify": {"href": f"{base}/verify", "expires_in": 3600},
                }
            objects.append(answer)
        return _Response.json({"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
                              content_type="application/vnd.git-lfs+json")

    def _h_lfs_put(self, record: RecordedRequest, body: bytes, repo_type: str, repo: str, oid: str,
                   **_: Any) -> _Response:
        hub = self.hub
        size = record.query.get("size", [""])[-1]
        sig = record.query.get("sig", [""])[-1]
        if not size.isdigit() or not hmac.compare_digest(sig, hub._sign(repo_type, repo, oid, int(size))):
            raise HubError(403, "Invalid or missing upload signature")
        r = hub._repos.get((repo_type, repo))
        if r is None:
            raise _repo_not_found()
        if len(body) != int(size) or hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, f"Uploaded content does not match oid {oid} and size {size}")
        r.lfs_objects[oid] = body
        return _Response(200, b"", {"ETag": f'"{hashlib.md5(body).hexdigest()}"'})

    def _h_lfs_verify(self, auth: _Auth, body: bytes, repo_type: str, repo: str, oid: str, **_: Any) -> _Response:
        r = self.hub._get_repo(repo_type, repo, auth, write=True)
        data = self._json_body(body)
        if data.get("oid") != oid or oid not in r.lfs_objects:
            raise HubError(404, f"LFS object {oid} not found")
        if data.get("size") != len(r.lfs_objects[oid]):
            raise HubError(422, f"LFS object {oid} has size {len(r.lfs_objects[oid])}")
        return _Response.json({"success": True})

    # downloads

    def _h_resolve(self, auth: _Auth, repo_type: str, repo: str, rev: str, path: str, **_: Any) -> _Response:
        r, commit = self._resolved_commit(auth, repo_type, repo, rev)
        f = commit.tree.get(path)
        if f is None:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.oid})
        data = r.content(f)
        headers = {
            "Content-Type": "application/octet-stream",
            "X-Repo-Commit": commit.oid,
            "ETag": f'"{f.etag}"',
            "Accept-Ranges": "bytes",
            "Content-Disposition": f"inline; filename*=UTF-8''{quote(path.rsplit('/', 1)[-1])}",
        }
        if f.is_lfs:
            headers["X-Linked-Etag"] = f'"{f.lfs_oid}"'
            headers["X-Linked-Size"] = str(f.size)
        status = 200
        if (m := re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "").strip())) is not None:
            start = int(m[1])
            end = min(int(m[2]) if m[2] else len(data) - 1, len(data) - 1)
            if start >= len(data) > 0:
                raise HubError(416, "Requested range not satisfiable", headers={"Content-Range": f"bytes */{len(data)}"})
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start:end + 1], 206
        return _Response(status, data, headers)


# --------------------------------------------------------------------------------------------------- pytest glue


def isolate_hf_client(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Point `huggingface_hub` away from the user's cache, token and any proxy, and turn Xet off.

    Several of these settings are read once, when `huggingface_hub.constants` is imported, so setting the
    environment alone is not enough: the module attributes are patched too.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    home.mkdir(parents=True, exist_ok=True)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    # Telemetry off also stops the client fetching its agent registry from the import-time endpoint.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    # The shared httpx client may predate NO_PROXY; a fresh one is built on next use.
    _http.close_session()


@contextmanager
def isolated_hub(monkeypatch: pytest.MonkeyPatch, home: Path, **server_options: Any) -> Iterator[HubServer]:
    """A started HubServer (options as for HubServer) with the client isolated by `isolate_hf_client`.

    Wrap it in a fixture where needed::

        @pytest.fixture
        def hub(monkeypatch, tmp_path):
            with isolated_hub(monkeypatch, tmp_path / "hf-home") as server:
                yield server
    """
    isolate_hf_client(monkeypatch, home)
    with HubServer(**server_options) as server:
        yield server
