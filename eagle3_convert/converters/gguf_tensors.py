"""GGUF tensor bytes: dtype changes per chunk (numpy), GGML's interleaved q/k rows, tensors computed
while streamed, and llama3's rope factor table. The layout (converters/gguf.py) uses them both ways."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ..errors import FormatError, RefusalError
from ..safetensors_io import TensorSource, iter_tensor_chunks, read_tensor_bytes
from ..vocab_map import VocabMap, encode_d2t

CHUNK = 4 * 1024 * 1024
ELEMENT = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}
OUTTYPES = {"bf16": "BF16", "f16": "F16", "f32": "F32"}  # --outtype -> the weights' GGUF dtype ("auto": as stored)


def written_dtype(name: str, src: TensorSource, outtype: str) -> str:
    """The dtype `src` is written in: norms and other vectors F32 (GGML multiplies them as F32), weights as
    `outtype` says; refused for a dtype llama.cpp's GGUF does not hold here."""
    if src.dtype not in ("F32", "F16", "BF16"):
        raise RefusalError(f"{name} is {src.dtype}; llama.cpp's GGUF holds F32, F16 or BF16 weights here",
                           "dequantize the drafter first", code="E-GGUF-DTYPE")
    return "F32" if len(src.shape) == 1 else OUTTYPES.get(outtype, src.dtype)


def _convert(data: bytes | memoryview, src: str, dst: str) -> bytes | memoryview:
    """Element-wise dtype change of one chunk; exact for widening, round-to-nearest-even for narrowing
    (gguf-py's F32 -> BF16 rule, NaN kept quiet)."""
    if src == dst:
        return data
    import numpy as np

    if src == "BF16":
        f32 = (np.frombuffer(data, dtype="<u2").astype("<u4") << 16).view("<f4")
    elif src == "F16":
        f32 = np.frombuffer(data, dtype="<f2").astype("<f4")
    else:
        f32 = np.frombuffer(data, dtype="<f4")
    if dst == "F32":
        return f32.tobytes()
    if dst == "F16":
        with np.errstate(over="ignore"):
            return f32.astype("<f2").tobytes()
    n = f32.view("<u4").astype("<u8")
    n = np.where((n & 0x7FFFFFFF) > 0x7F800000, (n & 0xFFFF0000) | (64 << 16), n)
    n = (n + (0x7FFF + ((n >> 16) & 1))) >> 16
    return n.astype("<u2").tobytes()


def exactly_back(data: bytes, stored: str, wanted: str) -> bytes | None:
    """`data` (dtype `stored`) in dtype `wanted`, if that loses nothing; else None."""
    back = _convert(data, stored, wanted)
    return bytes(back) if bytes(_convert(back, wanted, stored)) == bytes(data) else None


def _row_groups(src: TensorSource, group_bytes: int) -> Iterator[memoryview]:
    """The tensor's bytes in consecutive pieces of whole `group_bytes` groups (about CHUNK; the last may be
    shorter), each a view of one buffer reused for the next piece: a consumer uses a piece before asking for
    the next, as every consumer of iter_tensor_chunks does. No piece is copied to be yielded, so the memory a
    stream holds is this buffer, whatever the tensor's width (issue 16: gguf -> speculators peaked at 107 MiB
    on a 7168-wide drafter when each 3.7 MB head group was copied five times, in three threads at once)."""
    size = max(group_bytes, CHUNK - CHUNK % group_bytes) if group_bytes else CHUNK
    length = min(size, max(src.nbytes, 1))
    if group_bytes:  # whole groups: a tensor that does not divide into them is refused below, not reshaped
        length = max(group_bytes, length - length % group_bytes)
    buf = memoryview(bytearray(length))
    fill = 0
    for part in iter_tensor_chunks(src, len(buf)):
        part = memoryview(part).cast("B")
        while part:
            n = min(len(part), len(buf) - fill)
            buf[fill:fill + n] = part[:n]
            fill += n
            part = part[n:]
            if fill == len(buf):
                yield buf
                fill = 0
    if group_bytes and fill % group_bytes:
        raise FormatError(f"a tensor's bytes do not divide into rows of {group_bytes} bytes",
                          "the file is damaged", code="E-FILE-TRUNCATED")
    if fill:
        yield buf[:fill]


def _permute_groups(data: memoryview, rows: int, row_bytes: int, inverse: bool, out: Any) -> memoryview:
    """Each head's rows (`rows` of them per group, whole groups in `data`): HF [2, rows/2] halves -> GGML
    interleaved pairs (llama.cpp's LlamaModel.permute), or back with `inverse`; written into `out` (a reused
    uint8 array at least as long), whose filled part is returned."""
    import numpy as np

    a = np.frombuffer(data, dtype=np.uint8)
    groups = a.size // (rows * row_bytes)
    if inverse:
        moved = a.reshape(groups, rows // 2, 2, row_bytes).swapaxes(1, 2)
    else:
        moved = a.reshape(groups, 2, rows // 2, row_bytes).swapaxes(1, 2)
    target = out[: a.size]
    np.copyto(target.reshape(moved.shape), moved)
    return memoryview(target)


@dataclass(frozen=True)
class StreamedTensor:
    """A tensor computed from another while streamed: q/k rows (un)permuted per head, and/or a dtype change.

    Duck-typed TensorSource: safetensors_io reads and writes anything with `chunks()`."""

    base: TensorSource
    dtype: str
    shape: tuple[int, ...]
    heads: int = 0  # > 0: permute the rows in `heads` groups
    inverse: bool = False

    @property
    def nbytes(self) -> int:
        n = ELEMENT[self.dtype]
        for d in self.shape:
            n *= d
        return n

    def chunks(self) -> Iterator[bytes]:
        src_dtype = self.base.dtype
        rows = self.shape[0]
        row_bytes = (self.base.nbytes // rows) if rows else 0
        if self.heads:
            import numpy as np

            per = rows // self.heads
            out = None
            for piece in _row_groups(self.base, per * row_bytes):
                if out is None:
                    out = np.empty(len(piece), dtype=np.uint8)  # reused, as the piece's buffer is
                yield _convert(_permute_groups(piece, per, row_bytes, self.inverse, out), src_dtype, self.dtype)
            return
        step = max(ELEMENT[src_dtype], CHUNK - CHUNK % max(row_bytes, 1)) if rows else CHUNK
        for group in _row_groups_tail(self.base, step):
            yield bytes(_convert(group, src_dtype, self.dtype))


def _row_groups_tail(src: TensorSource, step: int) -> Iterator[bytes]:
    buf = bytearray()
    for part in iter_tensor_chunks(src, step):
        buf += part
        while len(buf) >= step:
            yield bytes(buf[:step])
            del buf[:step]
    if buf:
        yield bytes(buf)


def llama3_rope_factors(params: dict[str, Any], head_dim: int) -> bytes:
    """llama.cpp's LlamaModel.generate_extra_tensors, in float32 as there."""
    import numpy as np

    base = params.get("rope_theta", 10000.0)
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim))))
    factor = params.get("factor", 8.0)
    low, high = params.get("low_freq_factor", 1.0), params.get("high_freq_factor", 4.0)
    old = params.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for freq in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(freq)
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype="<f4").tobytes()


def cast_weights(tensors: dict[str, TensorSource], dtype: str | None, names: Iterable[str]) -> dict[str, TensorSource]:
    """The canonical 2-D weights among `names` that `--outtype` (`dtype`) casts, as the GGUF read back holds them:
    norms go back to their source dtype exactly, and q/k rows are permuted and un-permuted around the same cast."""
    return {name: StreamedTensor(src, dtype, tuple(src.shape)) for name, src in tensors.items()
            if dtype is not None and name in names and len(src.shape) == 2 and src.dtype != dtype}


def vocab_map_from_d2t(d2t: TensorSource | None, draft_vocab: int, vocab: int) -> VocabMap | None:
    """llama.cpp's d2t holds absolute target ids (ours: offsets); None for the full target vocab."""
    if d2t is None:
        return None
    import numpy as np

    if d2t.dtype != "I64" or d2t.shape != (draft_vocab,):
        raise FormatError(f"d2t is {d2t.dtype} {list(d2t.shape)}; llama.cpp asserts I64 [{draft_vocab}]",
                          "the file is damaged", code="E-VOCAB-DTYPE")
    absolute = np.frombuffer(read_tensor_bytes(d2t), dtype="<i8").tolist()
    if any(not 0 <= t < vocab for t in absolute) or any(b <= a for a, b in zip(absolute, absolute[1:])):
        raise FormatError("d2t does not hold ascending absolute target ids below the vocabulary size",
                          "llama.cpp's d2t holds absolute ids; this one is damaged", code="E-VOCAB-ORDER")
    vmap = VocabMap(tuple(absolute), vocab, encode_d2t([t - i for i, t in enumerate(absolute)]), None)
    return None if vmap.is_identity else vmap
