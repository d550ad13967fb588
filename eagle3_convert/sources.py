"""Where a drafter or a target comes from: a local path, or a Hub repo id resolved to a snapshot in the
standard HF cache. The repo-id rules, downloads, and how a Hub failure reads (one line, fast when the Hub
is unreachable). Publishing is publish.py's; huggingface_hub itself is hub_client.py's.
"""

from __future__ import annotations

import os
import re
import threading
from difflib import get_close_matches
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from . import hub_client
from .converters.base import read_json_file
from .errors import Eagle3Error, FormatError, UsageError

REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# What a drafter needs; never optimizer states, training logs or other large strays.
DRAFTER_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json", "eagle3-convert.json",
                 "generation_config.json", "hf_quant_config.json", "README.md")
BIN_FILES = ("pytorch_model.bin", "pytorch_model-*.bin", "pytorch_model.bin.index.json")
# A GGUF drafter repo (llama.cpp) has no config.json: its one unquantized eagle3-*.gguf is read.
GGUF_FILES = ("eagle3-*-BF16.gguf", "eagle3-*-F16.gguf", "eagle3-*-F32.gguf")


# How long the Hub may take to answer at all before it counts as unreachable (huggingface_hub would
# otherwise retry a refused connection for ~24 s, logging each retry).
REACH_TIMEOUT_S = 2.5


class HubError(Eagle3Error):
    code = "E-HUB"

    def __init__(self, message: str, hint: str | None = None, code: str | None = None, reading: str | None = None):
        super().__init__(message, hint, code)
        self.reading = reading or message  # what the Hub said, without "<action> <repo>: "


def _hub_error(action: str, repo_id: str, reading: str, hint: str, code: str) -> HubError:
    return HubError(f"{action} {repo_id}: {reading}", hint, code=code, reading=reading)


def has_repo_id_shape(spec: str) -> bool:
    """`org/name`: one slash, no leading `.`, `/` or `~`, no `..`."""
    return bool(REPO_ID_RE.match(spec)) and ".." not in spec


def looks_local(spec: str) -> bool:
    """A path, never sent to the Hub: it exists, starts with `.`, `/` or `~`, or has more separators
    than `org/name` (or a backslash)."""
    return os.path.lexists(os.path.expanduser(spec)) or not has_repo_id_shape(spec)


def is_repo_id(spec: str) -> bool:
    """`org/name` that is not a local path: the only strings the Hub is asked about."""
    return not looks_local(spec)


def endpoint_from_env(endpoint: str | None) -> str | None:
    # huggingface_hub reads HF_ENDPOINT at import time only; pass it explicitly on every call.
    return endpoint or os.environ.get("HF_ENDPOINT") or None


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def hub_url(endpoint: str | None) -> str:
    return (endpoint_from_env(endpoint) or hub_client.default_endpoint() or "https://huggingface.co").rstrip("/")


def unreachable(endpoint: str | None) -> str | None:
    """Why the Hub at `endpoint` cannot be reached (None: it answers), bounded by REACH_TIMEOUT_S whatever
    DNS or the network do. Any HTTP answer, even an error status, counts as reachable."""
    url = hub_url(endpoint)

    outcome: dict[str, str | None] = {}

    def ask() -> None:
        try:
            hub_client.session().head(f"{url}/", timeout=REACH_TIMEOUT_S, follow_redirects=False)
            outcome["why"] = None
        except Exception as exc:  # httpx/requests transport errors: refused, DNS, TLS, timeout
            text = " ".join(str(exc).split())[:160]
            outcome["why"] = f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    worker = threading.Thread(target=ask, name="eagle3-hub-probe", daemon=True)
    worker.start()
    worker.join(REACH_TIMEOUT_S + 0.3)
    return outcome["why"] if "why" in outcome else f"no answer within {REACH_TIMEOUT_S:g} s"


def unreachable_error(action: str, repo_id: str, endpoint: str | None, why: str) -> HubError:
    return _hub_error(action, repo_id, f"the Hub at {hub_url(endpoint)} is unreachable ({why})",
                      "check the network, and --endpoint or HF_ENDPOINT", "E-HUB-OFFLINE")


def hub_error(exc: Exception, repo_id: str, action: str, endpoint: str | None = None) -> HubError:
    """One line with a hint for any huggingface_hub or network failure."""
    hf_errors = hub_client.errors()
    status = getattr(getattr(exc, "response", None), "status_code", None)
    name = type(exc).__name__

    def err(reading: str, hint: str, code: str) -> HubError:
        return _hub_error(action, repo_id, reading, hint, code)

    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return err("revision not found", "check --revision (a branch, tag or commit)", "E-HUB-REVISION")
    if isinstance(exc, (hf_errors.RepositoryNotFoundError, hf_errors.GatedRepoError)) or status in (401, 403):
        if status == 403 or isinstance(exc, hf_errors.GatedRepoError):
            return err("access denied (HTTP 403)",
                       "your token lacks permission for this repo: request access or use a write token",
                       "E-HUB-FORBIDDEN")
        return err(f"repository not found or not authorized (HTTP {status or 401})",
                   "check the repo id, and log in (`hf auth login`, HF_TOKEN or --token) for private repos",
                   "E-HUB-AUTH")
    # LocalEntryNotFoundError subclasses EntryNotFoundError: a cache miss offline is not a 404.
    if isinstance(exc, hf_errors.LocalEntryNotFoundError) or isinstance(exc, OSError) and not status:
        if hub_offline():
            return err("not in the Hugging Face cache, and HF_HUB_OFFLINE is set",
                       "download it once with the network on, or unset HF_HUB_OFFLINE", "E-HUB-OFFLINE")
        return err(f"the Hub at {hub_url(endpoint)} is unreachable and nothing is cached ({name})",
                   "check the network, and --endpoint or HF_ENDPOINT", "E-HUB-OFFLINE")
    if isinstance(exc, hf_errors.EntryNotFoundError) or status == 404:
        return err("file or repo not found (HTTP 404)", "check the repo id and revision", "E-HUB-NOTFOUND")
    if status == 409:
        return err("conflict (HTTP 409)", "the branch moved or a PR is pending: retry, or use --create-pr",
                   "E-HUB-CONFLICT")
    if status:
        return err(f"the Hub answered HTTP {status}", "retry later; if it persists, check the Hub status page",
                   "E-HUB-HTTP")
    return err(f"{name}: {str(exc).splitlines()[0][:200] if str(exc) else 'failed'}",
               "check the network, HF_ENDPOINT and your token", "E-HUB")


def chosen_gguf(siblings: list[str]) -> str | None:
    """The drafter GGUF of a repo without config.json or safetensors: `eagle3-<name>-<TYPE>.gguf` (BF16 before
    F16 before F32; quantized files cannot be read back), else its only .gguf; None if neither."""
    top = [s for s in siblings if "/" not in s]
    if "config.json" in top or any(s.endswith(".safetensors") for s in top):
        return None
    for pattern in GGUF_FILES:
        found = sorted(s for s in top if fnmatch(s, pattern))
        if found:
            return found[0]
    ggufs = [s for s in top if s.endswith(".gguf")]
    return ggufs[0] if len(ggufs) == 1 else None


def _choose_files(siblings: list[str]) -> list[str]:
    has_st = any(s.endswith(".safetensors") for s in siblings)
    gguf = chosen_gguf(siblings)
    if gguf is not None:
        return [gguf, *(s for s in siblings if s in ("eagle3-convert.json", "README.md"))]
    patterns = DRAFTER_FILES + (() if has_st else BIN_FILES)
    return [s for s in siblings if "/" not in s and any(fnmatch(s, p) for p in patterns)]


def download(repo_id: str, revision: str | None = None, *, endpoint: str | None = None, token: str | None = None,
             cache_dir: str | None = None, files: tuple[str, ...] | None = None) -> tuple[Path, str | None]:
    """Snapshot only the files a drafter needs (or those matching `files`); returns (local dir, commit sha).
    Works offline from cache."""
    endpoint = endpoint_from_env(endpoint)
    offline = hub_offline()
    why = None if offline else unreachable(endpoint)
    try:
        with hub_client.quiet():
            if offline or why:
                try:
                    path = Path(hub_client.snapshot_download(repo_id, revision=revision, cache_dir=cache_dir,
                                                  local_files_only=True,
                                                  allow_patterns=list(files or DRAFTER_FILES + BIN_FILES + GGUF_FILES)))
                except Exception:
                    if why:  # nothing cached either: the reason is the Hub, not the cache
                        raise unreachable_error("downloading", repo_id, endpoint, why) from None
                    raise
                # The cache names each snapshot folder by its commit sha.
                return path, path.name if re.fullmatch(r"[0-9a-f]{40}", path.name) else None
            api = hub_client.api(endpoint, token)
            info = api.model_info(repo_id, revision=revision)
            chosen = list(files) if files else _choose_files([s.rfilename for s in info.siblings or []])
            path = hub_client.snapshot_download(repo_id, revision=info.sha or revision, endpoint=endpoint, token=token,
                                     cache_dir=cache_dir, allow_patterns=chosen)
            _remember_ref(Path(path), revision or "main", info.sha)
            return Path(path), info.sha
    except HubError:
        raise
    except Exception as exc:  # huggingface_hub raises assorted transport errors (httpx, requests)
        raise hub_error(exc, repo_id, "downloading", endpoint) from None


def _remember_ref(snapshot: Path, revision: str, sha: str | None) -> None:
    """Downloaded by commit, the cache records no branch: name it (refs/<revision>, as huggingface_hub does
    for a download by branch), so the copy is found again when the Hub is unreachable or HF_HUB_OFFLINE is set."""
    if not sha or revision == sha or snapshot.name != sha or snapshot.parent.name != "snapshots":
        return
    ref = snapshot.parent.parent / "refs" / revision
    try:
        ref.parent.mkdir(parents=True, exist_ok=True)
        if not ref.is_file() or ref.read_text().strip() != sha:
            ref.write_text(sha)
    except OSError:  # a read-only cache costs only the offline fallback
        pass


def fetch_config(repo_id: str, revision: str | None = None, *, endpoint: str | None = None,
                 token: str | None = None) -> tuple[dict[str, Any], str | None]:
    """A repo's config.json alone (a target model's weights are never needed)."""
    endpoint = endpoint_from_env(endpoint)
    why = None if hub_offline() else unreachable(endpoint)
    try:
        with hub_client.quiet():
            path = hub_client.file_download(repo_id, "config.json", revision=revision, endpoint=endpoint, token=token,
                                   local_files_only=bool(why))
    except Exception as exc:
        if why:
            raise unreachable_error("fetching config.json of", repo_id, endpoint, why) from None
        raise hub_error(exc, repo_id, "fetching config.json of", endpoint) from None
    commit = Path(path).parent.name if len(Path(path).parent.name) == 40 else None
    return read_json_file(Path(path), f"{repo_id}/config.json"), commit


def resolve_source(spec: str, revision: str | None = None, *, endpoint: str | None = None, token: str | None = None,
                   files: tuple[str, ...] | None = None, label: str | None = None) -> tuple[Path, str | None]:
    """A local directory as is, or a Hub repo id downloaded to the HF cache (a drafter's files, or those matching
    `files`); (path, commit or None).

    A local-looking `spec` (see looks_local) is never sent to the Hub. A repo-id-shaped one that is not
    on disk is asked of the Hub, and a failure says both readings, naming the spec as `label` (default: itself)."""
    if os.path.lexists(os.path.expanduser(spec)):
        return Path(os.path.expanduser(spec)), None
    missing, typo = no_such_directory(spec)
    if not is_repo_id(spec):
        raise FormatError(f"{spec}: {missing}", "check the path (a Hub repo id is written ORG/NAME)",
                          code="E-SRC-MISSING")
    try:
        return download(spec, revision, endpoint=endpoint, token=token, files=files)
    except HubError as exc:
        error = both_readings(label or spec, missing, exc)
        if typo:  # its folder is here: a local path mistyped, far likelier than a repo the Hub could not give
            error.code, error.hint = "E-SRC-MISSING", f"check the path (for the Hub repo: {exc.hint})"
        raise error from None


def no_such_directory(spec: str) -> tuple[str, bool]:
    """'no such directory', naming the nearest directory beside it where its parent exists (then most likely a
    mistyped local path: the second value)."""
    path = Path(os.path.expanduser(spec.rstrip("/")))
    parent = path.parent
    if str(parent) in ("", ".") or not parent.is_dir():
        return "no such directory", False
    try:
        beside = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return "no such directory", True
    near = get_close_matches(path.name, beside, n=1)
    return f"no such directory{f' (did you mean {parent / near[0]}?)' if near else f' in {parent}'}", True


def both_readings(spec: str, local: str, exc: HubError) -> HubError:
    """`scratch/nope: no such directory; as a Hub repo id: <the Hub's answer>`."""
    return HubError(f"{spec}: {local}; as a Hub repo id: {exc.reading}",
                    f"{exc.hint}; if you meant a local path, check it",
                    code=exc.code, reading=exc.reading)


def check_repo_id(repo_id: str) -> str:
    if not REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise UsageError(f"{repo_id!r} is not a Hub repo id", "give the destination as ORG/NAME, e.g. "
                         "my-org/Llama-3.1-8B-eagle3")
    return repo_id
