"""The draft -> target vocabulary map (docs/formats.md §3).

d2t holds OFFSETS: target_id = draft_id + d2t[draft_id]. t2d is a bool mask over the
target vocab with exactly Vd true entries, and nonzero(t2d) == arange(Vd) + d2t.
These tensors are small (Vd int64, V bool), so they are the only ones decoded.
"""

from __future__ import annotations

import sys
from array import array
from itertools import compress
from operator import add
from dataclasses import dataclass

from .errors import FormatError
from .safetensors_io import INT_DTYPES, InMemoryTensor, TensorSource, read_tensor_bytes

# The repair, as hints that cannot know the whole command name it (convert's CLI spells it out in full).
REPAIR_COMMAND = "eagle3-convert --repair-d2t-absolute ..."
_INT_CODES = {"I64": "q", "I32": "i", "I16": "h", "I8": "b", "U64": "Q", "U32": "I", "U16": "H", "U8": "B"}


def decode_ints(src: TensorSource) -> list[int]:
    if src.dtype not in INT_DTYPES:
        raise FormatError(f"d2t has dtype {src.dtype}; it must be an integer tensor",
                          "d2t holds int64 offsets (target = draft + d2t); re-export the vocab map",
                          code="E-VOCAB-DTYPE")
    values = array(_INT_CODES[src.dtype])
    values.frombytes(read_tensor_bytes(src))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def decode_mask(src: TensorSource) -> bytes:
    if src.dtype not in ("BOOL", "U8"):
        raise FormatError(f"t2d has dtype {src.dtype}; it must be a bool mask",
                          "t2d marks the target ids present in the draft vocab", code="E-VOCAB-DTYPE")
    return read_tensor_bytes(src)


def encode_d2t(offsets: list[int], dtype: str = "I64") -> InMemoryTensor:
    values = array(_INT_CODES[dtype], offsets)
    if sys.byteorder == "big":
        values.byteswap()
    return InMemoryTensor(dtype, (len(offsets),), values.tobytes())


def encode_t2d(target_ids: list[int], vocab_size: int) -> InMemoryTensor:
    mask = bytearray(vocab_size)
    for t in target_ids:
        mask[t] = 1
    return InMemoryTensor("BOOL", (vocab_size,), bytes(mask))


@dataclass(frozen=True)
class VocabMap:
    """The draft vocab as sorted target ids, with the tensors it was read from (if any)."""

    target_ids: tuple[int, ...]
    vocab_size: int
    d2t: TensorSource | None = None
    t2d: TensorSource | None = None

    @property
    def draft_vocab_size(self) -> int:
        return len(self.target_ids)

    @property
    def is_identity(self) -> bool:
        return len(self.target_ids) == self.vocab_size

    def d2t_tensor(self) -> TensorSource:
        """int64 offsets; the source bytes when they already are exactly that."""
        if self.d2t is not None and self.d2t.dtype == "I64":
            return self.d2t
        return encode_d2t([t - i for i, t in enumerate(self.target_ids)])

    def t2d_tensor(self) -> TensorSource:
        if self.t2d is not None and self.t2d.dtype == "BOOL":
            return self.t2d
        return encode_t2d(list(self.target_ids), self.vocab_size)


def identity_map(vocab_size: int) -> VocabMap:
    return VocabMap(tuple(range(vocab_size)), vocab_size)


def read_vocab_map(d2t: TensorSource | None, t2d: TensorSource | None,
                   vocab_size: int, draft_vocab_size: int) -> VocabMap | None:
    """Decode and cross-check d2t/t2d; None when the draft vocab is the full target vocab."""
    if d2t is None and t2d is None:
        if draft_vocab_size != vocab_size:
            raise FormatError(
                f"draft_vocab_size {draft_vocab_size} differs from vocab_size {vocab_size} but the checkpoint "
                "has neither d2t nor t2d", "the draft->target vocabulary map is missing: re-export it with the "
                "checkpoint (d2t offsets, t2d mask)", code="E-VOCAB-MISSING")
        return None
    from_d2t = from_t2d = None
    if d2t is not None:
        if len(d2t.shape) != 1 or d2t.shape[0] != draft_vocab_size:
            raise FormatError(f"d2t has shape {list(d2t.shape)}, expected [{draft_vocab_size}] (draft_vocab_size)",
                              "config draft_vocab_size and d2t disagree", code="E-VOCAB-SHAPE")
        offsets = decode_ints(d2t)
        from_d2t = list(map(add, range(len(offsets)), offsets))  # i + d2t[i], in C (header-level validate)
    if t2d is not None:
        if len(t2d.shape) != 1 or t2d.shape[0] != vocab_size:
            raise FormatError(f"t2d has shape {list(t2d.shape)}, expected [{vocab_size}] (target vocab_size)",
                              "config vocab_size and t2d disagree", code="E-VOCAB-SHAPE")
        mask = decode_mask(t2d)
        from_t2d = list(compress(range(len(mask)), mask))  # the ids whose byte is nonzero, in C
        if len(from_t2d) != draft_vocab_size:
            raise FormatError(f"t2d marks {len(from_t2d)} target ids, expected draft_vocab_size {draft_vocab_size}",
                              "t2d must have exactly Vd true entries", code="E-VOCAB-T2D")
    if from_d2t is not None:
        if from_t2d is not None and from_d2t != from_t2d:
            if offsets == from_t2d:
                raise FormatError(
                    "d2t holds absolute target ids, not offsets (target = draft + d2t): its values equal "
                    f"nonzero(t2d), and arange(Vd) + d2t{_overflow(from_d2t, vocab_size)}; every engine would "
                    "map draft tokens to the wrong target tokens",
                    f"repair with `{REPAIR_COMMAND}` (d2t := d2t - arange(Vd))",
                    code="E-VOCAB-ABSOLUTE")
            raise FormatError("d2t and t2d disagree: nonzero(t2d) != arange(Vd) + d2t",
                              "the vocab map is inconsistent: re-export it from the training run",
                              code="E-VOCAB-MISMATCH")
        # Equal to nonzero(t2d), the ids are in [0, V) and strictly increasing already: nothing left to check
        # (~5 ms per read on a 32000-token draft vocab).
        if from_t2d is None:
            bad = [t for t in from_d2t if not 0 <= t < vocab_size]
            if bad and _ascending_ids(offsets, vocab_size):
                raise FormatError(
                    "d2t looks like absolute target ids, not offsets: arange(Vd) + "
                    f"d2t{_overflow(from_d2t, vocab_size)}, "
                    "while d2t itself is a strictly increasing list of valid target ids",
                    f"if so, repair with `{REPAIR_COMMAND}` (d2t := d2t - arange(Vd))",
                    code="E-VOCAB-ABSOLUTE")
            if bad:
                raise FormatError(
                    f"arange(Vd) + d2t gives {len(bad)} target id(s) outside [0, {vocab_size}), e.g. {bad[0]} "
                    "(d2t stored as absolute ids?)",
                    "d2t must hold offsets (target id - draft id) into the target vocab; re-export the vocab map "
                    "from the trainer",
                    code="E-VOCAB-RANGE")
            if any(b <= a for a, b in zip(from_d2t, from_d2t[1:])):
                raise FormatError("arange(Vd) + d2t is not strictly increasing: draft ids are not the target ids "
                                  "in ascending order", "re-export the vocab map", code="E-VOCAB-ORDER")
        return VocabMap(tuple(from_d2t), vocab_size, d2t, t2d)
    return VocabMap(tuple(from_t2d), vocab_size, None, t2d)


# A trainer that never loaded a selected vocabulary saves its default buffers, and every engine serves them as
# offsets, silently (docs/formats.md §3): all zero is "the first Vd target ids" (what vLLM assumes of a file with no
# d2t: NeMo Automodel before #2447), arange(Vd) is verl-SpeCo's default before its #67 (draft i -> target 2i).
SERVED_AS = ("vLLM, SGLang, TensorRT-LLM and speculators add d2t to the draft id, and --to gguf writes the same "
             "ids for llama.cpp")


def default_map(vocab: VocabMap | None) -> str | None:
    """What a trainer's default d2t implies (None: a map of selected ids, or the full vocabulary)."""
    if vocab is None or vocab.is_identity:
        return None
    vd = vocab.draft_vocab_size
    if vocab.target_ids == tuple(range(vd)):
        return (f"d2t is all zero with draft_vocab_size {vd} < vocab_size {vocab.vocab_size}: the map implies the "
                f"first {vd} target ids (0..{vd - 1}), a trainer's default rather than the tokens it selected; "
                f"{SERVED_AS}: each proposes draft token i as target token i")
    if vocab.target_ids == tuple(range(0, 2 * vd, 2)):
        return (f"d2t is arange({vd}), a trainer's default buffer: as offsets it maps draft token i to target token "
                f"2i (0, 2, .., {2 * vd - 2}); {SERVED_AS}: each proposes draft token i as target token 2i")
    return None


DEFAULT_MAP_WAY_OUT = ("unless the drafter was trained on exactly these ids, re-export d2t (selected ids - arange(Vd)) "
                       "and t2d from the trainer's selected token ids")


def _overflow(target_ids: list[int], vocab_size: int) -> str:
    over = sum(1 for t in target_ids if t >= vocab_size)
    return f" exceeds the target vocab ({over} of {len(target_ids)} entries >= {vocab_size})" if over else \
        " disagrees with nonzero(t2d)"


def _ascending_ids(values: list[int], vocab_size: int) -> bool:
    """Values that read as sorted target ids: what a d2t stored as absolute ids holds."""
    return all(0 <= v < vocab_size for v in values) and all(b > a for a, b in zip(values, values[1:]))


def repair_absolute_d2t(d2t: TensorSource) -> TensorSource:
    """d2t that holds absolute ids -> offsets (only on explicit request)."""
    absolute = decode_ints(d2t)
    return encode_d2t([t - i for i, t in enumerate(absolute)])
