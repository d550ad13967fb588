"""SGLang / SpecForge layout (`LlamaForCausalLMEagle3`, flat HF-style config). FORMATS.md §2.2.

SpecForge writes `midlayer.*`; SGLang also loads `layers.0.*` and `model.layers.0.*`.
Capture ids are block OUTPUTS (boundary - 1), nested in `eagle_config`; SGLang ignores a
top-level copy and silently captures its defaults instead.
"""

from __future__ import annotations

from typing import Any

from ..drafter import Drafter, DrafterConfig, TargetIdentity
from ..errors import FormatError
from .base import (TOP_KEYS, Checkpoint, ConvertOptions, Detection, Layout, Rename, WritePlan, canonical_tensors,
                   check_tensor_table, decoder_dict, decoder_fields, infer_num_aux, keep_model_type_spelling,
                   read_vocab, refuse_unless, restore_from_sidecar, source_config, split_decoder_extra,
                   to_stored)
from .layer_ids import engine_boundaries, ids_for_engine, target_family
from .vocab import identity_map

# Read in order; written with the first matching rule (SpecForge's spelling).
RENAMES: tuple[Rename, ...] = (
    Rename("layers.0.", "midlayer.", single_layer_only=True),
    Rename("layers.", "model.layers.", read_only=True),
    Rename("layers.", "layers."),
)
ARCHITECTURES = ("LlamaForCausalLMEagle3",)
# Flat-config keys this layout models on top of the decoder keys.
MODELED = {"architectures", "draft_vocab_size", "target_hidden_size", "eagle_config", "num_aux_hidden_states",
           "norm_before_fc", "fc_norm", "use_aux_norm", "norm_output", "bias",
           "eagle_aux_hidden_state_layer_ids"}


def capture_context(*targets: TargetIdentity | None) -> tuple[str, int | None]:
    """SGLang's id quirks depend on the target family; its depth bounds what can be captured."""
    target = next((t for t in targets if t is not None), None) or TargetIdentity()
    return target_family(target.model_type), target.num_hidden_layers


class SGLangLayout(Layout):
    name = "sglang"
    summary = "SGLang `LlamaForCausalLMEagle3`, as SpecForge exports it; served by `sglang.launch_server`"
    engine = "sglang"

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        cfg = ckpt.config
        archs = cfg.get("architectures") or []
        if not isinstance(archs, list) or not any(a in ARCHITECTURES for a in archs):
            return None
        if any(k.startswith("midlayer.") for k in ckpt.tensors):
            return Detection(self.name, True, "LlamaForCausalLMEagle3 config with midlayer.* tensors (SpecForge)")
        if isinstance(cfg.get("eagle_config"), dict) and "eagle_aux_hidden_state_layer_ids" not in cfg:
            return Detection(self.name, True, "LlamaForCausalLMEagle3 config with ids nested in eagle_config only")
        return Detection(self.name, False, "LlamaForCausalLMEagle3 flat config")

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = source_config(ckpt)
        notes = list(ckpt.notes)
        fields: dict[str, Any] = decoder_fields(raw, "config.json")
        extra = split_decoder_extra(raw, MODELED)
        keep_model_type_spelling(raw, fields, extra)
        fields["hf_extra"] = extra
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
        fields["norm_output"] = bool(raw.get("norm_output", False))
        if raw.get("bias"):
            fields["attention_bias"] = True
        if "norm_before_residual" in extra:
            notes.append("norm_before_residual in config.json is ignored by SGLang (read as false)")
            extra.pop("norm_before_residual")

        ids = eagle.get("eagle_aux_hidden_state_layer_ids")
        if ids is None and "eagle_aux_hidden_state_layer_ids" in raw:
            raise FormatError(
                "capture ids are only at the top level; SGLang ignores them there and captures its defaults, "
                "while vLLM would read the same list as boundaries", "move them into eagle_config."
                "eagle_aux_hidden_state_layer_ids if they are SGLang (block-output) ids, or convert with "
                "--from vllm if they are boundaries", code="E-CAPTURE-AMBIGUOUS")
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(x, int) for x in ids)):
            raise FormatError(f"eagle_config.eagle_aux_hidden_state_layer_ids is {ids!r}",
                              "it must be a list of integers", code="E-CAPTURE-FIELD")
        boundaries = None
        if ids is not None:
            family, depth = capture_context(options.target)
            boundaries = engine_boundaries(self.engine, ids, family, depth)
            if boundaries is None:
                raise FormatError(f"SGLang ids {ids} capture nothing on a {family} target",
                                  "fix eagle_config.eagle_aux_hidden_state_layer_ids", code="E-CAPTURE-FIELD")
        fields["capture_boundaries"] = boundaries
        tensors = canonical_tensors(ckpt, RENAMES, fields["num_layers"], self.name)
        declared = raw.get("num_aux_hidden_states")
        fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields,
                                                        declared if isinstance(declared, int) else None, ids)
        fields["top_extra"] = {k: raw[k] for k in TOP_KEYS if k in raw}
        own: dict[str, Any] = {}
        if raw.get("architectures") != list(ARCHITECTURES):
            own["architectures"] = raw.get("architectures")
        nested = {k: v for k, v in eagle.items() if k not in ("eagle_aux_hidden_state_layer_ids", "norm_before_fc")}
        if nested != {"use_aux_hidden_state": True}:
            own["eagle_config"] = nested
        fields["layout_extra"] = {self.name: own} if own else {}
        restore_from_sidecar(ckpt, fields)
        cfg = DrafterConfig(**fields)
        drafter = Drafter(cfg, tensors, read_vocab(ckpt, cfg.vocab_size, cfg.draft_vocab_size, options),
                          self.name, ckpt.path, notes)
        check_tensor_table(drafter)
        return drafter

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        refuse_unless(not cfg.norm_before_residual,
                      "norm_before_residual is true: the drafter was trained with hidden_norm(h) as the first "
                      "layer's residual, and SGLang has no such option (it would serve different maths)",
                      "serve this drafter with vLLM: `--to speculators` or `--to vllm`", "E-FLAG-UNSUPPORTED")
        refuse_unless(cfg.family == "llama",
                      f"SGLang's LlamaForCausalLMEagle3 has no {cfg.family} drafter (q_norm/k_norm or MLA "
                      "weights would be dropped silently)", "serve it with vLLM: `--to speculators` or `--to vllm`",
                      "E-FAMILY-UNSUPPORTED")
        refuse_unless(not (cfg.attention_bias or cfg.mlp_bias or any(n.endswith(".bias") for n in drafter.tensors)),
                      "the drafter has bias tensors; SGLang's Eagle3 loader drops biases silently",
                      "serve it with vLLM: `--to speculators` or `--to vllm`", "E-BIAS-UNSUPPORTED")
        refuse_unless(cfg.num_layers == 1,
                      f"the drafter has {cfg.num_layers} decoder layers; SGLang's LlamaForCausalLMEagle3 builds one",
                      "serve a multi-layer drafter with vLLM (`--to vllm`)", "E-LAYERS-UNSUPPORTED")
        own = dict(cfg.layout_extra.get(self.name, {}))
        eagle: dict[str, Any] = {"use_aux_hidden_state": True, **own.pop("eagle_config", {})}
        if cfg.capture_boundaries is not None:
            family, depth = capture_context(options.target, cfg.target)
            eagle["eagle_aux_hidden_state_layer_ids"] = ids_for_engine(self.engine, cfg.capture_boundaries,
                                                                       family, depth)
        config: dict[str, Any] = {**decoder_dict(cfg), **cfg.top_extra, "architectures": list(ARCHITECTURES), **own,
                                  "draft_vocab_size": cfg.draft_vocab_size, "eagle_config": eagle}
        derived = []
        if "rope_theta" not in config and "rope_theta" in cfg.rope_normalized():
            # SpecForge writes both spellings; SGLang reads the transformers-4 one.
            config["rope_theta"] = cfg.rope_normalized()["rope_theta"]
            derived.append("rope_theta")
        if cfg.target_hidden_size is not None:
            config["target_hidden_size"] = cfg.target_hidden_size  # SGLang checks presence only: never null
        if cfg.num_aux_hidden_states != 3:
            config["num_aux_hidden_states"] = cfg.num_aux_hidden_states
        for flag in ("norm_before_fc", "fc_norm", "norm_output"):
            if getattr(cfg, flag):
                config[flag] = True
        tensors = {to_stored(n, RENAMES, cfg.num_layers): src for n, src in drafter.tensors.items()}
        vocab = drafter.vocab or identity_map(cfg.vocab_size)  # SpecForge writes the identity map when Vd == V
        tensors["d2t"] = vocab.d2t_tensor()
        tensors["t2d"] = vocab.t2d_tensor()
        return WritePlan(self.name, dict(sorted(config.items())), tensors, derived_keys=derived)


LAYOUT = SGLangLayout()
