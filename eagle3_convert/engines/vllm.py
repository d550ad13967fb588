"""vLLM 0.33.0: its Eagle3 drafter classes, its speculators config path, and two runners.

Releases 0.18.0 to 0.32.0 read some facts otherwise: each `Change` below names the first release that reads it
the new way and its PR; `read_v1` / `read_v2(..., release)` replay the release named.

Facts (docs/formats.md §2.3, §6; checked by the engine tier):
- Architectures resolved by its model registry (`model_executor/models/registry.py`), a plain
  `XForCausalLM` becoming `Eagle3XForCausalLM`; a config with `speculators_model_type` goes
  through its speculators path (architecture from `transformer_layer_config.model_type`).
- Capture ids, always BOUNDARIES: the V1 runner
  (`GPUModelRunner._get_eagle3_aux_layers_from_config`) reads the top-level
  `eagle_aux_hidden_state_layer_ids`, then the nested `eagle_config` list; the V2 runner
  (`spec_decode/eagle/eagle3_utils.get_eagle3_aux_layers_from_config`) the top level only.
  No list: the defaults {2, L//2, L-3}.
- Flags at the top level (norm_before_fc also nested); an absent norm_before_residual is
  TRUE on the speculators path and false on the native one. The MLA class has no
  norm_before_fc.
- Weights: unprefixed `layers.{i}.`; `midlayer.` is layer 0 at any depth (`LlamaModel.hf_to_vllm_mapper`,
  a substring map `midlayer.` -> `layers.0.`, llama_eagle3.py); every layer builds `hidden_norm`, and layers
  >= 1 apply `input_layernorm` (`LlamaDecoderLayer.forward`), so a stored `hidden_norm` of a layer >= 1 loads
  into a norm never applied while `input_layernorm` keeps its initial ones. Missing weights load silently
  (completeness check off); an unknown name fails loudly (AutoWeightsLoader), a stored `model.` prefix too
  (`Eagle3LlamaForCausalLM.load_weights` prepends `model.` itself). d2t offsets, t2d skipped.
- Activation: only `hidden_act: silu` builds, in every Eagle3 class: `LlamaMLP.__init__` (models/llama.py, built
  by llama_eagle3.py's decoder layer), `Qwen2MLP` (qwen2.py, Qwen3's MLP) and `DeepseekV2MLP` (deepseek_v2.py,
  deepseek_eagle3.py) raise "Unsupported activation: X. Only silu is supported for now." (read in the 0.24.0 and
  0.33.0 wheels; the speculators path builds the same classes from transformer_layer_config).
- Sliding window: a Llama drafter attends in a window only in the layers its `layer_types` marks
  "sliding_attention" (`LlamaAttention.__init__`, models/llama.py, indexed from the draft's first layer
  through `target_layer_count`, set in llama_eagle3.py; the Qwen3 class likewise, qwen3_eagle3.py): the window
  speculators trains with (common.trained_window) is served as trained, no caveat.
- A speculators verifier `name_or_path` that is a local path is a matter of how the server is started, not of
  the file: the `vllm serve DRAFTER` shortcut takes its target from that name (`maybe_override_with_speculators`,
  transformers_utils/config.py, applied to `--model` only by engine/arg_utils.py): 0.33.0 refuses a name that is
  no Hub repo id or exists as a path where it runs ("Speculators verifier must name a remote model repository");
  0.24.0 loads the name as given. `vllm serve TARGET --speculative-config '{"model": DRAFTER, ...}'` never reads
  it (SpeculativeConfig): the file is served, with a caveat naming that command (SHORTCUT_REFUSES).
- `tie_word_embeddings` is not read: `Eagle3LlamaForCausalLM` always builds its own [Vd, H] `lm_head`
  (llama_eagle3.py), and the proposer shares the target's head only when the checkpoint stores none or an
  identical one (`_maybe_share_lm_head`, v1/spec_decode/llm_base_proposer.py, 0.33.0).
"""

from __future__ import annotations

import os
from typing import Any, Collection, Mapping

from .common import (FLAGS, IDS_KEY, Reading, TargetContext, architectures, flag, has, id_list, nested,
                     num_layers, unread_later_norms, unsupported_activation)
from .releases import Change, Releases

LABEL = "vLLM"

# What older releases read otherwise (each boundary read in the wheels on both sides of it).
SPECULATORS_NORM_BEFORE_FC = Change(
    "flags", "speculators configs: norm_before_fc not passed on (input_norm.weight skipped without a word)",
    "speculators configs: norm_before_fc passed on", "0.19.0",
    "PR 38111 (transformers_utils/configs/speculators/algos.py; 0.18.1 vs 0.19.0)")
V1_NESTED_IDS = Change(
    "capture ids", "V1 runner: the top-level list only", "V1 runner: the top-level list, then the nested one",
    "0.22.0", "PR 42764 (v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config; 0.21.0 vs 0.22.0)")
NESTED_NORM_BEFORE_FC = Change(
    "flags", "norm_before_fc read at the top level only (a nested one: input_norm.weight skipped without a word)",
    "norm_before_fc read nested in eagle_config too", "0.22.0",
    "PR 42143 (llama_eagle3.py eagle_config.get; 0.21.0 vs 0.22.0)")
EAGLE31_FLAGS = Change(
    "flags", "fc_norm and norm_output not read: fc_norm.* fails to load (KeyError) in the Llama class and is "
    "skipped without a word in the MLA class; norm_output ignored",
    "fc_norm and norm_output read at the top level (Llama and MLA classes)", "0.22.0",
    "llama_eagle3.py / deepseek_eagle3.py, first in the 0.22.0 wheel (norm_output: PR 42764)")
QWEN3_CLASS = Change(
    "architectures", "no Qwen3 drafter class: Eagle3Qwen3ForCausalLM refused, a speculators qwen3 config built as "
    "Eagle3LlamaForCausalLM (its q_norm/k_norm fail to load)", "Eagle3Qwen3ForCausalLM registered; speculators "
    "model_type qwen3 maps to it", "0.24.0", "PR 43132 (registry.py, algos.py eagle3_arch_map; 0.23.0 vs 0.24.0)")
SPECULATORS_EAGLE31_FLAGS = Change(
    "flags", "speculators configs: fc_norm and norm_output not passed on (fc_norm.* fails to load; norm_output "
    "ignored without a word)", "speculators configs: fc_norm and norm_output passed on", "0.25.0",
    "PR 46488 (algos.py update_eagle3; 0.24.0 vs 0.25.0)")
FOUR_TOP_LEVEL_IDS = Change(
    "capture ids", "4 or more top-level ids: some releases crash at start-up (a caveat on every verdict, not replayed "
    "per release)", "fixed", None,
    "PR 54598 (open: in no release)")
MROPE_SLOTS = Change(
    "m-rope", "V1 runner, a target with M-RoPE: draft tokens written to the wrong KV slots on image inputs (a caveat on "
    "every verdict)", "fixed", None,
    "issue 54498 (open); PR 54519 (closed, not merged), PR 54716 (open): in no release "
    "(v1/spec_decode/llm_base_proposer.py: 0.24.0 line 699, 0.33.0 line 785)")
RELEASES = Releases(
    "vllm", LABEL,
    ("0.18.0", "0.18.1", "0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0",
     "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0",
     "0.33.0"),
    (SPECULATORS_NORM_BEFORE_FC, V1_NESTED_IDS, NESTED_NORM_BEFORE_FC, EAGLE31_FLAGS, QWEN3_CLASS,
     SPECULATORS_EAGLE31_FLAGS, FOUR_TOP_LEVEL_IDS, MROPE_SLOTS))
RELEASE = f"{LABEL} {RELEASES.newest}"  # the newest release read, which the engine tier loads

CLASSES = {
    "LlamaForCausalLMEagle3": "llama", "Eagle3LlamaForCausalLM": "llama", "Eagle3Qwen2_5vlForCausalLM": "llama",
    "Eagle3Qwen3vlForCausalLM": "llama", "Eagle3MiniMaxM2ForCausalLM": "llama",
    "Eagle3Qwen3ForCausalLM": "qwen3",
    "Eagle3DeepseekV2ForCausalLM": "deepseek_mla", "Eagle3DeepseekV3ForCausalLM": "deepseek_mla",
    # P-EAGLE (#32887, #41826): the Eagle3 classes with parallel drafting; PeagleX is what its speculators path
    # (transformers_utils/configs/speculators/algos.py, update_peagle) names for model_type llama / qwen3
    "PEagleDraftModel": "llama", "PeagleLlamaForCausalLM": "llama", "PeagleQwen3ForCausalLM": "qwen3",
}
# speculators_model_type -> the drafter kind vLLM's speculators path builds (algos.py: eagle3, peagle registered)
SPECULATORS_KINDS = {"eagle3": "eagle3", "peagle": "peagle"}
# Where its parallel-drafting proposer reads the mask token of a flat config (_init_parallel_drafting_params).
PARALLEL_DRAFTING_TOKEN_KEYS = ("pard_token", "ptd_token_id")
PEAGLE_ARCHITECTURES = frozenset({"PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM"})
# Names only vLLM resolves (SGLang refuses them loudly), for files SGLang would misread.
VLLM_ONLY = {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM",
             "deepseek_mla": "Eagle3DeepseekV3ForCausalLM"}
# SpeculativeConfig.hf_config_override turns a draft config of these model_types into DeepSeek MTP
# ('Eagle3DeepSeekMTPModel'), which it then refuses: an EAGLE-3 MLA drafter must say kimi_k2.
MTP_MODEL_TYPES = frozenset({"deepseek_v3", "deepseek_v32", "glm_moe_dsa"})
# The speculators path picks its class from the decoder's model_type.
SPECULATORS_MODEL_TYPES = {"llama": "llama", "qwen3": "qwen3"}
IDS_FROM = {"vllm-v1": ("top", "nested"), "vllm-v2": ("top",)}
MLA_FLAGS = ("norm_before_residual", "fc_norm", "norm_output")
# Layers >= 1: the pre-attention norm applied, and the norms built (LlamaDecoderLayer, llama_eagle3.py).
LATER_NORM_APPLIED = "input_layernorm"
LATER_NORMS_BUILT = ("input_layernorm", "hidden_norm")
ACTIVATIONS = ("silu",)  # read in two wheels (module doc), taken for every release we know
# AutoWeightsLoader raises on a name that matches no module or parameter (`.bias` aside), and load_weights prepends
# `model.` to every name but lm_head's, so a stored `model.` prefix is such a name (llama_eagle3.py, models/utils.py;
# checked with vLLM's own AutoWeightsLoader): loud, never a silent drop.
UNKNOWN_NAMES_REFUSED = True
NO_MODULE = r"^(model\.|(model\.)?additional_layers\.)"  # names its Eagle3 model has no module for



# What validate's replay needs (validate.profiles.EngineProfile is built from these).
FAMILIES = frozenset({"llama", "qwen3", "deepseek_mla"})
FLAGS_READ = frozenset(FLAGS)
MLA_FLAGS_READ = frozenset(MLA_FLAGS)
BUILDS_BIAS = True
NEEDS_T2D = False  # t2d is skipped

# vLLM issue #54498 (open): the V1 draft loop (v1/spec_decode/llm_base_proposer.py, 0.24.0 to 0.33.0) derives the
# draft token's KV slot from positions[0], the M-RoPE temporal coordinate, which an image's H x W patches advance by
# max(t, h, w) only, and copies it over the spatial ones (`mrope_positions[1:] = mrope_positions[0]`): on a prompt
# with an image each draft token overwrites a prompt slot. Text-only requests (all three coordinates equal) are
# unaffected. The V2 runner's spec_decode has no M-RoPE code at all (0.33.0): not judged here.
MROPE_CAVEAT = ("on image inputs to this M-RoPE target, vLLM's V1 runner writes each draft token into a KV slot of "
                "the prompt (the M-RoPE temporal position taken for the token's index): acceptance drops, more with "
                "each draft step (vLLM issue #54498, open; the fix, PR #54716, is in no release)")
MROPE_WAY_OUT = ("on vLLM's V1 runner send it text-only requests until a release carries vLLM PR #54716; no file "
                 "change avoids it (it is the engine's, whatever the drafter)")


def mrope_section(config: Mapping[str, Any]) -> list[int] | None:
    """The M-RoPE section a config declares, as vLLM reads it (transformers_utils/config.py `_mrope_section`,
    `uses_mrope`, 0.33.0: `mrope_section` or the legacy `xdrope_section` in rope_parameters / rope_scaling, of the
    config, its text_config or its thinker_config); None when it declares none."""
    scopes = [config]
    for key in ("text_config", "thinker_config"):
        if isinstance(config.get(key), dict):
            scopes.append(config[key])
            if isinstance(config[key].get("text_config"), dict):
                scopes.append(config[key]["text_config"])
    for scope in scopes:
        for key in ("rope_parameters", "rope_scaling"):
            params = scope.get(key)
            nested = [params, *(v for v in params.values() if isinstance(v, dict))] if isinstance(params, dict) else []
            for entry in nested:
                for name in ("mrope_section", "xdrope_section"):
                    if isinstance(entry.get(name), (list, tuple)):
                        return list(entry[name])
    return None


def served_family(archs: list[Any]) -> str | None:
    for arch in archs:
        if not isinstance(arch, str):
            continue
        family = CLASSES.get(arch) or CLASSES.get(f"Eagle3{arch}")
        if family:
            return family
    return None


# How the file is served when its verifier is a local path (the module's doc: 0.33.0, transformers_utils/config.py).
SHORTCUT_REFUSES = ("only as `vllm serve TARGET --speculative-config '{{\"model\": \"DRAFTER\", \"method\": "
                    "\"{method}\"}}'`: the `vllm serve DRAFTER` shortcut takes its target from the verifier name "
                    "{verifier!r}, a local path where it runs (0.33.0 refuses it: Speculators verifier must name a "
                    "remote model repository; 0.24.0 loads that path)")


def local_verifier(name: Any) -> bool:
    """A verifier name the `vllm serve DRAFTER` shortcut cannot take as a Hub repo id: a path, here (as vLLM checks
    it, relative to where it runs)."""
    if not isinstance(name, str) or not name:
        return False
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.path.exists(name)


def _read(engine: str, config: Mapping[str, Any], names: Collection[str], ctx: TargetContext,
          release: str | None = None) -> Reading:
    r = Reading(engine, f"{LABEL} ({engine[-2:].upper()} runner)")
    speculators = "speculators_model_type" in config
    qwen3 = RELEASES.reads(QWEN3_CLASS, release)
    if speculators:
        layer_cfg = config.get("transformer_layer_config")
        model_type = layer_cfg.get("model_type") if isinstance(layer_cfg, dict) else None
        family = SPECULATORS_MODEL_TYPES.get(model_type)
        if family is None:
            r.refusal = f"vLLM's speculators path has no Eagle3 class for model_type {model_type!r}"
            return r
        if family == "qwen3" and not qwen3:
            r.refusal = "vLLM builds Eagle3LlamaForCausalLM for a qwen3 speculators config and fails to load its " \
                        "q_norm/k_norm (KeyError)"
            return r
        spec_cfg = config.get("speculators_config")
        verifier = spec_cfg.get("verifier") if isinstance(spec_cfg, dict) else None
        verifier = verifier.get("name_or_path") if isinstance(verifier, dict) else None
        named = config.get("speculators_model_type")
        r.kind = SPECULATORS_KINDS.get(named) if isinstance(named, str) else None  # (a list is no kind: no lookup)
        if r.kind is None:
            r.refusal = f"vLLM's speculators path builds no drafter for {config.get('speculators_model_type')!r} here"
            return r
        if local_verifier(verifier):
            r.caveats.append(SHORTCUT_REFUSES.format(verifier=verifier, method=r.kind))
        if r.kind == "peagle" and config.get("mask_token_id") is None:
            r.refusal = "vLLM fails to build the P-EAGLE config: update_peagle reads config_dict['mask_token_id']"
            return r
    else:
        archs = architectures(config)
        family = served_family(archs)
        if family == "qwen3" and not qwen3:
            family = None
        if config.get("model_type") in MTP_MODEL_TYPES:
            r.refusal = (f"vLLM takes a {config['model_type']} draft config for DeepSeek MTP: model architectures "
                         "['Eagle3DeepSeekMTPModel'] are not supported")
            return r
        if family is None:
            r.refusal = f"model architectures {archs} are not supported"
            return r
        if PEAGLE_ARCHITECTURES & set(archs):
            r.kind = "peagle"
            if not any(k in config for k in PARALLEL_DRAFTING_TOKEN_KEYS):
                # the proposer's _init_parallel_drafting_params (v1/spec_decode); the speculators path sets
                # pard_token from mask_token_id
                r.refusal = ("for parallel drafting, the draft model config must have "
                             "`pard_token` or `ptd_token_id`")
                return r
    r.refusal = unsupported_activation(config, ACTIVATIONS)
    if r.refusal:
        return r
    eagle31 = RELEASES.reads(EAGLE31_FLAGS, release) and (
        not speculators or RELEASES.reads(SPECULATORS_EAGLE31_FLAGS, release))
    if flag(config, "fc_norm") and not eagle31 and family != "deepseek_mla" and has(names, r"^fc_norm\."):
        r.refusal = "vLLM builds no fc_norm and fails to load fc_norm.* (KeyError)"
        return r
    r.family = family
    eagle = nested(config)
    places = {"top": id_list(config.get(IDS_KEY)), "nested": id_list(eagle.get(IDS_KEY))}
    read_from = [p for p in IDS_FROM[engine] if p != "nested" or RELEASES.reads(V1_NESTED_IDS, release)]
    ids = next((places[p] for p in read_from if places[p] is not None), None)
    if ids is None:
        r.captures_defaults(ctx.depth)
    else:
        r.captures = sorted(set(ids))
    top_nbf = flag(config, "norm_before_fc") and (not speculators or RELEASES.reads(SPECULATORS_NORM_BEFORE_FC,
                                                                                    release))
    r.flags = {
        "norm_before_residual": flag(config, "norm_before_residual", default=speculators),
        "norm_before_fc": top_nbf or (flag(eagle, "norm_before_fc") and RELEASES.reads(NESTED_NORM_BEFORE_FC, release)),
        "fc_norm": flag(config, "fc_norm") and eagle31,
        "norm_output": flag(config, "norm_output") and eagle31,
    }
    if family == "deepseek_mla":
        r.flags = {f: v and f in MLA_FLAGS for f, v in r.flags.items()}
    unknown = has(names, NO_MODULE)
    if unknown and UNKNOWN_NAMES_REFUSED:
        r.refusal = (f"vLLM fails to load it: its loader raises on {unknown[0]!r} (no module or parameter of that "
                     "name; it adds model. itself)")
        return r
    if num_layers(names) > 1:
        unapplied = unread_later_norms(names, "hidden_norm", LATER_NORM_APPLIED)
        if unapplied:
            r.silent.append(f"vLLM loads {', '.join(unapplied[:3])} into a norm it never applies in layers >= 1 "
                            "(it normalises them with input_layernorm, left at its initial ones)")
    if engine == "vllm-v1" and (ctx.mrope or mrope_section(config) is not None) and \
            not RELEASES.reads(MROPE_SLOTS, release):
        r.caveats.append(MROPE_CAVEAT)  # (a drafter for an M-RoPE target carries its mrope_section: vLLM reads it)
    if ids is not None and len(ids) >= 4:
        # vLLM PR #54598 (open, as issue 22 reports; not read here): some releases crash at start-up on 4+
        # top-level ids. Loud, not silent: a caveat, not a wrong verdict.
        r.caveats.append(f"{len(ids)} capture ids: some vLLM releases crash at start-up on 4 or more top-level ids "
                         "(vLLM PR #54598, open)")
    return r


def read_v1(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext,
            release: str | None = None) -> Reading:
    return _read("vllm-v1", config, names, ctx, release)


def read_v2(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext,
            release: str | None = None) -> Reading:
    return _read("vllm-v2", config, names, ctx, release)
