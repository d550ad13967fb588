"""Recording drafters into the registry, and asking it about a checkpoint: the pipelines' side.

convert, publish, validate and `eagle3-convert registry ...` call these; they read checkpoints
through the convert pipeline and store through `eagle3_convert.registry`, which never imports
the pipelines (the store depends on nothing that records into it).

Every function takes `registry`: an open `RegistryStore` (left open), a path or
`postgresql://` URL to open and close, or None for the default (`$EAGLE3_CONVERT_REGISTRY`,
else `$XDG_DATA_HOME/eagle3-convert/registry.db`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any

from . import finetune, sidecar
from .convert import ConvertResult, carry_history, ids_as_written, make_options, read_source, sidecar_facts
from .capture_ids import capture_context, training_boundaries
from .errors import Eagle3Error, UsageError
from .drafter import Drafter
from .fingerprint import config_and_weights_id, drafter_id, tensor_digests, weights_key
from .hub_read import WEIGHT_SUFFIXES, weights_alias
from .target_identity import compare
from .targets import load_target
from .registry.errors import NoRegistry, RegistryError
from .registry.base import RegistryStore
from .registry.models import ELSEWHERE_SCHEME, SHA256_HEX, Acceptance, DrafterRecord, LineageEdge, Location
from .registry.recording import record_facts
from .registry.store import open_registry

RegistryArg = RegistryStore | str | os.PathLike[str] | None
SHAPE = ("model_type", "num_hidden_layers", "hidden_size", "vocab_size")  # what a target config says of its model


@dataclass
class Recorded:
    """A drafter as the registry holds it after recording one copy of it."""

    record: DrafterRecord
    location: Location  # the copy just recorded
    notes: list[str] = field(default_factory=list)
    # Hub-fingerprint records of the same drafter that were not merged into it, as sync reports a conflict
    conflicts: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def opened(registry: RegistryArg, *, create: bool = True) -> Iterator[RegistryStore]:
    """The registry, opened for this block. `create` False for a lookup: a place without a registry is left
    untouched and NoRegistry raised (only a writing command creates the file or the tables)."""
    if isinstance(registry, RegistryStore):
        yield registry
        return
    store = open_registry(registry, create=create)
    try:
        yield store
    finally:
        store.close()


def add_checkpoint(src: str, *, target: str | None = None, verifier: str | None = None,
                   capture_layers: Sequence[int] | None = None,
                   convention: str | None = None, trained_with: str | None = None, revision: str | None = None,
                   from_layout: str = "auto", registry: RegistryArg = None, endpoint: str | None = None,
                   token: str | None = None, parent: str | None = None) -> Recorded:
    """Record the drafter at `src` (directory or Hub repo id); reads every tensor byte for its id.

    A trusted eagle3-convert.json beside it hands on its provenance and lineage. `target`
    (config, directory or Hub repo) names the target trained on, `verifier` the name it is served by (both:
    one target with both names); a target the record holds under other names learns them, one whose facts
    differ replaces it. `capture_layers` in `convention` and `trained_with` state the training truth and
    replace recorded values. The record's history keeps each change. `parent` (a directory or Hub repo id) is the
    drafter it was fine-tuned from: recorded too, with a `finetune` lineage edge to it (finetune.py).
    """
    if (capture_layers is None) != (convention is None):
        raise UsageError("capture layers need their convention, and a convention needs capture layers",
                         "pass --capture-layers and --convention together, e.g. --capture-layers 1,3,4 "
                         "--convention sglang")
    options = make_options(verifier=verifier, target=target, endpoint=endpoint, token=token)
    source = read_source(src, from_layout, options, revision, endpoint, token)
    drafter = source.drafter
    cfg = drafter.config
    beside = source.known.target if source.known is not None else None
    if target is None and options.verifier is not None and compare(options.verifier, beside).verdict == "untold":
        options.verifier = options.verifier.joined(beside)  # --verifier alone: a name of the target the sidecar knows
    facts = sidecar_facts(drafter, options, None, trained_with=trained_with)
    if options.target is not None:  # --target states the target's shape: it wins over what the files say
        shape = {key: value for key, value in options.target.model_dump().items()
                 if key in SHAPE and value is not None}
        facts["target"] = {**(facts["target"] or options.target.model_dump()), **shape}
    facts["ids_as_written"] = ids_as_written(cfg, options, [source.detection.layout])
    notes = list(drafter.notes)
    claimed = [name for name, given in (("target", target or verifier), ("trained_with", trained_with))
               if given is not None]
    if capture_layers is not None and convention is not None:  # checked before the slow part: hashing
        family, depth = capture_context(cfg.family, options.target, cfg.target)
        facts["capture_boundaries"] = training_boundaries(capture_layers, convention, family=family,
                                                          num_layers=depth, num_aux=cfg.num_aux_hidden_states)
        claimed.append("capture_boundaries")
        if facts["capture_boundaries"] != cfg.capture_boundaries:
            written = "no capture ids" if cfg.capture_boundaries is None else f"boundaries {cfg.capture_boundaries}"
            notes.append(f"the config names {written}; recorded the training's {facts['capture_boundaries']} "
                         "(`eagle3-convert validate` compares configs with it)")
    digests = tensor_digests(drafter)
    facts["drafter_id"] = drafter_id(drafter, digests)
    former = config_and_weights_id(drafter, digests)
    history = carry_history(facts, sidecar.read(source.path)[0] if source.known else None, {former})
    notes += history
    if source.sidecar and not history:
        notes.append(f"imported eagle3-convert.json: target, provenance and {len(facts['lineage'])} lineage edge(s)")
    location = Location(layout=source.detection.layout, uri=source.uri)
    conflicts: list[dict[str, Any]] = []
    with opened(registry) as store:
        if parent is not None:
            mother = add_checkpoint(parent, revision=None, registry=store, endpoint=endpoint, token=token)
            if mother.record.drafter_id == facts["drafter_id"]:
                raise UsageError("--parent holds the same weights as SRC", "name the drafter SRC was fine-tuned from")
            facts["lineage"] = [*facts["lineage"], finetune.parent_edge(
                mother.location, location, mother.record.drafter_id, sidecar.tool_name())]
        record, more = record_facts(store, facts, locations=[location], claimed=claimed, conflicts=conflicts,
                                    former_ids=[former], weights_keys=[weights_key(drafter)],
                                    reason="registry add " + " ".join(flag for flag, given in (
                                        ("--target", target), ("--verifier", verifier), ("--capture-layers",
                                        capture_layers), ("--trained-with", trained_with)) if given is not None))
        more += finetune.warnings(store, record, drafter, src)
    return Recorded(record, location, notes + more, conflicts)


def record_conversion(result: ConvertResult, registry: RegistryArg = None) -> Recorded:
    """Record a finished conversion: both copies and every lineage edge its sidecar carries. A cast records
    two drafters: the source's, with its copy, and the new one derived from it, with the cast edge. Capture
    layers restated with --capture-layers replace the record's (the user's explicit word)."""
    source = Location(layout=result.source.detection.layout, uri=result.source.uri)
    dest = Location(layout=result.layout, uri=str(result.dest.resolve()))
    source_key = weights_key(result.source.drafter)
    dest_keys = [source_key]
    if result.facts.get("derived_from"):  # a cast holds other bytes: its key is read from what was written
        written = _readable(result.dest)
        dest_keys = [weights_key(written)] if written is not None else []
    restated = result.facts.get("capture_restated") or {}
    claimed = ["capture_boundaries"] if restated.get("corrects_record") else []
    reason = f"convert {restated.get('by')} --correct-record" if claimed else "recorded"
    conflicts: list[dict[str, Any]] = []
    notes: list[str] = []
    with opened(registry) as store:
        with store.transaction():
            # --force may have replaced another drafter, or this one in another layout, there: that copy is gone.
            store.forget_location(dest.uri, keep=result.drafter_id, layout=result.layout)
            copies = [source, dest]
            if result.facts.get("derived_from"):
                parent = {**result.facts, "drafter_id": result.source_id, "lineage": [
                    edge for edge in result.facts.get("lineage") or [] if edge.get("kind") != "cast"]}
                _, notes = record_facts(store, parent, locations=[source], claimed=claimed, conflicts=conflicts,
                                        former_ids=result.former_ids, weights_keys=[source_key], reason=reason)
                copies = [dest]
            record, more = record_facts(store, result.facts, locations=copies, claimed=claimed, conflicts=conflicts,
                                        former_ids=[] if result.facts.get("derived_from") else result.former_ids,
                                        weights_keys=dest_keys, reason=reason)
            if not result.facts.get("derived_from"):  # (a cast is a new drafter: no parent of its own recorded)
                more += finetune.warnings(store, record, result.source.drafter, str(dest.uri))
    return Recorded(record, dest, notes + more, conflicts)


def record_acceptance(src: str, measured: dict[str, Any], *, revision: str | None = None,
                      registry: RegistryArg = None, endpoint: str | None = None, token: str | None = None) -> Recorded:
    """Record the drafter at `src` (as `registry add` does: its id is its weights) and one acceptance `verify`
    measured of it (`measured`: the Acceptance fields)."""
    with opened(registry) as store:
        recorded = add_checkpoint(src, revision=revision, registry=store, endpoint=endpoint, token=token)
        store.add_acceptance(recorded.record.drafter_id,
                             Acceptance.model_validate({**measured, "tool": sidecar.tool_name()}))
    return recorded


def acceptance_of(drafter_id: str, registry: RegistryArg = None) -> list[Acceptance]:
    """What `verify` measured of the drafter (none where there is no registry: nothing is created to say so)."""
    try:
        with opened(registry, create=False) as store:
            return store.acceptance(drafter_id)
    except NoRegistry:
        return []


def list_records(target: str | None = None, registry: RegistryArg = None) -> list[DrafterRecord]:
    """Every recorded drafter, oldest first; only those trained on `target` if given: a name the record knows its
    target by, or a local copy of it (a directory or config.json: any of its names, or its config digest).
    NoRegistry where there is none (nothing is created)."""
    with opened(registry, create=False) as store:
        if target is None or not Path(target).exists():
            return store.list(target)
        identity = load_target(target)
        return [r for r in store.list() if r.target is not None and identity.shares_identity(r.target)]


def _known(store: RegistryStore, drafter_id: str) -> DrafterRecord:
    record = store.get(drafter_id)
    if record is None:
        raise RegistryError(f"no drafter {drafter_id} in the registry {getattr(store, 'path', '')}".rstrip(),
                            hint="check the id against `eagle3-convert registry list`, or --registry")
    return record


def show(drafter_id: str, registry: RegistryArg = None) -> DrafterRecord:
    """The drafter with this id or unique id prefix; RegistryError if there is none."""
    with opened(registry, create=False) as store:
        return _known(store, drafter_id)


def lineage(drafter_id: str, registry: RegistryArg = None) -> list[LineageEdge]:
    """The conversions recorded for a drafter, oldest first; RegistryError if it is unknown."""
    with opened(registry, create=False) as store:
        return _known(store, drafter_id).lineage


def remove(drafter_id: str, registry: RegistryArg = None) -> str:
    """Forget a drafter with its locations and lineage; returns its full id (RegistryError if unknown)."""
    with opened(registry, create=False) as store, store.transaction():  # nothing to forget where none is
        found = _known(store, drafter_id).drafter_id
        store.remove(found)
        return found



@dataclass(frozen=True)
class RegistryFact:
    """A fact convert takes from the registry, with the record it comes from: printed, and kept in the
    output's sidecar (`from_registry`), so what was written can be traced to it."""

    capture_boundaries: list[int]
    drafter_id: str
    recorded_at: str  # when the record was last updated (UTC, ISO 8601)

    def as_dict(self) -> dict[str, Any]:
        return {"capture_boundaries": self.capture_boundaries, "drafter_id": self.drafter_id,
                "recorded_at": self.recorded_at}

    @classmethod
    def of(cls, record: DrafterRecord) -> RegistryFact:
        when = record.updated_at.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")
        return cls(list(record.capture_boundaries or []), record.drafter_id, when)


def known_record(path: str | os.PathLike[str], registry: RegistryArg = None, *, uri: str | None = None,
                 drafter: Drafter | None = None) -> DrafterRecord | None:
    """The registry's record of the drafter in directory `path`, or None; for every command that reads a drafter
    and checks config.json against what is known of its weights (provenance.py).

    Found by its weights, always (`drafter`: the weights as already read, else read here from the headers):
    their lookup key (fingerprint.weights_key) names the record, whatever the path and whether or not a sidecar
    came along; where a key names several drafters (a collision), the full id picks (it reads every byte). A
    record made before keys were kept (schema v7) is found as it was then: by the drafter id its sidecar names,
    the Hub's LFS hashes of its files, or where it was recorded; but a record whose keys name other weights is
    never the record of these. Where there is no registry nothing is created: looking up writes nothing."""
    try:
        with opened(registry, create=False) as store:
            return _recorded_at(store, Path(path), uri, drafter)
    except NoRegistry:
        return None


def record_of(drafter_id: str | None, registry: RegistryArg = None) -> DrafterRecord | None:
    """The record of exactly this drafter, or None (a missing registry is not created)."""
    if not drafter_id:
        return None
    try:
        with opened(registry, create=False) as store:
            return store.get(drafter_id)
    except NoRegistry:
        return None


def _readable(root: Path) -> Drafter | None:
    try:
        return read_source(str(root)).drafter
    except Eagle3Error:
        return None  # the command reading it reports why


def _recorded_at(store: RegistryStore, root: Path, uri: str | None, drafter: Drafter | None) -> DrafterRecord | None:
    drafter = drafter or _readable(root)
    key = weights_key(drafter) if drafter is not None else None
    if key is not None:
        ids = store.keyed(key)
        if len(ids) > 1:  # a sampled key shared by other weights: the full id decides
            ids = [drafter_id(drafter, tensor_digests(drafter))]
        for found in ids:
            if (record := store.get(found)) is not None:
                return record

    def of_these(record: DrafterRecord | None) -> DrafterRecord | None:
        """`record`, unless the keys it was recorded with name other weights than these."""
        if record is None or key is None:
            return record
        return record if not store.keys_of(record.drafter_id) else None

    known = sidecar.read(root)[0] or {}  # its drafter id names the weights, whatever config.json says now
    if isinstance(known.get("drafter_id"), str) and (record := of_these(store.get(known["drafter_id"]))):
        return record
    if uri and uri.startswith("hf://"):  # downloaded: its files' sha256 are the Hub's LFS hashes sync and publish keep
        owner = store.aliased(alias) if (alias := weights_alias(_file_hashes(root))) else None
        if owner is not None and (record := of_these(store.get(owner))) is not None:
            return record
    uris = {os.path.normpath(root.resolve()), uri}
    here = [r for r in store.list() if any(location.uri in uris for location in r.locations) and of_these(r)]
    return max(here, key=lambda r: r.updated_at) if here else None


def _file_hashes(root: Path) -> dict[str, str | None]:
    """sha256 of each weight file in `root`, by name: an HF-cache snapshot's link names its blob by that sha256
    (LFS files), else the bytes are read in bounded chunks."""
    out: dict[str, str | None] = {}
    for path in sorted(root.iterdir()):
        blob = os.path.basename(os.path.realpath(path))
        if path.name.endswith(WEIGHT_SUFFIXES) and path.is_symlink() and SHA256_HEX.fullmatch(blob):  # an LFS blob
            out[path.name] = blob
        elif path.name.endswith(WEIGHT_SUFFIXES) and path.is_file():
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1 << 24):
                    digest.update(chunk)
            out[path.name] = digest.hexdigest()
    return out


def record_publication(plan: Any, published: Any, registry: RegistryArg = None) -> Recorded:
    """Record a `publish` (hub.PublishPlan, hub.Published): the Hub copy at its commit and the edge from the
    copy it was published from; with the synced twins it disagrees with (not merged, to be told)."""
    hub = Location.hub(published.repo_id, plan.layout, published.commit)
    source = Location(layout=plan.source.detection.layout, uri=plan.source.uri)
    # The sidecar could only name the repo; the registry knows the commit.
    # An edge the published sidecar names by `local:NAME` is one this uploader knows by path (recorded when it
    # converted, and the edge appended below): recording the private-name twin would count it twice.
    lineage = [_at_commit(edge, f"hf://{published.repo_id}", hub.uri) for edge in plan.facts.get("lineage") or []
               if isinstance(edge, dict) and not _names_a_private_copy(edge)]
    lineage.append(LineageEdge(source=source, dest=hub, tool=sidecar.tool_name()).model_dump(mode="json"))
    conflicts: list[dict[str, Any]] = []
    weights = weights_alias({f.path_in_repo: f.sha256 for f in plan.files})
    with opened(registry) as store, store.transaction():
        record, notes = record_facts(store, {**plan.facts, "lineage": lineage}, locations=[source, hub],
                                     conflicts=conflicts, weights_keys=[weights_key(plan.source.drafter)])
        if weights is not None:  # a copy of these bytes uploaded elsewhere without our sidecar joins this record
            store.add_alias(weights, record.drafter_id)
    return Recorded(record, hub, notes, conflicts)


def _names_a_private_copy(edge: dict[str, Any]) -> bool:
    return any(isinstance(end, dict) and str(end.get("uri")).startswith(ELSEWHERE_SCHEME)
               for end in (edge.get("source"), edge.get("dest")))


def _at_commit(edge: dict[str, Any], plain: str, pinned: str) -> dict[str, Any]:
    dest = edge.get("dest")
    if isinstance(dest, dict) and dest.get("uri") == plain:
        return {**edge, "dest": {**dest, "uri": pinned}}
    return edge
