"""Quantized drafters (NVIDIA ModelOpt's FP8 / NVFP4 exports): the canonical scheme, which tensors are a weight's
scales, the scheme of each module, and the ignore list written for the engines. docs/formats.md "Quantized drafters".

A quantized module keeps its weight under its usual name (F8_E4M3 for FP8; U8 holding two e2m1 values per byte for
NVFP4, so [out, in/2]) with companions beside it: `weight_scale` (per tensor for FP8; F8_E4M3 [out, in/16] for
NVFP4), `weight_scale_2` (NVFP4's global F32 scale), `input_scale` (static activation scale, W8A8 / W4A4 only).
Companions are renamed with their weight (every layout renames module prefixes) and copied byte for byte.

Which module stays plain is a fact of the tensors (a weight with no `weight_scale`), never of the config: a
config's ignore list is a claim the engines match against their own module names (engines/quantized.py), and the
list this tool writes names every plain module in the spelling each engine matches (`ignore_entries`).
"""

from __future__ import annotations

import re
from typing import Any, Collection, Mapping

from pydantic import BaseModel, ConfigDict, Field

from .errors import RefusalError

# Longest first: `weight_scale_2` also ends in a name that starts `weight_scale`. `k_scale` / `v_scale`: the
# KV-cache scales, which ModelOpt writes beside k_proj / v_proj (`self_attn.k_proj.k_scale`, postprocess_state_dict
# in modelopt/torch/export/quant_utils.py: `k_bmm_quantizer._amax` / maxbound, at least 1 for FP8).
COMPANIONS = ("weight_scale_2", "weight_scale", "input_scale", "k_scale", "v_scale")
KV_SCALES = ("k_scale", "v_scale")
# The linear modules of an EAGLE-3 drafter (canonical names) and the embedding, which a quantizer may touch.
QUANTIZABLE = re.compile(r"^(fc|lm_head|embed_tokens|layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj))$")
# The engines fuse these into one layer that is quantized whole or not at all (vLLM's is_layer_skipped raises
# "Detected some but not all shards ... are quantized", quantization/utils/quant_utils.py:672-684 in 0.33.0).
FUSED = {"qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
         "gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}
# ModelOpt's config names: `quant_method` starts "modelopt" (vLLM's _extract_modelopt_quant_algo, modelopt.py:298).
MODELOPT_METHOD = "modelopt"
HF_QUANT_CONFIG = "hf_quant_config.json"
HINT_EXPORT_PLAIN = "export the drafter unquantized (bf16) from ModelOpt and convert that"


class QuantScheme(BaseModel):
    """What a quantized drafter's config says, in canonical form (each layout writes it in its own spelling)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str = Field(description="quant_method as written: modelopt, modelopt_fp4")
    algo: str = Field(description="quant_algo, upper case: FP8, NVFP4, W4A16_NVFP4, FP8_PER_CHANNEL_PER_TOKEN ...")
    group_size: int | None = None
    kv_cache_algo: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="other keys of the config, carried verbatim")


def companion(name: str) -> tuple[str, str] | None:
    """`X.weight_scale` -> (`X.weight`, `weight_scale`); None for a name that is no scale. A KV-cache scale is one
    only beside its projection (`k_proj.k_scale`, `v_proj.v_scale`, as ModelOpt writes it)."""
    for suffix in COMPANIONS:
        if name.endswith("." + suffix) and (suffix not in KV_SCALES or name.endswith(f".{suffix[0]}_proj.{suffix}")):
            return name[:-len(suffix)] + "weight", suffix
    return None


def kv_scales(names: Collection[str]) -> list[str]:
    """The KV-cache scales among `names` (each beside its k_proj / v_proj)."""
    return sorted(n for n in names if (c := companion(n)) and c[1] in KV_SCALES)


def is_quantized(names: Collection[str]) -> bool:
    return any("scale" in n and companion(n) for n in names)  # every companion's name says scale: one cheap test


def quantized_modules(names: Collection[str]) -> set[str]:
    """Canonical (or stored) module names that have a weight scale: quantized."""
    return {n[:-len(".weight_scale")] for n in names if n.endswith(".weight_scale")}


def plain_modules(names: Collection[str]) -> list[str]:
    """The quantizable modules whose weight carries no scale: they stay unquantized."""
    scaled = quantized_modules(names)
    return sorted(m for n in names if n.endswith(".weight") and QUANTIZABLE.match(m := n[:-len(".weight")])
                  and m not in scaled)


def orphan_scales(names: Collection[str]) -> list[str]:
    """Scales whose weight is not in the file (a loader has nowhere to put them)."""
    present = set(names)
    return sorted(n for n in names if (c := companion(n)) and c[0] not in present)


def module_schemes(tensors: Mapping[str, Any], scheme: QuantScheme | None) -> dict[str, str]:
    """Each quantizable module -> its scheme as stored: FP8, NVFP4 (the config's algo for a 4-bit one), or the
    dtype of a plain weight. `tensors` maps names to objects with a `dtype` (TensorSource)."""
    scaled = quantized_modules(tensors)
    out = {}
    for name, src in sorted(tensors.items()):
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module is None or not QUANTIZABLE.match(module):
            continue
        if module not in scaled:
            out[module] = f"plain {src.dtype}"
        elif src.dtype == "U8":
            out[module] = scheme.algo if scheme and "FP4" in scheme.algo else "NVFP4"
        else:
            out[module] = "FP8" if src.dtype.startswith("F8") else f"{scheme.algo if scheme else '?'} ({src.dtype})"
    return out


def stored_shape(logical: tuple[int, ...], dtype: str) -> tuple[int, ...]:
    """The shape a quantized weight is stored with: NVFP4 packs two 4-bit values per byte along the input dim
    (ModelOpt's NVFP4QTensor.quantize, qtensor/nvfp4_tensor.py; vLLM's ModelOptNvFp4LinearMethod allocates
    [out, in // 2] uint8)."""
    if dtype == "U8" and len(logical) == 2:
        return logical[0], logical[1] // 2
    return logical


def input_columns(weight: Any) -> int:
    """A 2-D weight's input width as the layer computes it: a U8 weight is packed NVFP4, two columns a byte."""
    return weight.shape[1] * (2 if weight.dtype == "U8" else 1)


# ------------------------------------------------------------------ reading a config

def read_scheme(config: Mapping[str, Any], hf_quant: Mapping[str, Any] | None) -> tuple[QuantScheme, list[str]] | None:
    """The scheme and the ignore list as written, from config.json's `quantization_config` (flat, as ModelOpt >= 0.39
    writes it, or holding a nested `quantization`) or else hf_quant_config.json; None when neither says one.
    A quantization other than ModelOpt's is refused: no layout here reads its tensors."""
    qc = config.get("quantization_config")
    if isinstance(qc, Mapping):
        method = str(qc.get("quant_method") or (modelopt_method(qc) or ""))
        if not method.lower().startswith(MODELOPT_METHOD):
            raise RefusalError(f"quantization_config.quant_method is {method!r}: only ModelOpt's quantized exports "
                               "(quant_method modelopt / modelopt_fp4) are read", HINT_EXPORT_PLAIN,
                               code="E-QUANT-UNSUPPORTED")
        body = qc.get("quantization") if isinstance(qc.get("quantization"), Mapping) else qc
        ignore = qc.get("ignore", body.get("exclude_modules", []))
        known = {"quant_method", "quant_algo", "group_size", "kv_cache_quant_algo", "ignore", "exclude_modules",
                 "quantization"}
        return _scheme(method, body, {k: v for k, v in qc.items() if k not in known}), string_list(ignore)
    if isinstance(hf_quant, Mapping) and isinstance(hf_quant.get("quantization"), Mapping):
        body = hf_quant["quantization"]
        method = "modelopt_fp4" if "FP4" in str(body.get("quant_algo", "")).upper() else MODELOPT_METHOD
        extra = {k: v for k, v in hf_quant.items() if k != "quantization"}
        return _scheme(method, body, extra), string_list(body.get("exclude_modules"))
    return None


def modelopt_method(qc: Mapping[str, Any]) -> str | None:
    """The quant_method of ModelOpt's nested form, which names none: its EAGLE exporter puts hf_quant_config.json's
    {"producer": {"name": "modelopt"}, "quantization": {...}} into config.json as it is (hf_spec_export.py:287-288,
    nvidia-modelopt 0.47.0); vLLM names it by the algo (model_arch_config_convertor.py:248-268 in 0.33.0)."""
    producer = qc.get("producer")
    body = qc.get("quantization")
    if not (isinstance(producer, Mapping) and producer.get("name") == MODELOPT_METHOD and isinstance(body, Mapping)):
        return None
    return "modelopt_fp4" if "FP4" in str(body.get("quant_algo", "")).upper() else MODELOPT_METHOD


def _scheme(method: str, body: Mapping[str, Any], extra: dict[str, Any]) -> QuantScheme:
    algo = body.get("quant_algo")
    if not isinstance(algo, str) or not algo:
        raise RefusalError("the quantization config names no quant_algo: vLLM and SGLang refuse it ('Missing "
                           "quant_algo')", "add the quant_algo ModelOpt exported with (FP8, NVFP4, ...)",
                           code="E-QUANT-UNSUPPORTED")
    group = body.get("group_size")
    kv = body.get("kv_cache_quant_algo")
    return QuantScheme(method=method, algo=algo.upper(), group_size=group if isinstance(group, int) else None,
                       kv_cache_algo=kv.upper() if isinstance(kv, str) else None, extra=extra)


def string_list(value: Any) -> list[str]:
    """The strings of a JSON list (a module list as a config spells it); [] for anything else."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# ------------------------------------------------------------------ writing a config

def ignore_entries(plain: Collection[str], num_layers: int) -> list[str]:
    """Every plain module, in each spelling an engine matches (engines/quantized.py has the matchers):
    vLLM prefixes the drafter's modules `model.` and numbers its layers after the target's
    (`model.layers.{L+i}`, llama_eagle3.py), SGLang names every draft layer `model` (`model.qkv_proj`,
    `model.self_attn.o_proj`, `model.gate_up_proj`), and both build fused qkv_proj / gate_up_proj; ModelOpt and
    TensorRT-LLM match the checkpoint's own names. A per-layer entry cannot reach both engines' layer names, so
    layers must agree (else `LayerMismatch`)."""
    out: list[str] = []
    tails: dict[str, set[int]] = {}
    for module in plain:
        m = re.match(r"^layers\.(\d+)\.(.+)$", module)
        if m:
            tails.setdefault(m.group(2), set()).add(int(m.group(1)))
        else:
            out += [module, f"model.{module}"] if module != "lm_head" else [module]
    for tail, layers in sorted(tails.items()):
        if len(layers) != num_layers:
            raise RefusalError(f"{tail} is quantized in some draft layers and not in others: vLLM names the draft's "
                               "layers after the target's (model.layers.{L+i}) and SGLang names none (every draft "
                               "layer is `model`), so no ignore list can single out one layer in both",
                               "quantize the same modules in every draft layer", code="E-QUANT-UNSUPPORTED")
        out.append(f"*{tail}")
    for fused, shards in FUSED.items():
        if all(s in tails for s in shards):
            out.append(f"*{fused}")
        elif any(s in tails for s in shards):
            raise RefusalError(f"only some of {', '.join(shards)} are quantized: vLLM and SGLang fuse them into one "
                               f"{fused} layer, quantized whole or not at all (vLLM raises 'Detected some but not "
                               "all shards')", f"quantize all of {', '.join(shards)} or none",
                               code="E-QUANT-UNSUPPORTED")
    out += [f"*{t.rsplit('.', 1)[1]}" for t in sorted(tails) if t.endswith(("o_proj", "down_proj"))]
    return list(dict.fromkeys(out))


def quantization_config(scheme: QuantScheme, plain: Collection[str], num_layers: int) -> dict[str, Any]:
    """config.json's `quantization_config` for vLLM and SGLang: the flat form, with `ignore`, the one key every
    release read reads there (vLLM 0.24.0 modelopt.py:316 and SGLang's FP8 config, modelopt_quant.py:493 in 0.5.23,
    read no other)."""
    out: dict[str, Any] = {"quant_method": scheme.method, "quant_algo": scheme.algo}
    if scheme.group_size is not None:
        out["group_size"] = scheme.group_size
    if scheme.kv_cache_algo is not None:
        out["kv_cache_quant_algo"] = scheme.kv_cache_algo
    out["ignore"] = ignore_entries(plain, num_layers)
    return {**scheme.extra, **out}
