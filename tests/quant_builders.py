"""Tiny ModelOpt-quantized EAGLE-3 drafters, written by code that follows ModelOpt's HF export
(modelopt/torch/export/unified_export_hf.py and quant_utils.py, nvidia-modelopt 0.47.0): a quantized linear keeps
its weight name, FP8 stores the weight as float8_e4m3fn with a per-tensor F32 `weight_scale` = amax / 448 and a
static F32 `input_scale`; NVFP4 stores two e2m1 codes per byte (U8 [out, in/2]), an F8_E4M3 `weight_scale` per
16-column block, a global F32 `weight_scale_2` and (W4A4 only) an `input_scale`. config.json gains the flat
`quantization_config` ModelOpt >= 0.39 writes. The values are not a trained drafter's: the tests check names,
shapes, bytes and the engines' readings, not maths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from builders import (DrafterSpec, RawTensor, _bytes_for, canonical_tensors, config_for, draft_vocab, stored_name,
                      stored_tensors, write_safetensors)

from eagle3_convert.quantization import QUANTIZABLE

FP8_MAX = 448.0  # float8_e4m3fn's largest value: ModelOpt's per-tensor FP8 scale is amax / 448


def f32(value: float) -> RawTensor:
    import struct

    return RawTensor("F32", (), struct.pack("<f", value))


def _fp8_weight(seed: int, name: str, shape: tuple[int, ...]) -> tuple[RawTensor, RawTensor]:
    import torch

    g = torch.Generator().manual_seed(int.from_bytes(_bytes_for(seed, name, 4), "little"))
    w = torch.randn(*shape, generator=g) * 0.05
    scale = w.abs().max() / FP8_MAX
    q = (w / scale).to(torch.float8_e4m3fn)
    return RawTensor("F8_E4M3", shape, q.view(torch.uint8).numpy().tobytes()), f32(float(scale))


def _nvfp4_weight(seed: int, name: str, shape: tuple[int, int]) -> dict[str, RawTensor]:
    import torch

    out, cols = shape
    g = torch.Generator().manual_seed(int.from_bytes(_bytes_for(seed, name, 4), "little"))
    block = (torch.rand(out, cols // 16, generator=g) * 200 + 1).to(torch.float8_e4m3fn)
    return {"weight": RawTensor("U8", (out, cols // 2), _bytes_for(seed, name, out * cols // 2)),
            "weight_scale": RawTensor("F8_E4M3", (out, cols // 16), block.view(torch.uint8).numpy().tobytes()),
            "weight_scale_2": f32(0.001)}


def quantized_tensors(spec: DrafterSpec, algo: str, plain: Iterable[str]) -> dict[str, RawTensor]:
    """Canonical tensors with every quantizable module not in `plain` quantized by `algo`."""
    out: dict[str, RawTensor] = {}
    plain = set(plain)
    for name, t in canonical_tensors(spec).items():
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is None or not QUANTIZABLE.match(module) or module in plain:
            out[name] = t
            continue
        if algo == "FP8":
            out[name], out[f"{module}.weight_scale"] = _fp8_weight(spec.seed, name, t.shape)
            out[f"{module}.input_scale"] = f32(0.02)
        else:
            for suffix, q in _nvfp4_weight(spec.seed, name, t.shape).items():
                out[f"{module}.{suffix}"] = q
            if algo == "NVFP4":  # W4A4: a static activation scale too; W4A16_NVFP4 has none
                out[f"{module}.input_scale"] = f32(0.02)
    return out


def build_quantized(dest: Path, layout: str = "modelopt", spec: DrafterSpec | None = None, *, algo: str = "FP8",
                    plain: Iterable[str] = ("lm_head",), ignore: list[str] | None = None, key: str = "ignore",
                    config_extra: dict[str, Any] | None = None,
                    extra_tensors: dict[str, RawTensor] | None = None) -> Path:
    """A quantized drafter in `layout` under `dest`: `plain` modules (canonical) stay bf16, `ignore` (default: the
    plain modules' names as stored) is written under `key` (ModelOpt's exporters wrote `exclude_modules`, vLLM and
    SGLang read `ignore`)."""
    spec = spec or DrafterSpec(embed_tokens=True)
    plain = tuple(plain)
    canonical = quantized_tensors(spec, algo, plain)
    tensors = {stored_name(layout, spec, n): t for n, t in canonical.items()}
    vocab = {n: t for n, t in stored_tensors(layout, spec).items() if n in ("d2t", "t2d")}
    config = config_for(layout, spec)
    names = ignore if ignore is not None else [stored_name(layout, spec, f"{m}.weight")[:-len(".weight")]
                                               for m in plain]
    config["quantization_config"] = {"quant_method": "modelopt_fp4" if "FP4" in algo else "modelopt",
                                     "quant_algo": algo, **({"group_size": 16} if "FP4" in algo else {}),
                                     key: names, **(config_extra or {})}
    dest = Path(dest)
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(dest / "model.safetensors", {**tensors, **vocab, **(extra_tensors or {})})
    assert draft_vocab(spec) is None or "d2t" in vocab
    return dest
