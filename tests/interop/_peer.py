"""Shared by the probe scripts, which run under the interop venv's python (not under pytest).

A probe only reports facts as one JSON object on stdout; every assertion lives in
tests/test_interop.py. Library chatter is sent to stderr so stdout stays parseable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import traceback
from collections.abc import Callable

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may reach a hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import torch

SAFETENSORS_DTYPE = {
    torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}


def tensor_facts(t: torch.Tensor) -> dict:
    """dtype (safetensors spelling), shape, and sha256 of the raw little-endian bytes as safetensors stores them."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy().tobytes()
    return {"dtype": SAFETENSORS_DTYPE.get(t.dtype, str(t.dtype)), "shape": list(t.shape),
            "sha256": hashlib.sha256(raw).hexdigest()}


def state_report(model: torch.nn.Module) -> dict:
    """Every entry of the loaded model's state dict, and which float ones are not finite."""
    sd = model.state_dict()
    return {
        "class": type(model).__name__,
        "state": {k: tensor_facts(v) for k, v in sd.items()},
        "nonfinite": sorted(k for k, v in sd.items() if v.is_floating_point() and not torch.isfinite(v).all()),
    }


def versions(*modules: str) -> dict:
    from importlib.metadata import version

    return {m: version(m) for m in modules}


def run_jobs(jobs: list[str], load: Callable[[str], dict], header: dict) -> None:
    """Load each checkpoint independently; one failure is reported, not fatal to the others."""
    results = {}
    with contextlib.redirect_stdout(sys.stderr):
        for job in jobs:
            try:
                results[job] = {"ok": True, **load(job)}
            except Exception:  # noqa: BLE001  (the peer's own exception is the finding)
                results[job] = {"ok": False, "error": traceback.format_exc()}
    json.dump({**header, "results": results}, sys.stdout)
    sys.stdout.write("\n")
