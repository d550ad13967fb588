"""From what a checkpoint says to what the registry records.

A checkpoint's facts are the dict its sidecar holds (`convert.sidecar_facts`, with its
`drafter_id` and `lineage`). They fill what the registry does not know yet; only a claim
the user makes (`registry add --capture-layers/--trained-with/--target`) replaces a
recorded value, because the registry keeps the TRAINING truth, which a later export may
have lost (SpecForge drops the capture ids; original EAGLE never wrote them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from ..converters.layer_ids import ENGINES, engine_boundaries
from ..errors import UsageError
from .models import DrafterRecord, LineageEdge, Location, TargetInfo
from .store import RegistryStore

BOUNDARY = "boundary"  # ids given as canonical boundaries (docs/formats.md §4)
CONVENTIONS = (BOUNDARY, *ENGINES)

_SCALARS = ("hidden_size", "draft_vocab_size", "vocab_size", "trained_with")


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
        # TargetIdentity also knows model_type, which the record does not keep; the store validates the rest.
        fields["target"] = {key: value for key, value in target.items() if key in TargetInfo.model_fields}
    return fields


def _filled(known: TargetInfo, new: dict[str, Any]) -> dict[str, Any]:
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


def record_facts(store: RegistryStore, facts: dict[str, Any], *, locations: Iterable[Location] = (),
                 claimed: Iterable[str] = ()) -> tuple[DrafterRecord, list[str]]:
    """Record a drafter's facts, its copies at `locations` and the lineage the facts carry.

    Facts named in `claimed` (target, capture_boundaries, trained_with) are what the user
    asserts: they replace recorded values. The others only fill what the registry does not
    know. One transaction: a concurrent writer never sees half of it.
    """
    claimed = frozenset(claimed)
    fields = record_fields(facts)
    edges, notes = lineage_edges(facts.get("lineage"))
    with store.transaction():
        known = store.get(facts["drafter_id"])
        if known is not None:
            if "capture_boundaries" not in claimed:
                fields.pop("capture_boundaries")  # the recorded training truth stands
            if known.trained_with is not None and "trained_with" not in claimed:
                fields.pop("trained_with", None)
            if known.target is not None and "target" in fields and "target" not in claimed:
                fields["target"] = _filled(known.target, fields["target"])
        record = store.upsert_drafter(facts["drafter_id"], **fields, locations=locations, lineage=edges)
    return record, notes


def training_boundaries(ids: Sequence[int], convention: str, *, family: str = "default",
                        num_layers: int | None = None, num_aux: int | None = None) -> list[int]:
    """The boundaries the training captured, from ids given in `convention` (docs/formats.md §4)."""
    if convention not in CONVENTIONS:
        raise UsageError(f"unknown capture-id convention {convention!r}", f"choose one of: {', '.join(CONVENTIONS)}")
    boundaries = list(ids) if convention == BOUNDARY else engine_boundaries(convention, ids, family, num_layers)
    if boundaries is None or any(b < 0 for b in boundaries):
        raise UsageError(f"{convention} ids {list(ids)} capture no hidden state (target family: {family})",
                         "give the ids exactly as the training config spelled them, with its --convention")
    if num_layers is not None and max(boundaries, default=0) > num_layers:
        raise UsageError(f"{convention} ids {list(ids)} mean boundaries {boundaries}, beyond the target's "
                         f"{num_layers} layers", "check --capture-layers, --convention and --target")
    if num_aux is not None and len(boundaries) != num_aux:
        raise UsageError(f"{len(boundaries)} capture layers given, but the drafter's fc fuses {num_aux} hidden states",
                         "give one id per captured layer, as the training config listed them")
    return boundaries
