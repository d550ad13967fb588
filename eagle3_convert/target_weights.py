"""What a local target's files say beyond its identity: its input embedding (to compare a drafter's stored
`embed_tokens` with, byte for byte and row by row) and its RoPE, and the rope the engines read from a config.

Both readings follow the engines: an embedding is the same table when its values are equal (vLLM's `torch.equal`,
engines/embedding.py); a rope is what transformers 5 makes of the config's fields (`modeling_rope_utils.py`
`convert_rope_params_to_dict`, 5.6.0 :706-717 and 5.19.0 :752-771, the transformers of vLLM 0.24.0 / 0.33.0 and
SGLang 0.5.11 / 0.5.23, whose `models/llama.py` reads `config.rope_parameters` first): a `rope_scaling` object
replaces `rope_parameters` whole, and the top-level `rope_theta` only fills a theta the object leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .converters.base import read_json_file
from .errors import Eagle3Error
from .json_values import is_number
from .safetensors_io import TensorSource, iter_tensor_chunks, read_tensor_table
from .target_identity import TargetIdentity

DEFAULT_THETA = 10000.0  # transformers' default_theta; SpecForge before #270 trained at it whatever the config said
# Where a transformers model keeps its input embedding (text models, and the language model of multimodal ones).
EMBEDDING_NAMES = ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight",
                   "language_model.model.embed_tokens.weight", "embed_tokens.weight", "model.embedding.weight")


def local_dirs(target: TargetIdentity | None) -> list[Path]:
    """The local directories a target is known by (its Hub name reads no weights)."""
    return [Path(n) for n in (target.names if target else []) if Path(n).is_dir()]


def target_embedding(target: TargetIdentity | None) -> TensorSource | None:
    """The target's input embedding from the first local copy that holds weights (None: none does)."""
    for root in local_dirs(target):
        try:
            tensors, _ = read_tensor_table(root)
        except Eagle3Error:
            continue
        found = next((tensors[n] for n in EMBEDDING_NAMES if n in tensors), None)
        if found is not None:
            return found
    return None


def target_config(target: TargetIdentity | None) -> dict[str, Any] | None:
    """The text config of the target's first local copy (None: only its Hub name is known)."""
    for root in local_dirs(target):
        if (root / "config.json").is_file():
            config = read_json_file(root / "config.json", f"target config {root}")
            text = config.get("text_config")
            return text if isinstance(text, dict) else config
    return None


@dataclass
class Comparison:
    rows: int
    differing: list[int]  # the row indices whose values differ (all of them when the shapes differ)

    @property
    def equal(self) -> bool:
        return not self.differing


_FLOATS = {"BF16": "<u2", "F16": "<f2", "F32": "<f4"}
_SIZES = {"BF16": 2, "F16": 2, "F32": 4}
BATCH_BYTES = 4 * 1024 * 1024  # rows compared at a time: memory stays flat in the vocabulary


def _as_float32(data: bytes, dtype: str):
    import numpy as np

    if dtype == "BF16":
        return (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(data, _FLOATS[dtype]).astype(np.float32)


def compare_tables(mine: TensorSource, theirs: TensorSource) -> Comparison | None:
    """Row by row, the values of two [V, H] tables, read in bounded batches of whole rows. None when they are not
    comparable: a dtype this comparison does not decode, or other shapes (a drafter narrower than its target keeps
    its own table in every engine; another vocabulary is E-TARGET-VOCAB's)."""
    if len(mine.shape) != 2 or mine.dtype not in _FLOATS or theirs.dtype not in _FLOATS \
            or tuple(mine.shape) != tuple(theirs.shape):
        return None
    import numpy as np

    rows, width = mine.shape
    per_batch = max(1, BATCH_BYTES // (width * max(_SIZES[mine.dtype], _SIZES[theirs.dtype])))
    differing: list[int] = []
    row = 0
    for a, b in zip(_rows(mine, width, per_batch), _rows(theirs, width, per_batch)):
        if mine.dtype == theirs.dtype:  # the same encoding: its bytes (a NaN equals its own bits)
            x, y = (np.frombuffer(c, np.uint8).reshape(-1, width * _SIZES[mine.dtype]) for c in (a, b))
        else:
            x, y = _as_float32(a, mine.dtype).reshape(-1, width), _as_float32(b, theirs.dtype).reshape(-1, width)
        differing += [row + int(i) for i in np.nonzero((x != y).any(axis=1))[0]]
        row += x.shape[0]
    return Comparison(rows, differing)


def _rows(src: TensorSource, width: int, per_batch: int):
    """The table's bytes in batches of `per_batch` whole rows (the last one shorter): two tables of one shape
    yield batches of the same rows whatever their dtypes."""
    batch = width * _SIZES[src.dtype] * per_batch
    data = b""
    for part in iter_tensor_chunks(src, batch):
        data += bytes(part)
        while len(data) >= batch:
            yield data[:batch]
            data = data[batch:]
    if data:
        yield data


def engine_rope(rope: dict[str, Any]) -> dict[str, Any]:
    """The rope a transformers-5 config object makes of a config's rope fields (module docstring): rope_type,
    rope_theta and the scaling keys."""
    chosen = rope.get("rope_scaling") or rope.get("rope_parameters") or {}
    params = {("rope_type" if k == "type" else k): v for k, v in (chosen if isinstance(chosen, dict) else {}).items()}
    top = rope.get("rope_theta")
    params.setdefault("rope_theta", top if is_number(top) else DEFAULT_THETA)
    params.setdefault("rope_type", "default")
    return params


def spelled_thetas(rope: dict[str, Any]) -> dict[str, float]:
    """Every theta a config spells, by its key (`rope_theta`, `rope_parameters.rope_theta`, ...)."""
    out: dict[str, float] = {}
    if is_number(rope.get("rope_theta")):
        out["rope_theta"] = float(rope["rope_theta"])
    for parent in ("rope_parameters", "rope_scaling"):
        inner = rope.get(parent)
        if isinstance(inner, dict) and is_number(inner.get("rope_theta")):
            out[f"{parent}.rope_theta"] = float(inner["rope_theta"])
    return out


def rope_fields(config: dict[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ("rope_theta", "rope_scaling", "rope_parameters") if k in config}
