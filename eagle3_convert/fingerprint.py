"""The drafter id: one digest for one trained model, whatever layout holds it.

It covers what defines the model — the canonical config (`DrafterConfig.semantic_dict`),
each tensor's bytes under its CANONICAL name, and the draft vocabulary — and nothing a
layout changes (key prefixes, config spelling, how d2t/t2d are stored).
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


def _where(src) -> tuple:
    """Where a tensor's bytes come from, without reading them (the stored name aside)."""
    if hasattr(src, "file") and hasattr(src, "start"):
        return (str(src.file), src.start, getattr(src, "end", None), src.dtype, tuple(src.shape))
    data = getattr(src, "data", None)
    return (type(src).__name__, src.dtype, tuple(src.shape), hashlib.sha256(data).hexdigest() if data else id(src))


def reading_differences(a: Drafter, b: Drafter, names: tuple[str, str] = ("one", "the other")) -> list[str]:
    """What two readings of one checkpoint disagree on, in the terms the drafter id covers ([] when the id
    is the same for both). Reads no tensor bytes: tensors are compared by where their bytes lie."""
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
