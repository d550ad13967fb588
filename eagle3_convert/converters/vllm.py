"""vLLM-native layout (flat HF-style config, `vllm serve --speculative-config`). docs/formats.md §2.3.

Keys are unprefixed `layers.{i}.*` (vLLM adds `model.` itself; `midlayer.*` is read as an alias
of a single layer). Capture ids are BOUNDARIES: the V2 runner reads only the top-level list,
the V1 runner falls back to the nested `eagle_config` copy, so both are written. `fc` is sized
from `num_aux_hidden_states` (or the nested list), written when k != 3; `norm_before_residual`
is always written, since an absent key means false here but true on vLLM's speculators path.
"""

from __future__ import annotations

from typing import Any

from ..drafter import NORM_FLAGS, Drafter
from ..errors import FormatError, RefusalError
from .config_keys import refuse_key_errors
from .layout import ARCHITECTURE_FAMILY, TRTLLM_ONLY_ARCHITECTURES, drafter_kind, miscased_architecture
from .base import (
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    Rename,
    WritePlan,
    build_drafter,
    canonical_tensors,
    decoder_dict,
    drop_unused_layer_norms,
    flat_fields,
    flat_markers,
    infer_num_aux,
    int_list,
    modelopt_first_layer_note,
    refuse_uncaptured_states,
    refuse_unless,
    source_config,
    with_both_later_norms,
    write_capture_ids,
)
from ..engines import shield_from_sglang
from ..engines import vllm as engine
from ..capture_ids import IDS_KEY, capture_context, engine_boundaries
from .final_state import final_fields, read_final_head, write_flag

RENAMES: tuple[Rename, ...] = (
    Rename("layers.0.", "midlayer.", read_only=True),  # vLLM's WeightsMapper maps midlayer. to layers.0.
)
# What this layout writes for each drafter family.
ARCHITECTURE = {"llama": "LlamaForCausalLMEagle3", "qwen3": "Eagle3Qwen3ForCausalLM",
                "deepseek_mla": "Eagle3DeepseekV2ForCausalLM"}
# vLLM's model registry, and its Eagle3XForCausalLM alias of a plain XForCausalLM: the engine module's facts.
CLASS_FAMILY = engine.CLASSES
served_family = engine.served_family
FLAGS = NORM_FLAGS
# P-EAGLE's mask token in a flat config: where vLLM's proposer reads it (engine.PARALLEL_DRAFTING_TOKEN_KEYS),
# and the speculators spelling a producer may carry over. SpecForge's flat PEagleDraftModel config writes none.
PEAGLE_MASK_KEYS = (*engine.PARALLEL_DRAFTING_TOKEN_KEYS, "mask_token_id")
MODELED = {"architectures", "draft_vocab_size", "target_hidden_size", "eagle_config", "num_aux_hidden_states",
           IDS_KEY, *FLAGS, *PEAGLE_MASK_KEYS}
# The plain base classes community drafts declare, which vLLM turns into Eagle3<name> (served_family).
PLAIN_BASES = frozenset({"LlamaForCausalLM", "Qwen3ForCausalLM"})
NESTED_MODELED = (IDS_KEY, "use_aux_hidden_state", "norm_before_fc")


class VLLMLayout(Layout):
    name = "vllm"
    summary = "vLLM-native Eagle3 config (flat, ids at top level and in eagle_config); served by `vllm serve`"
    engine = "vllm"
    renames = RENAMES
    home_engines = ("vllm-v1", "vllm-v2")

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        m = flat_markers(ckpt)
        if m.modelopt_fields or m.pickled or "speculators_model_type" in ckpt.config:
            return None
        miscased = miscased_architecture(list(m.architectures))
        if miscased is not None and not m.midlayer:
            return Detection(self.name, False, f"architecture {miscased[0]} ({miscased[1]} in another case) with "
                                               "layers.* tensors")
        if not m.eagle3_architecture:
            # A community draft that declares its plain base class (LlamaForCausalLM) with draft_vocab_size and
            # vLLM's layers.* names: vLLM builds Eagle3<arch> from it (engines/vllm.py served_family). With
            # midlayer.* names it is EAGLE's training template (the eagle layout).
            plain = [a for a in m.architectures if a in PLAIN_BASES]
            if plain and "draft_vocab_size" in ckpt.config and not m.midlayer and \
                    any(n.startswith("layers.0.") for n in ckpt.tensors):
                return Detection(self.name, False, f"{plain[0]} with draft_vocab_size and layers.* tensors (a "
                                                   f"community draft: vLLM builds Eagle3{plain[0]} from it)")
            return None
        if m.top_level_ids and not m.nested_ids:
            return Detection(self.name, True, "top-level eagle_aux_hidden_state_layer_ids only (vLLM reads its ids "
                                              "there; SGLang and ModelOpt nest them)")
        if m.norm_before_residual_key:
            return Detection(self.name, True, "top-level norm_before_residual (a vLLM key SGLang has not)")
        only_vllm = [a for a in m.architectures if a in CLASS_FAMILY and a not in
                     ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")]
        if only_vllm:
            return Detection(self.name, True, f"architecture {only_vllm[0]} exists only in vLLM")
        trtllm_name = next((a for a in m.architectures if a in TRTLLM_ONLY_ARCHITECTURES), None)
        if trtllm_name is not None:  # a flat config with a TensorRT-LLM class name: read as a flat vLLM config
            return Detection(self.name, False, f"architecture {trtllm_name} (TensorRT-LLM's name), flat config")
        return None

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = source_config(ckpt)
        notes = list(ckpt.notes)
        refuse_key_errors(self.name, raw, notes)
        fields = flat_fields(raw, MODELED, ckpt.tensors, notes)
        archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
        served = served_family(archs)
        # A name vLLM refuses but whose class is not in doubt: read as that class, never carried into an output.
        foreign_name = next((a for a in archs if a in TRTLLM_ONLY_ARCHITECTURES), None)
        miscased = miscased_architecture(archs)
        if served is None and miscased is not None:
            foreign_name, served = miscased[0], ARCHITECTURE_FAMILY[miscased[1]]
            notes.append(f"architectures {archs}: {miscased[0]} is {miscased[1]} in another case; engines match class "
                         "names exactly and refuse it: read as that class and written with the destination's own name")
        elif served is None and foreign_name is not None:
            served = ARCHITECTURE_FAMILY[foreign_name]
            notes.append(f"architectures {archs}: {foreign_name} is TensorRT-LLM's registered name, which vLLM and "
                         f"SGLang refuse; read as its {served} drafter and written with the destination's own name")
        if served is None:
            raise FormatError(f"architectures {archs} name no vLLM Eagle3 drafter class",
                              f"vLLM-native drafters use {', '.join(sorted(set(ARCHITECTURE.values())))}",
                              code="E-CONFIG-ARCH")
        if served != fields["family"]:
            raise FormatError(f"architectures {archs} make vLLM build its {served} Eagle3 class, but the config "
                              f"describes a {fields['family']} drafter", f"set architectures to "
                              f"[{ARCHITECTURE[fields['family']]!r}]", code="E-CONFIG-FAMILY")
        vd = raw.get("draft_vocab_size")
        fields["draft_vocab_size"] = fields["vocab_size"] if vd is None else vd  # vLLM: absent = full vocab
        eagle = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
        final = read_final_head(eagle, ckpt.tensors, fields["hidden_size"])
        fields["norm_before_residual"] = bool(raw.get("norm_before_residual", False))
        fields["norm_before_fc"] = bool(eagle.get("norm_before_fc", raw.get("norm_before_fc", False)))
        fields["fc_norm"] = bool(raw.get("fc_norm", False))
        fields["norm_output"] = bool(raw.get("norm_output", False))
        fields["kind"], named = drafter_kind(raw)
        if fields["kind"] == "peagle":
            mask = next((raw[k] for k in PEAGLE_MASK_KEYS if raw.get(k) is not None), None)
            if mask is None:
                notes.append(f"a P-EAGLE drafter ({named}) whose config names no mask token "
                             f"({', '.join(PEAGLE_MASK_KEYS)}): vLLM and the speculators layout need it")
            elif mask < 0:  # (the key table refuses a mask token that is no integer, a boolean included)
                raise FormatError(f"the P-EAGLE mask token is {mask!r}", "it must be a token id (an integer >= 0)",
                                  code="E-CONFIG-FIELD")
            fields["mask_token_id"] = mask
        ids, fields["capture_boundaries"] = (None, None) if final else self._capture(raw, eagle, fields, options,
                                                                                     notes)
        ckpt = drop_unused_layer_norms(ckpt, "hidden_norm", "input_layernorm", "vLLM", "sglang", notes)
        tensors = canonical_tensors(ckpt, RENAMES, fields["num_layers"], self.name)
        # (the key table refuses a num_aux_hidden_states that is no positive integer)
        fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields,
                                                        raw.get("num_aux_hidden_states"), ids)
        if final:
            final_fields(fields, notes)

        own: dict[str, Any] = {}
        if archs != [ARCHITECTURE[fields["family"]]] and foreign_name is None and fields["kind"] == "eagle3":
            own["architectures"] = archs  # another spelling of the same vLLM class
        unused = (IDS_KEY,) if final else ()  # a final-state head's ids, if listed, are carried, never read
        nested_extra = {k: v for k, v in eagle.items() if k not in NESTED_MODELED or k in unused}
        if nested_extra:
            own["eagle_config"] = nested_extra
        fields["layout_extra"] = {self.name: own} if own else {}
        return build_drafter(ckpt, fields, tensors, options, notes)

    def _capture(self, raw: dict[str, Any], eagle: dict[str, Any], fields: dict[str, Any], options: ConvertOptions,
                 notes: list[str]) -> tuple[list[int] | None, list[int] | None]:
        """The capture ids vLLM reads (the top-level list; nested ids alone are ambiguous) and their boundaries."""
        top = int_list(raw.get(IDS_KEY), IDS_KEY)
        nested = int_list(eagle.get(IDS_KEY), f"eagle_config.{IDS_KEY}")
        if top is None and nested is not None:
            raise FormatError(
                "capture ids are only in eagle_config: vLLM's V1 runner reads them as boundaries while its V2 "
                "runner ignores them and captures its defaults",
                "if they are block-output ids (SGLang, ModelOpt) convert with --from sglang or --from modelopt; "
                "if they are boundaries, copy them to the top-level eagle_aux_hidden_state_layer_ids",
                code="E-CAPTURE-AMBIGUOUS")
        if top is not None and nested is not None:
            family, depth = capture_context(fields["family"], options.target)
            sglang_reads = engine_boundaries("sglang", nested, family, depth)
            if sglang_reads is None or sorted(set(sglang_reads)) != sorted(set(top)):
                notes.append(f"eagle_config ids {nested} ignored: vLLM reads the top-level list {top}; SGLang would "
                             f"have read the nested list as boundaries {sglang_reads} (the output spells it right)")
        boundaries = None
        if top is not None:
            boundaries = engine_boundaries(self.engine, top)
            if boundaries is None:
                raise FormatError(f"eagle_aux_hidden_state_layer_ids {top} has a negative id",
                                  "vLLM ids are boundaries >= 0", code="E-CAPTURE-FIELD")
        return top or nested, boundaries

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        refuse_uncaptured_states(cfg, self.name)
        if cfg.family == "deepseek_mla":
            refuse_unless(not cfg.norm_before_fc,
                          "norm_before_fc is true and vLLM's Eagle3DeepseekV2ForCausalLM has no input_norm: the "
                          "weight would be dropped and the fused states served unnormalised",
                          "no engine's MLA drafter class applies norm_before_fc: keep the source layout",
                          "E-FLAG-UNSUPPORTED")
            refuse_unless(not (cfg.attention_bias or cfg.mlp_bias),
                          "the MLA drafter has bias tensors; vLLM's Eagle3DeepseekV2ForCausalLM builds none",
                          "this drafter cannot be served by vLLM's MLA class", "E-BIAS-UNSUPPORTED")
        own = dict(cfg.layout_extra.get(self.name, {}))
        eagle: dict[str, Any] = {"use_aux_hidden_state": True, **own.pop("eagle_config", {})}
        write_flag(eagle, cfg)
        config: dict[str, Any] = {
            **decoder_dict(cfg), **cfg.top_extra, "architectures": [ARCHITECTURE[cfg.family]], **own,
            "draft_vocab_size": cfg.draft_vocab_size,
            # All four written: vLLM's native and speculators paths disagree on an absent norm_before_residual.
            **{flag: getattr(cfg, flag) for flag in FLAGS},
        }
        write_capture_ids(config, eagle, cfg, options, "sglang", nested_required=False)
        if cfg.norm_before_fc:
            eagle["norm_before_fc"] = True  # vLLM reads it nested first; TensorRT-LLM only there (engines/trtllm.py)
        config["eagle_config"] = eagle
        if cfg.target_hidden_size is not None:
            config["target_hidden_size"] = cfg.target_hidden_size
        if cfg.num_aux_hidden_states != 3 and cfg.capture == "aux":
            config["num_aux_hidden_states"] = cfg.num_aux_hidden_states  # sizes fc when the list is absent
        tensors = with_both_later_norms(dict(drafter.tensors), cfg.num_layers)  # vLLM's names are the canonical
        if drafter.vocab is not None:
            tensors["d2t"] = drafter.vocab.d2t_tensor()
            tensors["t2d"] = drafter.vocab.t2d_tensor()  # vLLM skips it; speculators-style readers need it
        notes = shield_from_sglang(config, tensors, cfg, options.target)
        notes += modelopt_first_layer_note(cfg, self.name)
        return WritePlan(self.name, dict(sorted(config.items())), tensors, notes)


LAYOUT = VLLMLayout()
