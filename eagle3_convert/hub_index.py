"""The Hub as the shared index of who trained what: `registry sync` and `search`.

sync reads Hub repos without their weights (hub_read.py) and records each drafter with its target, target
revision, capture boundaries and `hf://org/name@commit`, through the public RegistryStore API only. A recorded
fact is never overwritten: where the Hub says other capture boundaries (or another target) than the record, the
repo is reported as a conflict and nothing of it is written. search lists a target's drafters from the registry
and, with the Hub, from the repos whose card names the target as base_model, each copy with every engine's
verdict (engines.serve_verdicts, the same rules convert and validate use).
"""

from __future__ import annotations

import difflib
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .convert import read_source
from .engines import serve_verdicts, target_context
from .errors import Eagle3Error
from .hub_read import SIDECAR_KIND, HubReader, weights_alias
from .names import RUNNERS, runners_of
from .records import RegistryArg, opened
from .registry.errors import NoRegistry
from .registry.models import ELSEWHERE_SCHEME, Location
from .registry.recording import FINGERPRINT, conflict_message, disagreements, record_facts
from .sources import unreachable, unreachable_error

STATUSES = ("added", "unchanged", "new-location", "updated", "conflict", "broken")


@dataclass
class SyncEntry:
    repo_id: str
    status: str  # one of STATUSES
    uri: str | None = None  # hf://org/name@commit
    drafter_id: str | None = None
    identity: str | None = None  # "sidecar" (our drafter id) or "hub-fingerprint" (hub_read.fingerprint)
    layout: str | None = None
    target: str | None = None
    target_revision: str | None = None
    capture_boundaries: list[int] | None = None
    code: str | None = None  # broken: the finding code; conflict: E-SYNC-CONFLICT
    message: str | None = None
    conflicts: list[dict[str, Any]] = field(default_factory=list)  # {field, hub, registry}
    notes: list[str] = field(default_factory=list)


@dataclass
class SyncReport:
    sources: list[str]
    entries: list[SyncEntry]
    verify: bool

    def count(self, status: str) -> int:
        return sum(e.status == status for e in self.entries)

    def counts(self) -> dict[str, int]:
        return {status: self.count(status) for status in STATUSES}

    def as_dict(self) -> dict[str, Any]:
        return {"sources": self.sources, "verify": self.verify, "counts": self.counts(),
                "repos": [asdict(e) for e in self.entries]}


def reader(endpoint: str | None, token: str | None) -> Any:
    """A HubReader, after checking (fast) that the Hub answers at all."""
    why = unreachable(endpoint)
    if why:
        raise unreachable_error("reaching", "the Hub", endpoint, why)
    return HubReader(endpoint, token)


def sync(sources: list[str], registry: RegistryArg = None, *, endpoint: str | None = None, token: str | None = None,
         verify: bool = False) -> SyncReport:
    """Record every drafter of `sources` (org/user names or org/name repo ids)."""
    hub = reader(endpoint, token)
    entries: list[SyncEntry] = []
    with opened(registry) as store:
        for spec in sources:
            for repo_id in hub.repos(spec):
                try:
                    read = hub.read(repo_id, headers=verify)
                except Eagle3Error as exc:
                    if "/" in spec or exc.code in ("E-HUB-OFFLINE", "E-HUB-AUTH"):
                        raise  # the repo asked for, or the Hub itself, is the problem: one error line
                    entries.append(SyncEntry(repo_id, "broken", code=exc.code, message=exc.message))
                    continue
                entries.append(_record(store, read))
    return SyncReport(list(sources), entries, verify)


def _target_of(facts: dict[str, Any]) -> tuple[str | None, str | None]:
    target = facts.get("target") if isinstance(facts.get("target"), dict) else {}
    return target.get("name_or_path"), target.get("revision")


def _pinned_lineage(facts: dict[str, Any], repo_id: str, uri: str, known: Any) -> list[Any]:
    """The sidecar's edges, those into this repo pinned to the commit read (as publish records them), less those
    naming by `local:NAME` a copy the record `known` already holds by its path (the uploader's registry: counting
    it twice would add an edge)."""
    out = []
    for edge in facts.get("lineage") or []:
        if isinstance(edge, dict) and isinstance(edge.get("dest"), dict) and edge["dest"].get("uri") == f"hf://{repo_id}":
            edge = {**edge, "dest": {**edge["dest"], "uri": uri}}
        if known is not None and _held_by_path(edge, known):
            continue
        out.append(edge)
    return out


def _held_by_path(edge: Any, known: Any) -> bool:
    """Whether every `local:NAME` end of `edge` is a copy `known` holds by a path ending in NAME, in that layout."""
    ends = [end for end in (edge.get("source"), edge.get("dest")) if isinstance(end, dict)] if isinstance(
        edge, dict) else []
    private = [end for end in ends if str(end.get("uri")).startswith(ELSEWHERE_SCHEME)]
    held = {(loc.layout, Path(loc.uri).name) for loc in known.locations if loc.kind == "local"}
    return bool(private) and all((end.get("layout"), str(end["uri"])[len(ELSEWHERE_SCHEME):]) in held
                                 for end in private)


def _conflicts(known: Any, facts: dict[str, Any]) -> list[dict[str, Any]]:
    """What the Hub says against the record (recording.disagreements: the rule convert's merges use too)."""
    return disagreements(known, facts.get("capture_boundaries"), _target_of(facts)[0])


def _owner(store: Any, fingerprint: str, uri: str, weights: str | None) -> str | None:
    """The content-identified record a drafter read by its Hub fingerprint belongs to: the one a record of that
    fingerprint was merged into (its alias), else the one whose weight files are these very bytes (a copy of them
    published or synced before), else the one holding this very commit (converted or added from it)."""
    for alias in (fingerprint, weights):
        merged = store.aliased(alias) if alias else None
        if merged is not None:
            return merged
    for drafter_id in store.holding(uri):
        record = store.get(drafter_id) if drafter_id != fingerprint else None
        if record is not None and record.drafter_id == drafter_id and record.id_kind != FINGERPRINT:
            return drafter_id
    return None


def _record(store: Any, read: Any) -> SyncEntry:
    repo = read.repo
    entry = SyncEntry(repo.repo_id, "broken", uri=repo.uri, identity=read.identity, layout=read.layout,
                      notes=list(read.notes))
    if read.problem is not None or read.facts is None or not read.layout:
        entry.code, entry.message = read.problem or ("E-LAYOUT-UNKNOWN", "no layout could be read")
        return entry
    facts = dict(read.facts)
    entry.drafter_id = facts["drafter_id"]
    entry.target, entry.target_revision = _target_of(facts)
    entry.capture_boundaries = facts.get("capture_boundaries")
    location = Location(layout=read.layout, uri=repo.uri)
    twins: list[str] = []
    with store.transaction():
        weights = weights_alias(repo.files)
        owner = _owner(store, entry.drafter_id, repo.uri, weights) if read.identity == FINGERPRINT else None
        if owner is not None:  # one drafter, one record: the one under its content id
            entry.notes.append(f"recorded under drafter {owner[:12]}, the content id of this drafter's record "
                               f"(hub fingerprint {entry.drafter_id[:12]})")
            twins, entry.drafter_id = [entry.drafter_id], owner
            facts["drafter_id"] = owner
        elif read.identity == FINGERPRINT:
            facts["id_kind"] = FINGERPRINT
        known = store.get(entry.drafter_id)
        if known is not None and known.drafter_id != entry.drafter_id:
            known = None  # a prefix match of another id
        facts["lineage"] = _pinned_lineage(facts, repo.repo_id, repo.uri, known)
        if known is not None:
            entry.conflicts = _conflicts(known, facts)
            twin = store.get(twins[0]) if twins else None
            if not entry.conflicts and twin is not None and twin.drafter_id == twins[0]:
                entry.conflicts = disagreements(known, twin.capture_boundaries,
                                                twin.target.name_or_path if twin.target else None)
            if entry.conflicts:
                entry.status, entry.code = "conflict", "E-SYNC-CONFLICT"
                entry.message = conflict_message(entry.conflicts)
                return entry
        before = known.model_dump(mode="json") if known is not None else None
        record, notes = record_facts(store, facts, locations=[location], twins=twins)
        if owner is not None:
            store.add_alias(twins[0], owner)
        if weights is not None and read.identity == SIDECAR_KIND and not read.claimed:  # copies of these bytes join it
            store.add_alias(weights, record.drafter_id)
    entry.notes += notes
    if known is not None and facts.get("capture_boundaries") is None and known.capture_boundaries is not None:
        entry.notes.append(f"the files name no capture layers; the record's {known.capture_boundaries} stand")
        entry.capture_boundaries = known.capture_boundaries
    if known is None:
        entry.status = "added"
    elif location.uri not in {loc.uri for loc in known.locations}:
        entry.status = "new-location"
    else:
        entry.status = "unchanged" if record.model_dump(mode="json") == before else "updated"
    return entry


# ----------------------------------------------------------------------------------------------------- search


def _judge(config: dict[str, Any], names: list[str], cfg: Any, target: Any, truth: list[int] | None,
           engines: tuple[str, ...], releases: Mapping[str, Sequence[str | None]]) -> dict[str, dict[str, Any]]:
    if truth is not None and truth != cfg.capture_boundaries:  # the record knows what the training captured
        cfg = cfg.model_copy(update={"capture_boundaries": list(truth)})
    judged = serve_verdicts(config, names, cfg, target_context(cfg, target), engines, releases)
    return {engine: v.to_dict() for engine, v in judged.items()}


def _local_copy(path: str, truth: list[int] | None, engines: tuple[str, ...],
                releases: Mapping[str, Sequence[str | None]]) -> dict[str, Any]:
    if not Path(path).exists():
        return {"serves": None, "why": "this copy is no longer there"}
    try:
        source = read_source(path)
    except Eagle3Error as exc:
        return {"serves": None, "why": f"unreadable: {exc.message} [{exc.code}]"}
    cfg = source.drafter.config
    return {"serves": _judge(source.stored_config or {}, source.stored_names, cfg, cfg.target, truth, engines,
                             releases),
            "why": None}


def _hub_copy(read: Any, truth: list[int] | None, engines: tuple[str, ...],
              releases: Mapping[str, Sequence[str | None]], record: Any = None) -> dict[str, Any]:
    """A Hub copy's verdicts, judged against the training truth; with the record it belongs to, what its files say
    against that record (`conflicts`, as sync reports them)."""
    conflicts = _conflicts(record, read.facts or {}) if record is not None else []
    if read.problem is not None or read.drafter is None:
        code, message = read.problem or ("E-LAYOUT-UNKNOWN", "not read")
        return {"serves": None, "why": f"{message} [{code}]", "conflicts": conflicts}
    cfg = read.drafter.config
    target = read.target or cfg.target
    return {"serves": _judge(read.config or {}, read.names or [], cfg, target, truth, engines, releases),
            "why": None,
            "conflicts": conflicts}


def _record_of_copy(store: Any, read: Any) -> Any:
    """The record a Hub copy belongs to: the one its sidecar names, else the one its fingerprint or its weight
    files' bytes were joined to, else the one holding this very commit; None if the registry knows none."""
    if store is None:
        return None
    facts = read.facts or {}
    drafter_id = facts.get("drafter_id")
    if read.identity == FINGERPRINT or not drafter_id:
        drafter_id = _owner(store, drafter_id or "", read.repo.uri, weights_alias(read.repo.files)) or drafter_id
    record = store.get(drafter_id) if drafter_id else None
    if record is None:
        held = store.holding(read.repo.uri)
        record = store.get(held[0]) if held else None
    return record


def search(target: str, registry: RegistryArg = None, *, engines: Sequence[str] = (), hub: bool = False,
           endpoint: str | None = None, token: str | None = None,
           releases: Mapping[str, Sequence[str | None]] | None = None) -> dict[str, Any]:
    """The drafters of `target`: from the registry and, with `hub`, from the Hub; each copy with its verdicts
    (`engines`: engines or runners, as names.ENGINE_SPELLINGS spells them; default every runner), for the
    `releases` named per engine (default: each one's newest). A Hub copy of a recorded drafter is listed under its
    record and judged against the record's capture layers, its disagreements said."""
    engines = tuple(dict.fromkeys(r for e in engines for r in runners_of(e))) or RUNNERS
    releases = releases or {}
    try:
        with opened(registry, create=False) as store:
            records = store.list(target)
            similar = [] if records else similar_targets(target, store.list())
        no_registry = None
    except NoRegistry as exc:  # a search writes nothing: the Hub may still answer
        records, similar, no_registry = [], [], exc.message
    hub_reader = reader(endpoint, token) if hub else None
    drafters: dict[str, dict[str, Any]] = {}

    def listed(record: Any) -> dict[str, Any]:
        return drafters.setdefault(record.drafter_id, {
            "drafter_id": record.drafter_id, "target": target,
            "target_revision": record.target.revision if record.target else None,
            "capture_boundaries": record.capture_boundaries, "in_registry": True, "on_hub": False, "copies": []})

    for record in records:
        item = listed(record)
        for location in record.locations:
            if location.kind == "local":
                judged = _local_copy(location.uri, record.capture_boundaries, engines, releases)
            elif hub_reader is not None:
                try:
                    judged = _hub_copy(hub_reader.read(location.path_or_repo, headers=True,
                                                       revision=location.revision), record.capture_boundaries,
                                       engines, releases, record)
                    item["on_hub"] = True
                except Eagle3Error as exc:
                    judged = {"serves": None, "why": f"{exc.message} [{exc.code}]"}
            else:
                judged = {"serves": None, "why": "a Hub copy: pass --hub to read it"}
            item["copies"].append({"layout": location.layout, "uri": location.uri, **judged})
    if hub_reader is not None:
        with ExitStack() as stack:
            try:
                store = stack.enter_context(opened(registry, create=False))
            except NoRegistry:
                store = None
            for repo_id in hub_reader.search(target):
                try:
                    read = hub_reader.read(repo_id, headers=True)
                except Eagle3Error as exc:
                    if exc.code in ("E-HUB-OFFLINE", "E-HUB-AUTH"):
                        raise
                    drafters[f"unreadable:{repo_id}"] = {
                        "drafter_id": None, "target": target, "target_revision": None, "capture_boundaries": None,
                        "in_registry": False, "on_hub": True,
                        "copies": [{"layout": None, "uri": f"hf://{repo_id}", "serves": None,
                                    "why": f"{exc.message} [{exc.code}]"}]}
                    continue
                uri = read.repo.uri
                facts = read.facts or {}
                record = _record_of_copy(store, read)
                if record is not None:  # the training truth is the record's, whatever this copy's files say
                    item = listed(record)
                else:
                    key = facts.get("drafter_id") or f"unreadable:{repo_id}"
                    item = drafters.setdefault(key, {
                        "drafter_id": facts.get("drafter_id"), "target": target,
                        "target_revision": _target_of(facts)[1], "capture_boundaries": facts.get("capture_boundaries"),
                        "in_registry": False, "on_hub": True, "copies": []})
                item["on_hub"] = True
                if any(copy["uri"] == uri for copy in item["copies"]):
                    continue  # the registry's copy at this very commit, judged above
                item["copies"].append({"layout": read.layout, "uri": uri,
                                       **_hub_copy(read, item["capture_boundaries"], engines, releases, record)})
    return {"target": target, "engines": list(engines), "hub": hub, "drafters": list(drafters.values()),
            "similar_targets": similar, "no_registry": no_registry}


def similar_targets(target: str, records: list[Any]) -> list[str]:
    """Recorded targets a mistyped or differently spelled `target` probably meant (a search that finds
    nothing must not look like 'no drafter exists'): same model name under another org or path, or close."""
    names = sorted({r.target.name_or_path for r in records if r.target and r.target.name_or_path})
    base = target.rstrip("/").rsplit("/", 1)[-1].lower()
    same_name = [n for n in names if n.rstrip("/").rsplit("/", 1)[-1].lower() == base]
    close = difflib.get_close_matches(target.lower(), [n.lower() for n in names], n=3, cutoff=0.6)
    by_lower = {n.lower(): n for n in names}
    return list(dict.fromkeys(same_name + [by_lower[c] for c in close]))[:5]
