"""SGLang / SpecForge layout (`LlamaForCausalLMEagle3`, flat HF-style config). docs/formats.md §2.2.

SpecForge writes `midlayer.*`; SGLang also loads `layers.0.*` and `model.layers.0.*`.
Capture ids are block OUTPUTS (boundary - 1), nested in `eagle_config`; SGLang ignores a
top-level copy and silently captures its defaults instead. Multi-layer Llama drafters use
`layers.{i}.*`, and SGLang's layers >= 1 normalise their input with `hidden_norm` (the
canonical `input_layernorm`). The MLA drafter (`Eagle3DeepseekV2ForCausalLM`, Kimi-K2.5 /
DeepSeek targets) is single-layer and has no norm_before_fc.
"""

from __future__ import annotations

from typing import Any

from .final_state import FLAG, final_fields, read_final_head, write_flag
from ..drafter import Drafter
from ..errors import FormatError, RefusalError
from .config_keys import refuse_key_errors
from .vllm import ARCHITECTURE as VLLM_ARCHITECTURE
from .base import (
    TOP_KEYS,
    Checkpoint,
    ConvertOptions,
    Detection,
    LayerRename,
    Layout,
    Rename,
    ShiftedLayers,
    WritePlan,
    build_drafter,
    check_top_level_copy,
    given_capture,
    infer_target,
    canonical_tensors,
    decoder_dict,
    decoder_fields,
    drop_unused_layer_norms,
    flat_markers,
    infer_num_aux,
    keep_model_type_spelling,
    modelopt_first_layer_note,
    refuse_uncaptured_states,
    refuse_unless,
    source_config,
    split_decoder_extra,
    to_stored,
    with_both_later_norms,
    with_yarn_defaults,
    write_capture_ids,
)
from ..engines import sglang as engine
from ..capture_ids import IDS_KEY, capture_context, engine_boundaries
from ..vocab_map import identity_map

# Read in order; written with the first matching rule (SpecForge's spelling).
RENAMES: tuple[Rename | LayerRename | ShiftedLayers, ...] = (
    Rename("layers.0.", "midlayer.", single_layer_only=True),
    Rename("layers.0.", "midlayer.", read_only=True),  # SGLang maps midlayer to layers.0 whatever the depth
    Rename("layers.", "model.layers.", read_only=True),
    Rename("layers.", "layers."),
    Rename("fc_norm.0.", "aux_norm_low.", read_only=True),  # SGLang's legacy fc_norm names
    Rename("fc_norm.1.", "aux_norm_mid.", read_only=True),
    Rename("fc_norm.2.", "aux_norm_high.", read_only=True),
    LayerRename("input_layernorm.", "hidden_norm."),  # layers >= 1: SGLang's pre-attention norm
    # SGLang at 03d5a77 named layers >= 1 `model.additional_layers.{i-1}` (engines/sglang.py): read, never written
    ShiftedLayers("additional_layers.", 1),
    ShiftedLayers("model.additional_layers.", 1),
)
# The class SGLang builds for each drafter family (it has no Qwen3 EAGLE-3 class): the engine module's facts.
ARCHITECTURE = engine.ARCHITECTURE
# Flat-config keys this layout models on top of the decoder keys.
MODELED = {"architectures", "draft_vocab_size", "target_hidden_size", "eagle_config", "num_aux_hidden_states",
           "norm_before_fc", "fc_norm", "use_aux_norm", "norm_output", "bias",
           IDS_KEY}


# Flags SpecForge's LlamaForCausalLMEagle3 never reads (llama3_eagle.py at a6b6b023): a config carrying one was written
# for an engine, not exported by SpecForge.
ENGINE_ONLY_FLAGS = frozenset({"norm_before_residual", "norm_before_fc"})


def refuse_fc_bias(raw: dict[str, Any]) -> None:
    """SGLang's `bias: true` (read by validate too): SGLang 0.5.23 then builds a bias on fc
    (models/llama_eagle3.py:166, `bias=getattr(config, "bias", False)`) and on each layer's o_proj (models/llama.py:339,
    `attention_bias = getattr(config, "attention_bias", False) or getattr(config, "bias", False)`; llama_eagle3.py:72
    rebuilds qkv_proj with bias=False); 0.5.11 alike. No other engine builds an fc bias, nor has the canonical drafter
    one. (A `bias` that is no boolean is the key table's to refuse.)"""
    if raw.get("bias") is True:
        raise RefusalError("config.json sets bias: true (an fc bias); no other layout can hold it",
                           "serve this drafter with SGLang as it is", code="E-BIAS-UNSUPPORTED")


class SGLangLayout(Layout):
    name = "sglang"
    summary = ("SGLang `LlamaForCausalLMEagle3` / `Eagle3DeepseekV2ForCausalLM`, as SpecForge exports it; "
               "served by `sglang.launch_server`")
    engine = "sglang"
    renames = RENAMES
    home_engines = ("sglang",)

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        m = flat_markers(ckpt)
        arch = next((a for a in m.architectures if a in ARCHITECTURE.values()), None)
        if arch is None or m.modelopt_fields or m.pickled:
            return None
        if m.midlayer:  # also when vLLM markers are present: then the layout is ambiguous and detect says so
            return Detection(self.name, True, f"{arch} config with midlayer.* tensors (SpecForge)")
        if m.norm_before_residual_key or (m.top_level_ids and not m.nested_ids):
            return None  # vLLM's markers (a top-level copy beside nested ids is ours, for vLLM)
        if m.has_eagle_config:
            ids = "ids nested and at the top level" if m.top_level_ids else "no top-level ids"
            return Detection(self.name, True, f"{arch} config with eagle_config and {ids}")
        return Detection(self.name, False, f"{arch} flat config without layout markers (vLLM reads it the same way)")

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = source_config(ckpt)
        notes = list(ckpt.notes)
        refuse_key_errors(self.name, raw, notes)
        fields: dict[str, Any] = decoder_fields(raw, "config.json", ckpt.tensors, notes)
        extra = split_decoder_extra(raw, MODELED)
        keep_model_type_spelling(raw, fields, extra)
        fields["hf_extra"] = extra
        archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
        built = next((fam for fam, arch in ARCHITECTURE.items() if arch in archs), None)
        if built is not None and built != fields["family"]:
            family = fields["family"]
            hint = f"set architectures to [{ARCHITECTURE[family]!r}]" if family in ARCHITECTURE else (
                f"SGLang has no {family} drafter class; vLLM builds {VLLM_ARCHITECTURE[family]}: set architectures "
                f"to [{VLLM_ARCHITECTURE[family]!r}] and convert with --from vllm")
            raise FormatError(f"architectures {archs} make SGLang build its {built} drafter class, but the config "
                              f"describes a {family} drafter", hint, code="E-CONFIG-FAMILY")
        if "draft_vocab_size" not in raw:
            raise FormatError("config.json has no draft_vocab_size", "SGLang fails to construct the drafter "
                              "without it: set it to the lm_head rows", code="E-CONFIG-FIELD")
        vd = raw["draft_vocab_size"]
        fields["draft_vocab_size"] = fields["vocab_size"] if vd is None else vd
        if raw.get("target_hidden_size") is not None:
            fields["target_hidden_size"] = raw["target_hidden_size"]
        eagle = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
        fields["norm_before_fc"] = bool(raw.get("norm_before_fc", eagle.get("norm_before_fc", False)))
        fields["fc_norm"] = bool(raw.get("fc_norm", raw.get("use_aux_norm", False)))
        if raw.get("norm_output") is False and ARCHITECTURE["llama"] in archs and not ENGINE_ONLY_FLAGS & set(raw):
            # SpecForge's compute_logits (LlamaForCausalLMEagle3, llama3_eagle.py, since b7ce50cd, 2026-07-19) applies
            # the final norm only when norm_output is true, its default: false trains lm_head on the un-normalised
            # state. Every engine applies the final norm before lm_head, and no rewrite of the norm weight removes a
            # division by RMS. A config carrying a flag that class never reads was written for an engine, where false
            # is the usual final norm.
            raise RefusalError("config.json sets norm_output: false: SpecForge trains such a drafter with no final "
                               "norm before lm_head (compute_logits, llama3_eagle.py); SGLang applies one, as vLLM, "
                               "TensorRT-LLM and llama.cpp do, and would serve it wrong",
                               "no layout serves this drafter as trained; if SpecForge did not train it, delete the "
                               "key (absent, SGLang and SpecForge both apply the final norm)", code="E-ENGINE-WRONG")
        fields["norm_output"] = bool(raw.get("norm_output", False))
        if fields["norm_output"]:
            # SpecForge (training) normalises only what lm_head sees; SGLang and vLLM also hand the normalised
            # state to the next draft step. Same weights, two maths: the engines' meaning is carried.
            notes.append("WARNING: norm_output is true: if SpecForge trained this drafter, it normalised only the "
                         "state lm_head sees, while SGLang and vLLM also feed the normalised state to the next "
                         "draft step; every engine serves steps after the first with that difference")
        refuse_fc_bias(raw)
        final = read_final_head(eagle, ckpt.tensors, fields["hidden_size"])
        ids, boundaries = (None, None) if final else self._capture(ckpt, raw, eagle, fields, options, notes)
        fields["capture_boundaries"] = check_top_level_copy(raw, boundaries, "SGLang", options)
        ckpt = drop_unused_layer_norms(ckpt, "input_layernorm", "hidden_norm", "SGLang", "vllm", notes)
        tensors = canonical_tensors(ckpt, RENAMES, fields["num_layers"], self.name)
        declared = raw.get("num_aux_hidden_states")
        fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields,
                                                        declared if isinstance(declared, int) else None, ids)
        if final:
            final_fields(fields, notes)
        fields["top_extra"] = {k: raw[k] for k in TOP_KEYS if k in raw}
        own: dict[str, Any] = {}  # architectures are not carried: SGLang picks its class by them
        modelled = ("norm_before_fc", FLAG) if final else (IDS_KEY, "norm_before_fc", FLAG)  # (final: ids unused)
        nested = {k: v for k, v in eagle.items() if k not in modelled}
        if nested:
            own["eagle_config"] = nested
        fields["layout_extra"] = {self.name: own} if own else {}
        return build_drafter(ckpt, fields, tensors, options, notes)

    def _capture(self, ckpt: Checkpoint, raw: dict[str, Any], eagle: dict[str, Any], fields: dict[str, Any],
                 options: ConvertOptions, notes: list[str]) -> tuple[list[int] | None, list[int] | None]:
        """The nested capture ids and the boundaries SGLang reads them as (for the target family, which it may
        infer and record in `fields`); a list only at the top level must be settled by --capture-layers."""
        ids = eagle.get(IDS_KEY)  # (each a list of integers or absent: refuse_key_errors refused anything else)
        top = raw.get(IDS_KEY)
        given = given_capture(options)
        if ids is None and top is not None and given is not None and isinstance(top, list) and \
                sorted(given) in (sorted(top), sorted(x + 1 for x in top if isinstance(x, int))):
            ids, top = None, None  # --capture-layers settles which reading was trained: it is applied below
        elif ids is None and IDS_KEY in raw:
            raise FormatError(
                f"capture ids {top} are only at the top level; SGLang ignores them there and captures its "
                "defaults, while vLLM reads the same list as boundaries", "say how the training counted them: add "
                f"`--capture-layers {','.join(map(str, top))} --convention sglang` "
                "(SGLang block outputs) or `--convention boundary` (vLLM boundaries)", code="E-CAPTURE-AMBIGUOUS")
        boundaries = None
        if ids is not None:
            target, inferred = infer_target(ckpt, raw, fields["family"], options)
            family, depth = capture_context(fields["family"], target)
            boundaries = engine_boundaries(self.engine, ids, family, depth)
            if inferred and boundaries != engine_boundaries(self.engine, ids):
                fields["target"] = target  # the writers must spell the ids for the same target family
                notes.append(f"SGLang ids {ids} read as boundaries {boundaries}, SGLang's reading for a "
                             f"{family}-family target, inferred from {inferred} (without --target; on other "
                             f"targets SGLang reads {engine_boundaries(self.engine, ids)})")
            if boundaries is None:
                raise FormatError(f"SGLang ids {ids} capture nothing on a {family} target",
                                  "fix eagle_config.eagle_aux_hidden_state_layer_ids", code="E-CAPTURE-FIELD")
        return ids, boundaries

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        refuse_unless(not cfg.norm_before_residual,
                      "norm_before_residual is true: the drafter was trained with hidden_norm(h) as the first "
                      "layer's residual, and SGLang has no such option (it would serve different maths)",
                      "serve this drafter with vLLM: `--to speculators` or `--to vllm`", "E-FLAG-UNSUPPORTED")
        refuse_unless(cfg.family in ARCHITECTURE,
                      f"SGLang has no {cfg.family} EAGLE-3 drafter class (q_norm/k_norm would be dropped silently)",
                      "serve it with vLLM: `--to speculators` or `--to vllm`", "E-FAMILY-UNSUPPORTED")
        # (every reader's tensor table refuses a bias tensor neither flag explains: the flags say it all)
        refuse_unless(not (cfg.attention_bias or cfg.mlp_bias),
                      "the drafter has bias tensors; SGLang's Eagle3 loader drops biases silently",
                      "serve it with vLLM: `--to speculators` or `--to vllm`", "E-BIAS-UNSUPPORTED")
        if cfg.family == "deepseek_mla":
            refuse_unless(cfg.num_layers == 1, f"the MLA drafter has {cfg.num_layers} decoder layers; SGLang's "
                          "Eagle3DeepseekV2ForCausalLM builds one", "serve it with vLLM: `--to vllm`",
                          "E-LAYERS-UNSUPPORTED")
            refuse_unless(not cfg.norm_before_fc, "norm_before_fc is true and SGLang's Eagle3DeepseekV2ForCausalLM "
                          "has no input_norm: the fused states would be served unnormalised",
                          "no engine's MLA drafter class applies norm_before_fc: keep the source layout",
                          "E-FLAG-UNSUPPORTED")
        refuse_uncaptured_states(cfg, self.name)
        own = dict(cfg.layout_extra.get(self.name, {}))
        eagle: dict[str, Any] = {"use_aux_hidden_state": True, **own.pop("eagle_config", {})}
        write_flag(eagle, cfg)
        config: dict[str, Any] = {**decoder_dict(cfg), **cfg.top_extra, "architectures": [ARCHITECTURE[cfg.family]],
                                  **own, "draft_vocab_size": cfg.draft_vocab_size}
        write_capture_ids(config, eagle, cfg, options, self.engine, nested_required=True)
        config["eagle_config"] = eagle
        derived = []
        if "rope_theta" not in config and "rope_theta" in cfg.rope_normalized():
            # SpecForge writes both spellings; SGLang reads the transformers-4 one.
            config["rope_theta"] = cfg.rope_normalized()["rope_theta"]
            derived.append("rope_theta")
        parameters = config.get("rope_parameters")
        if "rope_scaling" not in config and isinstance(parameters, dict) and \
                parameters.get("rope_type", "default") != "default":
            # SGLang 0.5.23 reads rope_parameters first (models/llama.py), releases before it rope_scaling only:
            # the scaling in both spellings, as SpecForge writes it
            config["rope_scaling"] = {k: v for k, v in parameters.items() if k != "rope_theta"}
            derived.append("rope_scaling")
        derived += with_yarn_defaults(config)  # SpecForge's YaRN needs beta_fast/beta_slow written out
        if cfg.target_hidden_size is not None:
            config["target_hidden_size"] = cfg.target_hidden_size  # SGLang checks presence only: never null
        if cfg.num_aux_hidden_states != 3 and cfg.capture == "aux":
            config["num_aux_hidden_states"] = cfg.num_aux_hidden_states
        for flag in ("norm_before_fc", "fc_norm", "norm_output"):
            if getattr(cfg, flag):
                config[flag] = True
        if cfg.norm_before_fc:  # SGLang reads it nested first (llama_eagle3.py), TensorRT-LLM only there
            eagle["norm_before_fc"] = True
        tensors = with_both_later_norms({to_stored(n, RENAMES, cfg.num_layers): src
                                         for n, src in drafter.tensors.items()}, cfg.num_layers)
        vocab = drafter.vocab or identity_map(cfg.vocab_size)  # SpecForge writes the identity map when Vd == V
        tensors["d2t"] = vocab.d2t_tensor()
        tensors["t2d"] = vocab.t2d_tensor()
        return WritePlan(self.name, dict(sorted(config.items())), tensors, modelopt_first_layer_note(cfg, self.name),
                         derived_keys=derived)


LAYOUT = SGLangLayout()
