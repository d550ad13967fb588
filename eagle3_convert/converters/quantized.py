"""Quantized drafters in the layouts: reading the scheme beside the tensors, and writing it in the layouts whose
engines serve a quantized EAGLE-3 drafter (vLLM and SGLang read config.json's quantization_config: the vllm,
sglang and modelopt layouts). The others cannot say it and refuse. quantization.py has the scheme and spellings."""

from __future__ import annotations

from typing import Any, Mapping

from ..drafter import Drafter
from ..errors import FormatError, RefusalError
from ..quantization import (HF_QUANT_CONFIG, HINT_EXPORT_PLAIN, QuantScheme, is_quantized, orphan_scales,
                            plain_modules, quantization_config, read_scheme)
from .checkpoint import Checkpoint, read_json_file
from .layout import ConvertOptions, Layout, WritePlan

# The layouts a quantized drafter is written in, and why each other one cannot say it.
WRITES = ("vllm", "sglang", "modelopt")
# A quantized DFlash / DFlash2 drafter: the flat dflash layout, whose config.json both engines read the draft's
# quantization_config from (engines/quantized_block.py); DSpark's quantized loading was not read.
BLOCK_WRITES = {"dflash": ("dflash", "dflash2")}
CANNOT = {
    "speculators": "vLLM's speculators path builds its config from the speculators fields and passes no "
                   "quantization_config on (vllm/transformers_utils/configs/speculators/, 0.33.0)",
    "eagle": "the original EAGLE layout is a pytorch_model.bin with no quantization config",
    "gguf": "GGUF has no FP8/NVFP4 tensor types (llama-quantize makes its own quantized types from a plain GGUF)",
}


def read_quantization(ckpt: Checkpoint, tensors: Mapping[str, Any]) -> QuantScheme | None:
    """The drafter's quantization scheme, from config.json or hf_quant_config.json; refuses scales without their
    weight or without a config that says how to read them."""
    orphans = orphan_scales(tensors)
    if orphans:
        raise FormatError(f"scale tensor {orphans[0]!r} has no weight beside it" +
                          (f" (and {len(orphans) - 1} more)" if len(orphans) > 1 else ""),
                          "the export is incomplete: re-export it, or remove the scales of weights it dropped",
                          code="E-QUANT-ORPHAN-SCALE")
    hf_path = ckpt.path / HF_QUANT_CONFIG
    hf_quant = read_json_file(hf_path, HF_QUANT_CONFIG) if hf_path.is_file() else None
    found = read_scheme(ckpt.config, hf_quant)
    if found is None:
        if is_quantized(tensors):
            raise RefusalError("the weights carry quantization scales but neither config.json's quantization_config "
                               f"nor {HF_QUANT_CONFIG} says the scheme: the engines would load the 8-bit values as "
                               "plain weights", f"copy {HF_QUANT_CONFIG} from the ModelOpt export beside config.json",
                               code="E-QUANT-UNSUPPORTED")
        return None
    if not is_quantized(tensors):
        raise RefusalError(f"the config says the drafter is quantized ({found[0].algo}) but no weight carries a scale: "
                           "vLLM and SGLang would build quantized layers and find nothing to load into their scales",
                           f"if the weights are plain, remove quantization_config (and {HF_QUANT_CONFIG}); else copy "
                           "the scale tensors from the ModelOpt export", code="E-QUANT-UNSUPPORTED")
    return found[0]


def plan(layout: Layout, drafter: Drafter, options: ConvertOptions) -> WritePlan:
    """The layout's plan, with the quantization config the engines read where the drafter is quantized."""
    scheme = drafter.config.quantization
    if scheme is None:
        return layout.plan(drafter, options)
    kind = drafter.config.kind
    block = kind in ("dflash", "dflash2", "dspark")
    writes = [w for w, kinds in BLOCK_WRITES.items() if kind in kinds] if block else list(WRITES)
    if layout.name not in writes:
        why = CANNOT.get(layout.name, f"how the engines load a quantized {kind} drafter of the {layout.name} layout "
                                      "was not read, so its quantization config is not written")
        where = f"convert to {', '.join(f'--to {w}' for w in writes)}, or " if writes else ""
        raise RefusalError(f"a quantized drafter ({scheme.algo}) cannot be written in the {layout.name} layout: {why}",
                           f"{where}{HINT_EXPORT_PLAIN}", code="E-QUANT-UNSUPPORTED")
    written = layout.plan(drafter, options)
    plain = plain_modules(drafter.tensors)
    written.config["quantization_config"] = quantization_config(scheme, plain, drafter.config.num_layers)
    written.notes.append(f"quantized {scheme.algo} ({scheme.method}): scales copied with their weights; "
                         f"{len(plain)} plain module(s) listed in quantization_config.ignore as vLLM and SGLang name "
                         "them")
    return written
