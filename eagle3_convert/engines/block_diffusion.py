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

DFlash2 (speculators 0.9.0 `models/dflash2`; converters/dflash2.py): vLLM 0.33.0 maps `speculators_model_type:
dflash2` to method dflash (`speculators/base.py`) and `update_dflash2` (algos.py) to `DFlash2DraftModel` with the four
sizes copied into dflash_config; `registry.py` builds `DFlash2Qwen3ForCausalLM` (qwen3_dflash2.py), whose
convolutions count positions in blocks of `1 + num_speculative_tokens`, not the config's block_size; the V1 runner
refuses it (config/vllm.py, "DFlash candidate-head drafts"). vLLM 0.24.0 and SGLang 0.5.11 have no DFlash2 (no
file of their installed packages names it). SGLang 0.5.23 registers `DFlash2DraftModel` (srt/models/dflash.py) and
reads the sizes and block_size (default 16) from dflash_config (`parse_dflash_draft_config`, dflash_utils.py).

Causality within the draft block, per layer (docs/formats.md §2.8, "Causality"): vLLM 0.33.0 `_dflash_layer_causal`
(qwen3_dflash.py: `is_causal`, then `dflash_config.causal` for every layer, then causal exactly where `layer_types`
says "sliding_attention"), fed by `update_dflash` (`causal = not sliding_window_non_causal`, absent: true) for a
speculators DFlash file (`update_dspark` writes none); mixed sliding/full layers run on the V2 runner only (config/vllm.py `_validate_v1_model_runner`,
qwen3_dflash.py `_resolve_layer_attention`: NotImplementedError; PR #47914). SGLang 0.5.23 `_get_dflash_layer_attention_
params` (srt/models/dflash.py): `is_causal`, else `layer_types` (no `dflash_config.causal`). speculators 0.9.0
`models/dflash/attention.py`: full-attention layers bidirectional, sliding ones causal unless
`sliding_window_non_causal` (default false).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..capture_ids import block_diffusion_boundaries
from ..drafter import KIND_LABELS as LABEL, DrafterConfig
from ..names import engine_of
from .common import AS_TRAINED, REFUSES, UNKNOWN, WRONG, architectures, id_list

VLLM_CLASS = {"dflash": "DFlashQwen3ForCausalLM", "dspark": "Qwen3DSparkForCausalLM",
              "dflash2": "DFlash2Qwen3ForCausalLM"}
# The one vLLM runner a kind runs on, and why (config/vllm.py: "DSpark is implemented only by the V2 GPU model
# runner"; `_get_v1_model_runner_unsupported_features`: "DFlash candidate-head drafts", for DFlash2DraftModel)
VLLM_RUNNER_ONLY = {"dspark": "vllm-v2", "dflash2": "vllm-v2"}
V2_ONLY_WHY = {"dspark": "DSpark is implemented only by the V2 GPU model runner (config/vllm.py refuses it)",
               "dflash2": "the V1 runner refuses DFlash2's candidate head (config/vllm.py: \"Model Runner V1 does "
                          "not support: DFlash candidate-head drafts\"; its DFlashProposer would never call it)"}
# Engines whose block-diffusion readers were not read far enough for a verdict, and what is known of them.
# TensorRT-LLM: `SpeculativeDecodingMode` has DFLASH and DSPARK (_torch/speculative/interface.py @ 00b6d5a2);
# `DFlashForCausalLM` (_torch/models/modeling_dflash.py @ 7c7504c0) reads dflash_config.mask_token_id (else the
# top-level one, else vocab_size), dflash_config.target_layer_ids and block_size, and attends bidirectionally within
# the block unless a subclass says otherwise; how target_layer_ids become captured layers was not read.
NOT_READ = {
    "trtllm": "TensorRT-LLM's DFlashForCausalLM (modeling_dflash.py @ 7c7504c0) reads dflash_config's mask_token_id, "
              "target_layer_ids and block_size, but how it turns target_layer_ids into captured layers was not read",
    "llamacpp": "llama.cpp serves DFlash from a GGUF of architecture `dflash` (`--spec-type draft-dflash`, PR 22105), "
                "not from this file: its converter (conversion/qwen.py DFlashModel) was not read at a citable commit; "
                "`--to gguf --target-gguf TARGET.gguf` writes that GGUF, judged by llama.cpp's reading as it is "
                "written",
}
# llama.cpp on DSpark / DFlash2: the same arch with their own tensors (src/models/dflash.cpp), converter not read
LLAMACPP_OTHER = ("llama.cpp serves {label} from a GGUF of architecture `dflash` (`--spec-type draft-dflash`, PR "
                  "22105; src/models/dflash.cpp loads its own tensors), but the converter that writes them was not "
                  "read and this tool writes no {label} GGUF")
LLAMACPP_GGUF = ("builds llama.cpp's dflash graph (src/models/dflash.cpp: dflash.target_layers tapped as layer inputs, "
                 "non-causal attention over the block)")
NOT_READ_DFLASH2 = {"trtllm": "no DFlash2 (candidate selector, grouped convolutions) was found in TensorRT-LLM's "
                              "sources read (_torch/speculative, _torch/models)"}
SLIDING, FULL = "sliding_attention", "full_attention"
# speculators' sliding_window_non_causal when a config has none: DFlash2SpeculatorConfig's default is true
# (models/dflash2/config.py), DFlash's false (models/dflash/config.py); vLLM's update_dflash reads absent as true
NON_CAUSAL_DEFAULT = {"dflash": False, "dflash2": True}
MIXED_V1 = ("mixed sliding/full attention layers run on the V2 runner only (config/vllm.py: \"Model Runner V1 does "
            "not support: mixed sliding/full dflash drafts\"; qwen3_dflash.py raises NotImplementedError)")


def _decoder(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Where a file's decoder config sits: speculators nests it (vLLM builds its config from it)."""
    dec = config.get("transformer_layer_config") if "speculators_model_type" in config else config
    return dec if isinstance(dec, dict) else {}


def _types(dec: Mapping[str, Any]) -> list[Any]:
    types, n = dec.get("layer_types"), dec.get("num_hidden_layers")
    if isinstance(types, list):
        return types
    return [FULL] * n if isinstance(n, int) and n > 0 else []


def mixed_layers(dec: Mapping[str, Any]) -> bool:
    """Sliding-window and full-attention layers both (vLLM's `_dflash_needs_multi_kv_group`)."""
    sliding = sum(t == SLIDING for t in _types(dec))
    return 0 < sliding < len(_types(dec))


def vllm_runner_only(config: Mapping[str, Any], kind: str) -> tuple[str, str] | None:
    """The one vLLM runner that runs this file, and why; None: both do."""
    if kind in VLLM_RUNNER_ONLY:
        return VLLM_RUNNER_ONLY[kind], V2_ONLY_WHY[kind]
    return ("vllm-v2", MIXED_V1) if mixed_layers(_decoder(config)) else None


def by_type(types: list[Any], sliding_causal: bool = True) -> list[bool]:
    """Causal exactly where a layer slides (vLLM's and SGLang's reading when no override is given)."""
    return [t == SLIDING and sliding_causal for t in types]


def layer_types(cfg: DrafterConfig) -> list[Any]:
    types = cfg.hf_extra.get("layer_types")
    return types if isinstance(types, list) else [FULL] * cfg.num_layers


def _override(*values: Any) -> bool | None:
    return next((v for v in values if isinstance(v, bool)), None)


def trained_causality(cfg: DrafterConfig) -> list[bool]:
    """Each layer's attention within the draft block as trained (True: causal). An explicit `is_causal` or a flat
    `dflash_config.causal` holds for every layer; else a sliding layer is causal unless speculators'
    `sliding_window_non_causal` says so, a full one bidirectional: SpecForge's masks (dflash_family_model.py
    `create_dflash_sdpa_mask`: `kv_block_offset <= q_block_offset` where a window is set) and speculators'
    (attention.py) alike."""
    types = layer_types(cfg)
    whole = _override(cfg.hf_extra.get("is_causal"), cfg.algorithm.get("causal"))
    if whole is not None:
        return [whole] * len(types)
    return by_type(types, not cfg.algorithm.get("sliding_window_non_causal", False))


def served_causality(runner: str, config: Mapping[str, Any]) -> list[bool]:
    """Each layer's causality as the runner reads the file."""
    dec = _decoder(config)
    types = _types(dec)
    if engine_of(runner) == "vllm":
        if config.get("speculators_model_type") in ("dflash", "dflash2"):  # update_dflash: one for every layer
            whole = not config.get("sliding_window_non_causal", True)
            return [_override(dec.get("is_causal"), whole)] * len(types)  # type: ignore[list-item]
        # (update_dspark writes no causal: the decoder's own keys decide)
        whole = _override(dec.get("is_causal"), _nested(dec).get("causal"))
        return [whole] * len(types) if whole is not None else by_type(types, True)
    if runner == "sglang":  # (no dflash_config.causal)
        whole = _override(dec.get("is_causal"))
        return [whole] * len(types) if whole is not None else by_type(types, True)
    default = NON_CAUSAL_DEFAULT.get(config.get("speculators_model_type"), False)  # type: ignore[arg-type]
    return by_type(types, not config.get("sliding_window_non_causal", default))  # speculators


def _layers(indices: list[int]) -> str:
    return f"layer{'s' if len(indices) > 1 else ''} {', '.join(map(str, indices))}"


def causality_lost(served: list[bool], trained: list[bool]) -> str | None:
    """Where the layers' causality differs from the trained, said; None where it does not."""
    differ = [i for i, (s, t) in enumerate(zip(served, trained)) if s != t]
    if not differ:
        return None
    causal = [i for i in differ if served[i]]
    said = [f"{_layers(causal)} causal" if causal else "",
            f"{_layers([i for i in differ if not served[i]])} bidirectional" if len(causal) < len(differ) else ""]
    return f"attends with {' and '.join(x for x in said if x)} within the draft block, not as trained"


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
    only = vllm_runner_only(config, kind)
    if only is not None and only[0] != runner:
        return REFUSES, None, only[1]
    if "speculators_model_type" in config:
        ids = id_list(config.get("aux_hidden_state_layer_ids"))
        if ids is None:
            return REFUSES, None, f"update_{kind} reads config_dict['aux_hidden_state_layer_ids'] (KeyError)"
        mask = config.get("mask_token_id")
        builds = f"{VLLM_CLASS[kind]} (speculators {kind})"
        if kind == "dflash2":  # (its sizes: converters/dflash2.py refuses a file without one)
            conv_block = _vllm_conv_block(config)
            if conv_block is not None and conv_block != cfg.algorithm.get("block_size"):
                return WRONG, None, (f"its convolutions count positions in blocks of 1 + num_speculative_tokens = "
                                     f"{conv_block} (qwen3_dflash2.py), not the trained block_size "
                                     f"{cfg.algorithm.get('block_size')}")
    else:
        archs = architectures(config)
        if kind == "dspark" and config.get("model_type") != "qwen3":
            return REFUSES, None, (f"a flat DSparkDraftModel of model_type {config.get('model_type')!r} is built as "
                                     "DeepSeek-V4's in-target DSpark, not this drafter")
        if not {"DFlashDraftModel", "DSparkDraftModel", "DFlash2DraftModel"} & set(archs):
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
    if kind == "dflash2" and "speculators_model_type" not in config:
        builds += (f" (serve with num_speculative_tokens {cfg.algorithm.get('block_size', 0) - 1}: its convolutions "
                   "count positions in blocks of 1 + num_speculative_tokens, qwen3_dflash2.py)")
    return _captures(ids, cfg, f"builds {builds}", served_causality(runner, config))


def _vllm_conv_block(config: Mapping[str, Any]) -> int | None:
    """The block vLLM's DFlash2 convolutions count positions in: 1 + num_speculative_tokens, which a speculators file
    gives as its first proposal method's speculative_tokens (speculators/base.py)."""
    spec_cfg = config.get("speculators_config") if isinstance(config.get("speculators_config"), dict) else {}
    methods = spec_cfg.get("proposal_methods")
    tokens = methods[0].get("speculative_tokens") if isinstance(methods, list) and methods and \
        isinstance(methods[0], dict) else None
    return tokens + 1 if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def _sglang(config: Mapping[str, Any], cfg: DrafterConfig) -> tuple[str, list[int] | None, str]:
    if "speculators_model_type" in config:
        return REFUSES, None, (f"SGLang reads no speculators config: {architectures(config)} is no class it "
                                 "registers")
    archs = set(architectures(config))
    if not {"DFlashDraftModel", "DSparkDraftModel", "DFlash2DraftModel"} & archs:
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
    return _captures(ids, cfg, f"builds {sorted(archs)[0]}", served_causality("sglang", config))


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
                               f"{verifier['name_or_path']} where the file has none",
                     served_causality("speculators", config))


def _captures(ids: list[int] | None, cfg: DrafterConfig, builds: str,
              causality: list[bool]) -> tuple[str, list[int] | None, str]:
    trained = cfg.capture_boundaries
    if ids is not None and trained is not None and sorted(set(ids)) != sorted(set(trained)):
        return WRONG, ids, f"{builds}, capturing boundaries {ids}, not the trained {trained}"
    lost = causality_lost(causality, trained_causality(cfg))
    if lost is not None:
        return WRONG, ids, f"{builds}, but {lost}"
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
    engine = engine_of(runner)
    if engine == "llamacpp":
        return _llamacpp(config, cfg)
    if cfg.kind == "dflash2" and engine in NOT_READ_DFLASH2:
        return UNKNOWN, None, NOT_READ_DFLASH2[engine]
    return UNKNOWN, None, NOT_READ.get(engine, f"no {LABEL[cfg.kind]} reader of this engine was read")


def _llamacpp(config: Mapping[str, Any], cfg: DrafterConfig) -> tuple[str, list[int] | None, str]:
    """llama.cpp on a DFlash file: a `dflash` GGUF (as read, or `--to gguf`'s plan {"gguf": keys}) is loaded by
    llama_model_dflash::load_arch_hparams, which reads the top-level dflash.target_layers as the ids it taps with
    llama_set_embeddings_layer_inp (the input of layer id: boundary id); without them it refuses (#25116)."""
    if cfg.kind != "dflash":
        return UNKNOWN, None, LLAMACPP_OTHER.format(label=LABEL[cfg.kind])
    meta = config.get("gguf") if isinstance(config.get("gguf"), dict) else config
    if meta.get("general.architecture") != "dflash":
        return UNKNOWN, None, NOT_READ["llamacpp"]
    ids = id_list(meta.get("dflash.target_layers"))
    if not ids:
        return REFUSES, None, "llama.cpp refuses it: \"DFlash model requires 'target_layers' in GGUF metadata\" " \
                              "(dflash.target_layers must be a top-level key, llama.cpp #25116)"
    return _captures(ids, cfg, LLAMACPP_GGUF, [False] * cfg.num_layers)
