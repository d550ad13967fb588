"""Publishing a drafter to the Hub: validate, stage (converting on the way if asked), write the model
card and sidecar, and upload everything in one commit. Where sources come from is sources.py's."""

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

from . import hub_client, provenance, sidecar
from .convert import carry_history, convert, ids_as_written, make_options, read_source, sidecar_facts
from .converters.base import CONFIG_NAME
from .converters.gguf import FILE_TYPE, RECORD_KEY, file_name, scan_gguf
from .converters.gguf_dflash import file_name as dflash_file_name
from .drafter import KIND_LABELS
from .target_identity import TargetIdentity
from .engines import serve_verdicts, target_context
from .errors import Eagle3Error
from .fingerprint import config_and_weights_id, drafter_id, tensor_digests
from .model_card import build_card, hub_repo_id
from .records import acceptance_of, known_record, record_of
from .registry.models import ELSEWHERE_SCHEME
from .safetensors_io import INDEX_NAME
from .sidecar import SIDECAR_NAME
from .sources import (
    HubError,
    _hub_error,
    check_repo_id,
    endpoint_from_env,
    hub_error,
    hub_url,
    resolve_source,
    unreachable,
)
from .validate import LAYOUT_ENGINES, load_target_facts, read_raw, validate_checkpoint

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
    operation: Any  # hub_client.upload_operation's CommitOperationAdd: holds the hash, the upload does not hash again


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


@contextmanager
def prepared_publish(src: str, repo_id: str, *, layout: str | None = None, from_layout: str = "auto",
                     verifier: str | None = None, target: str | None = None, branch: str | None = None,
                     create_pr: bool = False, message: str | None = None, license: str | None = None,
                     registry: Any = None, endpoint: str | None = None,
                     token: str | None = None, target_gguf: str | None = None,
                     outtype: str = "auto") -> Iterator[PublishPlan]:
    """Validate `src` and stage what publishing it to `repo_id` uploads; converts into a temporary
    directory when `layout` differs from the source's (or the weights are pickles), removed on exit.
    `registry` (a store or a path; None: not consulted) may hold the drafter's training record.
    `verifier` and `target` are as for `convert`: who the drafter proposes for, and its config.

    Raises PublishRefused before anything is converted when validation finds an error. Talks to the
    Hub only when `src` is itself a repo id (to download it).
    """
    check_repo_id(repo_id)
    options = make_options(verifier, target, endpoint=endpoint, token=token)
    options.target_gguf, options.outtype = target_gguf, outtype  # --layout gguf
    checked_against = load_target_facts(target, endpoint=endpoint, token=token) if target else None
    path, commit = resolve_source(src, endpoint=endpoint, token=token)
    label = f"{src}@{commit}" if commit else src
    raw, read_findings = read_raw(path)  # read once: validated, then read as the drafter from the same Checkpoint
    report = _validate(path, label, from_layout, checked_against, registry,
                       f"hf://{src}@{commit}" if commit else None, read=(raw, list(read_findings)))
    source = read_source(str(path), from_layout, options, load=raw.load)
    if commit:  # read from the HF cache: name it by repo and commit, as read_source(src) would
        source.uri, source.commit = f"hf://{src}@{commit}", commit
    layout = layout or source.detection.layout
    weights = raw.files
    gguf_source = source.detection.layout == "gguf"
    pickled = not gguf_source and not all(name.endswith(".safetensors") for name in weights)
    workdir = None
    try:
        if layout == source.detection.layout and not pickled:
            root, names = path, (list(weights) if gguf_source else _published_names(path, weights))
            sidecar_bytes, facts, notes = _sidecar_for(source, layout, options)
            moved_bytes, moved = _relocated_sidecar(path, repo_id, facts)
            if moved != facts:  # SRC was written by a conversion: the Hub copy is where that edge now leads
                sidecar_bytes, facts = moved_bytes, moved
        else:
            workdir = Path(tempfile.mkdtemp(prefix="eagle3-publish-"))
            # a GGUF is named after the directory it is written into: eagle3-<repo name>-<TYPE>.gguf
            staged = workdir / (repo_id.split("/")[-1] if layout == "gguf" else "staged")
            try:
                result = convert(src, staged, layout, source.detection.layout, options=options, revision=commit,
                                 endpoint=endpoint, token=token)
            except Eagle3Error as exc:
                exc.message, exc.hint = (_publish_flags(text) for text in (exc.message, exc.hint))
                raise
            notes = result.notes + (["the weights were pickles (.bin): published as model.safetensors"]
                                    if pickled else [])
            root, names = staged, [name for name in result.files if name != SIDECAR_NAME]
            sidecar_bytes, facts = _relocated_sidecar(staged, repo_id)
            report = _validate(staged, f"{label} as {layout}", layout, checked_against, registry, None)
        facts, from_registry = _with_registry_facts(facts, registry)
        published = source if workdir is None else read_source(str(staged), layout)
        if from_registry:
            sidecar_bytes = (json.dumps(facts, indent=2) + "\n").encode()
            notes = [*notes, from_registry]
        in_repo = {name: _gguf_name(name, root, repo_id) if layout == "gguf" else name for name in names}
        card = build_card(repo_id=repo_id, layout=layout, config=source.drafter.config, facts=facts, report=report,
                          engines=LAYOUT_ENGINES.get(layout, ()), serves=_published_verdicts(published, facts, options),
                          license=license or _license_of(path),
                          drafter_revision=branch if branch and branch != "main" else None,
                          files=list(in_repo.values()),
                          acceptance=acceptance_of(facts["drafter_id"], registry) if registry is not None else ())
        sidecar_bytes, facts = _without_local_paths(sidecar_bytes, facts)
        files = [_file(in_repo[name], root / name) for name in names]
        files += [_file(SIDECAR_NAME, sidecar_bytes), _file(CARD_NAME, card.encode())]
        default_message = (f"Publish {KIND_LABELS[source.drafter.config.kind]} drafter {facts['drafter_id'][:12]} "
                           f"({layout}) with {sidecar.tool_name()}")
        yield PublishPlan(source, repo_id, branch, create_pr, message or default_message, layout,
                          workdir is not None, facts["drafter_id"], facts, report, card, files, notes)
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _publish_flags(text: str | None) -> str | None:
    """A refusal of the conversion publish makes, in publish's words: `--to L` is `--layout L` here (a whole
    `eagle3-convert ...` command it names is convert's, and keeps convert's flags)."""
    return text and re.sub(r"`eagle3-convert [^`]*`|--to\b", lambda m: m[0] if m[0][0] == "`" else "--layout", text)


def _validate(path: Path, label: str, from_layout: str, target: Any, registry: Any, uri: str | None,
              read: Any = None) -> Any:
    # The registry's record of these weights, when it knows them: config.json is checked against it (and against the
    # sidecar beside it), as validate does.
    record = known_record(path, registry, uri=uri) if registry is not None else None
    report = validate_checkpoint(path, from_layout=from_layout, target=target, source_label=label,
                                 known=[provenance.from_record(record)] if record is not None else [], read=read)
    if report.failed():
        raise PublishRefused(report)
    return report


def _gguf_name(name: str, root: Path, repo_id: str) -> str:
    """The name llama.cpp's `-hf` sidecar pickup looks for: `eagle3-<name>-<TYPE>.gguf` (kept when it has one)."""
    if not name.endswith(".gguf") or re.fullmatch(r"(eagle3|dflash)-.+-(BF16|F16|F32)\.gguf", name):
        return name

    kv = scan_gguf(root / name, "GGUF").kv
    dtype = next((d for d, t in FILE_TYPE.items() if t == kv.get("general.file_type")), "F32")
    named = dflash_file_name if kv.get("general.architecture") == "dflash" else file_name  # (no eagle3 sidecar name)
    return named(Path(repo_id.split("/")[-1]), dtype)


def _published_names(root: Path, weights: list[str]) -> list[str]:
    """config.json, the weights (with their index) and companions: never optimizer states or logs."""
    names = [CONFIG_NAME, *weights]
    return names + [name for name in (INDEX_NAME, *COMPANION_FILES) if (root / name).is_file()]


def _sidecar_for(source: Any, layout: str, options: Any) -> tuple[bytes, dict[str, Any], list[str]]:
    """The source's own sidecar when it describes these weights and no target is given; else one made now
    (handing on the history the old one knew)."""
    drafter = source.drafter
    digests = tensor_digests(drafter)
    the_id = drafter_id(drafter, digests)
    given = options.verifier or options.target
    if source.sidecar and source.sidecar.get("drafter_id") == the_id and not given:
        data = (source.path / SIDECAR_NAME).read_bytes()
        return data, json.loads(data), list(drafter.notes)
    facts = sidecar_facts(drafter, options, None)
    facts["ids_as_written"] = ids_as_written(drafter.config, options, [layout])
    facts["drafter_id"] = the_id
    notes = drafter.notes + carry_history(facts, source.sidecar, {config_and_weights_id(drafter, digests)})
    if layout == "gguf":  # a GGUF's sidecar is bound to the record it carries (it has no config.json)
        record = (source.stored_config or {}).get(RECORD_KEY)  # its metadata as read
        config_bytes = record.encode() if isinstance(record, str) else b""
    else:
        config_bytes = (source.path / CONFIG_NAME).read_bytes()
    data = sidecar.build(layout=layout, config_bytes=config_bytes, facts=facts)
    return data, json.loads(data), notes


def _relocated_sidecar(copy: Path, repo_id: str, data: dict[str, Any] | None = None) -> tuple[bytes, dict[str, Any]]:
    """The published copy's sidecar (`data`, else the one in `copy`), the lineage edge that wrote `copy` leading to
    the repo instead: the files a reader gets from the Hub are that copy (the commit is not known yet; the
    registry records it). A staging directory about to vanish is thus named nowhere."""
    data = json.loads((copy / SIDECAR_NAME).read_text(encoding="utf-8")) if data is None else json.loads(
        json.dumps(data))
    here = os.path.normpath(copy.resolve())
    for edge in data.get("lineage") or []:
        if isinstance(edge, dict) and isinstance(edge.get("dest"), dict) and \
                os.path.normpath(str(edge["dest"].get("uri"))) == here:
            edge["dest"]["uri"] = f"hf://{repo_id}"
    encoded = (json.dumps(data, indent=2) + "\n").encode()
    return encoded, data


def _with_registry_facts(facts: dict[str, Any], registry: Any) -> tuple[dict[str, Any], str | None]:
    """The facts the registry's record of this very drafter (by id) holds and its files do not state: the
    target, the provenance. They go into the card and the published sidecar, with `from_registry` naming
    the record; returns the note that says so (None: nothing taken, or no registry consulted)."""
    record = record_of(facts.get("drafter_id"), registry) if registry is not None else None
    if record is None:
        return facts, None
    out, taken = dict(facts), []
    known = facts.get("target") if isinstance(facts.get("target"), dict) else None
    if record.target is not None and record.target.name_or_path and not (known or {}).get("name_or_path"):
        out["target"] = TargetIdentity.merged(record.target, TargetIdentity.model_validate(known) if known else None
                                              ).model_dump()
        taken.append("the target")
    if record.trained_with and not facts.get("trained_with"):
        out["trained_with"] = record.trained_with
        taken.append("its provenance")
    trained_on = None
    if record.capture_boundaries is not None and facts.get("capture_boundaries") is None:
        trained_on = list(record.capture_boundaries)  # the file names none: engines will capture their defaults
        taken.append("the capture layers the training used")
    if not taken:
        return facts, None
    when = record.updated_at.isoformat(timespec="seconds")
    out["from_registry"] = {"drafter_id": record.drafter_id, "recorded_at": when, "facts": taken}
    if trained_on is not None:
        out["from_registry"]["capture_boundaries"] = trained_on
    return out, (f"taken from the registry record of drafter {record.drafter_id[:12]} (recorded "
                 f"{when[:16].replace('T', ' ')} UTC), which the checkpoint's files do not state: {', '.join(taken)}")


def _without_local_paths(data: bytes, facts: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """A published sidecar names local copies by directory name only: the uploader's paths stay private."""
    def public(uri: object) -> object:
        if isinstance(uri, str) and not uri.startswith(("hf://", ELSEWHERE_SCHEME)):
            return f"{ELSEWHERE_SCHEME}{Path(uri).name}"
        return uri

    changed = json.loads(json.dumps(facts))
    for edge in changed.get("lineage") or []:
        for end in ("source", "dest"):
            if isinstance(edge, dict) and isinstance(edge.get(end), dict):
                edge[end]["uri"] = public(edge[end].get("uri"))
    if isinstance(changed.get("converted_from"), dict):
        changed["converted_from"]["uri"] = public(changed["converted_from"].get("uri"))
    target = changed.get("target")
    if isinstance(target, dict) and isinstance(target.get("name_or_path"), str):
        if not hub_repo_id(target["name_or_path"]):  # a local copy of the target: its directory name only
            target["name_or_path"] = public(target["name_or_path"])
    if changed == facts:
        return data, facts
    return (json.dumps(changed, indent=2) + "\n").encode(), changed


def _published_verdicts(published: Any, facts: dict[str, Any], options: Any) -> dict[str, Any]:
    """Every engine's verdict on the files as published, judged against the layers the training captured
    (the registry's, when the files name none)."""
    cfg = published.drafter.config
    truth = facts.get("capture_boundaries") or (facts.get("from_registry") or {}).get("capture_boundaries")
    if cfg.capture_boundaries is None and truth is not None:
        cfg = cfg.model_copy(update={"capture_boundaries": list(truth)})
    return serve_verdicts(published.stored_config or {}, published.stored_names, cfg,
                          target_context(cfg, options.target))


def _license_of(root: Path) -> str | None:
    """The license a README.md beside the source declares (as a downloaded Hub repo has)."""
    readme = root / CARD_NAME
    if not readme.is_file():
        return None
    try:
        license = hub_client.card_license(readme)
    except Exception:  # an unreadable card only costs the license line
        return None
    return license if isinstance(license, str) else None


def _file(path_in_repo: str, content: Path | bytes) -> PublishFile:
    operation = hub_client.upload_operation(path_in_repo, content)
    info = operation.upload_info  # hashes a file here, once: the plan shows it and the upload reuses it
    return PublishFile(path_in_repo, info.size, info.sha256.hex(), operation)


def resolve_token(token: str | None) -> str:
    """--token, else HF_TOKEN, else the `hf auth login` store; a write needs one."""
    try:
        found = token or hub_client.stored_token()
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
    endpoint = endpoint_from_env(endpoint)
    api = hub_client.api(endpoint, resolve_token(token))
    why = unreachable(endpoint)
    if why:
        raise _hub_error("publishing to", plan.repo_id, f"cannot reach the Hub at {hub_url(endpoint)} ({why})",
                         "check the network, and --endpoint or HF_ENDPOINT", "E-HUB-OFFLINE")
    try:
        with hub_client.quiet():
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
    hf_errors = hub_client.errors()
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


