"""From what a checkpoint says to what the registry records.

A checkpoint's facts are the dict its sidecar holds (`convert.sidecar_facts`, with its
`drafter_id` and `lineage`). They fill what the registry does not know yet; only a claim
the user makes (`registry add --capture-layers/--trained-with/--target`) replaces a
recorded value, because the registry keeps the TRAINING truth, which a later export may
have lost (SpecForge drops the capture ids; original EAGLE never wrote them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from ..sidecar import tool_name
from ..target_identity import TargetIdentity, compare
from .models import RECORDED_TARGET, DrafterRecord, LineageEdge, Location, RecordChange
from .base import RegistryStore

CONTENT = "content"  # id_kind: the drafter id of fingerprint.py (the weights: tensor bytes, draft vocab)
FINGERPRINT = "hub-fingerprint"  # id_kind: registry sync's id of a Hub repo read without its weights
FORMER = "config-and-weights"  # id_kind of a record made before schema v5 (its id digested the config too)

_SCALARS = ("hidden_size", "draft_vocab_size", "vocab_size", "trained_with", "id_kind", "drafter_kind", "quantization")
_GAPS = ("hidden_size", "draft_vocab_size", "vocab_size", "trained_with")


def record_fields(facts: dict[str, Any]) -> dict[str, Any]:
    """upsert_drafter keyword arguments for what `facts` know (None means unknown, except for
    capture_boundaries, where it means the engine default)."""
    fields: dict[str, Any] = {
        "capture_boundaries": facts.get("capture_boundaries"),
        "ids_as_written": facts.get("ids_as_written") or {},
        "flags": facts.get("flags") or {},
    }
    fields.update({name: facts[name] for name in _SCALARS if facts.get(name) is not None})
    target = facts.get("target")
    if isinstance(target, dict) and any(value not in (None, []) for value in target.values()):
        # the facts the record keeps (not model_type); the store validates them
        fields["target"] = {key: value for key, value in target.items() if key in RECORDED_TARGET}
    return fields


def _filled(known: TargetIdentity, new: dict[str, Any]) -> dict[str, Any]:
    """The recorded target with the gaps `new` can fill filled; recorded values win."""
    merged = known.model_dump()
    for key, value in new.items():
        if merged.get(key) in (None, []):
            merged[key] = value
    return merged


def lineage_edges(raw: object) -> tuple[list[LineageEdge], list[str]]:
    """The well-formed edges of a sidecar's lineage list, and a note for each that is not."""
    edges: list[LineageEdge] = []
    notes: list[str] = []
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        try:
            edges.append(LineageEdge.model_validate(item))
        except ValidationError as exc:
            notes.append(f"lineage entry {i} of eagle3-convert.json was not recorded: {exc.errors()[0]['msg']}")
    return edges, notes


def disagreements(known: DrafterRecord, boundaries: list[int] | None, target: str | None) -> list[dict[str, Any]]:
    """What a reading of the Hub (`boundaries`, `target` name) says against the record `known`: sync's conflict
    rule. A file that names no capture layers does not contradict a record that knows them (the export lost them;
    the record keeps the training truth), nor does a target the Hub does not name."""
    out = []
    if boundaries is not None and boundaries != known.capture_boundaries:
        out.append({"field": "capture_boundaries", "hub": boundaries, "registry": known.capture_boundaries})
    recorded = known.target.name_or_path if known.target else None
    if target and recorded and not known.target.known_as(target):  # any name the record knows its target by
        out.append({"field": "target", "hub": target, "registry": recorded})
    return out


def conflict_message(found: list[dict[str, Any]]) -> str:
    return "; ".join(f"the Hub says {c['field']} {c['hub']}, the registry {c['registry']}" for c in found)


def hub_uri(record: DrafterRecord) -> str:
    return next((loc.uri for loc in record.locations if loc.kind == "hub"), "the Hub")


def _gaps(record: DrafterRecord, twin: DrafterRecord) -> dict[str, Any]:
    """upsert_drafter fields that fill what `record` does not know with what `twin` knows; record's values win."""
    fields: dict[str, Any] = {name: getattr(twin, name) for name in _GAPS
                              if getattr(record, name) is None and getattr(twin, name) is not None}
    if twin.target is not None:
        filled = _filled(record.target, twin.target.model_dump()) if record.target else twin.target.model_dump()
        if record.target is None or filled != record.target.model_dump():
            fields["target"] = filled
    for name in ("ids_as_written", "flags"):  # upsert merges these key by key
        missing = {k: v for k, v in getattr(twin, name).items() if k not in getattr(record, name)}
        if missing:
            fields[name] = missing
    return fields


def merge_twins(store: RegistryStore, record: DrafterRecord, uris: Iterable[str], twins: Iterable[str] = (),
                conflicts: list[dict[str, Any]] | None = None) -> tuple[DrafterRecord, list[str]]:
    """Merge into `record` (content-identified) each record `registry sync` named by a Hub fingerprint that holds
    one of the Hub commits `uris` (or is named in `twins`): one drafter, one record. Its copies and lineage move,
    its facts fill only the record's gaps, its id becomes an alias. A twin whose capture boundaries or target
    contradict the record is not merged: both stay as they are, and the disagreement is appended to `conflicts`
    ({drafter_id, uri, code, message, conflicts}, as sync reports one) and to the notes. Runs in the caller's
    transaction."""
    candidates = list(twins)
    for uri in uris:
        if uri.startswith("hf://") and "@" in uri:
            candidates += store.holding(uri)
    notes: list[str] = []
    merged = False
    for twin_id in dict.fromkeys(candidates):
        twin = store.get(twin_id) if twin_id != record.drafter_id else None
        if twin is None or twin.drafter_id != twin_id or twin.id_kind != FINGERPRINT:
            continue
        where = hub_uri(twin)
        found = disagreements(record, twin.capture_boundaries, twin.target.name_or_path if twin.target else None)
        if found:
            message = conflict_message(found)
            if conflicts is not None:
                conflicts.append({"drafter_id": twin_id, "uri": where, "code": "E-SYNC-CONFLICT",
                                  "message": message, "conflicts": found})
            notes.append(f"NOT merged: the record registry sync made of {where} (hub fingerprint {twin_id[:12]}) "
                         f"is this drafter, but {message}; both records kept [E-SYNC-CONFLICT]")
            continue
        gaps = _gaps(record, twin)
        if gaps:
            store.upsert_drafter(record.drafter_id, **gaps)
        store.absorb(twin_id, record.drafter_id)
        merged = True
        notes.append(f"merged the record registry sync made of {where} (hub fingerprint {twin_id[:12]}) into this "
                     f"one: {len(twin.locations)} location(s), {len(twin.lineage)} lineage edge(s)"
                     + (f", filled {', '.join(sorted(gaps))}" if gaps else ""))
    if merged:
        again = store.get(record.drafter_id)
        assert again is not None  # written in this transaction
        record = again
    return record, notes


def _record_as_fields(record: DrafterRecord) -> dict[str, Any]:
    """upsert_drafter fields that copy everything `record` knows (not its id, copies or lineage)."""
    fields = record.model_dump(include={"capture_boundaries", "ids_as_written", "draft_vocab_size", "vocab_size",
                                        "hidden_size", "flags", "trained_with"})
    if record.target is not None:
        fields["target"] = record.target.model_dump()
    return fields


def adopt_former_ids(store: RegistryStore, drafter_id: str, former_ids: Iterable[str],
                     conflicts: list[dict[str, Any]] | None = None) -> list[str]:
    """Merge the records made before schema v5 under `former_ids` (fingerprint.config_and_weights_id of these
    weights) into the record of `drafter_id`: their facts (the training truth they hold) fill what that record
    does not know, their copies and lineage move, and each former id stays an alias (`registry show OLD` finds
    the record). A former record whose capture boundaries or target contradict the record is not merged: the
    disagreement goes to `conflicts` and the notes. Runs in the caller's transaction."""
    notes: list[str] = []
    for former in dict.fromkeys(former_ids):
        old = store.get(former) if former != drafter_id else None
        if old is None or old.drafter_id != former or old.id_kind != FORMER:
            continue  # unknown, merged already (an alias now), or not an old-rule record
        known = store.get(drafter_id)
        if known is None:
            store.upsert_drafter(drafter_id, **_record_as_fields(old), id_kind=CONTENT)
        else:
            found = disagreements(known, old.capture_boundaries, old.target.name_or_path if old.target else None)
            if found:
                message = "; ".join(f"the record {former[:12]} (before schema v5) says {c['field']} {c['hub']}, "
                                    f"the record {drafter_id[:12]} {c['registry']}" for c in found)
                if conflicts is not None:
                    conflicts.append({"drafter_id": former, "uri": next((loc.uri for loc in old.locations), ""),
                                      "code": "E-RECORD-CONFLICT", "message": message, "conflicts": found})
                notes.append(f"NOT merged: {message}; both records kept [E-RECORD-CONFLICT]")
                continue
            gaps = _gaps(known, old)
            if gaps:
                store.upsert_drafter(drafter_id, **gaps)
        store.absorb(former, drafter_id)
        notes.append(f"merged the record {former[:12]} (its id from before drafter ids were the weights alone) into "
                     f"{drafter_id[:12]}; the old id still finds it")
    return notes


def _target_learned(known: TargetIdentity, new: dict[str, Any], claimed: bool) -> tuple[dict[str, Any], list[str]]:
    """The recorded target after a reading names `new`: its gaps filled, and the names `new` has learned where the
    two are one target (target_identity.compare), or where the user claims `new` is the target (`claimed`): a
    name of the recorded target when no fact tells them apart, a correction when facts differ. With the names
    learned."""
    try:
        given = TargetIdentity.model_validate(new)
    except ValidationError:
        return known.model_dump(), []
    found = compare(given, known)
    if claimed and found.verdict == "differ":
        return given.model_dump(), []
    merged = TargetIdentity.merged(known, given)
    assert merged is not None
    if claimed and found.verdict == "untold":
        merged = merged.named_also(*given.names)
    learned = [name for name in merged.names if not known.known_as(name)]
    return merged.model_dump(), learned


def record_facts(store: RegistryStore, facts: dict[str, Any], *, locations: Iterable[Location] = (),
                 claimed: Iterable[str] = (), twins: Iterable[str] = (),
                 conflicts: list[dict[str, Any]] | None = None, former_ids: Iterable[str] = (),
                 weights_keys: Iterable[str] = (), reason: str = "recorded") -> tuple[DrafterRecord, list[str]]:
    """Record a drafter's facts, its copies at `locations`, the lineage the facts carry and the lookup keys of its
    weights (`weights_keys`: fingerprint.weights_key, by which every command finds the record again).

    Facts named in `claimed` (target, capture_boundaries, trained_with) are what the user
    asserts (`reason`: the command that says so): they replace recorded values, and the record's history keeps
    each change. The others only fill what the registry does not know; a target named otherwise adds its
    names only when it is the recorded one (target_identity.compare). A content-identified drafter absorbs the
    Hub-fingerprint records of the same Hub commits (merge_twins; a disagreement goes to `conflicts`), and the
    records of its `former_ids` (adopt_former_ids). One transaction: a concurrent writer never sees half of it.
    """
    claimed = frozenset(claimed)
    locations = list(locations)
    fields = record_fields(facts)
    edges, notes = lineage_edges(facts.get("lineage"))
    changes: list[RecordChange] = []
    with store.transaction():
        notes += adopt_former_ids(store, facts["drafter_id"], former_ids, conflicts)
        known = store.get(facts["drafter_id"])
        if known is not None:
            if "capture_boundaries" not in claimed:
                fields.pop("capture_boundaries")  # the recorded training truth stands
            if known.trained_with is not None and "trained_with" not in claimed:
                fields.pop("trained_with", None)
            if known.target is not None and "target" in fields:
                fields["target"], learned = _target_learned(known.target, fields["target"], "target" in claimed)
                if learned:
                    notes.append(f"the record of drafter {known.drafter_id[:12]} learned {', '.join(learned)} as "
                                 f"{'names' if len(learned) > 1 else 'a name'} of its target "
                                 f"{known.target.name_or_path or '(unnamed)'}")
            changes = _changes(known, fields, claimed, reason)
        record = store.upsert_drafter(facts["drafter_id"], **fields, locations=locations, lineage=edges)
        for change in changes:
            store.add_change(record.drafter_id, change)
        if changes:
            record = store.get(record.drafter_id) or record
        for key in weights_keys:
            store.add_weights_key(key, record.drafter_id)
        if record.id_kind == CONTENT:
            record, merged = merge_twins(store, record, [loc.uri for loc in locations], twins, conflicts)
            notes += merged
    return record, notes


def _changes(known: DrafterRecord, fields: dict[str, Any], claimed: frozenset[str], reason: str) -> list[RecordChange]:
    """A history entry for each recorded fact the upsert replaces (a claim) and each name its target learns."""
    out = []
    for name in ("capture_boundaries", "trained_with"):
        if name in claimed and name in fields and fields[name] != getattr(known, name):
            out.append(RecordChange(field=name, old=getattr(known, name), new=fields[name], reason=reason,
                                    tool=tool_name()))
    if known.target is not None and "target" in fields:
        old = {k: v for k, v in known.target.model_dump().items() if k in RECORDED_TARGET}
        new = {k: v for k, v in fields["target"].items() if k in RECORDED_TARGET}
        if old != new:
            out.append(RecordChange(field="target", old=old, new=new, reason=reason, tool=tool_name()))
    return out
