"""A drafter fine-tuned from another (`registry add CHILD --parent PARENT`) whose vocab map is not its parent's.

SpecForge's `scripts/train_eagle3.py` regenerated d2t/t2d from the new data when fine-tuning from a checkpoint
(`--ckpt-dir` / `--resume`) and overwrote the loaded map: "lm_head column i was trained to predict token
i + d2t_old[i], but is now asked to predict i + d2t_new[i]" (sgl-project/SpecForge #534, open: it adds
`--regenerate-vocab-mapping` and keeps the checkpoint's map by default). The train/eval accuracies are computed
against the new map, so nothing in the run shows it; acceptance collapses. A child whose map differs from its
parent's is therefore warned of (W-VOCAB-REGENERATED) when it is recorded with its parent and whenever a
conversion of it is recorded, until `verify` has measured it: acceptance is the final word, and a measured child
is no longer a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .convert import make_options, read_source
from .drafter import Drafter
from .errors import Eagle3Error
from .registry.base import RegistryStore
from .registry.models import DrafterRecord, LineageEdge, Location
from .vocab_map import VocabMap

CODE = "W-VOCAB-REGENERATED"


def parent_edge(parent: Location, child: Location, parent_id: str, tool: str) -> dict[str, Any]:
    """The lineage edge `registry add --parent` records: the child derives from the parent's weights."""
    return LineageEdge(source=parent, dest=child, tool=tool, kind="finetune",
                       derived_from=parent_id).model_dump(mode="json")


def map_difference(child: VocabMap | None, parent: VocabMap | None, vocab_size: int) -> str | None:
    """How the child's draft->target map differs from its parent's (None: the same map)."""
    ours = child.target_ids if child is not None else tuple(range(vocab_size))
    theirs = parent.target_ids if parent is not None else tuple(range(vocab_size))
    if ours == theirs:
        return None
    moved = sum(1 for a, b in zip(ours, theirs) if a != b) + abs(len(ours) - len(theirs))
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    shown = (f"e.g. draft id {first} maps to target {ours[first]} here and {theirs[first]} in the parent"
             if first < min(len(ours), len(theirs)) else f"{len(ours)} draft ids here, {len(theirs)} in the parent")
    return f"{moved} of {max(len(ours), len(theirs))} draft ids map to other target ids than in its parent ({shown})"


def warnings(store: RegistryStore, record: DrafterRecord, drafter: Drafter, where: str) -> list[str]:
    """W-VOCAB-REGENERATED for each recorded parent of `record` whose map differs from `drafter`'s, read from a
    local copy of the parent (none where no copy of it is at hand, or the child has a measured acceptance)."""
    if store.acceptance(record.drafter_id):
        return []
    out = []
    for edge in record.lineage:
        if edge.kind != "finetune" or edge.derived_from is None:
            continue
        parent = _read_parent(store, edge)
        if parent is None:
            continue
        differs = map_difference(drafter.vocab, parent.vocab, drafter.config.vocab_size)
        if differs:
            out.append(f"WARNING: {differs}: fine-tuned from {edge.derived_from[:12]} with a regenerated vocab map "
                       f"(SpecForge #534), every lm_head row it carried over predicts another token now, and "
                       f"acceptance collapses unless it was trained long enough to relearn them [{CODE}]; hint: "
                       f"measure it: `eagle3-convert verify {where} --target-model TARGET` (a measured acceptance "
                       "ends this warning), or fine-tune again "
                       "keeping the parent's d2t/t2d")
    return out


def _read_parent(store: RegistryStore, edge: LineageEdge) -> Drafter | None:
    parent = store.get(edge.derived_from or "")
    uris = [edge.source.uri, *(loc.uri for loc in (parent.locations if parent else []))]
    for uri in dict.fromkeys(uris):
        if not Path(uri).is_dir():
            continue
        try:
            return read_source(uri, "auto", make_options(), None, None, None).drafter
        except Eagle3Error:
            continue
    return None
