"""The Hugging Face Hub: resolve repo ids to local snapshots (standard HF cache).

huggingface_hub is imported inside functions: most commands never touch the Hub, and its
import costs more than the rest of the CLI start-up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import sidecar
from .errors import Eagle3Error, FormatError, UsageError
from .sidecar import SIDECAR_NAME

REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# What a drafter needs; never optimizer states, training logs or other large strays.
DRAFTER_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json", "eagle3-convert.json",
                 "generation_config.json", "hf_quant_config.json", "README.md")
BIN_FILES = ("pytorch_model.bin", "pytorch_model-*.bin", "pytorch_model.bin.index.json")


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
    from huggingface_hub import constants

    return (endpoint_from_env(endpoint) or constants.ENDPOINT or "https://huggingface.co").rstrip("/")


def unreachable(endpoint: str | None) -> str | None:
    """Why the Hub at `endpoint` cannot be reached (None: it answers), bounded by REACH_TIMEOUT_S whatever
    DNS or the network do. Any HTTP answer, even an error status, counts as reachable."""
    import threading

    from huggingface_hub.utils import get_session

    url = hub_url(endpoint)

    outcome: dict[str, str | None] = {}

    def ask() -> None:
        try:
            get_session().head(f"{url}/", timeout=REACH_TIMEOUT_S, follow_redirects=False)
            outcome["why"] = None
        except Exception as exc:  # httpx/requests transport errors: refused, DNS, TLS, timeout
            text = " ".join(str(exc).split())[:160]
            outcome["why"] = f"{type(exc).__name__}: {text}" if text else type(exc).__name__

    worker = threading.Thread(target=ask, name="eagle3-hub-probe", daemon=True)
    worker.start()
    worker.join(REACH_TIMEOUT_S + 0.3)
    return outcome["why"] if "why" in outcome else f"no answer within {REACH_TIMEOUT_S:g} s"


@contextmanager
def quiet_hub() -> Iterator[None]:
    """huggingface_hub logs every retry as a warning; our one error line says what happened."""
    import logging

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def unreachable_error(action: str, repo_id: str, endpoint: str | None, why: str) -> HubError:
    return _hub_error(action, repo_id, f"the Hub at {hub_url(endpoint)} is unreachable ({why})",
                      "check the network, and --endpoint or HF_ENDPOINT", "E-HUB-OFFLINE")


def hub_error(exc: Exception, repo_id: str, action: str, endpoint: str | None = None) -> HubError:
    """One line with a hint for any huggingface_hub or network failure."""
    from huggingface_hub import errors as hf_errors

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


def _choose_files(siblings: list[str]) -> list[str]:
    from fnmatch import fnmatch

    has_st = any(s.endswith(".safetensors") for s in siblings)
    patterns = DRAFTER_FILES + (() if has_st else BIN_FILES)
    return [s for s in siblings if "/" not in s and any(fnmatch(s, p) for p in patterns)]


def download(repo_id: str, revision: str | None = None, *, endpoint: str | None = None,
             token: str | None = None, cache_dir: str | None = None) -> tuple[Path, str | None]:
    """Snapshot only the files a drafter needs; returns (local dir, commit sha). Works offline from cache."""
    from huggingface_hub import HfApi, snapshot_download

    endpoint = endpoint_from_env(endpoint)
    offline = hub_offline()
    why = None if offline else unreachable(endpoint)
    try:
        with quiet_hub():
            if offline or why:
                try:
                    path = Path(snapshot_download(repo_id, revision=revision, cache_dir=cache_dir,
                                                  local_files_only=True,
                                                  allow_patterns=list(DRAFTER_FILES + BIN_FILES)))
                except Exception as exc:
                    if why:  # nothing cached either: the reason is the Hub, not the cache
                        raise unreachable_error("downloading", repo_id, endpoint, why) from None
                    raise
                # The cache names each snapshot folder by its commit sha.
                return path, path.name if re.fullmatch(r"[0-9a-f]{40}", path.name) else None
            api = HfApi(endpoint=endpoint, token=token)
            info = api.model_info(repo_id, revision=revision)
            files = _choose_files([s.rfilename for s in info.siblings or []])
            path = snapshot_download(repo_id, revision=info.sha or revision, endpoint=endpoint, token=token,
                                     cache_dir=cache_dir, allow_patterns=files)
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
    from huggingface_hub import hf_hub_download

    from .converters.base import read_json_file

    endpoint = endpoint_from_env(endpoint)
    why = None if hub_offline() else unreachable(endpoint)
    try:
        with quiet_hub():
            path = hf_hub_download(repo_id, "config.json", revision=revision, endpoint=endpoint, token=token,
                                   local_files_only=bool(why))
    except Exception as exc:
        if why:
            raise unreachable_error("fetching config.json of", repo_id, endpoint, why) from None
        raise hub_error(exc, repo_id, "fetching config.json of", endpoint) from None
    commit = Path(path).parent.name if len(Path(path).parent.name) == 40 else None
    return read_json_file(Path(path), f"{repo_id}/config.json"), commit


def resolve_source(spec: str, revision: str | None = None, *, endpoint: str | None = None,
                   token: str | None = None) -> tuple[Path, str | None]:
    """A local directory as is, or a Hub repo id downloaded to the HF cache; (path, commit or None).

    A local-looking `spec` (see looks_local) is never sent to the Hub. A repo-id-shaped one that is not
    on disk is asked of the Hub, and a failure says both readings."""
    if os.path.lexists(os.path.expanduser(spec)):
        return Path(os.path.expanduser(spec)), None
    if not is_repo_id(spec):
        raise FormatError(f"{spec}: no such directory", "check the path (a Hub repo id is written ORG/NAME)",
                          code="E-SRC-MISSING")
    try:
        return download(spec, revision, endpoint=endpoint, token=token)
    except HubError as exc:
        raise both_readings(spec, "no such directory", exc) from None


def both_readings(spec: str, local: str, exc: HubError) -> HubError:
    """`scratch/nope: no such directory; as a Hub repo id: <the Hub's answer>`."""
    return HubError(f"{spec}: {local}; as a Hub repo id: {exc.reading}",
                    f"{exc.hint}; if you meant a local path, check it",
                    code=exc.code, reading=exc.reading)


# ------------------------------------------------------------------------------------------------ publishing

CARD_NAME = "README.md"
# Published beside config.json when the source has them: engines read them with the weights.
COMPANION_FILES = ("generation_config.json", "hf_quant_config.json")


class PublishRefused(Eagle3Error):
    """Validation found errors: nothing is converted or sent."""

    def __init__(self, report: Any):
        first = next(f for f in report.findings if f.severity == "error")
        errors = report.count("error")
        super().__init__(f"refusing to publish {report.source}: validation found {errors} error"
                         f"{'s' if errors != 1 else ''}; first: {first.message}",
                         first.hint or "fix the findings above, then publish again", code=first.code)
        self.report = report


@dataclass
class PublishFile:
    path_in_repo: str
    size: int
    sha256: str
    operation: Any  # huggingface_hub.CommitOperationAdd, holding the same hash: the upload does not hash again


@dataclass
class PublishPlan:
    """Exactly what one publish commit holds, and what it says about the drafter."""

    source: Any  # convert.Source: the copy the files were taken (or converted) from
    repo_id: str
    branch: str | None  # None: the repo's default branch
    create_pr: bool
    message: str
    layout: str
    converted: bool  # the files are a conversion of `source` made for this upload
    drafter_id: str
    facts: dict[str, Any]  # the published sidecar's content
    report: Any  # checks.Report of the published files
    card: str
    files: list[PublishFile]
    notes: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class Published:
    repo_id: str
    commit: str
    commit_url: str
    pr_url: str | None = None
    pr_revision: str | None = None


def check_repo_id(repo_id: str) -> str:
    if not REPO_ID_RE.match(repo_id) or ".." in repo_id:
        raise UsageError(f"{repo_id!r} is not a Hub repo id", "give the destination as ORG/NAME, e.g. "
                         "my-org/Llama-3.1-8B-eagle3")
    return repo_id


@contextmanager
def prepared_publish(src: str, repo_id: str, *, layout: str | None = None, from_layout: str = "auto",
                     verifier: str | None = None, target: str | None = None, branch: str | None = None,
                     create_pr: bool = False, message: str | None = None, license: str | None = None,
                     registry: Any = None, endpoint: str | None = None,
                     token: str | None = None) -> Iterator[PublishPlan]:
    """Validate `src` and stage what publishing it to `repo_id` uploads; converts into a temporary
    directory when `layout` differs from the source's (or the weights are pickles), removed on exit.
    `registry` (a store or a path; None: not consulted) may hold the drafter's training record.
    `verifier` and `target` are as for `convert`: who the drafter proposes for, and its config.

    Raises PublishRefused before anything is converted when validation finds an error. Talks to the
    Hub only when `src` is itself a repo id (to download it).
    """
    from .checks import load_target_facts
    from .convert import convert, make_options, read_source
    from .model_card import build_card

    check_repo_id(repo_id)
    options = make_options(verifier, target, endpoint=endpoint, token=token)
    checked_against = load_target_facts(target, endpoint=endpoint, token=token) if target else None
    path, commit = resolve_source(src, endpoint=endpoint, token=token)
    label = f"{src}@{commit}" if commit else src
    report = _validate(path, label, from_layout, checked_against, registry,
                       f"hf://{src}@{commit}" if commit else None)
    source = read_source(str(path), from_layout, options)
    if commit:  # read from the HF cache: name it by repo and commit, as read_source(src) would
        source.uri, source.commit = f"hf://{src}@{commit}", commit
    layout = layout or source.detection.layout
    weights = _weight_files(path)
    pickled = not all(name.endswith(".safetensors") for name in weights)
    workdir = None
    try:
        if layout == source.detection.layout and not pickled:
            root, names = path, _published_names(path, weights)
            sidecar_bytes, facts, notes = _sidecar_for(source, layout, options)
        else:
            workdir = Path(tempfile.mkdtemp(prefix="eagle3-publish-"))
            staged = workdir / "staged"
            result = convert(src, staged, layout, source.detection.layout, options=options, revision=commit,
                             endpoint=endpoint, token=token)
            notes = result.notes + (["the weights were pickles (.bin): published as model.safetensors"]
                                    if pickled else [])
            root, names = staged, [name for name in result.files if name != SIDECAR_NAME]
            sidecar_bytes, facts = _relocated_sidecar(staged, repo_id)
            report = _validate(staged, f"{label} as {layout}", layout, checked_against, registry, None)
        card = build_card(repo_id=repo_id, layout=layout, config=source.drafter.config, facts=facts, report=report,
                          engines=_serving_engines(layout), license=license or _license_of(path),
                          drafter_revision=branch if branch and branch != "main" else None)
        sidecar_bytes, facts = _without_local_paths(sidecar_bytes, facts)
        files = [_file(name, root / name) for name in names]
        files += [_file(SIDECAR_NAME, sidecar_bytes), _file(CARD_NAME, card.encode())]
        default_message = f"Publish EAGLE-3 drafter {facts['drafter_id'][:12]} ({layout}) with {sidecar.tool_name()}"
        yield PublishPlan(source, repo_id, branch, create_pr, message or default_message, layout,
                          workdir is not None, facts["drafter_id"], facts, report, card, files, notes)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _validate(path: Path, label: str, from_layout: str, target: Any, registry: Any, uri: str | None) -> Any:
    from .checks import validate_checkpoint
    from .registry import recorded_capture

    # The registry's training record, when it knows this drafter: a config capturing other layers is an error.
    recorded = recorded_capture(path, registry, uri=uri) if registry is not None else None
    expected, record_label = recorded or (None, "")
    report = validate_checkpoint(path, from_layout=from_layout, target=target, source_label=label,
                                 expected_boundaries=expected, record_label=record_label)
    if report.failed():
        raise PublishRefused(report)
    return report


def _weight_files(root: Path) -> list[str]:
    from .converters.base import load_checkpoint

    return load_checkpoint(root).weight_files


def _published_names(root: Path, weights: list[str]) -> list[str]:
    """config.json, the weights (with their index) and companions: never optimizer states or logs."""
    from .converters.base import CONFIG_NAME
    from .safetensors_io import INDEX_NAME

    names = [CONFIG_NAME, *weights]
    return names + [name for name in (INDEX_NAME, *COMPANION_FILES) if (root / name).is_file()]


def _sidecar_for(source: Any, layout: str, options: Any) -> tuple[bytes, dict[str, Any], list[str]]:
    """The source's own sidecar when it describes these weights and no target is given; else one made now
    (handing on the history the old one knew)."""
    from .convert import carry_history, ids_as_written, sidecar_facts
    from .converters.base import CONFIG_NAME
    from .fingerprint import drafter_id, tensor_digests

    drafter = source.drafter
    the_id = drafter_id(drafter, tensor_digests(drafter))
    given = options.verifier or options.target
    if source.sidecar and source.sidecar.get("drafter_id") == the_id and not given:
        data = (source.path / SIDECAR_NAME).read_bytes()
        return data, json.loads(data), list(drafter.notes)
    facts = sidecar_facts(drafter, options, None)
    facts["ids_as_written"] = ids_as_written(drafter.config, options, [layout])
    facts["drafter_id"] = the_id
    notes = drafter.notes + carry_history(facts, source.sidecar)
    data = sidecar.build(layout=layout, config_bytes=(source.path / CONFIG_NAME).read_bytes(), facts=facts)
    return data, json.loads(data), notes


def _relocated_sidecar(staged: Path, repo_id: str) -> tuple[bytes, dict[str, Any]]:
    """The converted copy's sidecar, its last lineage edge leading to the repo instead of the temporary
    directory that is about to vanish (the commit is not known yet; the registry records it)."""
    data = json.loads((staged / SIDECAR_NAME).read_text(encoding="utf-8"))
    here = os.path.normpath(staged.resolve())
    for edge in data.get("lineage") or []:
        if os.path.normpath(str(edge.get("dest", {}).get("uri"))) == here:
            edge["dest"]["uri"] = f"hf://{repo_id}"
    encoded = (json.dumps(data, indent=2) + "\n").encode()
    return encoded, data


def _without_local_paths(data: bytes, facts: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """A published sidecar names local copies by directory name only: the uploader's paths stay private."""
    def public(uri: object) -> object:
        if isinstance(uri, str) and not uri.startswith("hf://"):
            return f"local:{Path(uri).name}"
        return uri

    changed = json.loads(json.dumps(facts))
    for edge in changed.get("lineage") or []:
        for end in ("source", "dest"):
            if isinstance(edge, dict) and isinstance(edge.get(end), dict):
                edge[end]["uri"] = public(edge[end].get("uri"))
    if isinstance(changed.get("converted_from"), dict):
        changed["converted_from"]["uri"] = public(changed["converted_from"].get("uri"))
    if changed == facts:
        return data, facts
    return (json.dumps(changed, indent=2) + "\n").encode(), changed


def _serving_engines(layout: str) -> tuple[str, ...]:
    from .checks import LAYOUT_ENGINES

    return LAYOUT_ENGINES.get(layout, ())


def _license_of(root: Path) -> str | None:
    """The license a README.md beside the source declares (as a downloaded Hub repo has)."""
    from huggingface_hub import ModelCard

    readme = root / CARD_NAME
    if not readme.is_file():
        return None
    try:
        license = ModelCard.load(readme, ignore_metadata_errors=True).data.license
    except Exception:  # an unreadable card only costs the license line
        return None
    return license if isinstance(license, str) else None


def _file(path_in_repo: str, content: Path | bytes) -> PublishFile:
    from huggingface_hub import CommitOperationAdd

    operation = CommitOperationAdd(path_in_repo=path_in_repo,
                                   path_or_fileobj=str(content) if isinstance(content, Path) else content)
    info = operation.upload_info  # hashes a file here, once: the plan shows it and the upload reuses it
    return PublishFile(path_in_repo, info.size, info.sha256.hex(), operation)


def resolve_token(token: str | None) -> str:
    """--token, else HF_TOKEN, else the `hf auth login` store; a write needs one."""
    from huggingface_hub import get_token

    try:
        found = token or get_token()
    except Exception as exc:  # e.g. an OIDC token exchange that failed (HF_OIDC_RESOURCE)
        raise HubError(f"could not obtain a Hub token ({type(exc).__name__})",
                       "pass --token or set HF_TOKEN", code="E-HUB-AUTH") from None
    if not found:
        raise HubError("no Hub token: publishing needs a write token",
                       "run `hf auth login`, set HF_TOKEN, or pass --token", code="E-HUB-AUTH")
    return found


def upload(plan: PublishPlan, *, private: bool = False, endpoint: str | None = None,
           token: str | None = None) -> Published:
    """Create the repo if missing, then every file of the plan in one commit (or one pull request)."""
    from huggingface_hub import HfApi

    endpoint = endpoint_from_env(endpoint)
    api = HfApi(endpoint=endpoint, token=resolve_token(token))
    why = unreachable(endpoint)
    if why:
        raise _hub_error("publishing to", plan.repo_id, f"cannot reach the Hub at {hub_url(endpoint)} ({why})",
                         "check the network, and --endpoint or HF_ENDPOINT", "E-HUB-OFFLINE")
    try:
        api.create_repo(plan.repo_id, private=private, exist_ok=True)
        if plan.branch and plan.branch != "main":
            api.create_branch(plan.repo_id, branch=plan.branch, exist_ok=True)
        info = api.create_commit(plan.repo_id, operations=[f.operation for f in plan.files],
                                 commit_message=plan.message, revision=plan.branch, create_pr=plan.create_pr)
    except Exception as exc:  # huggingface_hub and its HTTP client raise many types; each becomes one line
        raise publish_error(exc, plan.repo_id, endpoint) from None
    return Published(plan.repo_id, info.oid, info.commit_url, info.pr_url, info.pr_revision)


def publish_error(exc: Exception, repo_id: str, endpoint: str | None) -> HubError:
    """A failed write as one line: what a write needs differs from what a download needs."""
    from huggingface_hub import errors as hf_errors

    status = getattr(getattr(exc, "response", None), "status_code", None)
    where = endpoint or "https://huggingface.co"
    if status is None and _is_transport_error(exc):
        return HubError(f"publishing to {repo_id}: cannot reach the Hub at {where} ({type(exc).__name__})",
                        "check the network, and --endpoint or HF_ENDPOINT", code="E-HUB-OFFLINE")
    if status == 401:
        return HubError(f"publishing to {repo_id}: the Hub rejected the token (HTTP 401)",
                        "log in with a write token: `hf auth login`, HF_TOKEN or --token", code="E-HUB-AUTH")
    if status == 403:
        return HubError(f"publishing to {repo_id}: the token may not write there (HTTP 403)",
                        "use a token with write access to this namespace, or publish under your own",
                        code="E-HUB-FORBIDDEN")
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return HubError(f"publishing to {repo_id}: branch not found (HTTP 404)",
                        "check --revision (a branch of the repo)", code="E-HUB-REVISION")
    if status == 404:
        return HubError(f"publishing to {repo_id}: repository or namespace not found (HTTP 404)",
                        "check the repo id; your token may not see that namespace", code="E-HUB-NOTFOUND")
    if isinstance(exc, ValueError) and "README.md" in str(exc):  # the Hub checks a card's metadata first
        return HubError(f"publishing to {repo_id}: the Hub refused the model card's metadata "
                        f"({' '.join(str(exc).split())[:200]})",
                        "nothing was uploaded; please report it, with the card `--dry-run` prints",
                        code="E-HUB-CARD")
    if status in (409, 412):
        return HubError(f"publishing to {repo_id}: conflict (HTTP {status})",
                        "the branch moved while uploading or a conflicting change is pending: retry, or "
                        "publish with --create-pr", code="E-HUB-CONFLICT")
    return hub_error(exc, repo_id, "publishing to")


def _is_transport_error(exc: Exception) -> bool:
    """No HTTP answer at all: refused, reset, timed out, DNS (httpx or requests, as installed)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return isinstance(exc, OSError) or bool(names & {"TransportError", "ConnectionError", "Timeout"})


