"""The drafter id: a drafter is its weights, whatever layout or config holds them.

The id digests each tensor under its CANONICAL name (dtype, shape, sha256 of its bytes) and the
draft vocabulary (part of the weights: which target token each head row proposes), and nothing
else: not the layout (key prefixes, how d2t/t2d are stored), not the config (its spelling, its
capture ids, its target). So the same weights under an edited config are the same drafter, and the
record of that drafter can contradict the edit. A dtype change (`--outtype`) changes the bytes: a
new drafter, derived from the first (convert records the edge as a cast).

The id reads every byte. Finding a drafter's record must not: `weights_key` digests what the headers say
(canonical names, dtypes, shapes), eight 64-byte windows of each tensor's bytes spread from its first to its
last byte, and the draft vocabulary. It is a lookup key, never an identity: the registry keeps every id a key
was recorded for, and a command that takes a fact from a record it found by key alone checks the full id
before it writes (docs/formats.md §10 says why a collision cannot make a contradiction pass).

Ids computed before this rule (schema v3 and older) also digested the canonical config:
`config_and_weights_id` recomputes one, so that a record or sidecar made then is recognised
when its copy is read again (records.py merges it into the weights id and keeps it as an alias).
"""

from __future__ import annotations

import hashlib
import json
import os

from .drafter import Drafter
from .errors import FormatError
from .safetensors_io import COPY_CHUNK, HINT_CORRUPT, InMemoryTensor, TensorSource, tensor_sha256

KEY_WINDOWS, KEY_WIDTH = 8, 64  # weights_key's sample of each tensor: 512 bytes, first and last included


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


def sample_spans(nbytes: int, windows: int, width: int) -> list[tuple[int, int]]:
    """[start, end) of `windows` spans of `width` bytes spread evenly over `nbytes` (first and last included);
    the whole range when it is no longer than all of them together."""
    if nbytes <= windows * width:
        return [(0, nbytes)]
    step = (nbytes - width) / (windows - 1)
    return [(round(i * step), round(i * step) + width) for i in range(windows)]


def tensor_sample(src: TensorSource, windows: int, width: int) -> bytes:
    """The bytes of `sample_spans` of one tensor, concatenated: a plain stored tensor is read at those offsets
    only (a few hundred bytes, not reported to `observe_reads`, whose observers see tensors read or streamed);
    one computed while streamed (GGUF's permuted rows) is streamed once."""
    spans = sample_spans(src.nbytes, windows, width)
    if isinstance(src, InMemoryTensor):
        return b"".join(src.data[a:b] for a, b in spans)
    if hasattr(src, "chunks"):
        out, at = bytearray(), 0
        for part in src.chunks():
            part = bytes(part)
            out += b"".join(part[max(a - at, 0):b - at] for a, b in spans if a < at + len(part) and b > at)
            at += len(part)
        return bytes(out)
    try:
        with open(src.file, "rb") as f:
            parts = [os.pread(f.fileno(), b - a, src.start + a) for a, b in spans]
    except OSError as exc:
        raise FormatError(f"{src.file}: cannot read tensor {src.name!r} ({exc.strerror or exc})",
                          "check the file and its permissions", code="E-FILE-READ") from None
    if sum(map(len, parts)) != sum(b - a for a, b in spans):
        raise FormatError(f"{src.file}: tensor {src.name!r} is cut short", HINT_CORRUPT, code="E-FILE-TRUNCATED")
    return b"".join(parts)


def weights_key(drafter: Drafter) -> str:
    """The lookup key of these weights (see the module's doc): what the headers say and a fixed sample of the
    bytes, under canonical names, so every layout's copy of the same weights has the same key."""
    sample = {name: [src.dtype, list(src.shape),
                     hashlib.sha256(tensor_sample(src, KEY_WINDOWS, KEY_WIDTH)).hexdigest()]
              for name, src in sorted(drafter.tensors.items())}
    vocab = list(drafter.vocab.target_ids) if drafter.vocab is not None else None
    return _digest({"key": 1, "tensors": sample, "draft_vocab": vocab})


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
