"""The drafter id: a drafter is its weights, whatever layout or config holds them.

The id digests each tensor under its CANONICAL name (dtype, shape, sha256 of its bytes) and the
draft vocabulary (part of the weights: which target token each head row proposes), and nothing
else: not the layout (key prefixes, how d2t/t2d are stored), not the config (its spelling, its
capture ids, its target). So the same weights under an edited config are the same drafter, and the
record of that drafter can contradict the edit. A dtype change (`--outtype`) changes the bytes: a
new drafter, derived from the first (convert records the edge as a cast).

Ids computed before this rule (schema v3 and older) also digested the canonical config:
`config_and_weights_id` recomputes one, so that a record or sidecar made then is recognised
when its copy is read again (records.py merges it into the weights id and keeps it as an alias).
"""

from __future__ import annotations

import hashlib
import json

from .drafter import Drafter
from .safetensors_io import COPY_CHUNK, tensor_sha256


def tensor_digests(drafter: Drafter, workers: int = 1) -> dict[str, str]:
    """sha256 of every tensor's raw bytes by canonical name (reads every byte once, in bounded chunks).

    With `workers` > 1 the tensors are hashed that many at a time, largest first (hashlib releases the GIL):
    convert hashes beside its copy, and one core's sha256 (~2 GB/s) is otherwise its critical path. Each
    worker then reads in 1/workers of the usual buffer, so the memory held is what one worker held; tensors
    computed chunk by chunk (GGUF's permuted rows) are hashed one at a time, as their chunks are not bounded
    by that buffer (peak RSS of --from gguf is the tightest against issue 7's 100 MiB).
    """
    plain = all(not hasattr(src, "chunks") for src in drafter.tensors.values())
    if workers <= 1 or len(drafter.tensors) < 2 or not plain:
        return {name: tensor_sha256(src) for name, src in sorted(drafter.tensors.items())}
    from concurrent.futures import ThreadPoolExecutor

    chunk = max(COPY_CHUNK // workers, 1 << 20)
    names = sorted(drafter.tensors, key=lambda n: -drafter.tensors[n].nbytes)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        digests = dict(zip(names, pool.map(lambda n: tensor_sha256(drafter.tensors[n], chunk), names)))
    return {name: digests[name] for name in sorted(digests)}


def _weights(drafter: Drafter, digests: dict[str, str]) -> dict:
    return {
        "tensors": {name: [drafter.tensors[name].dtype, list(drafter.tensors[name].shape), digest]
                    for name, digest in sorted(digests.items())},
        "draft_vocab": list(drafter.vocab.target_ids) if drafter.vocab is not None else None,
    }


def _digest(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def drafter_id(drafter: Drafter, digests: dict[str, str]) -> str:
    """The id of the weights: canonical tensor names, dtypes, shapes and bytes, and the draft vocabulary."""
    return _digest(_weights(drafter, digests))


def config_and_weights_id(drafter: Drafter, digests: dict[str, str]) -> str:
    """The id this drafter had before ids were its weights alone (it digested the canonical config too)."""
    return _digest({"config": drafter.config.semantic_dict(), **_weights(drafter, digests)})


def _where(src) -> tuple:
    """Where a tensor's bytes come from, without reading them (the stored name aside)."""
    if hasattr(src, "file") and hasattr(src, "start"):
        return (str(src.file), src.start, getattr(src, "end", None), src.dtype, tuple(src.shape))
    data = getattr(src, "data", None)
    return (type(src).__name__, src.dtype, tuple(src.shape), hashlib.sha256(data).hexdigest() if data else id(src))


def reading_differences(a: Drafter, b: Drafter, names: tuple[str, str] = ("one", "the other")) -> list[str]:
    """What two readings of one checkpoint disagree on: the canonical config, and the weights the drafter id
    covers ([] when both read the same drafter). Reads no tensor bytes: tensors are compared by where their
    bytes lie."""
    out: list[str] = []
    sa, sb = a.config.semantic_dict(), b.config.semantic_dict()
    for key in sorted(set(sa) | set(sb)):
        if sa.get(key) != sb.get(key):
            out.append(f"{key} {sa.get(key)!r} as {names[0]}, {sb.get(key)!r} as {names[1]}")
    if set(a.tensors) != set(b.tensors):
        only = sorted(set(a.tensors) ^ set(b.tensors))
        out.append(f"tensors {', '.join(only[:3])}{' ...' if len(only) > 3 else ''} in one reading only")
    else:
        moved = [n for n in sorted(a.tensors) if _where(a.tensors[n]) != _where(b.tensors[n])]
        if moved:
            out.append(f"tensor {moved[0]} read from other bytes")
    va = list(a.vocab.target_ids) if a.vocab is not None else None
    vb = list(b.vocab.target_ids) if b.vocab is not None else None
    if va != vb:
        out.append("the draft vocabulary")
    return out
