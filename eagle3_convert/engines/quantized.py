"""How vLLM and SGLang load a ModelOpt-quantized EAGLE-3 drafter: which config key holds the ignore list, how an
entry is matched against the engine's own module names, which modules the drafter class never quantizes, and what
happens when the ignore list and the tensors disagree. Read in vLLM 0.24.0 and 0.33.0, SGLang 0.5.11 and 0.5.23
(the engines' wheels, file:line below); a boundary between two releases read is not located, so a release in between
is judged by the older one's rules (`Change.since` is the newer release read). docs/formats.md "Quantized drafters".

The engines see the drafter's modules under their own prefixes, not the checkpoint's names:
- vLLM (llama_eagle3.py): `model.fc` (ReplicatedLinear with the draft's quant config, since PR 28435), `lm_head`
  (ParallelLMHead with it), layers numbered after the target's, `model.layers.{L+i}`, with the fused
  `self_attn.qkv_proj` (0.33.0 :95; 0.24.0 `qkv_proj` directly under the layer, :66), `self_attn.o_proj`,
  `mlp.gate_up_proj`, `mlp.down_proj`; `embed_tokens` is a VocabParallelEmbedding built without the quant config
  (:192-196 in 0.33.0), so `embed_tokens.weight_scale` has no parameter and the load fails.
- SGLang (llama_eagle3.py, 0.5.23): every draft layer gets the prefix `model` (:201), so `model.qkv_proj` (:74),
  `model.self_attn.o_proj`, `model.gate_up_proj`, `model.down_proj`; `lm_head` (:312); `fc` is a plain
  torch.nn.Linear (:163) and `embed_tokens` is built without the quant config (:146): their scales match no
  parameter and are skipped without a word (load_weights :371-378), the 8-bit values copied into a bf16 parameter
  unscaled; a packed NVFP4 weight [out, in/2] fails the loader's shape check. The draft's embedding is replaced by
  the target's unless target_hidden_size differs from hidden_size (llama.py set_embed :910-918).
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from typing import Any, Collection, Mapping

from ..quantization import (FUSED, QUANTIZABLE, is_quantized, kv_scales, modelopt_method, quantized_modules,
                            string_list)
from .common import Reading
from .releases import Change

# The algos each engine's ModelOpt configs accept (else "ModelOpt currently only supports ...").
VLLM_ALGOS = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "W4A16_NVFP4", "MXFP8", "MIXED_PRECISION")
# ModelOpt's nested form names no quant_method: vLLM derives it from these algos only, and raises on any other
# (model_arch_config_convertor.py:248-268 in 0.33.0, :212-228 in 0.24.0 without MIXED_PRECISION).
VLLM_NESTED_ALGOS = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "MIXED_PRECISION")
SGLANG_ALGOS_OLD = ("FP8", "NVFP4")  # 0.5.11 modelopt_quant.py:1241
SGLANG_ALGOS = ("FP8", "NVFP4", "NVFP4_AWQ", "W4A16_NVFP4")  # 0.5.23 modelopt_quant.py:1673

VLLM_EXCLUDE_MODULES_FALLBACK = Change(
    "quantization", "config.json's quantization_config: the ignore list read from `ignore` only (modelopt.py:316)",
    "`ignore`, else `exclude_modules` (modelopt.py:359)", "0.33.0",
    "vllm modelopt.py ModelOptQuantConfigBase.from_config, read in 0.24.0 and 0.33.0 (boundary between not located)")
VLLM_QKV_UNDER_SELF_ATTN = Change(
    "quantization", "the draft's fused attention is model.layers.{L+i}.qkv_proj (llama_eagle3.py:66)",
    "model.layers.{L+i}.self_attn.qkv_proj (llama_eagle3.py:95)", "0.33.0",
    "vllm llama_eagle3.py, read in 0.24.0 and 0.33.0 (boundary between not located)")
SGLANG_FP4_KEYS = Change(
    "quantization", "NVFP4: the ignore list from `ignore` only; FP8 and NVFP4 only (modelopt_quant.py:1225, :1241)",
    "NVFP4: `ignore`, else `modules_to_not_convert`, else `exclude_modules`; also NVFP4_AWQ and W4A16_NVFP4 "
    "(modelopt_quant.py:1653, :1673)", "0.5.23",
    "sglang modelopt_quant.py ModelOptFp4Config.from_config, read in 0.5.11 and 0.5.23 (boundary between not "
    "located)")
# KV-cache scales (`self_attn.k_proj.k_scale`, `v_proj.v_scale`, quantization.py). vLLM 0.33.0 loads them: a ModelOpt
# config gives every Attention a KV-cache method with k_scale / v_scale parameters (modelopt.py:232-233,
# kv_cache.py BaseKVCacheMethod) and AutoWeightsLoader renames ModelOpt's names to `self_attn.attn.k_scale`
# (models/utils.py:467, base_config.py:232-235); used under --kv-cache-dtype fp8. SGLang 0.5.23's draft loaders
# (llama_eagle3.py load_weights :355-378, dflash.py :945) have no KV-scale renaming: skipped without a word.
KV_SCALES_SGLANG = ("SGLang skips the draft's k_scale / v_scale (its draft loader has no KV-scale renaming): under "
                    "--kv-cache-dtype fp8 the draft's attention uses scale 1.0, not the calibrated ones")
READ_IN = ("vllm", "sglang")  # the engines whose quantized loading was read (the others: no verdict)
VLLM_CHANGES = (VLLM_EXCLUDE_MODULES_FALLBACK, VLLM_QKV_UNDER_SELF_ATTN)
SGLANG_CHANGES = (SGLANG_FP4_KEYS,)
# A draft layer index no target has: vLLM numbers draft layers after the target's, unknown without --target.
UNKNOWN_DEPTH = 10_000


def canonical_module(name: str) -> str:
    """A stored weight's module in canonical spelling, whatever layout the engine reads it from."""
    name = re.sub(r"^model\.", "", name)
    return re.sub(r"^midlayer\.", "layers.0.", name)


def modules(names: Collection[str]) -> tuple[set[str], set[str]]:
    """(quantizable modules present, those with a weight scale), canonical."""
    canon = [canonical_module(n) for n in names]
    present = {n[:-len(".weight")] for n in canon if n.endswith(".weight") and QUANTIZABLE.match(n[:-len(".weight")])}
    return present, quantized_modules(canon)


def scheme_of(config: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], bool] | None:
    """(quant_algo, the dict holding the ignore list, flat?) from config.json's quantization_config."""
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping) or not (str(qc.get("quant_method", "")).startswith("modelopt") or
                                           modelopt_method(qc)):
        return None  # no ModelOpt quantization: another method's loading was not read (the readers refuse it)
    nested = qc.get("quantization")
    body = nested if isinstance(nested, Mapping) else qc
    return str(body.get("quant_algo", "")).upper(), body, not isinstance(nested, Mapping)



def _exact_fused(prefix: str, entries: list[str], match) -> bool | str:
    """vLLM's / SGLang's is_layer_skipped: a fused layer is skipped when its shards are (all, else an error)."""
    proj = prefix.rsplit(".", 1)[-1]
    if proj in FUSED and not match(prefix, entries):
        flags = {match(prefix.replace(proj, shard.rsplit(".", 1)[1]), entries) for shard in FUSED[proj]}
        if len(flags) > 1:
            return f"Detected some but not all shards of {prefix} are quantized"
        return flags.pop()
    return match(prefix, entries)


def vllm_excluded(prefix: str, entries: list[str]) -> bool | str:
    """ModelOptQuantConfigBase.is_layer_excluded (modelopt.py:191-225 in 0.33.0, :144-178 in 0.24.0): exact (with
    fused shards), then substring (`fc` is in `model.fc`), then fnmatch wildcards."""
    exact = _exact_fused(prefix, entries, lambda p, es: p in es)
    if exact is not False:
        return exact
    return any(e != prefix and e in prefix for e in entries) or any(fnmatch(prefix, e) for e in entries)


def sglang_excluded(prefix: str, entries: list[str]) -> bool | str:
    """ModelOptQuantConfig.is_layer_excluded (modelopt_quant.py:379-425 in 0.5.23): exact (with fused shards), then
    each entry as a glob (`*` -> `.*`) fully matching the prefix or any one dotted part of it."""
    exact = _exact_fused(prefix, entries, lambda p, es: p in es)
    if exact is not False:
        return exact
    parts = prefix.split(".")
    for e in entries:
        rx = re.compile(e.replace(".", r"\.").replace("*", ".*"))
        if rx.fullmatch(prefix) or any(rx.fullmatch(p) for p in parts):
            return True
    return False


def vllm_prefix(module: str, depth: int | None, qkv_under_self_attn: bool) -> str:
    m = re.match(r"^layers\.(\d+)\.(.+)$", module)
    if not m:
        return "lm_head" if module == "lm_head" else f"model.{module}"
    layer = f"model.layers.{(depth if depth is not None else UNKNOWN_DEPTH) + int(m.group(1))}"
    tail = m.group(2)
    for fused, shards in FUSED.items():
        if tail in shards:
            tail = (f"self_attn.{fused}" if qkv_under_self_attn else fused) if fused == "qkv_proj" else f"mlp.{fused}"
    return f"{layer}.{tail}"


def sglang_prefix(module: str) -> str:
    m = re.match(r"^layers\.\d+\.(.+)$", module)
    if not m:
        return module if module == "lm_head" else f"model.{module}"
    tail = m.group(1)
    for fused, shards in FUSED.items():
        if tail in shards:
            return f"model.{fused}"
    return "model.down_proj" if tail == "mlp.down_proj" else f"model.{tail}"  # LlamaMLP(prefix="model")


def read_vllm(r: Reading, config: Mapping[str, Any], names: Collection[str], depth: int | None, reads) -> None:
    """vLLM's loading of a quantized drafter, into `r` (a refusal, or nothing: every path read fails loudly)."""
    scheme = scheme_of(config)
    if scheme is None and not is_quantized(names):
        return  # a plain drafter (read at every release of every verdict: the common case costs one pass)
    present, scaled = modules(names)
    if scheme is None:
        if scaled & present and "quantization_config" not in config:
            r.caveats.append("quantized weights with no quantization_config in config.json: vLLM reads "
                             "hf_quant_config.json then (not judged here)")
        return
    algo, body, flat = scheme
    named = config["quantization_config"].get("quant_method")
    if not named and not flat and algo not in VLLM_NESTED_ALGOS:
        r.refusal = f"Unknown ModelOpt quant algo: {algo} (vLLM names the method of a config that names none by " \
                    "its algo, and knows no method for this one)"
        return
    if algo not in VLLM_ALGOS:
        r.refusal = f"ModelOpt currently only supports: {list(VLLM_ALGOS)} quantizations in vLLM (quant_algo {algo})"
        return
    if "embed_tokens" in scaled:
        r.refusal = ("vLLM fails to load embed_tokens.weight_scale: its draft embedding is built without the "
                     "quant config and has no such parameter")
        return
    entries = string_list(body.get("ignore", body.get("exclude_modules") if reads(VLLM_EXCLUDE_MODULES_FALLBACK) else None)
                    if flat else body.get("exclude_modules"))
    under = reads(VLLM_QKV_UNDER_SELF_ATTN)
    r.refusal = _mismatch("vLLM", sorted(present - {"embed_tokens"}), scaled, entries,
                          lambda m: vllm_prefix(m, depth, under), vllm_excluded,
                          "fails to load {module}.weight_scale: it builds {prefix} unquantized (the ignore list "
                          "matches it)",
                          "fails to load {module}: it builds {prefix} quantized (no ignore entry matches it) and "
                          "the file has no scale for it")


def read_sglang(r: Reading, config: Mapping[str, Any], names: Collection[str], reads) -> None:
    """SGLang's loading of a quantized drafter, into `r` (a refusal, or what it serves wrong without a word)."""
    if not is_quantized(names) and scheme_of(config) is None:
        return  # a plain drafter
    present, scaled = modules(names)
    nvfp4 = {canonical_module(n)[:-len(".weight_scale_2")] for n in names if n.endswith(".weight_scale_2")}
    scheme = scheme_of(config)
    for module in sorted(scaled & {"fc", "embed_tokens"}):
        if module in nvfp4:
            r.refusal = f"SGLang fails to load {module}.weight: its {module} is never quantized, and the packed 4-bit " \
                        "weight has half the columns"
            return
        replaced = module == "embed_tokens" and config.get("target_hidden_size") in (None, config.get("hidden_size"))
        if not replaced:  # the draft embedding is the target's then: the stored one is never used
            r.silent.append(f"SGLang builds {module} unquantized and loads its 8-bit weight without its scale")
    if scheme is None:
        return
    algo, body, flat = scheme
    if kv_scales(names) and body.get("kv_cache_quant_algo"):
        r.caveats.append(KV_SCALES_SGLANG)
    fp4 = "FP4" in algo
    allowed = (SGLANG_ALGOS if reads(SGLANG_FP4_KEYS) else SGLANG_ALGOS_OLD) if fp4 else ("FP8",)
    if algo not in allowed:
        r.refusal = f"ModelOpt currently only supports: {', '.join(allowed)} quantizations in sglang ({algo})"
        return
    if flat:
        later = fp4 and reads(SGLANG_FP4_KEYS)
        entries = string_list(body.get("ignore", body.get("modules_to_not_convert", body.get("exclude_modules"))
                                 if later else None))
    else:
        entries = string_list(body.get("exclude_modules"))
    refusal = _mismatch("SGLang", sorted(present - {"fc", "embed_tokens"}), scaled, entries, sglang_prefix,
                        sglang_excluded,
                        "builds {prefix} unquantized (the ignore list matches it) and loads {module}'s 8-bit weight "
                        "without its scale",
                        "builds {prefix} quantized (no ignore entry matches it) and loads the plain {module} weight "
                        "into it with no scale")
    if refusal and fp4:  # the packed 4-bit weight [out, in/2] fails the loader's shape check either way
        r.refusal = f"{refusal}: the weight's shape fails its loader (a packed 4-bit weight has half the columns)"
    elif refusal:  # SGLang checks no scale was loaded: an 8-bit mismatch loads and serves wrong
        r.silent.append(refusal)


def _mismatch(label: str, present: list[str], scaled: set[str], entries: list[str], prefix_of, excluded,
              quantized_skipped: str, plain_quantized: str) -> str | None:
    for module in present:
        prefix = prefix_of(module)
        skipped = excluded(prefix, entries)
        if isinstance(skipped, str):
            return f"{label} fails to build {prefix}: {skipped}"
        if skipped and module in scaled:
            return f"{label} " + quantized_skipped.format(module=module, prefix=prefix)
        if not skipped and module not in scaled:
            return f"{label} " + plain_quantized.format(module=module, prefix=prefix)
    return None

