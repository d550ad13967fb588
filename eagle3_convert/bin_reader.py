"""Pickled `pytorch_model.bin` checkpoints (original EAGLE research code).

A torch zip checkpoint (what `torch.save` has written since torch 1.6, and what the Hub
holds) is read without torch by `torch_zip`: its pickle runs on a restricted machine that
admits only what `torch.load(weights_only=True)` admits for a state dict of tensors, and
every tensor becomes a byte range of the file, copied like a safetensors tensor (no tensor
data is decoded or held in memory).

Only a legacy (pre-1.6, not zip) torch.save file needs torch, imported here alone, lazily,
and read with `torch.load(weights_only=True)`; torch is the optional extra
`eagle3-convert[torch]`. A file that is neither is refused without being unpickled.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import FormatError
from .safetensors_io import InMemoryTensor, TensorRef, TensorSource, checked_member, open_plain_file, read_index
from .torch_zip import HINT_UNSAFE, ZIP_MAGIC, read_state_dict

BIN_INDEX_NAME = "pytorch_model.bin.index.json"
# A legacy torch.save file opens with a pickle of its magic number 0x1950a86a20f9469cfc6c (protocol 2).
LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."

_DTYPE_NAMES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
}


def _import_torch(name: str):
    try:
        import torch
    except ImportError:
        raise FormatError(f"{name} is a legacy (pre-zip, torch < 1.6) torch.save file and reading it needs torch",
                          "pip install 'eagle3-convert[torch]' (torch==2.13.0), or re-save it with a current "
                          "torch.save or as safetensors", code="E-BIN-TORCH") from None
    return torch


def _refusal_reason(exc: Exception) -> str:
    """Why torch.load refused, in a few words: the global a code-running pickle calls, when torch names it.

    torch's own text spans lines, carries terminal escapes and suggests loading with weights_only=False."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    blocked = re.search(r"GLOBAL ([\w.]+)", text)
    if blocked:
        return f"its pickle calls {blocked.group(1)}, which is not a tensor type"
    return text.splitlines()[0][:160] if text else type(exc).__name__


def _read_legacy(path: Path, name: str) -> dict[str, InMemoryTensor]:
    """A pre-zip torch.save file, through torch.load(weights_only=True): decoded into memory."""
    torch = _import_torch(name)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError for code-running pickles, RuntimeError for damaged files
        raise FormatError(f"{name}: refused to load ({_refusal_reason(exc)})", HINT_UNSAFE,
                          code="E-BIN-UNSAFE") from None
    if not isinstance(state, dict):
        raise FormatError(f"{name}: holds a {type(state).__name__}, not a state dict",
                          "save the drafter with model.state_dict()", code="E-BIN-FORMAT")
    tensors: dict[str, InMemoryTensor] = {}
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise FormatError(f"{name}: entry {key!r} is not a tensor", "save the drafter with model.state_dict()",
                              code="E-BIN-FORMAT")
        dtype = _DTYPE_NAMES.get(str(value.dtype).removeprefix("torch."))
        if dtype is None:
            raise FormatError(f"{name}: tensor {key!r} has unsupported dtype {value.dtype}",
                              "convert the weights to bf16/fp16/fp32", code="E-FILE-DTYPE")
        data = value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if value.numel() \
            else b""
        tensors[key] = InMemoryTensor(dtype, tuple(value.shape), data)
    return tensors


def _head(path: Path, name: str) -> bytes:
    """The first bytes of a weights file, opened so that a FIFO cannot block."""
    fd = open_plain_file(path, name)
    try:
        return os.pread(fd, len(LEGACY_MAGIC), 0)
    finally:
        os.close(fd)


def read_bin_file(path: Path, name: str) -> dict[str, TensorSource]:
    """One pytorch_model*.bin: byte ranges of a zip checkpoint, or (legacy files, with torch) decoded tensors."""
    head = _head(path, name)
    if head.startswith(ZIP_MAGIC) or head.startswith(b"PK\x05\x06"):
        return dict(read_state_dict(path, name))
    if head == LEGACY_MAGIC:
        return dict(_read_legacy(path, name))
    if head.startswith(b"\x80"):  # a pickle, but not torch's: never unpickled, by us or by torch
        raise FormatError(f"{name}: refused to load (a bare pickle, neither a torch.save zip nor a legacy torch.save "
                          "file; it is not unpickled)", HINT_UNSAFE, code="E-BIN-UNSAFE")
    raise FormatError(f"{name}: refused to load (neither a torch.save zip nor a legacy torch.save file)",
                      "the file is damaged or not a PyTorch checkpoint: download it again, or ask the publisher "
                      "for safetensors", code="E-BIN-FORMAT")


def read_bin_tensors(root: Path, names: list[str]) -> tuple[dict[str, TensorSource], list[str]]:
    """All tensors of a .bin checkpoint (one file, several, or shards with pytorch_model.bin.index.json)."""
    files = names
    weight_map: dict[str, str] | None = None
    if (root / BIN_INDEX_NAME).is_file():
        weight_map = read_index(root, BIN_INDEX_NAME)
        files = sorted(set(weight_map.values()))
    tensors: dict[str, TensorSource] = {}
    for name in files:
        path = checked_member(root, name, BIN_INDEX_NAME)
        if not path.is_file():
            raise FormatError(f"{name}: missing or not a regular file", "download the complete checkpoint",
                              code="E-FILE-READ")
        for key, src in read_bin_file(path, name).items():
            if key in tensors:
                raise FormatError(f"tensor {key!r} appears in two .bin files", f"keep one copy, or add a "
                                  f"{BIN_INDEX_NAME} that names the file of each tensor", code="E-FILE-INDEX")
            if weight_map is not None and weight_map.get(key) != name:
                raise FormatError(f"{name}: tensor {key!r} is not listed for this file in {BIN_INDEX_NAME}",
                                  "the index and shards disagree: re-download or rebuild the index",
                                  code="E-FILE-INDEX")
            tensors[key] = src
    if weight_map is not None:
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise FormatError(f"{BIN_INDEX_NAME} lists {len(missing)} tensor(s) no shard holds, e.g. {missing[0]!r}",
                              "the index and shards disagree: re-download the checkpoint", code="E-FILE-INDEX")
    return tensors, files


__all__ = ["BIN_INDEX_NAME", "read_bin_file", "read_bin_tensors", "TensorRef"]
