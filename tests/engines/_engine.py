"""Shared by the engine probes, which run under the engines' venv (not under pytest).

A probe reads a jobs file (JSON list) and writes, per job, what the engine made of one
checkpoint: the stage it reached, the engine's own error when it raised, the capture ids its
own code reads, its parameters (a safetensors file) and its forward outputs (another one).
Every assertion lives in tests/test_engines.py. Library chatter goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable
from types import MappingProxyType

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may reach a hub
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch

# Allowed stand-in: the loaders call torch.accelerator.empty_cache(), which raises on a machine
# without an accelerator.
torch.accelerator.empty_cache = lambda: None

# The engines' plain torch path on any x86-64 CPU. vLLM and SGLang ask torch.cpu.get_capabilities() whether the
# CPU has AMX and, where it does, route small bf16/fp16 GEMMs and MLA attention to their own CPU extensions
# (vLLM 0.33.0: model_executor/layers/utils.py check_cpu_sgl_kernel -> torch.ops._C.convert_weight_packed,
# platforms/cpu.py -> the AMX_MLA backend; SGLang 0.5.23: srt/utils/common.py cpu_has_amx_support), which the
# wheels from the package index do not carry for CPU: on an AMX machine every vLLM MLA cell failed at init with
# "'_C' object has no attribute 'convert_weight_packed'". Those extensions are fast paths of the same maths, not
# the loading and capture rules this tier checks, so the engines are told the CPU has no AMX.
# EAGLE3_ENGINES_CPU_ISA replays other CPUs on this one by changing what the CPU itself claims (torch's C probe,
# beneath what the engines ask): `amx` claims AMX and AVX512-BF16 (a Sapphire Rapids), `avx2` claims neither AMX nor
# any AVX-512 (an older or smaller x86-64), and `amx-unshimmed` claims AMX and also leaves the engines' question to
# that claim, which reproduces the failure above. tests/test_engines.py runs all three.
AMX = ("amx_tile", "amx_bf16", "amx_int8", "amx_fp16")
CLAIMS = {"amx": {**dict.fromkeys(AMX, True), "avx512_bf16": True},
          "amx-unshimmed": {**dict.fromkeys(AMX, True), "avx512_bf16": True}}
_CPU_ISA = os.environ.get("EAGLE3_ENGINES_CPU_ISA", "")
if _CPU_ISA:
    _probed = torch._C._cpu._get_cpu_capability
    if _CPU_ISA == "avx2":
        torch._C._cpu._get_cpu_capability = lambda: {
            **_probed(), **{key: False for key in _probed() if key.startswith(("amx", "avx512", "avx10"))}}
    else:
        torch._C._cpu._get_cpu_capability = lambda: {**_probed(), **CLAIMS[_CPU_ISA]}
if _CPU_ISA != "amx-unshimmed":
    _capabilities = torch.cpu.get_capabilities
    torch.cpu.get_capabilities = lambda: MappingProxyType({**_capabilities(), **dict.fromkeys(AMX, False)})


def cpu_isa() -> dict:
    """Whether the CPU claims AMX, and whether the engines are told it has it (reported beside each probe's results)."""
    claimed = torch._C._cpu._get_cpu_capability()
    return {"cpu_claims_amx": bool(claimed.get("amx_tile")), "cpu_claims_avx512": bool(claimed.get("avx512_f")),
            "engines_see_amx": torch.cpu._is_amx_tile_supported(), "engines_see_avx512": torch.cpu._is_avx512_supported()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stage:
    """Which step of the engine's own path is running; the report names the one that raised."""

    def __init__(self) -> None:
        self.name = "start"

    def __call__(self, name: str) -> None:
        self.name = name


def engine_error(exc: BaseException) -> str:
    """The engine's own message: exception type and text (last line of a chained pydantic error too)."""
    text = str(exc).strip() or repr(exc)
    return f"{type(exc).__name__}: {text}"[:2000]


def run_jobs(jobs_file: str, run: Callable[[dict, Stage], dict], header: dict) -> None:
    jobs = json.loads(open(jobs_file).read())
    results = {}
    with contextlib.redirect_stdout(sys.stderr):
        for job in jobs:
            stage = Stage()
            try:
                results[job["id"]] = {"ok": True, **run(job, stage)}
            except Exception as exc:  # noqa: BLE001  (the engine's own exception is the finding)
                results[job["id"]] = {"ok": False, "stage": stage.name, "error": engine_error(exc),
                                      "traceback": traceback.format_exc()[-4000:]}
    json.dump({**header, "results": results}, sys.stdout)
    sys.stdout.write("\n")


def versions(*modules: str) -> dict:
    from importlib.metadata import version

    return {m: version(m) for m in modules}


def load_inputs(path: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path)


def save(path: str, tensors: dict[str, torch.Tensor]) -> str:
    from safetensors.torch import save_file

    save_file({k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}, path)
    return path


def captured_input(states: torch.Tensor, boundaries: list[int]) -> torch.Tensor:
    """What the target hands the drafter: the captured states, in capture (= layer) order, side by side.

    `states` is [L+1, T, Ht]: the fake target hidden state at every boundary 0..L.
    """
    return torch.cat([states[b] for b in boundaries], dim=-1)


def fed_back(inputs: dict[str, torch.Tensor], fused: torch.Tensor, aux: torch.Tensor) -> dict[str, torch.Tensor]:
    """The second draft step from the last position, as one causal prefill over T+1 positions: rows 0..T-1 are the
    first step's (the verified cache), row T feeds back the last position's handed-on state `aux[-1]` with the
    drafted token's embedding `fed_embeds`, at position T. Its last row equals a decode step that attends to the
    cache and to itself, without the engine's paged KV cache."""
    t = inputs["embeds"].shape[0]
    return {"input_ids": torch.cat([inputs["input_ids"], inputs["input_ids"][-1:]]),  # unread: embeds are given
            "positions": torch.arange(t + 1), "embeds": torch.cat([inputs["embeds"], inputs["fed_embeds"]]),
            "hidden": torch.cat([fused, aux[-1:]])}


def causal_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_heads: int, num_kv_heads: int,
                head_dim: int, v_head_dim: int, scale: float) -> torch.Tensor:
    """Allowed stand-in for the paged attention op: one causal prefill over the T tokens."""
    t = q.shape[0]
    q = q.reshape(t, num_heads, head_dim).transpose(0, 1)
    k = k.reshape(t, num_kv_heads, head_dim).transpose(0, 1)
    v = v.reshape(t, num_kv_heads, v_head_dim).transpose(0, 1)
    if num_kv_heads != num_heads:
        k = k.repeat_interleave(num_heads // num_kv_heads, dim=0)
        v = v.repeat_interleave(num_heads // num_kv_heads, dim=0)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    return out.transpose(0, 1).reshape(t, num_heads * v_head_dim)


def applied_flags(model) -> dict:
    """The maths flags the engine's drafter module took from the config (None: the release has no such attribute):
    what an older release drops without a word shows here, beside the parameters it loaded."""
    inner = getattr(model, "model", model)
    out = {}
    for flag, attr in (("norm_output", "norm_output"), ("norm_before_fc", "norm_before_fc"), ("fc_norm", "fc_norm")):
        value = getattr(inner, attr, None) if hasattr(inner, attr) else None
        out[flag] = None if not hasattr(inner, attr) else (value is not None and value is not False)
    return out
