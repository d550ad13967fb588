"""The Hugging Face Hub: resolve repo ids to local snapshots (standard HF cache).

huggingface_hub is imported inside functions: most commands never touch the Hub, and its
import costs more than the rest of the CLI start-up.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .errors import Eagle3Error, FormatError

REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# What a drafter needs; never optimizer states, training logs or other large strays.
DRAFTER_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json", "eagle3-convert.json",
                 "generation_config.json", "hf_quant_config.json", "README.md")
BIN_FILES = ("pytorch_model.bin", "pytorch_model-*.bin", "pytorch_model.bin.index.json")


class HubError(Eagle3Error):
    code = "E-HUB"


def is_repo_id(spec: str) -> bool:
    """`org/name` that is not an existing local path."""
    return bool(REPO_ID_RE.match(spec)) and not Path(spec).exists() and ".." not in spec


def endpoint_from_env(endpoint: str | None) -> str | None:
    # huggingface_hub reads HF_ENDPOINT at import time only; pass it explicitly on every call.
    return endpoint or os.environ.get("HF_ENDPOINT") or None


def hub_error(exc: Exception, repo_id: str, action: str) -> HubError:
    """One line with a hint for any huggingface_hub or network failure."""
    from huggingface_hub import errors as hf_errors

    status = getattr(getattr(exc, "response", None), "status_code", None)
    name = type(exc).__name__
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubError(f"{action} {repo_id}: revision not found", "check --revision (a branch, tag or commit)",
                        code="E-HUB-REVISION")
    if isinstance(exc, (hf_errors.RepositoryNotFoundError, hf_errors.GatedRepoError)) or status in (401, 403):
        if status == 403 or isinstance(exc, hf_errors.GatedRepoError):
            return HubError(f"{action} {repo_id}: access denied (HTTP 403)",
                            "your token lacks permission for this repo: request access or use a write token",
                            code="E-HUB-FORBIDDEN")
        return HubError(f"{action} {repo_id}: repository not found or not authorized (HTTP {status or 401})",
                        "check the repo id, and log in (`hf auth login`, HF_TOKEN or --token) for private repos",
                        code="E-HUB-AUTH")
    # LocalEntryNotFoundError subclasses EntryNotFoundError: a cache miss offline is not a 404.
    if isinstance(exc, hf_errors.LocalEntryNotFoundError) or isinstance(exc, OSError) and not status:
        return HubError(f"{action} {repo_id}: the Hub is unreachable and nothing is cached ({name})",
                        "check the network or HF_ENDPOINT; offline, download it first or unset HF_HUB_OFFLINE",
                        code="E-HUB-OFFLINE")
    if isinstance(exc, hf_errors.EntryNotFoundError) or status == 404:
        return HubError(f"{action} {repo_id}: file or repo not found (HTTP 404)", "check the repo id and revision",
                        code="E-HUB-NOTFOUND")
    if status == 409:
        return HubError(f"{action} {repo_id}: conflict (HTTP 409)",
                        "the branch moved or a PR is pending: retry, or use --create-pr", code="E-HUB-CONFLICT")
    if status:
        return HubError(f"{action} {repo_id}: the Hub answered HTTP {status}",
                        "retry later; if it persists, check the Hub status page", code="E-HUB-HTTP")
    return HubError(f"{action} {repo_id}: {name}: {str(exc).splitlines()[0][:200] if str(exc) else 'failed'}",
                    "check the network, HF_ENDPOINT and your token", code="E-HUB")


def _choose_files(siblings: list[str]) -> list[str]:
    from fnmatch import fnmatch

    has_st = any(s.endswith(".safetensors") for s in siblings)
    patterns = DRAFTER_FILES + (() if has_st else BIN_FILES)
    return [s for s in siblings if "/" not in s and any(fnmatch(s, p) for p in patterns)]


def download(repo_id: str, revision: str | None = None, *, endpoint: str | None = None,
             token: str | None = None, cache_dir: str | None = None) -> tuple[Path, str | None]:
    """Snapshot only the files a drafter needs; returns (local dir, commit sha). Works offline from cache."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.utils import HfHubHTTPError

    endpoint = endpoint_from_env(endpoint)
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    try:
        if offline:
            path = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=True,
                                     allow_patterns=list(DRAFTER_FILES + BIN_FILES))
            return Path(path), None
        api = HfApi(endpoint=endpoint, token=token)
        info = api.model_info(repo_id, revision=revision)
        files = _choose_files([s.rfilename for s in info.siblings or []])
        path = snapshot_download(repo_id, revision=info.sha or revision, endpoint=endpoint, token=token,
                                 cache_dir=cache_dir, allow_patterns=files)
        return Path(path), info.sha
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise hub_error(exc, repo_id, "downloading") from None
    except Exception as exc:  # huggingface_hub raises assorted transport errors (httpx, requests)
        raise hub_error(exc, repo_id, "downloading") from None


def fetch_config(repo_id: str, revision: str | None = None, *, endpoint: str | None = None,
                 token: str | None = None) -> tuple[dict[str, Any], str | None]:
    """A repo's config.json alone (a target model's weights are never needed)."""
    from huggingface_hub import hf_hub_download

    from .converters.base import read_json_file

    try:
        path = hf_hub_download(repo_id, "config.json", revision=revision, endpoint=endpoint_from_env(endpoint),
                               token=token)
    except Exception as exc:
        raise hub_error(exc, repo_id, "fetching config.json of") from None
    commit = Path(path).parent.name if len(Path(path).parent.name) == 40 else None
    return read_json_file(Path(path), f"{repo_id}/config.json"), commit


def resolve_source(spec: str, revision: str | None = None, *, endpoint: str | None = None,
                   token: str | None = None) -> tuple[Path, str | None]:
    """A local directory as is, or a Hub repo id downloaded to the HF cache; (path, commit or None)."""
    path = Path(spec)
    if path.exists():
        return path, None
    if is_repo_id(spec):
        return download(spec, revision, endpoint=endpoint, token=token)
    raise FormatError(f"{spec}: no such directory, and not a Hub repo id (org/name)",
                      "pass a checkpoint directory or a Hub repo id", code="E-SRC-MISSING")
