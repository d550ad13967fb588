"""The drafter id: one digest for one trained model, whatever layout holds it.

It covers what defines the model — the canonical config (`DrafterConfig.semantic_dict`),
each tensor's bytes under its CANONICAL name, and the draft vocabulary — and nothing a
layout changes (key prefixes, config spelling, how d2t/t2d are stored).
"""

from __future__ import annotations

import hashlib
import json

from .drafter import Drafter
from .safetensors_io import tensor_sha256


def tensor_digests(drafter: Drafter) -> dict[str, str]:
    """sha256 of every tensor's raw bytes by canonical name (reads every byte once, in bounded chunks)."""
    return {name: tensor_sha256(src) for name, src in sorted(drafter.tensors.items())}


def drafter_id(drafter: Drafter, digests: dict[str, str]) -> str:
    cfg = drafter.config
    semantic = cfg.semantic_dict()
    # Where the drafter is served from does not change the model; what it captures does.
    payload = {
        "config": semantic,
        "tensors": {name: [drafter.tensors[name].dtype, list(drafter.tensors[name].shape), digest]
                    for name, digest in sorted(digests.items())},
        "draft_vocab": list(drafter.vocab.target_ids) if drafter.vocab is not None else None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
