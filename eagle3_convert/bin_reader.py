"""Pickled `pytorch_model.bin` checkpoints (original EAGLE research code).

Read ONLY with `torch.load(weights_only=True)`: a pickle can run arbitrary code, and
weights_only refuses every global that is not a tensor type. torch is imported here
alone, lazily. Tensors come back decoded (a pickle has no byte ranges to stream), so
a .bin source costs memory the size of its weights.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from .errors import FormatError
from .safetensors_io import InMemoryTensor, checked_member, read_index

BIN_INDEX_NAME = "pytorch_model.bin.index.json"

_DTYPE_NAMES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
}


def _import_torch():
    try:
        import torch
    except ImportError:
        raise FormatError("this checkpoint is a pickled pytorch_model.bin and reading it needs torch",
                          "pip install 'eagle3-convert[torch]' (torch==2.13.0), or convert it to safetensors first",
                          code="E-BIN-TORCH") from None
    return torch


def _refusal_reason(exc: Exception) -> str:
    """Why torch.load refused, in a few words: the global a code-running pickle calls, when torch names it.

    torch's own text spans lines, carries terminal escapes and suggests loading with weights_only=False."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    blocked = re.search(r"GLOBAL ([\w.]+)", text)
    if blocked:
        return f"its pickle calls {blocked.group(1)}, which is not a tensor type"
    return text.splitlines()[0][:160] if text else type(exc).__name__


def read_bin_tensors(root: Path, names: list[str]) -> tuple[dict[str, InMemoryTensor], list[str]]:
    files = names
    if (root / BIN_INDEX_NAME).is_file():
        files = sorted(set(read_index(root, BIN_INDEX_NAME).values()))
    torch = _import_torch()
    tensors: dict[str, InMemoryTensor] = {}
    for name in files:
        path = checked_member(root, name, BIN_INDEX_NAME)
        if not path.is_file():  # a FIFO would block torch.load forever
            raise FormatError(f"{name}: missing or not a regular file", "download the complete checkpoint",
                              code="E-FILE-READ")
        try:
            # mmap needs torch's zip format; a legacy (pre-1.6) pickle is read whole, just as safely.
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
        except Exception as exc:  # UnpicklingError for code-running pickles, RuntimeError for damaged zips
            raise FormatError(f"{name}: refused to load ({_refusal_reason(exc)})",
                              "only plain tensor pickles are read (weights_only); a pickle that needs code is "
                              "never executed — ask the publisher for safetensors", code="E-BIN-UNSAFE") from None
        if not isinstance(state, dict):
            raise FormatError(f"{name}: holds a {type(state).__name__}, not a state dict",
                              "save the drafter with model.state_dict()", code="E-BIN-FORMAT")
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
    return tensors, files
