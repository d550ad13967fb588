"""NVIDIA ModelOpt HF export (served by vLLM and TensorRT-LLM). docs/formats.md §2.5.

`model.safetensors` with unprefixed `layers.{i}.*`, `fc`, `norm`, `lm_head`, `d2t` only when
Vd < V (no `t2d`, no `embed_tokens`); a flat Llama config (`model_type: kimi_k2` for the MLA
drafter) with a nested `eagle_config` holding BLOCK-OUTPUT capture ids and NVIDIA's own fields
(kept verbatim). Its Megatron exporter writes `midlayer.*` instead (read, never written).

ModelOpt's HF trainer runs the first layer's input_layernorm over h before hidden_norm, so a
drafter it trained computes hidden_norm(input_layernorm(h)) where engines compute
hidden_norm(h): `eagle_config.use_input_layernorm_in_first_layer` (true by default there) is
read as that fact (`DrafterConfig.input_layernorm_on_hidden`) and written back from it, so a
drafter trained elsewhere is exported with it false.

The Eagle 3.1 flags are written where TensorRT-LLM reads them (modeling_speculative.py @ 00679c66):
`norm_before_fc` nested in eagle_config (as NVIDIA's gpt-oss exports carry it), `fc_norm` and `norm_output`
at the top level (`eagle_config.return_hidden_post_norm` is read as norm_output too). TensorRT-LLM has no
norm_before_residual and applies fc_norm OR input_norm, never both: such drafters are refused. Layers >= 1
carry their pre-attention norm under both names: TensorRT-LLM applies `hidden_norm` there, vLLM
`input_layernorm`.
"""

from __future__ import annotations

from typing import Any

from ..drafter import Drafter
from ..errors import FormatError, RefusalError
from .config_keys import refuse_key_errors
from .base import (
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    Rename,
    WritePlan,
    build_drafter,
    check_top_level_copy,
    drop_unused_layer_norms,
    given_capture,
    canonical_tensors,
    decoder_dict,
    flat_fields,
    flat_markers,
    infer_num_aux,
    int_list,
    is_yarn,
    refuse_uncaptured_states,
    refuse_unless,
    source_config,
    with_both_later_norms,
    write_capture_ids,
)
from ..engines import shield_from_sglang
from ..capture_ids import IDS_KEY, engine_boundaries
from .final_state import final_fields, read_final_head, write_flag

RENAMES: tuple[Rename, ...] = (
    Rename("layers.0.", "midlayer.", single_layer_only=True, read_only=True),  # the Megatron exporter's spelling
)
ARCHITECTURE = {"llama": "LlamaForCausalLMEagle3", "deepseek_mla": "Eagle3DeepseekV2ForCausalLM"}
MODELED = {"architectures", "draft_vocab_size", "eagle_config", "target_hidden_size", "norm_before_fc", "fc_norm",
           "norm_output", IDS_KEY}  # the top-level copy we write for vLLM
NESTED_MODELED = (IDS_KEY, "use_aux_hidden_state", "use_input_layernorm_in_first_layer", "norm_before_fc",
                  "return_hidden_post_norm")
# NVIDIA's eagle_config fields as its HF exporter writes them for a plain EAGLE-3 module.
NVIDIA_DEFAULTS = {"use_last_layernorm": True, "use_mtp_layernorm": False, "next_layer_regular": True,
                   "parallel_draft_step": 1, "parallel_draft_heads_num_layers": 1}


def refuse_modelopt_module(eagle: dict[str, Any], archs: list[Any], final: bool = False) -> None:
    """ModelOpt configurations that are not a plain EAGLE-3 drafter any engine serves (`final`: a head fed the
    target's final state, converters/final_state.py)."""
    if not eagle:
        raise FormatError("config.json has no eagle_config: a ModelOpt export nests its EAGLE settings there",
                          "read it with the layout that wrote it (--from sglang or --from vllm)",
                          code="E-CONFIG-FIELD")
    if "LlamaForCausalLMEagle" in archs or (eagle.get("use_aux_hidden_state") is not True and not final):
        raise RefusalError("eagle_config.use_aux_hidden_state is not true: an EAGLE-1/2 module, not EAGLE-3",
                           "this tool converts EAGLE-3 drafters only", code="E-CONFIG-ALGORITHM")
    if eagle.get("use_mtp_layernorm"):
        raise RefusalError("eagle_config.use_mtp_layernorm is true: an MTP-style module with extra norms no "
                           "EAGLE-3 engine class builds", "serve it with TensorRT-LLM from the ModelOpt export",
                           code="E-FLAG-UNSUPPORTED")
    if (eagle.get("parallel_draft_step") or 1) > 1:
        raise RefusalError(f"eagle_config.parallel_draft_step is {eagle['parallel_draft_step']}: parallel draft "
                           "heads have no counterpart in other layouts", "serve it from the ModelOpt export",
                           code="E-FLAG-UNSUPPORTED")
    if eagle.get("use_last_layernorm") is False:
        raise RefusalError("eagle_config.use_last_layernorm is false: the drafter has no final norm and every "
                           "engine applies one", "retrain with use_last_layernorm, or serve it from the ModelOpt "
                           "export", code="E-FLAG-UNSUPPORTED")


class ModelOptLayout(Layout):
    name = "modelopt"
    summary = "NVIDIA ModelOpt HF export (eagle_config with NVIDIA fields); served by vLLM and TensorRT-LLM"
    engine = "modelopt"
    renames = RENAMES
    home_engines = ("vllm-v1", "vllm-v2", "trtllm")

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        m = flat_markers(ckpt)
        if m.modelopt_fields:
            fields = ", ".join(m.modelopt_fields)
            return Detection(self.name, True, f"eagle_config has NVIDIA ModelOpt fields ({fields})")
        if "LlamaForCausalLMEagle3Deep" in m.architectures:
            return Detection(self.name, True, "LlamaForCausalLMEagle3Deep (ModelOpt's Megatron multi-layer export)")
        if m.quantized and m.eagle3_architecture:  # vLLM and SGLang serve quantized drafters in their layouts too
            return Detection(self.name, False, "an Eagle3 config with a ModelOpt quantization config")
        return None

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = source_config(ckpt)
        notes = list(ckpt.notes)
        refuse_key_errors(self.name, raw, notes)
        markers = flat_markers(ckpt)
        eagle = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
        archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
        final = read_final_head(eagle, ckpt.tensors, raw.get("hidden_size"))
        refuse_modelopt_module(eagle, archs, final)
        notes += [note] if (note := exported_yarn(raw)) else []
        fields = flat_fields(raw, MODELED, ckpt.tensors, notes)
        first_layer_norm = eagle.get("use_input_layernorm_in_first_layer")
        if markers.midlayer:
            # Megatron: the first layer's own input_layernorm IS the hidden_norm (exported under that name).
            if first_layer_norm is False:
                raise RefusalError("a Megatron export with use_input_layernorm_in_first_layer false: its first "
                                   "layer has no hidden_norm, and every engine applies one",
                                   "serve it from the ModelOpt export", code="E-FLAG-UNSUPPORTED")
            notes.append("ModelOpt Megatron export (midlayer.*): its first-layer norm is the engines' hidden_norm")
        else:
            fields["input_layernorm_on_hidden"] = first_layer_norm is not False  # ModelOpt's default is true

        ids = None if final else int_list(eagle.get(IDS_KEY), f"eagle_config.{IDS_KEY}")
        boundaries = None
        if ids is not None:
            boundaries = engine_boundaries(self.engine, ids)
            if boundaries is None:
                raise FormatError(f"eagle_config ids {ids} capture nothing", "ModelOpt ids are block outputs >= 0",
                                  code="E-CAPTURE-FIELD")
        top = raw.get(IDS_KEY)
        if ids is None and top not in (None, []) and given_capture(options) is None and not final:
            raise FormatError(f"capture ids {top} are only at the top level, where a ModelOpt export has none; "
                              "vLLM reads them as boundaries, TensorRT-LLM and SGLang never read them",
                              "say how the training counted them: add `--capture-layers "
                              f"{','.join(map(str, top if isinstance(top, list) else []))} --convention modelopt` "
                              "(block outputs) or `--convention boundary`", code="E-CAPTURE-AMBIGUOUS")
        fields["capture_boundaries"] = check_top_level_copy(raw, boundaries, "ModelOpt", options)
        # Where TensorRT-LLM and vLLM read the Eagle 3.1 flags (vLLM also reads a top-level norm_before_fc).
        fields["norm_before_fc"] = bool(eagle.get("norm_before_fc", raw.get("norm_before_fc", False)))
        fields["fc_norm"] = bool(raw.get("fc_norm", False))
        fields["norm_output"] = bool(raw.get("norm_output", False) or eagle.get("return_hidden_post_norm", False))
        ckpt = drop_unused_layer_norms(ckpt, "hidden_norm", "input_layernorm", "vLLM", "sglang", notes)
        tensors = canonical_tensors(ckpt, RENAMES, fields["num_layers"], self.name)
        fields["draft_vocab_size"] = self._draft_vocab_size(raw, ckpt, tensors, fields["vocab_size"], markers.midlayer,
                                                            notes)
        fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields, None, ids)
        if final:
            final_fields(fields, notes)
        own: dict[str, Any] = {}
        unused = (IDS_KEY,) if final else ()  # a final-state head's ids, if listed, are carried, never read
        nested_extra = {k: v for k, v in eagle.items() if k not in NESTED_MODELED or k in unused}
        if nested_extra:
            own["eagle_config"] = nested_extra
        fields["layout_extra"] = {self.name: own} if own else {}
        return build_drafter(ckpt, fields, tensors, options, notes)

    @staticmethod
    def _draft_vocab_size(raw: dict[str, Any], ckpt: Checkpoint, tensors: dict[str, Any], vocab_size: int,
                          megatron: bool, notes: list[str]) -> int:
        """Vd, telling a draft head from the base model's [V, H] head the exporter copies in."""
        head = tensors.get("lm_head.weight")
        rows = head.shape[0] if head is not None and len(head.shape) == 2 else None
        d2t = ckpt.tensors.get("d2t")
        declared = raw.get("draft_vocab_size")
        vd = declared if declared is not None else (d2t.shape[0] if d2t is not None and d2t.shape else rows)
        vd = vd if vd is not None else vocab_size
        if rows == vocab_size and vd != vocab_size:
            raise FormatError(
                f"lm_head.weight is [{vocab_size}, H]: the base model's head, which ModelOpt copies in when the "
                f"draft has none, but the drafter's vocab is Vd = {vd}: its own [{vd}, H] head is missing",
                "re-export the drafter together with its trained draft head", code="E-MODELOPT-BASE-HEAD")
        if rows == vocab_size and d2t is None:
            notes.append("lm_head.weight covers the full vocab and there is no d2t: ModelOpt copies the base "
                         "model's head in when the draft trains none; engines use it as the draft head either way")
        if megatron and vd < vocab_size and d2t is None:
            raise FormatError("a ModelOpt Megatron export with Vd < V and no d2t: that exporter never writes d2t "
                              "(a typo in its code), so the draft->target map is lost",
                              "take d2t from the training run (ModelOpt's HF export writes it) and add it",
                              code="E-VOCAB-MISSING")
        return vd

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        refuse_unless(cfg.family in ARCHITECTURE, f"ModelOpt exports Llama and MLA (kimi_k2) EAGLE-3 modules, not "
                      f"{cfg.family} (q_norm/k_norm would be dropped)", "serve it with vLLM: `--to vllm`",
                      "E-FAMILY-UNSUPPORTED")
        refuse_unless(not cfg.norm_before_residual, "norm_before_residual is true: TensorRT-LLM has no such option "
                      "(its first layer keeps the raw fc output as residual), so a ModelOpt file cannot say it",
                      "serve it with vLLM (`--to vllm`)", "E-FLAG-UNSUPPORTED")
        refuse_unless(not (cfg.norm_before_fc and cfg.fc_norm), "norm_before_fc and fc_norm are both true: "
                      "TensorRT-LLM applies fc_norm and then skips input_norm (apply_eagle3_fc)",
                      "serve it with vLLM (`--to vllm`)", "E-FLAG-UNSUPPORTED")
        refuse_unless(cfg.resolved_target_hidden_size == cfg.hidden_size,
                      f"target_hidden_size {cfg.target_hidden_size} differs from hidden_size {cfg.hidden_size}; "
                      "ModelOpt sizes fc from the drafter's hidden size", "serve it with vLLM (`--to vllm`)",
                      "E-HIDDEN-UNSUPPORTED")
        refuse_uncaptured_states(cfg, self.name)
        own = dict(cfg.layout_extra.get(self.name, {}))
        eagle: dict[str, Any] = {**NVIDIA_DEFAULTS, **own.pop("eagle_config", {}), "use_aux_hidden_state": True,
                                 "use_input_layernorm_in_first_layer": cfg.input_layernorm_on_hidden}
        config: dict[str, Any] = {**decoder_dict(cfg), **cfg.top_extra, "architectures": [ARCHITECTURE[cfg.family]],
                                  **own, "draft_vocab_size": cfg.draft_vocab_size}
        write_capture_ids(config, eagle, cfg, options, self.engine, nested_required=True)
        write_flag(eagle, cfg)
        if cfg.norm_before_fc:
            eagle["norm_before_fc"] = True  # TensorRT-LLM reads it only here
        config.update({flag: True for flag in ("fc_norm", "norm_output") if getattr(cfg, flag)})
        config["eagle_config"] = dict(sorted(eagle.items()))
        derived = []
        if "rope_theta" not in config and "rope_theta" in cfg.rope_normalized():
            config["rope_theta"] = cfg.rope_normalized()["rope_theta"]  # ModelOpt's template writes both spellings
            derived.append("rope_theta")
        tensors = with_both_later_norms(dict(drafter.tensors), cfg.num_layers)  # else the canonical names
        if drafter.vocab is not None:
            tensors["d2t"] = drafter.vocab.d2t_tensor()  # no t2d: ModelOpt never writes one
        notes = shield_from_sglang(config, tensors, cfg, options.target)
        if "embed_tokens.weight" in drafter.tensors:
            notes.append("embed_tokens.weight kept: ModelOpt's exporter leaves it out, vLLM loads it if present")
        return WritePlan(self.name, dict(sorted(config.items())), tensors, notes, derived_keys=derived)


def exported_yarn(config: dict[str, Any]) -> str | None:
    """ModelOpt's exporter writes its `eagle_export_rope_scaling` (default YaRN, factor 32, 2048 original
    positions) into the config of a drafter trained WITHOUT rope scaling (rope_type default): the export then
    carries a scaling the training did not use. Said when converting or validating such an export."""
    rope = next((config[k] for k in ("rope_scaling", "rope_parameters") if is_yarn(config.get(k))), None)
    if rope is None:
        return None
    return (f"the config's rope scaling is YaRN (factor {rope.get('factor')}, original_max_position_embeddings "
            f"{rope.get('original_max_position_embeddings')}), which ModelOpt's exporter injects "
            "(eagle_export_rope_scaling) into drafters trained without rope scaling: unless the training set YaRN "
            "itself, it did not use it; the engines apply it as written")


LAYOUT = ModelOptLayout()
