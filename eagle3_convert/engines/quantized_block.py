"""How vLLM 0.33.0 and SGLang 0.5.23 load a ModelOpt-quantized DFlash / DFlash2 drafter (ModelOpt's
examples/speculative_decoding/scripts/quantize_drafter.py, Model-Optimizer PR 2027, writes config.json's flat
`quantization_config` with `ignore` and hf_quant_config.json's `exclude_modules`, the same list). Read in the engines'
wheels (file:line below); other releases and DSpark's quantized loading were not read: no verdict.

- vLLM (models/qwen3_dflash.py): the draft's own quant config (models/utils.py get_draft_quant_config :985) with its
  ignore list renamed to the runtime names (map_draft_quant_config :1010: layers.N -> layers.{L+N}, `model.`), so
  entries in the checkpoint's names match; `fc` is a ReplicatedLinear with it (:477); embed_tokens is built
  without it (:443) and lm_head with it only under `has_own_lm_head` (:755-763): a scale for either has no
  parameter and AutoWeightsLoader raises ("There is no module or parameter named", models/utils.py:443).
- SGLang (srt/models/dflash.py): DFlashDraftModel and DFlash2DraftModel set `supports_quantization = False` (:685):
  the layers get the quant config with no layer prefix (:735-741), so the ignore list is matched against the bare
  `qkv_proj`, `o_proj`, `gate_up_proj`, `down_proj`; `fc` is a plain torch.nn.Linear (:772): an FP8 fc loads its
  8-bit values unscaled and `fc.weight_scale` is skipped as "unexpected" (load_weights :945), a packed 4-bit fc
  fails "DFLASH fc.weight shape mismatch" (:969). (Nemotron 3.5's W4A16_NVFP4 drafts, is_nemotron_35_draft_config
  in speculative/dflash_utils.py, take another path: not judged.) The draft's quantization is
  --speculative-draft-model-quantization, else the target's --quantization, else its own config's
  (arg_groups/serving_hook.py:675-689; configs/model_config.py _parse_quant_hf_config :1727): judged as its own
  config says.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from . import trtllm
from .common import REFUSES, UNKNOWN, WRONG
from ..quantization import QUANTIZABLE, is_quantized, quantized_modules, string_list
from .quantized import (SGLANG_ALGOS, VLLM_ALGOS, _mismatch, canonical_module, modules, scheme_of, sglang_excluded,
                        vllm_excluded)

READ_KINDS = ("dflash", "dflash2")


def _fused(module: str) -> str:
    tail = module.split(".", 2)[-1] if module.startswith("layers.") else module
    for fused, shards in (("qkv_proj", ("q_proj", "k_proj", "v_proj")), ("gate_up_proj", ("gate_proj", "up_proj"))):
        if tail.rsplit(".", 1)[-1] in shards:
            return module.rsplit(".", 1)[0] + "." + fused
    return module


def _sglang_prefix(module: str) -> str:
    return _fused(module).rsplit(".", 1)[-1]  # (no layer prefix: supports_quantization is False)


def judge(runner: str, kind: str, config: Mapping[str, Any], names: Collection[str]) -> tuple[str, str] | None:
    """(verdict, why) where the file's quantization decides the engine's verdict; None where it does not."""
    if not is_quantized(names):
        return None
    engine = runner.split("-")[0]
    if engine == "trtllm":
        return UNKNOWN, trtllm.QUANTIZED_UNDECIDED
    if kind not in READ_KINDS or engine not in ("vllm", "sglang"):
        return UNKNOWN, f"how this engine loads a quantized {kind} drafter was not read"
    other = sorted(m for m in quantized_modules([canonical_module(n) for n in names]) if not QUANTIZABLE.match(m))
    if other:  # e.g. DFlash2's grouped convolutions (vLLM builds them with the quant config, SGLang without)
        return UNKNOWN, f"how it loads a quantized {other[0]} was not read"
    scheme = scheme_of(config)
    if scheme is None:
        return UNKNOWN, "quantized weights with no ModelOpt quantization_config in config.json: not judged"
    algo, body, flat = scheme
    present, scaled = modules(names)
    if engine == "vllm":
        if algo not in VLLM_ALGOS:
            return REFUSES, f"ModelOpt currently only supports: {list(VLLM_ALGOS)} quantizations in vLLM ({algo})"
        if "embed_tokens" in scaled:
            return REFUSES, "its embed_tokens is built without the quant config: embed_tokens.weight_scale fails to load"
        if "lm_head" in scaled and not config.get("has_own_lm_head"):
            return REFUSES, "lm_head is built unquantized unless has_own_lm_head: lm_head.weight_scale fails to load"
        entries = string_list(body.get("ignore", body.get("exclude_modules")) if flat else body.get("exclude_modules"))
        refusal = _mismatch("vLLM", sorted(present - {"embed_tokens"}), scaled, entries, _fused, vllm_excluded,
                            "fails to load {module}.weight_scale: it builds {prefix} unquantized (the ignore list "
                            "matches it)", "fails to load {module}: it builds {prefix} quantized (no ignore entry "
                            "matches it) and the file has no scale for it")
        return (REFUSES, refusal) if refusal else None
    if algo == "W4A16_NVFP4" and config.get("has_embed_tokens") and not config.get("has_lm_head"):
        return UNKNOWN, ("SGLang may take this for a Nemotron 3.5 draft (is_nemotron_35_draft_config, "
                         "speculative/dflash_utils.py), whose quantized fc and embedding path was not read")
    fp4 = "FP4" in algo
    if algo not in (SGLANG_ALGOS if fp4 else ("FP8",)):
        return REFUSES, f"ModelOpt currently only supports: {', '.join(SGLANG_ALGOS)} quantizations in sglang ({algo})"
    nvfp4 = {canonical_module(n)[:-len(".weight_scale_2")] for n in names if n.endswith(".weight_scale_2")}
    if "fc" in scaled:
        if "fc" in nvfp4:
            return REFUSES, "its fc is a plain nn.Linear: the packed 4-bit fc.weight fails 'DFLASH fc.weight shape " \
                            "mismatch'"
        return WRONG, ("builds fc as a plain nn.Linear: loads fc's 8-bit weight without fc.weight_scale (skipped as "
                       "unexpected), so every context feature is projected by an unscaled matrix")
    entries = string_list(body.get("ignore", body.get("modules_to_not_convert", body.get("exclude_modules")))
                    if flat else body.get("exclude_modules"))
    layers = sorted(m for m in present if m.startswith("layers."))
    refusal = _mismatch("SGLang", layers, scaled, entries, _sglang_prefix, sglang_excluded,
                        "builds {prefix} unquantized in every layer (the ignore list matches it) and loads {module}'s "
                        "8-bit weight without its scale",
                        "builds {prefix} quantized in every layer (no ignore entry matches it) and loads the plain "
                        "{module} weight into it with no scale")
    if refusal is None:
        return None
    return (REFUSES, f"{refusal}: a packed 4-bit weight fails its loader's shape check") if fp4 else (WRONG, refusal)
