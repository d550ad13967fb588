"""What each engine reads from a DFlash or DSpark file (the block-diffusion kinds), as data and a short replay.

Read in the newest release of each engine we know (vLLM 0.33.0, SGLang 0.5.23; speculators at the commit its
module names): any other release is judged unknown for these kinds. vLLM: `transformers_utils/configs/speculators/
algos.py` (`update_dflash`, `update_dspark`), `config/speculative.py` (a flat `DSparkDraftModel` of model_type
qwen3 becomes `Qwen3DSparkModel`), `model_executor/models/qwen3_dflash.py` / `qwen3_dspark.py` (embed_tokens and
lm_head shared from the target when the file has none; `config.markov_rank` read at the top level), the runners'
`get_eagle3_aux_layers_from_config` (dflash_config.target_layer_ids + 1), `llm_base_proposer.py`
(`dflash_config.mask_token_id` or `mask_token_id`) and `config/vllm.py` (DSpark on the V2 runner only).
SGLang: `srt/models/dflash.py`, `srt/models/dspark.py` (`build_markov_head` reads a top-level `markov_rank`;
`lm_head.` skipped: the target's head), `spec_aux_hidden_state.py` / `qwen3.py` (`layers_to_capture =
target_layer_ids + 1`); no speculators-config reader. speculators (@ c05b95b): `models/dflash/core.py`, `model.py`
(`from_pretrained` calls `load_verifier_weights`).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..capture_ids import block_diffusion_boundaries
from ..drafter import KIND_LABELS as LABEL, DrafterConfig
from ..names import engine_of
from .common import AS_TRAINED, REFUSES, UNKNOWN, WRONG, architectures, id_list

VLLM_CLASS = {"dflash": "DFlashQwen3ForCausalLM", "dspark": "Qwen3DSparkForCausalLM"}
# The one vLLM runner a kind runs on (config/vllm.py: "DSpark is implemented only by the V2 GPU model runner")
VLLM_RUNNER_ONLY = {"dspark": "vllm-v2"}


def _nested(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("dflash_config")
    return nested if isinstance(nested, dict) else {}


def _flat_ids(config: Mapping[str, Any], top_level_too: bool) -> list[int] | None:
    ids = id_list(_nested(config).get("target_layer_ids"))
    if ids is None and top_level_too:
        ids = id_list(config.get("target_layer_ids"))
    return block_diffusion_boundaries(ids) if ids is not None else None


def _vllm(config: Mapping[str, Any], cfg: DrafterConfig, runner: str) -> tuple[str, list[int] | None, str]:
    kind = cfg.kind
    if VLLM_RUNNER_ONLY.get(kind, runner) != runner:
        return REFUSES, None, (f"{LABEL[kind]} is implemented only by the V2 GPU model runner (config/vllm.py "
                               "refuses it)")
    if "speculators_model_type" in config:
        ids = id_list(config.get("aux_hidden_state_layer_ids"))
        if ids is None:
            return REFUSES, None, f"update_{kind} reads config_dict['aux_hidden_state_layer_ids'] (KeyError)"
        mask = config.get("mask_token_id")
        builds = f"{VLLM_CLASS[kind]} (speculators {kind})"
    else:
        archs = architectures(config)
        if kind == "dspark" and config.get("model_type") != "qwen3":
            return REFUSES, None, (f"a flat DSparkDraftModel of model_type {config.get('model_type')!r} is built as "
                                     "DeepSeek-V4's in-target DSpark, not this drafter")
        if not {"DFlashDraftModel", "DSparkDraftModel"} & set(archs):
            return REFUSES, None, f"architectures {archs}: no DFlash/DSpark class vLLM registers"
        # the V2 runner also reads a top-level target_layer_ids (eagle3_utils.py); the V1 runner only the nested
        ids = id_list(config.get("eagle_aux_hidden_state_layer_ids")) or _flat_ids(config, runner == "vllm-v2")
        if ids is None:
            return WRONG, None, ("names no dflash_config.target_layer_ids: the runner captures the EAGLE-3 default "
                                   "layers")
        nested = _nested(config)
        mask = nested.get("mask_token_id", config.get("mask_token_id"))
        builds = VLLM_CLASS[kind]
    if mask is None:
        return REFUSES, None, ("the proposer needs dflash_config.mask_token_id or mask_token_id "
                                 "(_init_parallel_drafting_params raises)")
    if kind == "dspark" and config.get("markov_rank") is None:
        return REFUSES, None, "Qwen3DSparkModel reads config.markov_rank at the top level (AttributeError)"
    return _captures(ids, cfg, f"builds {builds}")


def _sglang(config: Mapping[str, Any], cfg: DrafterConfig) -> tuple[str, list[int] | None, str]:
    if "speculators_model_type" in config:
        return REFUSES, None, (f"SGLang reads no speculators config: {architectures(config)} is no class it "
                                 "registers")
    archs = set(architectures(config))
    if not {"DFlashDraftModel", "DSparkDraftModel"} & archs:
        return REFUSES, None, f"architectures {sorted(archs)}: no DFlash/DSpark class SGLang registers"
    ids = _flat_ids(config, top_level_too=False)
    if ids is None:
        return WRONG, None, "names no dflash_config.target_layer_ids: SGLang builds its default target layers"
    if cfg.kind == "dspark":
        if config.get("markov_rank") is None:
            return REFUSES, None, "build_markov_head reads markov_rank at the top level (DSpark requires > 0)"
        if cfg.draft_vocab_size != cfg.vocab_size:
            return WRONG, ids, (f"skips lm_head. and drafts over the target's {cfg.vocab_size}-token head, not "
                                  f"the drafter's {cfg.draft_vocab_size} tokens")
    elif cfg.draft_vocab_size != cfg.vocab_size:
        return UNKNOWN, ids, "a reduced draft vocabulary in SGLang's DFlash reader was not read"
    return _captures(ids, cfg, f"builds {sorted(archs)[0]}")


def _speculators(config: Mapping[str, Any], cfg: DrafterConfig) -> tuple[str, list[int] | None, str]:
    if "speculators_model_type" not in config:
        return REFUSES, None, ("from_pretrained reads only a speculators config (speculators_model_type); "
                                 f"`speculators convert` writes one from this {LABEL[cfg.kind]} file")
    ids = id_list(config.get("aux_hidden_state_layer_ids"))
    spec_cfg = config.get("speculators_config") if isinstance(config.get("speculators_config"), dict) else {}
    verifier = spec_cfg.get("verifier") if isinstance(spec_cfg.get("verifier"), dict) else {}
    if not verifier.get("name_or_path"):
        return WRONG, ids, ("names no verifier: load_verifier_weights returns early and the embedding and head it "
                              "would fill stay NaN")
    return _captures(ids, cfg, f"builds {LABEL[cfg.kind]}DraftModel; embedding and head from "
                               f"{verifier['name_or_path']} where the file has none")


def _captures(ids: list[int] | None, cfg: DrafterConfig, builds: str) -> tuple[str, list[int] | None, str]:
    trained = cfg.capture_boundaries
    if ids is not None and trained is not None and sorted(set(ids)) != sorted(set(trained)):
        return WRONG, ids, f"{builds}, capturing boundaries {ids}, not the trained {trained}"
    return AS_TRAINED, ids, f"{builds}, capturing boundaries {ids}"


def judge(runner: str, config: Mapping[str, Any], cfg: DrafterConfig) -> tuple[str, list[int] | None, str]:
    """(verdict, boundaries captured, why) of one engine runner on a DFlash/DSpark file."""
    if cfg.family != "qwen3" and engine_of(runner) in ("vllm", "sglang"):
        # vLLM registers Qwen3 DFlash/DSpark classes only (q_norm, k_norm in every layer); not judged further
        return UNKNOWN, None, (f"a {cfg.family} {LABEL[cfg.kind]} drafter: the classes read are Qwen3's (q_norm, "
                               "k_norm), and how they load a drafter without them was not read")
    if engine_of(runner) == "vllm":
        return _vllm(config, cfg, runner)
    if runner == "sglang":
        return _sglang(config, cfg)
    if runner == "speculators":
        return _speculators(config, cfg)
    return UNKNOWN, None, f"no {LABEL[cfg.kind]} reader of this engine was read"  # TensorRT-LLM, llama.cpp
